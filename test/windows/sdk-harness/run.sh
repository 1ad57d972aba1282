#!/usr/bin/env bash
# Runs one ND SDK program (built by test/windows/sdk-harness/build.sh) as a server and a client, two Wine
# processes on 127.0.0.1, against netdirect_soft.dll (ndadapterinfo, ndcat, ndcq, ndmrlat and ndmrrate are one
# process, given 127.0.0.1; ndmpic's two sides take 127.0.0.2 and 127.0.0.1). The server outlives the client (docs/testing.md: a server
# killed first resets the client's connection), and is ended after the client (it may wait for another client).
#
#   test/windows/sdk-harness/run.sh <bin dir> <program> [options for both sides...] [-- client-only options]
#   e.g. run.sh ../nd-bin ndmemorytest -t NdWriteViolation
#
# Environment: NETDIRECT_SDK_DLL (default build-win/Release/netdirect_soft.dll), WINEPREFIX (default
# ~/.cache/netdirect-wine/prefix, as scripts/wine-test.sh makes it), SDK_PORT (default 54321),
# SDK_TIMEOUT (client's seconds, default 120), SDK_SERVER_ONLY_ARGS (options for the server only).
# Prints both sides' output; the exit code is the client's (124 when it timed out), or the server's when the
# client passed and the server failed.
set -uo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)
BIN=$(cd "${1:?bin dir}" && pwd)
PROG=${2:?program}
shift 2
common=() client_only=()
while (($#)); do
  if [[ $1 == -- ]]; then shift; client_only=("$@"); break; fi
  common+=("$1"); shift
done
export WINEPREFIX=${WINEPREFIX:-${XDG_CACHE_HOME:-$HOME/.cache}/netdirect-wine/prefix} WINEARCH=win64
export WINEDEBUG=${WINEDEBUG:--all} WINEDLLOVERRIDES="mscoree,mshtml="
unset DISPLAY
DLL=${NETDIRECT_SDK_DLL:-$ROOT/build-win/Release/netdirect_soft.dll}
export NETDIRECT_SDK_PROVIDER=$(winepath -w "$DLL" 2>/dev/null)
export WINEDLLPATH=
PORT=${SDK_PORT:-54321}
T=${SDK_TIMEOUT:-120}
LOG=$(mktemp -d)
case $PROG in
  ndadapterinfo | ndcat | ndcq | ndmrlat | ndmrrate)
    timeout --kill-after=5 "$T" wine "$BIN/$PROG.exe" "${common[@]}" 127.0.0.1 >"$LOG/out" 2>&1
    rc=$?
    echo "=== $PROG ${common[*]} (exit $rc)"; cat "$LOG/out"
    rm -rf "$LOG"
    exit "$rc" ;;
  # ndmpic: ranks 0 and 2 in the client, 1 and 3 in the server, each side at its own address; every rank listens
  # on 54322 + rank and connects from 54322 + 2 * rank + peer, so the two sides need two loopback addresses (the
  # software provider serves all of 127.0.0.0/8).
  ndmpic) SADDR=(127.0.0.2 127.0.0.1) CADDR=(127.0.0.1 127.0.0.2) ;;
  *) SADDR=("127.0.0.1:$PORT") CADDR=("127.0.0.1:$PORT") ;;
esac
read -r -a server_only <<<"${SDK_SERVER_ONLY_ARGS:-}"
timeout --kill-after=5 $((T + 30)) wine "$BIN/$PROG.exe" -s "${common[@]}" "${server_only[@]}" "${SADDR[@]}" \
  >"$LOG/server.out" 2>&1 &
spid=$!
sleep "${SDK_SERVER_DELAY:-2}"
timeout --kill-after=5 "$T" wine "$BIN/$PROG.exe" -c "${common[@]}" "${client_only[@]}" "${CADDR[@]}" \
  >"$LOG/client.out" 2>&1
crc=$?
# Give the server a moment to finish on its own, then end it.
for _ in $(seq 1 "${SDK_SERVER_GRACE:-10}"); do kill -0 "$spid" 2>/dev/null || break; sleep 1; done
if kill -0 "$spid" 2>/dev/null; then kill "$spid" 2>/dev/null; wait "$spid" 2>/dev/null; src=143; else wait "$spid"; src=$?; fi
echo "=== server ($PROG -s ${common[*]} ${server_only[*]}; exit $src)"; cat "$LOG/server.out"
echo "=== client ($PROG -c ${common[*]} ${client_only[*]}; exit $crc)"; cat "$LOG/client.out"
rm -rf "$LOG"
((crc != 0)) && exit "$crc"
((src != 0 && src != 143)) && exit "$src"
exit 0

#!/usr/bin/env bash
# The siw interop tier (issue #5): netdirect's iWARP wire against Linux soft-iWARP (siw) in a qemu guest.
# Installs what the tier needs (qemu-system-x86, tcpdump, tshark, g++, libibverbs-dev + librdmacm-dev for
# test/interop/verbs_peer.c, the siw-vm guest build), then runs `vitest --config test/interop/vitest.interop.config.mts`
# with NETDIRECT_INTEROP=1 (missing pieces are errors, not skips). Run as root from the clone, after `npm ci`.
# The guest tooling is the repo's own test/interop/siw-vm/ (README.md there).
# Usage: bash .ci/interop.sh
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
start=$SECONDS
step() { printf '\n=== interop: %s (%ds)\n' "$*" "$((SECONDS - start))"; }

TOOLS=$(pwd)/test/interop/siw-vm
[ -x "$TOOLS/start" ] || { echo "interop: $TOOLS/start missing or not executable" >&2; exit 1; }
[ "$(id -u)" -eq 0 ] || { echo "interop: must run as root (qemu guest build, tcpdump)" >&2; exit 1; }

# --- 1. Host packages: only what is missing. tshark's debconf question is answered non-interactively.
step "host packages"
missing=()
command -v qemu-system-x86_64 >/dev/null 2>&1 || missing+=(qemu-system-x86)
command -v tcpdump >/dev/null 2>&1 || missing+=(tcpdump)
command -v tshark >/dev/null 2>&1 || missing+=(tshark)
command -v g++ >/dev/null 2>&1 || missing+=(g++)
# verbs.interop.test.ts builds test/interop/verbs_peer.c (librdmacm + libibverbs, rdma-core 44 like the guest).
command -v cc >/dev/null 2>&1 || missing+=(gcc)
[ -f /usr/include/infiniband/verbs.h ] || missing+=(libibverbs-dev)
[ -f /usr/include/rdma/rdma_cma.h ] || missing+=(librdmacm-dev)
if [ ${#missing[@]} -gt 0 ]; then
  echo "installing: ${missing[*]}"
  apt-get update -q
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${missing[@]}"
else
  echo "qemu-system-x86_64, tcpdump, tshark, g++, cc, libibverbs-dev, librdmacm-dev already present"
fi
echo "qemu:   $(qemu-system-x86_64 --version | head -n1)"
echo "tshark: $(tshark --version 2>/dev/null | head -n1)"
echo "verbs:  $(dpkg-query -W -f='libibverbs-dev ${Version}, ' libibverbs-dev 2>/dev/null)$(dpkg-query -W -f='librdmacm-dev ${Version}' librdmacm-dev 2>/dev/null)"

# --- 2. The guest (kernel + siw.ko + rdma-core initramfs); returns at once when ~/.cache/siw-vm has it.
step "siw-vm build"
timeout 1500 "$TOOLS/build"

# --- 3. The tier. Its global setup boots the guest once (or reuses a running one) and stops what it booted.
step "vitest (interop tier)"
if [ ! -x node_modules/.bin/vitest ]; then
  echo "interop: node_modules/.bin/vitest missing: run npm ci first" >&2
  exit 1
fi
mkdir -p build
NETDIRECT_INTEROP=1 timeout 2400 node_modules/.bin/vitest run --config test/interop/vitest.interop.config.mts \
  --reporter=default --reporter=json --outputFile.json=build/vitest-interop-report.json

step "done"

#!/bin/sh
# Copies this checkout's dist/ and build/Release/netdirect.node to $1 (a tree ndperf.js/ab.js can run with
# NDPERF_ROOT), so that benchmarks are not disturbed by concurrent rebuilds of the checkout.
set -e
root=$(cd "$(dirname "$0")/../.." && pwd)
dst=$1
rm -rf "$dst" && mkdir -p "$dst/build/Release"
cp -r "$root/dist" "$root/package.json" "$dst/"
cp "$root/build/Release/netdirect.node" "$dst/build/Release/"
ln -s "$root/node_modules" "$dst/node_modules"

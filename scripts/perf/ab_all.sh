#!/bin/sh
cd "$(dirname "$0")/../.."
# A/B suite: scripts/perf/snapshot.sh the two trees first (e.g. /tmp/base before a change, /tmp/final after).
A=${A:-/tmp/base}; B=${B:-/tmp/final}; R=${R:-5}
echo "## wlat manual";  node scripts/perf/ab.js $A $B $R median_us -- wlat --mode manual --iters 5000 --warm 500
echo "## wlat thread";  node scripts/perf/ab.js $A $B $R median_us -- wlat --mode thread --iters 3000 --warm 300
echo "## lastbyte";     node scripts/perf/ab.js $A $B $R half_rtt_median_us -- lastbyte --iters 5000 --warm 500
echo "## lastbyte thread"; node scripts/perf/ab.js $A $B $R half_rtt_median_us -- lastbyte --mode thread --iters 3000 --warm 300
echo "## bw 4096 thread"; node scripts/perf/ab.js $A $B $R MBps -- bw --mode thread --size 4096 --window 128 --secs 2
echo "## rate";         node scripts/perf/ab.js $A $B $R msgPerSec -- rate --window 128 --secs 2
for s in 65536 1048576; do for c in 0 1; do
echo "## bw $s crc=$c"; NETDIRECT_SOFT_CRC=$c node scripts/perf/ab.js $A $B $R MBps -- bw --size $s --window 64 --secs 2
done; done

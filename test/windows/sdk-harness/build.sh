#!/usr/bin/env bash
# Cross-builds the ND SDK's examples and unit tests (a microsoft/NetworkDirect checkout, which stays outside this
# repository) with mingw-w64 against test/windows/sdk-harness/ndutil_standin.cc instead of ndutil.
#
#   test/windows/sdk-harness/build.sh <NetworkDirect checkout> <output dir> [program...]
#
# Programs: ndadapterinfo ndcat ndmrlat ndmrrate ndping ndpingpong ndrping ndrpingpong ndconn ndcq ndmemorytest
# ndmpic ndmval ndmw (default: all). -O0: ndrpingpong's spin loops on placed memory are not volatile, and g++ -O2
# hoists the load out of the loop. docs/testing.md tells how to run them.
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
SDK=$(cd "${1:?NetworkDirect checkout}" && pwd)/src
OUT=$(mkdir -p "${2:?output dir}" && cd "$2" && pwd)
shift 2
progs=("$@")
((${#progs[@]})) || progs=(ndadapterinfo ndcat ndmrlat ndmrrate ndping ndpingpong ndrping ndrpingpong ndconn ndcq \
  ndmemorytest ndmpic ndmval ndmw)
CXX=${CXX:-x86_64-w64-mingw32-g++-posix}
GEN=$OUT/gen
mkdir -p "$GEN" "$OUT/obj"
# ndstatus.h from the SDK's message file (windmc rejects its empty message texts): one #define per SymbolicName,
# severity in the top two bits, facility System (0).
[[ -f $GEN/ndstatus.h ]] || awk '
  function hex(s,  v, i, c) { v = 0; s = tolower(substr(s, 3)); for (i = 1; i <= length(s); i++) { c = index("0123456789abcdef", substr(s, i, 1)) - 1; v = v * 16 + c }; return v }
  BEGIN { print "#pragma once"; sev["Success"]=0; sev["Informational"]=1; sev["Warning"]=2; sev["Error"]=3 }
  /^MessageId=/ {
    id=""; sv=""; name=""
    for (i = 1; i <= NF; i++) { split($i, kv, "="); if (kv[1]=="MessageId") id=kv[2]; if (kv[1]=="Severity") sv=kv[2];
      if (kv[1]=="SymbolicName") name=kv[2] }
    printf "#define %s ((HRESULT)0x%08XL)\n", name, sev[sv] * 1073741824 + hex(id)
  }' "$SDK/ndutil/ndstatus.mc" >"$GEN/ndstatus.h"
FLAGS=(-std=c++17 -O0 -g0 -municode -DUNICODE -D_UNICODE -w -fpermissive -include "$HERE/sal_compat.h" -I"$GEN" -I"$SDK/ndutil"
  -I"$SDK/examples" -I"$SDK/examples/ndtestutil")
cxx() { "$CXX" "${FLAGS[@]}" "$@"; }
obj() {  # obj <source> -> object path (rebuilt when the source is newer)
  local o=$OUT/obj/$(basename "${1%.*}").o
  [[ -f $o && $o -nt $1 ]] || cxx -c "$1" -o "$o"
  echo "$o"
}
STANDIN=$(obj "$HERE/ndutil_standin.cc")
TESTUTIL=$(obj "$SDK/examples/ndtestutil/ndtestutil.cpp")
LIBS=(-static -lws2_32 -liphlpapi -lole32 -luuid)
for p in "${progs[@]}"; do
  case $p in
    ndmemorytest) srcs=("$SDK"/unittests/ndmemorytest/*.cpp) ;;
    ndconn | ndcq | ndmpic | ndmval | ndmw) srcs=("$SDK/unittests/$p/$p.cpp") ;;
    *) srcs=("$SDK/examples/$p/$p.cpp") ;;
  esac
  objs=()
  for s in "${srcs[@]}"; do objs+=("$(obj "$s")"); done
  echo "build $p"
  cxx "${objs[@]}" "$TESTUTIL" "$STANDIN" -o "$OUT/$p.exe" "${LIBS[@]}"
done

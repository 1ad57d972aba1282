// ndbench's native loops, as the addon sees them: the one header of binding/bench/ that binding/addon/ may include
// (test/seams.test.ts). The addon's Init calls both; each adds its functions to the module's exports.
#ifndef NETDIRECT_BENCH_BENCH_H_
#define NETDIRECT_BENCH_BENCH_H_

#include <napi.h>

namespace netdirect {

// bench_tcp.cc, the native TCP baseline of ndbench (--compare tcp): tcpBenchListen, tcpBenchRun, tcpBenchClose.
void InitBenchTcp(Napi::Env env, Napi::Object exports);

// bench_nd.cc, the native ND loop of ndbench (--compare native): ndBenchRun.
void InitBenchNd(Napi::Env env, Napi::Object exports);

}  // namespace netdirect

#endif  // NETDIRECT_BENCH_BENCH_H_

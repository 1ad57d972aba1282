// CRC32c throughput of each implementation level (table, sse4.2 three chains, pclmul 128-bit folding, avx512
// 512-bit folding) at a few sizes: `./build/tests/crc32c_bench [offset]`, offset = start misalignment in bytes
// (default 0, 64-byte aligned). Each cell is the median of 5 runs of ~10 ms; the state chains from call to
// call, as for the FPDUs of a stream. Not part of the test run (the name does not end in _test).
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

#include "soft/wire/crc32c.h"

namespace {

using netdirect::soft::Crc32cIsa;
using Clock = std::chrono::steady_clock;

uint32_t g_sink = 0;

double seconds(Crc32cIsa level, const uint8_t* p, size_t n, size_t iters) {
  uint32_t s = netdirect::soft::kCrc32cInit;
  const auto t0 = Clock::now();
  for (size_t i = 0; i < iters; ++i) s = netdirect::soft::crc32c_update_isa(level, s, p, n);
  const auto t1 = Clock::now();
  g_sink ^= s;
  return std::chrono::duration<double>(t1 - t0).count();
}

// Median GB/s (1e9 bytes/s) of 5 runs of about 10 ms each.
double gbps(Crc32cIsa level, const uint8_t* p, size_t n) {
  size_t iters = 1;
  while (seconds(level, p, n, iters) < 0.002) iters *= 2;
  iters = std::max<size_t>(1, static_cast<size_t>(iters * (0.010 / seconds(level, p, n, iters))));
  double rates[5];
  for (double& r : rates) r = static_cast<double>(n) * static_cast<double>(iters) / seconds(level, p, n, iters) / 1e9;
  std::sort(rates, rates + 5);
  return rates[2];
}

}  // namespace

int main(int argc, char** argv) {
  const size_t offset = argc > 1 ? std::strtoul(argv[1], nullptr, 10) % 64 : 0;
  const size_t kSizes[] = {16, 64, 256, 1024, 4096, 65536, size_t{1} << 20};
  const Crc32cIsa kLevels[] = {Crc32cIsa::kTable, Crc32cIsa::kSse42, Crc32cIsa::kPclmul, Crc32cIsa::kAvx512};

  std::vector<uint8_t> buf((size_t{1} << 20) + 128);
  std::mt19937 rng(1);
  for (auto& b : buf) b = static_cast<uint8_t>(rng());
  const uint8_t* p = buf.data() + ((64 - reinterpret_cast<uintptr_t>(buf.data()) % 64) % 64) + offset;

  const Crc32cIsa available = netdirect::soft::crc32c_isa_available();
  std::printf("crc32c GB/s, start offset %zu mod 64 (best level here: %s)\n", offset,
              netdirect::soft::crc32c_isa_name(available));
  std::printf("%9s", "bytes");
  for (Crc32cIsa level : kLevels) std::printf("%18s", netdirect::soft::crc32c_isa_name(level));
  std::printf("\n");
  for (size_t n : kSizes) {
    std::printf("%9zu", n);
    for (Crc32cIsa level : kLevels) {
      if (level > available) {
        std::printf("%18s", "-");
      } else {
        std::printf("%18.2f", gbps(level, p, n));
      }
      std::fflush(stdout);
    }
    std::printf("\n");
  }
  return g_sink == 0x12345678u ? 2 : 0;  // keeps the results observable
}

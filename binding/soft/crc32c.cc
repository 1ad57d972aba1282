#include "soft/crc32c.h"

#include <array>
#include <atomic>
#include <cstring>

// NETDIRECT_CRC32C_NO_HW builds the portable path only (also used to test it on x86).
#if (defined(__x86_64__) || defined(_M_X64) || defined(__i386__) || defined(_M_IX86)) && \
    !defined(NETDIRECT_CRC32C_NO_HW)
#define NETDIRECT_CRC32C_X86 1
#if defined(_MSC_VER) && !defined(__clang__)
#include <intrin.h>
#include <nmmintrin.h>
#define NETDIRECT_SSE42_TARGET
#else
#include <cpuid.h>
#include <nmmintrin.h>
#define NETDIRECT_SSE42_TARGET __attribute__((target("sse4.2")))
#endif
#endif

namespace netdirect::soft {
namespace {

using Tables = std::array<std::array<uint32_t, 256>, 8>;

// Slicing-by-8 tables built at compile time: no static initializer runs at load.
constexpr Tables make_tables() {
  Tables t{};
  for (uint32_t i = 0; i < 256; ++i) {
    uint32_t c = i;
    for (int k = 0; k < 8; ++k) c = (c & 1) ? (c >> 1) ^ kCrc32cPolyReflected : c >> 1;
    t[0][i] = c;
  }
  for (uint32_t i = 0; i < 256; ++i) {
    for (size_t s = 1; s < 8; ++s) t[s][i] = (t[s - 1][i] >> 8) ^ t[0][t[s - 1][i] & 0xFF];
  }
  return t;
}
constexpr Tables kTables = make_tables();
static_assert(kTables[0][1] == 0xF26B8303u, "CRC32c table generation");

inline uint32_t load_le32(const uint8_t* p) {
  return static_cast<uint32_t>(p[0]) | (static_cast<uint32_t>(p[1]) << 8) |
         (static_cast<uint32_t>(p[2]) << 16) | (static_cast<uint32_t>(p[3]) << 24);
}

// Cached CPU probe: 0 unknown, 1 present, 2 absent. Constant-initialized.
std::atomic<int> g_hw_state{0};
std::atomic<bool> g_force_table{false};

#if defined(NETDIRECT_CRC32C_X86)
bool probe_sse42() {
#if defined(_MSC_VER) && !defined(__clang__)
  int regs[4] = {0, 0, 0, 0};
  __cpuid(regs, 1);
  return (regs[2] & (1 << 20)) != 0;
#else
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (!__get_cpuid(1, &a, &b, &c, &d)) return false;
  return (c & bit_SSE4_2) != 0;
#endif
}

#if defined(__x86_64__) || defined(_M_X64)
// ---- Three interleaved chains ---------------------------------------------------------------------------
// crc32 has a latency of 3 cycles but a throughput of 1 per cycle, so one dependent chain runs at a third of
// the instruction's speed. A run of three equal blocks A|B|C of L bytes is done as three independent chains
// and merged: update(s, A|B|C) = shift(update(s, A), 2L) ^ shift(update(0, B), L) ^ update(0, C), where
// shift(v, n) = v * x^(8n) mod P (reflected domain) is linear in v — a lookup table of 8 nibbles x 16
// entries per constant turns it into 8 loads and XORs.
struct ShiftTable {
  uint32_t t[8][16];
};

// a * b mod P, reflected representation (bit 31 is the coefficient of x^0).
uint32_t gf2_mul(uint32_t a, uint32_t b) {
  uint32_t r = 0;
  for (uint32_t m = 0x80000000u; m != 0; m >>= 1) {
    if (b & m) r ^= a;
    a = (a & 1u) ? (a >> 1) ^ kCrc32cPolyReflected : a >> 1;  // a *= x
  }
  return r;
}

// x^(8n) mod P: the register after n zero bytes starting from x^0.
NETDIRECT_SSE42_TARGET uint32_t x_pow_8n(size_t n) {
  uint64_t k = 0x80000000u;
  for (size_t i = 0; i < n / 8; ++i) k = _mm_crc32_u64(k, 0);
  return static_cast<uint32_t>(k);
}

void make_shift_table(size_t n, ShiftTable* out) {
  const uint32_t k = x_pow_8n(n);
  for (int j = 0; j < 8; ++j) {
    for (uint32_t v = 0; v < 16; ++v) out->t[j][v] = gf2_mul(v << (4 * j), k);
  }
}

inline uint32_t shift_by(const ShiftTable& t, uint32_t v) {
  uint32_t r = 0;
  for (int j = 0; j < 8; ++j) r ^= t.t[j][(v >> (4 * j)) & 15u];
  return r;
}

constexpr size_t kChainBlocks[3] = {8192, 2048, 512};  // L, largest first (multiples of 8)
struct ChainTables {
  ShiftTable by_l[3];
  ShiftTable by_2l[3];
};

const ChainTables& chain_tables() {
  static const ChainTables tables = [] {
    ChainTables t;
    for (int i = 0; i < 3; ++i) {
      make_shift_table(kChainBlocks[i], &t.by_l[i]);
      make_shift_table(2 * kChainBlocks[i], &t.by_2l[i]);
    }
    return t;
  }();
  return tables;
}

// Consumes runs of 3 * L bytes from p (8-byte aligned) while at least that many are left.
NETDIRECT_SSE42_TARGET uint32_t hw_three_chains(uint32_t state, const uint8_t*& p, size_t& n) {
  const ChainTables& tables = chain_tables();
  for (int i = 0; i < 3; ++i) {
    const size_t l = kChainBlocks[i];
    while (n >= 3 * l) {
      uint64_t a = state, b = 0, c = 0;
      const uint8_t* pa = p;
      const uint8_t* pb = p + l;
      const uint8_t* pc = p + 2 * l;
      for (size_t k = 0; k < l; k += 8) {
        uint64_t wa, wb, wc;
        std::memcpy(&wa, pa + k, 8);
        std::memcpy(&wb, pb + k, 8);
        std::memcpy(&wc, pc + k, 8);
        a = _mm_crc32_u64(a, wa);
        b = _mm_crc32_u64(b, wb);
        c = _mm_crc32_u64(c, wc);
      }
      state = shift_by(tables.by_2l[i], static_cast<uint32_t>(a)) ^ shift_by(tables.by_l[i], static_cast<uint32_t>(b)) ^
              static_cast<uint32_t>(c);
      p += 3 * l;
      n -= 3 * l;
    }
  }
  return state;
}
#endif

NETDIRECT_SSE42_TARGET uint32_t hw_update(uint32_t state, const uint8_t* p, size_t n) {
  // Align to 8 bytes so the wide loads do not straddle cache lines.
  while (n > 0 && (reinterpret_cast<uintptr_t>(p) & 7) != 0) {
    state = _mm_crc32_u8(state, *p++);
    --n;
  }
#if defined(__x86_64__) || defined(_M_X64)
  if (n >= 3 * kChainBlocks[2]) state = hw_three_chains(state, p, n);
  uint64_t s64 = state;
  while (n >= 32) {
    uint64_t w0, w1, w2, w3;
    std::memcpy(&w0, p, 8);
    std::memcpy(&w1, p + 8, 8);
    std::memcpy(&w2, p + 16, 8);
    std::memcpy(&w3, p + 24, 8);
    s64 = _mm_crc32_u64(s64, w0);
    s64 = _mm_crc32_u64(s64, w1);
    s64 = _mm_crc32_u64(s64, w2);
    s64 = _mm_crc32_u64(s64, w3);
    p += 32;
    n -= 32;
  }
  while (n >= 8) {
    uint64_t w;
    std::memcpy(&w, p, 8);
    s64 = _mm_crc32_u64(s64, w);
    p += 8;
    n -= 8;
  }
  state = static_cast<uint32_t>(s64);
#endif
  while (n >= 4) {
    uint32_t w;
    std::memcpy(&w, p, 4);
    state = _mm_crc32_u32(state, w);
    p += 4;
    n -= 4;
  }
  while (n > 0) {
    state = _mm_crc32_u8(state, *p++);
    --n;
  }
  return state;
}
#endif

}  // namespace

uint32_t crc32c_update_table(uint32_t state, const void* data, size_t len) {
  const uint8_t* p = static_cast<const uint8_t*>(data);
  while (len > 0 && (reinterpret_cast<uintptr_t>(p) & 7) != 0) {
    state = (state >> 8) ^ kTables[0][(state ^ *p++) & 0xFF];
    --len;
  }
  while (len >= 8) {
    uint32_t lo = load_le32(p) ^ state;
    uint32_t hi = load_le32(p + 4);
    state = kTables[7][lo & 0xFF] ^ kTables[6][(lo >> 8) & 0xFF] ^ kTables[5][(lo >> 16) & 0xFF] ^
            kTables[4][lo >> 24] ^ kTables[3][hi & 0xFF] ^ kTables[2][(hi >> 8) & 0xFF] ^
            kTables[1][(hi >> 16) & 0xFF] ^ kTables[0][hi >> 24];
    p += 8;
    len -= 8;
  }
  while (len > 0) {
    state = (state >> 8) ^ kTables[0][(state ^ *p++) & 0xFF];
    --len;
  }
  return state;
}

bool crc32c_hardware_available() {
#if defined(NETDIRECT_CRC32C_X86)
  int s = g_hw_state.load(std::memory_order_relaxed);
  if (s == 0) {
    s = probe_sse42() ? 1 : 2;
    g_hw_state.store(s, std::memory_order_relaxed);
  }
  return s == 1;
#else
  return false;
#endif
}

uint32_t crc32c_update_hw(uint32_t state, const void* data, size_t len) {
#if defined(NETDIRECT_CRC32C_X86)
  return hw_update(state, static_cast<const uint8_t*>(data), len);
#else
  return crc32c_update_table(state, data, len);
#endif
}

bool crc32c_hardware() {
  return !g_force_table.load(std::memory_order_relaxed) && crc32c_hardware_available();
}

void crc32c_force_table(bool force) { g_force_table.store(force, std::memory_order_relaxed); }

uint32_t crc32c_update(uint32_t state, const void* data, size_t len) {
#if defined(NETDIRECT_CRC32C_X86)
  if (crc32c_hardware()) return hw_update(state, static_cast<const uint8_t*>(data), len);
#endif
  return crc32c_update_table(state, data, len);
}

uint32_t crc32c(const void* data, size_t len) {
  return crc32c_final(crc32c_update(kCrc32cInit, data, len));
}

}  // namespace netdirect::soft

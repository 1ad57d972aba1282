#include "soft/wire/crc32c.h"

#include <array>
#include <atomic>
#include <cstring>

// NETDIRECT_CRC32C_NO_HW builds the portable path only (also used to test it on x86).
#if (defined(__x86_64__) || defined(_M_X64) || defined(__i386__) || defined(_M_IX86)) && \
    !defined(NETDIRECT_CRC32C_NO_HW)
#define NETDIRECT_CRC32C_X86 1
#if defined(__x86_64__) || defined(_M_X64)
#define NETDIRECT_CRC32C_X64 1  // three chains and the folding paths: 64-bit only
#endif
#if defined(_MSC_VER) && !defined(__clang__)
#include <immintrin.h>
#include <intrin.h>
#define NETDIRECT_SSE42_TARGET
#define NETDIRECT_PCLMUL_TARGET
#define NETDIRECT_AVX512_TARGET
#define NETDIRECT_XSAVE_TARGET
#define NETDIRECT_FORCE_INLINE __forceinline
#else
#include <cpuid.h>
#include <immintrin.h>
#define NETDIRECT_SSE42_TARGET __attribute__((target("sse4.2")))
#define NETDIRECT_PCLMUL_TARGET __attribute__((target("sse4.2,pclmul")))
#define NETDIRECT_AVX512_TARGET __attribute__((target("sse4.2,pclmul,avx512f,avx512vl,vpclmulqdq")))
#define NETDIRECT_XSAVE_TARGET __attribute__((target("xsave")))
// The vector helpers are always inlined, so no __m128i/__m512i is passed through memory: mingw-w64 GCC does not
// align the Win64 stack for ymm/zmm (GCC bug 54412).
#define NETDIRECT_FORCE_INLINE inline __attribute__((always_inline))
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

std::atomic<int> g_isa_available{-1};  // cached probe: a Crc32cIsa, -1 until probed. Constant-initialized.
std::atomic<bool> g_force_table{false};
std::atomic<int> g_max_isa{static_cast<int>(Crc32cIsa::kAvx512)};

#if defined(NETDIRECT_CRC32C_X86)
// cpuid(leaf, subleaf) into r = {eax, ebx, ecx, edx}; false when the CPU does not have that leaf.
bool cpuid(unsigned leaf, unsigned subleaf, unsigned r[4]) {
#if defined(_MSC_VER) && !defined(__clang__)
  int regs[4] = {0, 0, 0, 0};
  __cpuid(regs, static_cast<int>(leaf & 0x80000000u));
  if (static_cast<unsigned>(regs[0]) < leaf) return false;
  __cpuidex(regs, static_cast<int>(leaf), static_cast<int>(subleaf));
  for (int i = 0; i < 4; ++i) r[i] = static_cast<unsigned>(regs[i]);
  return true;
#else
  return __get_cpuid_count(leaf, subleaf, &r[0], &r[1], &r[2], &r[3]) != 0;
#endif
}

#if defined(NETDIRECT_CRC32C_X64)
// XCR0: the register state the OS saves on a context switch. Only valid when CPUID.1:ECX.OSXSAVE is set.
NETDIRECT_XSAVE_TARGET uint64_t read_xcr0() { return _xgetbv(0); }
#endif

Crc32cIsa probe_isa() {
  unsigned l1[4] = {0, 0, 0, 0};
  if (!cpuid(1, 0, l1) || (l1[2] & (1u << 20)) == 0) return Crc32cIsa::kTable;  // SSE4.2
#if defined(NETDIRECT_CRC32C_X64)
  if ((l1[2] & (1u << 1)) == 0) return Crc32cIsa::kSse42;  // PCLMULQDQ
  // zmm code also needs the OS to save the state: XCR0 bits 1 (SSE), 2 (AVX), 5 (opmask), 6 (ZMM_Hi256),
  // 7 (Hi16_ZMM). CPUID.1:ECX bit 27 (OSXSAVE) says xgetbv may be executed.
  constexpr uint64_t kZmmState = (1u << 1) | (1u << 2) | (1u << 5) | (1u << 6) | (1u << 7);
  if ((l1[2] & (1u << 27)) == 0 || (read_xcr0() & kZmmState) != kZmmState) return Crc32cIsa::kPclmul;
  unsigned l7[4] = {0, 0, 0, 0};
  if (!cpuid(7, 0, l7)) return Crc32cIsa::kPclmul;
  const bool avx512f = (l7[1] & (1u << 16)) != 0;
  const bool avx512vl = (l7[1] & (1u << 31)) != 0;
  const bool vpclmulqdq = (l7[2] & (1u << 10)) != 0;
  return avx512f && avx512vl && vpclmulqdq ? Crc32cIsa::kAvx512 : Crc32cIsa::kPclmul;
#else
  return Crc32cIsa::kSse42;
#endif
}

#if defined(NETDIRECT_CRC32C_X64)
// ---- GF(2)[x] mod P -------------------------------------------------------------------------------------
// A residue mod P (degree < 32) in the reflected representation of the CRC register: bit 31 is the
// coefficient of x^0, bit 0 that of x^31.

// a * x mod P: one step towards bit 0; x^32 wraps around to P - x^32 (kCrc32cPolyReflected).
constexpr uint32_t gf2_mul_x(uint32_t a) { return (a & 1u) ? (a >> 1) ^ kCrc32cPolyReflected : a >> 1; }

// a * b mod P.
constexpr uint32_t gf2_mul(uint32_t a, uint32_t b) {
  uint32_t r = 0;
  for (uint32_t m = 0x80000000u; m != 0; m >>= 1) {
    if (b & m) r ^= a;
    a = gf2_mul_x(a);
  }
  return r;
}

// x^n mod P by square-and-multiply.
constexpr uint32_t x_pow(uint64_t n) {
  uint32_t r = 0x80000000u;  // x^0
  uint32_t b = 0x40000000u;  // x^1, then x^2, x^4, ...
  for (; n != 0; n >>= 1) {
    if (n & 1) r = gf2_mul(r, b);
    b = gf2_mul(b, b);
  }
  return r;
}

// x^n mod P one multiplication by x at a time: the definition, to check x_pow against.
constexpr uint32_t x_pow_stepwise(uint32_t n) {
  uint32_t r = 0x80000000u;
  for (uint32_t i = 0; i < n; ++i) r = gf2_mul_x(r);
  return r;
}

static_assert(x_pow(32) == kCrc32cPolyReflected, "x^32 mod P");
static_assert(x_pow(7 + 32) == kTables[0][1], "the byte 0x01 is x^7; its table entry is x^7 * x^32 mod P");
static_assert(x_pow(2048 + 31) == x_pow_stepwise(2048 + 31), "square-and-multiply");

// ---- Three interleaved chains ---------------------------------------------------------------------------
// crc32 has a latency of 3 cycles but a throughput of 1 per cycle, so one dependent chain runs at a third of
// the instruction's speed. A run of three equal blocks A|B|C of L bytes is done as three independent chains
// and merged: update(s, A|B|C) = shift(update(s, A), 2L) ^ shift(update(0, B), L) ^ update(0, C), where
// shift(v, n) = v * x^(8n) mod P (reflected domain) is linear in v — a lookup table of 8 nibbles x 16
// entries per constant turns it into 8 loads and XORs.
struct ShiftTable {
  uint32_t t[8][16];
};

void make_shift_table(size_t n, ShiftTable* out) {
  const uint32_t k = x_pow(8 * static_cast<uint64_t>(n));
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
#if defined(NETDIRECT_CRC32C_X64)
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

#if defined(NETDIRECT_CRC32C_X64)
// ---- Carry-less multiply folding (PCLMULQDQ, VPCLMULQDQ) ------------------------------------------------
// With the initial state s XORed into the first 32 bits of a message M of n bits (s * x^n lands exactly
// there), the register after M is M(x) * x^32 mod P: only M(x) mod P matters. Folding shortens M without
// changing that: a 128-bit chunk A with D bits after it contributes A(x) * x^D, so it can be cleared and
// anything congruent to A(x) * x^F mod P XORed into the 128 bits ending F bits later (F <= D).
//
// A 16-byte little-endian load of the reflected stream holds the coefficient of x^(127-i) in bit i, so its
// low qword is the high half H of A = H * x^64 + L. PCLMULQDQ of a 64-bit H (bit i = x^(63-i)) with a 32-bit
// constant k in the register's representation (bit j = x^(31-j)) leaves the coefficient of x^(94-m) of H * k
// in bit m, which read as a chunk (bit m = x^(127-m)) is H * k * x^33. Hence
//   A * x^F = H * x^(F+64) + L * x^F = x^33 * (H * [x^(F+31) mod P] + L * [x^(F-33) mod P])
// (mod P): two multiplications whose 95-bit products fit a chunk. When a single chunk R is left with nothing
// after it, the register is R(x) * x^32 mod P: the crc32 instruction over R's 16 bytes from a zero state.
struct FoldConst {
  uint64_t lo;  // x^(F+31) mod P: multiplies the low qword (H)
  uint64_t hi;  // x^(F-33) mod P: multiplies the high qword (L)
};
constexpr FoldConst fold_const(uint32_t f) { return {x_pow(f + 31), x_pow(f - 33)}; }

// F for the folds used: one chunk (128), the lane reductions (256, 384 and 1024, 1536), four 128-bit lanes
// or one 512-bit lane (512), four 512-bit lanes (2048).
constexpr FoldConst kFold128 = fold_const(128);
constexpr FoldConst kFold256 = fold_const(256);
constexpr FoldConst kFold384 = fold_const(384);
constexpr FoldConst kFold512 = fold_const(512);
constexpr FoldConst kFold1024 = fold_const(1024);
constexpr FoldConst kFold1536 = fold_const(1536);
constexpr FoldConst kFold2048 = fold_const(2048);
static_assert(kFold2048.lo == x_pow_stepwise(2048 + 31) && kFold128.hi == x_pow_stepwise(128 - 33),
              "fold constants");

NETDIRECT_PCLMUL_TARGET NETDIRECT_FORCE_INLINE __m128i fold_k128(const FoldConst& k) {
  return _mm_set_epi64x(static_cast<long long>(k.hi), static_cast<long long>(k.lo));
}

NETDIRECT_PCLMUL_TARGET NETDIRECT_FORCE_INLINE __m128i load128(const uint8_t* p) {
  return _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
}

// a moved F bits on (k = fold_k128 of F), XORed into d, the chunk there.
NETDIRECT_PCLMUL_TARGET NETDIRECT_FORCE_INLINE __m128i fold128(__m128i a, __m128i k, __m128i d) {
  return _mm_xor_si128(_mm_xor_si128(_mm_clmulepi64_si128(a, k, 0x00), _mm_clmulepi64_si128(a, k, 0x11)), d);
}

// The register after p[0, n) (n < 16) that follows a last chunk r congruent to everything before it.
NETDIRECT_PCLMUL_TARGET NETDIRECT_FORCE_INLINE uint32_t chunk_state(__m128i r, const uint8_t* p, size_t n) {
  const uint64_t s = _mm_crc32_u64(0, static_cast<uint64_t>(_mm_cvtsi128_si64(r)));
  return hw_update(static_cast<uint32_t>(_mm_crc32_u64(s, static_cast<uint64_t>(_mm_extract_epi64(r, 1)))), p, n);
}

// Four 128-bit lanes x0..x3 hold the 64 bytes before p (the initial state XORed in): folds p[0, n) into them, 64
// bytes a round, then into one chunk, 16 bytes a round; the tail under 16 bytes goes to the crc32 instruction.
NETDIRECT_PCLMUL_TARGET NETDIRECT_FORCE_INLINE uint32_t fold128_rest(__m128i x0, __m128i x1, __m128i x2, __m128i x3,
                                                                     const uint8_t* p, size_t n) {
  const __m128i k512 = fold_k128(kFold512);
  while (n >= 64) {
    x0 = fold128(x0, k512, load128(p));
    x1 = fold128(x1, k512, load128(p + 16));
    x2 = fold128(x2, k512, load128(p + 32));
    x3 = fold128(x3, k512, load128(p + 48));
    p += 64;
    n -= 64;
  }
  // Lanes 0, 1, 2 move 3, 2, 1 chunks on, into lane 3.
  const __m128i k128 = fold_k128(kFold128);
  __m128i r = fold128(x0, fold_k128(kFold384), fold128(x1, fold_k128(kFold256), fold128(x2, k128, x3)));
  while (n >= 16) {
    r = fold128(r, k128, load128(p));
    p += 16;
    n -= 16;
  }
  return chunk_state(r, p, n);
}

// Each 128-bit lane of a zmm folded by the same F.
NETDIRECT_AVX512_TARGET NETDIRECT_FORCE_INLINE __m512i fold_k512(const FoldConst& k) {
  const long long lo = static_cast<long long>(k.lo);
  const long long hi = static_cast<long long>(k.hi);
  return _mm512_set_epi64(hi, lo, hi, lo, hi, lo, hi, lo);
}

// 128-bit lane I of z. (The zero-masking form: GCC 12's plain zmm-to-xmm extracts trip -Wuninitialized.)
template <int I>
NETDIRECT_AVX512_TARGET NETDIRECT_FORCE_INLINE __m128i lane128(__m512i z) {
  return _mm512_maskz_extracti32x4_epi32(0xF, z, I);
}

NETDIRECT_AVX512_TARGET NETDIRECT_FORCE_INLINE __m512i load512(const uint8_t* p) { return _mm512_loadu_si512(p); }

// Four chunks at once: each 128-bit lane of a moved F bits on, XORed into d (0x96: three-way XOR).
NETDIRECT_AVX512_TARGET NETDIRECT_FORCE_INLINE __m512i fold512(__m512i a, __m512i k, __m512i d) {
  return _mm512_ternarylogic_epi64(_mm512_clmulepi64_epi128(a, k, 0x00), _mm512_clmulepi64_epi128(a, k, 0x11), d,
                                   0x96);
}

// fold128_rest with four 512-bit lanes: 256 bytes a round, then one zmm 64 bytes a round, then one chunk.
NETDIRECT_AVX512_TARGET NETDIRECT_FORCE_INLINE uint32_t fold512_rest(__m512i z0, __m512i z1, __m512i z2, __m512i z3,
                                                                     const uint8_t* p, size_t n) {
  const __m512i k2048 = fold_k512(kFold2048);
  while (n >= 256) {
    z0 = fold512(z0, k2048, load512(p));
    z1 = fold512(z1, k2048, load512(p + 64));
    z2 = fold512(z2, k2048, load512(p + 128));
    z3 = fold512(z3, k2048, load512(p + 192));
    p += 256;
    n -= 256;
  }
  // zmm lanes 0, 1, 2 move 3, 2, 1 zmm on, into lane 3.
  const __m512i k512 = fold_k512(kFold512);
  __m512i z = fold512(z0, fold_k512(kFold1536), fold512(z1, fold_k512(kFold1024), fold512(z2, k512, z3)));
  while (n >= 64) {
    z = fold512(z, k512, load512(p));
    p += 64;
    n -= 64;
  }
  // The chunks of z: 0, 1, 2 move 3, 2, 1 chunks on (one constant per 128-bit lane; zero in lane 3, whose
  // product is dropped), then all four are XORed together.
  const __m512i kc = _mm512_set_epi64(0, 0, static_cast<long long>(kFold128.hi), static_cast<long long>(kFold128.lo),
                                      static_cast<long long>(kFold256.hi), static_cast<long long>(kFold256.lo),
                                      static_cast<long long>(kFold384.hi), static_cast<long long>(kFold384.lo));
  const __m512i t = _mm512_xor_si512(_mm512_clmulepi64_epi128(z, kc, 0x00), _mm512_clmulepi64_epi128(z, kc, 0x11));
  __m128i r = _mm_xor_si128(_mm_ternarylogic_epi64(lane128<0>(t), lane128<1>(t), lane128<2>(t), 0x96), lane128<3>(z));
  const __m128i k128 = fold_k128(kFold128);
  while (n >= 16) {
    r = fold128(r, k128, load128(p));
    p += 16;
    n -= 16;
  }
  return chunk_state(r, p, n);
}

// ---- Folding and crc32 chains side by side ----------------------------------------------------------------
// The carry-less multiplier and the crc32 unit are separate execution units, and each alone is the limit of
// its path (measured on Zen 5: one PCLMULQDQ every 2 cycles for xmm and zmm alike, so 4 x 128-bit folding
// runs at half the speed of three crc32 chains). Both are kept busy: the input is cut into a fold region
// followed by three chain regions of c = 32 * rounds bytes each, and each round of the loop folds 64 (xmm) or
// 256 (zmm) bytes of the fold region and moves three crc32 chains (started from zero) 32 bytes on. The fold
// region then goes on alone to its end (register sA), and the four registers merge as in hw_three_chains:
//   state = sA * x^(8*3c) ^ c0 * x^(8*2c) ^ c1 * x^(8c) ^ c2   (mod P).
// v * x^(8b) mod P is one PCLMULQDQ and one crc32: the product of 32-bit reflected v and k = x^(8b-33) mod P
// lands in a 64-bit word (bit i = x^(63-i)) as v * k * x, and crc32 of that word from a zero state multiplies
// by x^32 and reduces: v * x^(8b) in all.
constexpr size_t kChainRoundBytes = 32;                 // each chain's share of a round: 4 crc32 of 8 bytes
constexpr size_t kRound128 = 64 + 3 * kChainRoundBytes;   // bytes a round, PCLMULQDQ level
constexpr size_t kRound512 = 256 + 3 * kChainRoundBytes;  // bytes a round, AVX-512 level
constexpr size_t kMinRounds = 2;    // fewer rounds than this: the fold region is all (merging costs more)
constexpr size_t kMaxRounds = 256;  // longer inputs go in pieces of kMaxRounds rounds

struct ChainShift {
  uint32_t by[3];  // by[i] = x^(8 * (i+1) * c - 33) mod P, c = kChainRoundBytes * rounds: shifts by c, 2c, 3c
};
using ChainShiftTable = std::array<ChainShift, kMaxRounds + 1>;  // indexed by rounds (0 unused)

// Built one round at a time: x^(8 * i * c) grows by x^(8 * i * kChainRoundBytes) per round.
constexpr ChainShiftTable make_chain_shifts() {
  ChainShiftTable t{};
  for (uint32_t i = 0; i < 3; ++i) {
    const uint32_t step = x_pow(8 * (i + 1) * kChainRoundBytes);
    uint32_t k = x_pow(8 * (i + 1) * kChainRoundBytes - 33);
    for (size_t rounds = 1; rounds <= kMaxRounds; ++rounds) {
      t[rounds].by[i] = k;
      k = gf2_mul(k, step);
    }
  }
  return t;
}
constexpr ChainShiftTable kChainShifts = make_chain_shifts();
static_assert(kChainShifts[kMaxRounds].by[2] == x_pow(8 * 3 * kChainRoundBytes * kMaxRounds - 33) &&
                  kChainShifts[5].by[1] == x_pow_stepwise(8 * 2 * kChainRoundBytes * 5 - 33),
              "chain shift constants");

// v * x^(8b) mod P for k = x^(8b-33) mod P.
NETDIRECT_PCLMUL_TARGET NETDIRECT_FORCE_INLINE uint32_t shift_mul(uint32_t v, uint32_t k) {
  const __m128i prod = _mm_clmulepi64_si128(_mm_cvtsi32_si128(static_cast<int>(v)),
                                            _mm_cvtsi32_si128(static_cast<int>(k)), 0x00);
  return static_cast<uint32_t>(_mm_crc32_u64(0, static_cast<uint64_t>(_mm_cvtsi128_si64(prod))));
}

struct Chains {
  uint64_t c0 = 0, c1 = 0, c2 = 0;  // crc32 registers of the three chain regions, from zero
};

// One round of the chains: 32 bytes at q, q + c, q + 2c.
NETDIRECT_SSE42_TARGET NETDIRECT_FORCE_INLINE void chains_round(Chains& s, const uint8_t* q, size_t c) {
  for (size_t i = 0; i < kChainRoundBytes; i += 8) {
    uint64_t w0, w1, w2;
    std::memcpy(&w0, q + i, 8);
    std::memcpy(&w1, q + c + i, 8);
    std::memcpy(&w2, q + 2 * c + i, 8);
    s.c0 = _mm_crc32_u64(s.c0, w0);
    s.c1 = _mm_crc32_u64(s.c1, w1);
    s.c2 = _mm_crc32_u64(s.c2, w2);
  }
}

// The register after fold region (register sA) | chain regions, for `rounds` rounds.
NETDIRECT_PCLMUL_TARGET NETDIRECT_FORCE_INLINE uint32_t chains_merge(uint32_t sa, const Chains& s, size_t rounds) {
  const ChainShift& k = kChainShifts[rounds];
  return shift_mul(sa, k.by[2]) ^ shift_mul(static_cast<uint32_t>(s.c0), k.by[1]) ^
         shift_mul(static_cast<uint32_t>(s.c1), k.by[0]) ^ static_cast<uint32_t>(s.c2);
}

// PCLMULQDQ level, n >= kCrc32cFoldMin: 4 x 128-bit lanes and the chains, rounds of 64 + 3 * 32 bytes.
NETDIRECT_PCLMUL_TARGET uint32_t fold128_chunk(uint32_t state, const uint8_t* p, size_t n) {
  const size_t rounds = n / kRound128 >= kMinRounds ? n / kRound128 : 0;
  const size_t c = kChainRoundBytes * rounds;
  const size_t fold_len = n - 3 * c;  // >= 64 * rounds, and >= 64
  const uint8_t* q = p + fold_len;
  __m128i x0 = _mm_xor_si128(load128(p), _mm_cvtsi32_si128(static_cast<int>(state)));
  __m128i x1 = load128(p + 16);
  __m128i x2 = load128(p + 32);
  __m128i x3 = load128(p + 48);
  const __m128i k512 = fold_k128(kFold512);
  Chains s;
  for (size_t r = 1; r < rounds; ++r) {  // round 0's fold is the load above; its chains go last
    const uint8_t* f = p + 64 * r;
    x0 = fold128(x0, k512, load128(f));
    x1 = fold128(x1, k512, load128(f + 16));
    x2 = fold128(x2, k512, load128(f + 32));
    x3 = fold128(x3, k512, load128(f + 48));
    chains_round(s, q + kChainRoundBytes * (r - 1), c);
  }
  if (rounds == 0) return fold128_rest(x0, x1, x2, x3, p + 64, n - 64);
  chains_round(s, q + kChainRoundBytes * (rounds - 1), c);
  const size_t done = 64 * rounds;
  return chains_merge(fold128_rest(x0, x1, x2, x3, p + done, fold_len - done), s, rounds);
}

// AVX-512 level, n >= kCrc32cFoldMin: 4 x 512-bit lanes and the chains, rounds of 256 + 3 * 32 bytes.
NETDIRECT_AVX512_TARGET uint32_t fold512_chunk(uint32_t state, const uint8_t* p, size_t n) {
  const size_t rounds = n / kRound512 >= kMinRounds ? n / kRound512 : 0;
  const size_t c = kChainRoundBytes * rounds;
  const size_t fold_len = n - 3 * c;  // >= 256 * rounds, and >= 256
  const uint8_t* q = p + fold_len;
  const __m512i s0 = _mm512_inserti32x4(_mm512_setzero_si512(), _mm_cvtsi32_si128(static_cast<int>(state)), 0);
  __m512i z0 = _mm512_xor_si512(load512(p), s0);
  __m512i z1 = load512(p + 64);
  __m512i z2 = load512(p + 128);
  __m512i z3 = load512(p + 192);
  const __m512i k2048 = fold_k512(kFold2048);
  Chains s;
  for (size_t r = 1; r < rounds; ++r) {
    const uint8_t* f = p + 256 * r;
    z0 = fold512(z0, k2048, load512(f));
    z1 = fold512(z1, k2048, load512(f + 64));
    z2 = fold512(z2, k2048, load512(f + 128));
    z3 = fold512(z3, k2048, load512(f + 192));
    chains_round(s, q + kChainRoundBytes * (r - 1), c);
  }
  if (rounds == 0) return fold512_rest(z0, z1, z2, z3, p + 256, n - 256);
  chains_round(s, q + kChainRoundBytes * (rounds - 1), c);
  const size_t done = 256 * rounds;
  return chains_merge(fold512_rest(z0, z1, z2, z3, p + done, fold_len - done), s, rounds);
}

// The folding levels: pieces of at most kMaxRounds rounds; the last piece, when short, on the crc32 path.
template <size_t kRound, uint32_t (*chunk)(uint32_t, const uint8_t*, size_t)>
uint32_t fold_update(uint32_t state, const uint8_t* p, size_t n) {
  while (n >= kCrc32cFoldMin) {
    const size_t take = n < kMaxRounds * kRound ? n : kMaxRounds * kRound;
    state = chunk(state, p, take);
    p += take;
    n -= take;
  }
  return hw_update(state, p, n);
}
#endif
#endif

static_assert(kCrc32cFoldMin >= 256, "fold512_chunk needs 256 bytes, fold128_chunk 64");

// One level's implementation; level is at most crc32c_isa_available().
uint32_t update_at(Crc32cIsa level, uint32_t state, const uint8_t* p, size_t n) {
  switch (level) {
#if defined(NETDIRECT_CRC32C_X64)
    case Crc32cIsa::kAvx512:
      return fold_update<kRound512, fold512_chunk>(state, p, n);
    case Crc32cIsa::kPclmul:
      return fold_update<kRound128, fold128_chunk>(state, p, n);
#endif
#if defined(NETDIRECT_CRC32C_X86)
    case Crc32cIsa::kSse42:
      return hw_update(state, p, n);
#endif
    default:
      return crc32c_update_table(state, p, n);
  }
}

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

Crc32cIsa crc32c_isa_available() {
#if defined(NETDIRECT_CRC32C_X86)
  int s = g_isa_available.load(std::memory_order_relaxed);
  if (s < 0) {
    s = static_cast<int>(probe_isa());
    g_isa_available.store(s, std::memory_order_relaxed);
  }
  return static_cast<Crc32cIsa>(s);
#else
  return Crc32cIsa::kTable;
#endif
}

const char* crc32c_isa_name(Crc32cIsa level) {
  switch (level) {
    case Crc32cIsa::kAvx512: return "avx512-vpclmulqdq";
    case Crc32cIsa::kPclmul: return "pclmulqdq";
    case Crc32cIsa::kSse42: return "sse4.2";
    default: return "table";
  }
}

Crc32cIsa crc32c_isa() {
  if (g_force_table.load(std::memory_order_relaxed)) return Crc32cIsa::kTable;
  const Crc32cIsa cap = static_cast<Crc32cIsa>(g_max_isa.load(std::memory_order_relaxed));
  const Crc32cIsa available = crc32c_isa_available();
  return cap < available ? cap : available;
}

void crc32c_set_max_isa(Crc32cIsa level) { g_max_isa.store(static_cast<int>(level), std::memory_order_relaxed); }

bool crc32c_hardware_available() { return crc32c_isa_available() >= Crc32cIsa::kSse42; }

uint32_t crc32c_update_hw(uint32_t state, const void* data, size_t len) {
#if defined(NETDIRECT_CRC32C_X86)
  return hw_update(state, static_cast<const uint8_t*>(data), len);
#else
  return crc32c_update_table(state, data, len);
#endif
}

bool crc32c_hardware() { return crc32c_isa() >= Crc32cIsa::kSse42; }

void crc32c_force_table(bool force) { g_force_table.store(force, std::memory_order_relaxed); }

uint32_t crc32c_update_isa(Crc32cIsa level, uint32_t state, const void* data, size_t len) {
  const Crc32cIsa available = crc32c_isa_available();
  return update_at(level < available ? level : available, state, static_cast<const uint8_t*>(data), len);
}

uint32_t crc32c_update(uint32_t state, const void* data, size_t len) {
  return update_at(crc32c_isa(), state, static_cast<const uint8_t*>(data), len);
}

uint32_t crc32c(const void* data, size_t len) {
  return crc32c_final(crc32c_update(kCrc32cInit, data, len));
}

}  // namespace netdirect::soft

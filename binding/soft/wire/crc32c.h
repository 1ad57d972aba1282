// CRC32c (Castagnoli, reflected polynomial 0x82F63B78) for the MPA FPDU trailer (RFC 5044).
// x86 paths selected at run time (SSE4.2 crc32, PCLMULQDQ and AVX-512 VPCLMULQDQ folding), slicing-by-8 table
// path everywhere else.
#ifndef NETDIRECT_SOFT_CRC32C_H_
#define NETDIRECT_SOFT_CRC32C_H_

#include <cstddef>
#include <cstdint>

namespace netdirect::soft {

constexpr uint32_t kCrc32cInit = 0xFFFFFFFFu;      // initial running state
constexpr uint32_t kCrc32cXorOut = 0xFFFFFFFFu;    // final XOR
constexpr uint32_t kCrc32cPolyReflected = 0x82F63B78u;
constexpr size_t kCrc32cSize = 4;                  // bytes of the MPA CRC trailer

// Advances a raw running state (start from kCrc32cInit, finish with crc32c_final). Dispatches on crc32c_isa().
uint32_t crc32c_update(uint32_t state, const void* data, size_t len);

// Finalizes a running state into the CRC value.
constexpr uint32_t crc32c_final(uint32_t state) { return state ^ kCrc32cXorOut; }

// One-shot CRC32c of a buffer (init, update, final).
uint32_t crc32c(const void* data, size_t len);

// Always the portable slicing-by-8 path (raw state in/out).
uint32_t crc32c_update_table(uint32_t state, const void* data, size_t len);

// Always the SSE4.2 path; only call when crc32c_hardware_available(). Falls back to table on non-x86.
uint32_t crc32c_update_hw(uint32_t state, const void* data, size_t len);

// True when the CPU has the SSE4.2 crc32 instruction (cached cpuid probe).
bool crc32c_hardware_available();

// True when crc32c_update currently uses the hardware path (available and not forced off).
bool crc32c_hardware();

// Test hook: force crc32c_update onto the table path (true) or back to auto-selection (false).
void crc32c_force_table(bool force);

// The implementations, slowest to fastest; each level needs the CPU features of the levels below it.
enum class Crc32cIsa : int {
  kTable = 0,   // portable slicing-by-8
  kSse42 = 1,   // crc32 instruction, three interleaved chains for long inputs (crc32c_update_hw)
  kPclmul = 2,  // + PCLMULQDQ folding of 4 x 128-bit lanes, with three crc32 chains alongside, for inputs of
                //   kCrc32cFoldMin bytes or more (x86-64)
  kAvx512 = 3,  // + the same with VPCLMULQDQ on 4 x 512-bit lanes (AVX-512F/VL, zmm state enabled by the OS)
};

// Inputs shorter than this stay on the crc32 instruction path even when folding is available.
constexpr size_t kCrc32cFoldMin = 256;

// "table", "sse4.2", "pclmulqdq" or "avx512-vpclmulqdq".
const char* crc32c_isa_name(Crc32cIsa level);

// Best level this CPU and OS support (cached cpuid/xgetbv probe).
Crc32cIsa crc32c_isa_available();

// Level crc32c_update uses now: kTable when forced, else the available level capped by crc32c_set_max_isa.
Crc32cIsa crc32c_isa();

// Test/benchmark hook: caps the level crc32c_update uses (kAvx512 lifts the cap).
void crc32c_set_max_isa(Crc32cIsa level);

// Always the given level, lowered to crc32c_isa_available() when the CPU lacks it (raw state in/out).
uint32_t crc32c_update_isa(Crc32cIsa level, uint32_t state, const void* data, size_t len);

// Writes the final CRC in MPA wire order: least-significant byte first (docs/iwarp.md §1.3).
inline void put_crc_le(uint8_t* out, uint32_t crc) {
  out[0] = static_cast<uint8_t>(crc);
  out[1] = static_cast<uint8_t>(crc >> 8);
  out[2] = static_cast<uint8_t>(crc >> 16);
  out[3] = static_cast<uint8_t>(crc >> 24);
}

// Reads a CRC trailer in MPA wire order (little-endian).
inline uint32_t get_crc_le(const uint8_t* in) {
  return static_cast<uint32_t>(in[0]) | (static_cast<uint32_t>(in[1]) << 8) |
         (static_cast<uint32_t>(in[2]) << 16) | (static_cast<uint32_t>(in[3]) << 24);
}

}  // namespace netdirect::soft

#endif  // NETDIRECT_SOFT_CRC32C_H_

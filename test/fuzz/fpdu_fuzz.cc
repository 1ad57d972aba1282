// Fuzz target: FPDU framing, the CRC32c trailer and the DDP/RDMAP header codecs (binding/soft/wire/ddp_rdmap.*,
// binding/soft/wire/crc32c.*) on a byte stream cut into FPDUs by their ULPDU Length fields, as the receive stream
// cuts it. Input: the FPDU stream (MPA markers are never negotiated by this provider: mpa_fuzz covers their refusal).
// Invariants for every whole FPDU:
//  * CRC32c: every implementation level (table, SSE4.2, PCLMULQDQ, AVX-512 where the CPU has them), a bitwise
//    reference and a running CRC split at an input-chosen point agree; fpdu_check_crc says yes exactly when the
//    trailer holds that CRC;
//  * a header that decodes re-encodes to the same bytes (reserved bits excepted), strict decoding accepts a subset
//    of what lax decoding accepts, a Read Request body round-trips, and the FPDU rebuilt from the decoded header
//    with encode_fpdu_header / encode_fpdu_trailer is byte-identical when its pad is zero and its CRC right;
//  * a header that does not decode names a Terminate code RFC 5040/5041/5044 define.
#include <cstring>
#include <vector>

#include "fuzz_check.h"
#include "soft/wire/crc32c.h"
#include "soft/wire/ddp_rdmap.h"

using namespace netdirect::soft;
using namespace netdirect::soft::wire;

namespace {

uint32_t crc32c_bitwise(const uint8_t* p, size_t n) {
  uint32_t c = kCrc32cInit;
  for (size_t i = 0; i < n; ++i) {
    c ^= p[i];
    for (int k = 0; k < 8; ++k) c = (c >> 1) ^ (kCrc32cPolyReflected & (0u - (c & 1)));
  }
  return crc32c_final(c);
}

void check_crc(const uint8_t* fpdu, uint16_t ulen, size_t split) {
  const size_t covered = kMpaLenSize + ulen + fpdu_pad(ulen);
  const uint32_t ref = crc32c_bitwise(fpdu, covered);
  for (int level = 0; level <= static_cast<int>(Crc32cIsa::kAvx512); ++level) {
    const uint32_t c = crc32c_final(crc32c_update_isa(static_cast<Crc32cIsa>(level), kCrc32cInit, fpdu, covered));
    FUZZ_CHECK(c == ref, "CRC32c %s gives %08x, reference %08x over %zu bytes",
               crc32c_isa_name(static_cast<Crc32cIsa>(level)), c, ref, covered);
  }
  split %= covered + 1;
  const uint32_t run = crc32c_final(crc32c_update(crc32c_update(kCrc32cInit, fpdu, split), fpdu + split, covered - split));
  FUZZ_CHECK(run == ref, "running CRC32c split at %zu gives %08x, reference %08x", split, run, ref);
  FUZZ_CHECK(fpdu_check_crc(fpdu, ulen) == (get_crc_le(fpdu + covered) == ref), "fpdu_check_crc disagrees");
}

void check_header(const uint8_t* fpdu, uint16_t ulen) {
  const uint8_t* u = fpdu + kMpaLenSize;
  DdpHeader h;
  const DecodeStatus st = decode_ddp_header(u, ulen, &h);
  DdpHeader hs;
  const DecodeStatus strict = decode_ddp_header(u, ulen, &hs, true);
  FUZZ_CHECK(!strict.ok || st.ok, "strict decoding accepts what lax decoding refuses");
  if (!st.ok) {
    FUZZ_CHECK(term_code_defined(st.term), "undefined Terminate code %u/%u/%u", st.term.layer, st.term.etype,
               st.term.code);
    return;
  }
  FUZZ_CHECK(st.consumed == ddp_header_size(h.opcode) && ulen >= ulpdu_header_size(h.opcode),
             "consumed %zu of a %u-byte ULPDU for opcode %u", st.consumed, ulen, static_cast<unsigned>(h.opcode));
  if (strict.ok) FUZZ_CHECK((u[0] & kDdpReservedMask) == 0 && (u[1] & kRdmapReservedMask) == 0, "strict: reserved bits");

  uint8_t enc[kDdpUntaggedHdrSize];
  const size_t n = encode_ddp_header(h, enc);
  FUZZ_CHECK(n == st.consumed, "encoded %zu header bytes, decoded %zu", n, st.consumed);
  uint8_t want[kDdpUntaggedHdrSize];
  std::memcpy(want, u, n);
  want[0] &= static_cast<uint8_t>(~kDdpReservedMask);
  want[1] &= static_cast<uint8_t>(~kRdmapReservedMask);
  FUZZ_CHECK(std::memcmp(enc, want, n) == 0, "DDP header decode -> encode differs");

  if (h.opcode == RdmapOpcode::kReadRequest) {
    ReadRequest rr;
    const DecodeStatus rs = decode_read_request(u + n, ulen - n, &rr);
    if (rs.ok) {
      uint8_t body[kRdmapReadReqSize];
      encode_read_request(rr, body);
      FUZZ_CHECK(std::memcmp(body, u + n, kRdmapReadReqSize) == 0, "Read Request decode -> encode differs");
    } else {
      FUZZ_CHECK(term_code_defined(rs.term), "undefined Read Request code");
    }
  }

  // Rebuild the whole FPDU from the decoded header when the original is canonical.
  const size_t pad = fpdu_pad(ulen);
  const size_t covered = kMpaLenSize + ulen + pad;
  bool canonical = (u[0] & kDdpReservedMask) == 0 && (u[1] & kRdmapReservedMask) == 0 &&
                   get_crc_le(fpdu + covered) == crc32c_bitwise(fpdu, covered);
  for (size_t i = 0; i < pad; ++i) canonical = canonical && fpdu[kMpaLenSize + ulen + i] == 0;
  if (!canonical) return;
  std::vector<uint8_t> out(fpdu_size(ulen));
  const size_t hl = encode_fpdu_header(h, ulen, out.data());
  FUZZ_CHECK(hl == kMpaLenSize + n, "encode_fpdu_header wrote %zu bytes", hl);
  std::memcpy(out.data() + hl, u + n, ulen - n);
  const size_t tl = encode_fpdu_trailer(crc32c_update(kCrc32cInit, out.data(), kMpaLenSize + ulen), ulen, true,
                                        out.data() + kMpaLenSize + ulen);
  FUZZ_CHECK(tl == pad + kMpaTrailerCrcSize, "trailer of %zu bytes", tl);
  FUZZ_CHECK(std::memcmp(out.data(), fpdu, out.size()) == 0, "FPDU rebuilt from its header differs");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  size_t pos = 0;
  while (size - pos >= kMpaLenSize) {
    const uint16_t ulen = get_be16(data + pos);
    const size_t whole = fpdu_size(ulen);
    if (size - pos < whole) break;
    check_crc(data + pos, ulen, ulen * 7u + pos);
    check_header(data + pos, ulen);
    pos += whole;
  }
  return 0;
}

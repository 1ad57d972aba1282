// Fuzz target: Terminate messages (binding/soft/wire/terminate.*, decode_terminate_body / make_terminate /
// encode_terminate_body in binding/soft/wire/ddp_rdmap.*). Input: 4 settings bytes (a Terminate code to send:
// layer/etype, code, CRC on/off, and the ULPDU Length claimed for the offending ULPDU), then bytes used both as a
// received Terminate body and as the offending ULPDU whose headers a Terminate we send copies.
// Invariants:
//  * a received body decodes within its length; an RFC 5040-layout body re-encodes to the same bytes (the segment
//    length slot excepted when M is clear); classify_terminate names a request only for a reliable decode and
//    completes it with ND_ACCESS_VIOLATION or ND_REMOTE_ERROR only;
//  * the Terminate FPDU we build for any defined code is one well-framed FPDU (no longer than kTerminateFpduMax,
//    QN 2, MSN 1, L set, CRC right when on) whose body decodes back to that code, with the offending headers
//    copied verbatim.
#include <cstring>

#include "fuzz_check.h"
#include "soft/wire/crc32c.h"
#include "soft/wire/ddp_rdmap.h"
#include "soft/wire/terminate.h"

using namespace netdirect::soft;
using namespace netdirect::soft::wire;

namespace {

void check_received(const uint8_t* body, size_t len) {
  TerminateInfo t;
  const DecodeStatus st = decode_terminate_body(body, len, &t);
  if (!st.ok) {
    FUZZ_CHECK(term_code_defined(st.term), "undefined code for a bad Terminate body");
    return;
  }
  FUZZ_CHECK(st.consumed <= len && st.consumed >= kTermCtrlSize, "consumed %zu of %zu", st.consumed, len);
  if (t.ddp_hdr != nullptr) {
    FUZZ_CHECK(t.ddp_hdr >= body && t.ddp_hdr + t.ddp_hdr_len <= body + len, "copied DDP header outside the body");
    FUZZ_CHECK(t.ddp_hdr_len == ((t.ddp_hdr[0] & kDdpFlagTagged) ? kDdpTaggedHdrSize : kDdpUntaggedHdrSize),
               "copied DDP header length %zu", t.ddp_hdr_len);
  }
  if (t.rdmap_hdr != nullptr) {
    FUZZ_CHECK(t.rdmap_hdr >= body && t.rdmap_hdr + t.rdmap_hdr_len <= body + len, "copied RDMAP header outside");
  }
  const TermVerdict v = classify_terminate(t);
  FUZZ_CHECK(v.status == ND_REMOTE_ERROR || v.status == ND_ACCESS_VIOLATION, "verdict status %08x",
             static_cast<unsigned>(v.status));
  if (!t.reliable) {
    FUZZ_CHECK(v.target == TermTarget::kNone && t.ddp_hdr == nullptr, "unreliable Terminate attributed");
    return;
  }
  if (t.layout != TermLayout::kRfc5040) return;
  uint8_t out[kTermMaxBody];
  const size_t n = encode_terminate_body(t, out, sizeof out);
  FUZZ_CHECK(n == st.consumed, "re-encoded %zu bytes, decoded %zu", n, st.consumed);
  uint8_t want[kTermMaxBody];
  std::memcpy(want, body, n);
  if (!t.m && t.d) want[kTermCtrlSize] = want[kTermCtrlSize + 1] = 0;
  FUZZ_CHECK(std::memcmp(out, want, n) == 0, "Terminate body decode -> encode differs");
}

void check_sent(TermCode code, bool crc, const uint8_t* ulpdu, size_t avail, uint16_t ulpdu_len) {
  uint8_t f[kTerminateFpduMax + 8];
  std::memset(f, 0xEE, sizeof f);
  const size_t n = build_terminate_fpdu(code, ulpdu, avail, ulpdu_len, crc, f);
  FUZZ_CHECK(n <= kTerminateFpduMax && f[kTerminateFpduMax] == 0xEE, "Terminate FPDU of %zu bytes", n);
  const uint16_t ulen = get_be16(f);
  FUZZ_CHECK(n == fpdu_size(ulen), "Terminate FPDU of %zu bytes, ULPDU Length %u", n, ulen);
  DdpHeader h;
  const DecodeStatus hs = decode_ddp_header(f + kMpaLenSize, ulen, &h, true);
  FUZZ_CHECK(hs.ok && h.opcode == RdmapOpcode::kTerminate && h.last && h.qn == kQnTerminate && h.msn == kMsnFirst &&
                 h.mo == 0,
             "not a Terminate header");
  FUZZ_CHECK(fpdu_check_crc(f, ulen) == crc || (!crc && get_crc_le(f + n - 4) == 0), "trailer wrong (crc %d)", crc);
  TerminateInfo t;
  const DecodeStatus bs = decode_terminate_body(f + kFpduHdrSend, ulen - kDdpUntaggedHdrSize, &t);
  FUZZ_CHECK(bs.ok && bs.consumed == ulen - kDdpUntaggedHdrSize, "our Terminate body does not decode whole");
  FUZZ_CHECK(t.code == code, "sent %u/%u/%u, decodes as %u/%u/%u", code.layer, code.etype, code.code, t.code.layer,
             t.code.etype, t.code.code);
  if (t.d) {
    FUZZ_CHECK(t.ddp_hdr_len <= avail && std::memcmp(t.ddp_hdr, ulpdu, t.ddp_hdr_len) == 0,
               "copied DDP header differs from the offending one");
    FUZZ_CHECK(!t.m || t.ddp_seg_len == ulpdu_len, "segment length %u, offending ULPDU %u", t.ddp_seg_len, ulpdu_len);
  }
  if (t.rdmap_hdr != nullptr) {
    FUZZ_CHECK(t.ddp_hdr_len + t.rdmap_hdr_len <= avail &&
                   std::memcmp(t.rdmap_hdr, ulpdu + t.ddp_hdr_len, t.rdmap_hdr_len) == 0,
               "copied Read Request differs");
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  fuzz::Input in(data, size);
  const uint8_t le = in.byte();
  const uint8_t c = in.byte();
  const uint8_t flags = in.byte();
  const uint8_t lenb = in.byte();
  check_received(in.rest(), in.rest_size());
  const TermCode code{static_cast<uint8_t>(le >> 4), static_cast<uint8_t>(le & 0x0F), c};
  if (term_code_defined(code)) {
    const size_t avail = in.rest_size() < 200 ? in.rest_size() : 200;
    check_sent(code, (flags & 1) != 0, in.rest_size() != 0 ? in.rest() : nullptr, avail,
               static_cast<uint16_t>((flags >> 1) << 8 | lenb));
  }
  return 0;
}

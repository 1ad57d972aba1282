#include "soft/wire/ddp_rdmap.h"

#include <cstring>

#include "soft/wire/crc32c.h"

namespace netdirect::soft::wire {
namespace {

// Offsets inside the DDP headers (from the DDP control byte).
constexpr size_t kOffDdpCtrl = 0;
constexpr size_t kOffRdmapCtrl = 1;
constexpr size_t kOffTaggedStag = 2;
constexpr size_t kOffTaggedTo = 6;
constexpr size_t kOffUntaggedRsvdUlp = 2;
constexpr size_t kOffUntaggedQn = 6;
constexpr size_t kOffUntaggedMsn = 10;
constexpr size_t kOffUntaggedMo = 14;
constexpr size_t kMinCtrlBytes = 2;  // DDP ctrl + RDMAP ctrl

// Read Request body offsets (relative to the body, i.e. after the untagged header).
constexpr size_t kOffRrSinkStag = 0;
constexpr size_t kOffRrSinkTo = 4;
constexpr size_t kOffRrSize = 12;
constexpr size_t kOffRrSrcStag = 16;
constexpr size_t kOffRrSrcTo = 20;

constexpr uint8_t kNibble = 0x0F;

DecodeStatus fail(TermCode c) {
  DecodeStatus s;
  s.ok = false;
  s.term = c;
  return s;
}

}  // namespace

size_t encode_ddp_header(const DdpHeader& h, uint8_t* out) {
  const bool tagged = opcode_is_tagged(h.opcode);
  uint8_t ddp = kDdpVersion;
  if (tagged) ddp |= kDdpFlagTagged;
  if (h.last) ddp |= kDdpFlagLast;
  out[kOffDdpCtrl] = ddp;
  out[kOffRdmapCtrl] = static_cast<uint8_t>((kRdmapVersion << kRdmapVersionShift) |
                                            (static_cast<uint8_t>(h.opcode) & kRdmapOpcodeMask));
  if (tagged) {
    put_be32(out + kOffTaggedStag, h.stag);
    put_be64(out + kOffTaggedTo, h.to);
    return kDdpTaggedHdrSize;
  }
  put_be32(out + kOffUntaggedRsvdUlp, h.rsvd_ulp);
  put_be32(out + kOffUntaggedQn, h.qn);
  put_be32(out + kOffUntaggedMsn, h.msn);
  put_be32(out + kOffUntaggedMo, h.mo);
  return kDdpUntaggedHdrSize;
}

DecodeStatus decode_ddp_header(const uint8_t* ulpdu, size_t ulpdu_len, DdpHeader* out,
                               bool strict_reserved) {
  // Too short to even hold the control bytes: framing is broken (ULPDU length mismatch).
  if (ulpdu_len < kMinCtrlBytes) return fail(term_code(LlpErr::kMarkerLengthMismatch));
  const uint8_t ddp = ulpdu[kOffDdpCtrl];
  const uint8_t rdmap = ulpdu[kOffRdmapCtrl];
  const bool tagged = (ddp & kDdpFlagTagged) != 0;

  // Same order as siw's receive path: DDP version, RDMAP version, opcode.
  if ((ddp & kDdpVersionMask) != kDdpVersion) {
    return fail(tagged ? term_code(DdpTaggedErr::kInvalidVersion)
                       : term_code(DdpUntaggedErr::kInvalidVersion));
  }
  if (((rdmap & kRdmapVersionMask) >> kRdmapVersionShift) != kRdmapVersion) {
    return fail(term_code(RdmapEtype::kRemoteOperation, RdmapErr::kInvalidVersion));
  }
  const uint8_t opc = rdmap & kRdmapOpcodeMask;
  if (opc > kRdmapMaxOpcode) {
    return fail(term_code(RdmapEtype::kRemoteOperation, RdmapErr::kUnexpectedOpcode));
  }
  const RdmapOpcode op = static_cast<RdmapOpcode>(opc);
  // An opcode carried in the wrong DDP model (e.g. a tagged Send) is an unexpected opcode.
  if (tagged != opcode_is_tagged(op)) {
    return fail(term_code(RdmapEtype::kRemoteOperation, RdmapErr::kUnexpectedOpcode));
  }
  if (strict_reserved && (ddp & kDdpReservedMask) != 0) {
    return fail(tagged ? term_code(DdpTaggedErr::kInvalidVersion)
                       : term_code(DdpUntaggedErr::kInvalidVersion));
  }
  if (strict_reserved && (rdmap & kRdmapReservedMask) != 0) {
    return fail(term_code(RdmapEtype::kRemoteOperation, RdmapErr::kUnexpectedOpcode));
  }
  const size_t need = ulpdu_header_size(op);
  if (ulpdu_len < need) return fail(term_code(LlpErr::kMarkerLengthMismatch));

  DdpHeader h;
  h.opcode = op;
  h.last = (ddp & kDdpFlagLast) != 0;
  if (tagged) {
    h.stag = get_be32(ulpdu + kOffTaggedStag);
    h.to = get_be64(ulpdu + kOffTaggedTo);
  } else {
    h.rsvd_ulp = get_be32(ulpdu + kOffUntaggedRsvdUlp);
    h.qn = get_be32(ulpdu + kOffUntaggedQn);
    h.msn = get_be32(ulpdu + kOffUntaggedMsn);
    h.mo = get_be32(ulpdu + kOffUntaggedMo);
    if (h.qn != opcode_queue(op)) return fail(term_code(DdpUntaggedErr::kInvalidQn));
  }
  *out = h;
  DecodeStatus s;
  s.consumed = tagged ? kDdpTaggedHdrSize : kDdpUntaggedHdrSize;
  return s;
}

size_t encode_read_request(const ReadRequest& rr, uint8_t* out) {
  put_be32(out + kOffRrSinkStag, rr.sink_stag);
  put_be64(out + kOffRrSinkTo, rr.sink_to);
  put_be32(out + kOffRrSize, rr.size);
  put_be32(out + kOffRrSrcStag, rr.src_stag);
  put_be64(out + kOffRrSrcTo, rr.src_to);
  return kRdmapReadReqSize;
}

DecodeStatus decode_read_request(const uint8_t* body, size_t len, ReadRequest* out) {
  if (len < kRdmapReadReqSize) return fail(term_code(LlpErr::kMarkerLengthMismatch));
  // A Read Request carries no payload (siw: EPROTO); report it as an RDMAP operation error.
  if (len > kRdmapReadReqSize) {
    return fail(term_code(RdmapEtype::kRemoteOperation, RdmapErr::kUnexpectedOpcode));
  }
  ReadRequest rr;
  rr.sink_stag = get_be32(body + kOffRrSinkStag);
  rr.sink_to = get_be64(body + kOffRrSinkTo);
  rr.size = get_be32(body + kOffRrSize);
  rr.src_stag = get_be32(body + kOffRrSrcStag);
  rr.src_to = get_be64(body + kOffRrSrcTo);
  *out = rr;
  DecodeStatus s;
  s.consumed = kRdmapReadReqSize;
  return s;
}

uint32_t term_control_word(TermCode c, bool m, bool d, bool r) {
  uint32_t w = (static_cast<uint32_t>(c.layer & kNibble) << kTermLayerShift) |
               (static_cast<uint32_t>(c.etype & kNibble) << kTermEtypeShift) |
               (static_cast<uint32_t>(c.code) << kTermCodeShift);
  if (m) w |= kTermFlagM;
  if (d) w |= kTermFlagD;
  if (r) w |= kTermFlagR;
  return w;
}

TermCode term_control_code(uint32_t word) {
  TermCode c;
  c.layer = static_cast<uint8_t>((word >> kTermLayerShift) & kNibble);
  c.etype = static_cast<uint8_t>((word >> kTermEtypeShift) & kNibble);
  c.code = static_cast<uint8_t>(word >> kTermCodeShift);
  return c;
}

TerminateInfo make_terminate(TermCode code, const uint8_t* ulpdu, size_t avail, uint16_t ulpdu_len) {
  TerminateInfo t;
  t.code = code;
  bool copy_ddp = false;
  bool copy_rdmap = false;
  if (code.layer == static_cast<uint8_t>(TermLayer::kDdp)) {
    // The layout is unknown after a DDP version error: copy nothing.
    const bool version = (code.etype == static_cast<uint8_t>(DdpEtype::kTagged) &&
                          code.code == static_cast<uint8_t>(DdpTaggedErr::kInvalidVersion)) ||
                         (code.etype == static_cast<uint8_t>(DdpEtype::kUntagged) &&
                          code.code == static_cast<uint8_t>(DdpUntaggedErr::kInvalidVersion));
    copy_ddp = !version;
  } else if (code.layer == static_cast<uint8_t>(TermLayer::kRdmap)) {
    if (code.etype == static_cast<uint8_t>(RdmapEtype::kRemoteProtection)) {
      copy_ddp = true;
      copy_rdmap = true;
    } else if (code.etype == static_cast<uint8_t>(RdmapEtype::kRemoteOperation)) {
      copy_ddp = code.code != static_cast<uint8_t>(RdmapErr::kInvalidVersion) &&
                 code.code != static_cast<uint8_t>(RdmapErr::kUnexpectedOpcode);
    }
  }
  if (!copy_ddp || ulpdu == nullptr || avail < kMinCtrlBytes) return t;
  const bool tagged = (ulpdu[kOffDdpCtrl] & kDdpFlagTagged) != 0;
  const size_t hl = tagged ? kDdpTaggedHdrSize : kDdpUntaggedHdrSize;
  if (avail < hl) return t;
  t.m = true;
  t.d = true;
  t.ddp_seg_len = ulpdu_len;
  t.ddp_hdr = ulpdu;
  t.ddp_hdr_len = hl;
  if (copy_rdmap) {
    t.r = true;
    const bool rreq = !tagged && (ulpdu[kOffRdmapCtrl] & kRdmapOpcodeMask) ==
                                     static_cast<uint8_t>(RdmapOpcode::kReadRequest);
    if (rreq && avail >= hl + kRdmapReadReqSize) {
      t.rdmap_hdr = ulpdu + hl;
      t.rdmap_hdr_len = kRdmapReadReqSize;
    }
  }
  return t;
}

size_t terminate_body_size(const TerminateInfo& t) {
  size_t n = kTermCtrlSize;
  if (t.m || t.d) n += kTermSegLenSize;
  if (t.d) n += t.ddp_hdr_len;
  if (t.r) n += t.rdmap_hdr_len;
  return n;
}

size_t encode_terminate_body(const TerminateInfo& t, uint8_t* out, size_t cap) {
  if (t.d && t.ddp_hdr_len != kDdpTaggedHdrSize && t.ddp_hdr_len != kDdpUntaggedHdrSize) return 0;
  if (t.d && t.ddp_hdr == nullptr) return 0;
  if (t.r && t.rdmap_hdr_len != 0 && t.rdmap_hdr_len != kRdmapReadReqSize) return 0;
  if (t.r && t.rdmap_hdr_len != 0 && t.rdmap_hdr == nullptr) return 0;
  const size_t n = terminate_body_size(t);
  if (n > cap) return 0;
  put_be32(out, term_control_word(t.code, t.m, t.d, t.r));
  size_t off = kTermCtrlSize;
  // Segment length slot precedes the copied header, as siw and wireshark lay it out.
  if (t.m || t.d) {
    put_be16(out + off, t.m ? t.ddp_seg_len : 0);
    off += kTermSegLenSize;
  }
  if (t.d) {
    std::memcpy(out + off, t.ddp_hdr, t.ddp_hdr_len);
    off += t.ddp_hdr_len;
  }
  if (t.r && t.rdmap_hdr_len != 0) {
    std::memcpy(out + off, t.rdmap_hdr, t.rdmap_hdr_len);
    off += t.rdmap_hdr_len;
  }
  return off;
}

bool term_code_defined(TermCode c) {
  switch (static_cast<TermLayer>(c.layer)) {
    case TermLayer::kRdmap:
      switch (static_cast<RdmapEtype>(c.etype)) {
        case RdmapEtype::kLocalCatastrophic: return c.code == 0x00;
        case RdmapEtype::kRemoteProtection:
          return c.code <= 0x04 || c.code == 0x09 || c.code == 0xFF;
        // 0x09 (STag cannot be invalidated) is defined for both remote error types (RFC 5040 §7, IANA "RDMAP
        // Errors"); we send it as a remote operation error for a Send with Invalidate (rx_stream.cc).
        case RdmapEtype::kRemoteOperation: return (c.code >= 0x05 && c.code <= 0x09) || c.code == 0xFF;
      }
      return false;
    case TermLayer::kDdp:
      switch (static_cast<DdpEtype>(c.etype)) {
        case DdpEtype::kCatastrophic: return c.code == 0x00;
        case DdpEtype::kTagged: return c.code <= 0x04;
        case DdpEtype::kUntagged: return c.code >= 0x01 && c.code <= 0x06;
        default: return false;
      }
    case TermLayer::kLlp:
      return c.etype == static_cast<uint8_t>(LlpEtype::kMpa) && c.code >= 0x01 && c.code <= 0x07;
  }
  return false;
}

namespace {

// Parses what follows the control word for the given flags; false if the body is too short for them.
bool parse_terminate_rest(const uint8_t* body, size_t len, TerminateInfo* t, size_t* consumed) {
  size_t off = kTermCtrlSize;
  if (t->m || t->d) {
    if (len < off + kTermSegLenSize) return false;
    t->ddp_seg_len = get_be16(body + off);
    off += kTermSegLenSize;
  }
  if (t->d) {
    if (len < off + kMinCtrlBytes) return false;
    const size_t hl = (body[off] & kDdpFlagTagged) != 0 ? kDdpTaggedHdrSize : kDdpUntaggedHdrSize;
    if (len < off + hl) return false;
    t->ddp_hdr = body + off;
    t->ddp_hdr_len = hl;
    off += hl;
  }
  // R: a Read Request body follows when the sender included it (siw copies it only for Read Requests).
  if (t->r && len >= off + kRdmapReadReqSize) {
    t->rdmap_hdr = body + off;
    t->rdmap_hdr_len = kRdmapReadReqSize;
    off += kRdmapReadReqSize;
  }
  *consumed = off;
  return true;
}

}  // namespace

// Two layouts of the control word are in use (issue #5 item 4, "follow what interoperates"):
//  * RFC 5040 §4.8: Layer in the high nibble of byte 0, EType in the low one, ErrCode byte 1, M/D/R the top
//    three bits of byte 2 (0x80/0x40/0x20), the rest reserved (zero). We send this layout.
//  * Linux siw (drivers/infiniband/sw/siw/iwarp.h, struct iwarp_terminate) declares the word as C bitfields
//    layer:4 etype:4 ecode:8 flag_m:1 flag_d:1 flag_r:1 reserved:13; on little-endian CPUs (x86) that puts
//    Layer in the LOW nibble of byte 0, EType in the high one, and M/D/R in bits 0/1/2 of byte 2. Observed
//    against siw of Linux 6.1 (test/interop, wire_probe.cc): RDMA Write to an unknown STag → control word
//    11 00 03 00 (DDP/tagged/invalid STag, M+D); FPDU with a bad CRC → 02 02 00 00 (LLP/MPA/CRC error). Its
//    "DDP Segment Length" holds the terminated segment's payload length, not its ULPDU length (we do not
//    rely on that field). siw itself only logs the Terminates it receives, so sending RFC is safe.
// We accept both: each reading is plausible if its reserved bits are zero, its Layer is 0..2 and the body is
// long enough for its flags; when both are plausible and differ, the one whose code the RFCs define wins.
// One plausible reading (or two that agree) is used; otherwise
// the Terminate is marked unreliable (RFC reading kept for logs, no copied headers) and the receiver must not
// attribute it to a particular request (classify_terminate → oldest request, ND_REMOTE_ERROR).
DecodeStatus decode_terminate_body(const uint8_t* body, size_t len, TerminateInfo* out) {
  if (len < kTermCtrlSize) return fail(term_code(LlpErr::kMarkerLengthMismatch));
  const uint32_t w = get_be32(body);
  TerminateInfo rfc;
  rfc.layout = TermLayout::kRfc5040;
  rfc.code = term_control_code(w);
  rfc.m = (w & kTermFlagM) != 0;
  rfc.d = (w & kTermFlagD) != 0;
  rfc.r = (w & kTermFlagR) != 0;
  size_t rfc_used = 0;
  const bool rfc_word = (w & kTermReservedMask) == 0 && rfc.code.layer <= 2;
  const bool rfc_len = parse_terminate_rest(body, len, &rfc, &rfc_used);
  const bool rfc_ok = rfc_word && rfc_len;
  TerminateInfo siw;
  siw.layout = TermLayout::kSiwLe;
  siw.code = TermCode{static_cast<uint8_t>(body[0] & kNibble), static_cast<uint8_t>(body[0] >> 4), body[1]};
  siw.m = (body[2] & 0x01) != 0;
  siw.d = (body[2] & 0x02) != 0;
  siw.r = (body[2] & 0x04) != 0;
  size_t siw_used = 0;
  const bool siw_ok = (body[2] & 0xF8) == 0 && body[3] == 0 && siw.code.layer <= 2 &&
                      parse_terminate_rest(body, len, &siw, &siw_used);
  const bool agree = rfc.code == siw.code && rfc.m == siw.m && rfc.d == siw.d && rfc.r == siw.r;
  bool use_rfc = rfc_ok && (!siw_ok || agree);
  bool use_siw = siw_ok && !rfc_ok;
  if (rfc_ok && siw_ok && !agree) {
    // Both readings fit the bits: the one whose code the RFCs define wins (02 02 00 00 is LLP/CRC for siw,
    // an undefined RDMAP code for RFC); if both or neither are defined, it stays ambiguous.
    const bool rd = term_code_defined(rfc.code);
    const bool sd = term_code_defined(siw.code);
    use_rfc = rd && !sd;
    use_siw = sd && !rd;
  }
  if (!use_rfc && !use_siw && rfc_word && !rfc_len && !siw_ok) {
    return fail(term_code(LlpErr::kMarkerLengthMismatch));  // an RFC Terminate cut short
  }
  DecodeStatus s;
  if (use_rfc) {
    *out = rfc;
    s.consumed = rfc_used;
  } else if (use_siw) {
    *out = siw;
    s.consumed = siw_used;
  } else {
    TerminateInfo t;
    t.layout = TermLayout::kAmbiguous;
    t.reliable = false;
    t.code = rfc.code;
    t.other = siw.code;
    *out = t;
    s.consumed = kTermCtrlSize;
  }
  return s;
}

size_t encode_fpdu_header(const DdpHeader& h, uint16_t ulpdu_len, uint8_t* out) {
  put_be16(out, ulpdu_len);
  return kMpaLenSize + encode_ddp_header(h, out + kMpaLenSize);
}

size_t encode_fpdu_trailer(uint32_t crc_state, size_t ulpdu_len, bool crc_on, uint8_t* out) {
  static constexpr uint8_t kZeros[4] = {0, 0, 0, 0};
  const size_t pad = fpdu_pad(ulpdu_len);
  std::memset(out, 0, pad);
  if (crc_on) {
    crc_state = crc32c_update(crc_state, kZeros, pad);
    put_crc_le(out + pad, crc32c_final(crc_state));
  } else {
    std::memset(out + pad, 0, kMpaTrailerCrcSize);
  }
  return pad + kMpaTrailerCrcSize;
}

bool fpdu_check_crc(const uint8_t* fpdu, size_t ulpdu_len) {
  const size_t covered = kMpaLenSize + ulpdu_len + fpdu_pad(ulpdu_len);
  return crc32c(fpdu, covered) == get_crc_le(fpdu + covered);
}

}  // namespace netdirect::soft::wire

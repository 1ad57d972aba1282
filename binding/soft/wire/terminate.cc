#include "soft/wire/terminate.h"

#include <cstring>

#include "soft/wire/crc32c.h"

namespace netdirect::soft {

using namespace wire;

size_t build_terminate_fpdu(TermCode code, const uint8_t* ulpdu, size_t avail, uint16_t ulpdu_len, bool crc_on,
                            uint8_t* out) {
  TerminateInfo t = make_terminate(code, ulpdu, avail, ulpdu_len);
  const size_t body = terminate_body_size(t);
  const size_t ulen = kDdpUntaggedHdrSize + body;
  DdpHeader h;
  h.opcode = RdmapOpcode::kTerminate;
  h.last = true;
  h.qn = kQnTerminate;
  h.msn = kMsnFirst;  // siw always sends its Terminate with MSN 1
  h.mo = 0;
  size_t off = encode_fpdu_header(h, static_cast<uint16_t>(ulen), out);
  const size_t n = encode_terminate_body(t, out + off, kTermMaxBody);
  if (n == 0) {
    // Copied headers unusable: send the bare control word.
    t = TerminateInfo{};
    t.code = code;
    const size_t bare = kDdpUntaggedHdrSize + kTermCtrlSize;
    off = encode_fpdu_header(h, static_cast<uint16_t>(bare), out);
    off += encode_terminate_body(t, out + off, kTermMaxBody);
  } else {
    off += n;
  }
  const size_t ulpdu_size = off - kMpaLenSize;
  const uint32_t crc = crc_on ? crc32c_update(kCrc32cInit, out, off) : 0;
  off += encode_fpdu_trailer(crc, ulpdu_size, crc_on, out + off);
  return off;
}

bool terminate_declines_setup(const TerminateInfo& t) {
  const auto declines = [](TermCode c) {
    return c == term_code(LlpErr::kLocalCatastrophic) || c == term_code(LlpErr::kInsufficientIrd) ||
           c == term_code(LlpErr::kNoMatchingRtr);
  };
  return declines(t.code) || (!t.reliable && declines(t.other));
}

TermVerdict classify_terminate(const TerminateInfo& t) {
  TermVerdict v;
  v.status = ND_REMOTE_ERROR;
  // A control word we cannot read with confidence (RFC vs siw layout, ddp_rdmap.cc) names nobody: the
  // oldest unconfirmed request fails ND_REMOTE_ERROR, the rest are canceled.
  if (!t.reliable) return v;
  DdpHeader copied;
  bool have_hdr = false;
  if (t.d && t.ddp_hdr != nullptr) {
    const size_t ulen = t.ddp_hdr_len + (t.rdmap_hdr != nullptr ? t.rdmap_hdr_len : 0);
    // Decode only the DDP/RDMAP header part; a Read Request body may or may not follow.
    DecodeStatus s = decode_ddp_header(t.ddp_hdr, t.ddp_hdr_len, &copied);
    if (!s.ok && t.rdmap_hdr != nullptr) s = decode_ddp_header(t.ddp_hdr, ulen, &copied);
    have_hdr = s.ok || (t.ddp_hdr_len >= 2);
    if (!s.ok && t.ddp_hdr_len >= 2) {
      // Header failed validation (e.g. the Read Request body is not contiguous): take the raw fields.
      copied.opcode = static_cast<RdmapOpcode>(t.ddp_hdr[1] & kRdmapOpcodeMask);
      if ((t.ddp_hdr[0] & kDdpFlagTagged) && t.ddp_hdr_len >= kDdpTaggedHdrSize) {
        copied.stag = get_be32(t.ddp_hdr + 2);
        copied.to = get_be64(t.ddp_hdr + 6);
      } else if (t.ddp_hdr_len >= kDdpUntaggedHdrSize) {
        copied.qn = get_be32(t.ddp_hdr + 6);
        copied.msn = get_be32(t.ddp_hdr + 10);
      } else {
        have_hdr = false;
      }
    }
  }
  const auto layer = static_cast<TermLayer>(t.code.layer);
  const bool remote_protection =
      layer == TermLayer::kRdmap && t.code.etype == static_cast<uint8_t>(RdmapEtype::kRemoteProtection);
  const bool ddp_tagged = layer == TermLayer::kDdp && t.code.etype == static_cast<uint8_t>(DdpEtype::kTagged);
  if (have_hdr) {
    switch (copied.opcode) {
      case RdmapOpcode::kWrite:
        v.target = TermTarget::kWrite;
        v.stag = copied.stag;
        v.to = copied.to;
        if (ddp_tagged || remote_protection) v.status = ND_ACCESS_VIOLATION;
        return v;
      case RdmapOpcode::kReadRequest:
        v.target = TermTarget::kRead;
        v.msn = copied.msn;
        v.have_msn = true;
        if (remote_protection || ddp_tagged) v.status = ND_ACCESS_VIOLATION;
        return v;
      case RdmapOpcode::kSend:
      case RdmapOpcode::kSendSe:
      case RdmapOpcode::kSendInvalidate:
      case RdmapOpcode::kSendSeInvalidate:
        v.target = TermTarget::kSend;
        v.msn = copied.msn;
        v.have_msn = true;
        return v;
      default:
        break;  // Read Response / Terminate: our side answered a Read; nothing of ours to name
    }
  }
  if (remote_protection) {
    // A protection error without the copied header can only be about a Read source.
    v.target = TermTarget::kRead;
    v.status = ND_ACCESS_VIOLATION;
  } else if (ddp_tagged) {
    v.target = TermTarget::kWrite;
    v.status = ND_ACCESS_VIOLATION;
  }
  return v;
}

const char* term_code_name(TermCode c) {
  switch (static_cast<TermLayer>(c.layer)) {
    case TermLayer::kRdmap:
      switch (static_cast<RdmapErr>(c.code)) {
        case RdmapErr::kInvalidStag: return "RDMAP invalid STag";
        case RdmapErr::kBaseBounds: return "RDMAP base or bounds violation";
        case RdmapErr::kAccessRights: return "RDMAP access rights violation";
        case RdmapErr::kStagNotAssociated: return "RDMAP STag not associated";
        case RdmapErr::kToWrap: return "RDMAP TO wrap";
        case RdmapErr::kInvalidVersion: return "RDMAP invalid version";
        case RdmapErr::kUnexpectedOpcode: return "RDMAP unexpected opcode";
        case RdmapErr::kCatastrophicStream: return "RDMAP catastrophic (stream)";
        case RdmapErr::kCatastrophicGlobal: return "RDMAP catastrophic (global)";
        case RdmapErr::kStagCannotInvalidate: return "RDMAP STag cannot be invalidated";
        default: return "RDMAP unspecified";
      }
    case TermLayer::kDdp:
      if (c.etype == static_cast<uint8_t>(DdpEtype::kCatastrophic)) return "DDP local catastrophic";
      if (c.etype == static_cast<uint8_t>(DdpEtype::kTagged)) {
        switch (static_cast<DdpTaggedErr>(c.code)) {
          case DdpTaggedErr::kInvalidStag: return "DDP tagged invalid STag";
          case DdpTaggedErr::kBaseBounds: return "DDP tagged base or bounds violation";
          case DdpTaggedErr::kStagNotAssociated: return "DDP tagged STag not associated";
          case DdpTaggedErr::kToWrap: return "DDP tagged TO wrap";
          default: return "DDP tagged invalid version";
        }
      }
      switch (static_cast<DdpUntaggedErr>(c.code)) {
        case DdpUntaggedErr::kInvalidQn: return "DDP untagged invalid QN";
        case DdpUntaggedErr::kNoBuffer: return "DDP untagged no buffer";
        case DdpUntaggedErr::kMsnRange: return "DDP untagged MSN range";
        case DdpUntaggedErr::kInvalidMo: return "DDP untagged invalid MO";
        case DdpUntaggedErr::kMessageTooLong: return "DDP untagged message too long";
        default: return "DDP untagged invalid version";
      }
    case TermLayer::kLlp:
      switch (static_cast<LlpErr>(c.code)) {
        case LlpErr::kConnectionLost: return "MPA connection lost";
        case LlpErr::kCrcError: return "MPA CRC error";
        case LlpErr::kMarkerLengthMismatch: return "MPA ULPDU length mismatch";
        case LlpErr::kInvalidRequestReply: return "MPA invalid request/reply";
        case LlpErr::kLocalCatastrophic: return "MPA local catastrophic";
        case LlpErr::kInsufficientIrd: return "MPA insufficient IRD";
        case LlpErr::kNoMatchingRtr: return "MPA no matching RTR";
        default: return "MPA error";
      }
  }
  return "unknown";
}

}  // namespace netdirect::soft

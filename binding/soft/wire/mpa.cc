#include "soft/wire/mpa.h"

#include <algorithm>
#include <cstring>

namespace netdirect::soft::wire {
namespace {

uint16_t min16(uint16_t a, uint16_t b) { return a < b ? a : b; }
uint16_t max16(uint16_t a, uint16_t b) { return a > b ? a : b; }
uint16_t clamp14(uint16_t v) { return min16(v, kMpaV2IrdOrdMask); }

// Decodes header fields of a complete frame held contiguously in p (hdr + pd_len bytes).
MpaFrame decode_frame(const uint8_t* p, MpaFrameKind kind) {
  MpaFrame f;
  f.kind = kind;
  const uint8_t flags = p[kMpaFlagsOffset];
  f.markers = (flags & kMpaFlagMarkers) != 0;
  f.crc = (flags & kMpaFlagCrc) != 0;
  f.reject = (flags & kMpaFlagReject) != 0;
  f.enhanced = (flags & kMpaFlagEnhanced) != 0;
  f.reserved_flags = flags & kMpaFlagReservedMask;
  f.rev = p[kMpaRevOffset];
  f.pd_length = get_be16(p + kMpaPdLenOffset);
  const uint8_t* pd = p + kMpaHeaderSize;
  size_t app = f.pd_length;
  // v2 semantics only with Rev 2 + Enhanced + room for the words (siw rule, docs/iwarp.md §4).
  if (f.rev == kMpaRev2 && f.enhanced && f.pd_length >= kMpaV2ParamsSize) {
    f.v2 = true;
    f.params = mpa_get_v2_params(pd);
    pd += kMpaV2ParamsSize;
    app -= kMpaV2ParamsSize;
  }
  f.private_data = app != 0 ? pd : nullptr;
  f.private_data_len = static_cast<uint16_t>(app);
  return f;
}

const char* key_for(MpaFrameKind k) {
  return k == MpaFrameKind::kRequest ? kMpaKeyRequest : kMpaKeyReply;
}

// Validates a complete header; returns kNone or the reason.
MpaError check_header(const uint8_t* p, MpaFrameKind expect, size_t max_pd) {
  if (std::memcmp(p, key_for(expect), kMpaKeySize) != 0) return MpaError::kBadKey;
  if (p[kMpaRevOffset] > kMpaRevMax) return MpaError::kBadRev;
  if (get_be16(p + kMpaPdLenOffset) > max_pd) return MpaError::kPrivateDataTooLong;
  return MpaError::kNone;
}

// Preference order for RTR types we may pick/send: Write, then Read; Send only if nothing else and
// the caller explicitly allows it (it needs a pre-posted Receive at the responder).
uint8_t pick_rtr(uint8_t candidates) {
  if (candidates & kRtrWrite) return kRtrWrite;
  if (candidates & kRtrRead) return kRtrRead;
  if (candidates & kRtrSend) return kRtrSend;
  return kRtrNone;
}

MpaDecision decision(MpaAction a, MpaError why, LlpErr code) {
  MpaDecision d;
  d.action = a;
  d.reason = why;
  d.term = term_code(code);
  return d;
}

}  // namespace

const char* mpa_error_name(MpaError e) {
  switch (e) {
    case MpaError::kNone: return "none";
    case MpaError::kBadKey: return "bad MPA key";
    case MpaError::kBadRev: return "unsupported MPA revision";
    case MpaError::kPrivateDataTooLong: return "private data too long";
    case MpaError::kV2ParamsMissing: return "MPA v2 IRD/ORD words missing";
    case MpaError::kEnhancedMismatch: return "reply lacks MPA v2 enhanced mode";
    case MpaError::kMarkers: return "MPA markers not supported";
    case MpaError::kRejected: return "rejected by peer";
    case MpaError::kNoMatchingRtr: return "no matching RTR";
    case MpaError::kInsufficientIrd: return "insufficient IRD";
    case MpaError::kEncodeTooLong: return "private data exceeds send limit";
    case MpaError::kEncodeNoSpace: return "output buffer too small";
  }
  return "unknown";
}

// ---- encoding -------------------------------------------------------------------------------------

void mpa_put_v2_params(const MpaV2Params& p, uint8_t* out) {
  uint16_t ird = clamp14(p.ird);
  uint16_t ord = clamp14(p.ord);
  if (p.p2p) ird |= kMpaV2IrdP2p;
  if (p.rtr & kRtrSend) ird |= kMpaV2IrdSendRtr;
  if (p.rtr & kRtrWrite) ord |= kMpaV2OrdWriteRtr;
  if (p.rtr & kRtrRead) ord |= kMpaV2OrdReadRtr;
  put_be16(out, ird);
  put_be16(out + 2, ord);
}

MpaV2Params mpa_get_v2_params(const uint8_t* in) {
  const uint16_t ird = get_be16(in);
  const uint16_t ord = get_be16(in + 2);
  MpaV2Params p;
  p.p2p = (ird & kMpaV2IrdP2p) != 0;
  p.rtr = static_cast<uint8_t>(((ird & kMpaV2IrdSendRtr) ? kRtrSend : 0) |
                               ((ord & kMpaV2OrdWriteRtr) ? kRtrWrite : 0) |
                               ((ord & kMpaV2OrdReadRtr) ? kRtrRead : 0));
  p.ird = ird & kMpaV2IrdOrdMask;
  p.ord = ord & kMpaV2IrdOrdMask;
  return p;
}

size_t mpa_frame_size(const MpaFrame& f) {
  return kMpaHeaderSize + (f.v2 ? kMpaV2ParamsSize : 0) + f.private_data_len;
}

size_t mpa_encode(const MpaFrame& f, uint8_t* out, size_t cap, MpaError* err) {
  const size_t pd_total = (f.v2 ? kMpaV2ParamsSize : 0) + f.private_data_len;
  if (pd_total > kMpaMaxPrivateDataSend || (f.private_data_len != 0 && f.private_data == nullptr)) {
    if (err) *err = MpaError::kEncodeTooLong;
    return 0;
  }
  const size_t n = kMpaHeaderSize + pd_total;
  if (n > cap) {
    if (err) *err = MpaError::kEncodeNoSpace;
    return 0;
  }
  std::memcpy(out, key_for(f.kind), kMpaKeySize);
  uint8_t flags = 0;
  if (f.markers) flags |= kMpaFlagMarkers;
  if (f.crc) flags |= kMpaFlagCrc;
  if (f.reject) flags |= kMpaFlagReject;
  if (f.enhanced) flags |= kMpaFlagEnhanced;
  out[kMpaFlagsOffset] = flags;
  out[kMpaRevOffset] = f.rev;
  put_be16(out + kMpaPdLenOffset, static_cast<uint16_t>(pd_total));
  uint8_t* pd = out + kMpaHeaderSize;
  if (f.v2) {
    mpa_put_v2_params(f.params, pd);
    pd += kMpaV2ParamsSize;
  }
  if (f.private_data_len != 0) std::memcpy(pd, f.private_data, f.private_data_len);
  if (err) *err = MpaError::kNone;
  return n;
}

// ---- parsing --------------------------------------------------------------------------------------

MpaParser::MpaParser(MpaFrameKind expect, size_t max_private_data)
    : expect_(expect),
      max_pd_(std::min(max_private_data, kMpaMaxPrivateDataRecv)),
      buf_{} {}

void MpaParser::reset() {
  status_ = MpaParseStatus::kNeedMore;
  error_ = MpaError::kNone;
  have_ = 0;
  total_ = 0;
}

size_t MpaParser::bytes_needed() const {
  if (status_ != MpaParseStatus::kNeedMore) return 0;
  if (total_ == 0) return kMpaHeaderSize - have_;
  return total_ - have_;
}

MpaParseStatus MpaParser::feed(const uint8_t* data, size_t len, size_t* consumed) {
  size_t used = 0;
  while (status_ == MpaParseStatus::kNeedMore && used < len) {
    const size_t want = bytes_needed();
    const size_t take = std::min(want, len - used);
    std::memcpy(buf_ + have_, data + used, take);
    have_ += take;
    used += take;
    if (total_ == 0 && have_ == kMpaHeaderSize) {
      error_ = check_header(buf_, expect_, max_pd_);
      if (error_ != MpaError::kNone) {
        status_ = MpaParseStatus::kError;
        break;
      }
      total_ = kMpaHeaderSize + get_be16(buf_ + kMpaPdLenOffset);
    }
    if (total_ != 0 && have_ == total_) status_ = MpaParseStatus::kOk;
  }
  if (consumed) *consumed = used;
  return status_;
}

MpaFrame MpaParser::frame() const { return decode_frame(buf_, expect_); }

MpaParseStatus mpa_parse(const uint8_t* data, size_t len, MpaFrameKind expect, MpaFrame* out,
                         size_t* consumed, MpaError* err, size_t max_private_data) {
  if (consumed) *consumed = 0;
  if (err) *err = MpaError::kNone;
  if (len < kMpaHeaderSize) return MpaParseStatus::kNeedMore;
  const MpaError e =
      check_header(data, expect, std::min(max_private_data, kMpaMaxPrivateDataRecv));
  if (e != MpaError::kNone) {
    if (err) *err = e;
    return MpaParseStatus::kError;
  }
  const size_t total = kMpaHeaderSize + get_be16(data + kMpaPdLenOffset);
  if (len < total) return MpaParseStatus::kNeedMore;
  *out = decode_frame(data, expect);
  if (consumed) *consumed = total;
  return MpaParseStatus::kOk;
}

// ---- negotiation ----------------------------------------------------------------------------------

MpaDecision mpa_parse_failure(MpaFrameKind kind, MpaError e) {
  // Responder (parsing a Request): siw returns EPROTO and just closes. Initiator (parsing a Reply):
  // siw sends Terminate LLP/MPA/0x04 on a bad key; we do so for every malformed Reply.
  if (kind == MpaFrameKind::kRequest) {
    return decision(MpaAction::kDrop, e, LlpErr::kInvalidRequestReply);
  }
  return decision(MpaAction::kTerminate, e, LlpErr::kInvalidRequestReply);
}

MpaFrame mpa_make_request(const MpaLocal& local, const uint8_t* private_data, uint16_t len) {
  MpaFrame f;
  f.kind = MpaFrameKind::kRequest;
  f.crc = local.want_crc;
  f.private_data = private_data;
  f.private_data_len = len;
  if (!local.use_v2) {
    f.rev = kMpaRev1;
    return f;
  }
  f.rev = kMpaRev2;
  f.enhanced = true;
  f.v2 = true;
  f.params.ird = clamp14(min16(local.ird, local.max_ird));
  f.params.ord = clamp14(min16(local.ord, local.max_ord));
  if (local.p2p) {
    f.params.p2p = true;
    f.params.rtr = local.rtr_types & kRtrAll;
    // A zero-length Read RTR takes one ORD slot (siw/qed force ORD >= 1 for P2P, docs/iwarp.md §1.2).
    if ((f.params.rtr & kRtrRead) && f.params.ord == 0 && local.max_ord > 0) f.params.ord = 1;
  }
  return f;
}

MpaFrame mpa_make_reject(const MpaFrame& request, const MpaLocal& local, const uint8_t* private_data,
                         uint16_t len) {
  MpaFrame r;
  r.kind = MpaFrameKind::kReply;
  r.reject = true;
  r.markers = false;  // siw clears M in its reject
  r.rev = request.rev;
  r.crc = request.crc || local.want_crc;
  r.enhanced = request.v2;
  r.v2 = request.v2;
  if (r.v2) {
    r.params.ird = clamp14(min16(local.ird, local.max_ird));
    r.params.ord = clamp14(min16(local.ord, local.max_ord));
  }
  r.private_data = private_data;
  r.private_data_len = len;
  return r;
}

MpaDecision mpa_respond(const MpaFrame& request, const MpaLocal& local, MpaFrame* reply,
                        MpaNegotiated* out) {
  MpaDecision d;
  // The parser already refused a bad key, Rev > 2 and oversize private data.
  const bool enhanced_req = request.rev == kMpaRev2 && request.enhanced;
  auto reject = [&](MpaError why, LlpErr code) {
    *reply = mpa_make_reject(request, local, nullptr, 0);
    d = decision(MpaAction::kReject, why, code);
    d.reply_frame = request.rev >= kMpaRev1;  // siw sends no reject frame to Rev 0 peers
    return d;
  };
  if (enhanced_req && !request.v2) return reject(MpaError::kV2ParamsMissing, LlpErr::kInvalidRequestReply);
  if (request.markers) return reject(MpaError::kMarkers, LlpErr::kInvalidRequestReply);

  MpaNegotiated n;
  n.rev = request.rev;
  n.v2 = request.v2;
  n.crc = request.crc || local.want_crc;  // RFC 5044: CRC is used if either side asks

  const uint16_t app_ird = min16(local.ird, local.max_ird);
  const uint16_t app_ord = min16(local.ord, local.max_ord);
  MpaFrame r;
  r.kind = MpaFrameKind::kReply;
  r.rev = request.rev;  // echo Rev and Enhanced as siw does
  r.enhanced = request.v2;
  r.crc = n.crc;
  r.v2 = request.v2;

  if (!request.v2) {
    // v1 peers carry no IRD/ORD: use the application's values as given (siw, docs/iwarp.md §4).
    n.ird = app_ird;
    n.ord = app_ord;
  } else {
    const MpaV2Params& peer = request.params;
    // Our ORD must not exceed the initiator's IRD; our IRD must cover the initiator's ORD (RFC 6581,
    // docs/iwarp.md §1.2). Like siw's relaxed mode (siw_accept) we lower the app's ORD to the peer's IRD
    // and raise the app's IRD to the peer's ORD, bounded by our device maxima; with strict_ird_ord we
    // refuse instead (LLP 0x06). If the peer's ORD exceeds our max IRD we answer with our max and let
    // the initiator lower its ORD (siw does the same; a strict initiator will Terminate 0x06).
    if (local.strict_ird_ord && (local.ord > peer.ird || local.ird < peer.ord)) {
      return reject(MpaError::kInsufficientIrd, LlpErr::kInsufficientIrd);
    }
    n.ord = min16(app_ord, peer.ird);
    n.ird = min16(max16(app_ird, peer.ord), local.max_ird);

    if (peer.p2p) {
      // Echo A and pick exactly one offered type we accept: Write, then Read; never Send, which would
      // need a pre-posted Receive (siw prefers the same; unlike siw we do not propose Write when it
      // was not offered, we refuse with "no matching RTR").
      uint8_t usable = peer.rtr & local.rtr_types & (kRtrWrite | kRtrRead);
      // A Read RTR consumes one of our IRD slots.
      if ((usable & kRtrRead) && n.ird == 0) {
        if (local.max_ird > 0) {
          n.ird = 1;
        } else {
          usable &= static_cast<uint8_t>(~kRtrRead);
        }
      }
      const uint8_t rtr = pick_rtr(usable);
      if (rtr == kRtrNone) {
        const bool read_only_blocked = (peer.rtr & local.rtr_types & kRtrRead) && local.max_ird == 0;
        return reject(read_only_blocked ? MpaError::kInsufficientIrd : MpaError::kNoMatchingRtr,
                      read_only_blocked ? LlpErr::kInsufficientIrd : LlpErr::kNoMatchingRtr);
      }
      n.p2p = true;
      n.rtr = rtr;
      r.params.p2p = true;
      r.params.rtr = rtr;
    }
    r.params.ird = clamp14(n.ird);
    r.params.ord = clamp14(n.ord);
  }
  *reply = r;
  if (out) *out = n;
  d = MpaDecision{};
  return d;
}

MpaDecision mpa_check_reply(const MpaFrame& request, const MpaFrame& reply, const MpaLocal& local,
                            MpaNegotiated* out) {
  // Reject first: its frame may legitimately differ in everything else (siw checks it first too).
  if (reply.reject) return decision(MpaAction::kRejected, MpaError::kRejected, LlpErr::kInvalidRequestReply);
  if (reply.markers) return decision(MpaAction::kTerminate, MpaError::kMarkers, LlpErr::kInvalidRequestReply);
  if (reply.rev > request.rev) {
    return decision(MpaAction::kTerminate, MpaError::kBadRev, LlpErr::kInvalidRequestReply);
  }
  // A v2 Request must get Rev 2 + Enhanced + IRD/ORD words back (siw fails the connect otherwise);
  // v2 words we did not ask for are a protocol error as well.
  if (request.v2 != reply.v2) {
    return decision(MpaAction::kTerminate, MpaError::kEnhancedMismatch, LlpErr::kInvalidRequestReply);
  }

  MpaNegotiated n;
  n.rev = reply.rev;
  n.v2 = reply.v2;
  n.crc = request.crc || reply.crc;  // either side's C turns CRC on (docs/iwarp.md §1.3)
  uint16_t ird = min16(local.ird, local.max_ird);
  uint16_t ord = min16(local.ord, local.max_ord);

  if (reply.v2) {
    const MpaV2Params& rep = reply.params;
    // Our IRD must cover the responder's ORD: raise it (bounded by max_ird) unless strict; siw's
    // initiator does the same in relaxed mode and sends Terminate 0x06 otherwise.
    if (ird < rep.ord) {
      if (local.strict_ird_ord || rep.ord > local.max_ird) {
        return decision(MpaAction::kTerminate, MpaError::kInsufficientIrd, LlpErr::kInsufficientIrd);
      }
      ird = rep.ord;
    }
    // Our ORD must not exceed the responder's IRD: lower it unless strict. (siw adopts ORD := Reply
    // IRD even when that is larger than the app asked; we keep the app's ORD as an upper bound.)
    if (ord > rep.ird) {
      if (local.strict_ird_ord) {
        return decision(MpaAction::kTerminate, MpaError::kInsufficientIrd, LlpErr::kInsufficientIrd);
      }
      ord = rep.ird;
    }
    if (request.params.p2p) {
      // RFC 6581 §9.2: the Reply MUST echo A; then send the type the Reply chose, limited to what we
      // offered (siw once sent its own preference and got a Terminate, docs/iwarp.md §1.2).
      const uint8_t chosen = rep.rtr & request.params.rtr;
      if (!rep.p2p || chosen == kRtrNone) {
        return decision(MpaAction::kTerminate, MpaError::kNoMatchingRtr, LlpErr::kNoMatchingRtr);
      }
      const uint8_t rtr = pick_rtr(chosen);
      if (rtr == kRtrRead && ord == 0) {
        if (local.max_ord == 0 || rep.ird == 0) {
          return decision(MpaAction::kTerminate, MpaError::kInsufficientIrd, LlpErr::kInsufficientIrd);
        }
        ord = 1;
      }
      n.p2p = true;
      n.rtr = rtr;
    }
    // A Reply with A that we did not request is ignored: no RTR is owed.
  }
  n.ird = ird;
  n.ord = ord;
  if (out) *out = n;
  return MpaDecision{};
}

}  // namespace netdirect::soft::wire

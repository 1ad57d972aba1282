// Fuzz target: MPA Request/Reply parsing and connection setup (binding/soft/wire/mpa.*, binding/soft/cm/cm.*) on
// the bytes a peer sends before the first FPDU. Input: one settings byte, then the peer's bytes.
//   settings bit 0: 0 = we are the responder (the bytes are the peer's Request), 1 = the initiator (we sent our
//                   Request, the bytes are the peer's Reply); bits 1-3: receive chunk size (fuzz::chunk_size);
//                   bit 4: our CRC request; bit 5: initiator without peer-to-peer (no RTR offered).
// Invariants beyond "no crash":
//  * the incremental parser (any chunking) and the one-shot parser agree on status, error, size and every field;
//  * a parsed frame encodes back to the same bytes (reserved flag bits excepted) when it fits our send limit;
//  * the setup's outcome is one of its documented events, and what it queues to send is well-formed: a
//    responder's Reply parses (R set when it refuses), and an initiator's failure sends nothing or one Terminate
//    FPDU with a defined LLP code and a correct CRC when CRC was requested;
//  * a Request we accept gets a Reply that the initiator logic (mpa_check_reply) accepts with the same CRC and
//    RTR choice; a Reply we accept leaves CRC on iff either side asked for it.
#include <cstring>
#include <vector>

#include "fuzz_check.h"
#include "soft/cm/cm.h"
#include "soft/wire/crc32c.h"
#include "soft/wire/ddp_rdmap.h"
#include "soft/wire/mpa.h"

using namespace netdirect::soft;
using namespace netdirect::soft::wire;

namespace {

bool same_frame(const MpaFrame& a, const MpaFrame& b) {
  return a.kind == b.kind && a.markers == b.markers && a.crc == b.crc && a.reject == b.reject &&
         a.enhanced == b.enhanced && a.reserved_flags == b.reserved_flags && a.rev == b.rev && a.v2 == b.v2 &&
         a.params.p2p == b.params.p2p && a.params.rtr == b.params.rtr && a.params.ird == b.params.ird &&
         a.params.ord == b.params.ord && a.private_data_len == b.private_data_len && a.pd_length == b.pd_length &&
         (a.private_data_len == 0 || std::memcmp(a.private_data, b.private_data, a.private_data_len) == 0);
}

// The parser: incremental (in chunks) vs one-shot, and parse → encode → same bytes.
void check_parser(const uint8_t* data, size_t len, MpaFrameKind kind, size_t chunk) {
  MpaFrame one;
  size_t one_used = 0;
  MpaError one_err = MpaError::kNone;
  const MpaParseStatus one_st = mpa_parse(data, len, kind, &one, &one_used, &one_err);

  MpaParser p(kind);
  size_t used = 0;
  MpaParseStatus st = MpaParseStatus::kNeedMore;
  while (used < len) {
    const size_t n = len - used < chunk ? len - used : chunk;
    size_t took = 0;
    st = p.feed(data + used, n, &took);
    FUZZ_CHECK(took <= n, "parser consumed %zu of %zu bytes offered", took, n);
    used += took;
    if (st != MpaParseStatus::kNeedMore) break;
    FUZZ_CHECK(took == n, "parser needs more but took %zu of %zu", took, n);
  }
  FUZZ_CHECK(st == one_st, "incremental status %d, one-shot %d", static_cast<int>(st), static_cast<int>(one_st));
  if (st == MpaParseStatus::kError) {
    FUZZ_CHECK(p.error() == one_err && one_err != MpaError::kNone, "errors differ: %s vs %s",
               mpa_error_name(p.error()), mpa_error_name(one_err));
    return;
  }
  if (st != MpaParseStatus::kOk) return;
  FUZZ_CHECK(used == one_used, "incremental consumed %zu, one-shot %zu", used, one_used);
  const MpaFrame f = p.frame();
  FUZZ_CHECK(same_frame(f, one), "incremental and one-shot frames differ");
  FUZZ_CHECK(one_used == kMpaHeaderSize + one.pd_length && one_used == mpa_frame_size(one),
             "frame size %zu vs PD_Length %u", one_used, one.pd_length);

  uint8_t out[kMpaMaxFrameRecv];
  MpaError enc_err = MpaError::kNone;
  const size_t n = mpa_encode(one, out, sizeof out, &enc_err);
  if (one.pd_length > kMpaMaxPrivateDataSend) {
    FUZZ_CHECK(n == 0 && enc_err == MpaError::kEncodeTooLong, "encoded %zu bytes above the send limit", n);
    return;
  }
  FUZZ_CHECK(n == one_used, "re-encoded %zu bytes, parsed %zu", n, one_used);
  std::vector<uint8_t> want(data, data + one_used);
  want[kMpaFlagsOffset] &= static_cast<uint8_t>(~kMpaFlagReservedMask);
  FUZZ_CHECK(std::memcmp(out, want.data(), n) == 0, "parse -> encode does not give the received bytes back");
}

// One Terminate FPDU, exactly `len` bytes, with a defined LLP/MPA code.
void check_terminate_fpdu(const uint8_t* p, size_t len, bool crc) {
  FUZZ_CHECK(len >= kFpduHdrTerminate, "%zu bytes after the Request are too short for a Terminate", len);
  const uint16_t ulen = get_be16(p);
  FUZZ_CHECK(fpdu_size(ulen) == len, "Terminate FPDU of %zu bytes, ULPDU Length %u", len, ulen);
  DdpHeader h;
  const DecodeStatus st = decode_ddp_header(p + kMpaLenSize, ulen, &h);
  FUZZ_CHECK(st.ok && h.opcode == RdmapOpcode::kTerminate && h.last, "queued FPDU is not a Terminate");
  TerminateInfo t;
  const DecodeStatus bt = decode_terminate_body(p + kFpduHdrSend, ulen - kDdpUntaggedHdrSize, &t);
  // (Read back with the RFC 5040 layout: LLP codes 0x05-0x07 without copied headers are also plausible in siw's
  // layout, so decode_terminate_body marks them unreliable, keeping the RFC reading; ddp_rdmap.cc.)
  FUZZ_CHECK(bt.ok && t.code.layer == static_cast<uint8_t>(TermLayer::kLlp) && term_code_defined(t.code),
             "Terminate code %u/%u/%u not a defined LLP code", t.code.layer, t.code.etype, t.code.code);
  if (crc) FUZZ_CHECK(fpdu_check_crc(p, ulen), "Terminate FPDU with a bad CRC");
}

// The initiator's settings that would have sent `req` (for checking our Reply from its side).
MpaLocal initiator_of(const MpaFrame& req) {
  MpaLocal l;
  l.want_crc = req.crc;
  l.use_v2 = req.v2;
  l.p2p = req.v2 && req.params.p2p;
  l.rtr_types = req.v2 ? req.params.rtr : kRtrNone;
  l.ird = req.v2 ? req.params.ird : 1;
  l.ord = req.v2 ? req.params.ord : 1;
  l.max_ird = l.ird;
  l.max_ord = l.ord;
  // An initiator that offers a Read RTR can issue that one Read, whatever ORD it asks for (ours raises ORD 0 to 1
  // then, mpa_check_reply): modelling it with a device maximum of 0 made a consistent Reply look refused.
  if (l.p2p && (l.rtr_types & kRtrRead) && l.max_ord == 0) l.max_ord = 1;
  return l;
}

void feed_setup(cm::MpaSetup& s, const uint8_t* data, size_t len, size_t chunk, cm::MpaEvent* last) {
  size_t used = 0;
  *last = cm::MpaEvent::kNone;
  while (used < len) {
    const size_t n = len - used < chunk ? len - used : chunk;
    const cm::MpaEvent ev = s.on_bytes(data + used, n);
    used += n;
    if (ev != cm::MpaEvent::kNone) *last = ev;
    if (s.state() == cm::MpaState::kFailed) break;
  }
}

void responder(const uint8_t* data, size_t len, size_t chunk) {
  cm::MpaSetup s;
  s.start_responder();
  cm::MpaEvent ev;
  feed_setup(s, data, len, chunk, &ev);
  if (s.state() == cm::MpaState::kFailed) {
    FUZZ_CHECK(s.status() != ND_SUCCESS, "failed setup with ND_SUCCESS");
    if (s.out_size() == 0) return;
    MpaFrame r;
    size_t used = 0;
    MpaError err;
    FUZZ_CHECK(mpa_parse(s.out_data(), s.out_size(), MpaFrameKind::kReply, &r, &used, &err) == MpaParseStatus::kOk &&
                   used == s.out_size() && r.reject,
               "a refused Request gets something else than one reject Reply (%zu bytes)", s.out_size());
    return;
  }
  if (s.state() != cm::MpaState::kRequestHeld) {
    FUZZ_CHECK(s.state() == cm::MpaState::kAwaitRequest && s.out_size() == 0, "state %d after a partial Request",
               static_cast<int>(s.state()));
    return;
  }
  // Accept as a listener does, then check our Reply from the initiator's side.
  const MpaFrame req = s.peer_frame();
  const uint8_t pd[3] = {1, 2, 3};
  const HRESULT hr = s.accept(cm::responder_settings(req, 4, 4), pd, sizeof pd);
  MpaFrame reply;
  size_t used = 0;
  MpaError err;
  if (hr != ND_SUCCESS) {
    FUZZ_CHECK(s.out_size() == 0 ||
                   (mpa_parse(s.out_data(), s.out_size(), MpaFrameKind::kReply, &reply, &used, &err) ==
                        MpaParseStatus::kOk && reply.reject),
               "a failed accept queued something else than a reject Reply");
    return;
  }
  FUZZ_CHECK(mpa_parse(s.out_data(), s.out_size(), MpaFrameKind::kReply, &reply, &used, &err) == MpaParseStatus::kOk &&
                 used == s.out_size() && !reply.reject,
             "accepting Reply does not parse (%s)", mpa_error_name(err));
  MpaNegotiated theirs;
  const MpaDecision d = mpa_check_reply(req, reply, initiator_of(req), &theirs);
  const MpaNegotiated& ours = s.negotiated();
  FUZZ_CHECK(d.action == MpaAction::kAccept, "our Reply to an accepted Request is refused by the initiator logic: %s",
             mpa_error_name(d.reason));
  FUZZ_CHECK(theirs.crc == ours.crc && ours.crc == (req.crc || reply.crc), "CRC: initiator %d, responder %d",
             theirs.crc, ours.crc);
  FUZZ_CHECK(theirs.p2p == ours.p2p && theirs.rtr == ours.rtr, "RTR: initiator %d/%u, responder %d/%u", theirs.p2p,
             theirs.rtr, ours.p2p, ours.rtr);
}

void initiator(const uint8_t* data, size_t len, size_t chunk, bool crc, bool p2p) {
  cm::MpaSetup s;
  MpaLocal l = cm::initiator_settings(4, 4);
  l.want_crc = crc;
  if (!p2p) {
    l.p2p = false;
    l.rtr_types = kRtrNone;
  }
  FUZZ_CHECK(s.start_initiator(l, "fz", 2) == ND_SUCCESS, "start_initiator failed");
  MpaFrame req;
  size_t req_len = 0;
  MpaError err;
  FUZZ_CHECK(mpa_parse(s.out_data(), s.out_size(), MpaFrameKind::kRequest, &req, &req_len, &err) ==
                 MpaParseStatus::kOk && req_len == s.out_size(),
             "our Request does not parse");
  s.out_consumed(req_len);
  cm::MpaEvent ev;
  feed_setup(s, data, len, chunk, &ev);
  switch (s.state()) {
    case cm::MpaState::kFailed:
      FUZZ_CHECK(s.status() != ND_SUCCESS, "failed setup with ND_SUCCESS");
      if (s.out_size() != 0) check_terminate_fpdu(s.out_data(), s.out_size(), crc || s.peer_frame().crc);
      return;
    case cm::MpaState::kReplyAccepted:
      FUZZ_CHECK(s.out_size() == 0, "accepted Reply but %zu bytes queued", s.out_size());
      FUZZ_CHECK(s.negotiated().crc == (crc || s.peer_frame().crc), "CRC %d, ours %d, peer's %d", s.negotiated().crc,
                 crc, s.peer_frame().crc);
      FUZZ_CHECK(!s.negotiated().p2p || (p2p && (s.negotiated().rtr & l.rtr_types) != 0 &&
                                         (s.negotiated().rtr == kRtrWrite || s.negotiated().rtr == kRtrRead)),
                 "RTR %u chosen, offered %u", s.negotiated().rtr, l.rtr_types);
      return;
    case cm::MpaState::kRejected:
      FUZZ_CHECK(s.status() == ND_CONNECTION_REFUSED && s.peer_frame().reject, "rejection without R");
      return;
    default:
      FUZZ_CHECK(s.state() == cm::MpaState::kAwaitReply && s.out_size() == 0, "state %d after a partial Reply",
                 static_cast<int>(s.state()));
      return;
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  fuzz::Input in(data, size);
  const uint8_t cfg = in.byte();
  const size_t chunk = fuzz::chunk_size(static_cast<uint8_t>(cfg >> 1));
  const bool as_initiator = (cfg & 1) != 0;
  check_parser(in.rest(), in.rest_size(), as_initiator ? MpaFrameKind::kReply : MpaFrameKind::kRequest, chunk);
  if (as_initiator) {
    initiator(in.rest(), in.rest_size(), chunk, (cfg & 0x10) != 0, (cfg & 0x20) == 0);
  } else {
    responder(in.rest(), in.rest_size(), chunk);
  }
  return 0;
}

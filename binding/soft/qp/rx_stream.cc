// Receive stream: FPDU parsing, every check on inbound DDP/RDMAP segments (MSN, MO, STag, key, rights, bounds),
// placement (zero-copy readv with CRC off; staged, CRC-checked, then copied with CRC on), Read Request queuing and
// Terminate decoding (design: qp.h "Receive", rx_stream.h).
#include "soft/qp/rx_stream.h"

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <new>

#include "soft/wire/crc32c.h"
#include "soft/wire/mpa.h"
#include "soft/memory/stag_table.h"
#include "soft/wire/terminate.h"

namespace netdirect::soft {

using namespace wire;

namespace {
constexpr size_t kPeek = kFpduHdrTagged;  // 16: the smallest FPDU header, safe to read ahead
constexpr int kRxBudget = RxStream::kRxBudget;

TermCode tagged_code(StagCheck c) {
  return term_code(c == StagCheck::kBounds ? DdpTaggedErr::kBaseBounds : DdpTaggedErr::kInvalidStag);
}
TermCode read_source_code(StagCheck c) {
  RdmapErr e = c == StagCheck::kBounds ? RdmapErr::kBaseBounds
               : c == StagCheck::kAccess ? RdmapErr::kAccessRights
                                         : RdmapErr::kInvalidStag;
  return term_code(RdmapEtype::kRemoteProtection, e);
}
}  // namespace

RxStream::~RxStream() { release(); }

void RxStream::release() {
  // No completions here: the owner is going away (it completes or flushes through stop() while alive).
  if (have_recv_) release_local_sges(stags_, recv_.sge, recv_.nsge);
  have_recv_ = false;
  if (pin_ != 0) stags_.unpin(pin_);
  pin_ = 0;
}

void RxStream::start(bool crc, bool await_rtr, uint8_t rtr) {
  crc_ = crc;
  awaiting_rtr_ = await_rtr;
  rtr_ = rtr;
}

void RxStream::stop(HRESULT recv_status) {
  if (state_ == State::kStopped && !have_recv_ && pin_ == 0) return;
  state_ = State::kStopped;
  if (pin_ != 0) {
    stags_.unpin(pin_);
    pin_ = 0;
  }
  if (have_recv_) {
    have_recv_ = false;
    events_.rx_receive_done(recv_, recv_status, send_placed_, false);
  }
}

void RxStream::fail(TermCode code, HRESULT recv_status, const uint8_t* ulpdu, size_t avail, HRESULT read_status) {
  if (ulpdu == nullptr) {
    ulpdu = buf_ + kMpaLenSize;
    avail = have_ > kMpaLenSize ? have_ - kMpaLenSize : 0;
  }
  events_.rx_protocol_error(code, recv_status, read_status, ulpdu, avail, ulpdu_len_);
  stop(recv_status);  // (normally done already by the owner's failure handling)
}

void RxStream::lost(HRESULT status, bool peer_gone) {
  events_.rx_connection_failed(status, peer_gone);
  stop(ND_CANCELED);
}

void RxStream::progress(RxSource& src) {
  if (state_ == State::kStopped) return;
  if (!stage_) {
    stage_.reset(new (std::nothrow) uint8_t[kRxStageSmall]);
    if (!stage_) {
      lost(ND_INSUFFICIENT_RESOURCES, false);
      return;
    }
    stage_cap_ = kRxStageSmall;
  }
  uint8_t* stage = stage_.get();
  int syscalls = 0;
  bool drained = false;  // the last receive returned less than asked: the socket is (very likely) empty
  for (;;) {
    if (state_ == State::kStopped) return;
    if (state_ == State::kHeader) {
      if (have_ < need_) {
        if (stage_pos_ == stage_end_) {
          // Level-triggered readiness (engine) or the next inline poll picks up anything that arrives later.
          if (drained || syscalls++ >= kRxBudget) return;
          const ptrdiff_t n = src.read(stage, stage_cap_);
          if (n == -EAGAIN || n == -EWOULDBLOCK || n == -EINTR) return;
          if (n <= 0) {
            // Peer closed (orderly at an FPDU boundary) or the connection broke: cancel everything.
            lost(n == 0 && have_ == 0 ? ND_SUCCESS : ND_CONNECTION_ABORTED, true);
            return;
          }
          stage_pos_ = 0;
          stage_end_ = static_cast<size_t>(n);
          drained = stage_end_ < stage_cap_;
        }
        // Exactly the header bytes still needed (a control FPDU is taken whole, nothing beyond it).
        const size_t take = std::min(need_ - have_, stage_end_ - stage_pos_);
        std::memcpy(buf_ + have_, stage + stage_pos_, take);
        stage_pos_ += take;
        have_ += take;
        if (!check_ulpdu_length()) return;
        if (have_ < need_) continue;
      }
      if (!header()) return;
      if (state_ == State::kPayload && ulpdu_len_ > kRxMediumFpdu && ulpdu_len_ <= kRxCopyFpdu &&
          stage_cap_ < kRxStageLarge) {
        if (!grow_stage()) return;
        stage = stage_.get();
      }
      continue;
    }
    if (crc_) {
      // CRC on: the rest of the FPDU (payload, pad, CRC) is collected in the staging buffer, checked there, and
      // only then copied into its target (qp.h, Receive). Never CRC the target itself: the consumer may
      // rewrite placed bytes at once (a spin on the last byte), and a failing FPDU must place nothing.
      const size_t need = payload_len_ + trailer_len_;
      const size_t avail = stage_end_ - stage_pos_;
      if (avail >= need) {
        const uint8_t* src = stage + stage_pos_;
        stage_pos_ += need;
        if (!staged_fpdu(src)) return;
        continue;
      }
      if (drained || syscalls++ >= kRxBudget) return;
      if (avail == 0) stage_pos_ = stage_end_ = 0;
      if (stage_cap_ - stage_pos_ < need) {
        if (stage_cap_ < need) {
          if (!grow_stage()) return;  // moves the pending bytes to the front
          stage = stage_.get();
        } else {
          std::memmove(stage, stage + stage_pos_, avail);
          stage_pos_ = 0;
          stage_end_ = avail;
        }
      }
      // Read-ahead as on the zero-copy path: a whole stage behind a small FPDU, a header's worth behind a large one
      // (so that the next large FPDU starts near the front and nothing has to be moved).
      const size_t until = ulpdu_len_ <= kRxCopyFpdu ? stage_cap_
                                                        : std::min(stage_cap_, stage_pos_ + need + kPeek);
      const size_t ask = until - stage_end_;
      const ptrdiff_t n = src.read(stage + stage_end_, ask);
      if (n == -EAGAIN || n == -EWOULDBLOCK || n == -EINTR) return;
      if (n <= 0) {
        lost(ND_CONNECTION_ABORTED, true);
        return;
      }
      stage_end_ += static_cast<size_t>(n);
      drained = until == stage_cap_ && static_cast<size_t>(n) < ask;
      continue;
    }
    if (stage_pos_ < stage_end_) {
      // CRC off: payload (possibly empty) + trailer copied from the staging buffer.
      const uint8_t* src = stage + stage_pos_;
      size_t avail = stage_end_ - stage_pos_;
      while (avail > 0 && piece_pos_ < piece_count_) {
        iovec& p = piece_[piece_pos_];
        const size_t take = std::min(avail, p.iov_len);
        std::memcpy(p.iov_base, src, take);
        p.iov_base = static_cast<uint8_t*>(p.iov_base) + take;
        p.iov_len -= take;
        src += take;
        avail -= take;
        if (p.iov_len == 0) ++piece_pos_;
      }
      const size_t t = std::min(avail, trailer_len_ - trailer_have_);
      std::memcpy(trailer_ + trailer_have_, src, t);
      trailer_have_ += t;
      avail -= t;
      stage_pos_ = stage_end_ - avail;
      if (trailer_have_ < trailer_len_) continue;  // staging buffer used up
      have_ = 0;
      need_ = kPeek;
      if (!segment_done()) return;
      continue;
    }
    // CRC off, staging buffer empty: the rest of the payload straight into the target, the trailer, and a read-ahead
    // into the staging buffer (a whole one behind a small FPDU; only a header's worth behind a large one, so
    // that the next large payload is not copied).
    if (drained || syscalls++ >= kRxBudget) return;
    iovec iov[limits::kMaxSge + 3];
    int cnt = 0;
    size_t rest = trailer_len_ - trailer_have_;
    for (int i = piece_pos_; i < piece_count_; ++i) {
      iov[cnt++] = piece_[i];
      rest += piece_[i].iov_len;
    }
    iov[cnt++] = iovec{trailer_ + trailer_have_, trailer_len_ - trailer_have_};
    const size_t ahead = ulpdu_len_ <= kRxCopyFpdu ? stage_cap_ : kPeek;
    iov[cnt++] = iovec{stage, ahead};
    const ptrdiff_t n = src.readv(iov, cnt);
    if (n == -EAGAIN || n == -EWOULDBLOCK || n == -EINTR) return;
    if (n <= 0) {
      lost(ND_CONNECTION_ABORTED, true);
      return;
    }
    // Short read behind a small FPDU: the socket is empty. Within a large payload keep reading (more of a
    // stream is usually arriving while we copy; going back to epoll would cost a sleep and a wake-up).
    drained = ahead == stage_cap_ && static_cast<size_t>(n) < rest + ahead;
    size_t left = static_cast<size_t>(n);
    while (left > 0 && piece_pos_ < piece_count_) {
      iovec& p = piece_[piece_pos_];
      const size_t take = std::min(left, p.iov_len);
      p.iov_base = static_cast<uint8_t*>(p.iov_base) + take;
      p.iov_len -= take;
      left -= take;
      if (p.iov_len == 0) ++piece_pos_;
    }
    if (left == 0) continue;
    const size_t t = std::min(left, trailer_len_ - trailer_have_);
    trailer_have_ += t;
    left -= t;
    if (trailer_have_ < trailer_len_) continue;
    stage_pos_ = 0;
    stage_end_ = left;  // read-ahead bytes of what follows are in the staging buffer
    have_ = 0;
    need_ = kPeek;
    if (!segment_done()) return;
  }
}

bool RxStream::check_ulpdu_length() {
  if (have_ < kMpaLenSize) return true;
  ulpdu_len_ = get_be16(buf_);
  if (ulpdu_len_ >= kDdpTaggedHdrSize) return true;
  // Waiting for a whole header here would wait for bytes that belong to the next FPDU, or for ever.
  fail(term_code(LlpErr::kMarkerLengthMismatch), ND_CANCELED);
  return false;
}

// CRC on: the rest of the current FPDU (payload, pad, CRC trailer) is at src in the staging buffer. Checks the CRC over
// these received bytes (seeded with the header's in header()) and only then places the payload: an FPDU that
// fails the check changes no target byte (RFC 5044 §4.4, §7: a ULPDU whose CRC fails is not handed to DDP).
// false: the connection failed.
bool RxStream::staged_fpdu(const uint8_t* src) {
  const size_t pad = trailer_len_ - kMpaTrailerCrcSize;
  const uint32_t crc = crc32c_final(crc32c_update(crc_state_, src, payload_len_ + pad));
  if (crc != get_crc_le(src + payload_len_ + pad)) {
    fail(term_code(LlpErr::kCrcError), ND_CANCELED, seg_hdr_ + kMpaLenSize, 0);
    return false;
  }
  for (int i = piece_pos_; i < piece_count_; ++i) {
    std::memcpy(piece_[i].iov_base, src, piece_[i].iov_len);
    src += piece_[i].iov_len;
  }
  piece_pos_ = piece_count_;
  have_ = 0;
  need_ = kPeek;
  return segment_done();
}

// Medium FPDUs arrive: the small stage becomes a large one, keeping the bytes read ahead (at most the small
// stage's worth). false: out of memory, the connection failed.
bool RxStream::grow_stage() {
  std::unique_ptr<uint8_t[]> big(new (std::nothrow) uint8_t[kRxStageLarge]);
  if (!big) {
    lost(ND_INSUFFICIENT_RESOURCES, false);
    return false;
  }
  const size_t have = stage_end_ - stage_pos_;
  std::memcpy(big.get(), stage_.get() + stage_pos_, have);
  stage_ = std::move(big);
  stage_cap_ = kRxStageLarge;
  stage_pos_ = 0;
  stage_end_ = have;
  return true;
}

void RxStream::discard(uint32_t len) {
  // One FPDU's payload is at most 64 KiB; only the thread doing receive progress writes here.
  static thread_local uint8_t sink[65536];
  piece_[0] = iovec{sink, len};
  piece_count_ = 1;
}

bool RxStream::place_pieces(const LocalSge* sge, uint32_t nsge, uint64_t offset, uint32_t len) {
  piece_count_ = 0;
  piece_pos_ = 0;
  return for_each_sge_piece(sge, nsge, offset, len,
                            [this](uint8_t* p, uint32_t n) { piece_[piece_count_++] = iovec{p, n}; }) == 0;
}

bool RxStream::header() {
  // Enough bytes for the fixed part? Untagged headers are longer; Read Requests / Terminates are read whole.
  ulpdu_len_ = get_be16(buf_);
  const uint8_t ddp = buf_[kMpaLenSize];
  const auto opc = static_cast<RdmapOpcode>(buf_[kMpaLenSize + 1] & kRdmapOpcodeMask);
  const bool tagged = (ddp & kDdpFlagTagged) != 0;
  size_t need = kFpduHdrTagged;
  bool control = false;
  if (!tagged) {
    if (opc == RdmapOpcode::kReadRequest || opc == RdmapOpcode::kTerminate) {
      need = fpdu_size(ulpdu_len_);
      control = true;
      if (need > sizeof buf_ || ulpdu_len_ < kDdpUntaggedHdrSize) {
        fail(term_code(LlpErr::kMarkerLengthMismatch), ND_CANCELED);
        return false;
      }
    } else {
      need = kFpduHdrSend;
    }
  }
  if (have_ < need) {
    need_ = need;
    return true;  // read the rest first
  }
  DdpHeader h;
  DecodeStatus st = decode_ddp_header(buf_ + kMpaLenSize, ulpdu_len_, &h);
  if (!st.ok) {
    fail(st.term, ND_CANCELED);
    return false;
  }
  hdr_ = h;
  if (control) return control_fpdu();

  hdr_len_ = kMpaLenSize + st.consumed;
  const uint32_t payload = static_cast<uint32_t>(ulpdu_len_ - st.consumed);
  payload_len_ = payload;
  if (crc_) crc_state_ = crc32c_update(kCrc32cInit, buf_, hdr_len_);
  std::memcpy(seg_hdr_, buf_, hdr_len_);
  piece_count_ = piece_pos_ = 0;

  if (awaiting_rtr_) {
    // P2P responder: the first FPDU must be the initiator's zero-length RTR, of the type our Reply chose
    // (RFC 6581 §9.2).
    if (h.opcode != RdmapOpcode::kWrite || payload != 0 || rtr_ != kRtrWrite) {
      fail(term_code(LlpErr::kNoMatchingRtr), ND_CANCELED);
      return false;
    }
    awaiting_rtr_ = false;
    events_.rx_rtr_received();
  }

  switch (h.opcode) {
    case RdmapOpcode::kWrite: {
      if (in_write_ && (h.stag != write_stag_ || h.to != write_next_to_)) {
        fail(term_code(h.stag != write_stag_ ? DdpTaggedErr::kInvalidStag : DdpTaggedErr::kBaseBounds),
                       ND_CANCELED);
        return false;
      }
      if (payload > 0) {  // zero-length Writes (RTR) skip every STag check, as siw
        uint32_t pin = 0;
        StagCheck c = stags_.pin_remote(h.stag, h.to, payload, access::kRemoteWrite, &pin);
        if (c != StagCheck::kOk) {
          fail(tagged_code(c), ND_CANCELED);
          return false;
        }
        pin_ = pin;
        piece_[0] = iovec{reinterpret_cast<uint8_t*>(static_cast<uintptr_t>(h.to)), payload};
        piece_count_ = 1;
      }
      in_write_ = !h.last;
      write_stag_ = h.stag;
      write_next_to_ = h.to + payload;
      break;
    }
    case RdmapOpcode::kReadResponse: {
      RxReadTarget o;
      if (!events_.rx_read_target(&o)) {
        fail(term_code(DdpCatastrophicErr::kLocalCatastrophic), ND_CANCELED);
        return false;
      }
      if (o.internal && o.size == 0) {
        // Our internal zero-length confirmation Read. Linux siw 6.1 sometimes answers a zero-length Read
        // Request with a non-empty Read Response carrying stale bytes of its previous message (seen against
        // rping -c, test/interop/ping.interop.test.ts). The response still proves that siw processed
        // everything sent before the Request, which is all we need: accept any STag/TO/length and throw
        // the payload away rather than tearing the connection down (issue #5: follow what interoperates).
        if (payload > 0) discard(payload);
        break;
      }
      // A malformed response fails the Read it answers with ND_REMOTE_ERROR (fail_read_response).
      if (!(o.size == 0 && payload == 0)) {  // zero-length responses may carry any STag
        if (h.stag != o.sink_stag) {
          fail_read_response(term_code(DdpTaggedErr::kInvalidStag));
          return false;
        }
        if (h.to != o.sink_to + o.received || payload > o.size - o.received ||
            (h.last && o.received + payload != o.size)) {
          fail_read_response(term_code(DdpTaggedErr::kBaseBounds));
          return false;
        }
      } else if (!h.last) {
        fail_read_response(term_code(DdpTaggedErr::kBaseBounds));
        return false;
      }
      if (payload > 0 && !o.internal) place_pieces(o.sge, o.nsge, o.received, payload);
      events_.rx_read_progress(payload);
      break;
    }
    default: {  // Send variants
      if (h.msn != send_msn_) {
        fail(term_code(DdpUntaggedErr::kMsnRange), ND_CANCELED);
        return false;
      }
      if (!in_send_) {
        if (h.mo != 0) {
          fail(term_code(DdpUntaggedErr::kInvalidMo), ND_CANCELED);
          return false;
        }
        const bool have = events_.rx_take_receive(&recv_);
        if (!have) {
          // No RNR in iWARP: a Send without a posted Receive is fatal (DDP untagged error "no buffer available", RFC 5041 §7).
          fail(term_code(DdpUntaggedErr::kNoBuffer), ND_CANCELED);
          return false;
        }
        have_recv_ = true;
        in_send_ = true;
        send_placed_ = 0;
      } else if (h.mo != send_placed_) {
        fail(term_code(DdpUntaggedErr::kInvalidMo), ND_CANCELED);
        return false;
      }
      if (static_cast<uint64_t>(send_placed_) + payload > recv_.length) {
        fail(term_code(DdpUntaggedErr::kMessageTooLong), ND_BUFFER_OVERFLOW);
        return false;
      }
      place_pieces(recv_.sge, recv_.nsge, send_placed_, payload);
      send_placed_ += payload;
      break;
    }
  }
  trailer_len_ = fpdu_pad(ulpdu_len_) + kMpaTrailerCrcSize;
  trailer_have_ = 0;
  have_ = 0;
  state_ = State::kPayload;
  return true;
}

bool RxStream::segment_done() {
  state_ = State::kHeader;  // (with CRC on, staged_fpdu() checked it before placing)
  const DdpHeader& h = hdr_;
  switch (h.opcode) {
    case RdmapOpcode::kWrite:
      if (pin_ != 0) {
        stags_.unpin(pin_);
        pin_ = 0;
      }
      // A segment's bytes are stored before anything placed after it: a reader on another thread that sees a later
      // Write's byte (lib/job/window.ts's flags, read with Atomics.load) sees this one's too, as with the
      // initiator's stores (shm/place.cc copy_released). Free on x86; a barrier where stores may be reordered.
      std::atomic_thread_fence(std::memory_order_release);
      break;
    case RdmapOpcode::kReadResponse:
      if (h.last) events_.rx_read_response_done();
      break;
    default:
      if (h.last) {
        ++send_msn_;
        in_send_ = false;
        if (opcode_has_invalidate(h.opcode) && !stags_.invalidate_window(h.rsvd_ulp)) {
          fail(term_code(RdmapEtype::kRemoteOperation, RdmapErr::kStagCannotInvalidate),
                         ND_INVALID_DEVICE_REQUEST, seg_hdr_ + kMpaLenSize, hdr_len_ - kMpaLenSize);
          return false;
        }
        have_recv_ = false;
        events_.rx_receive_done(recv_, ND_SUCCESS, send_placed_, opcode_has_se(h.opcode));
      }
      break;
  }
  return true;
}

bool RxStream::control_fpdu() {
  const DdpHeader& h = hdr_;
  if (crc_ && !fpdu_check_crc(buf_, ulpdu_len_)) {
    have_ = kMpaLenSize;
    fail(term_code(LlpErr::kCrcError), ND_CANCELED);
    return false;
  }
  const uint8_t* body = buf_ + kFpduHdrSend;
  const size_t body_len = ulpdu_len_ - kDdpUntaggedHdrSize;
  if (h.opcode == RdmapOpcode::kTerminate) {
    TerminateInfo t;
    DecodeStatus st = decode_terminate_body(body, body_len, &t);
    if (!st.ok) t = TerminateInfo{};  // still fatal: the peer is tearing down
    events_.rx_terminate_received(t);
    stop(ND_CANCELED);  // (normally done already by the owner's failure handling)
    return false;
  }
  // Read Request.
  ReadRequest rr;
  DecodeStatus st = decode_read_request(body, body_len, &rr);
  if (!st.ok) {
    fail(st.term, ND_CANCELED);
    return false;
  }
  if (h.msn != read_msn_) {
    fail(term_code(DdpUntaggedErr::kMsnRange), ND_CANCELED);
    return false;
  }
  const bool rtr = awaiting_rtr_;
  if (rtr) {
    if (rr.size != 0 || rtr_ != kRtrRead) {  // the RTR type our Reply chose (RFC 6581 §9.2)
      fail(term_code(LlpErr::kNoMatchingRtr), ND_CANCELED);
      return false;
    }
    awaiting_rtr_ = false;
    events_.rx_rtr_received();
  }
  if (!events_.rx_inbound_read_room(rtr)) {  // more than IRD Read Requests outstanding
    fail(term_code(RdmapEtype::kRemoteOperation, RdmapErr::kCatastrophicStream), ND_CANCELED);
    return false;
  }
  ++read_msn_;
  uint32_t pin = 0;
  if (rr.size > 0) {  // zero-length Reads are answered without STag checks (siw does the same)
    StagCheck c = stags_.pin_remote(rr.src_stag, rr.src_to, rr.size, access::kRemoteRead, &pin);
    if (c != StagCheck::kOk) {
      fail(read_source_code(c), ND_CANCELED);
      return false;
    }
  }
  events_.rx_inbound_read(rr.sink_stag, rr.sink_to, rr.size,
                          reinterpret_cast<const uint8_t*>(static_cast<uintptr_t>(rr.src_to)), pin);
  // Bytes beyond this FPDU were never read (control FPDUs are read exactly).
  have_ = 0;
  need_ = kPeek;
  return true;
}


}  // namespace netdirect::soft

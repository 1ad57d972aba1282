// Receive side of the queue pair: FPDU parsing, every check on inbound DDP/RDMAP segments (MSN, MO, STag,
// key, rights, bounds), zero-copy placement with recv_iov, CRC verification, Read Request queuing and
// Terminate processing (design: queue_pair.h; checks and codes: iwarp-facts §2.3, §3.5).
#include <algorithm>
#include <cerrno>
#include <cstring>
#include <new>

#include "soft/adapter.h"
#include "soft/completion_queue.h"
#include "soft/crc32c.h"
#include "soft/queue_pair.h"
#include "soft/stag_table.h"
#include "soft/terminate.h"

namespace netdirect::soft {

using namespace wire;

namespace {
constexpr size_t kPeek = kFpduHdrTagged;  // 16: the smallest FPDU header, safe to read ahead
constexpr int kRxBudget = 64;             // recv calls per wake-up before other sockets get a turn
constexpr uint64_t kNoOffender = ~uint64_t{0};

TermCode tagged_code(StagCheck c) {
  return term_code(c == StagCheck::kBounds ? DdpTaggedErr::kBaseBounds : DdpTaggedErr::kInvalidStag);
}
TermCode read_source_code(StagCheck c) {
  RdmapErr e = c == StagCheck::kBounds ? RdmapErr::kBaseBounds
               : c == StagCheck::kAccess ? RdmapErr::kAccessRights
                                         : RdmapErr::kInvalidStag;
  return term_code(RdmapEtype::kRemoteProtection, e);
}
bool is_access_error(TermCode c) {
  return (c.layer == static_cast<uint8_t>(TermLayer::kDdp) && c.etype == static_cast<uint8_t>(DdpEtype::kTagged)) ||
         (c.layer == static_cast<uint8_t>(TermLayer::kRdmap) &&
          c.etype == static_cast<uint8_t>(RdmapEtype::kRemoteProtection));
}
}  // namespace

void SoftQueuePair::on_io(uint32_t events) {
  bool close_now = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (sock_ == net::kInvalidSocket) return;
    if (rx_state_ == RxState::kDrain) {
      close_now = rx_drain_locked();
    } else {
      if (events & Engine::kWrite) tx_progress_locked();
      if (events & Engine::kRead) rx_progress_locked();
      if (state_ == State::kConnected) {
        if (rcq_->failed() || icq_->failed()) {
          fail_locked(ND_INTERNAL_ERROR, true, false, kNoOffender, ND_CANCELED, ND_CANCELED);
        } else {
          complete_ready_locked();
          tx_progress_locked();
        }
      }
    }
  }
  if (close_now) close_socket_now();
  kick_teardown();
  fire_events();
}

bool SoftQueuePair::rx_drain_locked() {
  uint8_t sink[4096];
  for (int i = 0; i < kRxBudget; ++i) {
    const ptrdiff_t n = net::recv_bytes(sock_, sink, sizeof sink);
    if (n > 0) continue;
    if (n == -EAGAIN || n == -EWOULDBLOCK || n == -EINTR) return false;
    // End of stream or a dead socket: a lingering close is over; otherwise close without lingering.
    peer_eof_ = true;
    return linger_;
  }
  return false;
}

void SoftQueuePair::rx_fail_locked(TermCode code, HRESULT recv_status, const uint8_t* ulpdu, size_t avail) {
  if (ulpdu == nullptr) {
    ulpdu = rx_buf_ + kMpaLenSize;
    avail = rx_have_ > kMpaLenSize ? rx_have_ - kMpaLenSize : 0;
  }
  send_terminate_locked(code, ulpdu, avail, rx_ulpdu_len_);
  fail_locked(is_access_error(code) ? ND_ACCESS_VIOLATION : ND_REMOTE_ERROR, true, false, kNoOffender, ND_CANCELED,
              recv_status);
}

void SoftQueuePair::rx_progress_locked() {
  if (state_ != State::kConnected || rx_state_ == RxState::kDrain) return;
  if (!rx_stage_) {
    rx_stage_.reset(new (std::nothrow) uint8_t[kRxStageSmall]);
    if (!rx_stage_) {
      fail_locked(ND_INSUFFICIENT_RESOURCES, true, false, kNoOffender, ND_CANCELED, ND_CANCELED);
      return;
    }
    rx_stage_cap_ = kRxStageSmall;
  }
  uint8_t* stage = rx_stage_.get();
  int syscalls = 0;
  bool drained = false;  // the last receive returned less than asked: the socket is (very likely) empty
  for (;;) {
    if (state_ != State::kConnected || rx_state_ == RxState::kDrain) return;
    if (rx_state_ == RxState::kHeader) {
      if (rx_have_ < rx_need_) {
        if (rx_stage_pos_ == rx_stage_end_) {
          // Level-triggered readiness (engine) or the next inline poll picks up anything that arrives later.
          if (drained || syscalls++ >= kRxBudget) return;
          const ptrdiff_t n = net::recv_bytes(sock_, stage, rx_stage_cap_);
          if (n == -EAGAIN || n == -EWOULDBLOCK || n == -EINTR) return;
          if (n <= 0) {
            // Peer closed (orderly at an FPDU boundary) or the connection broke: cancel everything.
            peer_eof_ = true;
            fail_locked(n == 0 && rx_have_ == 0 ? ND_SUCCESS : ND_CONNECTION_ABORTED, true, false, kNoOffender,
                        ND_CANCELED, ND_CANCELED);
            return;
          }
          rx_stage_pos_ = 0;
          rx_stage_end_ = static_cast<size_t>(n);
          drained = rx_stage_end_ < rx_stage_cap_;
        }
        // Exactly the header bytes still needed (a control FPDU is taken whole, nothing beyond it).
        const size_t take = std::min(rx_need_ - rx_have_, rx_stage_end_ - rx_stage_pos_);
        std::memcpy(rx_buf_ + rx_have_, stage + rx_stage_pos_, take);
        rx_stage_pos_ += take;
        rx_have_ += take;
        if (rx_have_ < rx_need_) continue;
      }
      if (!rx_header_locked()) return;
      if (rx_state_ == RxState::kPayload && rx_ulpdu_len_ > kRxMediumFpdu && rx_ulpdu_len_ <= kRxCopyFpdu &&
          rx_stage_cap_ < kRxStageLarge) {
        if (!rx_grow_stage_locked()) return;
        stage = rx_stage_.get();
      }
      continue;
    }
    if (crc_) {
      // CRC on: the rest of the FPDU (payload, pad, CRC) is collected in the staging buffer, checked there, and
      // only then copied into its target (queue_pair.h, Receive). Never CRC the target itself: the consumer may
      // rewrite placed bytes at once (a spin on the last byte), and a failing FPDU must place nothing.
      const size_t need = rx_payload_len_ + rx_trailer_len_;
      const size_t avail = rx_stage_end_ - rx_stage_pos_;
      if (avail >= need) {
        const uint8_t* src = stage + rx_stage_pos_;
        rx_stage_pos_ += need;
        if (!rx_staged_fpdu_locked(src)) return;
        continue;
      }
      if (drained || syscalls++ >= kRxBudget) return;
      if (avail == 0) rx_stage_pos_ = rx_stage_end_ = 0;
      if (rx_stage_cap_ - rx_stage_pos_ < need) {
        if (rx_stage_cap_ < need) {
          if (!rx_grow_stage_locked()) return;  // moves the pending bytes to the front
          stage = rx_stage_.get();
        } else {
          std::memmove(stage, stage + rx_stage_pos_, avail);
          rx_stage_pos_ = 0;
          rx_stage_end_ = avail;
        }
      }
      // Read-ahead as on the zero-copy path: a whole stage behind a small FPDU, a header's worth behind a large one
      // (so that the next large FPDU starts near the front and nothing has to be moved).
      const size_t until = rx_ulpdu_len_ <= kRxCopyFpdu ? rx_stage_cap_
                                                        : std::min(rx_stage_cap_, rx_stage_pos_ + need + kPeek);
      const size_t ask = until - rx_stage_end_;
      const ptrdiff_t n = net::recv_bytes(sock_, stage + rx_stage_end_, ask);
      if (n == -EAGAIN || n == -EWOULDBLOCK || n == -EINTR) return;
      if (n <= 0) {
        peer_eof_ = true;
        fail_locked(ND_CONNECTION_ABORTED, true, false, kNoOffender, ND_CANCELED, ND_CANCELED);
        return;
      }
      rx_stage_end_ += static_cast<size_t>(n);
      drained = until == rx_stage_cap_ && static_cast<size_t>(n) < ask;
      continue;
    }
    if (rx_stage_pos_ < rx_stage_end_) {
      // CRC off: payload (possibly empty) + trailer copied from the staging buffer.
      const uint8_t* src = stage + rx_stage_pos_;
      size_t avail = rx_stage_end_ - rx_stage_pos_;
      while (avail > 0 && rx_piece_pos_ < rx_piece_count_) {
        iovec& p = rx_piece_[rx_piece_pos_];
        const size_t take = std::min(avail, p.iov_len);
        std::memcpy(p.iov_base, src, take);
        p.iov_base = static_cast<uint8_t*>(p.iov_base) + take;
        p.iov_len -= take;
        src += take;
        avail -= take;
        if (p.iov_len == 0) ++rx_piece_pos_;
      }
      const size_t t = std::min(avail, rx_trailer_len_ - rx_trailer_have_);
      std::memcpy(rx_trailer_ + rx_trailer_have_, src, t);
      rx_trailer_have_ += t;
      avail -= t;
      rx_stage_pos_ = rx_stage_end_ - avail;
      if (rx_trailer_have_ < rx_trailer_len_) continue;  // staging buffer used up
      rx_have_ = 0;
      rx_need_ = kPeek;
      if (!rx_segment_done_locked()) return;
      continue;
    }
    // CRC off, staging buffer empty: the rest of the payload straight into the target, the trailer, and a read-ahead
    // into the staging buffer (a whole one behind a small FPDU; only a header's worth behind a large one, so
    // that the next large payload is not copied).
    if (drained || syscalls++ >= kRxBudget) return;
    iovec iov[limits::kMaxSge + 3];
    int cnt = 0;
    size_t rest = rx_trailer_len_ - rx_trailer_have_;
    for (int i = rx_piece_pos_; i < rx_piece_count_; ++i) {
      iov[cnt++] = rx_piece_[i];
      rest += rx_piece_[i].iov_len;
    }
    iov[cnt++] = iovec{rx_trailer_ + rx_trailer_have_, rx_trailer_len_ - rx_trailer_have_};
    const size_t ahead = rx_ulpdu_len_ <= kRxCopyFpdu ? rx_stage_cap_ : kPeek;
    iov[cnt++] = iovec{stage, ahead};
    const ptrdiff_t n = net::recv_iov(sock_, iov, cnt);
    if (n == -EAGAIN || n == -EWOULDBLOCK || n == -EINTR) return;
    if (n <= 0) {
      peer_eof_ = true;
      fail_locked(ND_CONNECTION_ABORTED, true, false, kNoOffender, ND_CANCELED, ND_CANCELED);
      return;
    }
    // Short read behind a small FPDU: the socket is empty. Within a large payload keep reading (more of a
    // stream is usually arriving while we copy; going back to epoll would cost a sleep and a wake-up).
    drained = ahead == rx_stage_cap_ && static_cast<size_t>(n) < rest + ahead;
    size_t left = static_cast<size_t>(n);
    while (left > 0 && rx_piece_pos_ < rx_piece_count_) {
      iovec& p = rx_piece_[rx_piece_pos_];
      const size_t take = std::min(left, p.iov_len);
      p.iov_base = static_cast<uint8_t*>(p.iov_base) + take;
      p.iov_len -= take;
      left -= take;
      if (p.iov_len == 0) ++rx_piece_pos_;
    }
    if (left == 0) continue;
    const size_t t = std::min(left, rx_trailer_len_ - rx_trailer_have_);
    rx_trailer_have_ += t;
    left -= t;
    if (rx_trailer_have_ < rx_trailer_len_) continue;
    rx_stage_pos_ = 0;
    rx_stage_end_ = left;  // read-ahead bytes of what follows are in the staging buffer
    rx_have_ = 0;
    rx_need_ = kPeek;
    if (!rx_segment_done_locked()) return;
  }
}

// CRC on: the rest of the current FPDU (payload, pad, CRC trailer) is at src in the staging buffer. Checks the CRC over
// these received bytes (seeded with the header's in rx_header_locked) and only then places the payload: an FPDU that
// fails the check changes no target byte (RFC 5044 §4.4, §7: a ULPDU whose CRC fails is not handed to DDP).
// false: the connection failed.
bool SoftQueuePair::rx_staged_fpdu_locked(const uint8_t* src) {
  const size_t pad = rx_trailer_len_ - kMpaTrailerCrcSize;
  const uint32_t crc = crc32c_final(crc32c_update(rx_crc_, src, rx_payload_len_ + pad));
  if (crc != get_crc_le(src + rx_payload_len_ + pad)) {
    rx_fail_locked(term_code(LlpErr::kCrcError), ND_CANCELED, rx_seg_hdr_ + kMpaLenSize, 0);
    return false;
  }
  for (int i = rx_piece_pos_; i < rx_piece_count_; ++i) {
    std::memcpy(rx_piece_[i].iov_base, src, rx_piece_[i].iov_len);
    src += rx_piece_[i].iov_len;
  }
  rx_piece_pos_ = rx_piece_count_;
  rx_have_ = 0;
  rx_need_ = kPeek;
  return rx_segment_done_locked();
}

// Medium FPDUs arrive: the small stage becomes a large one, keeping the bytes read ahead (at most the small
// stage's worth). false: out of memory, the connection failed.
bool SoftQueuePair::rx_grow_stage_locked() {
  std::unique_ptr<uint8_t[]> big(new (std::nothrow) uint8_t[kRxStageLarge]);
  if (!big) {
    fail_locked(ND_INSUFFICIENT_RESOURCES, true, false, kNoOffender, ND_CANCELED, ND_CANCELED);
    return false;
  }
  const size_t have = rx_stage_end_ - rx_stage_pos_;
  std::memcpy(big.get(), rx_stage_.get() + rx_stage_pos_, have);
  rx_stage_ = std::move(big);
  rx_stage_cap_ = kRxStageLarge;
  rx_stage_pos_ = 0;
  rx_stage_end_ = have;
  return true;
}

void SoftQueuePair::rx_discard_locked(uint32_t len) {
  // One FPDU's payload is at most 64 KiB; only the thread doing receive progress writes here.
  static thread_local uint8_t sink[65536];
  rx_piece_[0] = iovec{sink, len};
  rx_piece_count_ = 1;
}

bool SoftQueuePair::rx_place_pieces(const LocalSge* sge, uint32_t nsge, uint64_t offset, uint32_t len) {
  rx_piece_count_ = 0;
  rx_piece_pos_ = 0;
  uint64_t skip = offset;
  uint32_t left = len;
  for (uint32_t i = 0; i < nsge && left > 0; ++i) {
    if (skip >= sge[i].length) {
      skip -= sge[i].length;
      continue;
    }
    const uint32_t take = static_cast<uint32_t>(std::min<uint64_t>(sge[i].length - skip, left));
    rx_piece_[rx_piece_count_++] = iovec{sge[i].addr + skip, take};
    left -= take;
    skip = 0;
  }
  return left == 0;
}

bool SoftQueuePair::rx_header_locked() {
  // Enough bytes for the fixed part? Untagged headers are longer; Read Requests / Terminates are read whole.
  rx_ulpdu_len_ = get_be16(rx_buf_);
  const uint8_t ddp = rx_buf_[kMpaLenSize];
  const auto opc = static_cast<RdmapOpcode>(rx_buf_[kMpaLenSize + 1] & kRdmapOpcodeMask);
  const bool tagged = (ddp & kDdpFlagTagged) != 0;
  size_t need = kFpduHdrTagged;
  bool control = false;
  if (!tagged) {
    if (opc == RdmapOpcode::kReadRequest || opc == RdmapOpcode::kTerminate) {
      need = fpdu_size(rx_ulpdu_len_);
      control = true;
      if (need > sizeof rx_buf_ || rx_ulpdu_len_ < kDdpUntaggedHdrSize) {
        rx_fail_locked(term_code(LlpErr::kMarkerLengthMismatch), ND_CANCELED);
        return false;
      }
    } else {
      need = kFpduHdrSend;
    }
  }
  if (rx_have_ < need) {
    rx_need_ = need;
    return true;  // read the rest first
  }
  DdpHeader h;
  DecodeStatus st = decode_ddp_header(rx_buf_ + kMpaLenSize, rx_ulpdu_len_, &h);
  if (!st.ok) {
    rx_fail_locked(st.term, ND_CANCELED);
    return false;
  }
  rx_hdr_ = h;
  if (control) return rx_control_locked();

  rx_hdr_len_ = kMpaLenSize + st.consumed;
  const uint32_t payload = static_cast<uint32_t>(rx_ulpdu_len_ - st.consumed);
  rx_payload_len_ = payload;
  if (crc_) rx_crc_ = crc32c_update(kCrc32cInit, rx_buf_, rx_hdr_len_);
  std::memcpy(rx_seg_hdr_, rx_buf_, rx_hdr_len_);
  rx_piece_count_ = rx_piece_pos_ = 0;

  if (awaiting_rtr_) {
    // P2P responder: the first FPDU must be the initiator's zero-length RTR, of the type our Reply chose.
    if (h.opcode != RdmapOpcode::kWrite || payload != 0 || rtr_ != kRtrWrite) {
      rx_fail_locked(term_code(LlpErr::kNoMatchingRtr), ND_CANCELED);
      return false;
    }
    awaiting_rtr_ = false;
    event_rtr_pending_ = true;
  }

  switch (h.opcode) {
    case RdmapOpcode::kWrite: {
      if (rx_in_write_ && (h.stag != rx_write_stag_ || h.to != rx_write_next_to_)) {
        rx_fail_locked(term_code(h.stag != rx_write_stag_ ? DdpTaggedErr::kInvalidStag : DdpTaggedErr::kBaseBounds),
                       ND_CANCELED);
        return false;
      }
      if (payload > 0) {  // zero-length Writes (RTR) skip every STag check, as siw
        uint32_t pin = 0;
        StagCheck c = stags_.pin_remote(h.stag, h.to, payload, access::kRemoteWrite, &pin);
        if (c != StagCheck::kOk) {
          rx_fail_locked(tagged_code(c), ND_CANCELED);
          return false;
        }
        rx_pin_ = pin;
        rx_piece_[0] = iovec{reinterpret_cast<uint8_t*>(static_cast<uintptr_t>(h.to)), payload};
        rx_piece_count_ = 1;
      }
      rx_in_write_ = !h.last;
      rx_write_stag_ = h.stag;
      rx_write_next_to_ = h.to + payload;
      break;
    }
    case RdmapOpcode::kReadResponse: {
      if (orq_count_ == 0) {
        rx_fail_locked(term_code(DdpCatastrophicErr::kLocalCatastrophic), ND_CANCELED);
        return false;
      }
      OutRead& o = orq_[orq_head_];
      if (o.internal && o.size == 0) {
        // Our internal zero-length confirmation Read. Linux siw 6.1 sometimes answers a zero-length Read
        // Request with a non-empty Read Response carrying stale bytes of its previous message (seen against
        // rping -c, test/interop/ping.interop.test.ts). The response still proves that siw processed
        // everything sent before the Request, which is all we need: accept any STag/TO/length and throw
        // the payload away rather than tearing the connection down (issue #5: follow what interoperates).
        if (payload > 0) rx_discard_locked(payload);
        break;
      }
      if (!(o.size == 0 && payload == 0)) {  // zero-length responses may carry any STag
        if (h.stag != o.sink_stag) {
          rx_fail_locked(term_code(DdpTaggedErr::kInvalidStag), ND_CANCELED);
          return false;
        }
        if (h.to != o.sink_to + o.received || payload > o.size - o.received ||
            (h.last && o.received + payload != o.size)) {
          rx_fail_locked(term_code(DdpTaggedErr::kBaseBounds), ND_CANCELED);
          return false;
        }
      } else if (!h.last) {
        rx_fail_locked(term_code(DdpTaggedErr::kBaseBounds), ND_CANCELED);
        return false;
      }
      if (payload > 0 && !o.internal) {
        const SqRequest& r = sq_at(o.sq_seq);
        rx_place_pieces(sq_sges(o.sq_seq), r.nsge, o.received, payload);
      }
      o.received += payload;
      break;
    }
    default: {  // Send variants
      if (h.msn != rx_send_msn_) {
        rx_fail_locked(term_code(DdpUntaggedErr::kMsnRange), ND_CANCELED);
        return false;
      }
      if (!rx_in_send_) {
        if (h.mo != 0) {
          rx_fail_locked(term_code(DdpUntaggedErr::kInvalidMo), ND_CANCELED);
          return false;
        }
        bool have;
        if (srq_ != nullptr) {
          have = srq_->pop(&rx_recv_);
        } else {
          have = rq_head_ < rq_tail_;
          if (have) {
            const RecvRequest& r = rq_[rq_head_ % rq_depth_];
            rx_recv_.context = r.context;
            rx_recv_.nsge = r.nsge;
            rx_recv_.length = r.length;
            std::copy(r.sge, r.sge + r.nsge, rx_recv_.sge);
            ++rq_head_;
          }
        }
        if (!have) {
          // No RNR in iWARP: a Send without a posted Receive is fatal (iwarp-facts §2.2).
          rx_fail_locked(term_code(DdpUntaggedErr::kNoBuffer), ND_CANCELED);
          return false;
        }
        rx_have_recv_ = true;
        rx_in_send_ = true;
        rx_send_placed_ = 0;
      } else if (h.mo != rx_send_placed_) {
        rx_fail_locked(term_code(DdpUntaggedErr::kInvalidMo), ND_CANCELED);
        return false;
      }
      if (static_cast<uint64_t>(rx_send_placed_) + payload > rx_recv_.length) {
        rx_fail_locked(term_code(DdpUntaggedErr::kMessageTooLong), ND_BUFFER_OVERFLOW);
        return false;
      }
      rx_place_pieces(rx_recv_.sge, rx_recv_.nsge, rx_send_placed_, payload);
      rx_send_placed_ += payload;
      break;
    }
  }
  rx_trailer_len_ = fpdu_pad(rx_ulpdu_len_) + kMpaTrailerCrcSize;
  rx_trailer_have_ = 0;
  rx_have_ = 0;
  rx_state_ = RxState::kPayload;
  return true;
}

bool SoftQueuePair::rx_segment_done_locked() {
  rx_state_ = RxState::kHeader;  // (with CRC on, rx_staged_fpdu_locked checked it before placing)
  const DdpHeader& h = rx_hdr_;
  switch (h.opcode) {
    case RdmapOpcode::kWrite:
      if (rx_pin_ != 0) {
        stags_.unpin(rx_pin_);
        rx_pin_ = 0;
      }
      break;
    case RdmapOpcode::kReadResponse:
      if (h.last) rx_read_response_done_locked();
      break;
    default:
      if (h.last) {
        ++rx_send_msn_;
        rx_in_send_ = false;
        if (opcode_has_invalidate(h.opcode) && !stags_.invalidate_window(h.rsvd_ulp)) {
          rx_fail_locked(term_code(RdmapEtype::kRemoteOperation, RdmapErr::kStagCannotInvalidate),
                         ND_INVALID_DEVICE_REQUEST, rx_seg_hdr_ + kMpaLenSize, rx_hdr_len_ - kMpaLenSize);
          return false;
        }
        rx_have_recv_ = false;
        complete_recv_locked(rx_recv_, ND_SUCCESS, rx_send_placed_, opcode_has_se(h.opcode));
      }
      break;
  }
  return true;
}

void SoftQueuePair::rx_read_response_done_locked() {
  OutRead& o = orq_[orq_head_];
  if (!o.internal) sq_at(o.sq_seq).read_done = true;
  // Everything sent before this Read Request was processed by the peer (queue_pair.h).
  confirmed_seq_ = std::max(confirmed_seq_, o.confirm_seq);
  orq_head_ = (orq_head_ + 1) % orq_.size();
  --orq_count_;
  complete_ready_locked();
}

bool SoftQueuePair::rx_control_locked() {
  const DdpHeader& h = rx_hdr_;
  if (crc_ && !fpdu_check_crc(rx_buf_, rx_ulpdu_len_)) {
    rx_have_ = kMpaLenSize;
    rx_fail_locked(term_code(LlpErr::kCrcError), ND_CANCELED);
    return false;
  }
  const uint8_t* body = rx_buf_ + kFpduHdrSend;
  const size_t body_len = rx_ulpdu_len_ - kDdpUntaggedHdrSize;
  if (h.opcode == RdmapOpcode::kTerminate) {
    TerminateInfo t;
    DecodeStatus st = decode_terminate_body(body, body_len, &t);
    if (!st.ok) t = TerminateInfo{};  // still fatal: the peer is tearing down
    rx_terminate_received_locked(t);
    return false;
  }
  // Read Request.
  ReadRequest rr;
  DecodeStatus st = decode_read_request(body, body_len, &rr);
  if (!st.ok) {
    rx_fail_locked(st.term, ND_CANCELED);
    return false;
  }
  if (h.msn != rx_read_msn_) {
    rx_fail_locked(term_code(DdpUntaggedErr::kMsnRange), ND_CANCELED);
    return false;
  }
  if (awaiting_rtr_) {
    if (rr.size != 0 || rtr_ != kRtrRead) {  // the RTR type our Reply chose (iwarp-facts §1.2)
      rx_fail_locked(term_code(LlpErr::kNoMatchingRtr), ND_CANCELED);
      return false;
    }
    awaiting_rtr_ = false;
    event_rtr_pending_ = true;
  } else if (irq_count_ >= ird_) {
    rx_fail_locked(term_code(RdmapEtype::kRemoteOperation, RdmapErr::kCatastrophicStream), ND_CANCELED);
    return false;
  }
  if (irq_count_ >= irq_.size()) {
    rx_fail_locked(term_code(RdmapEtype::kRemoteOperation, RdmapErr::kCatastrophicStream), ND_CANCELED);
    return false;
  }
  ++rx_read_msn_;
  uint32_t pin = 0;
  if (rr.size > 0) {  // zero-length Reads are answered without STag checks (siw does the same)
    StagCheck c = stags_.pin_remote(rr.src_stag, rr.src_to, rr.size, access::kRemoteRead, &pin);
    if (c != StagCheck::kOk) {
      rx_fail_locked(read_source_code(c), ND_CANCELED);
      return false;
    }
  }
  InRead& in = irq_[(irq_head_ + irq_count_) % irq_.size()];
  in = InRead{rr.sink_stag, rr.sink_to, rr.size, 0,
              reinterpret_cast<const uint8_t*>(static_cast<uintptr_t>(rr.src_to)), pin};
  ++irq_count_;
  // Bytes beyond this FPDU were never read (control FPDUs are read exactly).
  rx_have_ = 0;
  rx_need_ = kPeek;
  return true;
}

void SoftQueuePair::rx_terminate_received_locked(const TerminateInfo& t) {
  const TermVerdict v = classify_terminate(t);
  uint64_t offender = kNoOffender;
  for (uint64_t s = sq_head_; s < sq_next_ && offender == kNoOffender; ++s) {
    const SqRequest& r = sq_at(s);
    switch (v.target) {
      case TermTarget::kWrite:
        if (r.type == Nd2RequestTypeWrite &&
            (v.stag == 0 || (r.remote_token == v.stag && v.to >= r.remote_addr && v.to - r.remote_addr <= r.length))) {
          offender = s;
        }
        break;
      case TermTarget::kSend:
        if (r.type == Nd2RequestTypeSend && (!v.have_msn || r.msn == v.msn)) offender = s;
        break;
      case TermTarget::kRead:
        if (r.type == Nd2RequestTypeRead && !r.read_done && (!v.have_msn || r.msn == v.msn)) offender = s;
        break;
      case TermTarget::kNone:
        break;
    }
  }
  // Not attributable (or not found): the oldest request the peer has not confirmed is the one that failed.
  if (offender == kNoOffender && sq_head_ < sq_next_) offender = sq_head_;
  fail_locked(v.status, true, true, offender, v.status, ND_CANCELED);
}

}  // namespace netdirect::soft

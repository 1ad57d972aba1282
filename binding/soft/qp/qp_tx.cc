// Transmit side of the queue pair: message scheduling, FPDU segmentation, gather-send from the SGEs,
// ORD and fence stalls, and the internal confirmation Read (design: qp.h).
#include "soft/qp/qp.h"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>

#include "soft/memory/stag_table.h"
#include "soft/shm/link.h"
#include "soft/wire/crc32c.h"
#include "soft/wire/terminate.h"
#include "soft/trace.h"

namespace netdirect::soft {

using namespace wire;

namespace {
constexpr uint32_t kRtrStag = 1;         // STag of RTRs and internal zero-length Reads (never 0 on the wire)
constexpr int kSendIovMax = 1024;        // IOV_MAX on Linux
constexpr uint64_t kNoOffender = ~uint64_t{0};
constexpr uint64_t kConfirmBatch = 32;   // unconfirmed requests that justify a second confirmation Read in flight
constexpr uint64_t kConfirmStream = 64;  // the same before the send queue drained (a long stream); measured: 32 cost
                                         // the 8 B message rate ~7%, 64 neither that nor the 4 KiB stream's gain
// The Terminate we send when we end the connection for a reason of our own (a request's local SGE failed its check,
// the peer left a Read unanswered): RDMAP, Local Catastrophic Error (RFC 5040 §7.2; siw sends this class for its
// local transmit errors too).
constexpr TermCode kLocalCatastrophic{static_cast<uint8_t>(TermLayer::kRdmap),
                                      static_cast<uint8_t>(RdmapEtype::kLocalCatastrophic), 0};

uint64_t steady_ns() {
  return static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
          .count());
}
}  // namespace

void QueuePairCore::tx_set_want_write_locked(bool want) {
  mu_.assert_held();
  if (want == tx_.want_write || sock_ == net::kInvalidSocket) return;
  tx_.want_write = want;
  // Nothing while an inline poller drives the connection (qp.cc poll_progress): it retries the send. Same
  // host: the full ring asked the peer to ring our doorbell when it frees space (shm/link.cc Link::send_iov).
  if (rx_inline_ || shm_) return;
  engine_.modify(sock_, this, sock_interest_locked());
}

uint32_t QueuePairCore::sock_interest_locked() const {
  mu_.assert_held();
  return Engine::kRead | (tx_.want_write && !shm_ ? Engine::kWrite : 0);
}

// After a receive round or a post: transmit now, or, on the thread between its Engine::progress(true) and its
// flush (the event-loop consumer handing a round's completions to the application), at that flush — so the
// application's replies and the round's Read Responses (and confirmation Reads) leave in one send.
void QueuePairCore::tx_progress_or_defer_locked() {
  mu_.assert_held();
  Engine& engine = engine_;
  if (!engine.deferring()) {
    tx_progress_locked();
    return;
  }
  if (tx_deferred_ || !tx_pending_locked()) return;
  tx_deferred_ = true;
  hold();  // released by the flush, on the driving thread
  engine.defer([this] {
    {
      std::lock_guard<ndkit::CheckedMutex> lock(mu_);
      tx_deferred_ = false;
      tx_progress_locked();
    }
    kick_teardown();
    drop();
  });
}

void QueuePairCore::tx_progress_locked() {
  mu_.assert_held();
  if (state_ != State::kConnected || sock_ == net::kInvalidSocket) return;
  for (;;) {
    if (tx_.batch->iov_count > 0 && !tx_flush_locked()) return;  // blocked (EPOLLOUT armed) or failed
    if (state_ != State::kConnected) return;
    if (!tx_fill_locked()) break;
  }
  tx_set_want_write_locked(false);
  complete_ready_locked();
  tx_fail_local_error_locked();
}

void QueuePairCore::tx_fail_local_error_locked() {
  mu_.assert_held();
  if (state_ != State::kConnected || sq_head_ != sq_next_ || sq_next_ == sq_tail_) return;
  const HRESULT st = sq_at(sq_head_).local_status;
  if (st == ND_SUCCESS) return;
  fail_with_terminate_locked(kLocalCatastrophic, st, sq_head_, st);
}

void QueuePairCore::fail_with_terminate_locked(TermCode code, HRESULT event_status, uint64_t offender,
                                               HRESULT status) {
  mu_.assert_held();
  send_terminate_locked(code, nullptr, 0, 0);
  fail_locked(event_status, true, false, offender, status, ND_CANCELED);
}

// ---- the bounded wait for Read Responses ----------------------------------------------------------------------
// Writes and Sends complete when a later Read Response confirms them (qp.h): a peer that keeps the
// connection open but never answers our Read would leave them pending for ever. So while an outbound Read is
// outstanding, an engine timer checks that bytes keep moving in either direction (a large transfer ahead of the
// response may legitimately delay it); after peer_timeout_ms_ without a byte, the oldest request completes
// ND_IO_TIMEOUT, the rest ND_CANCELED, and the connection is Terminated and closed (docs/nd2.md §3.6).

void QueuePairCore::peer_wait_started_locked() {
  mu_.assert_held();
  if (peer_timer_ != 0 || peer_timeout_ms_ == 0 || sock_ == net::kInvalidSocket) return;
  peer_activity_ns_ = steady_ns();
  peer_timer_ = engine_.add_timer(peer_timeout_ms_, [this] { peer_deadline_check(); });
}

void QueuePairCore::peer_activity_locked() {
  mu_.assert_held();
  if (peer_timer_ != 0) peer_activity_ns_ = steady_ns();
}

void QueuePairCore::peer_deadline_check() {
  {
    std::lock_guard<ndkit::CheckedMutex> lock(mu_);
    peer_timer_ = 0;
    if (sock_ == net::kInvalidSocket || state_ != State::kConnected || orq_count_ == 0) return;
    const uint64_t idle_ms = (steady_ns() - peer_activity_ns_) / 1000000;
    if (idle_ms < peer_timeout_ms_) {
      const uint32_t rest = peer_timeout_ms_ - static_cast<uint32_t>(idle_ms);
      peer_timer_ = engine_.add_timer(rest, [this] { peer_deadline_check(); });
      return;
    }
    peer_timeout_locked();
  }
  kick_teardown();
}

void QueuePairCore::peer_timeout_locked() {
  mu_.assert_held();
  // The oldest request is the one the peer failed to answer (or to confirm); with none (only the P2P RTR Read
  // was outstanding) everything just closes.
  const uint64_t offender = sq_head_ < sq_next_ ? sq_head_ : kNoOffender;
  fail_with_terminate_locked(kLocalCatastrophic, ND_IO_TIMEOUT, offender, ND_IO_TIMEOUT);
}

// Anything for tx_progress_locked to do: an FPDU to send or finish, a Read Response to answer, the RTR, a
// queued request, or a confirmation Read that is due now — the sources tx_next_message_locked takes from, in
// the same order; a new source there belongs here too.
bool QueuePairCore::tx_pending_locked() const {
  mu_.assert_held();
  return tx_.batch->iov_count > 0 || tx_.want_write || tx_.rtr_pending || tx_.kind != TxKind::kNone ||
         irq_started_ < irq_count_ || sq_next_ < sq_tail_ || tx_confirm_due_locked(true);
}

bool QueuePairCore::needs_confirmation_locked() const {
  mu_.assert_held();
  return ord_ > 0 && last_unconfirmed_ > confirm_requested_;
}

bool QueuePairCore::confirm_read_outstanding_locked() const {
  mu_.assert_held();
  for (uint32_t i = 0; i < orq_count_; ++i) {
    const OutRead& o = orq_[(orq_head_ + i) % orq_.size()];
    if (o.internal && o.confirm_seq > 0) return true;  // (the RTR Read confirms nothing)
  }
  return false;
}

bool QueuePairCore::tx_fill_locked() {
  mu_.assert_held();
  TxBatch& b = *tx_.batch;
  b.sq_done = sq_next_;
  if (rx_.awaiting_rtr()) return false;  // P2P responder: nothing goes out before the initiator's RTR
  while (b.has_room()) {
    if (tx_.kind == TxKind::kNone) {
      if (!tx_next_message_locked()) break;
      continue;
    }
    if (tx_.kind == TxKind::kSq) {
      SqRequest& r = sq_at(sq_next_);
      const bool send = r.type == Nd2RequestTypeSend;
      const size_t max_payload = fpdu_max_payload(mss_, send ? kDdpUntaggedHdrSize : kDdpTaggedHdrSize);
      const uint64_t seg = std::min<uint64_t>(tx_.len - tx_.off, fpdu_even_payload(tx_.len, max_payload));
      DdpHeader h;
      h.last = tx_.off + seg == tx_.len;
      if (send) {
        h.opcode = (r.flags & ND_OP_FLAG_SEND_AND_SOLICIT_EVENT) ? RdmapOpcode::kSendSe : RdmapOpcode::kSend;
        h.qn = kQnSend;
        h.msn = r.msn;
        h.mo = static_cast<uint32_t>(tx_.off);
      } else {
        h.opcode = RdmapOpcode::kWrite;
        h.stag = r.remote_token;
        h.to = r.remote_addr + tx_.off;
      }
      tx_append_fpdu_locked(h, nullptr, 0, sq_sges(sq_next_), r.nsge, tx_.off, static_cast<uint32_t>(seg));
      tx_.off += seg;
      if (h.last) {
        r.state = SqState::kTransmitted;
        last_unconfirmed_ = sq_next_ + 1;
        if (!(r.flags & ND_OP_FLAG_SILENT_SUCCESS)) last_signaled_unconfirmed_ = sq_next_ + 1;
        ++sq_next_;
        b.sq_done = sq_next_;
        tx_.kind = TxKind::kNone;
      }
    } else if (tx_.kind == TxKind::kReadResponse) {
      InRead& in = irq_[(irq_head_ + irq_started_) % irq_.size()];
      const size_t max_payload = fpdu_max_payload(mss_, kDdpTaggedHdrSize);
      const uint64_t seg = std::min<uint64_t>(tx_.len - tx_.off, fpdu_even_payload(tx_.len, max_payload));
      DdpHeader h;
      h.opcode = RdmapOpcode::kReadResponse;
      h.last = tx_.off + seg == tx_.len;
      h.stag = in.sink_stag;
      h.to = in.sink_to + tx_.off;
      LocalSge src{const_cast<uint8_t*>(in.src), in.size, 0};
      tx_append_fpdu_locked(h, nullptr, 0, &src, in.size > 0 ? 1 : 0, tx_.off, static_cast<uint32_t>(seg));
      tx_.off += seg;
      if (h.last) {
        ++irq_started_;
        ++b.irq_done;
        tx_.kind = TxKind::kNone;
      }
    } else {
      tx_.kind = TxKind::kNone;
    }
  }
  if (b.iov_count == 0) {
    // Only local requests (Bind/Invalidate) were consumed: they count as transmitted now.
    tx_batch_done_locked();
    return false;
  }
  return true;
}

bool QueuePairCore::tx_next_message_locked() {
  mu_.assert_held();
  // 1. The P2P RTR is the initiator's first FPDU (docs/iwarp.md §1.2, §4).
  if (tx_.rtr_pending) {
    tx_.rtr_pending = false;
    if (rtr_ == kRtrRead) {
      tx_internal_read_locked(0);  // confirms nothing: no request precedes the RTR
    } else {
      DdpHeader h;
      h.opcode = RdmapOpcode::kWrite;
      h.stag = kRtrStag;
      h.to = 0;
      tx_append_fpdu_locked(h, nullptr, 0, nullptr, 0, 0, 0);
    }
    return true;
  }
  // 2. Read Responses go between messages, in arrival order.
  if (irq_started_ < irq_count_) {
    const InRead& in = irq_[(irq_head_ + irq_started_) % irq_.size()];
    tx_.kind = TxKind::kReadResponse;
    tx_.off = 0;
    tx_.len = in.size;
    return true;
  }
  // 3. In a long stream, a confirmation Read every kConfirmStream requests even before the queue drains:
  //    completions (and the application's refills of its window) then flow back in chunks while the stream
  //    continues, instead of all at once a round trip after the last request of a queue-full.
  if (sq_next_ < sq_tail_ && last_unconfirmed_ - confirm_requested_ >= kConfirmStream &&
      tx_confirm_due_locked(false)) {
    tx_confirm_read_locked();
    return true;
  }
  // 4. The send queue in order.
  if (sq_next_ < sq_tail_) {
    SqRequest& r = sq_at(sq_next_);
    if (r.local_status != ND_SUCCESS) {
      // Its local SGEs failed their check at post time (qp.cc post_sq_locked): it is never transmitted. It
      // stalls the queue until every earlier request has completed — earlier Writes/Sends get their confirmation
      // Read now rather than at idle — and then fails with its status, ending the connection, as a local protection
      // error does on hardware (tx_fail_local_error_locked).
      if (!needs_confirmation_locked() || orq_count_ >= ord_) return false;
      tx_confirm_read_locked();
      return true;
    }
    if ((r.flags & ND_OP_FLAG_READ_FENCE) && orq_count_ > 0) return false;  // wait for earlier Reads
    switch (r.type) {
      case Nd2RequestTypeBind:
      case Nd2RequestTypeInvalidate:
        r.state = SqState::kTransmitted;
        ++sq_next_;
        tx_.batch->sq_done = sq_next_;
        return true;
      case Nd2RequestTypeRead: {
        if (orq_count_ >= std::max<uint32_t>(ord_, 1)) return false;  // ORD full: stall the queue
        const LocalSge* ls = sq_sges(sq_next_);
        uint32_t sink_stag = kRtrStag;
        uint64_t sink_to = 0;
        for (uint32_t i = 0; i < r.nsge; ++i) {
          if (ls[i].length > 0) {
            sink_stag = ls[i].stag;
            sink_to = reinterpret_cast<uintptr_t>(ls[i].addr);
            break;
          }
        }
        r.msn = ++tx_.read_msn;
        OutRead& o = orq_[(orq_head_ + orq_count_) % orq_.size()];
        o = OutRead{sq_next_, sq_next_ + 1, false, r.msn, sink_stag, sink_to, static_cast<uint32_t>(r.length), 0};
        ++orq_count_;
        peer_wait_started_locked();
        DdpHeader h;
        h.opcode = RdmapOpcode::kReadRequest;
        h.qn = kQnReadRequest;
        h.msn = r.msn;
        uint8_t body[kRdmapReadReqSize];
        encode_read_request(
            ReadRequest{sink_stag, sink_to, static_cast<uint32_t>(r.length), r.remote_token, r.remote_addr}, body);
        tx_append_fpdu_locked(h, body, sizeof body, nullptr, 0, 0, 0);
        r.state = SqState::kTransmitted;
        ++sq_next_;
        tx_.batch->sq_done = sq_next_;
        confirm_requested_ = std::max(confirm_requested_, sq_next_);
        return true;
      }
      default:
        if (r.type == Nd2RequestTypeWrite && tx_place_locked(r)) return true;
        if (r.type == Nd2RequestTypeSend) r.msn = ++tx_.send_msn;
        tx_.kind = TxKind::kSq;
        tx_.off = 0;
        tx_.len = r.length;
        return true;
    }
  }
  // 5. Idle with unconfirmed Writes/Sends: an internal zero-length Read confirms them (tx_confirm_due_locked).
  if (tx_confirm_due_locked(true)) {
    tx_confirm_read_locked();
    return true;
  }
  return false;
}

// Same host (docs/shm.md "Placement by the initiator"): the Write lands in the peer's memory by our own copy when
// the peer published an entry that passes its checks, and it has processed every byte we put in the ring without
// error (Placer::place). Nothing of ours is waiting in the batch either, so nothing sent before it can land after
// it, and what follows goes into the ring after the copy returned. Since the peer processed everything before it
// without a Terminate, those requests are confirmed, and so is this one: it completes in order with no
// confirmation Read.
// By process_vm_writev only where it pays (Placer::worth_it): a peer polling its ring (manual mode, the busy window)
// takes a Write from it sooner than our two system calls here (the liveness check, process_vm_writev) place it; a
// sleeping one would need a doorbell and a thread wake-up, and one spinning on the placed memory does not read its
// ring at all. By a store into a mapped region always: that costs less than writing the ring.
bool QueuePairCore::tx_place_locked(SqRequest& r) {
  mu_.assert_held();
  if (!shm_ || tx_.batch->iov_count != 0 || r.length == 0 || r.length > shm::kPlaceMaxBytes ||
      shm_->placer().state() == shm::Placer::Probe::kOff) {
    return false;
  }
  const bool worth = shm_->placer().worth_it(shm_->peer_asleep(), shm_->peer_polls(), shm_->peer_sent());
  if (!worth && !shm_->placer().may_store()) return false;
  iovec local[limits::kMaxSge];
  int n = 0;
  const LocalSge* ls = sq_sges(sq_next_);
  for (uint32_t i = 0; i < r.nsge; ++i) {
    if (ls[i].length > 0) local[n++] = iovec{ls[i].addr, ls[i].length};
  }
  if (!shm_->placer().place(r.remote_token, r.remote_addr, local, n, r.length, shm_->tx_produced(), worth)) return false;
  r.state = SqState::kTransmitted;
  ++sq_next_;
  tx_.batch->sq_done = sq_next_;
  sq_sent_ = std::max(sq_sent_, sq_next_);
  confirmed_seq_ = std::max(confirmed_seq_, sq_next_);
  confirm_requested_ = std::max(confirm_requested_, sq_next_);
  last_unconfirmed_ = std::max(last_unconfirmed_, sq_next_);
  peer_activity_locked();
  return true;
}

// Is an internal confirmation Read due? While one is already on its way, later requests wait for its response
// (which issues the next one) unless a batch of kConfirmBatch has built up: a stream of small Writes then costs
// one Read round trip per batch instead of a Read Request + Read Response per Write. At idle (`idle`), a lone
// signaled Write still gets its Read at once. Silent requests produce no completion on success (a failure still
// comes back as a Terminate naming the offender), so they alone only call for a Read once a batch of them holds
// send-queue slots.
bool QueuePairCore::tx_confirm_due_locked(bool idle) const {
  mu_.assert_held();
  if (!needs_confirmation_locked() || orq_count_ >= ord_) return false;
  const uint64_t unconfirmed = last_unconfirmed_ - confirm_requested_;
  const bool signaled = last_signaled_unconfirmed_ > confirm_requested_;
  const uint64_t silent_batch = std::max<uint64_t>(1, std::min<uint64_t>(kConfirmBatch, sq_depth_ / 2));
  if (!signaled) return unconfirmed >= silent_batch;
  return unconfirmed >= kConfirmBatch || (idle && !confirm_read_outstanding_locked());
}

// Appends an internal zero-length Read Request that confirms every request transmitted before it.
void QueuePairCore::tx_confirm_read_locked() {
  mu_.assert_held();
  confirm_requested_ = sq_next_;
  tx_internal_read_locked(sq_next_);
}

// Appends an internal zero-length Read Request (the P2P RTR, or a confirmation of requests with seq < confirms).
void QueuePairCore::tx_internal_read_locked(uint64_t confirms) {
  mu_.assert_held();
  OutRead& o = orq_[(orq_head_ + orq_count_) % orq_.size()];
  o = OutRead{0, confirms, true, ++tx_.read_msn, kRtrStag, 0, 0, 0};
  ++orq_count_;
  peer_wait_started_locked();
  DdpHeader h;
  h.opcode = RdmapOpcode::kReadRequest;
  h.qn = kQnReadRequest;
  h.msn = o.msn;
  uint8_t body[kRdmapReadReqSize];
  encode_read_request(ReadRequest{kRtrStag, 0, 0, kRtrStag, 0}, body);
  tx_append_fpdu_locked(h, body, sizeof body, nullptr, 0, 0, 0);
}

void QueuePairCore::tx_append_fpdu_locked(const DdpHeader& h, const uint8_t* body, size_t body_len,
                                          const LocalSge* sge, uint32_t nsge, uint64_t offset, uint32_t len) {
  mu_.assert_held();
  tx_.batch->append_fpdu(h, body, body_len, sge, nsge, offset, len, crc_);
}

bool QueuePairCore::tx_flush_locked() {
  mu_.assert_held();
  TxBatch& b = *tx_.batch;
  while (b.iov_pos < b.iov_count) {
    const int cnt = std::min(b.iov_count - b.iov_pos, kSendIovMax);
    const ptrdiff_t n = shm_ ? shm_->send_iov(&b.iov[b.iov_pos], cnt) : net::send_iov(sock_, &b.iov[b.iov_pos], cnt);
    if (n == -EAGAIN || n == -EWOULDBLOCK || n == -EINTR) {
      if (n != -EINTR) {
        tx_set_want_write_locked(true);
        return false;
      }
      continue;
    }
    if (n < 0) {
      // The connection is gone. What the peer sent before it reset the connection is still readable, and may be
      // a Terminate naming the request being transmitted: a peer that rejects a large Write on its first FPDU
      // and then closes with the rest unread resets the connection, and that Write must complete
      // ND_ACCESS_VIOLATION, not ND_CANCELED (#16.4). So the receive side reads first; if it found no Terminate
      // (or none could be read), everything outstanding is cancelled.
      trace("qp %p send failed: errno %d", static_cast<void*>(this), static_cast<int>(-n));
      peer_eof_ = true;
      rx_progress_locked();
      if (state_ == State::kConnected) {
        fail_locked(ND_CONNECTION_ABORTED, true, false, kNoOffender, ND_CANCELED, ND_CANCELED);
      }
      return false;
    }
    size_t left = static_cast<size_t>(n);
    b.sent += left;
    peer_activity_locked();
    while (b.iov_pos < b.iov_count && (left > 0 || b.iov[b.iov_pos].iov_len == 0)) {
      iovec& v = b.iov[b.iov_pos];
      if (left >= v.iov_len) {
        left -= v.iov_len;
        ++b.iov_pos;
      } else {
        v.iov_base = static_cast<uint8_t*>(v.iov_base) + left;
        v.iov_len -= left;
        left = 0;
      }
    }
  }
  tx_batch_done_locked();
  return true;
}

void QueuePairCore::tx_batch_done_locked() {
  mu_.assert_held();
  TxBatch& b = *tx_.batch;
  if (b.sq_done > sq_sent_) sq_sent_ = b.sq_done;
  for (uint32_t k = 0; k < b.irq_done && irq_count_ > 0; ++k) {
    InRead& in = irq_[irq_head_];
    if (in.pin != 0) stags_.unpin(in.pin);
    in.pin = 0;
    irq_head_ = (irq_head_ + 1) % irq_.size();
    --irq_count_;
    if (irq_started_ > 0) --irq_started_;
  }
  b.irq_done = 0;
  b.iov_count = 0;
  b.iov_pos = 0;
  b.fpdus = 0;
  b.bytes = 0;
  b.sent = 0;
  complete_ready_locked();
}

void QueuePairCore::send_terminate_locked(TermCode code, const uint8_t* ulpdu, size_t avail, uint16_t ulpdu_len) {
  mu_.assert_held();
  if (tx_.term_sent || sock_ == net::kInvalidSocket) return;
  tx_.term_sent = true;
  TxBatch& b = *tx_.batch;
  // Best effort, as siw: never in the middle of a half-sent FPDU stream.
  if (b.iov_count > 0 && b.sent > 0) return;
  b.clear();
  const size_t n = build_terminate_fpdu(code, ulpdu, avail, ulpdu_len, crc_, tx_.term_fpdu);
  iovec v{tx_.term_fpdu, n};
  (void)(shm_ ? shm_->send_iov(&v, 1) : net::send_iov(sock_, &v, 1));
}

}  // namespace netdirect::soft

// The queue pair side of its receive stream (rx_stream.h): socket readiness, draining a closing socket, and the
// RxEvents the stream calls — posted receives, outstanding Reads (ORQ), inbound Reads (IRQ), completions,
// Terminates and failures (design: qp.h).
#include "soft/qp/qp.h"

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "soft/memory/stag_table.h"
#include "soft/shm/link.h"
#include "soft/wire/terminate.h"

namespace netdirect::soft {

using namespace wire;

namespace {
constexpr int kRxBudget = RxStream::kRxBudget;  // recv calls per wake-up before other sockets get a turn
constexpr uint64_t kNoOffender = ~uint64_t{0};

// The connection's socket, noting whether any byte arrived (the bounded wait for Read Responses, qp_tx.cc).
class WatchedSocketSource final : public RxSource {
 public:
  explicit WatchedSocketSource(net::Socket s) : s_(s) {}
  ptrdiff_t read(void* buf, size_t len) override { return note(net::recv_bytes(s_, buf, len)); }
  ptrdiff_t readv(const iovec* iov, int iovcnt) override { return note(net::recv_iov(s_, iov, iovcnt)); }
  bool moved() const { return moved_; }

 private:
  ptrdiff_t note(ptrdiff_t n) {
    if (n > 0) moved_ = true;
    return n;
  }
  net::Socket s_;
  bool moved_ = false;
};

// A same-host connection's receive side (docs/shm.md): the ring, and when it is empty and the socket said it has
// something, the socket — whose end is the peer's end (bytes placed in the ring before it left are read first); a
// byte on it is a peer breaking protocol (nothing but MPA frames ever travels it).
class ShmRxSource final : public RxSource {
 public:
  ShmRxSource(shm::Link& link, net::Socket s, bool check_socket) : link_(link), s_(s), check_(check_socket) {}
  ptrdiff_t read(void* buf, size_t len) override {
    iovec v{buf, len};
    return readv(&v, 1);
  }
  ptrdiff_t readv(const iovec* iov, int iovcnt) override {
    ptrdiff_t n = link_.recv_iov(iov, iovcnt);
    if (n != -EAGAIN || !check_) return note(n);
    uint8_t b;
    const ptrdiff_t t = net::recv_bytes(s_, &b, 1);
    if (t == -EAGAIN || t == -EWOULDBLOCK || t == -EINTR) return -EAGAIN;
    if (t > 0) return -EPROTO;
    n = link_.recv_iov(iov, iovcnt);
    return n == -EAGAIN ? t : note(n);  // end of stream (sticky) or the socket's error, after the ring's last byte
  }
  bool moved() const { return moved_; }

 private:
  ptrdiff_t note(ptrdiff_t n) {
    if (n > 0) moved_ = true;
    return n;
  }
  shm::Link& link_;
  net::Socket s_;
  bool check_;
  bool moved_ = false;
};

bool is_access_error(TermCode c) {
  return (c.layer == static_cast<uint8_t>(TermLayer::kDdp) && c.etype == static_cast<uint8_t>(DdpEtype::kTagged)) ||
         (c.layer == static_cast<uint8_t>(TermLayer::kRdmap) &&
          c.etype == static_cast<uint8_t>(RdmapEtype::kRemoteProtection));
}
}  // namespace

void QueuePairCore::on_io(uint32_t events) {
  bool close_now = false;
  {
    std::lock_guard<ndkit::CheckedMutex> lock(mu_);
    if (sock_ == net::kInvalidSocket) return;
    shm_check_tcp_ = shm_ != nullptr;  // same host: the socket only reports the peer's end
    io_locked(events, &close_now);
    shm_check_tcp_ = false;
  }
  if (close_now) close_socket_now();
  kick_teardown();
  fire_events();
}

// The peer placed bytes in our ring or freed space in its own, and rang (docs/shm.md "Waking").
void QueuePairCore::Doorbell::on_io(uint32_t) {
  bool close_now = false;
  {
    std::lock_guard<ndkit::CheckedMutex> lock(qp->mu_);
    if (qp->sock_ == net::kInvalidSocket || !qp->shm_) return;
    qp->shm_->drain_doorbell();
    qp->io_locked(Engine::kRead | (qp->tx_.want_write ? Engine::kWrite : 0), &close_now);
  }
  if (close_now) qp->close_socket_now();
  qp->kick_teardown();
  qp->fire_events();
}

void QueuePairCore::io_locked(uint32_t events, bool* close_now) {
  mu_.assert_held();
  if (rx_.stopped()) {
    *close_now = rx_drain_locked();
    return;
  }
  if (events & Engine::kWrite) tx_progress_locked();
  if (events & Engine::kRead) rx_progress_locked();
  if (state_ == State::kConnected) {
    if (rcq_->failed() || icq_->failed()) {
      fail_locked(ND_INTERNAL_ERROR, true, false, kNoOffender, ND_CANCELED, ND_CANCELED);
    } else {
      complete_ready_locked();
      tx_progress_or_defer_locked();
    }
  }
}

bool QueuePairCore::rx_drain_locked() {
  mu_.assert_held();
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

void QueuePairCore::rx_progress_locked() {
  mu_.assert_held();
  if (state_ != State::kConnected) return;
  if (shm_) {
    shm_rx_progress_locked();
    return;
  }
  WatchedSocketSource src(sock_);
  rx_.progress(src);
  if (src.moved()) peer_activity_locked();
}

void QueuePairCore::shm_rx_progress_locked() {
  mu_.assert_held();
  ShmRxSource src(*shm_, sock_, shm_check_tcp_);
  for (int round = 0;; ++round) {
    rx_.progress(src);
    // An inline poller reads the ring itself and wants no kicks; otherwise arm before the engine sleeps, and
    // read again what arrived meanwhile (docs/shm.md "Waking").
    if (state_ != State::kConnected || rx_.stopped() || rx_inline_) break;
    if (!shm_->arm_rx()) break;
    if (round == 3) {  // a stream that keeps coming: let the engine's other sources have their turn
      shm_->kick_self();
      break;
    }
  }
  if (src.moved()) peer_activity_locked();
  // Placement by the initiator (docs/shm.md): the peer may place directly once we processed everything it sent
  // (an FPDU that failed its checks stopped the stream: then we are no longer connected); our table goes public
  // once the peer proved it can write into this process anyway.
  shm_->note_rx_poll();
  shm::PlaceTable& t = shm_->place_table();
  if (state_ == State::kConnected && rx_.idle()) {
    t.set_processed(shm_->rx_consumed());
    if (!place_sink_on_ && t.proof_ok()) {
      stags_.add_place_sink(&t);
      place_sink_on_ = true;
    }
  }
}

void QueuePairCore::place_sink_off_locked() {
  mu_.assert_held();
  if (!place_sink_on_) return;
  place_sink_on_ = false;
  stags_.remove_place_sink(&shm_->place_table());  // returns once no placement of the peer can still land
}

bool QueuePairCore::rx_take_receive(RecvRequest* out) {
  if (srq_ != nullptr) return srq_->pop(out);
  if (rq_head_ == rq_tail_) return false;
  const RecvRequest& r = rq_[rq_head_ % rq_depth_];
  out->context = r.context;
  out->nsge = r.nsge;
  out->length = r.length;
  std::copy(r.sge, r.sge + r.nsge, out->sge);
  ++rq_head_;
  return true;
}

void QueuePairCore::rx_receive_done(RecvRequest& r, HRESULT status, uint32_t bytes, bool solicited) {
  complete_recv_locked(r, status, bytes, solicited);
}

bool QueuePairCore::rx_read_target(RxReadTarget* out) {
  if (orq_count_ == 0) return false;
  const OutRead& o = orq_[orq_head_];
  out->internal = o.internal;
  out->size = o.size;
  out->received = o.received;
  out->sink_stag = o.sink_stag;
  out->sink_to = o.sink_to;
  if (o.internal) {
    out->sge = nullptr;
    out->nsge = 0;
  } else {
    out->sge = sq_sges(o.sq_seq);
    out->nsge = sq_at(o.sq_seq).nsge;
  }
  return true;
}

void QueuePairCore::rx_read_progress(uint32_t bytes) { orq_[orq_head_].received += bytes; }

void QueuePairCore::rx_read_response_done() {
  OutRead& o = orq_[orq_head_];
  if (!o.internal) sq_at(o.sq_seq).read_done = true;
  // Everything sent before this Read Request was processed by the peer (qp.h).
  confirmed_seq_ = std::max(confirmed_seq_, o.confirm_seq);
  orq_head_ = (orq_head_ + 1) % orq_.size();
  --orq_count_;
  complete_ready_locked();
}

bool QueuePairCore::rx_inbound_read_room(bool rtr) {
  return (rtr || irq_count_ < ird_) && irq_count_ < irq_.size();
}

void QueuePairCore::rx_inbound_read(uint32_t sink_stag, uint64_t sink_to, uint32_t size, const uint8_t* src,
                                    uint32_t pin) {
  InRead& in = irq_[(irq_head_ + irq_count_) % irq_.size()];
  in = InRead{sink_stag, sink_to, size, 0, src, pin};
  ++irq_count_;
}

void QueuePairCore::rx_rtr_received() { event_rtr_pending_ = true; }

void QueuePairCore::rx_protocol_error(TermCode code, HRESULT recv_status, HRESULT read_status, const uint8_t* ulpdu,
                                      size_t avail, uint16_t ulpdu_len) {
  send_terminate_locked(code, ulpdu, avail, ulpdu_len);
  const HRESULT event = is_access_error(code) ? ND_ACCESS_VIOLATION : ND_REMOTE_ERROR;
  // A malformed Read Response blames the peer on the Read it answers (docs/nd2.md §3.6); the requests before
  // that Read were processed by the peer (it answered the Read, so it took everything sent before it).
  if (read_status != ND_CANCELED && orq_count_ > 0 && !orq_[orq_head_].internal) {
    fail_locked(event, true, true, orq_[orq_head_].sq_seq, read_status, recv_status);
    return;
  }
  fail_locked(event, true, false, kNoOffender, ND_CANCELED, recv_status);
}

void QueuePairCore::rx_connection_failed(HRESULT status, bool peer_gone) {
  if (peer_gone) peer_eof_ = true;
  fail_locked(status, true, false, kNoOffender, ND_CANCELED, ND_CANCELED);
}

void QueuePairCore::rx_terminate_received(const TerminateInfo& t) {
  if (rx_.awaiting_rtr() && terminate_declines_setup(t)) {
    // In place of its RTR the initiator declined the connection (MpaSetup::decline) or cannot meet our Reply's
    // terms: the Accept fails ND_CONNECTION_REFUSED (cm/connector_core.cc).
    fail_locked(ND_CONNECTION_REFUSED, true, false, kNoOffender, ND_CANCELED, ND_CANCELED);
    return;
  }
  const TermVerdict v = classify_terminate(t);
  uint64_t offender = kNoOffender;
  // Transmitted requests and the one being transmitted now: a large Write is still being segmented when the
  // peer's Terminate for its first FPDU arrives.
  const uint64_t end = sq_next_ + (tx_.kind == TxKind::kSq ? 1 : 0);
  for (uint64_t s = sq_head_; s < end && offender == kNoOffender; ++s) {
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
  if (offender == kNoOffender && sq_head_ < end) offender = sq_head_;
  fail_locked(v.status, true, true, offender, v.status, ND_CANCELED);
}

}  // namespace netdirect::soft

// The queue pair's state machine (QueuePairCore): creation of its rings, posting (the queues' admission and
// doorbell batching), request state, in-order completions, error state and flush, attach, inline progress and
// connection teardown. The IND2QueuePair methods themselves are soft/queue_pair.cc; transmit is qp_tx.cc,
// receive/placement qp_rx.cc (design: qp.h).
#include "soft/qp/qp.h"

#include "soft/env.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <new>

#include "soft/memory/stag_table.h"
#include "soft/trace.h"

namespace netdirect::soft {

namespace {
constexpr uint64_t kNoOffender = ~uint64_t{0};
constexpr uint32_t kLingerMs = 2000;  // how long a closing socket drains before it is closed anyway
constexpr uint32_t kInlineLeaseMs = 1;  // inline progress: the engine takes reading back this long after the
constexpr uint64_t kInlineLeaseNs = 1000000;  // last inline poll (checked every kInlineLeaseMs)
// Doorbell batching by the engine (post_sq_locked) only holds posts up to this size: batching saves a send call per
// post, which a larger payload's copy dwarfs, and waiting for a Read Response behind a large message stalls a stream.
constexpr uint64_t kEngineBatchMaxBytes = 16 * 1024;
// ...and only behind at least this many requests awaiting completion: a stream, not a conversation. In ping-pong
// traffic the Read that would flush the queue may be answered by a peer thread that is slow to wake (measured:
// ndbench write_lat in thread mode then saw medians of ~2 ms in some runs).
constexpr uint64_t kEngineBatchMinInFlight = 8;

uint64_t now_ns() {
  return static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
          .count());
}
}  // namespace

uint32_t response_timeout_ms() {
  std::string v_env;
  const char* v = env_value("NETDIRECT_SOFT_RESPONSE_TIMEOUT_MS", v_env);
  if (v == nullptr || *v == '\0') return kResponseTimeoutMsDefault;
  char* end = nullptr;
  const unsigned long ms = std::strtoul(v, &end, 10);
  if (*end != '\0') return kResponseTimeoutMsDefault;  // not a number: the default
  return static_cast<uint32_t>(std::min<unsigned long>(ms, 24ul * 3600 * 1000));
}

// ---------------------------------------------------------------------------------------------------
// Creation and destruction

QueuePairCore::QueuePairCore(Engine& engine, StagTable& stags, CompletionSink* rcq, CompletionSink* icq,
                             ReceiveSource* srq, void* context)
    : engine_(engine), stags_(stags), rcq_(rcq), icq_(icq), srq_(srq), context_(context), rx_(stags, *this) {}

QueuePairCore::~QueuePairCore() = default;

HRESULT QueuePairCore::allocate(uint32_t receiveDepth, uint32_t initiatorDepth, uint32_t maxReceiveSge,
                                uint32_t maxInitiatorSge, uint32_t inlineDataSize) {
  try {
    sq_depth_ = initiatorDepth;
    sq_max_sge_ = std::max<uint32_t>(maxInitiatorSge, 1);  // inline requests use one SGE slot
    inline_size_ = inlineDataSize;
    sq_.resize(initiatorDepth);
    sq_sge_.resize(static_cast<size_t>(initiatorDepth) * sq_max_sge_);
    inline_buf_.resize(static_cast<size_t>(initiatorDepth) * inlineDataSize);
    if (srq_ == nullptr) {
      rq_depth_ = receiveDepth;
      rq_max_sge_ = maxReceiveSge;
      rq_.resize(receiveDepth);
    }
    tx_.batch = std::make_unique<TxBatch>();
    sq_max_sge_request_ = maxInitiatorSge;
  } catch (...) {
    return ND_NO_MEMORY;
  }
  return ND_SUCCESS;
}

void QueuePairCore::destroy() {
  remove_progress_sources();  // normally done when the socket closed
  // Released without a flush (never connected, or after teardown): give back every pin, no completions.
  for (uint64_t s = sq_head_; s < sq_tail_; ++s) release_local_sges(stags_, sq_sges(s), sq_at(s).nsge);
  for (uint64_t s = rq_head_; s < rq_tail_; ++s) {
    RecvRequest& r = rq_[s % rq_depth_];
    release_local_sges(stags_, r.sge, r.nsge);
  }
  rx_.release();  // (before the adapter, and with it the STag table, may go)
  for (uint32_t i = 0; i < irq_count_; ++i) {
    InRead& in = irq_[(irq_head_ + i) % irq_.size()];
    if (in.pin != 0) stags_.unpin(in.pin);
  }
  {
    std::lock_guard<ndkit::CheckedMutex> lock(mu_);
    place_sink_off_locked();
  }
  if (sock_ != net::kInvalidSocket) {
    engine_.remove(sock_, this);
    if (doorbell_added_) engine_.remove(shm_->doorbell(), &doorbell_);
    net::close_socket(sock_, true);
  }
}

bool QueuePairCore::connected() const {
  std::lock_guard<ndkit::CheckedMutex> lock(mu_);
  return state_ == State::kConnected;
}

bool QueuePairCore::same_host() const {
  std::lock_guard<ndkit::CheckedMutex> lock(mu_);
  return shm_ != nullptr;
}

bool QueuePairCore::transport(bool* shm) const {
  std::lock_guard<ndkit::CheckedMutex> lock(mu_);
  if (!ever_attached_) return false;
  *shm = shm_used_;
  return true;
}

// ---------------------------------------------------------------------------------------------------
// Posting (the face's IND2QueuePair methods)

HRESULT QueuePairCore::post_send_queue(void* ctx, ND2_REQUEST_TYPE type, const ND2_SGE* sge, ULONG nSge, ULONG flags,
                                       uint64_t raddr, uint32_t rtoken) {
  std::unique_lock<ndkit::CheckedMutex> lock(mu_);
  HRESULT hr = post_sq_locked(ctx, type, sge, nSge, flags, raddr, rtoken);
  lock.unlock();
  kick_teardown();
  return hr;
}

HRESULT QueuePairCore::post_receive(void* ctx, const ND2_SGE* sge, ULONG nSge) {
  if (srq_ != nullptr) return ND_INVALID_DEVICE_REQUEST;  // receives come from the SRQ
  std::lock_guard<ndkit::CheckedMutex> lock(mu_);
  if (nSge > rq_max_sge_) return ND_DATA_OVERRUN;
  // Flushed (failed, closed or Flush()ed): the receive completes ND_CANCELED (docs/nd2.md §3.6).
  if (flushed_post_locked(rcq_, ctx, Nd2RequestTypeReceive, false)) return ND_SUCCESS;
  if (rq_tail_ - rq_head_ >= rq_depth_) return ND_NO_MORE_ENTRIES;
  RecvRequest& r = rq_[rq_tail_ % rq_depth_];
  uint64_t total = 0;
  HRESULT hr = prepare_local_sges(stags_, sge, nSge, rq_max_sge_, access::kLocalWrite, r.sge, &total);
  if (hr != ND_SUCCESS) return hr;
  r.context = ctx;
  r.nsge = nSge;
  r.length = total;
  ++rq_tail_;
  return ND_SUCCESS;
}

HRESULT QueuePairCore::admit_window_locked() {
  mu_.assert_held();
  HRESULT hr = check_post_locked();
  if (hr == ND_SUCCESS && sq_tail_ - sq_head_ >= sq_depth_) hr = ND_NO_MORE_ENTRIES;
  return hr;
}

void QueuePairCore::queue_window_locked(void* ctx, ND2_REQUEST_TYPE type, ULONG flags) {
  mu_.assert_held();
  SqRequest& r = sq_at(sq_tail_);
  r = SqRequest{ctx, type, SqState::kQueued, false, flags, 0, 0, 0, 0, 0};
  ++sq_tail_;
  tx_progress_locked();
}

void QueuePairCore::flush() {
  std::unique_lock<ndkit::CheckedMutex> lock(mu_);
  switch (state_) {
    case State::kIdle:
    case State::kConnecting:
      // Not connected: only receives can be outstanding.
      state_ = State::kError;
      fail_locked(ND_CANCELED, false, false, kNoOffender, ND_CANCELED, ND_CANCELED);
      break;
    case State::kConnected:
      fail_locked(ND_CANCELED, true, false, kNoOffender, ND_CANCELED, ND_CANCELED);
      break;
    default:
      break;  // already flushed
  }
  lock.unlock();
  kick_teardown();
}

// ---------------------------------------------------------------------------------------------------
// Posts

HRESULT QueuePairCore::check_post_locked() {
  mu_.assert_held();
  if (state_ != State::kConnected) return ND_CONNECTION_INVALID;
  if (rcq_->failed() || icq_->failed()) {
    // CQ overrun: the CQ and its QPs are unusable (docs/nd2.md §7.3).
    fail_locked(ND_INTERNAL_ERROR, true, false, kNoOffender, ND_CANCELED, ND_CANCELED);
    return ND_CONNECTION_INVALID;
  }
  return ND_SUCCESS;
}

bool QueuePairCore::flushed_post_locked(CompletionSink* cq, void* ctx, ND2_REQUEST_TYPE type, bool sq) {
  mu_.assert_held();
  if (state_ != State::kError && state_ != State::kClosing) return false;
  if (sq && !ever_attached_) return false;  // never connected: ND_CONNECTION_INVALID
  push_cqe_locked(cq, ctx, type, ND_CANCELED, 0, false);
  return true;
}

HRESULT QueuePairCore::post_sq_locked(void* ctx, ND2_REQUEST_TYPE type, const ND2_SGE* sge, ULONG nSge, ULONG flags,
                                      uint64_t raddr, uint32_t rtoken) {
  mu_.assert_held();
  const bool inl = (flags & ND_OP_FLAG_INLINE) != 0;
  if (nSge > (inl ? limits::kMaxSge : sq_max_sge_request_)) return ND_DATA_OVERRUN;
  if (nSge > 0 && sge == nullptr) return ND_INVALID_PARAMETER_2;
  // After the connection failed or closed, requests are accepted and complete ND_CANCELED (docs/nd2.md §3.6).
  if (flushed_post_locked(icq_, ctx, type, true)) return ND_SUCCESS;
  HRESULT hr = check_post_locked();
  if (hr != ND_SUCCESS) return hr;
  if (sq_tail_ - sq_head_ >= sq_depth_) return ND_NO_MORE_ENTRIES;
  if (type == Nd2RequestTypeRead && ord_ == 0) return ND_INVALID_DEVICE_REQUEST;  // no outbound Reads negotiated
  const uint64_t seq = sq_tail_;
  SqRequest& r = sq_at(seq);
  LocalSge* ls = sq_sges(seq);
  uint64_t total = 0;
  if (inl) {
    for (ULONG i = 0; i < nSge; ++i) total += sge[i].BufferLength;
    if (total > inline_size_) return ND_BUFFER_OVERFLOW;
    uint8_t* dst = inline_buf_.data() + (seq % sq_depth_) * inline_size_;
    size_t off = 0;
    for (ULONG i = 0; i < nSge; ++i) {
      if (sge[i].BufferLength == 0) continue;
      std::memcpy(dst + off, sge[i].Buffer, sge[i].BufferLength);
      off += sge[i].BufferLength;
    }
    ls[0] = LocalSge{dst, static_cast<uint32_t>(total), 0};
    r.nsge = total > 0 ? 1 : 0;
  } else {
    const uint32_t rights = type == Nd2RequestTypeRead ? access::kLocalWrite : 0;
    hr = prepare_local_sges(stags_, sge, nSge, sq_max_sge_request_, rights, ls, &total);
    if (hr == ND_ACCESS_VIOLATION) {
      // A local SGE outside its region (or a bad token / missing rights) is the request's completion status, as on
      // hardware (ND returns no ND_ACCESS_VIOLATION from Send/Read/Write): it fails in order, ending the connection.
      total = 0;
      nSge = 0;
    } else if (hr != ND_SUCCESS) {
      return hr;
    }
    r.nsge = nSge;
  }
  r.local_status = hr;
  r.context = ctx;
  r.type = type;
  r.state = SqState::kQueued;
  r.read_done = false;
  r.flags = flags;
  r.msn = 0;
  r.length = total;
  r.remote_addr = raddr;
  r.remote_token = rtoken;
  ++sq_tail_;
  // Inside a batch (begin_batch): end_batch rings the doorbell once for all of its posts.
  if (batch_depth_ > 0) {
    batch_bytes_ = std::max(batch_bytes_, total);
    return ND_SUCCESS;
  }
  doorbell_locked(total);
  return ND_SUCCESS;
}

void QueuePairCore::begin_batch() {
  std::lock_guard<ndkit::CheckedMutex> lock(mu_);
  if (batch_depth_++ == 0) batch_bytes_ = 0;
}

void QueuePairCore::end_batch() {
  std::unique_lock<ndkit::CheckedMutex> lock(mu_);
  if (batch_depth_ == 0 || --batch_depth_ > 0) return;
  // Requests were queued (a post that failed its admission queued nothing): the batch leaves as one post would.
  if (state_ == State::kConnected && sq_next_ < sq_tail_) doorbell_locked(batch_bytes_);
  lock.unlock();
  kick_teardown();
}

void QueuePairCore::doorbell_locked(uint64_t total) {
  mu_.assert_held();
  // Doorbell batching: a post behind requests that still await their completion may only be queued, when
  // something that runs soon anyway transmits everything queued in one gather send:
  //  * while an inline poller is active (it polls in a loop), the first post after a poll goes out at once
  //    (latency), later ones stay queued for the poller's next empty GetResults (poll_progress), or for the
  //    lease check if polling stops;
  //  * otherwise, in a stream (a small post behind kEngineBatchMinInFlight requests or more) while one of our
  //    confirmation Reads is outstanding, the engine thread is woken by its response and transmits the queue
  //    (on_io). A stream of posts then costs one send call per round trip instead of one per post (each ~5 µs
  //    on a VM), and the posting thread makes no system call. Only our own Reads count: a peer that never
  //    answers those stalls every completion anyway, whereas an application Read may legitimately take long;
  //  * and while a send waits for a full socket to drain (tx_.want_write, the engine watches EPOLLOUT): the engine
  //    continues it and takes the queue along, where trying now would only fail again (perf trace of a stream
  //    of 1 MiB Writes: ~1 failing send call per post on the posting thread before this rule, none after).
  // Anything else goes out now.
  const bool behind = sq_sent_ > sq_head_;
  const bool stream = sq_tail_ - sq_head_ > kEngineBatchMinInFlight && total <= kEngineBatchMaxBytes;
  const bool queue_only = rx_inline_ ? posted_since_poll_ && behind
                                     : tx_.want_write || (behind && stream && confirm_read_outstanding_locked());
  // Posted while the event loop's consumer handles a round's completions: out with its Flush (Engine::deferring).
  if (!queue_only) tx_progress_or_defer_locked();
  posted_since_poll_ = rx_inline_;
}

// ---------------------------------------------------------------------------------------------------
// Completions

void QueuePairCore::push_cqe_locked(CompletionSink* cq, void* ctx, ND2_REQUEST_TYPE type, HRESULT status,
                                    ULONG bytes, bool solicited) {
  mu_.assert_held();
  ND2_RESULT r;
  r.Status = status;
  r.BytesTransferred = bytes;
  r.QueuePairContext = context_;
  r.RequestContext = ctx;
  r.RequestType = type;
  cq->push(r, solicited, flushing_);  // an overrun is noticed through cq->failed() at the next activity
}

void QueuePairCore::complete_sq_head_locked(HRESULT status) {
  mu_.assert_held();
  SqRequest& r = sq_at(sq_head_);
  release_local_sges(stags_, sq_sges(sq_head_), r.nsge);
  r.nsge = 0;
  if (status != ND_SUCCESS || !(r.flags & ND_OP_FLAG_SILENT_SUCCESS)) {
    push_cqe_locked(icq_, r.context, r.type, status, 0, false);
  }
  ++sq_head_;
}

void QueuePairCore::complete_recv_locked(RecvRequest& r, HRESULT status, ULONG bytes, bool solicited) {
  mu_.assert_held();
  release_local_sges(stags_, r.sge, r.nsge);
  r.nsge = 0;
  push_cqe_locked(rcq_, r.context, Nd2RequestTypeReceive, status, bytes, solicited);
}

void QueuePairCore::complete_ready_locked() {
  mu_.assert_held();
  // The completions of one call reach the CQ together (push_many): a poller that wakes for the first sees all.
  constexpr size_t kChunk = 64;
  ND2_RESULT done_cqes[kChunk];
  size_t n = 0;
  while (sq_head_ < sq_sent_) {
    const SqRequest& r = sq_at(sq_head_);
    bool done;
    switch (r.type) {
      case Nd2RequestTypeRead:
        done = r.read_done;
        break;
      case Nd2RequestTypeWrite:
      case Nd2RequestTypeSend:
        // Confirmed by a later Read Response; without ORD, on transmission (qp.h).
        done = ord_ == 0 || sq_head_ < confirmed_seq_;
        break;
      default:
        done = true;  // Bind / Invalidate took effect at post time
        break;
    }
    if (!done) break;
    SqRequest& head = sq_at(sq_head_);
    release_local_sges(stags_, sq_sges(sq_head_), head.nsge);
    head.nsge = 0;
    if (!(head.flags & ND_OP_FLAG_SILENT_SUCCESS)) {
      ND2_RESULT& r = done_cqes[n++];
      r.Status = ND_SUCCESS;
      r.BytesTransferred = 0;
      r.QueuePairContext = context_;
      r.RequestContext = head.context;
      r.RequestType = head.type;
      if (n == kChunk) {
        icq_->push_many(done_cqes, n);  // an overrun is noticed through icq_->failed() at the next activity
        n = 0;
      }
    }
    ++sq_head_;
  }
  if (n > 0) icq_->push_many(done_cqes, n);
}

void QueuePairCore::fail_locked(HRESULT event_status, bool report, bool success_before, uint64_t offender_seq,
                                HRESULT offender_status, HRESULT recv_status, const char* file, int line) {
  mu_.assert_held();
  trace("qp %p fails (%s:%d): state %d, event %08lx, sq head/sent/tail %llu/%llu/%llu, rq head/tail %llu/%llu",
        static_cast<void*>(this), trace_source(file), line, static_cast<int>(state_), static_cast<unsigned long>(event_status),
        static_cast<unsigned long long>(sq_head_), static_cast<unsigned long long>(sq_sent_),
        static_cast<unsigned long long>(sq_tail_), static_cast<unsigned long long>(rq_head_),
        static_cast<unsigned long long>(rq_tail_));
  const bool was_connected = state_ == State::kConnected;
  state_ = State::kError;
  place_sink_off_locked();  // the peer's placements stop before anything is completed
  if (shm_) shm_->placer().drop_mappings();  // ours are over too: the peer's memfds go now, not with the link
  // Every completion below is of a request the consumer posted within the queues' depths: the CQ makes room.
  flushing_ = true;
  // Send queue, in order: earlier transmitted requests the peer processed, the offender, the rest.
  while (sq_head_ < sq_tail_) {
    const SqRequest& r = sq_at(sq_head_);
    HRESULT st = ND_CANCELED;
    if (sq_head_ == offender_seq) {
      st = offender_status;
    } else if (success_before && offender_seq != kNoOffender && sq_head_ < offender_seq && sq_head_ < sq_sent_) {
      st = (r.type != Nd2RequestTypeRead || r.read_done) ? ND_SUCCESS : ND_CANCELED;
    } else if (r.type == Nd2RequestTypeRead && r.read_done) {
      st = ND_SUCCESS;
    }
    complete_sq_head_locked(st);
  }
  sq_sent_ = sq_next_ = sq_head_;
  // The receive being filled, then the posted ones (SRQ receives stay in the SRQ).
  rx_.stop(recv_status);  // no more receive processing; a placement pin goes back
  while (rq_head_ < rq_tail_) {
    complete_recv_locked(rq_[rq_head_ % rq_depth_], ND_CANCELED, 0, false);
    ++rq_head_;
  }
  flushing_ = false;
  // Inbound Reads will not be answered; outbound ones are gone with the send queue.
  while (irq_count_ > 0) {
    InRead& in = irq_[irq_head_];
    if (in.pin != 0) stags_.unpin(in.pin);
    irq_head_ = (irq_head_ + 1) % irq_.size();
    --irq_count_;
  }
  irq_started_ = 0;
  orq_count_ = 0;
  tx_.kind = TxKind::kNone;
  if (!was_connected) return;
  if (report) {
    event_closed_pending_ = true;
    event_closed_status_ = event_status;
  }
  schedule_teardown_locked();
}

// ---------------------------------------------------------------------------------------------------
// Connection lifecycle

HRESULT QueuePairCore::begin_connect() {
  std::lock_guard<ndkit::CheckedMutex> lock(mu_);
  if (state_ == State::kIdle) {
    state_ = State::kConnecting;
    return ND_SUCCESS;
  }
  // A flushed QP that never connected cannot connect any more either.
  return state_ == State::kError && sock_ == net::kInvalidSocket && !ever_attached_ ? ND_CONNECTION_INVALID
                                                                                     : ND_CONNECTION_ACTIVE;
}

void QueuePairCore::abort_connect() {
  std::lock_guard<ndkit::CheckedMutex> lock(mu_);
  if (state_ == State::kConnecting) state_ = State::kIdle;
}

// A connection attach() refuses: no event of ours will ever concern it, so the connector is forgotten again.
void QueuePairCore::refuse(net::Socket s) {
  net::close_socket(s, true);
  std::lock_guard<std::recursive_mutex> ev(events_mu_);
  events_ = nullptr;
}

bool QueuePairCore::attach(const Connection& c, ConnectionEvents* events) {
  {
    std::lock_guard<std::recursive_mutex> ev(events_mu_);  // events_mu_ before mu_ (docs/threads.md)
    events_ = events;
  }
  std::unique_lock<ndkit::CheckedMutex> lock(mu_);
  if (state_ != State::kConnecting && state_ != State::kIdle) {
    // Flushed while the connection was being set up: refuse it.
    lock.unlock();
    refuse(c.socket);
    return false;
  }
  try {
    orq_.assign(std::max<uint32_t>(c.mpa.ord, 1), OutRead{});
    irq_.assign(std::max<uint32_t>(c.mpa.ird, 1), InRead{});
  } catch (...) {
    lock.unlock();
    refuse(c.socket);
    return false;
  }
  sock_ = c.socket;
  shm_ = c.shm;
  shm_used_ = shm_ != nullptr;
  if (shm_) engine_.shm_link_up();  // until close_socket_now() lets the link go
  // Same host: no CRC (both ends agreed on the rings, so both know; nothing crosses a wire) and FPDUs as large as
  // the ULPDU Length allows (docs/shm.md).
  crc_ = shm_ ? false : c.mpa.crc;
  initiator_ = c.initiator;
  p2p_ = c.mpa.p2p;
  rtr_ = c.mpa.rtr;
  mss_ = shm_ ? shm::kShmMss : std::max<uint32_t>(c.mss, 64);
  ord_ = c.mpa.ord;
  ird_ = c.mpa.ird;
  peer_timeout_ms_ = response_timeout_ms();
  tx_.rtr_pending = p2p_ && initiator_;
  rx_.start(crc_, p2p_ && !initiator_, rtr_);
  state_ = State::kConnected;
  ever_attached_ = true;
  self_ref_ = true;
  hold();  // the connection keeps the QP alive until the socket is closed
  lock.unlock();
  if (!engine_.add(c.socket, this, Engine::kRead)) {
    lock.lock();
    fail_locked(ND_INSUFFICIENT_RESOURCES, true, false, kNoOffender, ND_CANCELED, ND_CANCELED);
    peer_eof_ = true;
    lock.unlock();
    kick_teardown();
    return true;  // attached, and failed at once: the connection-closed event reports it
  }
  if (shm_) {
    const bool rung = engine_.add(shm_->doorbell(), &doorbell_, Engine::kRead);
    lock.lock();
    doorbell_added_ = rung;
    if (!rung) {
      fail_locked(ND_INSUFFICIENT_RESOURCES, true, false, kNoOffender, ND_CANCELED, ND_CANCELED);
      peer_eof_ = true;
      lock.unlock();
      kick_teardown();
      return true;
    }
    lock.unlock();
  }
  add_progress_sources();
  lock.lock();
  tx_progress_locked();
  lock.unlock();
  kick_teardown();
  return true;
}

void QueuePairCore::add_progress_sources() {
  if (sources_added_.exchange(true)) return;
  rcq_->add_source(this);
  if (icq_ != rcq_) icq_->add_source(this);
}

void QueuePairCore::remove_progress_sources() {
  if (!sources_added_.exchange(false)) return;
  rcq_->remove_source(this);  // waits for a GetResults round that may be inside poll_progress()
  if (icq_ != rcq_) icq_->remove_source(this);
}

void QueuePairCore::inline_lease_check() {
  std::lock_guard<ndkit::CheckedMutex> lock(mu_);
  inline_timer_ = 0;
  if (sock_ == net::kInvalidSocket || !rx_inline_) return;
  if (now_ns() - inline_last_ns_ >= kInlineLeaseNs || state_ != State::kConnected) {
    end_inline_locked();  // nobody polls any more
    return;
  }
  inline_timer_ = engine_.add_timer(kInlineLeaseMs, [this] { inline_lease_check(); });
}

void QueuePairCore::end_inline_locked() {
  mu_.assert_held();
  // The engine reads again (level-triggered: input that is already there is reported at once), and requests
  // left queued by doorbell batching go out.
  rx_inline_ = false;
  if (shm_) {
    // The doorbell again, rung once by ourselves: the engine reads what came since the last poll, then arms.
    engine_.modify(shm_->doorbell(), &doorbell_, Engine::kRead);
    shm_->kick_self();
  } else {
    engine_.modify(sock_, this, sock_interest_locked());
  }
  tx_progress_locked();
}

void QueuePairCore::polling_stopped() {
  {
    std::lock_guard<ndkit::CheckedMutex> lock(mu_);
    if (sock_ == net::kInvalidSocket || !rx_inline_) return;
    end_inline_locked();
  }
  kick_teardown();  // a send that failed just now scheduled it
}

void QueuePairCore::poll_progress() {
  // Called by GetResults with the CQ's source lock held (the QP is registered, so its connection holds a
  // reference). Never blocks: when the engine thread is in on_io it makes the progress anyway.
  std::unique_lock<ndkit::CheckedMutex> lock(mu_, std::try_to_lock);
  if (!lock.owns_lock()) return;
  if (sock_ == net::kInvalidSocket || state_ != State::kConnected || rx_.stopped()) return;
  inline_last_ns_ = now_ns();
  posted_since_poll_ = false;
  if (!rx_inline_) {
    // Take the connection over from the engine: no EPOLLIN/EPOLLOUT wake-ups while this thread keeps polling
    // (it reads, and continues a send blocked on a full socket, itself).
    rx_inline_ = true;
    if (shm_) {
      // Same host: the ring is read here, so the peer need not ring; the engine still watches the socket for the
      // peer's end.
      shm_->disarm_rx();
      engine_.modify(shm_->doorbell(), &doorbell_, 0);
    } else {
      engine_.modify(sock_, this, 0);
    }
    if (inline_timer_ == 0) {
      inline_timer_ = engine_.add_timer(kInlineLeaseMs, [this] { inline_lease_check(); });
    }
  }
  rx_progress_locked();
  if (state_ == State::kConnected) {
    if (rcq_->failed() || icq_->failed()) {
      fail_locked(ND_INTERNAL_ERROR, true, false, kNoOffender, ND_CANCELED, ND_CANCELED);
    } else {
      complete_ready_locked();
      // Answers Read Requests that just arrived (the peer's confirmation Reads), sends what doorbell batching
      // queued, continues a send blocked on a full socket (one EAGAIN send when it still is). Skipped when there
      // is nothing of the sort: most polls of a spinning loop find nothing new.
      if (tx_pending_locked()) tx_progress_locked();
    }
  }
  const bool events = event_rtr_pending_ || event_closed_pending_;
  const bool kick = teardown_kick_;  // kick_teardown() without taking mu_ a second time
  teardown_kick_ = false;
  lock.unlock();
  if (kick) post_teardown();
  if (events) {
    // ConnectionEvents callbacks belong to the engine thread.
    hold();
    engine_.post([this] {
      fire_events();
      drop();
    });
  }
}

void QueuePairCore::disconnect(std::function<void()> done) {
  hold();
  engine_.post([this, done = std::move(done)]() mutable {
    std::unique_lock<ndkit::CheckedMutex> lock(mu_);
    if (sock_ == net::kInvalidSocket) {
      lock.unlock();
      if (done) done();
      drop();
      return;
    }
    disconnect_done_.push_back(std::move(done));
    if (state_ == State::kConnected) {
      fail_locked(ND_SUCCESS, false, false, kNoOffender, ND_CANCELED, ND_CANCELED);
    }
    lock.unlock();
    kick_teardown();
    drop();
  });
}

void QueuePairCore::detach_events() {
  std::lock_guard<std::recursive_mutex> ev(events_mu_);
  events_ = nullptr;
}

void QueuePairCore::schedule_teardown_locked() {
  mu_.assert_held();
  if (teardown_scheduled_ || sock_ == net::kInvalidSocket) return;
  teardown_scheduled_ = true;
  teardown_kick_ = true;
}

void QueuePairCore::kick_teardown() {
  bool kick;
  {
    std::lock_guard<ndkit::CheckedMutex> lock(mu_);
    kick = teardown_kick_;
    teardown_kick_ = false;
  }
  if (kick) post_teardown();
}

void QueuePairCore::post_teardown() {
  // Socket work and callbacks always happen on the engine thread without mu_.
  hold();
  engine_.post([this] {
    run_teardown();
    drop();
  });
}

void QueuePairCore::run_teardown() {
  fire_events();
  bool close_now;
  net::Socket s;
  {
    std::lock_guard<ndkit::CheckedMutex> lock(mu_);
    s = sock_;
    if (s == net::kInvalidSocket) return;
    close_now = peer_eof_;
    if (rx_inline_) {
      rx_inline_ = false;  // draining / closing is the engine's job again
      engine_.modify(s, this, sock_interest_locked());
      if (shm_) engine_.modify(shm_->doorbell(), &doorbell_, Engine::kRead);
    }
    if (!close_now) {
      // Let a Terminate (or the last bytes) reach the peer: shut down our direction and drain until the
      // peer closes, instead of closing with unread data (which resets the connection).
      linger_ = true;
      rx_.stop(ND_CANCELED);
      tx_set_want_write_locked(false);
      net::shutdown_write(s);
      linger_timer_ = engine_.add_timer(kLingerMs, [this] { close_socket_now(); });
    }
  }
  if (close_now) close_socket_now();
}

void QueuePairCore::close_socket_now() {
  net::Socket s;
  std::vector<std::function<void()>> dones;
  bool release;
  std::shared_ptr<shm::Link> link;
  bool bell;
  {
    std::lock_guard<ndkit::CheckedMutex> lock(mu_);
    s = sock_;
    if (s == net::kInvalidSocket) return;
    sock_ = net::kInvalidSocket;
    if (linger_timer_ != 0) {
      engine_.cancel_timer(linger_timer_);
      linger_timer_ = 0;
    }
    if (inline_timer_ != 0) {
      engine_.cancel_timer(inline_timer_);
      inline_timer_ = 0;
    }
    if (peer_timer_ != 0) {
      engine_.cancel_timer(peer_timer_);
      peer_timer_ = 0;
    }
    rx_inline_ = false;
    linger_ = false;
    dones.swap(disconnect_done_);
    release = self_ref_;
    self_ref_ = false;
    place_sink_off_locked();
    link = std::move(shm_);
    if (link) engine_.shm_link_down();
    bell = doorbell_added_;
    doorbell_added_ = false;
  }
  remove_progress_sources();
  engine_.remove(s, this);
  if (bell) engine_.remove(link->doorbell(), &doorbell_);
  link.reset();  // unmaps the rings (the peer keeps its own mapping until it closes too)
  net::close_socket(s, false);
  for (auto& d : dones) {
    if (d) d();
  }
  if (release) {
    // Not from inside our own on_io: the last reference may go with it.
    engine_.post([this] { drop(); });
  }
}

void QueuePairCore::fire_events() {
  std::lock_guard<std::recursive_mutex> ev(events_mu_);
  bool rtr;
  bool closed;
  HRESULT status;
  {
    std::lock_guard<ndkit::CheckedMutex> lock(mu_);
    rtr = event_rtr_pending_;
    closed = event_closed_pending_;
    status = event_closed_status_;
    event_rtr_pending_ = false;
    event_closed_pending_ = false;
  }
  if (events_ == nullptr) return;
  if (rtr) events_->on_rtr_received();
  if (closed) events_->on_connection_closed(status);
}

}  // namespace netdirect::soft

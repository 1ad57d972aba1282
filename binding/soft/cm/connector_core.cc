#include "soft/cm/connector_core.h"

#include <cerrno>
#include <cstring>
#include <new>

#include "soft/adapter.h"
#include "soft/qp/qp.h"
#include "soft/variance.h"

namespace netdirect::soft {

ConnectorCore::ConnectorCore(SoftAdapter* adapter, HANDLE file) : adapter_(adapter), file_(file) { adapter_->AddRef(); }

ConnectorCore::~ConnectorCore() {
  if (deadline_timer_ != 0) engine().cancel_timer(deadline_timer_);
  channel_.reset();
  leave_gate();
  if (qp_ != nullptr) {
    if (attached_) qp_->detach_events();
    qp_->drop();
  }
  net::close_socket(sock_, true);
  adapter_->Release();  // last: the engine must outlive this destructor
}

std::shared_ptr<ConnectorCore> ConnectorCore::make(SoftAdapter* adapter, HANDLE file) {
  return adapter->engine().own_on_engine(new (std::nothrow) ConnectorCore(adapter, file));
}

Engine& ConnectorCore::engine() { return adapter_->engine(); }

HRESULT ConnectorCore::bind(const sockaddr* addr, ULONG len) {
  net::Address a;
  HRESULT hr = net::address_from(addr, len, &a);
  if (FAILED(hr)) return hr;
  std::lock_guard<ndkit::CheckedMutex> lock(mu_);
  if (bound_ || st_ != St::kIdle) return STATUS_ADDRESS_ALREADY_ASSOCIATED;
  if (!a.is_any() && !adapter_->serves(a)) return ND_INVALID_ADDRESS;
  return open_socket(a);
}

HRESULT ConnectorCore::connect(QueuePairCore* qp, const net::Address& dest, ULONG inbound, ULONG outbound,
                               const void* pd, ULONG cb, OVERLAPPED* ov) {
  // The QP is claimed before our lock is taken (QP locks are never taken under ours) and given back if
  // this Connect fails synchronously.
  HRESULT hr = qp->begin_connect();
  if (FAILED(hr)) return hr;
  {
    std::lock_guard<ndkit::CheckedMutex> lock(mu_);
    hr = connect_locked(qp, dest, inbound, outbound, pd, cb, ov);
  }
  if (hr != ND_PENDING) qp->abort_connect();
  return hr;
}

HRESULT ConnectorCore::connect_locked(QueuePairCore* qp, const net::Address& dest, ULONG inbound, ULONG outbound,
                                      const void* pd, ULONG cb, OVERLAPPED* ov) {
  mu_.assert_held();
  if (st_ != St::kIdle) return ND_CONNECTION_ACTIVE;
  if (bound_ && local_.family() != dest.family()) return ND_INVALID_ADDRESS;
  if (!bound_) {
    // Unbound: use this adapter's first address of the destination's family, ephemeral port.
    const net::Address* mine = nullptr;
    for (const auto& a : adapter_->addresses()) {
      if (a.family() == dest.family()) {
        mine = &a;
        break;
      }
    }
    if (mine == nullptr) return ND_INVALID_ADDRESS;
    net::Address any = *mine;
    any.set_port(0);
    HRESULT hr = open_socket(any);
    if (FAILED(hr)) return hr;
  }
  std::unique_ptr<cm::Channel> ch(
      new (std::nothrow) cm::Channel(engine(), sock_, this, adapter_->handshake_timeout_ms()));
  if (!ch) return ND_NO_MEMORY;
  if (adapter_->shared_memory()) ch->enable_shm_offer();
  HRESULT hr = ch->setup().start_initiator(cm::initiator_settings(inbound, outbound), pd, cb);
  if (FAILED(hr)) {
    ch->release_socket();  // keep our bound socket for a later attempt
    return hr;
  }
  sock_ = net::kInvalidSocket;  // the channel owns it now
  qp->hold();
  qp_ = qp;
  peer_ = dest;
  st_ = St::kConnecting;
  connect_ov_ = ov;
  connect_time_ = std::chrono::steady_clock::now();
  mark_pending(ov);
  channel_ = std::move(ch);
  adapter_->connect_gate().reserve();  // admitted by enter_gate, which the task below always runs
  auto self = shared_from_this();
  engine().post([self] { self->enter_gate(); });
  return ND_PENDING;
}

HRESULT ConnectorCore::complete_connect(OVERLAPPED* ov) {
  std::lock_guard<ndkit::CheckedMutex> lock(mu_);
  if (st_ != St::kConnected) return ND_CONNECTION_INVALID;
  if (broken_) {
    st_ = St::kClosed;
    return ND_CONNECTION_ABORTED;
  }
  st_ = St::kCompleting;
  complete_ov_ = ov;
  mark_pending(ov);
  auto self = shared_from_this();
  engine().post([self] { self->do_complete_connect(); });
  return ND_PENDING;
}

HRESULT ConnectorCore::accept(QueuePairCore* qp, ULONG inbound, ULONG outbound, const void* pd, ULONG cb,
                              OVERLAPPED* ov) {
  HRESULT hr = qp->begin_connect();  // before our lock, as in connect()
  if (FAILED(hr)) return hr;
  {
    std::lock_guard<ndkit::CheckedMutex> lock(mu_);
    hr = accept_locked(qp, inbound, outbound, pd, cb, ov);
  }
  if (hr != ND_PENDING) qp->abort_connect();
  return hr;
}

HRESULT ConnectorCore::accept_locked(QueuePairCore* qp, ULONG inbound, ULONG outbound, const void* pd, ULONG cb,
                                     OVERLAPPED* ov) {
  mu_.assert_held();
  if (st_ != St::kIncoming) {
    return st_ == St::kIdle || st_ == St::kAwaitingRequest ? ND_CONNECTION_INVALID : ND_CONNECTION_ACTIVE;
  }
  if (broken_) {
    st_ = St::kClosed;
    return ND_CONNECTION_ABORTED;
  }
  qp->hold();
  qp_ = qp;
  st_ = St::kAccepting;
  accept_ov_ = ov;
  mark_pending(ov);
  std::vector<uint8_t> data(static_cast<const uint8_t*>(pd), static_cast<const uint8_t*>(pd) + (pd ? cb : 0));
  auto self = shared_from_this();
  engine().post([self, inbound, outbound, data] { self->do_accept(inbound, outbound, data); });
  return ND_PENDING;
}

HRESULT ConnectorCore::reject(const void* pd, ULONG cb) {
  std::unique_lock<ndkit::CheckedMutex> lock(mu_);
  auto self = shared_from_this();
  if (st_ == St::kIncoming) {
    st_ = St::kClosed;
    std::vector<uint8_t> data(static_cast<const uint8_t*>(pd), static_cast<const uint8_t*>(pd) + (pd ? cb : 0));
    engine().post([self, data] {
      if (!self->channel_) return;
      if (SUCCEEDED(self->channel_->setup().reject(data.data(), static_cast<ULONG>(data.size())))) {
        self->channel_->flush();  // sends the reject Reply, then closes gracefully
      } else {
        self->channel_.reset();
      }
    });
    return ND_SUCCESS;
  }
  if (st_ == St::kConnected) {
    // The active side declines the peer's Accept (its terms, its private data): MPA has no reject frame this
    // way round, so a Terminate takes the RTR's place (MpaSetup::decline). The private data has nowhere to go.
    st_ = St::kClosed;
    decline_and_wait(lock, false);
    return ND_SUCCESS;
  }
  return ND_CONNECTION_INVALID;
}

HRESULT ConnectorCore::get_read_limits(ULONG* in, ULONG* out) {
  std::lock_guard<ndkit::CheckedMutex> lock(mu_);
  if (!have_peer_) return ND_CONNECTION_INVALID;
  if (in != nullptr) *in = peer_inbound_;
  if (out != nullptr) *out = peer_outbound_;
  return ND_SUCCESS;
}

HRESULT ConnectorCore::get_private_data(void* buf, ULONG* len) {
  std::lock_guard<ndkit::CheckedMutex> lock(mu_);
  if (!have_peer_) return ND_CONNECTION_INVALID;
  const ULONG need = static_cast<ULONG>(peer_pd_.size());
  if ((buf != nullptr || need == 0) && *len >= need && variance::overflow_first(need, len, limits::kMaxPrivateData))
    return ND_BUFFER_OVERFLOW;  // test mode: as a provider that pads private data to a fixed size reports it
  const ULONG n = buf == nullptr ? 0 : (*len < need ? *len : need);
  if (n != 0) std::memcpy(buf, peer_pd_.data(), n);
  const ULONG cap = *len;
  *len = need;
  return (buf == nullptr && need != 0) || cap < need ? ND_BUFFER_OVERFLOW : ND_SUCCESS;
}

HRESULT ConnectorCore::get_local_address(sockaddr* out, ULONG* len) {
  std::lock_guard<ndkit::CheckedMutex> lock(mu_);
  switch (st_) {
    case St::kConnecting: case St::kConnected: case St::kCompleting: case St::kIncoming:
    case St::kAccepting: case St::kEstablished: case St::kDisconnecting:
      return net::address_to(local_, out, len);
    default:
      return ND_CONNECTION_INVALID;
  }
}

HRESULT ConnectorCore::get_peer_address(sockaddr* out, ULONG* len) {
  std::lock_guard<ndkit::CheckedMutex> lock(mu_);
  switch (st_) {
    case St::kConnected: case St::kCompleting: case St::kIncoming: case St::kAccepting:
    case St::kEstablished: case St::kDisconnecting:
      return net::address_to(peer_, out, len);
    default:
      return ND_CONNECTION_INVALID;
  }
}

HRESULT ConnectorCore::notify_disconnect(OVERLAPPED* ov) {
  std::lock_guard<ndkit::CheckedMutex> lock(mu_);
  switch (st_) {
    case St::kConnected:
      if (broken_) return ND_SUCCESS;  // already ended: no notification follows
      [[fallthrough]];
    case St::kCompleting: case St::kAccepting: case St::kEstablished: case St::kDisconnecting:
      notify_ovs_.push_back(ov);
      mark_pending(ov);
      return ND_PENDING;
    case St::kClosed:
      return was_connected_ ? ND_SUCCESS : ND_CONNECTION_INVALID;
    default:
      return ND_CONNECTION_INVALID;
  }
}

HRESULT ConnectorCore::disconnect(OVERLAPPED* ov) {
  std::unique_lock<ndkit::CheckedMutex> lock(mu_);
  auto self = shared_from_this();
  if (attached_) {
    if (disconnect_done_) return ND_SUCCESS;
    if (disconnect_started_) return ND_CONNECTION_INVALID;  // one Disconnect at a time
    disconnect_started_ = true;
    st_ = St::kDisconnecting;
    disconnect_ov_ = ov;
    mark_pending(ov);
    engine().post([self] { self->qp_->disconnect([self] { self->on_disconnected(); }); });
    return ND_PENDING;
  }
  if (st_ == St::kConnected) {  // before CompleteConnect: the connection is declined, as by Reject
    st_ = St::kClosed;
    complete_all(notify_ovs_, ND_SUCCESS);
    decline_and_wait(lock, false);
    return ND_SUCCESS;
  }
  return ND_CONNECTION_INVALID;
}

HRESULT ConnectorCore::cancel() {
  std::lock_guard<ndkit::CheckedMutex> lock(mu_);
  auto self = shared_from_this();
  const bool abort_setup = connect_ov_ != nullptr || complete_ov_ != nullptr || accept_ov_ != nullptr;
  complete(connect_ov_, ND_CANCELED);
  complete(complete_ov_, ND_CANCELED);
  complete(accept_ov_, ND_CANCELED);
  complete_all(notify_ovs_, ND_CANCELED);
  complete(disconnect_ov_, ND_CANCELED);  // the disconnect itself goes on
  if (abort_setup) {
    // A cancelled Connect/CompleteConnect/Accept abandons the connection: the connector is done.
    st_ = St::kClosed;
    engine().post([self] { self->abandon(); });
  }
  return ND_SUCCESS;
}

void ConnectorCore::released() {
  std::unique_lock<ndkit::CheckedMutex> lock(mu_);
  complete(connect_ov_, ND_CANCELED);
  complete(complete_ov_, ND_CANCELED);
  complete(accept_ov_, ND_CANCELED);
  complete_all(notify_ovs_, ND_CANCELED);
  complete(disconnect_ov_, ND_CANCELED);
  if (st_ == St::kConnected) {
    // Released between Connect and CompleteConnect: the application declined the connection (the SDK's
    // "release the connector to abandon"); the responder hears it as a refusal (MpaSetup::decline).
    st_ = St::kClosed;
    decline_and_wait(lock, true);
    return;
  }
  st_ = St::kClosed;
  auto self = shared_from_this();
  engine().post([self] { self->abandon(); });
}

HRESULT ConnectorCore::reserve() {
  std::lock_guard<ndkit::CheckedMutex> lock(mu_);
  if (st_ != St::kIdle || bound_) return ND_CONNECTION_ACTIVE;
  st_ = St::kAwaitingRequest;
  return ND_SUCCESS;
}

void ConnectorCore::unreserve() {
  std::lock_guard<ndkit::CheckedMutex> lock(mu_);
  if (st_ == St::kAwaitingRequest) st_ = St::kIdle;
}

// engine thread
void ConnectorCore::adopt(std::unique_ptr<cm::Channel> ch) {
  std::lock_guard<ndkit::CheckedMutex> lock(mu_);
  ch->set_owner(this);
  const cm::MpaSetup& s = ch->setup();
  peer_pd_ = s.peer_private_data();
  peer_inbound_ = s.peer_ord();  // crossed: the Reads the peer will issue are our inbound
  peer_outbound_ = s.peer_ird();
  have_peer_ = true;
  net::local_address(ch->socket(), &local_);
  net::peer_address(ch->socket(), &peer_);
  st_ = St::kIncoming;
  channel_ = std::move(ch);
}

void ConnectorCore::on_channel_event(cm::Channel* ch, cm::MpaEvent ev) {
  std::unique_lock<ndkit::CheckedMutex> lock(mu_);
  if (ch != channel_.get()) return;
  const cm::MpaSetup& s = ch->setup();
  switch (st_) {
    case St::kConnecting:
      if (ev == cm::MpaEvent::kReplyAccepted || ev == cm::MpaEvent::kRejected) {
        peer_pd_ = s.peer_private_data();
        peer_inbound_ = s.peer_ord();
        peer_outbound_ = s.peer_ird();
        have_peer_ = true;
      }
      if (ev == cm::MpaEvent::kReplyAccepted) {
        net::local_address(ch->socket(), &local_);
        st_ = St::kConnected;
        was_connected_ = true;
        complete(connect_ov_, ND_SUCCESS);
        lock.unlock();
        leave_gate();
        return;
      }
      if (ev == cm::MpaEvent::kRejected || ev == cm::MpaEvent::kFailed) {
        st_ = St::kClosed;
        complete(connect_ov_, s.status());
        lock.unlock();  // QP calls and Engine::remove never under our lock
        qp_->abort_connect();
        channel_.reset();
        leave_gate();
      }
      return;
    case St::kConnected:
    case St::kIncoming:
      if (ev == cm::MpaEvent::kFailed) {
        broken_ = true;  // the peer went away or broke protocol: CompleteConnect/Accept will fail
        complete_all(notify_ovs_, ND_SUCCESS);
        const bool release_qp = st_ == St::kConnected;
        lock.unlock();
        if (release_qp) qp_->abort_connect();
        channel_.reset();
      }
      return;
    case St::kAccepting:
      if (ev == cm::MpaEvent::kNone) {  // the Reply is out: the QP takes the socket
        Connection c;
        c.mpa = s.negotiated();
        c.initiator = false;
        c.local = local_;
        c.peer = peer_;
        attached_ = true;
        was_connected_ = true;
        const bool established = !c.mpa.p2p;
        if (established) st_ = St::kEstablished;
        QueuePairCore* qp = qp_;
        lock.unlock();  // Engine::remove (in release_socket) must not run under a lock on_io takes
        c.socket = ch->release_socket();
        c.mss = net::tcp_mss(c.socket);
        c.shm = ch->take_shm();
        channel_.reset();
        const bool taken = qp->attach(c, this);
        lock.lock();
        if (!taken) {
          refused_by_qp(accept_ov_);
        } else if (established) {
          // Only now: the application may post as soon as Accept completes (as in do_complete_connect).
          complete(accept_ov_, ND_SUCCESS);
        }
        return;
      }
      if (ev == cm::MpaEvent::kFailed) {
        st_ = St::kClosed;
        complete(accept_ov_, ND_CONNECTION_ABORTED);
        lock.unlock();
        qp_->abort_connect();
        channel_.reset();
      }
      return;
    default:
      if (ev == cm::MpaEvent::kFailed) {
        lock.unlock();
        channel_.reset();
      }
      return;
  }
}

void ConnectorCore::on_rtr_received() {
  std::lock_guard<ndkit::CheckedMutex> lock(mu_);
  disarm_deadline();
  if (st_ == St::kAccepting) {
    st_ = St::kEstablished;
    complete(accept_ov_, ND_SUCCESS);
  }
}

void ConnectorCore::on_connection_closed(HRESULT status) {
  std::lock_guard<ndkit::CheckedMutex> lock(mu_);
  disarm_deadline();
  if (st_ == St::kDisconnecting || st_ == St::kClosed) return;  // our own Disconnect reports
  // Before its RTR the initiator declined (its Terminate: the QP reports ND_CONNECTION_REFUSED) or went away.
  complete(accept_ov_, status == ND_CONNECTION_REFUSED ? ND_CONNECTION_REFUSED : ND_CONNECTION_ABORTED);
  st_ = St::kClosed;
  complete_all(notify_ovs_, ND_SUCCESS);
}

// mu_ held
HRESULT ConnectorCore::open_socket(const net::Address& a) {
  const net::Socket s = net::tcp_socket(a.family());
  if (s == net::kInvalidSocket) return net::status_from_errno(-errno);
  const int r = net::bind_to(s, a);
  if (r != 0) {
    net::close_socket(s);
    // An ephemeral port that cannot be had means the port space is exhausted.
    if (r == -EADDRINUSE && a.port() == 0) return ND_TOO_MANY_ADDRESSES;
    return net::status_from_errno(r);
  }
  net::local_address(s, &local_);
  sock_ = s;
  bound_ = true;
  return ND_SUCCESS;
}

// mu_ held
void ConnectorCore::complete(OVERLAPPED*& slot, HRESULT status) {
  if (slot == nullptr) return;
  complete_overlapped(file_, slot, status);
  slot = nullptr;
}

// mu_ held
void ConnectorCore::complete_all(std::vector<OVERLAPPED*>& list, HRESULT status) {
  for (OVERLAPPED* ov : list) complete_overlapped(file_, ov, status);
  list.clear();
}

// engine thread
void ConnectorCore::do_complete_connect() {
  std::unique_lock<ndkit::CheckedMutex> lock(mu_);
  if (st_ != St::kCompleting) return;  // cancelled
  if (!channel_ || channel_->closed() || broken_) {
    st_ = St::kClosed;
    complete(complete_ov_, ND_CONNECTION_ABORTED);
    lock.unlock();
    qp_->abort_connect();
    channel_.reset();
    return;
  }
  Connection c;
  c.mpa = channel_->setup().negotiated();
  c.initiator = true;
  c.local = local_;
  c.peer = peer_;
  attached_ = true;
  st_ = St::kEstablished;
  QueuePairCore* qp = qp_;
  lock.unlock();  // Engine::remove (in release_socket) must not run under a lock on_io takes
  c.socket = channel_->release_socket();
  c.mss = net::tcp_mss(c.socket);
  c.shm = channel_->take_shm();
  channel_.reset();
  const bool taken = qp->attach(c, this);  // sends the RTR as the first FPDU (P2P)
  lock.lock();
  if (taken)
    complete(complete_ov_, ND_SUCCESS);
  else
    refused_by_qp(complete_ov_);
}

// mu_ held
void ConnectorCore::refused_by_qp(OVERLAPPED*& slot) {
  attached_ = false;
  disarm_deadline();
  st_ = St::kClosed;
  complete(slot, ND_CANCELED);
  complete_all(notify_ovs_, ND_SUCCESS);
}

// mu_ held
void ConnectorCore::arm_deadline(uint32_t ms) {
  std::weak_ptr<ConnectorCore> weak = weak_from_this();
  deadline_timer_ = engine().add_timer(ms, [weak] {
    if (auto self = weak.lock()) self->on_deadline();
  });
}

// mu_ held (Engine::cancel_timer takes only the engine's leaf task lock)
void ConnectorCore::disarm_deadline() {
  if (deadline_timer_ != 0) engine().cancel_timer(deadline_timer_);
  deadline_timer_ = 0;
}

// engine thread
void ConnectorCore::on_deadline() {
  {
    std::lock_guard<ndkit::CheckedMutex> lock(mu_);
    deadline_timer_ = 0;
    if (st_ == St::kAccepting) {
      complete(accept_ov_, ND_IO_TIMEOUT);
      complete_all(notify_ovs_, ND_SUCCESS);
    } else if (st_ == St::kConnecting && !holds_slot_) {
      complete(connect_ov_, ND_IO_TIMEOUT);
    } else {
      return;
    }
    st_ = St::kClosed;
  }
  abandon();  // closes the setup channel, or disconnects the QP that has the socket already
}

void ConnectorCore::enter_gate() {
  std::weak_ptr<ConnectorCore> weak = weak_from_this();
  {
    std::lock_guard<ndkit::CheckedMutex> lock(mu_);
    gate_dest_ = peer_.to_string();
  }
  const bool now = adapter_->connect_gate().admit(gate_dest_, [weak] {
    auto self = weak.lock();
    return self != nullptr && self->start_setup();
  });
  if (now) return;
  std::lock_guard<ndkit::CheckedMutex> lock(mu_);
  if (st_ == St::kConnecting && !holds_slot_) arm_deadline(adapter_->handshake_timeout_ms());
}

bool ConnectorCore::start_setup() {
  uint32_t left;
  {
    std::lock_guard<ndkit::CheckedMutex> lock(mu_);
    if (st_ != St::kConnecting || !channel_) return false;
    disarm_deadline();  // the wait's timer: the channel's own takes over
    const auto waited = std::chrono::duration_cast<std::chrono::milliseconds>(
                            std::chrono::steady_clock::now() - connect_time_).count();
    const uint32_t limit = adapter_->handshake_timeout_ms();
    left = waited >= limit ? 1 : limit - static_cast<uint32_t>(waited);
    holds_slot_ = true;
  }
  channel_->start_connect(peer_, left);  // may report at once: no lock held
  return true;
}

// engine thread, mu_ not held (the gate may start other connectors' setups)
void ConnectorCore::leave_gate() {
  if (!holds_slot_) return;
  holds_slot_ = false;
  adapter_->connect_gate().leave(gate_dest_);
}

// engine thread
void ConnectorCore::do_accept(ULONG inbound, ULONG outbound, const std::vector<uint8_t>& pd) {
  std::unique_lock<ndkit::CheckedMutex> lock(mu_);
  if (st_ != St::kAccepting) return;  // cancelled
  arm_deadline(adapter_->handshake_timeout_ms());
  if (!channel_ || channel_->closed() || broken_) {
    st_ = St::kClosed;
    complete(accept_ov_, ND_CONNECTION_ABORTED);
    lock.unlock();
    qp_->abort_connect();
    channel_.reset();
    return;
  }
  cm::MpaSetup& s = channel_->setup();
  const HRESULT hr = s.accept(cm::responder_settings(s.peer_frame(), inbound, outbound), pd.data(),
                              static_cast<ULONG>(pd.size()));
  if (FAILED(hr)) {
    st_ = St::kClosed;
    complete(accept_ov_, hr);
  }
  lock.unlock();
  if (FAILED(hr)) qp_->abort_connect();
  channel_->flush();  // accept: reports kNone once the Reply is out; failure: sends the reject, closes
}

// engine thread, from the QP
void ConnectorCore::on_disconnected() {
  std::lock_guard<ndkit::CheckedMutex> lock(mu_);
  st_ = St::kClosed;
  disconnect_done_ = true;
  complete(disconnect_ov_, ND_SUCCESS);
  complete(accept_ov_, ND_CANCELED);
  complete_all(notify_ovs_, ND_SUCCESS);
}

void ConnectorCore::decline_and_wait(std::unique_lock<ndkit::CheckedMutex>& lock, bool then_abandon) {
  Declining d = post_decline(then_abandon);
  lock.unlock();
  d.wait();
}

// mu_ held
ConnectorCore::Declining ConnectorCore::post_decline(bool then_abandon) {
  auto sent = std::make_shared<std::promise<void>>();
  Declining d;
  d.sent = sent->get_future();
  d.can_wait = !engine().external_driver() && !engine().in_engine_thread();
  auto self = shared_from_this();
  engine().post([self, sent, then_abandon] {
    self->decline();
    sent->set_value();
    if (then_abandon) self->abandon();
  });
  return d;
}

void ConnectorCore::decline() {
  if (channel_ && SUCCEEDED(channel_->setup().decline())) channel_->flush();
  channel_.reset();  // no lock: Engine::remove
  if (qp_ != nullptr) qp_->abort_connect();
}

// engine thread: cancel, release or the handshake deadline
void ConnectorCore::abandon() {
  {
    std::lock_guard<ndkit::CheckedMutex> lock(mu_);
    disarm_deadline();
  }
  channel_.reset();  // abortive close of a setup in progress (no lock: Engine::remove)
  leave_gate();
  std::unique_lock<ndkit::CheckedMutex> lock(mu_);
  if (qp_ == nullptr) return;
  if (!attached_) {
    lock.unlock();
    qp_->abort_connect();
    return;
  }
  if (disconnect_started_) return;
  disconnect_started_ = true;
  attached_ = false;  // events detached below: the destructor must not detach again
  lock.unlock();
  QueuePairCore* qp = qp_;
  qp->detach_events();
  qp->hold();
  qp->disconnect([qp] { qp->drop(); });
}

}  // namespace netdirect::soft

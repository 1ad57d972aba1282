#include "soft/cm/listener_core.h"

#ifndef _WIN32
#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>
#endif

#include <cerrno>
#include <new>

#include "soft/adapter.h"
#include "soft/connector.h"
#include "soft/variance.h"

namespace netdirect::soft {

namespace {
constexpr int kPortAttempts = 16;  // wildcard with port 0: retries until one port is free on every address
constexpr uint32_t kAcceptPauseMs = 100;  // out of descriptors without a spare: stop accepting this long

// Half-open setups (accepted, MPA Request not received yet) one peer address may hold: half the default backlog,
// so that one host cannot take every place (docs/security.md "Half-open handshakes").
constexpr size_t kHalfOpenPerPeer = 128;

// Errors of accept() that mean "no descriptor or memory for the connection" rather than "none waiting":
// the connection stays queued, so a level-triggered listener would be reported ready again at once.
bool out_of_resources(int e) { return e == EMFILE || e == ENFILE || e == ENOBUFS || e == ENOMEM; }

// The spare descriptor of the reserve-descriptor defence (docs/security.md "File-descriptor exhaustion").
int open_spare() {
#ifndef _WIN32
  return ::open("/dev/null", O_RDONLY | O_CLOEXEC);
#else
  return -1;  // Windows has no per-process descriptor limit of this kind: pausing alone covers WSAEMFILE
#endif
}
void close_spare(int fd) {
#ifndef _WIN32
  if (fd >= 0) ::close(fd);
#else
  (void)fd;
#endif
}
}  // namespace

ListenerCore::ListenerCore(SoftAdapter* adapter, HANDLE file) : adapter_(adapter), file_(file) { adapter_->AddRef(); }

ListenerCore::~ListenerCore() {
  if (sweep_timer_ != 0) engine().cancel_timer(sweep_timer_);
  stop_sockets();
  close_spare(spare_fd_);
  handshaking_.clear();
  queue_.clear();
  queued_at_.clear();
  adapter_->Release();  // last: the engine must outlive this destructor
}

std::shared_ptr<ListenerCore> ListenerCore::make(SoftAdapter* adapter, HANDLE file) {
  return adapter->engine().own_on_engine(new (std::nothrow) ListenerCore(adapter, file));
}

Engine& ListenerCore::engine() { return adapter_->engine(); }

HRESULT ListenerCore::bind(const sockaddr* addr, ULONG len) {
  net::Address a;
  HRESULT hr = net::address_from(addr, len, &a);
  if (FAILED(hr)) return hr;
  std::lock_guard<std::mutex> lock(mu_);
  if (bound_) return STATUS_ADDRESS_ALREADY_ASSOCIATED;
  std::vector<net::Address> ips;
  if (a.is_any()) {
    // 0.0.0.0: this adapter's IPv4 addresses; ::: all of its addresses (ND: "all IPs of this adapter").
    for (const auto& mine : adapter_->addresses()) {
      if (a.family() == AF_INET6 || mine.family() == AF_INET) ips.push_back(mine);
    }
  } else if (adapter_->serves(a)) {
    ips.push_back(a);
  }
  if (ips.empty()) return ND_INVALID_ADDRESS;
  const uint16_t port = a.port();
  for (int attempt = 0; attempt < (port == 0 ? kPortAttempts : 1); ++attempt) {
    hr = open_all(ips, port);
    if (hr != ND_SHARING_VIOLATION || port != 0 || ips.size() == 1) break;
  }
  if (FAILED(hr)) {
    if (hr == ND_SHARING_VIOLATION && port == 0) hr = ND_TOO_MANY_ADDRESSES;
    return hr;
  }
  bound_addr_ = a;
  bound_addr_.set_port(port_);
  bound_ = true;
  return ND_SUCCESS;
}

HRESULT ListenerCore::listen(ULONG backlog) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!bound_) return ND_INVALID_DEVICE_STATE;
  // Once only, as kernel providers answer a listener's second listen request (docs/nd2.md, section 2):
  // a consumer that calls it twice has lost track of the listener's state, and a silent success would hide it.
  if (listening_) return ND_INVALID_DEVICE_STATE;
  // The kernel's accept queue stays at its maximum whatever the backlog: on_accept drains it at once (refusing
  // beyond the bound), so it holds only the connections of a burst that has not been looked at yet. A small
  // kernel queue would have Linux drop SYNs of a burst, and the initiators wait seconds for a retransmission.
  const ULONG limit = setup_limit(backlog);
  const int kernel_backlog = SOMAXCONN;
  for (auto& ls : socks_) {
    const int r = net::listen_on(ls->socket, kernel_backlog);
    if (r != 0) return net::status_from_errno(r);
  }
  setup_limit_ = limit;
  if (adapter_->shared_memory()) {
    // Same host (docs/shm.md): a side channel beside each listening address, for offers of rings.
    std::vector<net::Address> here;
    for (auto& ls : socks_) {
      net::Address got;
      if (net::local_address(ls->socket, &got) == 0) here.push_back(got);
    }
    rendezvous_ = shm::Rendezvous::open(here);
  }
  // A request waits in the backlog at most half the time an initiator waits for its Reply (ours: the Reply
  // timeout capped by the handshake deadline), so that a refusal reaches it before its own timer expires and
  // an application never accepts a connection its initiator gave up (docs/nd2.md "Listen backlog").
  queued_limit_ms_ = std::max<uint32_t>(1, std::min(cm::kReplyTimeoutMs, adapter_->handshake_timeout_ms()) / 2);
  listening_ = true;
  auto self = shared_from_this();
  engine().post([self] {
    std::vector<ListenSocket*> socks;
    {
      std::lock_guard<std::mutex> l(self->mu_);
      if (!self->listening_) return;  // released meanwhile
      for (auto& ls : self->socks_) socks.push_back(ls.get());
    }
    // socks_ only shrinks on this thread (stop_sockets), so the pointers stay valid here.
    for (ListenSocket* ls : socks) ls->registered = self->engine().add(ls->socket, ls, Engine::kRead);
    if (self->spare_fd_ < 0) self->spare_fd_ = open_spare();
  });
  return ND_SUCCESS;
}

HRESULT ListenerCore::get_local_address(sockaddr* out, ULONG* len) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!listening_) return ND_INVALID_DEVICE_STATE;
  return net::address_to(bound_addr_, out, len);
}

HRESULT ListenerCore::get_connection_request(SoftConnector* conn, OVERLAPPED* ov) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!listening_) return ND_INVALID_DEVICE_STATE;
  HRESULT hr = conn->reserve_incoming();
  if (FAILED(hr)) return hr;
  conn->AddRef();
  waiters_.push_back(Waiter{ov, conn});
  mark_pending(ov);
  auto self = shared_from_this();
  engine().post([self] { self->match(); });
  return ND_PENDING;
}

HRESULT ListenerCore::cancel() {
  std::deque<Waiter> gone;
  {
    std::lock_guard<std::mutex> lock(mu_);
    gone.swap(waiters_);
    for (auto& w : gone) {
      w.conn->unreserve_incoming();
      complete_overlapped(file_, w.ov, ND_CANCELED);
    }
  }
  for (auto& w : gone) w.conn->Release();
  return ND_SUCCESS;
}

void ListenerCore::released() {
  cancel();
  {
    std::lock_guard<std::mutex> lock(mu_);
    listening_ = false;
  }
  auto self = shared_from_this();
  engine().post([self] {
    self->stop_sockets();
    self->handshaking_.clear();  // abortive: initiators see a refused connection
    std::deque<std::unique_ptr<cm::Channel>> queued;
    {
      std::lock_guard<std::mutex> lock(self->mu_);
      queued.swap(self->queue_);
      self->queued_at_.clear();
    }
  });
}

void ListenerCore::on_channel_event(cm::Channel* ch, cm::MpaEvent ev) {
  if (ev == cm::MpaEvent::kRequestReceived) {
    std::unique_ptr<cm::Channel> req = take_half_open(ch);
    if (!req) return;
    bool refuse = false;
    {
      std::lock_guard<std::mutex> lock(mu_);
      // Requests wait for a GetConnectionRequest in arrival order; how many can wait is bounded in on_accept.
      refuse = !listening_;
      if (!refuse) {
        queue_.push_back(std::move(req));
        queued_at_.push_back(Clock::now());
      }
    }
    if (refuse) {
      refuse_request(std::move(req));
      return;
    }
    match();
    arm_sweep();
    return;
  }
  if (ev == cm::MpaEvent::kFailed) {
    // Bad/late Request or the initiator went away: drop it (this destroys ch; nothing may follow).
    std::unique_ptr<cm::Channel> dead = take_half_open(ch);
    if (!dead) {
      std::lock_guard<std::mutex> lock(mu_);
      dead = take_queued(ch);
    }
  }
}

std::unique_ptr<cm::Channel> ListenerCore::take_half_open(cm::Channel* ch) {
  for (auto it = handshaking_.begin(); it != handshaking_.end(); ++it) {
    if (it->ch.get() == ch) {
      std::unique_ptr<cm::Channel> out = std::move(it->ch);
      handshaking_.erase(it);
      return out;
    }
  }
  return nullptr;
}

bool ListenerCore::evict_oldest_half_open(const net::Address* from) {
  for (auto it = handshaking_.begin(); it != handshaking_.end(); ++it) {
    if (from != nullptr && !it->from.same_ip(*from)) continue;
    it->ch->close(true);
    handshaking_.erase(it);
    refused_.fetch_add(1, std::memory_order_relaxed);
    evicted_.fetch_add(1, std::memory_order_relaxed);
    return true;
  }
  return false;
}

size_t ListenerCore::half_open_from(const net::Address& from) const {
  size_t n = 0;
  for (const auto& h : handshaking_) n += h.from.same_ip(from) ? 1 : 0;
  return n;
}

std::unique_ptr<cm::Channel> ListenerCore::take_queued(cm::Channel* ch) {
  for (size_t i = 0; i < queue_.size(); ++i) {
    if (queue_[i].get() != ch) continue;
    std::unique_ptr<cm::Channel> out = std::move(queue_[i]);
    queue_.erase(queue_.begin() + static_cast<std::ptrdiff_t>(i));
    queued_at_.erase(queued_at_.begin() + static_cast<std::ptrdiff_t>(i));
    return out;
  }
  return nullptr;
}

void ListenerCore::refuse_request(std::unique_ptr<cm::Channel> req) {
  req->setup().refuse();
  req->flush();
  if (!req->closed()) closing_.push_back(std::move(req));
}

void ListenerCore::arm_sweep() {
  if (sweep_timer_ != 0) return;
  Clock::time_point oldest;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (queued_at_.empty()) return;
    oldest = queued_at_.front();
  }
  const auto waited = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - oldest).count();
  const uint32_t ms = waited >= queued_limit_ms_ ? 1 : static_cast<uint32_t>(queued_limit_ms_ - waited);
  std::weak_ptr<ListenerCore> weak = weak_from_this();
  sweep_timer_ = engine().add_timer(ms, [weak] {
    if (auto self = weak.lock()) self->sweep();
  });
}

void ListenerCore::sweep() {
  sweep_timer_ = 0;
  std::vector<std::unique_ptr<cm::Channel>> expired;
  {
    std::lock_guard<std::mutex> lock(mu_);
    const auto cutoff = Clock::now() - std::chrono::milliseconds(queued_limit_ms_);
    while (!queued_at_.empty() && queued_at_.front() <= cutoff) {
      expired.push_back(std::move(queue_.front()));
      queue_.pop_front();
      queued_at_.pop_front();
    }
  }
  expired_.fetch_add(static_cast<ULONG>(expired.size()), std::memory_order_relaxed);
  for (auto& req : expired) refuse_request(std::move(req));
  arm_sweep();
}

// mu_ held
HRESULT ListenerCore::open_all(const std::vector<net::Address>& ips, uint16_t port) {
  std::vector<std::unique_ptr<ListenSocket>> socks;
  uint16_t chosen = port;
  for (const auto& ip : ips) {
    net::Address a = ip;
    a.set_port(chosen);
    auto ls = std::make_unique<ListenSocket>();
    ls->core = this;
    ls->socket = net::tcp_socket(a.family());
    if (ls->socket == net::kInvalidSocket) return close_all(socks, net::status_from_errno(-errno));
    net::set_reuseaddr(ls->socket);  // as siw: a restarted listener need not wait out TIME_WAIT
    const int r = net::bind_to(ls->socket, a);
    if (r != 0) {
      net::close_socket(ls->socket);
      return close_all(socks, net::status_from_errno(r));
    }
    if (chosen == 0) {
      net::Address got;
      net::local_address(ls->socket, &got);
      chosen = got.port();
    }
    socks.push_back(std::move(ls));
  }
  socks_ = std::move(socks);
  port_ = chosen;
  return ND_SUCCESS;
}

HRESULT ListenerCore::close_all(std::vector<std::unique_ptr<ListenSocket>>& socks, HRESULT hr) {
  for (auto& ls : socks) net::close_socket(ls->socket);
  socks.clear();
  return hr;
}

// engine thread (or destructor)
void ListenerCore::stop_sockets() {
  std::vector<std::unique_ptr<ListenSocket>> socks;
  {
    std::lock_guard<std::mutex> lock(mu_);
    socks.swap(socks_);
  }
  std::shared_ptr<shm::Rendezvous> rendezvous;
  {
    std::lock_guard<std::mutex> lock(mu_);
    rendezvous.swap(rendezvous_);  // its names go with the last channel that may still claim an offer
  }
  for (auto& ls : socks) {
    if (ls->registered) engine().remove(ls->socket, ls.get());
    if (ls->resume_timer != 0) engine().cancel_timer(ls->resume_timer);
    net::close_socket(ls->socket);
  }
}

void ListenerCore::on_accept(ListenSocket* ls) {
  // Sweep refused requests whose reject Reply went out meanwhile.
  closing_.erase(std::remove_if(closing_.begin(), closing_.end(), [](const auto& c) { return c->closed(); }),
                 closing_.end());
  for (;;) {
    net::Address peer;
    errno = 0;
    const net::Socket s = net::accept_from(ls->socket, &peer);
    if (s == net::kInvalidSocket) {
      const int e = errno;
      if (e == EINTR || e == ECONNABORTED || e == EPROTO) continue;  // that connection is gone: next
      if (out_of_resources(e)) {
        const Shed r = shed_one(ls);
        if (r == Shed::kShed) continue;
        if (r == Shed::kFailed) pause(ls);
      }
      return;  // EAGAIN: nothing waiting
    }
    // Under pressure the setups that have not sent their MPA Request go first, oldest first: a peer that
    // connects and stays silent (a slowloris) cannot keep out one that completes its handshake promptly
    // (docs/security.md "Half-open handshakes"). One address holds at most kHalfOpenPerPeer of them.
    if (half_open_from(peer) >= std::min<size_t>(kHalfOpenPerPeer, setup_limit_)) evict_oldest_half_open(&peer);
    if (in_setup() >= setup_limit_ && !evict_oldest_half_open(nullptr)) {
      // Backlog full of requests already received: refuse at once (a reset; the initiator's Connect completes
      // ND_CONNECTION_REFUSED, which the SDK docs name for backlog limits) rather than let it wait past its
      // Reply timeout.
      net::close_socket(s, true);
      refused_.fetch_add(1, std::memory_order_relaxed);
      continue;
    }
    std::unique_ptr<cm::Channel> ch(
        new (std::nothrow) cm::Channel(engine(), s, this, adapter_->handshake_timeout_ms()));
    if (!ch) {
      net::close_socket(s, true);
      continue;
    }
    cm::Channel* raw = ch.get();
    ch->set_shm_rendezvous(rendezvous_);
    handshaking_.push_back(HalfOpen{std::move(ch), peer});
    note_setup_peak();
    raw->start_accept();
  }
}

size_t ListenerCore::in_setup() {
  size_t queued;
  {
    std::lock_guard<std::mutex> lock(mu_);
    queued = queue_.size();
  }
  return handshaking_.size() + queued + closing_.size();
}

void ListenerCore::note_setup_peak() {
  const ULONG n = static_cast<ULONG>(in_setup());
  if (n > setup_peak_.load(std::memory_order_relaxed)) setup_peak_.store(n, std::memory_order_relaxed);
}

ULONG ListenerCore::setup_peak() const { return setup_peak_.load(std::memory_order_relaxed); }

ULONG ListenerCore::refused() const { return refused_.load(std::memory_order_relaxed); }

ULONG ListenerCore::expired() const { return expired_.load(std::memory_order_relaxed); }

ULONG ListenerCore::evicted() const { return evicted_.load(std::memory_order_relaxed); }

ListenerCore::Shed ListenerCore::shed_one(ListenSocket* ls) {
  if (spare_fd_ < 0) return Shed::kFailed;
  close_spare(spare_fd_);
  errno = 0;
  const net::Socket s = net::accept_from(ls->socket, nullptr);
  const int e = errno;
  if (s != net::kInvalidSocket) net::close_socket(s, true);
  spare_fd_ = open_spare();
  if (s != net::kInvalidSocket || e == EINTR || e == ECONNABORTED || e == EPROTO) return Shed::kShed;
  if (e == EAGAIN || e == EWOULDBLOCK) return Shed::kDrained;
  return Shed::kFailed;
}

// engine thread
void ListenerCore::pause(ListenSocket* ls) {
  if (!ls->registered) return;
  engine().remove(ls->socket, ls);
  ls->registered = false;
  std::weak_ptr<ListenerCore> weak = weak_from_this();
  ls->resume_timer = engine().add_timer(kAcceptPauseMs, [weak, ls] {
    auto self = weak.lock();
    if (!self) return;
    {
      std::lock_guard<std::mutex> lock(self->mu_);
      // stop_sockets cancels this timer before it frees ls, on this thread: ls is still ours here.
      if (!self->listening_) return;
    }
    ls->resume_timer = 0;
    ls->registered = self->engine().add(ls->socket, ls, Engine::kRead);
    if (self->spare_fd_ < 0) self->spare_fd_ = open_spare();
  });
}

void ListenerCore::match() {
  for (;;) {
    Waiter w;
    std::unique_ptr<cm::Channel> ch;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (waiters_.empty() || queue_.empty()) return;
      w = waiters_.front();
      waiters_.pop_front();
      ch = std::move(queue_.front());
      queue_.pop_front();
      queued_at_.pop_front();
    }
    w.conn->adopt_incoming(std::move(ch));
    complete_overlapped(file_, w.ov, ND_SUCCESS);
    w.conn->Release();
  }
}

}  // namespace netdirect::soft

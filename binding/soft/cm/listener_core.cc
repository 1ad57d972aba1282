#include "soft/variance.h"
#include "soft/listener.h"

#ifndef _WIN32
#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>
#endif

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cerrno>
#include <deque>
#include <mutex>
#include <new>
#include <vector>

#include "soft/adapter.h"
#include "soft/cm/cm.h"
#include "soft/connector.h"

namespace netdirect::soft {

namespace {
constexpr int kPortAttempts = 16;  // wildcard with port 0: retries until one port is free on every address
constexpr uint32_t kAcceptPauseMs = 100;  // out of descriptors without a spare: stop accepting this long

// The bound on connections in setup per listener (docs/nd2.md "Listen backlog"): Listen's backlog, clamped to
// kMaxSetupLimit; backlog 0 ("no limit" in the SDK docs, which let a provider apply its own) is kDefaultSetupLimit,
// the default backlog of the Linux iWARP connection manager.
constexpr ULONG kDefaultSetupLimit = 256;
constexpr ULONG kMaxSetupLimit = 4096;
ULONG setup_limit(ULONG backlog) { return backlog == 0 ? kDefaultSetupLimit : std::min(backlog, kMaxSetupLimit); }

// Half-open setups (accepted, MPA Request not received yet) one peer address may hold: half the default backlog,
// so that one host cannot take every place (docs/security.md "Half-open handshakes").
constexpr size_t kHalfOpenPerPeer = 128;

using Clock = std::chrono::steady_clock;

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

// The listener's state, shared with engine tasks; destroyed on the engine thread only.
class ListenerCore final : public cm::Channel::Owner, public std::enable_shared_from_this<ListenerCore> {
 public:
  ListenerCore(SoftAdapter* adapter, HANDLE file) : adapter_(adapter), file_(file) { adapter_->AddRef(); }

  ~ListenerCore() {
    if (sweep_timer_ != 0) engine().cancel_timer(sweep_timer_);
    stop_sockets();
    close_spare(spare_fd_);
    handshaking_.clear();
    queue_.clear();
    queued_at_.clear();
    adapter_->Release();  // last: the engine must outlive this destructor
  }

  static std::shared_ptr<ListenerCore> make(SoftAdapter* adapter, HANDLE file) {
    return adapter->engine().own_on_engine(new (std::nothrow) ListenerCore(adapter, file));
  }

  Engine& engine() { return adapter_->engine(); }

  // ---- ND methods (any thread) -------------------------------------------------------------------

  HRESULT bind(const sockaddr* addr, ULONG len) {
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

  HRESULT listen(ULONG backlog) {
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

  HRESULT get_local_address(sockaddr* out, ULONG* len) {
    std::lock_guard<std::mutex> lock(mu_);
    if (!listening_) return ND_INVALID_DEVICE_STATE;
    return net::address_to(bound_addr_, out, len);
  }

  HRESULT get_connection_request(SoftConnector* conn, OVERLAPPED* ov) {
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

  HRESULT cancel() {
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

  void released() {
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

  // ---- engine thread ---------------------------------------------------------------------------------

  void on_channel_event(cm::Channel* ch, cm::MpaEvent ev) override {
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

 private:
  struct ListenSocket final : Engine::Handler {
    ListenerCore* core = nullptr;
    net::Socket socket = net::kInvalidSocket;
    bool registered = false;
    uint64_t resume_timer = 0;  // engine thread: pause() re-registers the socket when it fires
    void on_io(uint32_t /*events*/) override { core->on_accept(this); }
  };

  struct Waiter {
    OVERLAPPED* ov;
    SoftConnector* conn;  // referenced
  };

  // An accepted connection whose MPA Request has not arrived yet, with the address it came from.
  struct HalfOpen {
    std::unique_ptr<cm::Channel> ch;
    net::Address from;
  };

  std::unique_ptr<cm::Channel> take_half_open(cm::Channel* ch) {
    for (auto it = handshaking_.begin(); it != handshaking_.end(); ++it) {
      if (it->ch.get() == ch) {
        std::unique_ptr<cm::Channel> out = std::move(it->ch);
        handshaking_.erase(it);
        return out;
      }
    }
    return nullptr;
  }

  // Drops the oldest half-open setup from `from` (any address when null): its socket is reset, the initiator's
  // Connect fails ND_CONNECTION_REFUSED as for a full backlog. handshaking_ is in accept order, oldest first.
  // False when there is none. Engine thread.
  bool evict_oldest_half_open(const net::Address* from) {
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

  size_t half_open_from(const net::Address& from) const {
    size_t n = 0;
    for (const auto& h : handshaking_) n += h.from.same_ip(from) ? 1 : 0;
    return n;
  }

  // A request in the queue (mu_ held), taken out with its arrival time.
  std::unique_ptr<cm::Channel> take_queued(cm::Channel* ch) {
    for (size_t i = 0; i < queue_.size(); ++i) {
      if (queue_[i].get() != ch) continue;
      std::unique_ptr<cm::Channel> out = std::move(queue_[i]);
      queue_.erase(queue_.begin() + static_cast<std::ptrdiff_t>(i));
      queued_at_.erase(queued_at_.begin() + static_cast<std::ptrdiff_t>(i));
      return out;
    }
    return nullptr;
  }

  // Sends a reject Reply and closes (the initiator's Connect completes ND_CONNECTION_REFUSED). Engine thread.
  void refuse_request(std::unique_ptr<cm::Channel> req) {
    req->setup().refuse();
    req->flush();
    if (!req->closed()) closing_.push_back(std::move(req));
  }

  // Engine thread: a timer for the oldest queued request's expiry, if there is one and none is set.
  void arm_sweep() {
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

  // Engine thread: refuses the requests that waited longer than queued_limit_ms_ for a GetConnectionRequest.
  void sweep() {
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

  HRESULT open_all(const std::vector<net::Address>& ips, uint16_t port) {  // mu_ held
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

  static HRESULT close_all(std::vector<std::unique_ptr<ListenSocket>>& socks, HRESULT hr) {
    for (auto& ls : socks) net::close_socket(ls->socket);
    socks.clear();
    return hr;
  }

  void stop_sockets() {  // engine thread (or destructor)
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

  void on_accept(ListenSocket* ls) {
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

  // Connections in setup (engine thread): accepted and waiting for their Request, Requests waiting for a
  // GetConnectionRequest, refused ones still sending their reject Reply. Bounded by setup_limit_.
  size_t in_setup() {
    size_t queued;
    {
      std::lock_guard<std::mutex> lock(mu_);
      queued = queue_.size();
    }
    return handshaking_.size() + queued + closing_.size();
  }

  void note_setup_peak() {
    const ULONG n = static_cast<ULONG>(in_setup());
    if (n > setup_peak_.load(std::memory_order_relaxed)) setup_peak_.store(n, std::memory_order_relaxed);
  }

 public:
  ULONG setup_peak() const { return setup_peak_.load(std::memory_order_relaxed); }
  ULONG refused() const { return refused_.load(std::memory_order_relaxed); }
  ULONG expired() const { return expired_.load(std::memory_order_relaxed); }
  ULONG evicted() const { return evicted_.load(std::memory_order_relaxed); }

 private:

  // Out of descriptors (EMFILE/ENFILE) or memory with connections queued (engine thread). The listener is
  // level-triggered: leaving them queued would have the engine report it ready again at once and spin a core.
  // With the spare descriptor free for a moment, one queued connection is accepted and closed at once (the
  // peer sees a reset); on_accept repeats that until the queue is empty. Without a spare (it could not be
  // reopened, or Windows) or when even that fails, the listener stops accepting for kAcceptPauseMs (pause).
  // Nothing is logged: a flood must not also fill the log.
  enum class Shed : uint8_t { kShed, kDrained, kFailed };
  Shed shed_one(ListenSocket* ls) {
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

  void pause(ListenSocket* ls) {  // engine thread
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

  // Pairs queued requests with waiting GetConnectionRequests (engine thread).
  void match() {
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

  SoftAdapter* adapter_;
  HANDLE file_;
  std::mutex mu_;
  bool bound_ = false;
  bool listening_ = false;
  ULONG setup_limit_ = kDefaultSetupLimit;  // set by listen before the engine accepts anything
  std::atomic<ULONG> setup_peak_{0};        // most connections in setup at once (tests)
  std::atomic<ULONG> refused_{0};           // connections refused because the backlog was full (tests)
  std::atomic<ULONG> expired_{0};           // requests refused after waiting queued_limit_ms_ (tests)
  std::atomic<ULONG> evicted_{0};           // half-open setups dropped for a newer connection (also in refused_)
  net::Address bound_addr_;
  uint16_t port_ = 0;
  std::vector<std::unique_ptr<ListenSocket>> socks_;            // mu_
  std::deque<Waiter> waiters_;                                  // mu_
  std::deque<std::unique_ptr<cm::Channel>> queue_;              // mu_ (channels: engine thread)
  std::deque<Clock::time_point> queued_at_;                     // mu_: when each of queue_ arrived
  uint32_t queued_limit_ms_ = cm::kReplyTimeoutMs / 2;           // set by listen
  uint64_t sweep_timer_ = 0;                                    // engine thread
  std::vector<HalfOpen> handshaking_;                           // engine thread, in accept order
  std::vector<std::unique_ptr<cm::Channel>> closing_;           // engine thread
  int spare_fd_ = -1;                                           // engine thread: the reserve descriptor
  std::shared_ptr<shm::Rendezvous> rendezvous_;                 // mu_ (set by listen; read on the engine thread)
};

// ---- SoftListener -------------------------------------------------------------------------------------

HRESULT SoftListener::create(SoftAdapter* adapter, HANDLE overlapped_file, SoftListener** out) {
  auto* l = new (std::nothrow) SoftListener();
  if (l == nullptr) return ND_NO_MEMORY;
  l->adapter_ = adapter;
  l->file_ = overlapped_file;
  l->core_ = ListenerCore::make(adapter, overlapped_file);
  if (!l->core_) {
    l->Release();
    return ND_NO_MEMORY;
  }
  *out = l;
  return ND_SUCCESS;
}

SoftListener::~SoftListener() {
  if (core_) core_->released();
}

HRESULT SoftListener::CancelOverlappedRequests() {
  variance::flush(this);
  return core_->cancel();
}

HRESULT SoftListener::GetOverlappedResult(OVERLAPPED* pOverlapped, BOOL bWait) {
  if (pOverlapped == nullptr) return ND_INVALID_PARAMETER_1;
  return variance::overlapped_result(this, file_, pOverlapped, bWait);
}

ULONG SoftListener::setup_peak() const { return core_->setup_peak(); }
ULONG SoftListener::refused() const { return core_->refused(); }
ULONG SoftListener::expired() const { return core_->expired(); }

HRESULT SoftListener::Bind(const sockaddr* pAddress, ULONG cbAddress) { return core_->bind(pAddress, cbAddress); }

HRESULT SoftListener::Listen(ULONG backlog) { return core_->listen(backlog); }

HRESULT SoftListener::GetLocalAddress(sockaddr* pAddress, ULONG* pcbAddress) {
  if (pcbAddress == nullptr) return ND_INVALID_PARAMETER_2;
  return core_->get_local_address(pAddress, pcbAddress);
}

HRESULT SoftListener::GetConnectionRequest(IUnknown* pConnector, OVERLAPPED* pOverlapped) {
  if (pOverlapped == nullptr) return ND_INVALID_PARAMETER_2;
  SoftConnector* conn = from_unknown<SoftConnector, IND2Connector>(pConnector);
  if (conn == nullptr || conn->adapter() != adapter_) return ND_INVALID_PARAMETER_1;
  return variance::finish_overlapped(this, file_, pOverlapped, core_->get_connection_request(conn, pOverlapped));
}

}  // namespace netdirect::soft

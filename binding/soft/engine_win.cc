// The progress engine on Windows (see engine.h): the same contract as engine.cc, with WSAPoll in place of
// epoll. WSAPoll rather than an IOCP because the provider's data path is readiness-based (non-blocking
// send_iov/recv_iov until EAGAIN, exactly as on Linux): an IOCP engine would need a completion-based
// rewrite of qp_tx/qp_rx/cm (posted WSARecv buffers, zero-byte reads) for the one platform, while WSAPoll
// keeps one data path on both and is level-triggered like the epoll use in engine.cc. Its cost is an
// O(sockets) pollfd rebuild per wake-up, which is small next to a system call for the adapter's few sockets.
// WSAPoll cannot wait on events, so wake-ups are datagrams on a connected loopback UDP socket.
#ifdef _WIN32

#include "soft/engine.h"

#include <cerrno>
#include <chrono>
#include <vector>

namespace netdirect::soft {

namespace {

constexpr int kWakeAttempts = 100;  // sends of the wake-up datagram before wake() gives up (never seen to need 2)

SHORT to_poll(uint32_t events) {
  SHORT e = 0;
  if (events & Engine::kRead) e |= POLLRDNORM;
  if (events & Engine::kWrite) e |= POLLWRNORM;
  return e;
}

// A UDP socket on 127.0.0.1 connected to itself: send() a byte to wake the poll, recv() to drain.
SOCKET make_wake_socket() {
  static const bool winsock = [] {
    WSADATA data;
    return ::WSAStartup(MAKEWORD(2, 2), &data) == 0;  // once per process, never undone (as socket_win.cc)
  }();
  if (!winsock) return INVALID_SOCKET;
  SOCKET s = ::socket(AF_INET, SOCK_DGRAM, IPPROTO_UDP);
  if (s == INVALID_SOCKET) return s;
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  int len = sizeof a;
  u_long nonblocking = 1;
  if (::bind(s, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 ||
      ::getsockname(s, reinterpret_cast<sockaddr*>(&a), &len) != 0 ||
      ::connect(s, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 || ::ioctlsocket(s, FIONBIO, &nonblocking) != 0) {
    ::closesocket(s);
    return INVALID_SOCKET;
  }
  return s;
}

}  // namespace

Engine::Engine() = default;

Engine::~Engine() {
  stop_.store(true);
  if (thread_.joinable()) {
    wake();
    thread_.join();
  }
  if (wake_sock_ != net::kInvalidSocket) ::closesocket(wake_sock_);
}

HRESULT Engine::start() {
  wake_sock_ = make_wake_socket();
  if (wake_sock_ == net::kInvalidSocket) return ND_INSUFFICIENT_RESOURCES;
  try {
    thread_ = std::thread([this] { run(); });
  } catch (...) {
    return ND_INSUFFICIENT_RESOURCES;
  }
  return ND_SUCCESS;
}

bool Engine::add(net::Socket s, Handler* h, uint32_t events) {
  {
    std::lock_guard<std::recursive_mutex> lock(dispatch_mu_);
    std::lock_guard<std::mutex> wl(watch_mu_);
    if (!watches_.emplace(s, Watch{h, events}).second) return false;
    live_.insert(h);
  }
  if (!in_engine_thread()) wake();
  return true;
}

bool Engine::modify(net::Socket s, Handler* h, uint32_t events) {
  {
    std::lock_guard<std::mutex> wl(watch_mu_);
    auto it = watches_.find(s);
    if (it == watches_.end()) return false;
    it->second = Watch{h, events};
  }
  if (!in_engine_thread()) wake();
  return true;
}

void Engine::remove(net::Socket s, Handler* h) {
  {
    std::lock_guard<std::mutex> wl(watch_mu_);
    auto it = watches_.find(s);
    if (it != watches_.end() && it->second.handler == h) watches_.erase(it);
  }
  {
    std::lock_guard<std::recursive_mutex> lock(dispatch_mu_);  // waits for a dispatch round in progress
    live_.erase(h);
  }
  // The caller closes the socket next; WSAPoll is not woken by a close, so leave the poll set now.
  if (!in_engine_thread()) wake();
}

void Engine::wake() {
  if (wake_pending_.exchange(true)) return;  // one datagram in flight is enough
  // One sender at a time: Wine fails a non-blocking send that overlaps another one on the same socket with
  // WSAEWOULDBLOCK (the first is still queued in wineserver after its datagram went out, so the engine may
  // have drained it and cleared the flag already). And a send that fails must clear the flag: left set with
  // no datagram on its way, it turns every later wake() into a no-op and the engine never runs another posted
  // task — under Wine, disconnects and accepts that never completed and processes that never exited.
  std::lock_guard<std::mutex> lock(wake_mu_);
  char one = 1;
  for (int attempt = 1; ::send(wake_sock_, &one, 1, 0) != 1; ++attempt) {
    if (attempt == kWakeAttempts) {
      wake_pending_.store(false);  // the next wake() sends again; run() still runs the task on its next round
      return;
    }
    std::this_thread::yield();
  }
}

void Engine::post(std::function<void()> fn) {
  {
    std::lock_guard<std::mutex> lock(task_mu_);
    tasks_.push_back(std::move(fn));
  }
  wake();
}

uint64_t Engine::add_timer(uint32_t ms, std::function<void()> fn) {
  uint64_t id;
  {
    std::lock_guard<std::mutex> lock(task_mu_);
    id = next_timer_id_++;
    timers_.emplace(std::chrono::steady_clock::now() + std::chrono::milliseconds(ms), Timer{id, std::move(fn)});
  }
  wake();
  return id;
}

bool Engine::cancel_timer(uint64_t id) {
  std::lock_guard<std::mutex> lock(task_mu_);
  for (auto it = timers_.begin(); it != timers_.end(); ++it) {
    if (it->second.id == id) {
      timers_.erase(it);
      return true;
    }
  }
  return false;
}

void Engine::run_tasks() {
  std::vector<std::function<void()>> batch;
  {
    std::lock_guard<std::mutex> lock(task_mu_);
    batch.swap(tasks_);
  }
  for (auto& fn : batch) fn();
}

int Engine::run_timers() {
  for (;;) {
    std::function<void()> fn;
    {
      std::lock_guard<std::mutex> lock(task_mu_);
      if (timers_.empty()) return tasks_.empty() ? -1 : 0;
      auto it = timers_.begin();
      auto now = std::chrono::steady_clock::now();
      if (it->first > now) {
        if (!tasks_.empty()) return 0;  // posted since the last round: poll without sleeping, then run them
        auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(it->first - now).count();
        return static_cast<int>(ms) + 1;
      }
      fn = std::move(it->second.fn);
      timers_.erase(it);
    }
    fn();
  }
}

void Engine::run() {
  thread_id_.store(std::this_thread::get_id());
  std::vector<WSAPOLLFD> fds;
  std::vector<Handler*> owners;
  while (!stop_.load()) {
    int timeout = run_timers();
    // The interest set is rebuilt each round: add/modify/remove from other threads wake the poll.
    fds.clear();
    owners.clear();
    fds.push_back(WSAPOLLFD{wake_sock_, POLLRDNORM, 0});
    owners.push_back(nullptr);
    {
      std::lock_guard<std::mutex> wl(watch_mu_);
      for (const auto& [sock, w] : watches_) {
        fds.push_back(WSAPOLLFD{sock, to_poll(w.events), 0});
        owners.push_back(w.handler);
      }
    }
    int n = 0;
    const uint32_t spin = spin_us_.load();
    if (spin > 0) {
      auto until = std::chrono::steady_clock::now() + std::chrono::microseconds(spin);
      do {
        n = ::WSAPoll(fds.data(), static_cast<ULONG>(fds.size()), 0);
      } while (n == 0 && !stop_.load() && std::chrono::steady_clock::now() < until);
    }
    if (n == 0) n = ::WSAPoll(fds.data(), static_cast<ULONG>(fds.size()), timeout);
    if (n < 0) {
      if (::WSAGetLastError() == WSAEINTR) continue;
      break;
    }
    if (fds[0].revents != 0) {
      char buf[64];
      while (::recv(wake_sock_, buf, sizeof buf, 0) > 0) {
      }
      // Only after draining: cleared before, a wake() racing with the drain would have its datagram eaten
      // while wake_pending_ stayed true, and every later wake() (stop, remove, post) would be lost — the engine
      // then sleeps in WSAPoll forever (seen under Wine as teardown hangs). A wake() that finds the flag still
      // set made its change before this store, so this round's task run and pollfd rebuild see it.
      wake_pending_.store(false);
    }
    {
      std::lock_guard<std::recursive_mutex> lock(dispatch_mu_);
      for (size_t i = 1; i < fds.size(); ++i) {
        const SHORT re = fds[i].revents;
        if (re == 0) continue;
        Handler* h = owners[i];
        if (live_.count(h) == 0) continue;  // removed earlier in this round
        {
          std::lock_guard<std::mutex> wl(watch_mu_);
          auto it = watches_.find(fds[i].fd);
          if (it == watches_.end() || it->second.handler != h) continue;  // socket re-registered meanwhile
        }
        uint32_t e = 0;
        if (re & (POLLRDNORM | POLLHUP | POLLERR | POLLNVAL)) e |= kRead;
        if (re & POLLWRNORM) e |= kWrite;
        if (re & (POLLHUP | POLLERR | POLLNVAL)) e |= kHangup;
        // A failed connect is reported as POLLHUP/POLLERR; a connecting handler waits for kWrite.
        if ((re & (POLLHUP | POLLERR)) && (fds[i].events & POLLWRNORM)) e |= kWrite;
        h->on_io(e);
      }
    }
    // Every round, not only when the wake-up datagram arrived: a task never waits for a wake-up that was lost.
    run_tasks();
  }
  run_tasks();  // tasks posted before stop still run (they release references)
}

}  // namespace netdirect::soft

#endif  // _WIN32

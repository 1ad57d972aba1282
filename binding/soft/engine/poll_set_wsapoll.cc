// PollSet over WSAPoll (Windows): the fallback of the completion-port set (poll_set_iocp.cc), taken when that one
// cannot be set up or NETDIRECT_SOFT_POLL=wsapoll asks for it. Its cost is an O(sockets) pollfd rebuild and
// hand-over per wait. WSAPoll cannot wait on events, so wake-ups are datagrams on a connected loopback UDP socket,
// and it has no descriptor an event loop could watch (descriptor() is -1).
#ifdef _WIN32

#include <atomic>
#include <map>
#include <mutex>
#include <thread>
#include <vector>

#include "soft/engine/poll_set.h"

namespace netdirect::soft {

namespace {

constexpr int kWakeAttempts = 100;  // sends of the wake-up datagram before wake() gives up (never seen to need 2)

SHORT to_poll(uint32_t events) {
  SHORT e = 0;
  if (events & PollSet::kRead) e |= POLLRDNORM;
  if (events & PollSet::kWrite) e |= POLLWRNORM;
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

class WsaPollSet final : public PollSet {
 public:
  ~WsaPollSet() override {
    if (wake_sock_ != INVALID_SOCKET) ::closesocket(wake_sock_);
  }

  bool init() {
    wake_sock_ = make_wake_socket();
    return wake_sock_ != INVALID_SOCKET;
  }

  bool add(net::Socket s, void* tag, uint32_t events) override {
    std::lock_guard<std::mutex> lock(mu_);
    return watches_.emplace(s, Watch{tag, events}).second;
  }

  bool modify(net::Socket s, void* tag, uint32_t events) override {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = watches_.find(s);
    if (it == watches_.end()) return false;
    it->second = Watch{tag, events};
    return true;
  }

  void remove(net::Socket s) override {
    std::lock_guard<std::mutex> lock(mu_);
    watches_.erase(s);
  }

  int wait(Ready* out, int max, int timeout_ms) override {
    // The interest set is rebuilt each wait: changes from other threads wake the poll (changes_need_wake).
    fds_.clear();
    tags_.clear();
    fds_.push_back(WSAPOLLFD{wake_sock_, POLLRDNORM, 0});
    tags_.push_back(nullptr);
    {
      std::lock_guard<std::mutex> lock(mu_);
      for (const auto& [sock, w] : watches_) {
        fds_.push_back(WSAPOLLFD{sock, to_poll(w.events), 0});
        tags_.push_back(w.tag);
      }
    }
    int n = ::WSAPoll(fds_.data(), static_cast<ULONG>(fds_.size()), timeout_ms);
    if (n < 0) return ::WSAGetLastError() == WSAEINTR ? 0 : -1;
    if (fds_[0].revents != 0) {
      char buf[64];
      while (::recv(wake_sock_, buf, sizeof buf, 0) > 0) {
      }
      // Only after draining: cleared before, a wake() racing with the drain would have its datagram eaten while
      // wake_pending_ stayed true, and every later wake() would be lost (seen under Wine as teardown hangs).
      wake_pending_.store(false);
    }
    int k = 0;
    for (size_t i = 1; i < fds_.size() && k < max; ++i) {
      const SHORT re = fds_[i].revents;
      if (re == 0) continue;
      uint32_t e = 0;
      if (re & (POLLRDNORM | POLLHUP | POLLERR | POLLNVAL)) e |= kRead;
      if (re & POLLWRNORM) e |= kWrite;
      if (re & (POLLHUP | POLLERR | POLLNVAL)) e |= kHangup;
      // A failed connect is reported as POLLHUP/POLLERR; a connecting handler waits for kWrite.
      if ((re & (POLLHUP | POLLERR)) && (fds_[i].events & POLLWRNORM)) e |= kWrite;
      out[k++] = Ready{tags_[i], fds_[i].fd, e};
    }
    return k;
  }

  void wake() override {
    if (wake_pending_.exchange(true)) return;  // one datagram in flight is enough
    // One sender at a time: Wine fails a non-blocking send that overlaps another one on the same socket with
    // WSAEWOULDBLOCK. A send that fails must clear the flag: left set with no datagram on its way, every later
    // wake() would be a no-op and posted tasks would never run.
    std::lock_guard<std::mutex> lock(wake_mu_);
    char one = 1;
    for (int attempt = 1; ::send(wake_sock_, &one, 1, 0) != 1; ++attempt) {
      if (attempt == kWakeAttempts) {
        wake_pending_.store(false);  // the next wake() sends again; the engine also runs tasks every round
        return;
      }
      std::this_thread::yield();
    }
  }

  bool still_watching(net::Socket s, void* tag) const override {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = watches_.find(s);
    return it != watches_.end() && it->second.tag == tag;
  }
  bool changes_need_wake() const override { return true; }
  intptr_t descriptor() const override { return -1; }

 private:
  struct Watch {
    void* tag;
    uint32_t events;
  };
  mutable std::mutex mu_;
  std::map<net::Socket, Watch> watches_;  // guarded by mu_
  std::vector<WSAPOLLFD> fds_;           // wait() only
  std::vector<void*> tags_;              // wait() only
  SOCKET wake_sock_ = INVALID_SOCKET;
  std::atomic<bool> wake_pending_{false};  // a wake-up datagram is on its way (or being sent)
  std::mutex wake_mu_;                     // one send on wake_sock_ at a time
};

}  // namespace

std::unique_ptr<PollSet> create_wsapoll_set() {  // PollSet::create (poll_set_iocp.cc) picks it or the port
  std::unique_ptr<WsaPollSet> p(new WsaPollSet());
  if (!p->init()) return nullptr;
  return p;
}

}  // namespace netdirect::soft

#endif  // _WIN32

// PollSet over epoll (Linux): level-triggered, woken through an eventfd that is part of the set, so the
// epoll descriptor alone tells an outside waiter that there is something to do.
#ifndef _WIN32

#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>

#include "soft/engine/poll_set.h"

namespace netdirect::soft {

namespace {

uint32_t to_epoll(uint32_t events) {
  uint32_t e = EPOLLRDHUP;
  if (events & PollSet::kRead) e |= EPOLLIN;
  if (events & PollSet::kWrite) e |= EPOLLOUT;
  return e;
}

class EpollSet final : public PollSet {
 public:
  ~EpollSet() override {
    if (epfd_ >= 0) ::close(epfd_);
    if (wakefd_ >= 0) ::close(wakefd_);
  }

  bool init() {
    epfd_ = ::epoll_create1(EPOLL_CLOEXEC);
    wakefd_ = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (epfd_ < 0 || wakefd_ < 0) return false;
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.ptr = &wakefd_;  // the one tag no caller can register
    return ::epoll_ctl(epfd_, EPOLL_CTL_ADD, wakefd_, &ev) == 0;
  }

  bool add(net::Socket s, void* tag, uint32_t events) override { return ctl(EPOLL_CTL_ADD, s, tag, events); }
  bool modify(net::Socket s, void* tag, uint32_t events) override { return ctl(EPOLL_CTL_MOD, s, tag, events); }
  void remove(net::Socket s) override { ::epoll_ctl(epfd_, EPOLL_CTL_DEL, s, nullptr); }

  int wait(Ready* out, int max, int timeout_ms) override {
    constexpr int kMax = 64;
    epoll_event events[kMax];
    int n = ::epoll_wait(epfd_, events, max < kMax ? max : kMax, timeout_ms);
    if (n < 0) return errno == EINTR ? 0 : -1;
    int k = 0;
    for (int i = 0; i < n; ++i) {
      if (events[i].data.ptr == &wakefd_) {
        uint64_t v;
        while (::read(wakefd_, &v, sizeof v) > 0) {
        }
        continue;
      }
      const uint32_t e = events[i].events;
      uint32_t r = 0;
      if (e & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR)) r |= kRead;
      if (e & EPOLLOUT) r |= kWrite;
      if (e & (EPOLLRDHUP | EPOLLHUP | EPOLLERR)) r |= kHangup;
      out[k++] = Ready{events[i].data.ptr, net::kInvalidSocket, r};  // epoll does not say which descriptor
    }
    return k;
  }

  void wake() override {
    uint64_t one = 1;
    ssize_t r = ::write(wakefd_, &one, sizeof one);
    (void)r;  // EAGAIN: the counter is full, a wake-up is pending anyway
  }

  bool still_watching(net::Socket, void*) const override { return true; }
  bool changes_need_wake() const override { return false; }
  intptr_t descriptor() const override { return epfd_; }
  intptr_t wake_descriptor() const override { return wakefd_; }

 private:
  bool ctl(int op, net::Socket s, void* tag, uint32_t events) {
    epoll_event ev{};
    ev.events = to_epoll(events);
    ev.data.ptr = tag;
    return ::epoll_ctl(epfd_, op, s, &ev) == 0;
  }

  int epfd_ = -1;
  int wakefd_ = -1;
};

}  // namespace

std::unique_ptr<PollSet> PollSet::create() {
  std::unique_ptr<EpollSet> p(new EpollSet());
  if (!p->init()) return nullptr;
  return p;
}

}  // namespace netdirect::soft

#endif  // !_WIN32

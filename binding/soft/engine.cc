#include "soft/engine.h"

#include <pthread.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>

namespace netdirect::soft {

namespace {
uint32_t to_epoll(uint32_t events) {
  uint32_t e = EPOLLRDHUP;
  if (events & Engine::kRead) e |= EPOLLIN;
  if (events & Engine::kWrite) e |= EPOLLOUT;
  return e;
}
}  // namespace

Engine::Engine() = default;

Engine::~Engine() {
  stop_.store(true);
  if (thread_.joinable()) {
    wake();
    thread_.join();
  }
  if (epfd_ >= 0) ::close(epfd_);
  if (wakefd_ >= 0) ::close(wakefd_);
}

HRESULT Engine::start() {
  epfd_ = ::epoll_create1(EPOLL_CLOEXEC);
  wakefd_ = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (epfd_ < 0 || wakefd_ < 0) return ND_INSUFFICIENT_RESOURCES;
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.ptr = nullptr;  // the wake-up descriptor
  if (::epoll_ctl(epfd_, EPOLL_CTL_ADD, wakefd_, &ev) != 0) return ND_INSUFFICIENT_RESOURCES;
  try {
    thread_ = std::thread([this] { run(); });
  } catch (...) {
    return ND_INSUFFICIENT_RESOURCES;
  }
  return ND_SUCCESS;
}

bool Engine::add(net::Socket s, Handler* h, uint32_t events) {
  std::lock_guard<std::recursive_mutex> lock(dispatch_mu_);
  epoll_event ev{};
  ev.events = to_epoll(events);
  ev.data.ptr = h;
  if (::epoll_ctl(epfd_, EPOLL_CTL_ADD, s, &ev) != 0) return false;
  live_.insert(h);
  return true;
}

bool Engine::modify(net::Socket s, Handler* h, uint32_t events) {
  epoll_event ev{};
  ev.events = to_epoll(events);
  ev.data.ptr = h;
  return ::epoll_ctl(epfd_, EPOLL_CTL_MOD, s, &ev) == 0;
}

void Engine::remove(net::Socket s, Handler* h) {
  ::epoll_ctl(epfd_, EPOLL_CTL_DEL, s, nullptr);
  std::lock_guard<std::recursive_mutex> lock(dispatch_mu_);  // waits for a dispatch round in progress
  live_.erase(h);
}

void Engine::wake() {
  uint64_t one = 1;
  ssize_t r = ::write(wakefd_, &one, sizeof one);
  (void)r;  // EAGAIN means a wake-up is already pending
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
      if (timers_.empty()) return -1;
      auto it = timers_.begin();
      auto now = std::chrono::steady_clock::now();
      if (it->first > now) {
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
  pthread_setname_np(pthread_self(), "nd-engine");  // tells the threads apart in /proc, top and perf
  constexpr int kMaxEvents = 64;
  epoll_event events[kMaxEvents];
  while (!stop_.load()) {
    int timeout = run_timers();
    // Spin with zero timeouts for the configured window before blocking: trades a core for latency.
    int n = 0;
    const uint32_t spin = spin_us_.load();
    if (spin > 0) {
      auto until = std::chrono::steady_clock::now() + std::chrono::microseconds(spin);
      do {
        n = ::epoll_wait(epfd_, events, kMaxEvents, 0);
      } while (n == 0 && !stop_.load() && std::chrono::steady_clock::now() < until);
    }
    if (n == 0) n = ::epoll_wait(epfd_, events, kMaxEvents, timeout);
    if (n < 0) {
      if (errno == EINTR) continue;
      break;
    }
    bool tasks = false;
    {
      std::lock_guard<std::recursive_mutex> lock(dispatch_mu_);
      for (int i = 0; i < n; ++i) {
        auto* h = static_cast<Handler*>(events[i].data.ptr);
        if (h == nullptr) {
          uint64_t v;
          while (::read(wakefd_, &v, sizeof v) > 0) {
          }
          tasks = true;
          continue;
        }
        if (live_.count(h) == 0) continue;  // removed earlier in this round
        uint32_t e = 0;
        if (events[i].events & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR)) e |= kRead;
        if (events[i].events & EPOLLOUT) e |= kWrite;
        if (events[i].events & (EPOLLRDHUP | EPOLLHUP | EPOLLERR)) e |= kHangup;
        h->on_io(e);
      }
    }
    if (tasks) run_tasks();
  }
  run_tasks();  // tasks posted before stop still run (they release references)
}

}  // namespace netdirect::soft

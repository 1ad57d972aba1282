// The progress engine (engine.h): one implementation for every OS, over the PollSet seam.
#include "soft/engine/engine.h"

#include "ndkit/object.h"

namespace netdirect::soft {

namespace {
constexpr int kReadyBatch = 64;      // socket events per wait
constexpr int kTaskPassesPerRound = 4;  // tasks posted by tasks run in the same progress() call, this often
}  // namespace

Engine::Engine() = default;

Engine::~Engine() {
  thread_.close();
  // Tasks posted before the end still run (they release references), with this thread as the last driver.
  std::lock_guard<std::mutex> lock(round_mu_);
  const std::thread::id prev = driver_.exchange(std::this_thread::get_id());
  while (run_tasks() != 0) {
  }
  driver_.store(prev);
}

HRESULT Engine::start() {
  poll_ = PollSet::create();
  return poll_ ? ND_SUCCESS : ND_INSUFFICIENT_RESOURCES;
}

bool Engine::add(net::Socket s, Handler* h, uint32_t events) {
  {
    std::lock_guard<std::recursive_mutex> lock(dispatch_mu_);
    if (!poll_->add(s, h, events)) return false;
    live_.insert(h);
  }
  watched(s, h, events, false);
  need_driver();
  if (poll_->changes_need_wake() && !in_engine_thread()) wake();
  return true;
}

bool Engine::modify(net::Socket s, Handler* h, uint32_t events) {
  if (!poll_->modify(s, h, events)) return false;
  watched(s, h, events, false);
  if (poll_->changes_need_wake() && !in_engine_thread()) wake();
  return true;
}

void Engine::remove(net::Socket s, Handler* h) {
  poll_->remove(s);
  watched(s, h, 0, true);
  {
    std::lock_guard<std::recursive_mutex> lock(dispatch_mu_);  // waits for a dispatch round in progress
    live_.erase(h);
  }
  // The caller closes the socket next; on Windows the set lets go of it (cancels its poll) only in its next wait.
  if (poll_->changes_need_wake() && !in_engine_thread()) wake();
}

void Engine::wake() { poll_->wake(); }

void Engine::post(std::function<void()> fn) {
  {
    std::lock_guard<std::mutex> lock(task_mu_);
    tasks_.push_back(std::move(fn));
  }
  // The driving thread runs its own posts at the end of its round (and the next round does not wait).
  if (!in_engine_thread()) {
    need_driver();
    wake();
  }
}

uint64_t Engine::add_timer(uint32_t ms, std::function<void()> fn) {
  uint64_t id;
  {
    std::lock_guard<std::mutex> lock(task_mu_);
    id = next_timer_id_++;
    timers_.emplace(std::chrono::steady_clock::now() + std::chrono::milliseconds(ms), Timer{id, std::move(fn)});
  }
  // The driving thread reads the next deadline before it waits again; others must interrupt its wait.
  if (!in_engine_thread()) {
    need_driver();
    wake();
  }
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

uint32_t Engine::run_tasks() {
  std::vector<std::function<void()>> batch;
  {
    std::lock_guard<std::mutex> lock(task_mu_);
    batch.swap(tasks_);
  }
  for (auto& fn : batch) fn();
  return static_cast<uint32_t>(batch.size());
}

uint32_t Engine::run_timers(int* next_ms) {
  uint32_t ran = 0;
  for (;;) {
    std::function<void()> fn;
    {
      std::lock_guard<std::mutex> lock(task_mu_);
      if (!tasks_.empty()) {
        *next_ms = 0;  // posted since the last round: look at the sockets without sleeping, then run them
        if (timers_.empty() || timers_.begin()->first > std::chrono::steady_clock::now()) return ran;
      } else if (timers_.empty()) {
        *next_ms = -1;
        return ran;
      }
      auto it = timers_.begin();
      auto now = std::chrono::steady_clock::now();
      if (it->first > now) {
        auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(it->first - now).count();
        *next_ms = static_cast<int>(ms) + 1;  // never wake a millisecond early and find nothing due
        return ran;
      }
      fn = std::move(it->second.fn);
      timers_.erase(it);
    }
    fn();
    ++ran;
  }
}

int Engine::next_timeout_ms() {
  std::lock_guard<std::mutex> lock(task_mu_);
  if (!tasks_.empty()) return 0;
  if (timers_.empty()) return -1;
  auto wait = timers_.begin()->first - std::chrono::steady_clock::now();
  if (wait <= std::chrono::steady_clock::duration::zero()) return 0;
  return static_cast<int>(std::chrono::duration_cast<std::chrono::milliseconds>(wait).count()) + 1;
}

void Engine::watched(net::Socket s, Handler* h, uint32_t events, bool removed) {
  bool later = false;
  {
    std::lock_guard<std::mutex> lock(watch_mu_);
    if (removed) {
      auto it = watched_.find(s);
      if (it != watched_.end() && it->second.h == h) watched_.erase(it);
    } else {
      watched_[s] = Watched{h, events};
    }
    // Read under the lock that set_watcher copies watched_ under: a change either is in its copy or sees it.
    if (watcher_.load(std::memory_order_acquire) == nullptr) return;
    if (std::this_thread::get_id() != watcher_thread_.load(std::memory_order_relaxed)) {
      // A loop's handles belong to its thread: told there at the next progress (the wake-up brings it).
      resync_.push_back(s);
      later = true;
    }
  }
  if (later) {
    wake();
    return;
  }
  tell_watcher(s);
}

void Engine::tell_watcher(net::Socket s) {
  Watcher* w = watcher_.load(std::memory_order_acquire);
  if (w == nullptr) return;
  Watched now{nullptr, 0};
  bool present = false;
  {
    std::lock_guard<std::mutex> lock(watch_mu_);
    auto it = watched_.find(s);
    if (it != watched_.end()) {
      now = it->second;
      present = true;
    }
  }
  if (present) {
    w->watch(s, now.h, now.events);
  } else {
    w->unwatch(s);
  }
}

void Engine::resync_watcher() {
  std::vector<net::Socket> changed;
  {
    std::lock_guard<std::mutex> lock(watch_mu_);
    if (resync_.empty()) return;
    changed.swap(resync_);
  }
  for (net::Socket s : changed) tell_watcher(s);
}

HRESULT Engine::set_watcher(Watcher* w, intptr_t* wake_descriptor) {
  if (w == nullptr) {
    std::lock_guard<std::mutex> lock(watch_mu_);
    watcher_.store(nullptr, std::memory_order_release);
    resync_.clear();
    return ND_SUCCESS;
  }
  if (!external_driver()) return ND_INVALID_DEVICE_STATE;
  const intptr_t wake_fd = poll_ ? poll_->wake_descriptor() : -1;
  if (wake_fd < 0) return ND_NOT_SUPPORTED;
  std::vector<std::pair<net::Socket, Watched>> now;
  {
    std::lock_guard<std::mutex> lock(watch_mu_);
    watcher_thread_.store(std::this_thread::get_id(), std::memory_order_relaxed);
    watcher_.store(w, std::memory_order_release);
    resync_.clear();
    now.assign(watched_.begin(), watched_.end());
  }
  for (const auto& [s, reg] : now) w->watch(s, reg.h, reg.events);
  *wake_descriptor = wake_fd;
  return ND_SUCCESS;
}

uint32_t Engine::round(int timeout_ms, const PollSet::Ready* given) {
  // The overlapped completions that timers, handlers and tasks make leave when each part ends, with no object lock
  // held (ndkit/object.h), and never wait behind the blocking wait.
  int next = -1;
  uint32_t work = 0;
  {
    ndkit::DeferCompletions defer;
    work = run_timers(&next);
  }
  if (timeout_ms != 0 && next >= 0 && (timeout_ms < 0 || next < timeout_ms)) timeout_ms = next;
  PollSet::Ready ready[kReadyBatch];
  int n;
  if (given != nullptr) {
    ready[0] = *given;  // a watcher's report: no wait (the loop's own wait said which socket is ready)
    n = 1;
  } else {
    n = poll_->wait(ready, kReadyBatch, timeout_ms);
  }
  ndkit::DeferCompletions defer;
  if (n > 0) {
    std::lock_guard<std::recursive_mutex> lock(dispatch_mu_);
    for (int i = 0; i < n; ++i) {
      auto* h = static_cast<Handler*>(ready[i].tag);
      if (live_.count(h) == 0) continue;  // removed earlier in this round (or, a watcher's report, since)
      // The socket was re-registered meanwhile (a watcher's report comes from the consumer's own wait).
      if (given == nullptr && !poll_->still_watching(ready[i].socket, h)) continue;
      h->on_io(ready[i].events);
      ++work;
    }
  }
  // Every round, not only after a wake-up: a task never waits for a wake-up that was lost.
  work += run_tasks();
  return work;
}

uint32_t Engine::progress(bool defer_transmit) { return drive(defer_transmit, nullptr); }

uint32_t Engine::progress_ready(Handler* h, uint32_t events, bool defer_transmit) {
  const PollSet::Ready given{h, net::kInvalidSocket, events};
  return drive(defer_transmit, &given);
}

uint32_t Engine::drive(bool defer_transmit, const PollSet::Ready* given) {
  std::unique_lock<std::mutex> lock(round_mu_, std::try_to_lock);
  if (!lock.owns_lock()) return 0;
  const std::thread::id prev = driver_.exchange(std::this_thread::get_id());
  if (defer_transmit) deferring_thread_.store(std::this_thread::get_id(), std::memory_order_relaxed);
  resync_watcher();
  uint32_t work = round(0, given);
  for (int i = 1; i < kTaskPassesPerRound; ++i) {
    const uint32_t more = run_tasks();
    if (more == 0) break;
    work += more;
  }
  driver_.store(prev);
  return work;
}

void Engine::flush() {
  if (!deferring()) return;
  deferring_thread_.store(std::thread::id(), std::memory_order_relaxed);  // what runs now transmits at once
  if (deferred_.empty()) return;
  std::lock_guard<std::mutex> lock(round_mu_);
  const std::thread::id prev = driver_.exchange(std::this_thread::get_id());
  // Run from flushing_, handing deferred_ its emptied storage back: a turn defers into capacity it already has.
  flushing_.swap(deferred_);
  for (auto& fn : flushing_) fn();
  flushing_.clear();
  driver_.store(prev);
}

void Engine::run_rounds(const std::atomic<bool>& stop) {
  std::lock_guard<std::mutex> lock(round_mu_);
  driver_.store(std::this_thread::get_id());
  while (!stop.load()) round(-1);
  driver_.store(std::thread::id());
}

HRESULT Engine::set_external_driver(bool external) {
  if (external) {
    if (descriptor() < 0) return ND_NOT_SUPPORTED;
    if (in_engine_thread()) return ND_INVALID_DEVICE_STATE;
    thread_.set_external(true);
    return ND_SUCCESS;
  }
  deferring_thread_.store(std::thread::id(), std::memory_order_relaxed);
  {
    // A consumer that stops driving before its flush(): the deferred work runs as ordinary tasks.
    std::lock_guard<std::mutex> lock(task_mu_);
    for (auto& fn : deferred_) tasks_.push_back(std::move(fn));
    deferred_.clear();
  }
  thread_.set_external(false);  // whatever is registered or queued goes on without the consumer
  wake();
  return ND_SUCCESS;
}

}  // namespace netdirect::soft

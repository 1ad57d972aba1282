// The software provider's progress engine: what an RNIC's engine does, for one adapter. It waits on the
// adapter's sockets (a PollSet: epoll on Linux, AFD polls on a completion port on Windows), reads and places incoming FPDUs, answers
// Read Requests, continues blocked transmissions, runs connection-setup timers and posted tasks.
//
// Who drives it: progress runs in rounds (wait for readiness, dispatch handlers, run due tasks and timers), and
// any one thread at a time may run them. By default the engine's own thread does (`nd-engine`, ndkit's
// ProgressDriver, as for the verbs provider), started when the adapter first needs progress. A consumer that has
// a loop of its own (the addon's event-loop mode, through INDProgress in nd/netdirect_ext.h) takes over with
// set_external_driver(true): the thread stops, the consumer watches descriptor() and calls progress() when it is
// readable or next_timeout_ms() has passed, so a completion reaches it with no thread hop.
// set_external_driver(false) hands progress back to the thread. Progress never depends on anyone polling a CQ.
#ifndef NETDIRECT_SOFT_ENGINE_H_
#define NETDIRECT_SOFT_ENGINE_H_

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "ndkit/progress_driver.h"
#include "soft/engine/poll_set.h"
#include "soft/net/socket.h"

namespace netdirect::soft {

class Engine final : private ndkit::ProgressDriver::Rounds {
 public:
  static constexpr uint32_t kRead = PollSet::kRead;
  static constexpr uint32_t kWrite = PollSet::kWrite;
  static constexpr uint32_t kHangup = PollSet::kHangup;

  // An owner of a socket. on_io runs on the driving thread only, never concurrently with itself.
  class Handler {
   public:
    virtual void on_io(uint32_t events) = 0;

   protected:
    ~Handler() = default;
  };

  Engine();
  ~Engine();  // stops and joins the thread (if it ran), runs tasks still queued; every handler must be removed
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // Creates the poll set; ND_INSUFFICIENT_RESOURCES on failure. The thread starts when first needed.
  HRESULT start();

  // Registers / changes the interest set (kRead | kWrite, level-triggered) of a socket. Thread-safe.
  bool add(net::Socket s, Handler* h, uint32_t events);
  bool modify(net::Socket s, Handler* h, uint32_t events);
  // Unregisters. On return no on_io of h is running or will run — except when called from h's own
  // on_io, where it simply takes effect for later events. Never call it while holding a lock that an
  // on_io may take (it waits for the current dispatch round).
  void remove(net::Socket s, Handler* h);

  // Runs fn on the driving thread soon, in posting order. Thread-safe; fn must not block.
  void post(std::function<void()> fn);
  // Runs fn on the driving thread after `ms` milliseconds unless cancelled. Returns a non-zero id.
  uint64_t add_timer(uint32_t ms, std::function<void()> fn);
  // True if the timer was cancelled before it ran.
  bool cancel_timer(uint64_t id);

  // True on the thread that is running a round now (handlers, tasks and timers run there). For the engine's
  // own thread that is its whole life; for an external driver, the inside of progress().
  bool in_engine_thread() const { return std::this_thread::get_id() == driver_.load(std::memory_order_relaxed); }

  // Owns `raw` (nullptr stays nullptr) in a shared_ptr whose last release destroys it on the driving thread,
  // so an object whose handlers run there is never destroyed under one of them.
  template <typename T>
  std::shared_ptr<T> own_on_engine(T* raw) {
    if (raw == nullptr) return nullptr;
    return std::shared_ptr<T>(raw, [this](T* c) {
      if (in_engine_thread()) {
        delete c;
      } else {
        post([c] { delete c; });
      }
    });
  }

  // Who watches the sockets when an external driver's loop waits on them itself (nd/netdirect_ext.h
  // INDProgressDescriptors): told of every registration and change, on the driver's thread.
  class Watcher {
   public:
    virtual void watch(net::Socket s, Handler* h, uint32_t events) = 0;  // add or change (events 0: not now)
    virtual void unwatch(net::Socket s) = 0;                            // before the socket is closed

   protected:
    ~Watcher() = default;
  };

  // ---- Driving from outside (nd/netdirect_ext.h INDProgress) ----
  // true: the engine's thread stops (joined before this returns; never call it from a round); the caller
  // drives with progress(). false: the thread takes over again. ND_NOT_SUPPORTED where the poll set has no
  // descriptor to watch.
  HRESULT set_external_driver(bool external);
  bool external_driver() const { return thread_.external(); }
  // Readable while a round has something to do (sockets, wake-ups); -1 where the OS offers none.
  intptr_t descriptor() const { return poll_ ? poll_->descriptor() : -1; }
  // One round on the calling thread without waiting. Returns the number of socket events, tasks and timers it
  // ran (0: nothing to do, or another thread is in a round). With defer_transmit, what the round and the calling
  // thread's own posts would transmit may wait (defer()) until flush(), which the caller promises to call before
  // it waits again: everything the consumer posts while it handles the round's completions then leaves in one
  // send together with the round's answers (Read Responses), as a cork released at the end of the turn.
  uint32_t progress(bool defer_transmit = false);
  // Ends the deferral progress(true) began on this thread and runs what was deferred, as a round of its own.
  void flush();
  // True on the thread between its progress(true) and its flush(): then defer(fn) adds to what flush() runs.
  bool deferring() const {
    return deferring_thread_.load(std::memory_order_relaxed) == std::this_thread::get_id();
  }
  void defer(std::function<void()> fn) { deferred_.push_back(std::move(fn)); }
  // The external driver's thread only: from now on `w` watches every registered socket (each is reported to it
  // at once, and every later add, modify and remove), and the caller watches *wake_descriptor (readable when work
  // was posted from another thread: then progress()) instead of descriptor(). nullptr: back to descriptor() (the
  // sockets never left the poll set). ND_NOT_SUPPORTED where the poll set has no wake descriptor.
  HRESULT set_watcher(Watcher* w, intptr_t* wake_descriptor);
  // progress() for one socket the watcher found ready (h as watch() gave it; nothing if it was removed since).
  uint32_t progress_ready(Handler* h, uint32_t events, bool defer_transmit = false);
  // Milliseconds until the next timer is due: 0 when tasks are queued, -1 when there is nothing.
  int next_timeout_ms();
  // Same-host connections (docs/shm.md) among what the engine drives, counted in and out by their queue pairs:
  // while there is one, a consumer driving progress busy-polls a while after each message (the adapter's
  // INDSharedMemory::GetBusyPollMicros).
  void shm_link_up() { shm_links_.fetch_add(1, std::memory_order_relaxed); }
  void shm_link_down() { shm_links_.fetch_sub(1, std::memory_order_relaxed); }
  uint32_t shm_links() const { return shm_links_.load(std::memory_order_relaxed); }

 private:
  // One wait (or, `given`, the one socket event a watcher reported) + dispatch + tasks + due timers; the caller
  // holds round_mu_.
  uint32_t round(int timeout_ms, const PollSet::Ready* given = nullptr);
  uint32_t drive(bool defer_transmit, const PollSet::Ready* given);  // progress() / progress_ready()
  void watched(net::Socket s, Handler* h, uint32_t events, bool removed);  // keeps watched_, tells the watcher
  void tell_watcher(net::Socket s);  // on the watcher's thread: the socket's registration as it is now
  void resync_watcher();             // the changes made on other threads since
  void run_rounds(const std::atomic<bool>& stop) override;  // the engine thread (ProgressDriver::Rounds)
  void need_driver() { thread_.need(); }  // starts the thread unless an external driver has the engine
  void wake() override;
  uint32_t run_tasks();
  uint32_t run_timers(int* next_ms);  // runs due timers; *next_ms: until the next one (-1 none, 0 tasks wait)

  std::unique_ptr<PollSet> poll_;
  std::atomic<uint32_t> shm_links_{0};
  std::atomic<std::thread::id> driver_{};  // the thread running rounds now (see in_engine_thread)
  std::mutex round_mu_;                    // held by whoever runs a round: one driver at a time
  std::recursive_mutex dispatch_mu_;   // held while handlers run; remove() waits on it
  std::unordered_set<Handler*> live_;  // guarded by dispatch_mu_
  std::mutex task_mu_;
  std::vector<std::function<void()>> tasks_;  // guarded by task_mu_
  struct Timer {
    uint64_t id;
    std::function<void()> fn;
  };
  std::multimap<std::chrono::steady_clock::time_point, Timer> timers_;  // guarded by task_mu_
  uint64_t next_timer_id_ = 1;                                         // guarded by task_mu_
  // Every registered socket and its interest, for a watcher set later (set_watcher); the watcher and its thread;
  // sockets changed on another thread while it watches, told on its thread at the next progress.
  struct Watched {
    Handler* h;
    uint32_t events;
  };
  std::mutex watch_mu_;
  std::unordered_map<net::Socket, Watched> watched_;  // guarded by watch_mu_
  std::vector<net::Socket> resync_;                    // guarded by watch_mu_
  std::atomic<Watcher*> watcher_{nullptr};
  std::atomic<std::thread::id> watcher_thread_{};
  std::atomic<std::thread::id> deferring_thread_{};  // between progress(true) and flush() (deferring())
  std::vector<std::function<void()>> deferred_;       // that thread only (defer / flush / set_external_driver)
  std::vector<std::function<void()>> flushing_;       // what flush() runs (its storage kept between turns)
  // The engine thread `nd-engine` and its hand-over (ProgressDriver::thread_mu_ is the lock docs/threads.md calls
  // the engine's thread lock). Last: destroyed first, though ~Engine has closed it already.
  ndkit::ProgressDriver thread_{"nd-engine", this};
};

}  // namespace netdirect::soft

#endif  // NETDIRECT_SOFT_ENGINE_H_

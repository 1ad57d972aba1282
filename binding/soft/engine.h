// The software provider's progress engine: one thread per adapter that behaves like an RNIC's engine.
// It waits on the adapter's sockets (epoll; IOCP/WSAPoll in a Windows build), reads and places incoming
// FPDUs, answers Read Requests, continues blocked transmissions, runs connection-setup timers and posted
// tasks. It progresses independently of whether anyone polls a CQ.
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
#include <unordered_set>
#include <vector>

#include "soft/socket.h"

namespace netdirect::soft {

class Engine {
 public:
  static constexpr uint32_t kRead = 1;
  static constexpr uint32_t kWrite = 2;
  static constexpr uint32_t kHangup = 4;  // reported with kRead when the peer closed or the socket failed

  // An owner of a socket. on_io runs on the engine thread only, never concurrently with itself.
  class Handler {
   public:
    virtual void on_io(uint32_t events) = 0;

   protected:
    ~Handler() = default;
  };

  Engine();
  ~Engine();  // stops and joins the thread; every handler must have been removed
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // Starts the thread; ND_INSUFFICIENT_RESOURCES on failure.
  HRESULT start();

  // Registers / changes the interest set (kRead | kWrite, level-triggered) of a socket. Thread-safe.
  bool add(net::Socket s, Handler* h, uint32_t events);
  bool modify(net::Socket s, Handler* h, uint32_t events);
  // Unregisters. On return no on_io of h is running or will run — except when called from h's own
  // on_io, where it simply takes effect for later events. Never call it while holding a lock that an
  // on_io may take (it waits for the current dispatch round).
  void remove(net::Socket s, Handler* h);

  // Runs fn on the engine thread soon, in posting order. Thread-safe; fn must not block.
  void post(std::function<void()> fn);
  // Runs fn on the engine thread after `ms` milliseconds unless cancelled. Returns a non-zero id.
  uint64_t add_timer(uint32_t ms, std::function<void()> fn);
  // True if the timer was cancelled before it ran.
  bool cancel_timer(uint64_t id);

  bool in_engine_thread() const { return std::this_thread::get_id() == thread_id_.load(); }

  // Owns `raw` (nullptr stays nullptr) in a shared_ptr whose last release destroys it on this engine's thread,
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
  // Busy-poll window in microseconds before the engine blocks (0 = block at once).
  void set_spin_micros(uint32_t us) { spin_us_.store(us); }

 private:
  void run();
  void wake();
  void run_tasks();
  int run_timers();  // runs due timers, returns ms until the next (-1 = none; Windows: 0 while tasks wait)

#ifdef _WIN32
  // engine_win.cc: WSAPoll over the registered sockets, woken through a loopback UDP socket.
  struct Watch {
    Handler* handler;
    uint32_t events;
  };
  std::mutex watch_mu_;
  std::map<net::Socket, Watch> watches_;  // guarded by watch_mu_
  net::Socket wake_sock_ = net::kInvalidSocket;
  std::atomic<bool> wake_pending_{false};  // a wake-up datagram is on its way (or being sent)
  std::mutex wake_mu_;                     // one send on wake_sock_ at a time (see wake())
#else
  int epfd_ = -1;
  int wakefd_ = -1;
#endif
  std::thread thread_;
  std::atomic<std::thread::id> thread_id_{};
  std::atomic<bool> stop_{false};
  std::atomic<uint32_t> spin_us_{0};
  std::recursive_mutex dispatch_mu_;   // held while handlers run; remove() waits on it
  std::unordered_set<Handler*> live_;  // guarded by dispatch_mu_
  std::mutex task_mu_;
  std::vector<std::function<void()>> tasks_;
  struct Timer {
    uint64_t id;
    std::function<void()> fn;
  };
  std::multimap<std::chrono::steady_clock::time_point, Timer> timers_;  // guarded by task_mu_
  uint64_t next_timer_id_ = 1;
};

}  // namespace netdirect::soft

#endif  // NETDIRECT_SOFT_ENGINE_H_

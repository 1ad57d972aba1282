// Who drives a provider's progress (nd/netdirect_ext.h INDProgress): the provider's own thread, started when
// progress is first needed, or a consumer with a loop of its own, which takes over with SetExternalDriver(TRUE)
// (the thread is stopped and joined before that returns) and hands back with SetExternalDriver(FALSE) (a thread is
// started again). One implementation for every provider built here: the software provider's engine
// (soft/engine/engine.cc, thread `nd-engine`) and the verbs provider's adapter (verbs/adapter.cc, `nd-verbs`).
// The provider supplies the rounds (Rounds::run_rounds: the thread's loop, until `stop`) and the wake-up that
// interrupts a round's wait. Locks: thread_mu_ is a leaf, held across starting and joining the thread; never
// call stop()/set_external(true)/close() from the driving thread or while holding a lock a round may take
// (docs/threads.md).
#ifndef NETDIRECT_NDKIT_PROGRESS_DRIVER_H_
#define NETDIRECT_NDKIT_PROGRESS_DRIVER_H_

#include <atomic>
#include <mutex>
#include <thread>

namespace netdirect::ndkit {

class ProgressDriver {
 public:
  class Rounds {
   public:
    // The thread's body: progress rounds until `stop` is true (checked after every round; wake() ends a wait).
    virtual void run_rounds(const std::atomic<bool>& stop) = 0;
    // Makes a round that waits return soon (thread-safe).
    virtual void wake() = 0;

   protected:
    ~Rounds() = default;
  };

  // `name`: the thread's name (at most 15 characters: Linux's limit), shown in /proc, top and perf.
  ProgressDriver(const char* name, Rounds* rounds) : name_(name), rounds_(rounds) {}
  ~ProgressDriver() { close(); }
  ProgressDriver(const ProgressDriver&) = delete;
  ProgressDriver& operator=(const ProgressDriver&) = delete;

  // Starts the thread unless it runs, a consumer drives, or the driver is closed. Cheap when it runs.
  void need();
  // true: no thread from now on (the running one is stopped and joined first); false: the thread takes over.
  void set_external(bool external);
  bool external() const { return external_.load(std::memory_order_relaxed); }
  bool thread_running() const { return running_.load(std::memory_order_acquire); }
  // The end: the thread is stopped and joined (detached, defensively, when called on it) and never restarted.
  void close();

 private:
  void stop();  // thread_mu_ held
  void run();

  const char* name_;
  Rounds* rounds_;
  std::mutex thread_mu_;  // guards thread_ start/stop
  std::thread thread_;
  std::atomic<bool> running_{false};
  std::atomic<bool> external_{false};
  std::atomic<bool> closing_{false};
  std::atomic<bool> stop_{false};  // the thread leaves its loop (closed, or a consumer took over)
};

}  // namespace netdirect::ndkit

#endif  // NETDIRECT_NDKIT_PROGRESS_DRIVER_H_

// The progress driver (progress_driver.h): the provider's thread and its hand-over to an external driver.
#include "ndkit/progress_driver.h"

#if defined(__linux__)
#include <pthread.h>
#endif

namespace netdirect::ndkit {

void ProgressDriver::run() {
#if defined(__linux__)
  pthread_setname_np(pthread_self(), name_);  // tells the threads apart in /proc, top and perf
#endif
  rounds_->run_rounds(stop_);
}

void ProgressDriver::need() {
  if (running_.load(std::memory_order_acquire) || external_.load(std::memory_order_relaxed)) return;
  std::lock_guard<std::mutex> lock(thread_mu_);
  if (running_.load() || external_.load() || closing_.load()) return;
  try {
    thread_ = std::thread([this] { run(); });
  } catch (...) {
    return;  // no thread: progress waits for the next need (or an external driver)
  }
  running_.store(true, std::memory_order_release);
}

void ProgressDriver::stop() {
  if (!thread_.joinable()) return;
  stop_.store(true);
  rounds_->wake();
  if (thread_.get_id() == std::this_thread::get_id()) {
    thread_.detach();  // closed from a round (defensive): it leaves its loop, stop_ stays set
  } else {
    thread_.join();
    stop_.store(false);
  }
  running_.store(false);
}

void ProgressDriver::set_external(bool external) {
  if (external) {
    external_.store(true);
    std::lock_guard<std::mutex> lock(thread_mu_);
    stop();
    return;
  }
  external_.store(false);
  need();
}

void ProgressDriver::close() {
  closing_.store(true);
  std::lock_guard<std::mutex> lock(thread_mu_);
  stop();
}

}  // namespace netdirect::ndkit

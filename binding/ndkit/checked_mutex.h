// A mutex that knows its owner, so a function that requires a lock can check it (`mu_.assert_held()` at the top
// of every `*_locked` function) instead of trusting its name. The locking model these checks enforce is written
// down once, in docs/threads.md. assert() stays on in this project's release builds (CMakeLists.txt): the check
// is one relaxed atomic load and compare per call.
#ifndef NETDIRECT_NDKIT_CHECKED_MUTEX_H_
#define NETDIRECT_NDKIT_CHECKED_MUTEX_H_

#include <atomic>
#include <cassert>
#include <mutex>
#include <thread>

#ifdef _WIN32
#include "nd/nd2.h"  // windows.h, included the way every file of the provider includes it
#endif

namespace netdirect::ndkit {

#ifdef _WIN32
// std::mutex from MinGW's POSIX thread model (winpthreads) waits on a kernel event when contended: a system call
// to lock and another to unlock, each a wineserver round trip under Wine. An SRW lock waits in user mode (a
// keyed wait; Wine: a futex), as std::mutex does with glibc.
class NativeMutex {
 public:
  void lock() { AcquireSRWLockExclusive(&lock_); }
  bool try_lock() { return TryAcquireSRWLockExclusive(&lock_) != 0; }
  void unlock() { ReleaseSRWLockExclusive(&lock_); }

 private:
  SRWLOCK lock_ = SRWLOCK_INIT;
};
#else
using NativeMutex = std::mutex;
#endif

class CheckedMutex {
 public:
  void lock() {
    mu_.lock();
    owner_.store(std::this_thread::get_id(), std::memory_order_relaxed);
  }
  bool try_lock() {
    if (!mu_.try_lock()) return false;
    owner_.store(std::this_thread::get_id(), std::memory_order_relaxed);
    return true;
  }
  void unlock() {
    owner_.store(std::thread::id(), std::memory_order_relaxed);
    mu_.unlock();
  }
  bool held() const { return owner_.load(std::memory_order_relaxed) == std::this_thread::get_id(); }
  void assert_held() const { assert(held() && "this function requires the object's lock (docs/threads.md)"); }

 private:
  NativeMutex mu_;
  std::atomic<std::thread::id> owner_{};
};

}  // namespace netdirect::ndkit

#endif  // NETDIRECT_NDKIT_CHECKED_MUTEX_H_

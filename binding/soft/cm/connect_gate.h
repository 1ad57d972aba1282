// Bounds the connection setups an adapter runs as initiator at one time (docs/nd2.md "Connect flood").
//
// Every Connect in progress holds a socket that the engine watches until the peer's MPA Reply arrives. A program
// that connects as fast as it can (the ND SDK's ndconn does, for a minute) against a listener that cannot keep up
// would otherwise grow that set without bound: thousands of sockets that wait in the listener's kernel accept queue
// until their Reply timer ends them, every wait of the engine slower with their number (on Windows a WSAPoll over
// all of them), until socket creation fails. With the gate at most kActive setups run; later Connects wait in
// FIFO order (their handshake deadline counts the wait). A Connect takes its place when it is called (reserve());
// once kActive + kWaiting places are taken the adapter is out of connection-setup resources and CreateConnector
// fails ND_INSUFFICIENT_RESOURCES until one frees: the flow control the SDK's ndconn relies on (it treats a
// failed creation as "wait for a completion", a failed Connect as a failure). A Connect on a connector that
// exists never fails for want of a place: it waits, within its deadline. kActive + kWaiting = 256, the listener's
// default backlog (docs/nd2.md "Listen backlog").
//
// reserve() and full() from any thread; admit() and leave() on the engine thread only (no lock). A waiting setup
// is a function that starts it and answers whether it took the slot (false: it was cancelled while it waited).
#ifndef NETDIRECT_SOFT_CM_CONNECT_GATE_H_
#define NETDIRECT_SOFT_CM_CONNECT_GATE_H_

#include <atomic>
#include <cstddef>
#include <deque>
#include <functional>
#include <utility>

namespace netdirect::soft::cm {

class ConnectGate {
 public:
  static constexpr size_t kActive = 64;
  static constexpr size_t kWaiting = 192;

  // A Connect was called: its place counts from now (before its engine task admits it). Every reserve() is
  // followed by one admit() of the same setup.
  void reserve() { taken_.fetch_add(1, std::memory_order_relaxed); }

  // All places taken: CreateConnector refuses (a moment's view).
  bool full() const { return taken_.load(std::memory_order_relaxed) >= kActive + kWaiting; }

  // Runs start now when a slot is free, else queues it (FIFO). True if it runs now (or declined: cancelled).
  bool admit(std::function<bool()> start) {
    if (active_ < kActive && waiting_.empty()) {
      ++active_;
      if (!start()) leave_slot();
      return true;
    }
    waiting_.push_back(std::move(start));
    return false;
  }

  // A setup that took a slot ended (established, refused, failed or abandoned): the next waiting ones start.
  // Reentrant: a setup started here may end at once and call leave() again; the outer call keeps starting.
  void leave() {
    leave_slot();
    if (starting_) return;
    starting_ = true;
    while (active_ < kActive && !waiting_.empty()) {
      std::function<bool()> next = std::move(waiting_.front());
      waiting_.pop_front();
      ++active_;
      if (!next()) leave_slot();  // cancelled while it waited: its place frees too
    }
    starting_ = false;
  }

 private:
  void leave_slot() {
    --active_;
    taken_.fetch_sub(1, std::memory_order_relaxed);
  }

  std::atomic<size_t> taken_{0};  // reserved places: running, waiting, or posted and not yet admitted
  size_t active_ = 0;
  std::deque<std::function<bool()>> waiting_;
  bool starting_ = false;
};

}  // namespace netdirect::soft::cm

#endif  // NETDIRECT_SOFT_CM_CONNECT_GATE_H_

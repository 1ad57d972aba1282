// Bounds the connection setups an adapter runs as initiator at one time (docs/nd2.md "Connect flood").
//
// Every Connect in progress holds a socket that the engine watches until the peer's MPA Reply arrives. A program
// that connects as fast as it can (the ND SDK's ndconn does, for a minute) against a listener that cannot keep up
// would otherwise grow that set without bound: thousands of sockets that wait in the listener's kernel accept queue
// until their Reply timer ends them, every wait of the engine slower with their number (on Windows a WSAPoll over
// all of them), until socket creation fails. With the gate at most kActive setups run; later Connects wait in
// FIFO order (their handshake deadline counts the wait). Past kWaiting the adapter is out of connection-setup
// resources: a Connect completes ND_INSUFFICIENT_RESOURCES, and so does CreateConnector while it stays so (the
// flow control the SDK's ndconn relies on: it treats a failed creation as "wait for a completion", a failed
// Connect as a failure). kActive + kWaiting = 256, the listener's default backlog (docs/nd2.md).
//
// Engine thread only, but full(), which any thread may ask. A waiting setup is a function that starts it and
// answers whether it took the slot (false: it was cancelled while it waited).
#ifndef NETDIRECT_SOFT_CM_CONNECT_GATE_H_
#define NETDIRECT_SOFT_CM_CONNECT_GATE_H_

#include <cstddef>
#include <atomic>
#include <deque>
#include <functional>
#include <utility>

namespace netdirect::soft::cm {

class ConnectGate {
 public:
  static constexpr size_t kActive = 64;
  static constexpr size_t kWaiting = 192;

  enum class Admit { kStarted, kWaiting, kFull };

  // Runs start now when a slot is free (kStarted, or kWaiting if start declined it), queues it when none is
  // (kWaiting), or refuses it when the queue is full (kFull: start is not called).
  Admit admit(std::function<bool()> start) {
    if (active_ < kActive && waiting_.empty()) {
      take();
      if (!start()) give_back();
      return Admit::kStarted;
    }
    if (waiting_.size() >= kWaiting) return Admit::kFull;
    waiting_.push_back(std::move(start));
    taken_.fetch_add(1, std::memory_order_relaxed);
    return Admit::kWaiting;
  }

  // A setup that took a slot ended (established, refused, failed or abandoned): the next waiting ones start.
  // Reentrant: a setup started here may end at once and call leave() again; the outer call keeps starting.
  void leave() {
    give_back();
    if (starting_) return;
    starting_ = true;
    while (active_ < kActive && !waiting_.empty()) {
      std::function<bool()> next = std::move(waiting_.front());
      waiting_.pop_front();
      ++active_;  // moves from waiting to active: taken_ unchanged
      if (!next()) give_back();
    }
    starting_ = false;
  }

  // Every slot and place in the queue is taken (any thread; a moment's view).
  bool full() const { return taken_.load(std::memory_order_relaxed) >= kActive + kWaiting; }

 private:
  void take() {
    ++active_;
    taken_.fetch_add(1, std::memory_order_relaxed);
  }
  void give_back() {
    --active_;
    taken_.fetch_sub(1, std::memory_order_relaxed);
  }

  std::atomic<size_t> taken_{0};  // active_ + waiting_.size(), for full()
  size_t active_ = 0;
  std::deque<std::function<bool()>> waiting_;
  bool starting_ = false;
};

}  // namespace netdirect::soft::cm

#endif  // NETDIRECT_SOFT_CM_CONNECT_GATE_H_

// Bounds the connection setups an adapter runs as initiator at one time (docs/nd2.md "Connect flood").
//
// Every Connect in progress holds a socket that the engine watches until the peer's MPA Reply arrives. A program
// that connects as fast as it can (the ND SDK's ndconn does, for a minute) against a listener that cannot keep up
// would otherwise grow that set without bound: thousands of sockets that wait in the listener's kernel accept queue
// until their Reply timer ends them, every wait of the engine slower with their number (on Windows a WSAPoll over
// all of them), until socket creation fails. With the gate at most kActive setups run; later Connects wait in
// FIFO order (their handshake deadline counts the wait); past kWaiting a Connect completes
// ND_INSUFFICIENT_RESOURCES, which the ND SDK documents for a provider out of connection resources.
//
// Engine thread only: no lock. A waiting setup is a function that starts it and answers whether it took the slot
// (false: it was cancelled while it waited).
#ifndef NETDIRECT_SOFT_CM_CONNECT_GATE_H_
#define NETDIRECT_SOFT_CM_CONNECT_GATE_H_

#include <cstddef>
#include <deque>
#include <functional>
#include <utility>

namespace netdirect::soft::cm {

class ConnectGate {
 public:
  static constexpr size_t kActive = 64;
  static constexpr size_t kWaiting = 1024;

  enum class Admit { kStarted, kWaiting, kFull };

  // Runs start now when a slot is free (kStarted, or kWaiting if start declined it), queues it when none is
  // (kWaiting), or refuses it when the queue is full (kFull: start is not called).
  Admit admit(std::function<bool()> start) {
    if (active_ < kActive && waiting_.empty()) {
      ++active_;
      if (!start()) --active_;
      return Admit::kStarted;
    }
    if (waiting_.size() >= kWaiting) return Admit::kFull;
    waiting_.push_back(std::move(start));
    return Admit::kWaiting;
  }

  // A setup that took a slot ended (established, refused, failed or abandoned): the next waiting ones start.
  // Reentrant: a setup started here may end at once and call leave() again; the outer call keeps starting.
  void leave() {
    --active_;
    if (starting_) return;
    starting_ = true;
    while (active_ < kActive && !waiting_.empty()) {
      std::function<bool()> next = std::move(waiting_.front());
      waiting_.pop_front();
      ++active_;
      if (!next()) --active_;
    }
    starting_ = false;
  }

  size_t active() const { return active_; }
  size_t waiting() const { return waiting_.size(); }

 private:
  size_t active_ = 0;
  std::deque<std::function<bool()>> waiting_;
  bool starting_ = false;
};

}  // namespace netdirect::soft::cm

#endif  // NETDIRECT_SOFT_CM_CONNECT_GATE_H_

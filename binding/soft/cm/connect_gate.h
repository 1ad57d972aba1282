// Bounds the connection setups an adapter runs as initiator at one time (docs/nd2.md "Connect flood").
//
// Every Connect in progress holds a socket that the engine watches until the peer's MPA Reply arrives. A program
// that connects as fast as it can (the ND SDK's ndconn does, for a minute) against a listener that cannot keep up
// would otherwise grow that set without bound: thousands of sockets that wait in the listener's kernel accept queue
// until their Reply timer ends them, every wait of the engine slower with their number (on Windows a WSAPoll over
// all of them), until socket creation fails. With the gate at most kActive setups run; later Connects wait in
// FIFO order (their handshake deadline counts the wait). A Connect takes its place when it is called (reserve());
// once kActive + kWaiting places are taken the adapter is out of connection-setup resources. A Connect on a
// connector that exists never fails for want of a place: it waits, within its deadline. kActive + kWaiting = 256,
// the listener's default backlog (docs/nd2.md "Listen backlog").
//
// What CreateConnector does with every place taken is the adapter's admission wait (SoftAdapter::CreateConnector):
// a program that loads the provider DLL gets a connector once a place frees, waiting for one (wait_for_place) up to
// the handshake deadline, as a blocking allocation; the addon asks for the immediate ND_INSUFFICIENT_RESOURCES
// (INDConnectAdmission in nd/netdirect_ext.h). The waiting is the flow control that keeps the sockets bounded: the
// SDK's ndconn treats a failed CreateConnector as "wait for a *failed* completion", so with an immediate refusal it
// stops after ~290 connections (docs/windows-event-loop.md, the ndconn rows).
//
// Per destination (address and port), at most kPerDestination setups run at once, and waiting ones start in FIFO
// order per destination: a peer that accepts TCP and never answers MPA holds at most that many slots until its
// setups reach their deadline, so Connects to other destinations start at once instead of queueing behind it
// (docs/security.md "Connect gate"; 64 such connects stalled a connect to a healthy server for 9.8 s).
//
// reserve(), full() and wait_for_place() from any thread (wait_for_place never on the engine thread, which frees the
// places); admit() and leave() on the engine thread only (no lock). A waiting setup is a function that starts it and
// answers whether it took the slot (false: it was cancelled while it waited).
#ifndef NETDIRECT_SOFT_CM_CONNECT_GATE_H_
#define NETDIRECT_SOFT_CM_CONNECT_GATE_H_

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <unordered_map>
#include <utility>

namespace netdirect::soft::cm {

class ConnectGate {
 public:
  static constexpr size_t kActive = 64;
  static constexpr size_t kWaiting = 192;
  static constexpr size_t kPerDestination = 16;  // a quarter of kActive

  // A Connect was called: its place counts from now (before its engine task admits it). Every reserve() is
  // followed by one admit() of the same setup.
  void reserve() { taken_.fetch_add(1); }

  // All places taken (a moment's view).
  bool full() const { return taken_.load() >= kActive + kWaiting; }

  // Blocks the calling thread until a place is free or `ms` passed; true if one is free (a moment's view: callers
  // that race for the last place may all take it, which over-fills the waiting queue by at most their number).
  // Never on the engine thread: leave() frees the places and wakes the waiters.
  bool wait_for_place(uint32_t ms) {
    if (!full()) return true;
    std::unique_lock<std::mutex> lock(wait_mu_);
    sleepers_.fetch_add(1);  // before the look at taken_ under the lock: leave_slot() either sees it or we see its place
    const bool free = wait_cv_.wait_for(lock, std::chrono::milliseconds(ms), [this] { return !full(); });
    sleepers_.fetch_sub(1);
    return free;
  }

  // Runs start now when a slot is free and `dest` (the peer's address) has fewer than kPerDestination setups
  // running and none waiting, else queues it. True if it runs now (or declined: cancelled).
  bool admit(const std::string& dest, std::function<bool()> start) {
    if (active_ < kActive && runnable(dest) && !waiting_for(dest)) {
      take_slot(dest);
      if (!start()) leave_slot(dest);
      return true;
    }
    waiting_.push_back(Waiting{dest, std::move(start)});
    return false;
  }

  // A setup to `dest` that took a slot ended (established, refused, failed or abandoned): the waiting ones that
  // may run now start, in FIFO order per destination. Reentrant: a setup started here may end at once and call
  // leave() again; the outer call keeps starting.
  void leave(const std::string& dest) {
    leave_slot(dest);
    if (starting_) return;
    starting_ = true;
    for (auto it = waiting_.begin(); it != waiting_.end() && active_ < kActive;) {
      if (!runnable(it->dest)) {
        ++it;
        continue;
      }
      Waiting next = std::move(*it);
      waiting_.erase(it);
      take_slot(next.dest);
      if (!next.start()) leave_slot(next.dest);  // cancelled while it waited: its place frees too
      it = waiting_.begin();  // a start may have ended setups meanwhile: look again from the oldest
    }
    starting_ = false;
  }

 private:
  struct Waiting {
    std::string dest;
    std::function<bool()> start;
  };

  bool runnable(const std::string& dest) const {
    auto it = per_dest_.find(dest);
    return it == per_dest_.end() || it->second < kPerDestination;
  }
  bool waiting_for(const std::string& dest) const {
    for (const auto& w : waiting_) {
      if (w.dest == dest) return true;
    }
    return false;
  }
  void take_slot(const std::string& dest) {
    ++active_;
    ++per_dest_[dest];
  }
  void leave_slot(const std::string& dest) {
    --active_;
    auto it = per_dest_.find(dest);
    if (it != per_dest_.end() && --it->second == 0) per_dest_.erase(it);
    taken_.fetch_sub(1);
    if (sleepers_.load() > 0) {
      std::lock_guard<std::mutex> lock(wait_mu_);
      wait_cv_.notify_all();
    }
  }

  std::atomic<size_t> taken_{0};  // reserved places: running, waiting, or posted and not yet admitted (seq_cst)
  std::atomic<size_t> sleepers_{0};  // threads in wait_for_place (seq_cst, paired with taken_)
  std::mutex wait_mu_;
  std::condition_variable wait_cv_;
  size_t active_ = 0;
  std::unordered_map<std::string, size_t> per_dest_;  // running setups per destination (none: absent)
  std::deque<Waiting> waiting_;
  bool starting_ = false;
};

}  // namespace netdirect::soft::cm

#endif  // NETDIRECT_SOFT_CM_CONNECT_GATE_H_

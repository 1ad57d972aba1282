// The readiness seam of the progress engine: one small interface over the OS's socket readiness API, so
// that the engine (engine.cc) is written once. epoll on Linux (poll_set_epoll.cc); on Windows AFD polls on an
// I/O completion port (poll_set_iocp.cc), WSAPoll (poll_set_wsapoll.cc) as its fallback. Level-triggered on all, like the data path expects (it reads and writes until
// EAGAIN, then waits for readiness).
#ifndef NETDIRECT_SOFT_POLL_SET_H_
#define NETDIRECT_SOFT_POLL_SET_H_

#include <cstdint>
#include <memory>

#include "soft/net/socket.h"

namespace netdirect::soft {

class PollSet {
 public:
  static constexpr uint32_t kRead = 1;
  static constexpr uint32_t kWrite = 2;
  static constexpr uint32_t kHangup = 4;  // reported with kRead when the peer closed or the socket failed

  struct Ready {
    void* tag;        // what add()/modify() registered with the socket
    net::Socket socket;
    uint32_t events;  // kRead | kWrite | kHangup
  };

  // nullptr when the OS refused the resources (descriptors, the wake-up channel).
  static std::unique_ptr<PollSet> create();
  virtual ~PollSet() = default;

  // Interest sets (kRead | kWrite). Thread-safe.
  virtual bool add(net::Socket s, void* tag, uint32_t events) = 0;
  virtual bool modify(net::Socket s, void* tag, uint32_t events) = 0;
  virtual void remove(net::Socket s) = 0;
  // Waits up to timeout_ms (-1: no limit, 0: just look) for ready sockets or a wake(); returns how many were
  // written to out (a wake-up is consumed, never reported), or -1 on a failure other than an interrupt.
  virtual int wait(Ready* out, int max, int timeout_ms) = 0;
  // Ends a wait() in progress, or the next one. Thread-safe, cheap when a wake-up is already pending.
  virtual void wake() = 0;
  // False if `s` stopped being registered with `tag` since the wait that reported it (WSAPoll reports from a
  // snapshot of the set, the port from polls issued before; epoll never reports a removed socket).
  virtual bool still_watching(net::Socket s, void* tag) const = 0;
  // True if a change of the interest set from another thread takes effect only after a wake() (Windows).
  virtual bool changes_need_wake() const = 0;
  // A descriptor that is readable while wait() would return at once (the epoll descriptor itself), for an
  // event loop to watch; -1 where the OS has none (Windows: neither WSAPoll nor a port is one).
  virtual intptr_t descriptor() const = 0;
  // The descriptor wake() makes readable (the eventfd inside the epoll set), for an event loop that watches the
  // sockets itself instead of descriptor() (Engine::set_watcher); -1 where there is none.
  virtual intptr_t wake_descriptor() const { return -1; }
};

#ifdef _WIN32
// The WSAPoll set (poll_set_wsapoll.cc), which PollSet::create (poll_set_iocp.cc) falls back to; nullptr on failure.
std::unique_ptr<PollSet> create_wsapoll_set();
#endif

}  // namespace netdirect::soft

#endif  // NETDIRECT_SOFT_POLL_SET_H_

// PollSet over an I/O completion port (Windows), the default there; WSAPoll (poll_set_wsapoll.cc) is the fallback.
//
// Readiness, not completion: the provider's data path is readiness-based on every OS (non-blocking send_iov /
// recv_iov until EAGAIN, then wait), so the port carries readiness too. Each watched socket has at most one
// IOCTL_AFD_POLL outstanding, issued on a helper socket of ours that is associated with the port: the AFD driver
// completes it when the socket has what was asked for (or at once when it already has), and the packet names the
// socket's Watch by its OVERLAPPED. That is what WSAPoll does inside for the whole set at each call, and what libuv
// (`uv_poll_t`'s fast mode, src/win/poll.c) and wepoll do per socket; docs/windows-event-loop.md "The software
// provider's engine on a completion port" has the choice against overlapped WSARecv/WSASend.
//
// Level-triggered, as the engine expects: a poll reports once and is not re-issued until the next wait(), after the
// handlers have read or written until EAGAIN; a socket that is still ready then completes its new poll at once.
// A wait therefore costs a system call per socket that was ready (its re-arm) plus one dequeue, where WSAPoll
// rebuilt and handed over the whole set.
//
// Threads: add/modify/remove (any thread) only record the wish under mu_ and queue the Watch; wait() (one thread at
// a time: the engine's round lock) issues, re-issues and cancels polls. Changes from another thread therefore take
// effect after a wake() (changes_need_wake), a packet posted to the port. A Watch is freed only when no poll of it
// is in flight (the kernel writes its result into the Watch): a removed socket's poll is cancelled and its Watch
// lives on until the cancelled packet comes back. A poll that ends cancelled for any reason (CancelIoEx, the
// issuing thread's exit where the OS does that) is simply issued again at the next wait.
#ifdef _WIN32

#include <algorithm>
#include <atomic>
#include <cstring>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "ndkit/checked_mutex.h"
#include "soft/engine/poll_set.h"
#include "soft/env.h"
#include "soft/trace.h"

#ifndef SIO_BASE_HANDLE
#define SIO_BASE_HANDLE _WSAIOR(IOC_WS2, 34)
#endif

namespace netdirect::soft {

namespace {

// IOCTL_AFD_POLL and its structures: not in the SDK headers; the layout and codes that ReactOS's afd.h, Wine's
// include/wine/afd.h, libuv (src/win/winapi.h) and wepoll all use.
constexpr DWORD kIoctlAfdPoll = 0x00012024;
constexpr ULONG kAfdPollReceive = 0x0001;
constexpr ULONG kAfdPollSend = 0x0004;
constexpr ULONG kAfdPollDisconnect = 0x0008;  // the peer's FIN
constexpr ULONG kAfdPollAbort = 0x0010;       // reset
constexpr ULONG kAfdPollLocalClose = 0x0020;
constexpr ULONG kAfdPollAccept = 0x0080;
constexpr ULONG kAfdPollConnectFail = 0x0100;

struct AfdPollHandleInfo {
  HANDLE handle;
  ULONG events;
  LONG status;  // NTSTATUS
};
struct AfdPollInfo {
  LARGE_INTEGER timeout;
  ULONG count;
  ULONG exclusive;
  AfdPollHandleInfo handles[1];
};
static_assert(sizeof(AfdPollInfo) == 32, "AFD_POLL_INFO layout");

constexpr uint32_t kStatusPending = 0x00000103;
constexpr uint32_t kStatusCancelled = 0xC0000120;

constexpr ULONG_PTR kWakeKey = 1;  // a wake() packet (poll packets carry key 0 and a Watch's OVERLAPPED)
constexpr int kDequeueBatch = 64;

ULONG to_afd(uint32_t events) {
  if (events == 0) return 0;
  // Failures are always asked for: WSAPoll and epoll report them whatever was asked (as kRead | kHangup).
  ULONG e = kAfdPollDisconnect | kAfdPollAbort | kAfdPollLocalClose | kAfdPollConnectFail;
  if (events & PollSet::kRead) e |= kAfdPollReceive | kAfdPollAccept;
  if (events & PollSet::kWrite) e |= kAfdPollSend;
  return e;
}

// The same mapping as poll_set_wsapoll.cc's from POLL* bits: failures are kRead | kHangup, and a failed connect also
// kWrite for a handler that waits for its connect to finish.
uint32_t from_afd(ULONG afd, uint32_t wanted) {
  uint32_t e = 0;
  if (afd & (kAfdPollReceive | kAfdPollAccept)) e |= PollSet::kRead;
  if (afd & kAfdPollSend) e |= PollSet::kWrite;
  if (afd & (kAfdPollDisconnect | kAfdPollAbort | kAfdPollLocalClose | kAfdPollConnectFail)) {
    e |= PollSet::kRead | PollSet::kHangup;
    if ((afd & (kAfdPollAbort | kAfdPollConnectFail)) && (wanted & PollSet::kWrite)) e |= PollSet::kWrite;
  }
  return e;
}

bool winsock_started() {
  static const bool ok = [] {
    WSADATA data;
    return ::WSAStartup(MAKEWORD(2, 2), &data) == 0;  // once per process, never undone (as socket_win.cc)
  }();
  return ok;
}

// The socket the AFD driver knows: a layered service provider may have wrapped the one the seam returned.
SOCKET base_handle(SOCKET s) {
  SOCKET base = INVALID_SOCKET;
  DWORD bytes = 0;
  if (::WSAIoctl(s, SIO_BASE_HANDLE, nullptr, 0, &base, sizeof base, &bytes, nullptr, nullptr) == 0 &&
      base != INVALID_SOCKET) {
    return base;
  }
  return s;
}

class IocpPollSet final : public PollSet {
 public:
  ~IocpPollSet() override {
    // Every poll in flight must come back before its Watch is freed: cancel them all and take their packets.
    if (helper_ != INVALID_SOCKET) {
      ::CancelIoEx(reinterpret_cast<HANDLE>(helper_), nullptr);
      for (int i = 0; i < 200 && in_flight_ > 0; ++i) {
        OVERLAPPED_ENTRY ents[kDequeueBatch];
        ULONG got = 0;
        if (!::GetQueuedCompletionStatusEx(port_, ents, kDequeueBatch, &got, 10, FALSE)) continue;
        for (ULONG j = 0; j < got; ++j) {
          if (ents[j].lpOverlapped != nullptr) --in_flight_;
        }
      }
      // Still in flight after 2 s (never seen): leak the Watches rather than let the kernel write into freed memory.
      if (in_flight_ > 0) {
        for (auto& w : all_) w.release();
      }
      ::closesocket(helper_);
    }
    if (port_ != nullptr) ::CloseHandle(port_);
  }

  // nullptr, or what failed.
  const char* init() {
    if (!winsock_started()) return "WSAStartup";
    port_ = ::CreateIoCompletionPort(INVALID_HANDLE_VALUE, nullptr, 0, 1);
    if (port_ == nullptr) return "CreateIoCompletionPort";
    helper_ = ::WSASocketW(AF_INET, SOCK_STREAM, IPPROTO_TCP, nullptr, 0, WSA_FLAG_OVERLAPPED | WSA_FLAG_NO_HANDLE_INHERIT);
    if (helper_ == INVALID_SOCKET) return "the helper socket";
    helper_ = base_handle(helper_);
    if (::CreateIoCompletionPort(reinterpret_cast<HANDLE>(helper_), port_, 0, 0) == nullptr) {
      return "associating the helper socket with the port";
    }
    // A poll that completes inside the call is handled there (issue()), without a packet.
    skip_on_success_ = ::SetFileCompletionNotificationModes(
                           reinterpret_cast<HANDLE>(helper_),
                           FILE_SKIP_COMPLETION_PORT_ON_SUCCESS | FILE_SKIP_SET_EVENT_ON_HANDLE) != FALSE;
    return nullptr;
  }
  bool skip_on_success() const { return skip_on_success_; }

  bool add(net::Socket s, void* tag, uint32_t events) override {
    std::lock_guard<ndkit::CheckedMutex> lock(mu_);
    if (by_socket_.count(s) != 0) return false;
    all_.emplace_back(new Watch());
    Watch* w = all_.back().get();
    w->socket = s;
    w->base = base_handle(s);
    w->tag = tag;
    w->wanted = events;
    by_socket_.emplace(s, w);
    queue_locked(w);
    return true;
  }

  bool modify(net::Socket s, void* tag, uint32_t events) override {
    std::lock_guard<ndkit::CheckedMutex> lock(mu_);
    auto it = by_socket_.find(s);
    if (it == by_socket_.end()) return false;
    Watch* w = it->second;
    w->tag = tag;
    if (w->wanted != events) {
      w->wanted = events;
      queue_locked(w);
    }
    return true;
  }

  void remove(net::Socket s) override {
    std::lock_guard<ndkit::CheckedMutex> lock(mu_);
    auto it = by_socket_.find(s);
    if (it == by_socket_.end()) return;
    it->second->removed = true;
    queue_locked(it->second);
    by_socket_.erase(it);
  }

  int wait(Ready* out, int max, int timeout_ms) override {
    int k = 0;
    apply_changes(out, max, &k);
    const int room = std::min(max - k, kDequeueBatch);
    if (room <= 0) return k;
    OVERLAPPED_ENTRY ents[kDequeueBatch];
    ULONG got = 0;
    const DWORD wait_ms = k > 0 ? 0 : (timeout_ms < 0 ? INFINITE : static_cast<DWORD>(timeout_ms));
    if (!::GetQueuedCompletionStatusEx(port_, ents, static_cast<ULONG>(room), &got, wait_ms, FALSE)) {
      const DWORD err = ::GetLastError();
      return (err == WAIT_TIMEOUT || err == WAIT_IO_COMPLETION || k > 0) ? k : -1;
    }
    std::lock_guard<ndkit::CheckedMutex> lock(mu_);
    for (ULONG i = 0; i < got; ++i) {
      if (ents[i].lpOverlapped == nullptr) {
        // A wake-up. Cleared after it is taken: the changes and tasks of a wake() that found it still set are
        // seen by this round (run_tasks after the wait) or by the next wait's apply_changes.
        wake_pending_.store(false);
        continue;
      }
      Watch* w = CONTAINING_RECORD(ents[i].lpOverlapped, Watch, ov);
      if (!w->pending) {
        // A packet for a poll that finished inside its call: skip-on-success not honoured. Never seen (Wine 8
        // honours it); ignoring it keeps the poll from being reported twice.
        trace("engine: a completion packet for a poll that had finished inside its call");
        continue;
      }
      --in_flight_;
      w->pending = false;
      finished_locked(w, out, &k);
    }
    return k;
  }

  void wake() override {
    if (wake_pending_.exchange(true)) return;  // one packet on its way is enough
    if (!::PostQueuedCompletionStatus(port_, 0, kWakeKey, nullptr)) wake_pending_.store(false);
  }

  bool still_watching(net::Socket s, void* tag) const override {
    std::lock_guard<ndkit::CheckedMutex> lock(mu_);
    auto it = by_socket_.find(s);
    return it != by_socket_.end() && it->second->tag == tag;
  }
  bool changes_need_wake() const override { return true; }
  intptr_t descriptor() const override { return -1; }  // a port is no descriptor an event loop can watch

 private:
  struct Watch {
    OVERLAPPED ov{};  // the poll's; first, so a packet's OVERLAPPED is the Watch
    AfdPollInfo info{};
    SOCKET socket = INVALID_SOCKET;  // the seam's, the key of by_socket_
    SOCKET base = INVALID_SOCKET;    // the one the AFD driver knows
    void* tag = nullptr;
    uint32_t wanted = 0;         // kRead | kWrite, as add/modify last set it
    uint32_t polled = 0;         // what the poll in flight asks for
    bool pending = false;        // a poll is in flight (its result not yet taken)
    bool cancelling = false;     // ... and CancelIoEx was called on it
    bool queued = false;         // on changes_ (to issue, re-issue, cancel or free at the next wait)
    bool removed = false;        // no longer in by_socket_: free once no poll is in flight
  };

  void queue_locked(Watch* w) {
    mu_.assert_held();
    if (w->queued) return;
    w->queued = true;
    changes_.push_back(w);
  }

  // Issues the polls of the queued Watches that have none in flight and want something; cancels the polls that ask
  // for something else than is wanted now, or belong to a removed socket (re-issued when their packet is back);
  // frees removed Watches with nothing in flight. Polls that complete inside the call are reported into out.
  void apply_changes(Ready* out, int max, int* k) {
    std::lock_guard<ndkit::CheckedMutex> lock(mu_);
    std::vector<Watch*> todo;
    todo.swap(changes_);
    size_t i = 0;
    for (; i < todo.size() && *k < max; ++i) {
      Watch* w = todo[i];
      w->queued = false;
      if (w->pending) {
        if (!w->cancelling && (w->removed || w->polled != w->wanted)) {
          w->cancelling = true;
          ::CancelIoEx(reinterpret_cast<HANDLE>(helper_), &w->ov);
        }
        continue;  // its packet brings it back here (finished_locked)
      }
      if (w->removed) {
        free_locked(w);
        continue;
      }
      if (w->wanted != 0) issue_locked(w, out, k);
    }
    // No room left for what an issue might report: the rest waits for the next wait() (which does not block).
    for (; i < todo.size(); ++i) changes_.push_back(todo[i]);
    if (!changes_.empty()) wake();
  }

  void issue_locked(Watch* w, Ready* out, int* k) {
    mu_.assert_held();
    std::memset(&w->ov, 0, sizeof w->ov);
    w->info.timeout.QuadPart = INT64_MAX;  // no timeout
    w->info.count = 1;
    w->info.exclusive = FALSE;
    w->info.handles[0].handle = reinterpret_cast<HANDLE>(w->base);
    w->info.handles[0].events = to_afd(w->wanted);
    w->info.handles[0].status = 0;
    w->polled = w->wanted;
    w->cancelling = false;
    DWORD bytes = 0;
    const BOOL done = ::DeviceIoControl(reinterpret_cast<HANDLE>(helper_), kIoctlAfdPoll, &w->info, sizeof w->info,
                                        &w->info, sizeof w->info, &bytes, &w->ov);
    if (!done && ::GetLastError() == ERROR_IO_PENDING) {
      w->pending = true;
      ++in_flight_;
      return;
    }
    if (done && !skip_on_success_) {
      w->pending = true;  // a packet follows, as for a pending poll
      ++in_flight_;
      return;
    }
    // Finished inside the call: success without a packet (skip-on-success), or a failure (no packet either). A
    // failure, e.g. a socket closed under us, is reported as one, like WSAPoll's POLLNVAL.
    if (!done) {
      w->info.count = 1;
      w->info.handles[0].events = kAfdPollAbort;
    }
    finished_locked(w, out, k);
  }

  // A poll of w is over (packet taken, or finished inside the call): report it if w still wants it, queue w for
  // its next poll (or its release).
  void finished_locked(Watch* w, Ready* out, int* k) {
    mu_.assert_held();
    const uint32_t status = static_cast<uint32_t>(w->ov.Internal);  // the NTSTATUS the driver ended the poll with
    const bool cancelled = w->cancelling || status == kStatusCancelled;
    w->cancelling = false;
    queue_locked(w);
    if (w->removed || cancelled) return;
    ULONG afd = 0;
    if (status != 0 && status != kStatusPending) {  // neither success nor pending
      afd = kAfdPollAbort;  // the poll itself failed: a socket that can no longer be polled, reported as failed
    } else if (w->info.count > 0) {
      afd = w->info.handles[0].events;
    }
    const uint32_t e = from_afd(afd, w->wanted) & (w->wanted | kHangup | kRead);
    if (e == 0) return;
    out[(*k)++] = Ready{w->tag, w->socket, e};
  }

  void free_locked(Watch* w) {
    mu_.assert_held();
    auto it = std::find_if(all_.begin(), all_.end(), [w](const std::unique_ptr<Watch>& p) { return p.get() == w; });
    if (it != all_.end()) {
      std::swap(*it, all_.back());
      all_.pop_back();
    }
  }

  HANDLE port_ = nullptr;
  SOCKET helper_ = INVALID_SOCKET;  // the polls are issued on it; associated with port_
  bool skip_on_success_ = false;
  mutable ndkit::CheckedMutex mu_;
  std::map<net::Socket, Watch*> by_socket_;   // guarded by mu_: the registered sockets
  std::vector<std::unique_ptr<Watch>> all_;   // guarded by mu_: registered and removed-but-in-flight Watches
  std::vector<Watch*> changes_;               // guarded by mu_: Watches to look at in the next wait()
  int in_flight_ = 0;                         // guarded by mu_ (the destructor alone at the end)
  std::atomic<bool> wake_pending_{false};     // a wake-up packet is on its way
};

}  // namespace

// The completion port unless NETDIRECT_SOFT_POLL=wsapoll asks for WSAPoll (to compare the two) or the port cannot
// be set up (then WSAPoll, as before).
std::unique_ptr<PollSet> PollSet::create() {
  std::string storage;
  const char* pick = env_value("NETDIRECT_SOFT_POLL", storage);
  if (pick != nullptr && std::strcmp(pick, "wsapoll") == 0) {
    trace("engine: WSAPoll (NETDIRECT_SOFT_POLL=wsapoll)");
    return create_wsapoll_set();
  }
  std::unique_ptr<IocpPollSet> p(new IocpPollSet());
  if (const char* failed = p->init()) {
    trace("engine: WSAPoll (the completion port's set failed: %s, error %lu)", failed, ::GetLastError());
    return create_wsapoll_set();
  }
  trace("engine: AFD polls on a completion port%s", p->skip_on_success() ? "" : " (every poll completes by packet)");
  return p;
}

}  // namespace netdirect::soft

#endif  // _WIN32

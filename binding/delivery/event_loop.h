// Event-loop completion mode (AdapterOptions.completion 'loop'): the JS thread's libuv loop watches the
// descriptors that say "there is work" — the provider's progress descriptor (nd/netdirect_ext.h INDProgress) and
// the completion port's — and a timer for the provider's next deadline. When one fires, the adapter runs the
// provider's progress, drains the port and settles requests, all on the JS thread: no thread hop, the way
// Node's own sockets work. The handles keep the loop alive only while requests are pending (SetRef).
#ifndef NETDIRECT_EVENT_LOOP_H_
#define NETDIRECT_EVENT_LOOP_H_

#include <napi.h>

#include <cstdint>
#include <unordered_map>

#include "delivery/uv_min.h"

namespace netdirect {

class LoopWatch {
 public:
  using ReadyFn = void (*)(void* ctx);
  // A descriptor watched with WatchSocket is ready: `token` as given there, events kRead | kWrite | kHangup.
  using SocketReadyFn = void (*)(void* ctx, void* token, uint32_t events);
  static constexpr uint32_t kRead = 1;
  static constexpr uint32_t kWrite = 2;
  static constexpr uint32_t kHangup = 4;  // with kRead: the peer closed (or the descriptor failed)

  // True where the addon can use the JS thread's loop (libuv reachable: not the Windows import library).
  static bool Supported();

  LoopWatch() = default;
  ~LoopWatch() { Stop(); }
  LoopWatch(const LoopWatch&) = delete;
  LoopWatch& operator=(const LoopWatch&) = delete;

  // Watches fds (-1 entries are skipped) for readability on env's loop; onReady(ctx) runs on the JS thread.
  // Starts unreferenced. false: *why says what failed.
  bool Start(napi_env env, const int* fds, int count, ReadyFn onReady, void* ctx, const char** why);
  // Watches one more descriptor for readability with onReady (Start's, added later). false: *why says what failed.
  bool AddFd(int fd, const char** why);
  // The provider's sockets themselves (nd/netdirect_ext.h INDProgressWatcher): watch `fd` for `events` (kRead |
  // kWrite; 0: not now) and call onSocket(ctx, token, events) when it is ready. Again for a watched fd: its new
  // events and token. false when libuv refused (then the descriptor is not watched).
  void SetSocketCallback(SocketReadyFn onSocket) { onSocket_ = onSocket; }
  bool WatchSocket(int fd, void* token, uint32_t events);
  // Stops watching `fd` before it returns (no callback for it runs afterwards): its owner closes it next.
  void UnwatchSocket(int fd);
  // Stops watching every socket (the provider takes them back into its own wait).
  void UnwatchSockets();
  // Referenced handles keep the process alive (pending requests).
  void SetRef(bool ref);
  // onReady also runs after ms milliseconds (0: on the next loop turn); a negative ms cancels.
  void SetTimeout(int ms);
  // Busy-polling (AdapterOptions.spinMicros): while on, onReady runs on every loop turn and the loop does not
  // block in its poll phase (an idle handle). The owner turns it off once its spin window has passed. An idle
  // handle is unreferenced: spinning never keeps the process alive by itself.
  void SetSpin(bool on);
  // Gives up the rest of this thread's time slice when another thread is ready to run (std::this_thread::yield).
  static void YieldCpu();
  bool spinning() const { return spin_; }
  // Closes the handles (their memory is freed by libuv's close callbacks). Idempotent.
  void Stop();

 private:
  static constexpr int kMaxFds = 3;  // the provider's (or its wake-up's), the port's, the provider's again on fallback
#ifdef NETDIRECT_HAVE_UV
  static void OnPoll(uv_poll_t* handle, int status, int events);
  static void OnTimer(uv_timer_t* handle);
  static void OnIdle(uv_idle_t* handle);
  static void OnSocket(uv_poll_t* handle, int status, int events);
  uv_poll_t* NewPoll(int fd, void* data);
  struct SocketWatch {
    LoopWatch* owner;
    uv_poll_t* poll;
    void* token;
    uint32_t events;  // as started (0: stopped)
  };
  uv_loop_t* loop_ = nullptr;
  std::unordered_map<int, SocketWatch*> sockets_;
  uv_poll_t* polls_[kMaxFds] = {};
  uv_timer_t* timer_ = nullptr;
  uv_idle_t* idle_ = nullptr;
#endif
  int npolls_ = 0;
  ReadyFn onReady_ = nullptr;
  SocketReadyFn onSocket_ = nullptr;
  void* ctx_ = nullptr;
  bool ref_ = false;
  bool spin_ = false;
  int64_t timeout_ = -1;  // armed timeout (ms), to skip re-arming the same one
};

}  // namespace netdirect

#endif  // NETDIRECT_EVENT_LOOP_H_

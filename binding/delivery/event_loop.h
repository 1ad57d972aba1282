// Event-loop completion mode (AdapterOptions.completion 'loop'): the JS thread's libuv loop watches the
// descriptors that say "there is work" — the provider's progress descriptor (nd/netdirect_ext.h INDProgress) and
// the completion port's — and a timer for the provider's next deadline. When one fires, the adapter runs the
// provider's progress, drains the port and settles requests, all on the JS thread: no thread hop, the way
// Node's own sockets work. The handles keep the loop alive only while requests are pending (SetRef).
#ifndef NETDIRECT_EVENT_LOOP_H_
#define NETDIRECT_EVENT_LOOP_H_

#include <napi.h>

#include <cstdint>

#include "delivery/uv_min.h"

namespace netdirect {

class LoopWatch {
 public:
  using ReadyFn = void (*)(void* ctx);

  // True where the addon can use the JS thread's loop (libuv reachable: not the Windows import library).
  static bool Supported();

  LoopWatch() = default;
  ~LoopWatch() { Stop(); }
  LoopWatch(const LoopWatch&) = delete;
  LoopWatch& operator=(const LoopWatch&) = delete;

  // Watches fds (-1 entries are skipped) for readability on env's loop; onReady(ctx) runs on the JS thread.
  // Starts unreferenced. false: *why says what failed.
  bool Start(napi_env env, const int* fds, int count, ReadyFn onReady, void* ctx, const char** why);
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
  static constexpr int kMaxFds = 2;
#ifdef NETDIRECT_HAVE_UV
  static void OnPoll(uv_poll_t* handle, int status, int events);
  static void OnTimer(uv_timer_t* handle);
  static void OnIdle(uv_idle_t* handle);
  uv_poll_t* polls_[kMaxFds] = {};
  uv_timer_t* timer_ = nullptr;
  uv_idle_t* idle_ = nullptr;
#endif
  int npolls_ = 0;
  ReadyFn onReady_ = nullptr;
  void* ctx_ = nullptr;
  bool ref_ = false;
  bool spin_ = false;
  int64_t timeout_ = -1;  // armed timeout (ms), to skip re-arming the same one
};

}  // namespace netdirect

#endif  // NETDIRECT_EVENT_LOOP_H_

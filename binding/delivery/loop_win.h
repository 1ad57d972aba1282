// Windows event-loop completions (AdapterOptions.completion 'loop' on Windows; docs/windows-event-loop.md): each
// CQ's Notify is issued with the OVERLAPPED inside a uv_async_t's own request, on a second overlapped file of the
// adapter that is associated with libuv's completion port. libuv dequeues the packet as that request
// (libuv src/win/core.c uv__poll: container_of(overlapped, uv_req_t, u.io.overlapped)), sees a UV_WAKEUP request,
// clears async_sent and calls the handle's callback (src/win/async.c uv__process_async_wakeup_req) — on the JS
// thread, with no thread in between. Other overlapped requests (Register, Connect, ...) stay on the adapter's own
// port and poller thread (delivery/poller.h).
//
// This relies on libuv's private Windows layout and behaviour, so it is offered only for the libuv versions whose
// headers were checked (uv_version() in [kMinUv, kMaxUv)) and only after a probe handle shows the expected layout.
// Rules kept (each is a way to corrupt libuv's loop otherwise): async_sent is set before each Notify and again
// when a packet was only a first phase; uv_async_send is never called on these handles; the OVERLAPPED is zeroed
// before each Notify; the file has FILE_SKIP_COMPLETION_PORT_ON_SUCCESS, so a Notify answering ND_SUCCESS posts
// nothing (async_sent is cleared then and the CQ drained here); one handle per CQ (one Notify outstanding each);
// a handle is closed only once its Notify was cancelled — uv_close waits for that packet (uv__async_close) —
// and the status is GetOverlappedResult's, never the packet's.
#ifndef NETDIRECT_LOOP_WIN_H_
#define NETDIRECT_LOOP_WIN_H_

#ifdef _WIN32

#include <napi.h>

#include <string>
#include <unordered_set>

#include "delivery/poller.h"

namespace netdirect {

struct WinLoopCq;

class WinLoop {
 public:
  // deliver(ctx, batch): a batch of CQ records on the JS thread (the callee does not keep batch).
  using DeliverFn = void (*)(void* ctx, Batch* batch);

  // libuv versions whose Windows uv_async_t / uv_req_t / uv_loop_t layout was checked against their headers
  // (Node 20's 1.46, Node 22's 1.51, Node 24's and 26's 1.52): [kMinUv, kMaxUv).
  static constexpr unsigned kMinUv = 0x012E00;  // 1.46.0
  static constexpr unsigned kMaxUv = 0x013500;  // 1.53.0

  // Resolves libuv in the host, checks its version and layout, associates `cqFile` with the loop's port.
  // nullptr: *why says why 'loop' is not available.
  static WinLoop* Create(napi_env env, HANDLE cqFile, DeliverFn deliver, void* ctx, std::string* why);

  // JS thread. Hands a CQ to the loop (drained and armed) / takes it back (Notify cancelled, handle closed; what
  // is left in the CQ is delivered when the cancelled Notify has come back).
  bool AddCq(CqState* cq);
  void RemoveCq(CqState* cq);
  // The adapter goes away: nothing is delivered any more; this object frees itself once every handle is closed
  // (an async env cleanup hook keeps the loop running until then, so a worker can be terminated with Notify
  // requests pending).
  void Detach();

  uint64_t wakeups() const { return wakeups_; }
  // libuv's completion port, which the CQs' file is associated with (key 0).
  HANDLE port() const { return port_; }

 private:
  WinLoop() = default;
  ~WinLoop() = default;
  static void OnWake(void* handle);
  static void OnClosed(void* handle);
  static void OnEnvCleanup(napi_async_cleanup_hook_handle handle, void* arg);
  void Arm(WinLoopCq* c, Batch* batch);
  void MaybeFinish();

  napi_env env_ = nullptr;
  void* loop_ = nullptr;  // uv_loop_t*
  HANDLE port_ = nullptr;  // the loop's iocp
  DeliverFn deliver_ = nullptr;
  void* ctx_ = nullptr;
  bool detached_ = false;
  bool hookRunning_ = false;
  napi_async_cleanup_hook_handle hook_ = nullptr;
  void* keeper_ = nullptr;  // a referenced uv_async_t while the env cleanup waits for closing handles
  std::unordered_set<WinLoopCq*> cqs_;  // open or closing
  uint64_t wakeups_ = 0;
};

}  // namespace netdirect

#endif  // _WIN32
#endif  // NETDIRECT_LOOP_WIN_H_

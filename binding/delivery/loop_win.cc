// Windows event-loop completions: see loop_win.h and docs/windows-event-loop.md.
#ifdef _WIN32

#include "delivery/loop_win.h"

#include <cstddef>
#include <cstdlib>
#include <cstring>

namespace netdirect {

namespace {

// libuv's Windows structures as far as this file touches them, 64-bit (include/uv.h UV_HANDLE_FIELDS,
// UV_REQ_FIELDS, struct uv_loop_s; include/uv/win.h UV_HANDLE_PRIVATE_FIELDS, UV_REQ_PRIVATE_FIELDS,
// UV_ASYNC_PRIVATE_FIELDS, UV_LOOP_PRIVATE_FIELDS). Offsets checked with mingw-w64 against the headers of libuv
// 1.46.0 (Node 20), 1.51.0 (Node 22) and 1.52.x (Node 24, 26): identical. uv_handle_size(UV_ASYNC) and a probe
// handle check them again at run time (WinLoop::Create).
struct UvReq {
  void* data;
  int type;  // uv_req_type
  void* reserved[6];
  OVERLAPPED overlapped;  // u.io.overlapped
  size_t queued_bytes;    // u.io.queued_bytes
  void* next_req;
};
struct UvAsync {
  void* data;
  void* loop;
  int type;  // uv_handle_type
  void* close_cb;
  void* handle_queue[2];
  void* u[4];
  void* endgame_next;
  unsigned int flags;
  UvReq async_req;
  void (*async_cb)(void* handle);
  volatile char async_sent;
};
struct UvLoopHead {
  void* data;
  unsigned int active_handles;
  void* handle_queue[2];
  void* active_reqs;
  void* internal_fields;
  unsigned int stop_flag;
  HANDLE iocp;  // the first of UV_LOOP_PRIVATE_FIELDS
};
static_assert(sizeof(void*) == 8, "the layout below is the 64-bit one");
static_assert(offsetof(UvReq, overlapped) == 64 && sizeof(UvReq) == 112, "uv_req_t layout (libuv 1.46-1.52, win64)");
static_assert(offsetof(UvAsync, type) == 16 && offsetof(UvAsync, async_req) == 96 &&
                  offsetof(UvAsync, async_cb) == 208 && offsetof(UvAsync, async_sent) == 216 && sizeof(UvAsync) == 224,
              "uv_async_t layout (libuv 1.46-1.52, win64)");
static_assert(offsetof(UvLoopHead, iocp) == 56, "uv_loop_t iocp offset (libuv 1.46-1.52, win64)");

constexpr int kUvAsync = 1;    // UV_ASYNC in UV_HANDLE_TYPE_MAP
constexpr int kUvWakeup = 17;  // UV_WAKEUP: UV_REQ_TYPE_MAP (1..10) then UV_REQ_TYPE_PRIVATE (include/uv/win.h)
constexpr ULONG kCqBatch = 64;

using UvCb = void (*)(void*);
struct UvApi {
  unsigned (*version)(void) = nullptr;
  size_t (*handle_size)(int) = nullptr;
  int (*async_init)(void* loop, void* handle, UvCb cb) = nullptr;
  void (*close)(void* handle, UvCb cb) = nullptr;
  void (*unref)(void* handle) = nullptr;
};
UvApi g_uv;

// node.exe re-exports libuv for addons (https://nodejs.org/api/addons.html); the import library this addon links
// names NODE.EXE, and an MSVC build's delay-load hook maps that to the host process.
bool ResolveUv(std::string* why) {
  if (g_uv.close != nullptr) return true;
  HMODULE host = GetModuleHandleW(L"node.exe");
  if (host == nullptr || GetProcAddress(host, "napi_get_uv_event_loop") == nullptr) host = GetModuleHandleW(nullptr);
  if (host == nullptr || GetProcAddress(host, "napi_get_uv_event_loop") == nullptr) {
    *why = "the host process does not export Node-API (not node.exe)";
    return false;
  }
  UvApi api;
  api.version = reinterpret_cast<unsigned (*)(void)>(reinterpret_cast<void*>(GetProcAddress(host, "uv_version")));
  api.handle_size = reinterpret_cast<size_t (*)(int)>(reinterpret_cast<void*>(GetProcAddress(host, "uv_handle_size")));
  api.async_init =
      reinterpret_cast<int (*)(void*, void*, UvCb)>(reinterpret_cast<void*>(GetProcAddress(host, "uv_async_init")));
  api.close = reinterpret_cast<void (*)(void*, UvCb)>(reinterpret_cast<void*>(GetProcAddress(host, "uv_close")));
  api.unref = reinterpret_cast<void (*)(void*)>(reinterpret_cast<void*>(GetProcAddress(host, "uv_unref")));
  if (!api.version || !api.handle_size || !api.async_init || !api.close || !api.unref) {
    *why = "the host process does not export libuv's uv_version/uv_handle_size/uv_async_init/uv_close/uv_unref";
    return false;
  }
  g_uv = api;
  return true;
}

std::string UvVersionString(unsigned v) {
  return std::to_string(v >> 16) + "." + std::to_string((v >> 8) & 0xff) + "." + std::to_string(v & 0xff);
}

void FreeHandle(void* handle) { std::free(handle); }

void Drain(CqState* s, Batch* batch) {
  ND2_RESULT results[kCqBatch];
  for (;;) {
    ULONG n = s->cq->GetResults(results, kCqBatch);
    for (ULONG i = 0; i < n; ++i) Poller::AppendResult(results[i], batch, s);
    if (n < kCqBatch) break;
  }
}

}  // namespace

struct WinLoopCq {
  UvAsync* h = nullptr;  // libuv's memory from uv_async_init until OnClosed
  WinLoop* owner = nullptr;
  CqState* s = nullptr;  // our reference
  bool armed = false;
  bool closing = false;
  bool failed = false;
  bool reported = false;
};

WinLoop* WinLoop::Create(napi_env env, HANDLE cqFile, DeliverFn deliver, void* ctx, std::string* why) {
  if (!ResolveUv(why)) return nullptr;
  const unsigned v = g_uv.version();
  if (v < kMinUv || v >= kMaxUv) {
    *why = "libuv " + UvVersionString(v) + " is outside the versions whose Windows loop this addon was checked against (" +
           UvVersionString(kMinUv) + " up to " + UvVersionString(kMaxUv) + ", exclusive); use completion 'thread'";
    return nullptr;
  }
  if (g_uv.handle_size(kUvAsync) != sizeof(UvAsync)) {
    *why = "libuv's uv_async_t has an unexpected size (" + std::to_string(g_uv.handle_size(kUvAsync)) + " bytes)";
    return nullptr;
  }
  void* loop = nullptr;
  if (napi_get_uv_event_loop(env, reinterpret_cast<struct uv_loop_s**>(&loop)) != napi_ok || loop == nullptr) {
    *why = "napi_get_uv_event_loop failed";
    return nullptr;
  }
  // A probe handle: what uv_async_init writes must be where this file reads it.
  auto* probe = static_cast<UvAsync*>(std::calloc(1, sizeof(UvAsync)));
  if (probe == nullptr || g_uv.async_init(loop, probe, &WinLoop::OnWake) != 0) {
    std::free(probe);
    *why = "uv_async_init failed";
    return nullptr;
  }
  const bool layoutOk = probe->type == kUvAsync && probe->loop == loop && probe->async_req.type == kUvWakeup &&
                        probe->async_req.data == probe && probe->async_cb == &WinLoop::OnWake && probe->async_sent == 0;
  g_uv.close(probe, &FreeHandle);
  if (!layoutOk) {
    *why = "libuv " + UvVersionString(v) + "'s uv_async_t does not have the layout this addon expects";
    return nullptr;
  }
  HANDLE iocp = static_cast<UvLoopHead*>(loop)->iocp;
  // Fails unless iocp is a completion port (and the file is not associated yet).
  if (CreateIoCompletionPort(cqFile, iocp, 0, 0) == nullptr) {
    *why = "associating the CQs' overlapped file with the event loop's completion port failed (Windows error " +
           std::to_string(GetLastError()) + ")";
    return nullptr;
  }
  auto* self = new WinLoop();
  self->env_ = env;
  self->loop_ = loop;
  self->port_ = iocp;
  self->deliver_ = deliver;
  self->ctx_ = ctx;
  if (napi_add_async_cleanup_hook(env, &WinLoop::OnEnvCleanup, self, &self->hook_) != napi_ok) {
    delete self;
    *why = "napi_add_async_cleanup_hook failed";
    return nullptr;
  }
  return self;
}

bool WinLoop::AddCq(CqState* s) {
  auto* c = new WinLoopCq();
  c->h = static_cast<UvAsync*>(std::calloc(1, sizeof(UvAsync)));
  if (c->h == nullptr || g_uv.async_init(loop_, c->h, &WinLoop::OnWake) != 0) {
    std::free(c->h);
    delete c;
    return false;
  }
  // Never keeps the loop alive by itself: pending requests do that (the adapter's thread-safe function, which
  // Adapter::KeepLoopAlive references while requests are pending).
  g_uv.unref(c->h);
  c->h->data = c;
  c->owner = this;
  s->Ref();
  c->s = s;
  cqs_.insert(c);
  Batch batch;
  Arm(c, &batch);
  // A new CQ holds nothing yet; whatever a provider put there is delivered on the next packet or close.
  (void)batch;
  return true;
}

// Drain, then Notify; ND_SUCCESS means the CQ is not armed (a result slipped in, and skip-on-success posted
// nothing): drain again and retry, as Poller::DrainAndArm.
void WinLoop::Arm(WinLoopCq* c, Batch* batch) {
  for (int round = 0; round < 100000; ++round) {
    Drain(c->s, batch);
    std::memset(&c->h->async_req.overlapped, 0, sizeof(OVERLAPPED));
    c->h->async_sent = 1;  // in flight: uv_close waits for its packet
    const HRESULT hr = c->s->cq->Notify(ND_CQ_NOTIFY_ANY, &c->h->async_req.overlapped);
    if (hr == ND_PENDING) {
      c->armed = true;
      return;
    }
    c->h->async_sent = 0;  // nothing will come
    if (hr != ND_SUCCESS) {  // CQ unusable (overrun, device removed): one cqError record, never armed again
      c->failed = true;
      if (!c->reported) {
        c->reported = true;
        const uint32_t rec[kRecordWords] = {c->s->id, static_cast<uint32_t>(hr), 0, kKindCqError, 0};
        batch->words.insert(batch->words.end(), rec, rec + kRecordWords);
      }
      return;
    }
  }
}

// libuv's callback for a Notify packet (async_sent already cleared by libuv). Everything about the CQ is done
// before the batch goes to JS: the callback may close the CQ or the adapter.
void WinLoop::OnWake(void* handle) {
  auto* h = static_cast<UvAsync*>(handle);
  auto* c = static_cast<WinLoopCq*>(h->data);
  if (c == nullptr || !c->armed || c->closing) return;  // the probe; or not ours to handle
  WinLoop* self = c->owner;
  const HRESULT hr = c->s->cq->GetOverlappedResult(&h->async_req.overlapped, FALSE);
  if (hr == ND_PENDING) {  // a next phase of the same Notify is in flight (ND SDK docs/IND2Overlapped.md)
    h->async_sent = 1;
    return;
  }
  c->armed = false;
  self->wakeups_++;
  Batch batch;
  if (FAILED(hr) && hr != ND_CANCELED) {  // a CQ error (docs/nd2.md §7.3): drained once, left unarmed
    c->failed = true;
    Drain(c->s, &batch);
    if (!c->reported) {
      c->reported = true;
      const uint32_t rec[kRecordWords] = {c->s->id, static_cast<uint32_t>(hr), 0, kKindCqError, 0};
      batch.words.insert(batch.words.end(), rec, rec + kRecordWords);
    }
  } else {
    self->Arm(c, &batch);
  }
  if (!self->detached_ && !batch.empty()) self->deliver_(self->ctx_, &batch);
}

void WinLoop::RemoveCq(CqState* s) {
  for (WinLoopCq* c : cqs_) {
    if (c->s != s || c->closing) continue;
    c->closing = true;
    if (c->armed) c->s->cq->CancelOverlappedRequests();  // its packet comes back ND_CANCELED; uv_close waits for it
    g_uv.close(c->h, &WinLoop::OnClosed);
    return;
  }
}

// The handle is closed (its Notify, if any, has come back): what is left in the CQ goes to JS, requests counted
// on it that will never complete stop holding the process, and the memory goes.
void WinLoop::OnClosed(void* handle) {
  auto* h = static_cast<UvAsync*>(handle);
  auto* c = static_cast<WinLoopCq*>(h->data);
  WinLoop* self = c->owner;
  self->cqs_.erase(c);
  Batch batch;
  if (!c->failed) Drain(c->s, &batch);
  const int64_t left = c->s->outstanding.exchange(0);
  if (left > 0) batch.counted += static_cast<uint32_t>(left);
  c->s->Unref();
  std::free(h);
  delete c;
  if (!self->detached_ && !batch.empty()) self->deliver_(self->ctx_, &batch);
  self->MaybeFinish();
}

void WinLoop::Detach() {
  detached_ = true;
  for (WinLoopCq* c : cqs_) {
    if (c->closing) continue;
    c->closing = true;
    if (c->armed) c->s->cq->CancelOverlappedRequests();
    g_uv.close(c->h, &WinLoop::OnClosed);
  }
  MaybeFinish();
}

// Env teardown (a worker terminated, or the process ending): Node runs the loop until this hook is removed. A
// closing handle whose Notify packet has not come back keeps nothing alive by itself (libuv counts closing
// handles as inactive, and uv_run returns at once from a loop with nothing alive), so a referenced handle of our
// own keeps the loop polling until the last packet has arrived.
void WinLoop::OnEnvCleanup(napi_async_cleanup_hook_handle /*handle*/, void* arg) {
  auto* self = static_cast<WinLoop*>(arg);
  self->hookRunning_ = true;
  if (!self->cqs_.empty()) {
    auto* keeper = static_cast<UvAsync*>(std::calloc(1, sizeof(UvAsync)));
    if (keeper != nullptr && g_uv.async_init(self->loop_, keeper, nullptr) == 0) {
      self->keeper_ = keeper;
    } else {
      std::free(keeper);
    }
  }
  self->MaybeFinish();
}

void WinLoop::MaybeFinish() {
  if (!detached_ || !cqs_.empty()) return;
  if (keeper_ != nullptr) g_uv.close(keeper_, &FreeHandle);
  keeper_ = nullptr;
  napi_remove_async_cleanup_hook(hook_);  // before the hook ran: it never will; inside or after it: it is done
  delete this;
}

}  // namespace netdirect

#endif  // _WIN32

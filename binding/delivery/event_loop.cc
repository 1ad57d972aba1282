#include "delivery/event_loop.h"

#include <cstdlib>
#include <thread>

namespace netdirect {

#ifdef NETDIRECT_HAVE_UV

namespace {

void FreeHandle(uv_handle_t* h) { std::free(h); }

template <typename T>
T* NewHandle(uv_handle_type type) {
  return static_cast<T*>(std::calloc(1, uv_handle_size(type)));
}

}  // namespace

bool LoopWatch::Supported() { return true; }

bool LoopWatch::Start(napi_env env, const int* fds, int count, ReadyFn onReady, void* ctx, const char** why) {
  uv_loop_t* loop = nullptr;
  if (napi_get_uv_event_loop(env, reinterpret_cast<struct uv_loop_s**>(&loop)) != napi_ok || loop == nullptr) {
    *why = "napi_get_uv_event_loop failed";
    return false;
  }
  onReady_ = onReady;
  ctx_ = ctx;
  loop_ = loop;
  for (int i = 0; i < count; ++i) {
    if (fds[i] >= 0 && !AddFd(fds[i], why)) return false;
  }
  timer_ = NewHandle<uv_timer_t>(UV_TIMER);
  if (timer_ == nullptr || uv_timer_init(loop, timer_) != 0) {
    std::free(timer_);
    timer_ = nullptr;
    *why = "uv_timer_init failed";
    Stop();
    return false;
  }
  uv_handle_set_data(reinterpret_cast<uv_handle_t*>(timer_), this);
  uv_unref(reinterpret_cast<uv_handle_t*>(timer_));  // a provider deadline alone never keeps the process alive
  idle_ = NewHandle<uv_idle_t>(UV_IDLE);
  if (idle_ == nullptr || uv_idle_init(loop, idle_) != 0) {
    std::free(idle_);
    idle_ = nullptr;
    *why = "uv_idle_init failed";
    Stop();
    return false;
  }
  uv_handle_set_data(reinterpret_cast<uv_handle_t*>(idle_), this);
  uv_unref(reinterpret_cast<uv_handle_t*>(idle_));
  return true;
}

bool LoopWatch::AddFd(int fd, const char** why) {
  if (npolls_ >= kMaxFds || loop_ == nullptr) {
    *why = "too many provider descriptors";
    Stop();
    return false;
  }
  uv_poll_t* p = NewPoll(fd, this);
  if (p == nullptr) {
    *why = "uv_poll_init failed on a provider descriptor";
    Stop();
    return false;
  }
  polls_[npolls_++] = p;
  if (uv_poll_start(p, UV_READABLE, &LoopWatch::OnPoll) != 0) {
    *why = "uv_poll_start failed on a provider descriptor";
    Stop();
    return false;
  }
  return true;
}

// A poll handle on fd, its data `data`, referencing the loop only while SetRef(true) says so; nullptr if libuv refuses.
uv_poll_t* LoopWatch::NewPoll(int fd, void* data) {
  uv_poll_t* p = NewHandle<uv_poll_t>(UV_POLL);
  if (p == nullptr || uv_poll_init(loop_, p, fd) != 0) {
    std::free(p);
    return nullptr;
  }
  uv_handle_set_data(reinterpret_cast<uv_handle_t*>(p), data);
  if (!ref_) uv_unref(reinterpret_cast<uv_handle_t*>(p));
  return p;
}

bool LoopWatch::WatchSocket(int fd, void* token, uint32_t events) {
  if (loop_ == nullptr || fd < 0) return false;
  SocketWatch* w;
  auto it = sockets_.find(fd);
  if (it != sockets_.end()) {
    w = it->second;
  } else {
    w = new SocketWatch{this, nullptr, nullptr, 0};
    w->poll = NewPoll(fd, w);
    if (w->poll == nullptr) {
      delete w;
      return false;
    }
    sockets_.emplace(fd, w);
  }
  w->token = token;
  // The peer's end (EPOLLRDHUP) with every read interest, as the provider's own set asks for it.
  const int uvEvents = ((events & kRead) ? UV_READABLE | UV_DISCONNECT : 0) | ((events & kWrite) ? UV_WRITABLE : 0);
  if (uvEvents == 0) {
    if (w->events != 0) uv_poll_stop(w->poll);
    w->events = 0;
    return true;
  }
  if (uv_poll_start(w->poll, uvEvents, &LoopWatch::OnSocket) != 0) {
    w->events = 0;
    return false;
  }
  w->events = events;
  return true;
}

void LoopWatch::UnwatchSocket(int fd) {
  auto it = sockets_.find(fd);
  if (it == sockets_.end()) return;
  SocketWatch* w = it->second;
  sockets_.erase(it);
  uv_poll_stop(w->poll);
  uv_close(reinterpret_cast<uv_handle_t*>(w->poll), &FreeHandle);
  delete w;
}

void LoopWatch::UnwatchSockets() {
  while (!sockets_.empty()) UnwatchSocket(sockets_.begin()->first);
}

void LoopWatch::OnSocket(uv_poll_t* handle, int status, int events) {
  auto* w = static_cast<SocketWatch*>(uv_handle_get_data(reinterpret_cast<uv_handle_t*>(handle)));
  LoopWatch* self = w->owner;
  uint32_t ready = 0;
  if (status < 0) {
    ready = kRead | kHangup;  // the descriptor failed: the provider's read finds out why
  } else {
    if (events & UV_READABLE) ready |= kRead;
    if (events & UV_WRITABLE) ready |= kWrite;
    if (events & UV_DISCONNECT) ready |= kRead | kHangup;
  }
  if (self->onSocket_ != nullptr && ready != 0) self->onSocket_(self->ctx_, w->token, ready);
}

void LoopWatch::SetSpin(bool on) {
  if (on == spin_ || idle_ == nullptr) return;
  spin_ = on;
  on ? uv_idle_start(idle_, &LoopWatch::OnIdle) : uv_idle_stop(idle_);
}

void LoopWatch::SetRef(bool ref) {
  if (ref == ref_) return;
  ref_ = ref;
  for (int i = 0; i < npolls_; ++i) {
    auto* h = reinterpret_cast<uv_handle_t*>(polls_[i]);
    ref ? uv_ref(h) : uv_unref(h);
  }
  for (auto& [fd, w] : sockets_) {
    auto* h = reinterpret_cast<uv_handle_t*>(w->poll);
    ref ? uv_ref(h) : uv_unref(h);
  }
}

void LoopWatch::SetTimeout(int ms) {
  if (timer_ == nullptr) return;
  if (ms < 0) {
    if (timeout_ >= 0) uv_timer_stop(timer_);
    timeout_ = -1;
    return;
  }
  // A deadline further out than the one armed is re-armed too: the armed one would only wake the loop early.
  if (timeout_ == ms && ms != 0) return;
  timeout_ = ms;
  uv_timer_start(timer_, &LoopWatch::OnTimer, static_cast<uint64_t>(ms), 0);
}

void LoopWatch::Stop() {
  UnwatchSockets();
  for (int i = 0; i < npolls_; ++i) {
    uv_poll_stop(polls_[i]);
    uv_close(reinterpret_cast<uv_handle_t*>(polls_[i]), &FreeHandle);
    polls_[i] = nullptr;
  }
  npolls_ = 0;
  if (timer_ != nullptr) {
    uv_timer_stop(timer_);
    uv_close(reinterpret_cast<uv_handle_t*>(timer_), &FreeHandle);
    timer_ = nullptr;
  }
  if (idle_ != nullptr) {
    uv_idle_stop(idle_);
    uv_close(reinterpret_cast<uv_handle_t*>(idle_), &FreeHandle);
    idle_ = nullptr;
  }
  spin_ = false;
  onReady_ = nullptr;
}

void LoopWatch::OnPoll(uv_poll_t* handle, int /*status*/, int /*events*/) {
  // status < 0 (EBADF and the like) also runs progress: the provider reports what broke.
  auto* self = static_cast<LoopWatch*>(uv_handle_get_data(reinterpret_cast<uv_handle_t*>(handle)));
  if (self->onReady_ != nullptr) self->onReady_(self->ctx_);
}

void LoopWatch::OnTimer(uv_timer_t* handle) {
  auto* self = static_cast<LoopWatch*>(uv_handle_get_data(reinterpret_cast<uv_handle_t*>(handle)));
  self->timeout_ = -1;
  if (self->onReady_ != nullptr) self->onReady_(self->ctx_);
}

void LoopWatch::YieldCpu() { std::this_thread::yield(); }

void LoopWatch::OnIdle(uv_idle_t* handle) {
  auto* self = static_cast<LoopWatch*>(uv_handle_get_data(reinterpret_cast<uv_handle_t*>(handle)));
  if (self->onReady_ != nullptr) self->onReady_(self->ctx_);
}

#else  // no libuv reachable (Windows import library)

bool LoopWatch::Supported() { return false; }
bool LoopWatch::Start(napi_env, const int*, int, ReadyFn, void*, const char** why) {
  *why = "libuv is not reachable from this build of the addon";
  return false;
}
void LoopWatch::SetRef(bool) {}
bool LoopWatch::AddFd(int, const char** why) {
  *why = "libuv is not reachable from this build of the addon";
  return false;
}
bool LoopWatch::WatchSocket(int, void*, uint32_t) { return false; }
void LoopWatch::UnwatchSocket(int) {}
void LoopWatch::UnwatchSockets() {}
void LoopWatch::SetTimeout(int) {}
void LoopWatch::SetSpin(bool) {}
void LoopWatch::YieldCpu() { std::this_thread::yield(); }
void LoopWatch::Stop() {}

#endif

}  // namespace netdirect

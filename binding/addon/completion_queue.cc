#include "addon/completion_queue.h"

#include <algorithm>

namespace netdirect {

Napi::Function CompletionQueue::Define(Napi::Env env) {
  return DefineClass(env, "CompletionQueue",
                     {
                         TaggedAccessor<CompletionQueue, &CompletionQueue::GetDepth>("depth"),
                         InstanceMethod<&CompletionQueue::Poll>("poll"),
                         InstanceMethod<&CompletionQueue::PollInto>("pollInto"),
                         InstanceMethod<&CompletionQueue::Records>("records"),
                         InstanceMethod<&CompletionQueue::Resize>("resize"),
                         InstanceMethod<&CompletionQueue::Close>("close"),
                     });
}

CompletionQueue::CompletionQueue(const Napi::CallbackInfo& info)
    : Child(kChildCompletionQueue), Napi::ObjectWrap<CompletionQueue>(info) {
  auto* init = static_cast<Init*>(TakeInit(info, kChildCompletionQueue, kClassName));
  cq_ = std::move(init->cq);
  depth_ = init->depth;
  state_ = new CqState(cq_.get());
  state_->id = init->id;
  state_->shared.store(!init->adapter->manual());  // the poller takes its results (CqState::shared)
  Napi::Object self = info.This().As<Napi::Object>();
  TagObject(self, kTag);
  BindHotMethod<&CompletionQueue::PollBound>(info.Env(), self, "poll", this);
#ifdef _WIN32
  if (init->adapter->winLoop() != nullptr) {
    // Windows event-loop mode: armed on libuv's port (delivery/loop_win.h).
    if (!init->adapter->winLoop()->AddCq(state_))
      ThrowNdError(info.Env(), "ND_INSUFFICIENT_RESOURCES", ND_INSUFFICIENT_RESOURCES, "createCompletionQueue",
                   "uv_async_init failed for the CQ's event-loop handle");
    Attach(init);
    return;
  }
#endif
  Attach(init);
  adapter_->poller()->AddCq(state_);  // manual mode: watched for errors only (poller.h)
}

Napi::Value CompletionQueue::PollBound(const Napi::CallbackInfo& info) {
  return static_cast<CompletionQueue*>(info.Data())->Poll(info);
}

CompletionQueue::~CompletionQueue() {
  if (state_ != nullptr) state_->Unref();
}

void CompletionQueue::ReleaseNd(bool /*teardown*/) {
  state_->closed.store(true);
#ifdef _WIN32
  if (adapter_->winLoop() != nullptr) {
    adapter_->winLoop()->RemoveCq(state_);  // cancels its Notify; the handle closes when the packet is back
  } else
#endif
  adapter_->poller()->RemoveCq(state_);  // the poller cancels its Notify, drains once more (not in manual mode), lets go
  state_->Unref();
  state_ = nullptr;
  cq_.reset();
  records_.Reset();
  recordsData_ = nullptr;
  recordsCap_ = 0;
}

Napi::Value CompletionQueue::GetDepth(const Napi::CallbackInfo& info) {
  if (!HasTag(info.This(), kTag))
    ThrowMisuse(info.Env(), "ERR_ND_FOREIGN_OBJECT", "depth", "receiver is not a netdirect CompletionQueue object");
  return Napi::Number::New(info.Env(), depth_);
}

// Dequeues up to max results into pollBatch_, the onBatch record layout.
void CompletionQueue::Gather(uint32_t max, bool keepPolling) {
  constexpr ULONG kChunk = 64;
  ND2_RESULT results[kChunk];
  Batch& batch = pollBatch_;
  batch.words.clear();
  batch.counted = 0;
  uint32_t got = 0;
  std::vector<ND2_RESULT>& back = state_->handedBack;
  if (!back.empty()) {  // results taken by native code on this thread (CqState::HandBack) come first
    const size_t n = std::min<size_t>(back.size(), max);
    for (size_t i = 0; i < n; ++i) Poller::AppendResult(back[i], &batch, state_);
    back.erase(back.begin(), back.begin() + n);
    got = static_cast<uint32_t>(n);
  }
  // Manual mode: this thread polls in a loop; a provider that can use that (INDPollingHint, optional) may
  // progress its connections on it instead of waking a thread of its own per message.
  INDPollingHint* hint = adapter_->manual() ? state_->hint : nullptr;
  if (hint != nullptr) hint->SetPollingThread(TRUE);
  {
    // What the poller took off the CQ and has not delivered yet comes first, and the poller takes nothing
    // between that and this thread's GetResults (CqState::mu): the records reach lib/ in the CQ's order. A
    // later result overtaking an earlier one would retire a silent request that failed as a success
    // (lib/queue-pair.ts _retireSilent) and lose its failure.
    std::unique_lock<std::mutex> lock(state_->mu, std::defer_lock);
    if (state_->shared.load(std::memory_order_acquire)) lock.lock();  // CqState::shared: not in a manual-mode loop
    std::vector<ND2_RESULT>& taken = state_->taken;
    if (lock.owns_lock() && !taken.empty() && got < max) {
      const size_t n = std::min<size_t>(taken.size(), max - got);
      for (size_t i = 0; i < n; ++i) Poller::AppendResult(taken[i], &batch, nullptr);  // counted down when taken
      taken.erase(taken.begin(), taken.begin() + static_cast<std::ptrdiff_t>(n));
      got += static_cast<uint32_t>(n);
    }
    while (got < max) {
      const ULONG want = std::min<ULONG>(kChunk, max - got);
      const ULONG n = cq_->GetResults(results, want);
      for (ULONG i = 0; i < n; ++i) Poller::AppendResult(results[i], &batch, state_);
      got += n;
      if (n < want) break;
    }
  }
  // pollInto()'s loops poll continuously: the thread stays marked as the polling thread between its calls (the
  // built-in provider takes reading back itself once polls stop: its inline lease, binding/soft/qp/qp.cc
  // kInlineLeaseMs). poll() ends each call; the built-in provider hands its connections back to the engine thread
  // then only for a CQ armed for completions (binding/soft/completion_queue.cc SetPollingThread), not for manual
  // mode's errors-only arming, which made every poll cost two epoll_ctl calls and an engine wake-up.
  if (hint != nullptr && !keepPolling) hint->SetPollingThread(FALSE);
  if (got == 0 && max > 0 && adapter_->loopMode()) {
    // Event-loop mode and nothing here: a loop spinning on poll() drives the provider itself (the event loop
    // cannot while this thread spins), then looks once more.
    adapter_->ProgressInline();
    std::lock_guard<std::mutex> lock(state_->mu);
    const ULONG n = cq_->GetResults(results, std::min<ULONG>(kChunk, max));
    for (ULONG i = 0; i < n; ++i) Poller::AppendResult(results[i], &batch, state_);
  }
  adapter_->SubPending(batch.counted);
}

// The Uint32Array behind `info[index]` (data and length in elements), or ERR_ND_INVALID_ARGUMENT.
static uint32_t* RecordsArg(const Napi::CallbackInfo& info, size_t index, const char* op, size_t* length) {
  Napi::Env env = info.Env();
  bool isTyped = false;
  napi_is_typedarray(env, info[index], &isTyped);
  napi_typedarray_type type = napi_int8_array;
  void* data = nullptr;
  *length = 0;
  if (isTyped) napi_get_typedarray_info(env, info[index], &type, length, &data, nullptr, nullptr);
  if (!isTyped || type != napi_uint32_array || (data == nullptr && *length != 0))
    ThrowMisuse(env, "ERR_ND_INVALID_ARGUMENT", op, "records must be a Uint32Array");
  return static_cast<uint32_t*>(data);
}

// records(array): the Uint32Array poll() writes its records into from now on. Its data pointer is read here once,
// not per poll: fetching it moves a small on-heap array's bytes off the V8 heap for good, so it stays valid while
// records_ holds the array; lib/completion-queue.ts marks its buffer untransferable (never detached).
Napi::Value CompletionQueue::Records(const Napi::CallbackInfo& info) {
  const char* op = "poll";
  CheckThis(info, this, op);
  size_t length = 0;
  uint32_t* data = RecordsArg(info, 0, op, &length);
  records_ = Napi::Persistent(info[0].As<Napi::Uint32Array>());
  recordsData_ = data;
  recordsCap_ = static_cast<uint32_t>(std::min<size_t>(length / kRecordWords, UINT32_MAX));
  return info.Env().Undefined();
}

// poll(max) -> records written into the records() array (lib/native.ts), at most max and what it holds:
// GetResults on the JS thread, the onBatch record layout, nothing allocated per call.
Napi::Value CompletionQueue::Poll(const Napi::CallbackInfo& info) {
  CheckThis(info, this, "poll");
  Napi::Env env = info.Env();
  if (recordsData_ == nullptr) ThrowMisuse(env, "ERR_ND_INVALID_ARGUMENT", "poll", "no records array: call records() first");
  Gather(std::min(ArgU32(info, 0), recordsCap_));
  std::vector<uint32_t>& words = pollBatch_.words;
  // Gather takes at most max results, one record each; never write past the array whatever a provider returns.
  const uint32_t n = static_cast<uint32_t>(std::min<size_t>(words.size() / kRecordWords, recordsCap_));
  std::copy(words.begin(), words.begin() + static_cast<std::ptrdiff_t>(n) * kRecordWords, recordsData_);
  if (words.capacity() > 4096 * kRecordWords) words = std::vector<uint32_t>();  // a huge poll(max)
  return Napi::Number::New(env, n);
}

// pollInto(records, max) -> records written (lib/native.ts): at most max and what the array holds.
Napi::Value CompletionQueue::PollInto(const Napi::CallbackInfo& info) {
  const char* op = "poll";
  CheckThis(info, this, op);
  Napi::Env env = info.Env();
  size_t length = 0;
  uint32_t* data = RecordsArg(info, 0, op, &length);
  const uint32_t max = std::min<uint32_t>(ArgU32(info, 1), static_cast<uint32_t>(std::min<size_t>(length / kRecordWords, UINT32_MAX)));
  if (max == 0) return Napi::Number::New(env, 0);
  Gather(max, true);
  const std::vector<uint32_t>& words = pollBatch_.words;
  std::copy(words.begin(), words.end(), data);
  return Napi::Number::New(env, static_cast<double>(words.size() / kRecordWords));
}

Napi::Value CompletionQueue::Resize(const Napi::CallbackInfo& info) {
  CheckThis(info, this, "resize");
  const uint32_t depth = ArgU32(info, 0);
  HRESULT hr = cq_->Resize(depth);
  if (FAILED(hr)) ThrowNdStatus(info.Env(), hr, "resize");
  depth_ = depth;
  return info.Env().Undefined();
}

Napi::Value CompletionQueue::Close(const Napi::CallbackInfo& info) {
  if (!HasTag(info.This(), kTag))
    ThrowMisuse(info.Env(), "ERR_ND_FOREIGN_OBJECT", "close", "receiver is not a netdirect CompletionQueue object");
  CloseNow(false);
  return info.Env().Undefined();
}

}  // namespace netdirect

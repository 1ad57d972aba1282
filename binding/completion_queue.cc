#include "completion_queue.h"

#include <algorithm>

namespace netdirect {

Napi::Function CompletionQueue::Define(Napi::Env env) {
  return DefineClass(env, "CompletionQueue",
                     {
                         InstanceAccessor<&CompletionQueue::GetDepth>("depth"),
                         InstanceMethod<&CompletionQueue::Poll>("poll"),
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
  TagObject(info.This().As<Napi::Object>(), kTag);
  Attach(init);
  if (adapter_->poller()->armsCqs()) adapter_->poller()->AddCq(state_);
}

CompletionQueue::~CompletionQueue() {
  if (state_ != nullptr) state_->Unref();
}

void CompletionQueue::ReleaseNd(bool /*teardown*/) {
  state_->closed.store(true);
  if (adapter_->poller()->armsCqs()) {
    adapter_->poller()->RemoveCq(state_);  // the poller cancels its Notify, drains once more, lets go
  } else {
    cq_->CancelOverlappedRequests();
    // Manual mode: requests counted on this CQ never complete through it now.
  }
  state_->Unref();
  state_ = nullptr;
  cq_.reset();
}

Napi::Value CompletionQueue::GetDepth(const Napi::CallbackInfo& info) {
  if (!HasTag(info.This(), kTag))
    ThrowMisuse(info.Env(), "ERR_ND_FOREIGN_OBJECT", "depth", "receiver is not a netdirect CompletionQueue object");
  return Napi::Number::New(info.Env(), depth_);
}

// poll(max): GetResults on the JS thread; the records have the onBatch layout.
Napi::Value CompletionQueue::Poll(const Napi::CallbackInfo& info) {
  CheckThis(info, this, "poll");
  Napi::Env env = info.Env();
  uint32_t max = ArgU32(info, 0);
  constexpr ULONG kChunk = 64;
  ND2_RESULT results[kChunk];
  Batch batch;
  batch.words.reserve(static_cast<size_t>(std::min<uint32_t>(max, kChunk)) * kRecordWords);
  uint32_t got = 0;
  while (got < max) {
    const ULONG want = std::min<ULONG>(kChunk, max - got);
    const ULONG n = cq_->GetResults(results, want);
    for (ULONG i = 0; i < n; ++i) Poller::AppendResult(results[i], &batch, state_);
    got += n;
    if (n < want) break;
  }
  adapter_->SubPending(batch.counted);
  Napi::Uint32Array records = Napi::Uint32Array::New(env, batch.words.size());
  if (!batch.words.empty())
    std::copy(batch.words.begin(), batch.words.end(), records.Data());
  return records;
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

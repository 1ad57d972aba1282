#include "addon/shared_receive_queue.h"

namespace netdirect {

Napi::Function SharedReceiveQueue::Define(Napi::Env env) {
  return DefineClass(env, "SharedReceiveQueue",
                     {
                         InstanceMethod<&SharedReceiveQueue::Receive>("receive"),
                         InstanceMethod<&SharedReceiveQueue::Close>("close"),
                     });
}

SharedReceiveQueue::SharedReceiveQueue(const Napi::CallbackInfo& info)
    : Child(kChildSharedReceiveQueue), Napi::ObjectWrap<SharedReceiveQueue>(info) {
  auto* init = static_cast<Init*>(TakeInit(info, kChildSharedReceiveQueue, kClassName));
  srq_ = std::move(init->srq);
  TagObject(info.This().As<Napi::Object>(), kTag);
  Attach(init);
}

void SharedReceiveQueue::ReleaseNd(bool /*teardown*/) {
  srq_->CancelOverlappedRequests();
  srq_.reset();
}

// receive(id, nSge). The completion lands on the receive CQ of whichever QP consumes it, so it is counted
// against the adapter only (not a CQ's `outstanding`).
Napi::Value SharedReceiveQueue::Receive(const Napi::CallbackInfo& info) {
  const char* op = "receive";
  CheckThis(info, this, op);
  Napi::Env env = info.Env();
  const uint32_t id = ArgU32(info, 0);
  const uint32_t nSge = ArgU32(info, 1);
  ND2_SGE sge[Adapter::kMaxSge];
  adapter_->BuildSges(env, nSge, sge, op);
  const bool counted = !adapter_->manual();
  uint64_t ctx = id;
  if (counted) {
    ctx |= kContextCounted;
    adapter_->AddPending();
  }
  HRESULT hr = srq_->Receive(reinterpret_cast<void*>(static_cast<uintptr_t>(ctx)), sge, nSge);
  if (FAILED(hr)) {
    if (counted) adapter_->SubPending(1);
    ThrowNdStatus(env, hr, op);
  }
  return env.Undefined();
}

Napi::Value SharedReceiveQueue::Close(const Napi::CallbackInfo& info) {
  if (!HasTag(info.This(), kTag))
    ThrowMisuse(info.Env(), "ERR_ND_FOREIGN_OBJECT", "close",
                "receiver is not a netdirect SharedReceiveQueue object");
  CloseNow(false);
  return info.Env().Undefined();
}

}  // namespace netdirect

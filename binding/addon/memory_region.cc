#include "addon/memory_region.h"

namespace netdirect {

Napi::Function MemoryRegion::Define(Napi::Env env) {
  return DefineClass(env, "MemoryRegion",
                     {
                         InstanceMethod<&MemoryRegion::Registration>("registration"),
                         InstanceMethod<&MemoryRegion::Register>("register"),
                         InstanceMethod<&MemoryRegion::Deregister>("deregister"),
                         InstanceMethod<&MemoryRegion::Reset>("reset"),
                         InstanceMethod<&MemoryRegion::Close>("close"),
                     });
}

MemoryRegion::MemoryRegion(const Napi::CallbackInfo& info)
    : Child(kChildMemoryRegion), Napi::ObjectWrap<MemoryRegion>(info) {
  auto* init = static_cast<Init*>(TakeInit(info, kChildMemoryRegion, kClassName));
  mr_ = std::move(init->mr);
  TagObject(info.This().As<Napi::Object>(), kTag);
  Attach(init);
  id_ = adapter_->AllocRegion(mr_.get());
}

// registration() -> [id, localToken, remoteToken, address]: what lib/ needs once a registration completed, in
// one call (four accessor calls cost about as much as creating the region).
Napi::Value MemoryRegion::Registration(const Napi::CallbackInfo& info) {
  CheckThis(info, this, "registration");
  Napi::Env env = info.Env();
  Napi::Array out = Napi::Array::New(env, 4);
  out.Set(uint32_t{0}, Napi::Number::New(env, id_));
  out.Set(uint32_t{1}, Napi::Number::New(env, mr_->GetLocalToken()));
  out.Set(uint32_t{2}, Napi::Number::New(env, mr_->GetRemoteToken()));
  out.Set(uint32_t{3}, Napi::BigInt::New(env, static_cast<uint64_t>(reinterpret_cast<uintptr_t>(base_))));
  return out;
}

// register(id, buffer, byteOffset, byteLength, flags) -> ND_SUCCESS | ND_PENDING
Napi::Value MemoryRegion::Register(const Napi::CallbackInfo& info) {
  const char* op = "registerMemory";
  CheckThis(info, this, op);
  Napi::Env env = info.Env();
  const uint32_t requestId = ArgU32(info, 0);
  if (!info[1].IsArrayBuffer()) ThrowMisuse(env, "ERR_ND_INVALID_ARGUMENT", op, "buffer must be an ArrayBuffer");
  Napi::ArrayBuffer ab = info[1].As<Napi::ArrayBuffer>();
  const double offset = ArgDouble(info, 2), length = ArgDouble(info, 3);
  const uint32_t flags = ArgU32(info, 4);
  bool detached = false;
  napi_is_detached_arraybuffer(env, ab, &detached);
  if (detached) ThrowMisuse(env, "ERR_ND_DETACHED", op, "the ArrayBuffer is detached");
  const size_t size = ab.ByteLength();
  if (!(offset >= 0 && length >= 0 && offset + length <= static_cast<double>(size)))
    ThrowMisuse(env, "ERR_ND_OUT_OF_RANGE", op,
                "range [" + Num(offset) + ", +" + Num(length) + ") is outside the " +
                    std::to_string(size) + "-byte ArrayBuffer");
  RegionSlot* slot = adapter_->Region(id_);
  if (slot->state != kRegionIdle)
    ThrowMisuse(env, "ERR_ND_BUSY", op, "the memory region is already registered or being (de)registered");

  uint8_t* base = static_cast<uint8_t*>(ab.Data()) + static_cast<size_t>(offset);
  auto* r = new OvRecord(mr_.get(), requestId, kKindRegister, true);
  r->mrId = id_;
  return Napi::Number::New(env, adapter_->IssueOverlapped(env, r, op, [&](OVERLAPPED* ov) {
    HRESULT hr = mr_->Register(base, static_cast<SIZE_T>(length), flags, ov);
    if (hr == ND_SUCCESS || hr == ND_PENDING) {
      // Keep the memory alive while the provider may touch it: from now until close().
      buffer_ = Napi::Persistent(ab);
      base_ = base;
      slot->base = base;
      slot->length = static_cast<uint64_t>(length);
      slot->state = hr == ND_SUCCESS ? kRegionRegistered : kRegionRegistering;
    }
    return hr;
  }));
}

// deregister(id) -> ND_SUCCESS | ND_PENDING
Napi::Value MemoryRegion::Deregister(const Napi::CallbackInfo& info) {
  const char* op = "deregisterMemory";
  CheckThis(info, this, op);
  Napi::Env env = info.Env();
  const uint32_t requestId = ArgU32(info, 0);
  RegionSlot* slot = adapter_->Region(id_);
  if (slot->state != kRegionRegistered)
    ThrowMisuse(env, "ERR_ND_BUSY", op, "the memory region is not registered (or a request on it is in flight)");
  auto* r = new OvRecord(mr_.get(), requestId, kKindDeregister, true);
  r->mrId = id_;
  return Napi::Number::New(env, adapter_->IssueOverlapped(env, r, op, [&](OVERLAPPED* ov) {
    HRESULT hr = mr_->Deregister(ov);
    if (hr == ND_SUCCESS) slot->state = kRegionIdle;
    if (hr == ND_PENDING) slot->state = kRegionDeregistering;
    return hr;
  }));
}

// reset(): drops the ArrayBuffer of a registration whose deregistration completed, so that lib/ can keep the
// region for a later registerMemory (ND lets an MR object register again; creating one costs more than the
// registration itself) without keeping that memory alive.
Napi::Value MemoryRegion::Reset(const Napi::CallbackInfo& info) {
  CheckThis(info, this, "reset");
  RegionSlot* slot = adapter_->Region(id_);
  if (slot->state != kRegionIdle)
    ThrowMisuse(info.Env(), "ERR_ND_BUSY", "reset", "the memory region is registered or being (de)registered");
  buffer_.Reset();
  base_ = nullptr;
  slot->base = nullptr;
  slot->length = 0;
  return info.Env().Undefined();
}

void MemoryRegion::CancelAll() { mr_->CancelOverlappedRequests(); }

void MemoryRegion::DeregisterAndWait() {
  HANDLE ev = CreateEventW(nullptr, TRUE, FALSE, nullptr);
  if (ev == nullptr) return;
  // Heap, and abandoned if the wait times out: the provider may still write it.
  auto* ov = new OVERLAPPED();
  // Low bit set: signal the event only, no port packet (the Win32 rule ND consumers use for sync waits).
  ov->hEvent = reinterpret_cast<HANDLE>(reinterpret_cast<uintptr_t>(ev) | 1);
  HRESULT hr = mr_->Deregister(ov);
  // ND_PENDING again after the event: the provider started a next phase of the request (ND SDK
  // docs/IND2Overlapped.md, GetOverlappedResult), which signals the event once more; ov stays in use until then.
  for (int phase = 0; hr == ND_PENDING; ++phase) {
    if (phase == 8 || WaitForSingleObject(ev, 5000) != WAIT_OBJECT_0) return;  // leak ov and ev rather than risk a write
    hr = mr_->GetOverlappedResult(ov, FALSE);
  }
  delete ov;
  CloseHandle(ev);
}

void MemoryRegion::ReleaseNd(bool teardown) {
  RegionSlot* slot = adapter_->Region(id_);
  const RegionState state = slot != nullptr ? slot->state : kRegionIdle;
  if (state == kRegionRegistered) {
    DeregisterAndWait();
  } else if (state != kRegionIdle) {
    // A (de)registration is in flight (teardown only; close() refuses): it was cancelled and the poller
    // waits for it, so the buffer must outlive the poller.
    mr_->CancelOverlappedRequests();
    if (!buffer_.IsEmpty()) adapter_->DeferUntilStopped(std::move(buffer_));
  }
  (void)teardown;
  adapter_->FreeRegion(id_);
  mr_.reset();
  buffer_.Reset();
  base_ = nullptr;
}

Napi::Value MemoryRegion::Close(const Napi::CallbackInfo& info) {
  if (!HasTag(info.This(), kTag))
    ThrowMisuse(info.Env(), "ERR_ND_FOREIGN_OBJECT", "close", "receiver is not a netdirect MemoryRegion object");
  if (closed()) return info.Env().Undefined();
  RegionSlot* slot = adapter_->Region(id_);
  if (slot != nullptr && slot->state != kRegionIdle)
    ThrowMisuse(info.Env(), "ERR_ND_BUSY", "close",
                "the memory region is still registered: deregister it and wait for completion first");
  CloseNow(false);
  return info.Env().Undefined();
}

}  // namespace netdirect

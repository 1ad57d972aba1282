// MemoryRegion: wraps IND2MemoryRegion. Registers a range of a JS ArrayBuffer's backing store and keeps the
// ArrayBuffer strongly referenced until close() or, once deregistered, reset(); its id names it in SGE triples.
#ifndef NETDIRECT_MEMORY_REGION_H_
#define NETDIRECT_MEMORY_REGION_H_

#include "addon/adapter.h"

namespace netdirect {

class MemoryRegion : public Child, public Napi::ObjectWrap<MemoryRegion> {
 public:
  static constexpr napi_type_tag kTag = tags::kMemoryRegion;
  static constexpr const char* kClassName = "MemoryRegion";

  struct Init : ChildInit {
    NdPtr<IND2MemoryRegion> mr;
  };

  static Napi::Function Define(Napi::Env env);
  explicit MemoryRegion(const Napi::CallbackInfo& info);

  IND2MemoryRegion* nd() const { return mr_.get(); }
  uint32_t id() const { return id_; }

 private:
  Napi::Value Registration(const Napi::CallbackInfo& info);
  Napi::Value Register(const Napi::CallbackInfo& info);
  Napi::Value Deregister(const Napi::CallbackInfo& info);
  Napi::Value Reset(const Napi::CallbackInfo& info);
  Napi::Value Close(const Napi::CallbackInfo& info);

  void CancelAll() override;
  void ReleaseNd(bool teardown) override;
  void KeepAlive(bool on) override { on ? Ref() : Unref(); }
  // Teardown only: Deregister and wait for it (an event, not the port), so release is safe.
  void DeregisterAndWait();

  NdPtr<IND2MemoryRegion> mr_;
  uint32_t id_ = 0;
  uint8_t* base_ = nullptr;  // registered range (for `address`)
  Napi::Reference<Napi::ArrayBuffer> buffer_;
};

}  // namespace netdirect

#endif  // NETDIRECT_MEMORY_REGION_H_

// MemoryWindow: wraps IND2MemoryWindow (bound and invalidated through QueuePair.bind/invalidate).
#ifndef NETDIRECT_MEMORY_WINDOW_H_
#define NETDIRECT_MEMORY_WINDOW_H_

#include "addon/adapter.h"

namespace netdirect {

class MemoryWindow : public Child, public Napi::ObjectWrap<MemoryWindow> {
 public:
  static constexpr napi_type_tag kTag = tags::kMemoryWindow;
  static constexpr const char* kClassName = "MemoryWindow";

  struct Init : ChildInit {
    NdPtr<IND2MemoryWindow> mw;
  };

  static Napi::Function Define(Napi::Env env);
  explicit MemoryWindow(const Napi::CallbackInfo& info);

  IND2MemoryWindow* nd() const { return mw_.get(); }

 private:
  Napi::Value GetRemoteToken(const Napi::CallbackInfo& info);
  Napi::Value Close(const Napi::CallbackInfo& info);

  void ReleaseNd(bool /*teardown*/) override { mw_.reset(); }
  void KeepAlive(bool on) override { on ? Ref() : Unref(); }

  NdPtr<IND2MemoryWindow> mw_;
};

}  // namespace netdirect

#endif  // NETDIRECT_MEMORY_WINDOW_H_

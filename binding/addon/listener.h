// Listener: wraps IND2Listener (bind, listen, getConnectionRequest into a fresh connector).
#ifndef NETDIRECT_LISTENER_H_
#define NETDIRECT_LISTENER_H_

#include "addon/adapter.h"

namespace netdirect {

class Listener : public Child, public Napi::ObjectWrap<Listener> {
 public:
  static constexpr napi_type_tag kTag = tags::kListener;
  static constexpr const char* kClassName = "Listener";

  struct Init : ChildInit {
    NdPtr<IND2Listener> listener;
  };

  static Napi::Function Define(Napi::Env env);
  explicit Listener(const Napi::CallbackInfo& info);

  void CancelAll() override;

 private:
  Napi::Value Bind(const Napi::CallbackInfo& info);
  Napi::Value Listen(const Napi::CallbackInfo& info);
  Napi::Value GetLocalAddress(const Napi::CallbackInfo& info);
  Napi::Value GetConnectionRequest(const Napi::CallbackInfo& info);
  Napi::Value Cancel(const Napi::CallbackInfo& info);
  Napi::Value Close(const Napi::CallbackInfo& info);

  void ReleaseNd(bool teardown) override;
  void KeepAlive(bool on) override { on ? Ref() : Unref(); }

  NdPtr<IND2Listener> listener_;
};

}  // namespace netdirect

#endif  // NETDIRECT_LISTENER_H_

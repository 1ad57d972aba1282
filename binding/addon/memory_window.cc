#include "addon/memory_window.h"

namespace netdirect {

Napi::Function MemoryWindow::Define(Napi::Env env) {
  return DefineClass(env, "MemoryWindow",
                     {
                         TaggedAccessor<MemoryWindow, &MemoryWindow::GetRemoteToken>("remoteToken"),
                         InstanceMethod<&MemoryWindow::Close>("close"),
                     });
}

MemoryWindow::MemoryWindow(const Napi::CallbackInfo& info)
    : Child(kChildMemoryWindow), Napi::ObjectWrap<MemoryWindow>(info) {
  auto* init = static_cast<Init*>(TakeInit(info, kChildMemoryWindow, kClassName));
  mw_ = std::move(init->mw);
  TagObject(info.This().As<Napi::Object>(), kTag);
  Attach(init);
}

Napi::Value MemoryWindow::GetRemoteToken(const Napi::CallbackInfo& info) {
  CheckAccessorThis(info, this, "remoteToken");
  return Napi::Number::New(info.Env(), mw_->GetRemoteToken());
}

Napi::Value MemoryWindow::Close(const Napi::CallbackInfo& info) {
  if (!HasTag(info.This(), kTag))
    ThrowMisuse(info.Env(), "ERR_ND_FOREIGN_OBJECT", "close", "receiver is not a netdirect MemoryWindow object");
  CloseNow(false);
  return info.Env().Undefined();
}

}  // namespace netdirect

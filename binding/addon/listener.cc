#include "addon/listener.h"

#include "addon/connector.h"

namespace netdirect {

Napi::Function Listener::Define(Napi::Env env) {
  return DefineClass(env, "Listener",
                     {
                         InstanceMethod<&Listener::Bind>("bind"),
                         InstanceMethod<&Listener::Listen>("listen"),
                         InstanceMethod<&Listener::GetLocalAddress>("getLocalAddress"),
                         InstanceMethod<&Listener::GetConnectionRequest>("getConnectionRequest"),
                         InstanceMethod<&Listener::Cancel>("cancel"),
                         InstanceMethod<&Listener::Close>("close"),
                     });
}

Listener::Listener(const Napi::CallbackInfo& info) : Child(kChildListener), Napi::ObjectWrap<Listener>(info) {
  auto* init = static_cast<Init*>(TakeInit(info, kChildListener, kClassName));
  listener_ = std::move(init->listener);
  TagObject(info.This().As<Napi::Object>(), kTag);
  Attach(init);
}

void Listener::CancelAll() {
  if (listener_) listener_->CancelOverlappedRequests();
}

void Listener::ReleaseNd(bool /*teardown*/) {
  listener_->CancelOverlappedRequests();
  listener_.reset();
}

Napi::Value Listener::Bind(const Napi::CallbackInfo& info) {
  const char* op = "listen";
  CheckThis(info, this, op);
  Napi::Env env = info.Env();
  SockAddr sa = ParseAddress(env, ArgString(info, 0, op, "host"), ArgU32(info, 1), op);
  HRESULT hr = listener_->Bind(sa.get(), sa.length);
  if (FAILED(hr)) ThrowNdStatus(env, hr, op);
  return env.Undefined();
}

Napi::Value Listener::Listen(const Napi::CallbackInfo& info) {
  const char* op = "listen";
  CheckThis(info, this, op);
  HRESULT hr = listener_->Listen(ArgU32(info, 0));
  if (FAILED(hr)) ThrowNdStatus(info.Env(), hr, op);
  return info.Env().Undefined();
}

Napi::Value Listener::GetLocalAddress(const Napi::CallbackInfo& info) {
  const char* op = "getLocalAddress";
  CheckThis(info, this, op);
  sockaddr_storage ss{};
  ULONG len = sizeof(ss);
  HRESULT hr = listener_->GetLocalAddress(reinterpret_cast<sockaddr*>(&ss), &len);
  if (FAILED(hr)) ThrowNdStatus(info.Env(), hr, op);
  return AddressObject(info.Env(), reinterpret_cast<sockaddr*>(&ss));
}

// getConnectionRequest(id, connector) -> ND_SUCCESS | ND_PENDING
Napi::Value Listener::GetConnectionRequest(const Napi::CallbackInfo& info) {
  const char* op = "getConnectionRequest";
  CheckThis(info, this, op);
  Napi::Env env = info.Env();
  auto* connector = UnwrapChild<Connector>(info[1], adapter_, op, "connector");
  auto* r = new OvRecord(listener_.get(), ArgU32(info, 0), kKindGetConnectionRequest, true);
  r->Hold(connector->nd());
  return Napi::Number::New(env, adapter_->IssueOverlapped(env, r, op, [&](OVERLAPPED* ov) {
    return listener_->GetConnectionRequest(connector->nd(), ov);
  }));
}

Napi::Value Listener::Cancel(const Napi::CallbackInfo& info) {
  CheckThis(info, this, "cancel");
  HRESULT hr = listener_->CancelOverlappedRequests();
  if (FAILED(hr)) ThrowNdStatus(info.Env(), hr, "cancel");
  return info.Env().Undefined();
}

Napi::Value Listener::Close(const Napi::CallbackInfo& info) {
  if (!HasTag(info.This(), kTag))
    ThrowMisuse(info.Env(), "ERR_ND_FOREIGN_OBJECT", "close", "receiver is not a netdirect Listener object");
  CloseNow(false);
  return info.Env().Undefined();
}

}  // namespace netdirect

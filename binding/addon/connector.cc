#include "addon/connector.h"

#include <cstring>

#include "addon/queue_pair.h"

namespace netdirect {

Napi::Function Connector::Define(Napi::Env env) {
  return DefineClass(env, "Connector",
                     {
                         InstanceMethod<&Connector::Bind>("bind"),
                         InstanceMethod<&Connector::Connect>("connect"),
                         InstanceMethod<&Connector::CompleteConnect>("completeConnect"),
                         InstanceMethod<&Connector::Accept>("accept"),
                         InstanceMethod<&Connector::Reject>("reject"),
                         InstanceMethod<&Connector::GetReadLimits>("getReadLimits"),
                         InstanceMethod<&Connector::GetPrivateData>("getPrivateData"),
                         InstanceMethod<&Connector::GetLocalAddress>("getLocalAddress"),
                         InstanceMethod<&Connector::GetPeerAddress>("getPeerAddress"),
                         InstanceMethod<&Connector::NotifyDisconnect>("notifyDisconnect"),
                         InstanceMethod<&Connector::Disconnect>("disconnect"),
                         InstanceMethod<&Connector::Cancel>("cancel"),
                         InstanceMethod<&Connector::Close>("close"),
                     });
}

Connector::Connector(const Napi::CallbackInfo& info) : Child(kChildConnector), Napi::ObjectWrap<Connector>(info) {
  auto* init = static_cast<Init*>(TakeInit(info, kChildConnector, kClassName));
  connector_ = std::move(init->connector);
  TagObject(info.This().As<Napi::Object>(), kTag);
  Attach(init);
}

void Connector::CancelAll() {
  if (connector_) connector_->CancelOverlappedRequests();
}

void Connector::ReleaseNd(bool /*teardown*/) {
  // Pending requests complete ND_CANCELED; their records hold the connector until the poller is done.
  connector_->CancelOverlappedRequests();
  connector_.reset();
}

template <typename Fn>
Napi::Value Connector::Overlapped(const Napi::CallbackInfo& info, uint8_t kind, bool counted, const char* operation,
                                  Fn call) {
  CheckThis(info, this, operation);
  Napi::Env env = info.Env();
  auto* r = new OvRecord(connector_.get(), ArgU32(info, 0), kind, counted);
  IND2Connector* c = connector_.get();
  return Napi::Number::New(env,
                           adapter_->IssueOverlapped(env, r, operation, [&](OVERLAPPED* ov) { return call(c, ov); }));
}

Napi::Value Connector::Bind(const Napi::CallbackInfo& info) {
  const char* op = "bind";
  CheckThis(info, this, op);
  Napi::Env env = info.Env();
  SockAddr sa = ParseAddress(env, ArgString(info, 0, op, "host"), ArgU32(info, 1), op);
  HRESULT hr = connector_->Bind(sa.get(), sa.length);
  if (FAILED(hr)) ThrowNdStatus(env, hr, op);
  return env.Undefined();
}

// connect(id, qp, host, port, inboundReadLimit, outboundReadLimit, privateData | null)
Napi::Value Connector::Connect(const Napi::CallbackInfo& info) {
  const char* op = "connect";
  CheckThis(info, this, op);
  Napi::Env env = info.Env();
  auto* qp = UnwrapChild<QueuePair>(info[1], adapter_, op, "qp");
  SockAddr sa = ParseAddress(env, ArgString(info, 2, op, "host"), ArgU32(info, 3), op);
  const uint32_t inbound = ArgU32(info, 4), outbound = ArgU32(info, 5);
  Bytes pd = ArgBytesOrNull(info, 6, op);
  auto* r = new OvRecord(connector_.get(), ArgU32(info, 0), kKindConnect, true);
  r->Hold(qp->nd());
  // The provider may read the address and private data until the request completes.
  r->keep.reset(new uint8_t[sizeof(sa.storage) + pd.length]);
  std::memcpy(r->keep.get(), &sa.storage, sizeof(sa.storage));
  if (pd.length > 0) std::memcpy(r->keep.get() + sizeof(sa.storage), pd.data, pd.length);
  const auto* dest = reinterpret_cast<const sockaddr*>(r->keep.get());
  const uint8_t* pdCopy = pd.length > 0 ? r->keep.get() + sizeof(sa.storage) : nullptr;
  return Napi::Number::New(env, adapter_->IssueOverlapped(env, r, op, [&](OVERLAPPED* ov) {
    return connector_->Connect(qp->nd(), dest, sa.length, inbound, outbound, pdCopy, static_cast<ULONG>(pd.length), ov);
  }));
}

Napi::Value Connector::CompleteConnect(const Napi::CallbackInfo& info) {
  return Overlapped(info, kKindCompleteConnect, true, "completeConnect",
                    [](IND2Connector* c, OVERLAPPED* ov) { return c->CompleteConnect(ov); });
}

// accept(id, qp, inboundReadLimit, outboundReadLimit, privateData | null)
Napi::Value Connector::Accept(const Napi::CallbackInfo& info) {
  const char* op = "accept";
  CheckThis(info, this, op);
  Napi::Env env = info.Env();
  auto* qp = UnwrapChild<QueuePair>(info[1], adapter_, op, "qp");
  const uint32_t inbound = ArgU32(info, 2), outbound = ArgU32(info, 3);
  Bytes pd = ArgBytesOrNull(info, 4, op);
  auto* r = new OvRecord(connector_.get(), ArgU32(info, 0), kKindAccept, true);
  r->Hold(qp->nd());
  if (pd.length > 0) {
    r->keep.reset(new uint8_t[pd.length]);
    std::memcpy(r->keep.get(), pd.data, pd.length);
  }
  const uint8_t* pdCopy = r->keep.get();
  return Napi::Number::New(env, adapter_->IssueOverlapped(env, r, op, [&](OVERLAPPED* ov) {
    return connector_->Accept(qp->nd(), inbound, outbound, pdCopy, static_cast<ULONG>(pd.length), ov);
  }));
}

Napi::Value Connector::Reject(const Napi::CallbackInfo& info) {
  const char* op = "reject";
  CheckThis(info, this, op);
  Bytes pd = ArgBytesOrNull(info, 0, op);
  HRESULT hr = connector_->Reject(pd.data, static_cast<ULONG>(pd.length));
  if (FAILED(hr)) ThrowNdStatus(info.Env(), hr, op);
  return info.Env().Undefined();
}

Napi::Value Connector::GetReadLimits(const Napi::CallbackInfo& info) {
  const char* op = "getReadLimits";
  CheckThis(info, this, op);
  Napi::Env env = info.Env();
  ULONG inbound = 0, outbound = 0;
  HRESULT hr = connector_->GetReadLimits(&inbound, &outbound);
  if (FAILED(hr)) ThrowNdStatus(env, hr, op);
  Napi::Array a = Napi::Array::New(env, 2);
  a.Set(0u, Napi::Number::New(env, inbound));
  a.Set(1u, Napi::Number::New(env, outbound));
  return a;
}

Napi::Value Connector::GetPrivateData(const Napi::CallbackInfo& info) {
  const char* op = "getPrivateData";
  CheckThis(info, this, op);
  Napi::Env env = info.Env();
  ULONG size = 0;
  HRESULT hr = connector_->GetPrivateData(nullptr, &size);
  std::vector<uint8_t> data;
  for (int attempt = 0; attempt < 4 && hr == ND_BUFFER_OVERFLOW; ++attempt) {
    data.resize(size);
    hr = connector_->GetPrivateData(data.data(), &size);
  }
  if (FAILED(hr)) ThrowNdStatus(env, hr, op);
  if (size < data.size()) data.resize(size);
  Napi::Uint8Array out = Napi::Uint8Array::New(env, data.size());
  if (!data.empty()) std::memcpy(out.Data(), data.data(), data.size());
  return out;
}

Napi::Value Connector::GetLocalAddress(const Napi::CallbackInfo& info) {
  const char* op = "getLocalAddress";
  CheckThis(info, this, op);
  sockaddr_storage ss{};
  ULONG len = sizeof(ss);
  HRESULT hr = connector_->GetLocalAddress(reinterpret_cast<sockaddr*>(&ss), &len);
  if (FAILED(hr)) ThrowNdStatus(info.Env(), hr, op);
  return AddressObject(info.Env(), reinterpret_cast<sockaddr*>(&ss));
}

Napi::Value Connector::GetPeerAddress(const Napi::CallbackInfo& info) {
  const char* op = "getPeerAddress";
  CheckThis(info, this, op);
  sockaddr_storage ss{};
  ULONG len = sizeof(ss);
  HRESULT hr = connector_->GetPeerAddress(reinterpret_cast<sockaddr*>(&ss), &len);
  if (FAILED(hr)) ThrowNdStatus(info.Env(), hr, op);
  return AddressObject(info.Env(), reinterpret_cast<sockaddr*>(&ss));
}

// Not counted: waiting for the peer to disconnect must not keep the process alive.
Napi::Value Connector::NotifyDisconnect(const Napi::CallbackInfo& info) {
  return Overlapped(info, kKindNotifyDisconnect, false, "notifyDisconnect",
                    [](IND2Connector* c, OVERLAPPED* ov) { return c->NotifyDisconnect(ov); });
}

Napi::Value Connector::Disconnect(const Napi::CallbackInfo& info) {
  return Overlapped(info, kKindDisconnect, true, "disconnect", [](IND2Connector* c, OVERLAPPED* ov) { return c->Disconnect(ov); });
}

Napi::Value Connector::Cancel(const Napi::CallbackInfo& info) {
  CheckThis(info, this, "cancel");
  HRESULT hr = connector_->CancelOverlappedRequests();
  if (FAILED(hr)) ThrowNdStatus(info.Env(), hr, "cancel");
  return info.Env().Undefined();
}

Napi::Value Connector::Close(const Napi::CallbackInfo& info) {
  if (!HasTag(info.This(), kTag))
    ThrowMisuse(info.Env(), "ERR_ND_FOREIGN_OBJECT", "close", "receiver is not a netdirect Connector object");
  CloseNow(false);
  return info.Env().Undefined();
}

}  // namespace netdirect

// Connector: wraps IND2Connector (active connect/completeConnect, passive accept/reject, disconnect).
#ifndef NETDIRECT_CONNECTOR_H_
#define NETDIRECT_CONNECTOR_H_

#include "addon/adapter.h"

namespace netdirect {

class Connector : public Child, public Napi::ObjectWrap<Connector> {
 public:
  static constexpr napi_type_tag kTag = tags::kConnector;
  static constexpr const char* kClassName = "Connector";

  struct Init : ChildInit {
    NdPtr<IND2Connector> connector;
  };

  static Napi::Function Define(Napi::Env env);
  explicit Connector(const Napi::CallbackInfo& info);

  IND2Connector* nd() const { return connector_.get(); }
  void CancelAll() override;

 private:
  Napi::Value Bind(const Napi::CallbackInfo& info);
  Napi::Value Connect(const Napi::CallbackInfo& info);
  Napi::Value CompleteConnect(const Napi::CallbackInfo& info);
  Napi::Value Accept(const Napi::CallbackInfo& info);
  Napi::Value Reject(const Napi::CallbackInfo& info);
  Napi::Value GetReadLimits(const Napi::CallbackInfo& info);
  Napi::Value GetPrivateData(const Napi::CallbackInfo& info);
  Napi::Value GetLocalAddress(const Napi::CallbackInfo& info);
  Napi::Value GetPeerAddress(const Napi::CallbackInfo& info);
  Napi::Value NotifyDisconnect(const Napi::CallbackInfo& info);
  Napi::Value Disconnect(const Napi::CallbackInfo& info);
  Napi::Value Cancel(const Napi::CallbackInfo& info);
  Napi::Value Close(const Napi::CallbackInfo& info);

  // Issues a simple overlapped call (no extra arguments) and reports it like every overlapped call.
  template <typename Fn>
  Napi::Value Overlapped(const Napi::CallbackInfo& info, uint8_t kind, bool counted, const char* operation, Fn call);

  void ReleaseNd(bool teardown) override;
  void KeepAlive(bool on) override { on ? Ref() : Unref(); }

  NdPtr<IND2Connector> connector_;
};

}  // namespace netdirect

#endif  // NETDIRECT_CONNECTOR_H_

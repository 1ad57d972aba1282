// SharedReceiveQueue: wraps IND2SharedReceiveQueue (receives usable by every QP created with it).
#ifndef NETDIRECT_SHARED_RECEIVE_QUEUE_H_
#define NETDIRECT_SHARED_RECEIVE_QUEUE_H_

#include "addon/adapter.h"

namespace netdirect {

class SharedReceiveQueue : public Child, public Napi::ObjectWrap<SharedReceiveQueue> {
 public:
  static constexpr napi_type_tag kTag = tags::kSharedReceiveQueue;
  static constexpr const char* kClassName = "SharedReceiveQueue";

  struct Init : ChildInit {
    NdPtr<IND2SharedReceiveQueue> srq;
  };

  static Napi::Function Define(Napi::Env env);
  explicit SharedReceiveQueue(const Napi::CallbackInfo& info);

  IND2SharedReceiveQueue* nd() const { return srq_.get(); }

 private:
  Napi::Value Receive(const Napi::CallbackInfo& info);
  Napi::Value Close(const Napi::CallbackInfo& info);

  void ReleaseNd(bool teardown) override;
  void KeepAlive(bool on) override { on ? Ref() : Unref(); }

  NdPtr<IND2SharedReceiveQueue> srq_;
};

}  // namespace netdirect

#endif  // NETDIRECT_SHARED_RECEIVE_QUEUE_H_

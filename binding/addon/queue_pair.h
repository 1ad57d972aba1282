// QueuePair: wraps IND2QueuePair. The data path (post) reads its SGEs from the adapter's scratch array and
// builds ND2_SGEs on the stack: no allocation per request.
#ifndef NETDIRECT_QUEUE_PAIR_H_
#define NETDIRECT_QUEUE_PAIR_H_

#include <vector>

#include "addon/adapter.h"
#include "nd/netdirect_ext.h"

namespace netdirect {

class QueuePair : public Child, public Napi::ObjectWrap<QueuePair> {
 public:
  static constexpr napi_type_tag kTag = tags::kQueuePair;
  static constexpr const char* kClassName = "QueuePair";

  struct Init : ChildInit {
    NdPtr<IND2QueuePair> qp;
    CqState* receiveCq;
    CqState* initiatorCq;
    uint32_t qpId;
  };

  static Napi::Function Define(Napi::Env env);
  explicit QueuePair(const Napi::CallbackInfo& info);
  ~QueuePair() override;

  IND2QueuePair* nd() const { return qp_.get(); }

 private:
  Napi::Value Post(const Napi::CallbackInfo& info);
  // `post` as an own property of each instance, bound to it (see the constructor).
  static Napi::Value PostBound(const Napi::CallbackInfo& info);
  Napi::Value PostMany(const Napi::CallbackInfo& info);
  Napi::Value Bind(const Napi::CallbackInfo& info);
  Napi::Value Invalidate(const Napi::CallbackInfo& info);
  Napi::Value Flush(const Napi::CallbackInfo& info);
  Napi::Value Transport(const Napi::CallbackInfo& info);
  Napi::Value Close(const Napi::CallbackInfo& info);

  // requestContext for a request completing on `cq` (counts it as pending unless silent / manual mode).
  void* Context(Napi::Env env, uint32_t id, CqState* cq, bool silent, const char* operation, bool* counted);
  void Uncount(CqState* cq, bool counted);

  void ReleaseNd(bool teardown) override;
  void KeepAlive(bool on) override { on ? Ref() : Unref(); }

  NdPtr<IND2QueuePair> qp_;
  NdPtr<INDPostBatch> batch_;       // the provider's batch hint (nd/netdirect_ext.h), when it answers one
  CqState* receiveCq_ = nullptr;    // one reference each
  CqState* initiatorCq_ = nullptr;
  uint32_t qpId_ = 0;
  std::vector<ND2_SGE> batchSges_;  // postMany: every request's SGEs, built before the first is posted
};

}  // namespace netdirect

#endif  // NETDIRECT_QUEUE_PAIR_H_

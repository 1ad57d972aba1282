// CompletionQueue: wraps IND2CompletionQueue. In 'thread' mode the adapter's poller arms and drains it; in
// 'manual' mode (and on demand in both) cq.poll() drains it on the JS thread.
#ifndef NETDIRECT_COMPLETION_QUEUE_H_
#define NETDIRECT_COMPLETION_QUEUE_H_

#include "addon/adapter.h"

namespace netdirect {

class CompletionQueue : public Child, public Napi::ObjectWrap<CompletionQueue> {
 public:
  static constexpr napi_type_tag kTag = tags::kCompletionQueue;
  static constexpr const char* kClassName = "CompletionQueue";

  struct Init : ChildInit {
    NdPtr<IND2CompletionQueue> cq;
    uint32_t depth;
    uint32_t id;  // lib/'s id for it (a kKindCqError record names it)
  };

  static Napi::Function Define(Napi::Env env);
  explicit CompletionQueue(const Napi::CallbackInfo& info);
  ~CompletionQueue() override;

  IND2CompletionQueue* nd() const { return cq_.get(); }
  CqState* state() const { return state_; }

 private:
  Napi::Value GetDepth(const Napi::CallbackInfo& info);
  // poll(max): up to max records into the records() array; returns the count.
  Napi::Value Poll(const Napi::CallbackInfo& info);
  // records(array): the Uint32Array poll() fills (registered once, again only to grow it).
  Napi::Value Records(const Napi::CallbackInfo& info);
  // pollInto(records, max): the same records written into the caller's Uint32Array (no allocation); returns the count.
  Napi::Value PollInto(const Napi::CallbackInfo& info);
  // Dequeues up to max results into pollBatch_ (those handed back to state_ first, then GetResults; inline progress
  // as poll()). keepPolling: pollInto's loops poll continuously; the thread stays the provider's polling thread
  // between calls.
  void Gather(uint32_t max, bool keepPolling = false);
  static Napi::Value PollBound(const Napi::CallbackInfo& info);  // `poll` bound to each instance
  Napi::Value Resize(const Napi::CallbackInfo& info);
  Napi::Value Close(const Napi::CallbackInfo& info);

  void ReleaseNd(bool teardown) override;
  void KeepAlive(bool on) override { on ? Ref() : Unref(); }

  NdPtr<IND2CompletionQueue> cq_;
  CqState* state_ = nullptr;  // one reference
  uint32_t depth_ = 0;
  Batch pollBatch_;                   // poll()'s records, reused (no allocation per call once grown)
  // poll()'s output: lib/'s Uint32Array (records()), its data read once; nothing is allocated per poll.
  Napi::Reference<Napi::Uint32Array> records_;
  uint32_t* recordsData_ = nullptr;
  uint32_t recordsCap_ = 0;  // records (kRecordWords words each)
};

}  // namespace netdirect

#endif  // NETDIRECT_COMPLETION_QUEUE_H_

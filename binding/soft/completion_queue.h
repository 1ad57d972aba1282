// IND2CompletionQueue of the software provider: a fixed ring of ND2_RESULTs filled by queue pairs (from
// posting threads and the engine thread) and drained by GetResults (any thread), plus ND's one-shot
// notification rules (docs/nd2.md §7.3):
//  * Notify(ANY) fires on the next completion, Notify(SOLICITED) on the next solicited Receive completion or
//    any error completion, Notify(ERRORS) only on a CQ error (overrun). ANY overrides a pending SOLICITED.
//  * All outstanding Notify requests complete on one event.
//  * Arming while a matching completion is already queued returns ND_SUCCESS at once (the consumer then
//    drains again) — this closes the drain/arm race; nothing is armed in that case.
//  * Overrun (a completion of traffic finding `depth` entries queued): the CQ enters the error state, pending and
//    later Notify requests complete ND_BUFFER_OVERFLOW, and every QP using it fails at its next activity.
//  * A QP's flush (its posted requests completing ND_CANCELED when it fails or disconnects) never overruns: the
//    ring grows for them beyond `depth` (docs/nd2.md §7.3 "CQ depth and flushes"). They are requests the
//    consumer posted within its queues' depths, so the growth is bounded by the depths of the attached queues.
#ifndef NETDIRECT_SOFT_COMPLETION_QUEUE_H_
#define NETDIRECT_SOFT_COMPLETION_QUEUE_H_

#include <atomic>
#include <mutex>
#include <vector>

#include "nd/netdirect_ext.h"
#include "ndkit/checked_mutex.h"
#include "soft/object.h"
#include "soft/qp/ports.h"

namespace netdirect::soft {

class SoftAdapter;

class SoftCompletionQueue final : public ComObject<IND2CompletionQueue>, public INDPollingHint, public CompletionSink {
 public:
  // IUnknown, for both interfaces: INDPollingHint is answered besides the ComObject's own ids.
  HRESULT ND_CALL QueryInterface(REFIID riid, VOID** ppv) override;
  ULONG ND_CALL AddRef() override { return ComObject::AddRef(); }
  ULONG ND_CALL Release() override { return ComObject::Release(); }
  // INDPollingHint (nd/netdirect_ext.h): marks the calling thread for inline progress.
  HRESULT ND_CALL SetPollingThread(BOOL polling) override;

  // ND_INVALID_PARAMETER_3 if depth is 0 or above limits::kMaxCqDepth.
  static HRESULT create(SoftAdapter* adapter, HANDLE file, ULONG depth, SoftCompletionQueue** out);

  // IND2Overlapped
  HRESULT ND_CALL CancelOverlappedRequests() override;
  HRESULT ND_CALL GetOverlappedResult(OVERLAPPED* pOverlapped, BOOL bWait) override;
  // IND2CompletionQueue
  HRESULT ND_CALL GetNotifyAffinity(USHORT* pGroup, KAFFINITY* pAffinity) override;
  HRESULT ND_CALL Resize(ULONG queueDepth) override;
  HRESULT ND_CALL Notify(ULONG type, OVERLAPPED* pOverlapped) override;
  ULONG ND_CALL GetResults(ND2_RESULT results[], ULONG nResults) override;

  // Provider side. Appends one completion; `solicited` marks a Receive of a Send with Solicited Event.
  // Returns false on overrun (the entry is dropped and the CQ is in the error state). Never calls back
  // into a queue pair, so callers may hold their own locks (lock order: docs/threads.md).
  // `flush`: a completion of the QP's own flush (see above), queued even beyond the depth.
  bool push(const ND2_RESULT& result, bool solicited, bool flush = false) override;
  // Appends n unsolicited completions at once: a consumer sees all of them or none, and an armed notification
  // fires once (a Read Response that confirms a batch of Writes completes them in one go).
  bool push_many(const ND2_RESULT* results, size_t n) override;
  // True once the CQ overran: its QPs must fail.
  bool failed() const override { return overrun_.load(std::memory_order_acquire); }

  // Inline progress (soft/qp/ports.h ProgressSource): a queue pair completing into this CQ lets a GetResults
  // caller that found the CQ empty read and place its input itself. Called without the source's own locks held;
  // remove_source waits for a GetResults round in progress.
  void add_source(ProgressSource* s) override;
  void remove_source(ProgressSource* s) override;
  // Per thread, off by default: only threads that poll in a loop drive progress inline (a thread that polls
  // once per wake-up, like the poller, would take the socket from the engine and then sleep).
  SoftAdapter* adapter() const { return adapter_; }
  // Entries currently queued (tests).
  ULONG count() const;

 private:
  SoftCompletionQueue(SoftAdapter* adapter, HANDLE file);
  ~SoftCompletionQueue() override;

  struct Entry {
    ND2_RESULT result;
    bool solicited;
  };
  struct Waiter {
    OVERLAPPED* ov;
    ULONG type;
  };

  HRESULT notify_now(ULONG type, OVERLAPPED* ov);  // Notify as decided here (Notify adds soft/variance.h)
  void fire_spurious(OVERLAPPED* ov);             // variance: completes one armed Notify with nothing new
  bool matches_queued_locked(ULONG type) const;
  bool append_locked(const ND2_RESULT& result, bool solicited, bool flush);  // false on overrun
  bool relayout_locked(size_t size);  // Resize, and doubling the ring for a flush; false without memory
  void fire_locked(HRESULT status, bool solicited_event, bool error_event);

  SoftAdapter* adapter_;
  HANDLE file_;
  mutable ndkit::CheckedMutex mu_;
  std::vector<Entry> ring_;  // at least depth_ entries; more after a flush needed room
  size_t depth_ = 0;         // the consumer's depth (CreateCompletionQueue / Resize)
  size_t head_ = 0;
  size_t count_ = 0;
  std::vector<Waiter> waiters_;
  std::atomic<bool> overrun_{false};
  // Inline progress sources (src_mu_ before any QP lock, docs/threads.md; only ever try-locked by GetResults).
  std::mutex src_mu_;
  std::vector<ProgressSource*> sources_;
  std::atomic<bool> have_sources_{false};
  std::atomic<bool> polled_inline_{false};  // a GetResults drove sources since the last Notify
  const uint64_t serial_;                   // unique per CQ in this process (polling_inferred)
  std::atomic<bool> hinted_{false};         // the consumer asked for INDPollingHint: it marks polling threads itself

  // For consumers that give no hint: does the calling thread, which just found this CQ empty, poll it in a loop?
  bool polling_inferred() const;

  ULONG take(ND2_RESULT results[], ULONG nResults);
};

}  // namespace netdirect::soft

#endif  // NETDIRECT_SOFT_COMPLETION_QUEUE_H_

// IND2CompletionQueue of the software provider: a fixed ring of ND2_RESULTs filled by queue pairs (from
// posting threads and the engine thread) and drained by GetResults (any thread), plus ND's one-shot
// notification rules (nd2-facts §7.3):
//  * Notify(ANY) fires on the next completion, Notify(SOLICITED) on the next solicited Receive completion or
//    any error completion, Notify(ERRORS) only on a CQ error (overrun). ANY overrides a pending SOLICITED.
//  * All outstanding Notify requests complete on one event.
//  * Arming while a matching completion is already queued returns ND_SUCCESS at once (the consumer then
//    drains again) — this closes the drain/arm race; nothing is armed in that case.
//  * Overrun (a push into a full ring): the CQ enters the error state, pending and later Notify requests
//    complete ND_BUFFER_OVERFLOW, and every QP using it fails at its next activity.
#ifndef NETDIRECT_SOFT_COMPLETION_QUEUE_H_
#define NETDIRECT_SOFT_COMPLETION_QUEUE_H_

#include <atomic>
#include <mutex>
#include <vector>

#include "soft/object.h"

namespace netdirect::soft {

class SoftAdapter;

class SoftCompletionQueue final : public ComObject<IND2CompletionQueue> {
 public:
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
  // into a queue pair, so callers may hold their own locks (lock order: QP -> SRQ -> CQ).
  bool push(const ND2_RESULT& result, bool solicited);
  // True once the CQ overran: its QPs must fail.
  bool failed() const { return overrun_.load(std::memory_order_acquire); }
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

  bool matches_queued_locked(ULONG type) const;
  void fire_locked(HRESULT status, bool solicited_event, bool error_event);

  SoftAdapter* adapter_;
  HANDLE file_;
  mutable std::mutex mu_;
  std::vector<Entry> ring_;
  size_t head_ = 0;
  size_t count_ = 0;
  std::vector<Waiter> waiters_;
  std::atomic<bool> overrun_{false};
};

}  // namespace netdirect::soft

#endif  // NETDIRECT_SOFT_COMPLETION_QUEUE_H_

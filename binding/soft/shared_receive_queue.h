// IND2SharedReceiveQueue of the software provider (its receive request, RecvRequest, is memory/local_sge.h).
// A QP created with an SRQ takes the next SRQ receive when a Send message starts arriving and completes
// it on its own receive CQ with its own context. Notify(ov) completes when the number of outstanding
// receives drops below notifyThreshold (ND_SUCCESS at once if it is already below; 0 disables).
#ifndef NETDIRECT_SOFT_SHARED_RECEIVE_QUEUE_H_
#define NETDIRECT_SOFT_SHARED_RECEIVE_QUEUE_H_

#include <cstdint>
#include <mutex>
#include <vector>

#include "ndkit/checked_mutex.h"
#include "soft/adapter.h"
#include "soft/memory/local_sge.h"
#include "soft/object.h"
#include "soft/qp/ports.h"

namespace netdirect::soft {

class SoftSharedReceiveQueue final : public ComObject<IND2SharedReceiveQueue>, public ReceiveSource {
 public:
  // ND_INVALID_PARAMETER_3 (depth 0 / above limits::kMaxQueueDepth), _4 (maxSge 0 / above kMaxSge),
  // _5 (threshold above depth).
  static HRESULT create(SoftAdapter* adapter, HANDLE file, ULONG depth, ULONG maxSge, ULONG notifyThreshold,
                        SoftSharedReceiveQueue** out);

  // IND2Overlapped
  HRESULT ND_CALL CancelOverlappedRequests() override;
  HRESULT ND_CALL GetOverlappedResult(OVERLAPPED* pOverlapped, BOOL bWait) override;
  // IND2SharedReceiveQueue
  HRESULT ND_CALL GetNotifyAffinity(USHORT* pGroup, KAFFINITY* pAffinity) override;
  HRESULT ND_CALL Modify(ULONG queueDepth, ULONG notifyThreshold) override;
  HRESULT ND_CALL Notify(OVERLAPPED* pOverlapped) override;
  HRESULT ND_CALL Receive(VOID* requestContext, const ND2_SGE sge[], ULONG nSge) override;

  // Provider side: takes the oldest receive (its pins move to *out). False if none is posted.
  bool pop(RecvRequest* out) override;
  SoftAdapter* adapter() const { return adapter_; }
  ULONG outstanding() const;

 private:
  SoftSharedReceiveQueue(SoftAdapter* adapter, HANDLE file, ULONG maxSge);
  ~SoftSharedReceiveQueue() override;
  HRESULT notify_now(OVERLAPPED* pOverlapped);  // Notify as decided here (Notify passes it through soft/variance.h)
  void check_threshold_locked();

  SoftAdapter* adapter_;
  HANDLE file_;
  ULONG max_sge_;
  mutable ndkit::CheckedMutex mu_;
  std::vector<RecvRequest> ring_;
  size_t head_ = 0;
  size_t count_ = 0;
  ULONG threshold_ = 0;
  std::vector<OVERLAPPED*> waiters_;
};

}  // namespace netdirect::soft

#endif  // NETDIRECT_SOFT_SHARED_RECEIVE_QUEUE_H_

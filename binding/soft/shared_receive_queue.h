// IND2SharedReceiveQueue of the software provider, and the receive request shared with queue pairs.
// A QP created with an SRQ takes the next SRQ receive when a Send message starts arriving and completes
// it on its own receive CQ with its own context. Notify(ov) completes when the number of outstanding
// receives drops below notifyThreshold (ND_SUCCESS at once if it is already below; 0 disables).
#ifndef NETDIRECT_SOFT_SHARED_RECEIVE_QUEUE_H_
#define NETDIRECT_SOFT_SHARED_RECEIVE_QUEUE_H_

#include <cstdint>
#include <mutex>
#include <vector>

#include "soft/adapter.h"
#include "ndkit/checked_mutex.h"
#include "soft/object.h"

namespace netdirect::soft {

class StagTable;

// One validated local SGE. stag != 0: a pin on that region is held until the request completes;
// stag == 0: QP-owned memory (inline copy).
struct LocalSge {
  uint8_t* addr = nullptr;
  uint32_t length = 0;
  uint32_t stag = 0;
};

// Calls fn(addr, length) for each piece of the byte range [offset, offset + len) of an SGE list, in order (the
// gather of a transmit and the scatter of a placement walk it the same way). Returns the bytes of the range the
// list does not cover: 0 when it fits.
template <typename Fn>
uint32_t for_each_sge_piece(const LocalSge* sge, uint32_t nsge, uint64_t offset, uint32_t len, Fn&& fn) {
  uint64_t skip = offset;
  uint32_t left = len;
  for (uint32_t i = 0; i < nsge && left > 0; ++i) {
    if (skip >= sge[i].length) {
      skip -= sge[i].length;
      continue;
    }
    const uint32_t take = static_cast<uint32_t>(sge[i].length - skip < left ? sge[i].length - skip : left);
    fn(sge[i].addr + skip, take);
    left -= take;
    skip = 0;
  }
  return left;
}

// A posted receive (QP receive queue or SRQ).
struct RecvRequest {
  void* context = nullptr;
  uint32_t nsge = 0;
  uint64_t length = 0;  // sum of SGE lengths
  LocalSge sge[limits::kMaxSge];
};

// Validates and pins the SGEs of a Receive (or a Read sink with `rights` = access::kLocalWrite):
// ND_DATA_OVERRUN (nSge > maxSge), ND_BUFFER_OVERFLOW (> MaxTransferLength), ND_ACCESS_VIOLATION (token,
// range or LOCAL_WRITE right). On failure nothing stays pinned.
HRESULT prepare_local_sges(StagTable& stags, const ND2_SGE* sge, ULONG nSge, ULONG maxSge, uint32_t rights,
                           LocalSge* out, uint64_t* total);
// Releases the pins of a request's SGEs.
void release_local_sges(StagTable& stags, const LocalSge* sge, uint32_t n);

class SoftSharedReceiveQueue final : public ComObject<IND2SharedReceiveQueue> {
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
  bool pop(RecvRequest* out);
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

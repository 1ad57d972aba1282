// IND2MemoryRegion of the software provider. One registration at a time; the STag comes from the adapter's
// StagTable and serves as both the local and the remote token (ND tokens are host-order STags; the wire
// carries them big-endian). The remote address (TO) of a region is the virtual address of its bytes, as
// siw and rping use it.
//
// Register completes synchronously (ND_SUCCESS). Deregister completes synchronously when nothing is
// pinned, otherwise returns ND_PENDING and completes (on the thread that drops the last pin) once no
// placement into the region and no request referencing it is in progress. ND_DEVICE_BUSY while a memory
// window is bound to it.
#ifndef NETDIRECT_SOFT_MEMORY_REGION_H_
#define NETDIRECT_SOFT_MEMORY_REGION_H_

#include <atomic>
#include <mutex>

#include "soft/object.h"

namespace netdirect::soft {

class SoftAdapter;

class SoftMemoryRegion final : public ComObject<IND2MemoryRegion> {
 public:
  static HRESULT create(SoftAdapter* adapter, HANDLE file, SoftMemoryRegion** out);

  // IND2Overlapped
  HRESULT ND_CALL CancelOverlappedRequests() override;
  HRESULT ND_CALL GetOverlappedResult(OVERLAPPED* pOverlapped, BOOL bWait) override;
  // IND2MemoryRegion
  // NULL buffer → ND_INVALID_PARAMETER; size 0 → ND_INVALID_BUFFER_SIZE; size > MaxRegistrationSize or
  // unknown flags → ND_INVALID_PARAMETER; already registered → ND_INVALID_DEVICE_STATE.
  HRESULT ND_CALL Register(const VOID* pBuffer, SIZE_T cbBuffer, ULONG flags, OVERLAPPED* pOverlapped) override;
  HRESULT ND_CALL Deregister(OVERLAPPED* pOverlapped) override;
  UINT32 ND_CALL GetLocalToken() override;
  UINT32 ND_CALL GetRemoteToken() override;

  // Provider side.
  uint32_t stag() const { return stag_.load(std::memory_order_acquire); }
  SoftAdapter* adapter() const { return adapter_; }
  uint64_t base() const { return base_; }
  uint64_t length() const { return length_; }
  ULONG flags() const { return flags_; }

 private:
  SoftMemoryRegion(SoftAdapter* adapter, HANDLE file);
  ~SoftMemoryRegion() override;
  // Register/Deregister as decided here; the ND methods pass the result through soft/variance.h.
  HRESULT register_now(const VOID* pBuffer, SIZE_T cbBuffer, ULONG flags, OVERLAPPED* pOverlapped);
  HRESULT deregister_now(OVERLAPPED* pOverlapped);

  SoftAdapter* adapter_;
  HANDLE file_;
  std::mutex mu_;  // serializes Register / Deregister
  std::atomic<uint32_t> stag_{0};
  uint64_t base_ = 0;
  uint64_t length_ = 0;
  ULONG flags_ = 0;
  bool deregistering_ = false;
};

}  // namespace netdirect::soft

#endif  // NETDIRECT_SOFT_MEMORY_REGION_H_

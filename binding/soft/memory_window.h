// IND2MemoryWindow of the software provider. Created invalidated; IND2QueuePair::Bind gives it an STag in
// the adapter's StagTable over a sub-range of a region (valid as soon as Bind returns, completion follows
// on the QP's initiator CQ in order); Invalidate (or an inbound Send with Invalidate naming it) removes
// the STag; it can then be bound again. Releasing a bound window invalidates it.
#ifndef NETDIRECT_SOFT_MEMORY_WINDOW_H_
#define NETDIRECT_SOFT_MEMORY_WINDOW_H_

#include <atomic>
#include <cstdint>

#include "soft/object.h"

namespace netdirect::soft {

class SoftAdapter;
class SoftMemoryRegion;

class SoftMemoryWindow final : public ComObject<IND2MemoryWindow> {
 public:
  static HRESULT create(SoftAdapter* adapter, SoftMemoryWindow** out);

  // IND2MemoryWindow: the bound window's STag (0 while invalidated).
  UINT32 ND_CALL GetRemoteToken() override;

  // Provider side (called by SoftQueuePair::Bind / Invalidate).
  // ND_INVALID_DEVICE_REQUEST if already bound; otherwise StagTable::bind_window's status.
  HRESULT bind(SoftMemoryRegion* mr, uint64_t base, uint64_t length, ULONG flags);
  // ND_INVALID_DEVICE_REQUEST if not bound.
  HRESULT invalidate();
  SoftAdapter* adapter() const { return adapter_; }

 private:
  explicit SoftMemoryWindow(SoftAdapter* adapter);
  ~SoftMemoryWindow() override;

  SoftAdapter* adapter_;
  std::atomic<uint32_t> stag_{0};
};

}  // namespace netdirect::soft

#endif  // NETDIRECT_SOFT_MEMORY_WINDOW_H_

// VerbsMemoryWindow: a type 1 memory window (ibv_alloc_mw). The bind and the invalidate are posted on a queue
// pair (queue_pair.cc). A device without windows (siw: max_mw 0) fails creation with ND_NOT_SUPPORTED.
#include <new>

#include "verbs/objects.h"

namespace netdirect::verbs {

HRESULT VerbsMemoryWindow::create(VerbsAdapter* adapter, VerbsMemoryWindow** out) {
  *out = nullptr;
  if (adapter->attr().max_mw == 0) return ND_NOT_SUPPORTED;  // the device reports no memory windows
  auto* w = new (std::nothrow) VerbsMemoryWindow(adapter);
  if (w == nullptr) return ND_NO_MEMORY;
  w->mw_ = ibv_alloc_mw(adapter->pd(), IBV_MW_TYPE_1);
  if (w->mw_ == nullptr) {
    const int e = errno;
    w->Release();
    // EOPNOTSUPP / ENOSYS: the userspace driver has no windows although the device counts some.
    return e == EOPNOTSUPP || e == ENOSYS ? ND_NOT_SUPPORTED : status_of_errno(e);
  }
  *out = w;
  return ND_SUCCESS;
}

VerbsMemoryWindow::~VerbsMemoryWindow() {
  if (mw_ != nullptr) ibv_dealloc_mw(mw_);
  if (region_ != nullptr) region_->Release();
  adapter_->Release();
}

UINT32 VerbsMemoryWindow::GetRemoteToken() { return mw_->rkey; }

void VerbsMemoryWindow::set_region(VerbsMemoryRegion* mr) {
  if (mr == region_) return;
  if (mr != nullptr) mr->AddRef();
  if (region_ != nullptr) region_->Release();
  region_ = mr;
}

VerbsMemoryRegion* VerbsMemoryWindow::region() { return region_; }

}  // namespace netdirect::verbs

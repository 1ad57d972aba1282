// VerbsMemoryRegion: ibv_reg_mr on the adapter's protection domain. Tokens: local = lkey, remote = rkey
// (docs/verbs.md §2). Register and Deregister finish inside the call (skip-on-success, the OVERLAPPED marked).
#include <new>

#include "verbs/objects.h"

namespace netdirect::verbs {

namespace {
constexpr ULONG kKnownMrFlags = ND_MR_FLAG_ALLOW_LOCAL_WRITE | ND_MR_FLAG_ALLOW_REMOTE_READ |
                                ND_MR_FLAG_ALLOW_REMOTE_WRITE | ND_MR_FLAG_RDMA_READ_SINK |
                                ND_MR_FLAG_DO_NOT_SECURE_VM;

int access_of(ULONG flags, Transport t) {
  int a = 0;
  if (flags & ND_MR_FLAG_ALLOW_LOCAL_WRITE) a |= IBV_ACCESS_LOCAL_WRITE;
  if (flags & ND_MR_FLAG_ALLOW_REMOTE_READ) a |= IBV_ACCESS_REMOTE_READ;
  if (flags & (ND_MR_FLAG_ALLOW_REMOTE_WRITE & ~ND_MR_FLAG_ALLOW_LOCAL_WRITE)) {
    a |= IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_LOCAL_WRITE;
  }
  // iWARP places an RDMA Read Response as a tagged write into the sink: the sink needs remote write access
  // (RFC 5040 §4.4); IB and RoCE need local write only.
  if (flags & ND_MR_FLAG_RDMA_READ_SINK) {
    a |= IBV_ACCESS_LOCAL_WRITE | (t == Transport::kIwarp ? IBV_ACCESS_REMOTE_WRITE : 0);
  }
  return a;
}
}  // namespace

HRESULT VerbsMemoryRegion::create(VerbsAdapter* adapter, HANDLE, VerbsMemoryRegion** out) {
  *out = new (std::nothrow) VerbsMemoryRegion(adapter);
  return *out == nullptr ? ND_NO_MEMORY : ND_SUCCESS;
}

VerbsMemoryRegion::~VerbsMemoryRegion() {
  if (mr_ != nullptr) adapter_->lib().dereg_mr(mr_);
  adapter_->Release();
}

HRESULT VerbsMemoryRegion::GetOverlappedResult(OVERLAPPED* pOverlapped, BOOL bWait) {
  if (pOverlapped == nullptr) return ND_INVALID_PARAMETER;
  return ndkit::overlapped_result(pOverlapped, bWait);
}

HRESULT VerbsMemoryRegion::Register(const VOID* pBuffer, SIZE_T cbBuffer, ULONG flags, OVERLAPPED* pOverlapped) {
  if (pBuffer == nullptr) return ND_INVALID_PARAMETER;
  if (cbBuffer == 0) return ND_INVALID_BUFFER_SIZE;
  if ((flags & ~kKnownMrFlags) != 0) return ND_INVALID_PARAMETER_3;
  if (pOverlapped == nullptr) return ND_INVALID_PARAMETER_4;
  const uint64_t base = reinterpret_cast<uintptr_t>(pBuffer);
  if (base + cbBuffer < base) return ND_ACCESS_VIOLATION;
  std::lock_guard<ndkit::CheckedMutex> lock(mu_);
  if (mr_ != nullptr) return ND_INVALID_DEVICE_STATE;
  // ND binds a window to any region: where the device has windows, every region allows binding (verbs asks for
  // it at registration, IBV_ACCESS_MW_BIND).
  const int mw = adapter_->attr().max_mw > 0 ? IBV_ACCESS_MW_BIND : 0;
  mr_ = adapter_->lib().reg_mr(adapter_->pd(), const_cast<VOID*>(pBuffer), cbBuffer,
                               access_of(flags, adapter_->transport()) | mw);
  if (mr_ == nullptr) return status_of_errno(errno);
  ndkit::mark_done(pOverlapped, ND_SUCCESS);
  return ND_SUCCESS;
}

HRESULT VerbsMemoryRegion::Deregister(OVERLAPPED* pOverlapped) {
  if (pOverlapped == nullptr) return ND_INVALID_PARAMETER_1;
  std::lock_guard<ndkit::CheckedMutex> lock(mu_);
  if (mr_ == nullptr) return ND_INVALID_DEVICE_STATE;
  if (adapter_->lib().dereg_mr(mr_) != 0) return status_of_errno(errno);
  mr_ = nullptr;
  ndkit::mark_done(pOverlapped, ND_SUCCESS);
  return ND_SUCCESS;
}

UINT32 VerbsMemoryRegion::GetLocalToken() {
  std::lock_guard<ndkit::CheckedMutex> lock(mu_);
  return mr_ != nullptr ? mr_->lkey : 0;
}

ibv_mr* VerbsMemoryRegion::mr() {
  std::lock_guard<ndkit::CheckedMutex> lock(mu_);
  return mr_;
}

UINT32 VerbsMemoryRegion::GetRemoteToken() {
  std::lock_guard<ndkit::CheckedMutex> lock(mu_);
  return mr_ != nullptr ? mr_->rkey : 0;
}

}  // namespace netdirect::verbs

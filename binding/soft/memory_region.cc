#include "soft/memory_region.h"

#include <new>

#include "soft/adapter.h"
#include "soft/memory/stag_table.h"
#include "soft/variance.h"

namespace netdirect::soft {

namespace {
constexpr ULONG kKnownMrFlags = ND_MR_FLAG_ALLOW_LOCAL_WRITE | ND_MR_FLAG_ALLOW_REMOTE_READ |
                                ND_MR_FLAG_ALLOW_REMOTE_WRITE | ND_MR_FLAG_RDMA_READ_SINK |
                                ND_MR_FLAG_DO_NOT_SECURE_VM;

uint32_t rights_of(ULONG flags) {
  uint32_t r = 0;
  if (flags & ND_MR_FLAG_ALLOW_LOCAL_WRITE) r |= access::kLocalWrite;
  if (flags & ND_MR_FLAG_ALLOW_REMOTE_READ) r |= access::kRemoteRead;
  // ALLOW_REMOTE_WRITE is 0x5: the 0x4 bit is the remote right, LOCAL_WRITE comes with it.
  if (flags & (ND_MR_FLAG_ALLOW_REMOTE_WRITE & ~ND_MR_FLAG_ALLOW_LOCAL_WRITE)) {
    r |= access::kRemoteWrite | access::kLocalWrite;
  }
  return r;
}
}  // namespace

HRESULT SoftMemoryRegion::create(SoftAdapter* adapter, HANDLE file, SoftMemoryRegion** out) {
  if (out == nullptr) return ND_INVALID_PARAMETER;
  *out = new (std::nothrow) SoftMemoryRegion(adapter, file);
  return *out == nullptr ? ND_NO_MEMORY : ND_SUCCESS;
}

SoftMemoryRegion::SoftMemoryRegion(SoftAdapter* adapter, HANDLE file) : adapter_(adapter), file_(file) {
  adapter_->AddRef();
}

SoftMemoryRegion::~SoftMemoryRegion() {
  // Released without Deregister: the registration (and windows over it) end now; a placement still in
  // progress keeps the slot until it finishes.
  const uint32_t s = stag_.load();
  if (s != 0) adapter_->stags().force_remove_region(s);
  adapter_->Release();
}

HRESULT SoftMemoryRegion::CancelOverlappedRequests() {
  variance::flush(this);
  // A pending Deregister only waits for in-progress placement; it cannot be abandoned halfway.
  return ND_SUCCESS;
}

HRESULT SoftMemoryRegion::GetOverlappedResult(OVERLAPPED* pOverlapped, BOOL bWait) {
  if (pOverlapped == nullptr) return ND_INVALID_PARAMETER;
  return variance::overlapped_result(this, file_, pOverlapped, bWait);
}

HRESULT SoftMemoryRegion::Register(const VOID* pBuffer, SIZE_T cbBuffer, ULONG flags, OVERLAPPED* pOverlapped) {
  return variance::finish_overlapped(this, file_, pOverlapped, register_now(pBuffer, cbBuffer, flags, pOverlapped));
}

HRESULT SoftMemoryRegion::register_now(const VOID* pBuffer, SIZE_T cbBuffer, ULONG flags, OVERLAPPED* pOverlapped) {
  if (pBuffer == nullptr) return ND_INVALID_PARAMETER;
  if (cbBuffer == 0) return ND_INVALID_BUFFER_SIZE;
  if (cbBuffer > limits::kMaxRegistrationSize) return ND_INVALID_PARAMETER;
  if ((flags & ~kKnownMrFlags) != 0) return ND_INVALID_PARAMETER_3;
  if (pOverlapped == nullptr) return ND_INVALID_PARAMETER_4;
  const uint64_t base = reinterpret_cast<uintptr_t>(pBuffer);
  if (base + cbBuffer < base) return ND_ACCESS_VIOLATION;  // wraps the address space
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stag_.load() != 0 || deregistering_) return ND_INVALID_DEVICE_STATE;
    const uint32_t s = adapter_->stags().add_region(base, cbBuffer, rights_of(flags));
    if (s == 0) return ND_INSUFFICIENT_RESOURCES;
    base_ = base;
    length_ = cbBuffer;
    flags_ = flags;
    stag_.store(s, std::memory_order_release);
  }
  // Done: on Windows reported as a pended IRP would be, elsewhere ND_SUCCESS with the OVERLAPPED complete.
  return succeed_overlapped(file_, pOverlapped);
}

HRESULT SoftMemoryRegion::Deregister(OVERLAPPED* pOverlapped) {
  return variance::finish_overlapped(this, file_, pOverlapped, deregister_now(pOverlapped));
}

HRESULT SoftMemoryRegion::deregister_now(OVERLAPPED* pOverlapped) {
  if (pOverlapped == nullptr) return ND_INVALID_PARAMETER_1;
  std::lock_guard<std::mutex> lock(mu_);
  const uint32_t s = stag_.load();
  if (s == 0 || deregistering_) return ND_INVALID_DEVICE_STATE;
  mark_pending(pOverlapped);
  AddRef();  // kept alive until the pending completion ran
  HANDLE file = file_;
  HRESULT hr = adapter_->stags().remove_region(s, [this, file, pOverlapped] {
    {
      std::lock_guard<std::mutex> l(mu_);
      deregistering_ = false;
    }
    complete_overlapped(file, pOverlapped, ND_SUCCESS);
    Release();
  });
  if (hr == ND_PENDING) {
    deregistering_ = true;
    stag_.store(0, std::memory_order_release);
    return ND_PENDING;
  }
  Release();
  if (hr != ND_SUCCESS) {
    mark_done(pOverlapped, hr);  // failed inside the call: no notification comes, the OVERLAPPED must say so
    return hr;
  }
  stag_.store(0, std::memory_order_release);
  return succeed_overlapped(file, pOverlapped);  // as Register: pended on Windows, ND_SUCCESS elsewhere
}

UINT32 SoftMemoryRegion::GetLocalToken() { return stag_.load(std::memory_order_acquire); }
UINT32 SoftMemoryRegion::GetRemoteToken() { return stag_.load(std::memory_order_acquire); }

}  // namespace netdirect::soft

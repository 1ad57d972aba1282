#include "soft/memory_window.h"

#include <new>

#include "soft/adapter.h"
#include "soft/memory_region.h"
#include "soft/memory/stag_table.h"

namespace netdirect::soft {

HRESULT SoftMemoryWindow::create(SoftAdapter* adapter, SoftMemoryWindow** out) {
  if (out == nullptr) return ND_INVALID_PARAMETER;
  *out = new (std::nothrow) SoftMemoryWindow(adapter);
  return *out == nullptr ? ND_NO_MEMORY : ND_SUCCESS;
}

SoftMemoryWindow::SoftMemoryWindow(SoftAdapter* adapter) : adapter_(adapter) { adapter_->AddRef(); }

SoftMemoryWindow::~SoftMemoryWindow() {
  const uint32_t s = stag_.load();
  if (s != 0) adapter_->stags().invalidate_window(s);
  adapter_->Release();
}

UINT32 SoftMemoryWindow::GetRemoteToken() {
  const uint32_t s = stag_.load(std::memory_order_acquire);
  // An inbound Send with Invalidate may have ended the window behind our back.
  if (s != 0 && !adapter_->stags().window_live(s)) return 0;
  return s;
}

HRESULT SoftMemoryWindow::bind(SoftMemoryRegion* mr, uint64_t base, uint64_t length, ULONG flags) {
  const uint32_t cur = stag_.load();
  if (cur != 0 && adapter_->stags().window_live(cur)) return ND_INVALID_DEVICE_REQUEST;
  uint32_t rights = 0;
  if (flags & ND_OP_FLAG_ALLOW_READ) rights |= access::kRemoteRead;
  if (flags & ND_OP_FLAG_ALLOW_WRITE) rights |= access::kRemoteWrite;
  uint32_t s = 0;
  HRESULT hr = adapter_->stags().bind_window(mr->stag(), base, length, rights, &s);
  if (hr != ND_SUCCESS) return hr;
  stag_.store(s, std::memory_order_release);
  return ND_SUCCESS;
}

HRESULT SoftMemoryWindow::invalidate() {
  const uint32_t s = stag_.exchange(0);
  if (s == 0) return ND_INVALID_DEVICE_REQUEST;
  adapter_->stags().invalidate_window(s);  // false if a Send with Invalidate got there first
  return ND_SUCCESS;
}

}  // namespace netdirect::soft

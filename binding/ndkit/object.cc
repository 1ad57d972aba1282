#include "ndkit/object.h"

#include <chrono>
#include <thread>

namespace netdirect::ndkit {

std::atomic<long>& live_objects() {
  static std::atomic<long> count{0};
  return count;
}

#ifndef _WIN32  // Windows: overlapped_win.cc
void complete_overlapped(HANDLE overlapped_file, OVERLAPPED* ov, HRESULT status, ULONG bytes) {
  NdCompatCompleteOverlapped(overlapped_file, ov, status, bytes);
}

HRESULT overlapped_result(OVERLAPPED* ov, BOOL wait) {
  auto* status = reinterpret_cast<std::atomic<ULONG_PTR>*>(&ov->Internal);
  HRESULT hr = static_cast<HRESULT>(static_cast<ULONG>(status->load()));
  if (hr != ND_PENDING || !wait) return hr;
  HANDLE ev = reinterpret_cast<HANDLE>(reinterpret_cast<uintptr_t>(ov->hEvent) & ~uintptr_t(1));
  if (ev != nullptr) {
    while ((hr = static_cast<HRESULT>(static_cast<ULONG>(status->load()))) == ND_PENDING) {
      WaitForSingleObject(ev, 100);
    }
    return hr;
  }
  // No event to wait on (the ND docs require one for bWait): poll politely instead of failing.
  while ((hr = static_cast<HRESULT>(static_cast<ULONG>(status->load()))) == ND_PENDING) {
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  return hr;
}
#endif  // !_WIN32

}  // namespace netdirect::ndkit

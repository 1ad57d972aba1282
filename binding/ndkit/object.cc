#include "ndkit/object.h"

#include <chrono>
#include <mutex>
#include <thread>
#include <vector>

namespace netdirect::ndkit {

std::atomic<long>& live_objects() {
  static std::atomic<long> count{0};
  return count;
}

#ifndef _WIN32  // Windows: overlapped_win.cc
namespace {
struct OwnedFile {
  const void* owner;
  HANDLE file;
};
std::mutex g_files_mu;  // a leaf
std::vector<OwnedFile> g_files;
}  // namespace

HANDLE create_overlapped_file(const void* owner) {
  HANDLE h = NdCompatCreateOverlappedFile();
  std::lock_guard<std::mutex> lock(g_files_mu);
  try {
    g_files.push_back(OwnedFile{owner, h});
  } catch (...) {
    NdCompatReleaseOverlappedFile(h);  // ours, then the one that would have been the consumer's
    NdCompatReleaseOverlappedFile(h);
    return nullptr;
  }
  return h;
}

void release_overlapped_files(const void* owner) {
  std::vector<HANDLE> mine;
  {
    std::lock_guard<std::mutex> lock(g_files_mu);
    for (size_t i = 0; i < g_files.size();) {
      if (g_files[i].owner == owner) {
        mine.push_back(g_files[i].file);
        g_files[i] = g_files.back();
        g_files.pop_back();
      } else {
        ++i;
      }
    }
  }
  for (HANDLE h : mine) NdCompatReleaseOverlappedFile(h);
}

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

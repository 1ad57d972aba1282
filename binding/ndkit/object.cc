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
struct Files {
  std::mutex mu;  // a leaf
  std::vector<OwnedFile> list;
};
// Never freed: an adapter's last release may run on a detached thread while the process exits (~SoftAdapter).
Files& files() {
  static Files* f = new Files();
  return *f;
}
}  // namespace

HANDLE create_overlapped_file(const void* owner) {
  HANDLE h = NdCompatCreateOverlappedFile();
  Files& fs = files();
  std::lock_guard<std::mutex> lock(fs.mu);
  try {
    fs.list.push_back(OwnedFile{owner, h});
  } catch (...) {
    NdCompatReleaseOverlappedFile(h);  // ours, then the one that would have been the consumer's
    NdCompatReleaseOverlappedFile(h);
    return nullptr;
  }
  return h;
}

void release_overlapped_files(const void* owner) {
  std::vector<HANDLE> mine;
  Files& fs = files();
  {
    std::lock_guard<std::mutex> lock(fs.mu);
    for (size_t i = 0; i < fs.list.size();) {
      if (fs.list[i].owner == owner) {
        mine.push_back(fs.list[i].file);
        fs.list[i] = fs.list.back();
        fs.list.pop_back();
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

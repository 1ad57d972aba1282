#include "soft/variance.h"
#include "soft/shared_receive_queue.h"

#include <new>

#include "soft/memory/stag_table.h"

namespace netdirect::soft {

HRESULT SoftSharedReceiveQueue::create(SoftAdapter* adapter, HANDLE file, ULONG depth, ULONG maxSge,
                                       ULONG notifyThreshold, SoftSharedReceiveQueue** out) {
  if (out == nullptr) return ND_INVALID_PARAMETER;
  *out = nullptr;
  if (depth == 0 || depth > limits::kMaxQueueDepth) return ND_INVALID_PARAMETER_3;
  if (maxSge == 0 || maxSge > limits::kMaxSge) return ND_INVALID_PARAMETER_4;
  if (notifyThreshold > depth) return ND_INVALID_PARAMETER_5;
  auto* q = new (std::nothrow) SoftSharedReceiveQueue(adapter, file, maxSge);
  if (q == nullptr) return ND_NO_MEMORY;
  try {
    q->ring_.resize(depth);
    q->waiters_.reserve(4);
  } catch (...) {
    q->Release();
    return ND_NO_MEMORY;
  }
  q->threshold_ = notifyThreshold;
  *out = q;
  return ND_SUCCESS;
}

SoftSharedReceiveQueue::SoftSharedReceiveQueue(SoftAdapter* adapter, HANDLE file, ULONG maxSge)
    : adapter_(adapter), file_(file), max_sge_(maxSge) {
  adapter_->AddRef();
}

SoftSharedReceiveQueue::~SoftSharedReceiveQueue() {
  std::vector<OVERLAPPED*> w;
  {
    std::lock_guard<ndkit::CheckedMutex> lock(mu_);
    w.swap(waiters_);
    for (size_t i = 0; i < count_; ++i) {
      RecvRequest& r = ring_[(head_ + i) % ring_.size()];
      release_local_sges(adapter_->stags(), r.sge, r.nsge);
    }
    count_ = 0;
  }
  for (auto* ov : w) complete_overlapped(file_, ov, ND_CANCELED);
  adapter_->Release();
}

HRESULT SoftSharedReceiveQueue::CancelOverlappedRequests() {
  variance::flush(this);
  std::lock_guard<ndkit::CheckedMutex> lock(mu_);
  for (auto* ov : waiters_) complete_overlapped(file_, ov, ND_CANCELED);
  waiters_.clear();
  return ND_SUCCESS;
}

HRESULT SoftSharedReceiveQueue::GetOverlappedResult(OVERLAPPED* pOverlapped, BOOL bWait) {
  if (pOverlapped == nullptr) return ND_INVALID_PARAMETER;
  return variance::overlapped_result(this, file_, pOverlapped, bWait);
}

HRESULT SoftSharedReceiveQueue::GetNotifyAffinity(USHORT*, KAFFINITY*) { return ND_NOT_SUPPORTED; }

HRESULT SoftSharedReceiveQueue::Modify(ULONG queueDepth, ULONG notifyThreshold) {
  std::lock_guard<ndkit::CheckedMutex> lock(mu_);
  if (queueDepth > limits::kMaxQueueDepth) return ND_INVALID_PARAMETER_1;
  const ULONG depth = queueDepth != 0 ? queueDepth : static_cast<ULONG>(ring_.size());
  const ULONG threshold = notifyThreshold != 0 ? notifyThreshold : threshold_;
  if (depth < count_) return ND_BUFFER_OVERFLOW;
  if (threshold > depth) return ND_INVALID_PARAMETER_2;
  if (depth != ring_.size()) {
    std::vector<RecvRequest> ring;
    try {
      ring.resize(depth);
    } catch (...) {
      return ND_NO_MEMORY;
    }
    for (size_t i = 0; i < count_; ++i) ring[i] = ring_[(head_ + i) % ring_.size()];
    ring_.swap(ring);
    head_ = 0;
  }
  threshold_ = threshold;
  check_threshold_locked();
  return ND_SUCCESS;
}

void SoftSharedReceiveQueue::check_threshold_locked() {
  mu_.assert_held();
  if (waiters_.empty() || threshold_ == 0 || count_ >= threshold_) return;
  for (auto* ov : waiters_) complete_overlapped(file_, ov, ND_SUCCESS);
  waiters_.clear();
}

HRESULT SoftSharedReceiveQueue::Notify(OVERLAPPED* pOverlapped) {
  return variance::finish_overlapped(this, file_, pOverlapped, notify_now(pOverlapped));
}

HRESULT SoftSharedReceiveQueue::notify_now(OVERLAPPED* pOverlapped) {
  if (pOverlapped == nullptr) return ND_INVALID_PARAMETER_1;
  std::lock_guard<ndkit::CheckedMutex> lock(mu_);
  if (threshold_ != 0 && count_ < threshold_) return ND_SUCCESS;  // already below: no race window
  try {
    waiters_.push_back(pOverlapped);
  } catch (...) {
    return ND_NO_MEMORY;
  }
  mark_pending(pOverlapped);
  return ND_PENDING;
}

HRESULT SoftSharedReceiveQueue::Receive(VOID* requestContext, const ND2_SGE sge[], ULONG nSge) {
  if (nSge > max_sge_) return ND_DATA_OVERRUN;
  std::lock_guard<ndkit::CheckedMutex> lock(mu_);
  if (count_ == ring_.size()) return ND_NO_MORE_ENTRIES;
  RecvRequest& r = ring_[(head_ + count_) % ring_.size()];
  uint64_t total = 0;
  HRESULT hr = prepare_local_sges(adapter_->stags(), sge, nSge, max_sge_, access::kLocalWrite, r.sge, &total);
  if (hr != ND_SUCCESS) return hr;
  r.context = requestContext;
  r.nsge = nSge;
  r.length = total;
  ++count_;
  return ND_SUCCESS;
}

bool SoftSharedReceiveQueue::pop(RecvRequest* out) {
  std::lock_guard<ndkit::CheckedMutex> lock(mu_);
  if (count_ == 0) return false;
  RecvRequest& r = ring_[head_];
  out->context = r.context;
  out->nsge = r.nsge;
  out->length = r.length;
  for (uint32_t i = 0; i < r.nsge; ++i) out->sge[i] = r.sge[i];
  head_ = (head_ + 1) % ring_.size();
  --count_;
  check_threshold_locked();
  return true;
}

ULONG SoftSharedReceiveQueue::outstanding() const {
  std::lock_guard<ndkit::CheckedMutex> lock(mu_);
  return static_cast<ULONG>(count_);
}

}  // namespace netdirect::soft

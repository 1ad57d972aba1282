// VerbsSharedReceiveQueue: an ibv_srq on the adapter's protection domain (objects.h; docs/verbs.md §2).
#include <algorithm>
#include <new>

#include "verbs/objects.h"

namespace netdirect::verbs {

HRESULT VerbsSharedReceiveQueue::create(VerbsAdapter* adapter, HANDLE file, ULONG depth, ULONG maxSge,
                                        ULONG notifyThreshold, VerbsSharedReceiveQueue** out) {
  auto* q = new (std::nothrow) VerbsSharedReceiveQueue(adapter, file);
  if (q == nullptr) return ND_NO_MEMORY;
  ibv_srq_init_attr a{};
  a.srq_context = q;
  a.attr.max_wr = depth;
  a.attr.max_sge = maxSge;
  a.attr.srq_limit = 0;  // armed by Notify
  q->srq_ = adapter->lib().create_srq(adapter->pd(), &a);
  if (q->srq_ == nullptr) {
    const HRESULT hr = status_of_errno(errno);
    q->Release();
    return hr == ND_INVALID_PARAMETER ? ND_INSUFFICIENT_RESOURCES : hr;
  }
  q->max_sge_ = maxSge;
  q->capacity_ = depth;
  q->threshold_ = notifyThreshold;
  try {
    q->slots_.resize(depth);
    for (ULONG i = depth; i > 0; --i) q->free_.push_back(i - 1);
  } catch (...) {
    q->Release();
    return ND_NO_MEMORY;
  }
  q->id_ = adapter->add_srq(q);
  *out = q;
  return ND_SUCCESS;
}

VerbsSharedReceiveQueue::~VerbsSharedReceiveQueue() {
  if (id_ != 0) adapter_->remove_srq(id_);
  if (srq_ != nullptr) {
    // Under the progress lock: an asynchronous event naming this SRQ is never dispatched after this.
    std::lock_guard<ndkit::CheckedMutex> lock(adapter_->progress_mu());
    adapter_->lib().destroy_srq(srq_);
  }
  for (OVERLAPPED* ov : waiters_) ndkit::complete_overlapped(file_, ov, ND_CANCELED);
  adapter_->Release();
}

HRESULT VerbsSharedReceiveQueue::CancelOverlappedRequests() {
  std::vector<OVERLAPPED*> w;
  {
    std::lock_guard<ndkit::CheckedMutex> lock(mu_);
    w.swap(waiters_);
  }
  for (OVERLAPPED* ov : w) ndkit::complete_overlapped(file_, ov, ND_CANCELED);
  return ND_SUCCESS;
}

HRESULT VerbsSharedReceiveQueue::GetOverlappedResult(OVERLAPPED* pOverlapped, BOOL bWait) {
  if (pOverlapped == nullptr) return ND_INVALID_PARAMETER;
  return ndkit::overlapped_result(pOverlapped, bWait);
}

HRESULT VerbsSharedReceiveQueue::GetNotifyAffinity(USHORT*, KAFFINITY*) { return ND_NOT_SUPPORTED; }

void VerbsSharedReceiveQueue::check_threshold_locked(std::vector<OVERLAPPED*>* fire) {
  mu_.assert_held();
  if (waiters_.empty() || threshold_ == 0 || count_ >= threshold_) return;
  fire->insert(fire->end(), waiters_.begin(), waiters_.end());
  waiters_.clear();
}

HRESULT VerbsSharedReceiveQueue::Modify(ULONG queueDepth, ULONG notifyThreshold) {
  // 0 keeps the current value (as the software provider's SRQ).
  if (queueDepth > static_cast<ULONG>(adapter_->attr().max_srq_wr)) return ND_INVALID_PARAMETER_1;
  std::vector<OVERLAPPED*> fire;
  {
    std::lock_guard<ndkit::CheckedMutex> lock(mu_);
    const ULONG depth = queueDepth != 0 ? queueDepth : capacity_;
    const ULONG threshold = notifyThreshold != 0 ? notifyThreshold : threshold_;
    if (depth < count_) return ND_BUFFER_OVERFLOW;
    if (threshold > depth) return ND_INVALID_PARAMETER_2;
    if (depth > slots_.size()) {  // the device's queue grows (verbs cannot shrink one: a smaller depth only caps posts)
      ibv_srq_attr attr{};
      attr.max_wr = depth;
      if (adapter_->lib().modify_srq(srq_, &attr, IBV_SRQ_MAX_WR) != 0) {
        const int e = errno;
        return e == EINVAL ? ND_INVALID_PARAMETER_1 : status_of_errno(e);
      }
      const size_t old = slots_.size();
      try {
        slots_.resize(depth);
        for (size_t i = depth; i > old; --i) free_.push_back(static_cast<uint32_t>(i - 1));
      } catch (...) {
        return ND_NO_MEMORY;
      }
    }
    capacity_ = depth;
    threshold_ = threshold;
    check_threshold_locked(&fire);
  }
  for (OVERLAPPED* ov : fire) ndkit::complete_overlapped(file_, ov, ND_SUCCESS);
  return ND_SUCCESS;
}

HRESULT VerbsSharedReceiveQueue::Notify(OVERLAPPED* pOverlapped) {
  if (pOverlapped == nullptr) return ND_INVALID_PARAMETER_1;
  std::lock_guard<ndkit::CheckedMutex> lock(mu_);
  if (threshold_ != 0 && count_ < threshold_) {
    ndkit::mark_done(pOverlapped, ND_SUCCESS);
    return ND_SUCCESS;
  }
  try {
    waiters_.push_back(pOverlapped);
  } catch (...) {
    return ND_NO_MEMORY;
  }
  ndkit::mark_pending(pOverlapped);
  if (threshold_ != 0) {
    // The device fires once when fewer than srq_limit receives remain, then disarms. A device that cannot arm
    // it still completes the request when polling takes the count below the threshold (take_slot).
    ibv_srq_attr attr{};
    attr.srq_limit = threshold_;
    (void)adapter_->lib().modify_srq(srq_, &attr, IBV_SRQ_LIMIT);
  }
  return ND_PENDING;
}

void VerbsSharedReceiveQueue::on_limit() {
  std::vector<OVERLAPPED*> fire;
  {
    std::lock_guard<ndkit::CheckedMutex> lock(mu_);
    fire.swap(waiters_);
  }
  for (OVERLAPPED* ov : fire) ndkit::complete_overlapped(file_, ov, ND_SUCCESS);
}

HRESULT VerbsSharedReceiveQueue::Receive(VOID* requestContext, const ND2_SGE sge[], ULONG nSge) {
  if (nSge > max_sge_) return ND_DATA_OVERRUN;
  if (nSge > 0 && sge == nullptr) return ND_INVALID_PARAMETER_2;
  ibv_sge list[64];
  ULONG n = 0;
  size_t total = 0;
  if (!copy_sges(sge, nSge, true, list, &n, &total)) return ND_DATA_OVERRUN;
  std::lock_guard<ndkit::CheckedMutex> lock(mu_);
  if (count_ >= capacity_ || free_.empty()) return ND_NO_MORE_ENTRIES;
  const uint32_t i = free_.back();
  ibv_recv_wr wr{};
  wr.wr_id = kWrSrq | (static_cast<uint64_t>(id_) << kWrSrqShift) | i;
  wr.sg_list = n > 0 ? list : nullptr;
  wr.num_sge = static_cast<int>(n);
  slots_[i] = Slot{requestContext, Nd2RequestTypeReceive, false, true};
  ibv_recv_wr* bad = nullptr;
  const int err = errno_of(ibv_post_srq_recv(srq_, &wr, &bad));
  if (err != 0) {
    slots_[i].live = false;
    return err == ENOMEM ? ND_NO_MORE_ENTRIES : status_of_errno(err);
  }
  free_.pop_back();
  ++count_;
  return ND_SUCCESS;
}

Slot VerbsSharedReceiveQueue::take_slot(uint64_t wr_id) {
  std::vector<OVERLAPPED*> fire;
  Slot s;
  {
    std::lock_guard<ndkit::CheckedMutex> lock(mu_);
    const uint32_t i = static_cast<uint32_t>(wr_id);
    if (i >= slots_.size() || !slots_[i].live) return Slot{};
    s = slots_[i];
    slots_[i].live = false;
    free_.push_back(i);
    --count_;
    check_threshold_locked(&fire);
  }
  for (OVERLAPPED* ov : fire) ndkit::complete_overlapped(file_, ov, ND_SUCCESS);
  return s;
}

}  // namespace netdirect::verbs

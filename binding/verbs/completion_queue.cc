// VerbsCompletionQueue: an ibv_cq on the adapter's completion channel, with ND's one-shot Notify rules
// (docs/nd2.md §7.3) over ibv_req_notify_cq. verbs cannot peek at a CQ, so Notify arms and then polls once: what
// it finds is kept (stash_) and handed out first by the next GetResults, and Notify returns ND_SUCCESS at once
// (nothing armed from ND's point of view; the verbs event that may still come finds no waiter).
#include <new>

#include "verbs/objects.h"

namespace netdirect::verbs {

namespace {
constexpr ULONG kPollBatch = 16;
}

HRESULT status_of_wc(enum ibv_wc_status s) {
  switch (s) {
    case IBV_WC_SUCCESS: return ND_SUCCESS;
    case IBV_WC_LOC_LEN_ERR: return ND_BUFFER_OVERFLOW;
    case IBV_WC_LOC_PROT_ERR:
    case IBV_WC_LOC_ACCESS_ERR:
    case IBV_WC_MW_BIND_ERR:
    case IBV_WC_REM_ACCESS_ERR: return ND_ACCESS_VIOLATION;
    case IBV_WC_WR_FLUSH_ERR: return ND_CANCELED;
    case IBV_WC_REM_INV_REQ_ERR:
    case IBV_WC_REM_OP_ERR:
    case IBV_WC_BAD_RESP_ERR:
    case IBV_WC_REM_INV_RD_REQ_ERR: return ND_REMOTE_ERROR;
    case IBV_WC_RETRY_EXC_ERR:
    case IBV_WC_RNR_RETRY_EXC_ERR:
    case IBV_WC_RESP_TIMEOUT_ERR: return ND_IO_TIMEOUT;
    case IBV_WC_REM_ABORT_ERR: return ND_CONNECTION_ABORTED;
    default: return ND_INTERNAL_ERROR;  // LOC_QP_OP, LOC_EEC_OP, LOC_RDD_VIOL, INV_EEC*, FATAL, GENERAL, TM_*
  }
}

HRESULT VerbsCompletionQueue::create(VerbsAdapter* adapter, HANDLE file, ULONG depth, VerbsCompletionQueue** out) {
  auto* q = new (std::nothrow) VerbsCompletionQueue(adapter, file);
  if (q == nullptr) return ND_NO_MEMORY;
  q->cq_ = adapter->lib().create_cq(adapter->context(), static_cast<int>(depth), q, adapter->channel(), 0);
  if (q->cq_ == nullptr) {
    const HRESULT hr = status_of_errno(errno);
    q->Release();
    return hr == ND_INVALID_PARAMETER ? ND_INVALID_PARAMETER_3 : hr;
  }
  *out = q;
  return ND_SUCCESS;
}

VerbsCompletionQueue::~VerbsCompletionQueue() {
  if (cq_ != nullptr) {
    // Under the progress lock: no event for this CQ is being dispatched, and those read are acknowledged.
    std::lock_guard<ndkit::CheckedMutex> lock(adapter_->progress_mu());
    adapter_->lib().destroy_cq(cq_);
  }
  adapter_->Release();
}

HRESULT VerbsCompletionQueue::CancelOverlappedRequests() {
  std::vector<OVERLAPPED*> w;
  {
    std::lock_guard<ndkit::CheckedMutex> lock(mu_);
    w.swap(waiters_);
    waiter_types_.clear();
  }
  for (OVERLAPPED* ov : w) ndkit::complete_overlapped(file_, ov, ND_CANCELED);
  return ND_SUCCESS;
}

HRESULT VerbsCompletionQueue::GetOverlappedResult(OVERLAPPED* pOverlapped, BOOL bWait) {
  if (pOverlapped == nullptr) return ND_INVALID_PARAMETER;
  return ndkit::overlapped_result(pOverlapped, bWait);
}

HRESULT VerbsCompletionQueue::GetNotifyAffinity(USHORT*, KAFFINITY*) { return ND_NOT_SUPPORTED; }

HRESULT VerbsCompletionQueue::Resize(ULONG queueDepth) {
  if (queueDepth == 0) return ND_INVALID_PARAMETER_1;
  std::lock_guard<ndkit::CheckedMutex> lock(mu_);
  if (adapter_->lib().resize_cq(cq_, static_cast<int>(queueDepth)) != 0) {
    const int e = errno;
    return e == EINVAL ? ND_INVALID_PARAMETER_1 : status_of_errno(e);
  }
  return ND_SUCCESS;
}

HRESULT VerbsCompletionQueue::Notify(ULONG type, OVERLAPPED* pOverlapped) {
  if (type != ND_CQ_NOTIFY_ANY && type != ND_CQ_NOTIFY_SOLICITED && type != ND_CQ_NOTIFY_ERRORS) {
    return ND_INVALID_PARAMETER_1;
  }
  if (pOverlapped == nullptr) return ND_INVALID_PARAMETER_2;
  std::lock_guard<ndkit::CheckedMutex> lock(mu_);
  if (failed_) return ND_BUFFER_OVERFLOW;
  if (type != ND_CQ_NOTIFY_ERRORS) {
    if (!stash_.empty()) return ND_SUCCESS;
    if (ibv_req_notify_cq(cq_, type == ND_CQ_NOTIFY_SOLICITED ? 1 : 0) != 0) return status_of_errno(errno);
    ND2_RESULT found[kPollBatch];
    const ULONG n = poll_locked(found, kPollBatch);
    for (ULONG i = 0; i < n; ++i) stash_.push_back(found[i]);
    if (n > 0) return ND_SUCCESS;
  }
  // ERRORS: verbs reports a CQ error as an asynchronous device event (IBV_EVENT_CQ_ERR, on_error).
  ndkit::mark_pending(pOverlapped);
  waiters_.push_back(pOverlapped);
  waiter_types_.push_back(type);
  return ND_PENDING;
}

void VerbsCompletionQueue::on_event() {
  std::vector<OVERLAPPED*> fire;
  {
    std::lock_guard<ndkit::CheckedMutex> lock(mu_);
    std::vector<OVERLAPPED*> keep;
    std::vector<ULONG> keep_types;
    for (size_t i = 0; i < waiters_.size(); ++i) {
      if (waiter_types_[i] == ND_CQ_NOTIFY_ERRORS) {
        keep.push_back(waiters_[i]);
        keep_types.push_back(waiter_types_[i]);
      } else {
        fire.push_back(waiters_[i]);
      }
    }
    waiters_.swap(keep);
    waiter_types_.swap(keep_types);
  }
  for (OVERLAPPED* ov : fire) ndkit::complete_overlapped(file_, ov, ND_SUCCESS);
}

void VerbsCompletionQueue::on_error() {
  std::vector<OVERLAPPED*> fire;
  {
    std::lock_guard<ndkit::CheckedMutex> lock(mu_);
    failed_ = true;
    fire.swap(waiters_);
    waiter_types_.clear();
  }
  for (OVERLAPPED* ov : fire) ndkit::complete_overlapped(file_, ov, ND_BUFFER_OVERFLOW);
}

void VerbsCompletionQueue::drain_to_stash() {
  std::lock_guard<ndkit::CheckedMutex> lock(mu_);
  ND2_RESULT found[kPollBatch];
  for (;;) {
    const ULONG n = poll_locked(found, kPollBatch);
    for (ULONG i = 0; i < n; ++i) stash_.push_back(found[i]);
    if (n < kPollBatch) break;
  }
}

void VerbsCompletionQueue::append_and_fire(const std::vector<ND2_RESULT>& extra) {
  {
    std::lock_guard<ndkit::CheckedMutex> lock(mu_);
    for (const auto& r : extra) stash_.push_back(r);
  }
  on_event();
}

bool VerbsCompletionQueue::translate(const ibv_wc& wc, ND2_RESULT* r) {
  std::lock_guard<ndkit::CheckedMutex> lock(adapter_->qps_mu());
  VerbsQueuePair* qp = adapter_->find_qp_locked(wc.qp_num);
  if (wc.wr_id & kWrSrq) {  // a shared receive queue's receive, consumed by the QP wc.qp_num
    VerbsSharedReceiveQueue* srq = adapter_->find_srq_locked(static_cast<uint32_t>(wc.wr_id >> kWrSrqShift));
    if (srq == nullptr) return false;
    const Slot slot = srq->take_slot(wc.wr_id);
    if (!slot.live) return false;
    r->Status = status_of_wc(wc.status);
    r->QueuePairContext = qp != nullptr ? qp->context() : nullptr;
    r->RequestContext = slot.context;
    r->RequestType = Nd2RequestTypeReceive;
    r->BytesTransferred = wc.byte_len;
    return true;
  }
  if (qp == nullptr) return false;  // the QP was destroyed: nobody to report to
  const Slot slot = qp->take_slot(wc.wr_id);
  if (!slot.live) return false;  // completed by a sweep already
  r->Status = status_of_wc(wc.status);
  r->QueuePairContext = qp->context();
  r->RequestContext = slot.context;
  r->RequestType = slot.type;
  r->BytesTransferred = slot.type == Nd2RequestTypeReceive || slot.type == Nd2RequestTypeRead ? wc.byte_len : 0;
  if (r->Status != ND_SUCCESS && r->Status != ND_CANCELED && !qp->failed.exchange(true)) adapter_->note_qp_failure();
  return !(slot.silent && r->Status == ND_SUCCESS);
}

ULONG VerbsCompletionQueue::poll_locked(ND2_RESULT* out, ULONG n) {
  mu_.assert_held();
  ULONG got = 0;
  while (got < n) {
    ibv_wc wc[kPollBatch];
    const int want = static_cast<int>(std::min<ULONG>(n - got, kPollBatch));
    const int k = ibv_poll_cq(cq_, want, wc);
    if (k <= 0) break;
    for (int i = 0; i < k; ++i) {
      if (translate(wc[i], &out[got])) ++got;
    }
    if (k < want) break;
  }
  return got;
}

ULONG VerbsCompletionQueue::GetResults(ND2_RESULT results[], ULONG nResults) {
  if (results == nullptr || nResults == 0) return 0;
  std::lock_guard<ndkit::CheckedMutex> lock(mu_);
  ULONG got = 0;
  while (got < nResults && !stash_.empty()) {
    results[got++] = stash_.front();
    stash_.pop_front();
  }
  if (got < nResults) got += poll_locked(results + got, nResults - got);
  return got;
}

}  // namespace netdirect::verbs

// IND2QueuePair of the software provider, the ND face: creation and the ND methods (Send, Write, Read, Receive,
// Bind, Invalidate, Flush), which check their arguments and hand the request to the state machine in qp/ (qp.cc:
// posting, completions, errors, teardown; qp_tx.cc transmit; qp_rx.cc receive). Design: soft/queue_pair.h.
#include "soft/queue_pair.h"

#include <algorithm>
#include <new>

#include "soft/adapter.h"
#include "soft/completion_queue.h"
#include "soft/memory_region.h"
#include "soft/memory_window.h"
#include "soft/memory/stag_table.h"

namespace netdirect::soft {

namespace {
constexpr uint64_t kNoOffender = ~uint64_t{0};
}  // namespace

HRESULT SoftQueuePair::create(SoftAdapter* adapter, SoftCompletionQueue* receiveCq, SoftCompletionQueue* initiatorCq,
                              SoftSharedReceiveQueue* srq, VOID* context, ULONG receiveDepth, ULONG initiatorDepth,
                              ULONG maxReceiveSge, ULONG maxInitiatorSge, ULONG inlineDataSize, SoftQueuePair** out) {
  if (out == nullptr) return ND_INVALID_PARAMETER;
  *out = nullptr;
  if (receiveCq == nullptr) return ND_INVALID_PARAMETER_2;
  if (initiatorCq == nullptr) return ND_INVALID_PARAMETER_3;
  if (srq == nullptr && (receiveDepth == 0 || receiveDepth > limits::kMaxQueueDepth)) return ND_INVALID_PARAMETER_5;
  if (initiatorDepth == 0 || initiatorDepth > limits::kMaxQueueDepth) return ND_INVALID_PARAMETER_6;
  if (srq == nullptr && maxReceiveSge > limits::kMaxSge) return ND_INVALID_PARAMETER_7;
  if (maxInitiatorSge > limits::kMaxSge) return ND_INVALID_PARAMETER_8;
  if (inlineDataSize > limits::kMaxInlineData) return ND_INVALID_PARAMETER_9;
  auto* qp = new (std::nothrow) SoftQueuePair(adapter, receiveCq, initiatorCq, srq, context);
  if (qp == nullptr) return ND_NO_MEMORY;
  try {
    qp->sq_depth_ = initiatorDepth;
    qp->sq_max_sge_ = std::max<ULONG>(maxInitiatorSge, 1);  // inline requests use one SGE slot
    qp->inline_size_ = inlineDataSize;
    qp->sq_.resize(initiatorDepth);
    qp->sq_sge_.resize(static_cast<size_t>(initiatorDepth) * qp->sq_max_sge_);
    qp->inline_buf_.resize(static_cast<size_t>(initiatorDepth) * inlineDataSize);
    if (srq == nullptr) {
      qp->rq_depth_ = receiveDepth;
      qp->rq_max_sge_ = maxReceiveSge;
      qp->rq_.resize(receiveDepth);
    }
    qp->tx_.batch = std::make_unique<TxBatch>();
    qp->sq_max_sge_request_ = maxInitiatorSge;
  } catch (...) {
    qp->Release();
    return ND_NO_MEMORY;
  }
  *out = qp;
  return ND_SUCCESS;
}

SoftQueuePair::SoftQueuePair(SoftAdapter* adapter, SoftCompletionQueue* rcq, SoftCompletionQueue* icq,
                             SoftSharedReceiveQueue* srq, VOID* context)
    : adapter_(adapter),
      stags_(adapter->stags()),
      rcq_(rcq),
      icq_(icq),
      srq_(srq),
      context_(context),
      rx_(adapter->stags(), *this) {
  adapter_->AddRef();
  rcq_->AddRef();
  icq_->AddRef();
  if (srq_ != nullptr) srq_->AddRef();
}

SoftQueuePair::~SoftQueuePair() {
  remove_progress_sources();  // normally done when the socket closed
  // Released without a flush (never connected, or after teardown): give back every pin, no completions.
  for (uint64_t s = sq_head_; s < sq_tail_; ++s) release_local_sges(stags_, sq_sges(s), sq_at(s).nsge);
  for (uint64_t s = rq_head_; s < rq_tail_; ++s) {
    RecvRequest& r = rq_[s % rq_depth_];
    release_local_sges(stags_, r.sge, r.nsge);
  }
  rx_.release();  // (before the adapter, and with it the STag table, may go)
  for (uint32_t i = 0; i < irq_count_; ++i) {
    InRead& in = irq_[(irq_head_ + i) % irq_.size()];
    if (in.pin != 0) stags_.unpin(in.pin);
  }
  if (sock_ != net::kInvalidSocket) {
    adapter_->engine().remove(sock_, this);
    if (doorbell_added_) adapter_->engine().remove(shm_->doorbell(), &doorbell_);
    net::close_socket(sock_, true);
  }
  if (srq_ != nullptr) srq_->Release();
  icq_->Release();
  rcq_->Release();
  adapter_->Release();
}

bool SoftQueuePair::connected() const {
  std::lock_guard<ndkit::CheckedMutex> lock(mu_);
  return state_ == State::kConnected;
}

HRESULT SoftQueuePair::QueryInterface(REFIID riid, VOID** ppv) {
  if (ppv != nullptr && IsEqualGUID(riid, IID_INDTransport)) {
    AddRef();
    *ppv = static_cast<INDTransport*>(this);
    return S_OK;
  }
  return ComObject::QueryInterface(riid, ppv);
}

HRESULT SoftQueuePair::GetTransport(ULONG* pTransport) {
  if (pTransport == nullptr) return ND_INVALID_PARAMETER_1;
  std::lock_guard<ndkit::CheckedMutex> lock(mu_);
  if (!ever_attached_) return ND_CONNECTION_INVALID;
  *pTransport = shm_used_ ? ND_TRANSPORT_SHM : ND_TRANSPORT_TCP;
  return ND_SUCCESS;
}

bool SoftQueuePair::same_host() const {
  std::lock_guard<ndkit::CheckedMutex> lock(mu_);
  return shm_ != nullptr;
}

HRESULT SoftQueuePair::Send(VOID* requestContext, const ND2_SGE sge[], ULONG nSge, ULONG flags) {
  if (flags & ~(ND_OP_FLAG_SILENT_SUCCESS | ND_OP_FLAG_READ_FENCE | ND_OP_FLAG_SEND_AND_SOLICIT_EVENT |
                ND_OP_FLAG_INLINE)) {
    return ND_INVALID_PARAMETER_4;
  }
  std::unique_lock<ndkit::CheckedMutex> lock(mu_);
  HRESULT hr = post_sq_locked(requestContext, Nd2RequestTypeSend, sge, nSge, flags, 0, 0);
  lock.unlock();
  kick_teardown();
  return hr;
}

HRESULT SoftQueuePair::Write(VOID* requestContext, const ND2_SGE sge[], ULONG nSge, UINT64 remoteAddress,
                             UINT32 remoteToken, ULONG flags) {
  if (flags & ~(ND_OP_FLAG_SILENT_SUCCESS | ND_OP_FLAG_READ_FENCE | ND_OP_FLAG_INLINE)) return ND_INVALID_PARAMETER_6;
  std::unique_lock<ndkit::CheckedMutex> lock(mu_);
  HRESULT hr = post_sq_locked(requestContext, Nd2RequestTypeWrite, sge, nSge, flags, remoteAddress, remoteToken);
  lock.unlock();
  kick_teardown();
  return hr;
}

HRESULT SoftQueuePair::Read(VOID* requestContext, const ND2_SGE sge[], ULONG nSge, UINT64 remoteAddress,
                            UINT32 remoteToken, ULONG flags) {
  if (flags & ~(ND_OP_FLAG_SILENT_SUCCESS | ND_OP_FLAG_READ_FENCE)) return ND_INVALID_PARAMETER_6;
  std::unique_lock<ndkit::CheckedMutex> lock(mu_);
  HRESULT hr = post_sq_locked(requestContext, Nd2RequestTypeRead, sge, nSge, flags, remoteAddress, remoteToken);
  lock.unlock();
  kick_teardown();
  return hr;
}

HRESULT SoftQueuePair::Receive(VOID* requestContext, const ND2_SGE sge[], ULONG nSge) {
  if (srq_ != nullptr) return ND_INVALID_DEVICE_REQUEST;  // receives come from the SRQ
  std::lock_guard<ndkit::CheckedMutex> lock(mu_);
  if (nSge > rq_max_sge_) return ND_DATA_OVERRUN;
  // Flushed (failed, closed or Flush()ed): the receive completes ND_CANCELED (docs/nd2.md §3.6).
  if (flushed_post_locked(rcq_, requestContext, Nd2RequestTypeReceive, false)) return ND_SUCCESS;
  if (rq_tail_ - rq_head_ >= rq_depth_) return ND_NO_MORE_ENTRIES;
  RecvRequest& r = rq_[rq_tail_ % rq_depth_];
  uint64_t total = 0;
  HRESULT hr = prepare_local_sges(stags_, sge, nSge, rq_max_sge_, access::kLocalWrite, r.sge, &total);
  if (hr != ND_SUCCESS) return hr;
  r.context = requestContext;
  r.nsge = nSge;
  r.length = total;
  ++rq_tail_;
  return ND_SUCCESS;
}

HRESULT SoftQueuePair::Bind(VOID* requestContext, IUnknown* pMemoryRegion, IUnknown* pMemoryWindow,
                            const VOID* pBuffer, SIZE_T cbBuffer, ULONG flags) {
  constexpr ULONG kRights = ND_OP_FLAG_ALLOW_READ | ND_OP_FLAG_ALLOW_WRITE;
  if ((flags & ~(kRights | ND_OP_FLAG_SILENT_SUCCESS | ND_OP_FLAG_READ_FENCE)) || (flags & kRights) == 0) {
    return ND_INVALID_PARAMETER_6;
  }
  auto* mr = from_unknown<SoftMemoryRegion, IND2MemoryRegion>(pMemoryRegion);
  if (mr == nullptr || mr->adapter() != adapter_) return ND_INVALID_PARAMETER_2;
  auto* mw = from_unknown<SoftMemoryWindow, IND2MemoryWindow>(pMemoryWindow);
  if (mw == nullptr || mw->adapter() != adapter_) return ND_INVALID_PARAMETER_3;
  if (pBuffer == nullptr) return ND_INVALID_PARAMETER_4;
  if (cbBuffer == 0) return ND_INVALID_PARAMETER_5;
  std::unique_lock<ndkit::CheckedMutex> lock(mu_);
  if (flushed_post_locked(icq_, requestContext, Nd2RequestTypeBind, true)) return ND_SUCCESS;
  HRESULT hr = check_post_locked();
  if (hr == ND_SUCCESS && sq_tail_ - sq_head_ >= sq_depth_) hr = ND_NO_MORE_ENTRIES;
  // The window is valid as soon as Bind returns; the completion follows in send-queue order.
  if (hr == ND_SUCCESS) hr = mw->bind(mr, reinterpret_cast<uintptr_t>(pBuffer), cbBuffer, flags);
  if (hr == ND_SUCCESS) {
    SqRequest& r = sq_at(sq_tail_);
    r = SqRequest{requestContext, Nd2RequestTypeBind, SqState::kQueued, false, flags, 0, 0, 0, 0, 0};
    ++sq_tail_;
    tx_progress_locked();
  }
  lock.unlock();
  kick_teardown();
  return hr;
}

HRESULT SoftQueuePair::Invalidate(VOID* requestContext, IUnknown* pMemoryWindow, ULONG flags) {
  if (flags & ~(ND_OP_FLAG_SILENT_SUCCESS | ND_OP_FLAG_READ_FENCE)) return ND_INVALID_PARAMETER_3;
  auto* mw = from_unknown<SoftMemoryWindow, IND2MemoryWindow>(pMemoryWindow);
  if (mw == nullptr || mw->adapter() != adapter_) return ND_INVALID_PARAMETER_2;
  std::unique_lock<ndkit::CheckedMutex> lock(mu_);
  if (flushed_post_locked(icq_, requestContext, Nd2RequestTypeInvalidate, true)) return ND_SUCCESS;
  HRESULT hr = check_post_locked();
  if (hr == ND_SUCCESS && sq_tail_ - sq_head_ >= sq_depth_) hr = ND_NO_MORE_ENTRIES;
  if (hr == ND_SUCCESS) hr = mw->invalidate();
  if (hr == ND_SUCCESS) {
    SqRequest& r = sq_at(sq_tail_);
    r = SqRequest{requestContext, Nd2RequestTypeInvalidate, SqState::kQueued, false, flags, 0, 0, 0, 0, 0};
    ++sq_tail_;
    tx_progress_locked();
  }
  lock.unlock();
  kick_teardown();
  return hr;
}

HRESULT SoftQueuePair::Flush() {
  std::unique_lock<ndkit::CheckedMutex> lock(mu_);
  switch (state_) {
    case State::kIdle:
    case State::kConnecting:
      // Not connected: only receives can be outstanding.
      state_ = State::kError;
      fail_locked(ND_CANCELED, false, false, kNoOffender, ND_CANCELED, ND_CANCELED);
      break;
    case State::kConnected:
      fail_locked(ND_CANCELED, true, false, kNoOffender, ND_CANCELED, ND_CANCELED);
      break;
    default:
      break;  // already flushed
  }
  lock.unlock();
  kick_teardown();
  return ND_SUCCESS;
}

}  // namespace netdirect::soft

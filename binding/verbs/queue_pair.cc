// VerbsQueuePair: an RC ibv_qp, moved to INIT at creation so that ND's Receive before connecting works; the
// connector moves it on (RTR/RTS on IB and RoCE; the kernel's iWARP CM does it on iWARP). wr_id indexes a slot
// that keeps the ND request context and type: a flushed work completion has no valid opcode, so the type cannot
// come from the completion (docs/verbs.md §2).
#include <new>

#include "verbs/objects.h"

namespace netdirect::verbs {

namespace {
constexpr uint64_t kRecvBit = kWrRecv;
}

HRESULT VerbsQueuePair::create(VerbsAdapter* adapter, VerbsCompletionQueue* rcq, VerbsCompletionQueue* icq,
                               VerbsSharedReceiveQueue* srq, void* context, ULONG rqDepth, ULONG sqDepth,
                               ULONG rqSge, ULONG sqSge, ULONG inlineSize, VerbsQueuePair** out) {
  auto* q = new (std::nothrow) VerbsQueuePair(adapter, context);
  if (q == nullptr) return ND_NO_MEMORY;
  ibv_qp_init_attr a{};
  a.send_cq = icq->cq();
  a.recv_cq = rcq->cq();
  a.qp_type = IBV_QPT_RC;
  a.sq_sig_all = 1;  // every request completes; silent successes are dropped when polled
  a.cap.max_send_wr = sqDepth;
  a.cap.max_recv_wr = rqDepth;
  a.cap.max_send_sge = sqSge;
  a.cap.max_recv_sge = rqSge;
  a.cap.max_inline_data = inlineSize;
  if (srq != nullptr) {
    a.srq = srq->srq();
    a.cap.max_recv_wr = 0;
    a.cap.max_recv_sge = 0;
    rqDepth = 0;
    rqSge = 0;
  }
  q->qp_ = adapter->lib().create_qp(adapter->pd(), &a);
  if (q->qp_ == nullptr) {
    const HRESULT hr = status_of_errno(errno);
    q->Release();
    return hr == ND_INVALID_PARAMETER ? ND_INSUFFICIENT_RESOURCES : hr;
  }
  q->rcq_ = rcq;
  q->icq_ = icq;
  rcq->AddRef();
  icq->AddRef();
  if (srq != nullptr) {
    q->srq_ = srq;
    srq->AddRef();
  }
  q->sq_sge_ = sqSge;
  q->rq_sge_ = rqSge;
  q->inline_ = inlineSize;
  q->slots_.resize(sqDepth + rqDepth);
  for (ULONG i = sqDepth; i > 0; --i) q->free_send_.push_back(i - 1);
  for (ULONG i = sqDepth + rqDepth; i > sqDepth; --i) q->free_recv_.push_back(i - 1);
  ibv_qp_attr init{};
  init.qp_state = IBV_QPS_INIT;
  init.pkey_index = 0;
  init.port_num = adapter->port();  // the port the adapter's address is on (a RoCE/IB path's AV names it too)
  init.qp_access_flags = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_WRITE;
  if (adapter->lib().modify_qp(q->qp_, &init,
                               IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS) != 0) {
    const HRESULT hr = status_of_errno(errno);
    q->Release();
    return hr;
  }
  adapter->add_qp(q->qp_->qp_num, q);
  *out = q;
  return ND_SUCCESS;
}

VerbsQueuePair::~VerbsQueuePair() {
  if (qp_ != nullptr) {
    adapter_->remove_qp(qp_->qp_num);
    adapter_->lib().destroy_qp(qp_);
  }
  if (rcq_ != nullptr) rcq_->Release();
  if (icq_ != nullptr) icq_->Release();
  if (srq_ != nullptr) srq_->Release();
  adapter_->Release();
}

HRESULT VerbsQueuePair::modify_by_cm(rdma_cm_id* id, ibv_qp_state state) {
  ibv_qp_attr attr{};
  int mask = 0;
  attr.qp_state = state;
  if (adapter_->lib().init_qp_attr(id, &attr, &mask) != 0) return status_of_errno(errno);
  if (adapter_->lib().modify_qp(qp_, &attr, mask) != 0) return status_of_errno(errno);
  return ND_SUCCESS;
}

void VerbsQueuePair::sweep() {
  errored_.store(true);
  ibv_qp_attr attr{};
  attr.qp_state = IBV_QPS_ERR;
  adapter_->lib().modify_qp(qp_, &attr, IBV_QP_STATE);  // the device flushes: IBV_WC_WR_FLUSH_ERR -> ND_CANCELED
  rcq_->drain_to_stash();
  if (icq_ != rcq_) icq_->drain_to_stash();
  std::vector<ND2_RESULT> sends, recvs;
  {
    std::lock_guard<ndkit::CheckedMutex> lock(slots_mu_);
    for (size_t i = 0; i < slots_.size(); ++i) {
      Slot& s = slots_[i];
      if (!s.live) continue;
      s.live = false;
      ND2_RESULT r{};
      r.Status = ND_CANCELED;
      r.QueuePairContext = context_;
      r.RequestContext = s.context;
      r.RequestType = s.type;
      (s.type == Nd2RequestTypeReceive ? recvs : sends).push_back(r);
    }
  }
  if (!recvs.empty()) rcq_->append_and_fire(recvs);
  if (!sends.empty()) icq_->append_and_fire(sends);
}

HRESULT VerbsQueuePair::Flush() {
  sweep();
  return ND_SUCCESS;
}

bool VerbsQueuePair::alloc_slot(bool send, void* ctx, ND2_REQUEST_TYPE type, bool silent, uint64_t* wr_id) {
  std::lock_guard<ndkit::CheckedMutex> lock(slots_mu_);
  std::vector<uint32_t>& free = send ? free_send_ : free_recv_;
  if (free.empty()) return false;
  const uint32_t i = free.back();
  free.pop_back();
  slots_[i] = Slot{ctx, type, silent, true};
  *wr_id = (send ? 0 : kRecvBit) | i;
  return true;
}

Slot VerbsQueuePair::take_slot(uint64_t wr_id) {
  std::lock_guard<ndkit::CheckedMutex> lock(slots_mu_);
  const uint32_t i = static_cast<uint32_t>(wr_id);
  if (i >= slots_.size()) return Slot{};
  Slot s = slots_[i];
  if (!s.live) return s;  // swept already; after a sweep no slot is handed out again
  slots_[i].live = false;
  (wr_id & kRecvBit ? free_recv_ : free_send_).push_back(i);
  return s;
}

HRESULT VerbsQueuePair::fill_sges(const ND2_SGE* sge, ULONG nSge, ULONG max, bool receive, ibv_sge* out, ULONG* n,
                                  size_t* total) {
  if (nSge > max) return ND_DATA_OVERRUN;
  if (nSge > 0 && sge == nullptr) return ND_INVALID_PARAMETER_2;
  return copy_sges(sge, nSge, receive, out, n, total) ? ND_SUCCESS : ND_DATA_OVERRUN;
}

HRESULT VerbsQueuePair::post_send(void* ctx, ND2_REQUEST_TYPE type, const ND2_SGE* sge, ULONG nSge, ULONG flags,
                                  ibv_wr_opcode op, UINT64 remote, UINT32 rkey) {
  if (errored_.load()) return ND_CONNECTION_INVALID;
  const bool inl = (flags & ND_OP_FLAG_INLINE) != 0;
  ibv_sge list[64];
  ULONG n = 0;
  size_t total = 0;
  HRESULT hr = fill_sges(sge, nSge, std::min<ULONG>(sq_sge_, 64), false, list, &n, &total);
  if (hr != ND_SUCCESS) return hr;
  if (inl && total > inline_) return ND_BUFFER_OVERFLOW;
  // ND: a request longer than MaxTransferLength fails at post with ND_BUFFER_OVERFLOW (devices do not all check
  // it: rxe takes the post and fails the request later with a remote access error).
  if (total > adapter_->max_transfer()) return ND_BUFFER_OVERFLOW;
  ibv_send_wr wr{};
  if (!alloc_slot(true, ctx, type, (flags & ND_OP_FLAG_SILENT_SUCCESS) != 0, &wr.wr_id)) return ND_NO_MORE_ENTRIES;
  wr.sg_list = n > 0 ? list : nullptr;
  wr.num_sge = static_cast<int>(n);
  wr.opcode = op;
  wr.send_flags = IBV_SEND_SIGNALED | (inl ? IBV_SEND_INLINE : 0) |
                  ((flags & ND_OP_FLAG_READ_FENCE) ? IBV_SEND_FENCE : 0) |
                  ((flags & ND_OP_FLAG_SEND_AND_SOLICIT_EVENT) ? IBV_SEND_SOLICITED : 0);
  wr.wr.rdma.remote_addr = remote;
  wr.wr.rdma.rkey = rkey;
  ibv_send_wr* bad = nullptr;
  const int err = errno_of(ibv_post_send(qp_, &wr, &bad));
  if (err != 0) {
    take_slot(wr.wr_id);
    return err == ENOMEM ? ND_NO_MORE_ENTRIES : (err == EINVAL ? ND_CONNECTION_INVALID : status_of_errno(err));
  }
  return ND_SUCCESS;
}

HRESULT VerbsQueuePair::Send(VOID* requestContext, const ND2_SGE sge[], ULONG nSge, ULONG flags) {
  if (flags & ~(ND_OP_FLAG_SILENT_SUCCESS | ND_OP_FLAG_READ_FENCE | ND_OP_FLAG_SEND_AND_SOLICIT_EVENT |
                ND_OP_FLAG_INLINE)) {
    return ND_INVALID_PARAMETER_4;
  }
  return post_send(requestContext, Nd2RequestTypeSend, sge, nSge, flags, IBV_WR_SEND, 0, 0);
}

HRESULT VerbsQueuePair::Write(VOID* requestContext, const ND2_SGE sge[], ULONG nSge, UINT64 remoteAddress,
                              UINT32 remoteToken, ULONG flags) {
  if (flags & ~(ND_OP_FLAG_SILENT_SUCCESS | ND_OP_FLAG_READ_FENCE | ND_OP_FLAG_INLINE)) return ND_INVALID_PARAMETER_6;
  return post_send(requestContext, Nd2RequestTypeWrite, sge, nSge, flags, IBV_WR_RDMA_WRITE, remoteAddress,
                   remoteToken);
}

HRESULT VerbsQueuePair::Read(VOID* requestContext, const ND2_SGE sge[], ULONG nSge, UINT64 remoteAddress,
                             UINT32 remoteToken, ULONG flags) {
  if (flags & ~(ND_OP_FLAG_SILENT_SUCCESS | ND_OP_FLAG_READ_FENCE)) return ND_INVALID_PARAMETER_6;
  return post_send(requestContext, Nd2RequestTypeRead, sge, nSge, flags, IBV_WR_RDMA_READ, remoteAddress,
                   remoteToken);
}

HRESULT VerbsQueuePair::Receive(VOID* requestContext, const ND2_SGE sge[], ULONG nSge) {
  if (srq_ != nullptr) return ND_INVALID_DEVICE_REQUEST;  // receives come from the shared receive queue
  if (errored_.load()) return ND_CONNECTION_INVALID;
  ibv_sge list[64];
  ULONG n = 0;
  size_t total = 0;
  HRESULT hr = fill_sges(sge, nSge, std::min<ULONG>(rq_sge_, 64), true, list, &n, &total);
  if (hr != ND_SUCCESS) return hr;
  ibv_recv_wr wr{};
  if (!alloc_slot(false, requestContext, Nd2RequestTypeReceive, false, &wr.wr_id)) return ND_NO_MORE_ENTRIES;
  wr.sg_list = n > 0 ? list : nullptr;
  wr.num_sge = static_cast<int>(n);
  ibv_recv_wr* bad = nullptr;
  const int err = errno_of(ibv_post_recv(qp_, &wr, &bad));
  if (err != 0) {
    take_slot(wr.wr_id);
    return err == ENOMEM ? ND_NO_MORE_ENTRIES : (err == EINVAL ? ND_CONNECTION_INVALID : status_of_errno(err));
  }
  return ND_SUCCESS;
}

HRESULT VerbsQueuePair::post_bind(void* ctx, ND2_REQUEST_TYPE type, VerbsMemoryWindow* mw, VerbsMemoryRegion* mr,
                                  uint64_t addr, uint64_t length, int access, ULONG flags) {
  if (errored_.load()) return ND_CONNECTION_INVALID;
  ibv_mr* m = mr->mr();
  if (m == nullptr) return ND_ACCESS_VIOLATION;  // not registered (any more)
  ibv_mw_bind b{};
  if (!alloc_slot(true, ctx, type, (flags & ND_OP_FLAG_SILENT_SUCCESS) != 0, &b.wr_id)) return ND_NO_MORE_ENTRIES;
  b.send_flags = IBV_SEND_SIGNALED | ((flags & ND_OP_FLAG_READ_FENCE) ? IBV_SEND_FENCE : 0);
  b.bind_info.mr = m;
  b.bind_info.addr = addr;
  b.bind_info.length = length;
  b.bind_info.mw_access_flags = static_cast<unsigned int>(access);
  // The window's rkey changes when the bind is posted (ibv_bind_mw(3)); one post at a time per window.
  std::lock_guard<ndkit::CheckedMutex> lock(mw->post_mu());
  const int err = errno_of(ibv_bind_mw(qp_, mw->mw(), &b));
  if (err != 0) {
    take_slot(b.wr_id);
    return err == ENOMEM ? ND_NO_MORE_ENTRIES
                         : err == EPERM ? ND_ACCESS_VIOLATION
                                        : (err == EINVAL ? ND_INVALID_PARAMETER : status_of_errno(err));
  }
  mw->set_region(mr);
  return ND_SUCCESS;
}

HRESULT VerbsQueuePair::Bind(VOID* requestContext, IUnknown* pMemoryRegion, IUnknown* pMemoryWindow,
                             const VOID* pBuffer, SIZE_T cbBuffer, ULONG flags) {
  auto* mr = from_unknown<VerbsMemoryRegion, IND2MemoryRegion>(pMemoryRegion);
  if (mr == nullptr || mr->adapter() != adapter_) return ND_INVALID_PARAMETER_2;
  auto* mw = from_unknown<VerbsMemoryWindow, IND2MemoryWindow>(pMemoryWindow);
  if (mw == nullptr || mw->adapter() != adapter_) return ND_INVALID_PARAMETER_3;
  if (pBuffer == nullptr) return ND_INVALID_PARAMETER_4;
  if (cbBuffer == 0) return ND_INVALID_BUFFER_SIZE;
  if (flags & ~(ND_OP_FLAG_SILENT_SUCCESS | ND_OP_FLAG_READ_FENCE | ND_OP_FLAG_ALLOW_READ | ND_OP_FLAG_ALLOW_WRITE)) {
    return ND_INVALID_PARAMETER_6;
  }
  ibv_mr* m = mr->mr();
  const uint64_t addr = reinterpret_cast<uintptr_t>(pBuffer);
  const uint64_t base = m != nullptr ? reinterpret_cast<uintptr_t>(m->addr) : 0;
  if (m == nullptr || addr < base || addr + cbBuffer < addr || addr + cbBuffer > base + m->length) {
    return ND_ACCESS_VIOLATION;  // the window must lie inside the registered region
  }
  const int access = ((flags & ND_OP_FLAG_ALLOW_READ) ? IBV_ACCESS_REMOTE_READ : 0) |
                     ((flags & ND_OP_FLAG_ALLOW_WRITE) ? IBV_ACCESS_REMOTE_WRITE : 0);
  return post_bind(requestContext, Nd2RequestTypeBind, mw, mr, addr, cbBuffer, access, flags);
}

HRESULT VerbsQueuePair::Invalidate(VOID* requestContext, IUnknown* pMemoryWindow, ULONG flags) {
  auto* mw = from_unknown<VerbsMemoryWindow, IND2MemoryWindow>(pMemoryWindow);
  if (mw == nullptr || mw->adapter() != adapter_) return ND_INVALID_PARAMETER_2;
  if (flags & ~(ND_OP_FLAG_SILENT_SUCCESS | ND_OP_FLAG_READ_FENCE)) return ND_INVALID_PARAMETER_3;
  VerbsMemoryRegion* mr = mw->region();
  if (mr == nullptr) return ND_INVALID_DEVICE_REQUEST;  // never bound
  // A type 1 window is invalidated by binding it with length 0 (ibv_bind_mw(3)); its rkey changes again.
  return post_bind(requestContext, Nd2RequestTypeInvalidate, mw, mr, 0, 0, 0, flags);
}

}  // namespace netdirect::verbs

// IND2QueuePair of the software provider, the ND face: creation and the ND methods (Send, Write, Read, Receive,
// Bind, Invalidate, Flush), which check their arguments and hand the request to the state machine in qp/ (qp.h:
// QueuePairCore). Design: soft/qp/qp.h.
#include "soft/queue_pair.h"

#include <algorithm>
#include <new>

#include "soft/adapter.h"
#include "soft/completion_queue.h"
#include "soft/memory_region.h"
#include "soft/memory_window.h"

namespace netdirect::soft {

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
  const HRESULT hr = qp->allocate(receiveDepth, initiatorDepth, maxReceiveSge, maxInitiatorSge, inlineDataSize);
  if (hr != ND_SUCCESS) {
    qp->Release();
    return hr;
  }
  *out = qp;
  return ND_SUCCESS;
}

SoftQueuePair::SoftQueuePair(SoftAdapter* adapter, SoftCompletionQueue* rcq, SoftCompletionQueue* icq,
                             SoftSharedReceiveQueue* srq, VOID* context)
    : QueuePairCore(adapter->engine(), adapter->stags(), rcq, icq, srq, context),
      adapter_(adapter),
      receive_cq_(rcq),
      initiator_cq_(icq),
      srq_object_(srq) {
  adapter_->AddRef();
  receive_cq_->AddRef();
  initiator_cq_->AddRef();
  if (srq_object_ != nullptr) srq_object_->AddRef();
}

SoftQueuePair::~SoftQueuePair() {
  destroy();  // (before the adapter, and with it the engine and the STag table, may go)
  if (srq_object_ != nullptr) srq_object_->Release();
  initiator_cq_->Release();
  receive_cq_->Release();
  adapter_->Release();
}

HRESULT SoftQueuePair::QueryInterface(REFIID riid, VOID** ppv) {
  if (ppv != nullptr && IsEqualGUID(riid, IID_INDTransport)) {
    AddRef();
    *ppv = static_cast<INDTransport*>(this);
    return S_OK;
  }
  if (ppv != nullptr && IsEqualGUID(riid, IID_INDPostBatch)) {
    AddRef();
    *ppv = static_cast<INDPostBatch*>(this);
    return S_OK;
  }
  return ComObject::QueryInterface(riid, ppv);
}

HRESULT SoftQueuePair::BeginBatch() {
  begin_batch();
  return ND_SUCCESS;
}

HRESULT SoftQueuePair::EndBatch() {
  end_batch();
  return ND_SUCCESS;
}

HRESULT SoftQueuePair::GetTransport(ULONG* pTransport) {
  if (pTransport == nullptr) return ND_INVALID_PARAMETER_1;
  bool shm = false;
  if (!transport(&shm)) return ND_CONNECTION_INVALID;
  *pTransport = shm ? ND_TRANSPORT_SHM : ND_TRANSPORT_TCP;
  return ND_SUCCESS;
}

HRESULT SoftQueuePair::Send(VOID* requestContext, const ND2_SGE sge[], ULONG nSge, ULONG flags) {
  if (flags & ~(ND_OP_FLAG_SILENT_SUCCESS | ND_OP_FLAG_READ_FENCE | ND_OP_FLAG_SEND_AND_SOLICIT_EVENT |
                ND_OP_FLAG_INLINE)) {
    return ND_INVALID_PARAMETER_4;
  }
  return post_send_queue(requestContext, Nd2RequestTypeSend, sge, nSge, flags, 0, 0);
}

HRESULT SoftQueuePair::Write(VOID* requestContext, const ND2_SGE sge[], ULONG nSge, UINT64 remoteAddress,
                             UINT32 remoteToken, ULONG flags) {
  if (flags & ~(ND_OP_FLAG_SILENT_SUCCESS | ND_OP_FLAG_READ_FENCE | ND_OP_FLAG_INLINE)) return ND_INVALID_PARAMETER_6;
  return post_send_queue(requestContext, Nd2RequestTypeWrite, sge, nSge, flags, remoteAddress, remoteToken);
}

HRESULT SoftQueuePair::Read(VOID* requestContext, const ND2_SGE sge[], ULONG nSge, UINT64 remoteAddress,
                            UINT32 remoteToken, ULONG flags) {
  if (flags & ~(ND_OP_FLAG_SILENT_SUCCESS | ND_OP_FLAG_READ_FENCE)) return ND_INVALID_PARAMETER_6;
  return post_send_queue(requestContext, Nd2RequestTypeRead, sge, nSge, flags, remoteAddress, remoteToken);
}

HRESULT SoftQueuePair::Receive(VOID* requestContext, const ND2_SGE sge[], ULONG nSge) {
  return post_receive(requestContext, sge, nSge);  // ND_INVALID_DEVICE_REQUEST with an SRQ
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
  // The window is valid as soon as Bind returns; the completion follows in send-queue order.
  return post_window(requestContext, Nd2RequestTypeBind, flags,
                     [&] { return mw->bind(mr, reinterpret_cast<uintptr_t>(pBuffer), cbBuffer, flags); });
}

HRESULT SoftQueuePair::Invalidate(VOID* requestContext, IUnknown* pMemoryWindow, ULONG flags) {
  if (flags & ~(ND_OP_FLAG_SILENT_SUCCESS | ND_OP_FLAG_READ_FENCE)) return ND_INVALID_PARAMETER_3;
  auto* mw = from_unknown<SoftMemoryWindow, IND2MemoryWindow>(pMemoryWindow);
  if (mw == nullptr || mw->adapter() != adapter_) return ND_INVALID_PARAMETER_2;
  return post_window(requestContext, Nd2RequestTypeInvalidate, flags, [&] { return mw->invalidate(); });
}

HRESULT SoftQueuePair::Flush() {
  flush();
  return ND_SUCCESS;
}

}  // namespace netdirect::soft

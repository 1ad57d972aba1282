// IND2QueuePair of the software provider, the ND face (SoftQueuePair): creation and its limits, IUnknown,
// INDTransport and INDPostBatch, and the IND2QueuePair methods (Send, Write, Read, Receive, Bind, Invalidate, Flush),
// which check their arguments, resolve the memory objects they name and hand the request to the state machine they
// derive from (QueuePairCore, soft/qp/qp.h: the queues, transmit and receive, completions, errors, teardown; the
// design of the data path is written there). The face owns the references to its adapter, CQs and SRQ; the state machine sees
// those objects only through soft/qp/ports.h.
#ifndef NETDIRECT_SOFT_QUEUE_PAIR_H_
#define NETDIRECT_SOFT_QUEUE_PAIR_H_

#include "nd/netdirect_ext.h"
#include "soft/completion_queue.h"
#include "soft/object.h"
#include "soft/qp/qp.h"
#include "soft/shared_receive_queue.h"

namespace netdirect::soft {

class SoftAdapter;

class SoftQueuePair final : public ComObject<IND2QueuePair>, public INDTransport, public INDPostBatch,
                            public QueuePairCore {
 public:
  // ND_INVALID_PARAMETER_2/_3 for missing CQs (checked by the adapter), _5 receive depth (0 without SRQ or
  // above limits), _6 initiator depth, _7 receive SGEs, _8 initiator SGEs, _9 inline size.
  static HRESULT create(SoftAdapter* adapter, SoftCompletionQueue* receiveCq, SoftCompletionQueue* initiatorCq,
                        SoftSharedReceiveQueue* srq /*nullable*/, VOID* context, ULONG receiveDepth,
                        ULONG initiatorDepth, ULONG maxReceiveSge, ULONG maxInitiatorSge, ULONG inlineDataSize,
                        SoftQueuePair** out);

  // IUnknown, for all three interfaces (INDTransport and INDPostBatch besides the ComObject's own ids).
  HRESULT ND_CALL QueryInterface(REFIID riid, VOID** ppv) override;
  ULONG ND_CALL AddRef() override { return ComObject::AddRef(); }
  ULONG ND_CALL Release() override { return ComObject::Release(); }
  // INDTransport (nd/netdirect_ext.h): ND_TRANSPORT_SHM for a same-host connection (docs/shm.md), else TCP.
  HRESULT ND_CALL GetTransport(ULONG* pTransport) override;
  // INDPostBatch (nd/netdirect_ext.h): the posts in between leave in one gather send (QueuePairCore::begin_batch).
  HRESULT ND_CALL BeginBatch() override;
  HRESULT ND_CALL EndBatch() override;

  // IND2QueuePair
  HRESULT ND_CALL Flush() override;
  HRESULT ND_CALL Send(VOID* requestContext, const ND2_SGE sge[], ULONG nSge, ULONG flags) override;
  HRESULT ND_CALL Receive(VOID* requestContext, const ND2_SGE sge[], ULONG nSge) override;
  HRESULT ND_CALL Bind(VOID* requestContext, IUnknown* pMemoryRegion, IUnknown* pMemoryWindow, const VOID* pBuffer,
                       SIZE_T cbBuffer, ULONG flags) override;
  HRESULT ND_CALL Invalidate(VOID* requestContext, IUnknown* pMemoryWindow, ULONG flags) override;
  HRESULT ND_CALL Read(VOID* requestContext, const ND2_SGE sge[], ULONG nSge, UINT64 remoteAddress,
                       UINT32 remoteToken, ULONG flags) override;
  HRESULT ND_CALL Write(VOID* requestContext, const ND2_SGE sge[], ULONG nSge, UINT64 remoteAddress,
                        UINT32 remoteToken, ULONG flags) override;

  SoftAdapter* adapter() const { return adapter_; }
  SoftSharedReceiveQueue* srq() const { return srq_object_; }

 private:
  SoftQueuePair(SoftAdapter* adapter, SoftCompletionQueue* rcq, SoftCompletionQueue* icq,
                SoftSharedReceiveQueue* srq, VOID* context);
  ~SoftQueuePair() override;

  // QueuePairCore: its references are this object's COM count.
  void hold() override { AddRef(); }
  void drop() override { Release(); }

  SoftAdapter* adapter_;
  SoftCompletionQueue* receive_cq_;
  SoftCompletionQueue* initiator_cq_;
  SoftSharedReceiveQueue* srq_object_;  // nullable
};

}  // namespace netdirect::soft

#endif  // NETDIRECT_SOFT_QUEUE_PAIR_H_

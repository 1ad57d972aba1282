// ND v2 service provider interfaces (microsoft/NetworkDirect ndspi.h, released ND2 header — NOT the
// incompatible pre-release draft, docs/nd2.md §1). Slot order is the ABI: never reorder, never add a
// virtual destructor. test/native/nd_abi_test.cc checks every slot against docs/nd2.md §2.
#pragma once

#define ND_DEFINE_IID_(name, l, w1, w2, b1, b2, b3, b4, b5, b6, b7, b8) \
  inline const GUID name = {l, w1, w2, {b1, b2, b3, b4, b5, b6, b7, b8}};

ND_DEFINE_IID_(IID_IND2Provider, 0x49eae6c1, 0x76c4, 0x46d0, 0x80, 0x03, 0x5c, 0x2e, 0xaa, 0x2c, 0x9a, 0x8e)
ND_DEFINE_IID_(IID_IND2Adapter, 0xd89c798c, 0x4823, 0x4d69, 0x84, 0x6c, 0xdf, 0xdc, 0xcf, 0xf9, 0xe5, 0xf3)
ND_DEFINE_IID_(IID_IND2Overlapped, 0xabf72719, 0xb016, 0x4a40, 0xa6, 0xf7, 0x62, 0x27, 0x91, 0xa7, 0x04, 0x4c)
ND_DEFINE_IID_(IID_IND2CompletionQueue, 0x20cc445e, 0x64a0, 0x4cbb, 0xaa, 0x75, 0xf6, 0xa7, 0x25, 0x1f, 0xda, 0x9e)
ND_DEFINE_IID_(IID_IND2SharedReceiveQueue, 0xaabd67dc, 0x459a, 0x4db1, 0x82, 0x6b, 0x56, 0xcf, 0xcc, 0x27, 0x88, 0x83)
ND_DEFINE_IID_(IID_IND2MemoryRegion, 0x55dfea2f, 0xbc56, 0x4982, 0x8a, 0x45, 0x03, 0x01, 0xbe, 0x46, 0xc4, 0x13)
ND_DEFINE_IID_(IID_IND2MemoryWindow, 0x070fe1f5, 0x0ab5, 0x4361, 0x88, 0xdb, 0x97, 0x4b, 0xa7, 0x04, 0xd4, 0xb9)
ND_DEFINE_IID_(IID_IND2QueuePair, 0xeef2f332, 0xb75d, 0x4063, 0xbc, 0xe3, 0x3a, 0x0b, 0xad, 0x2d, 0x02, 0xce)
ND_DEFINE_IID_(IID_IND2Connector, 0x7dd615c4, 0x6b4c, 0x4866, 0x95, 0x0c, 0xf3, 0xb1, 0xd2, 0x5a, 0x53, 0x02)
ND_DEFINE_IID_(IID_IND2Listener, 0x65d23d83, 0x3a57, 0x4e02, 0x86, 0xa4, 0x35, 0x01, 0x65, 0xc2, 0xd1, 0x30)
#undef ND_DEFINE_IID_

struct IND2Provider : public IUnknown {
  virtual HRESULT ND_CALL QueryAddressList(SOCKET_ADDRESS_LIST* pAddressList, ULONG* pcbAddressList) = 0;
  virtual HRESULT ND_CALL ResolveAddress(const struct sockaddr* pAddress, ULONG cbAddress, UINT64* pAdapterId) = 0;
  virtual HRESULT ND_CALL OpenAdapter(REFIID iid, UINT64 adapterId, VOID** ppAdapter) = 0;
};

struct IND2Adapter : public IUnknown {
  virtual HRESULT ND_CALL CreateOverlappedFile(HANDLE* phOverlappedFile) = 0;
  virtual HRESULT ND_CALL Query(ND2_ADAPTER_INFO* pInfo, ULONG* pcbInfo) = 0;
  virtual HRESULT ND_CALL QueryAddressList(SOCKET_ADDRESS_LIST* pAddressList, ULONG* pcbAddressList) = 0;
  virtual HRESULT ND_CALL CreateCompletionQueue(REFIID iid, HANDLE hOverlappedFile, ULONG queueDepth, USHORT group,
                                                KAFFINITY affinity, VOID** ppCompletionQueue) = 0;
  virtual HRESULT ND_CALL CreateMemoryRegion(REFIID iid, HANDLE hOverlappedFile, VOID** ppMemoryRegion) = 0;
  virtual HRESULT ND_CALL CreateMemoryWindow(REFIID iid, VOID** ppMemoryWindow) = 0;
  virtual HRESULT ND_CALL CreateSharedReceiveQueue(REFIID iid, HANDLE hOverlappedFile, ULONG queueDepth,
                                                   ULONG maxRequestSge, ULONG notifyThreshold, USHORT group,
                                                   KAFFINITY affinity, VOID** ppSharedReceiveQueue) = 0;
  virtual HRESULT ND_CALL CreateQueuePair(REFIID iid, IUnknown* pReceiveCompletionQueue,
                                          IUnknown* pInitiatorCompletionQueue, VOID* context,
                                          ULONG receiveQueueDepth, ULONG initiatorQueueDepth,
                                          ULONG maxReceiveRequestSge, ULONG maxInitiatorRequestSge,
                                          ULONG inlineDataSize, VOID** ppQueuePair) = 0;
  virtual HRESULT ND_CALL CreateQueuePairWithSrq(REFIID iid, IUnknown* pReceiveCompletionQueue,
                                                 IUnknown* pInitiatorCompletionQueue,
                                                 IUnknown* pSharedReceiveQueue, VOID* context,
                                                 ULONG initiatorQueueDepth, ULONG maxInitiatorRequestSge,
                                                 ULONG inlineDataSize, VOID** ppQueuePair) = 0;
  virtual HRESULT ND_CALL CreateConnector(REFIID iid, HANDLE hOverlappedFile, VOID** ppConnector) = 0;
  virtual HRESULT ND_CALL CreateListener(REFIID iid, HANDLE hOverlappedFile, VOID** ppListener) = 0;
};

struct IND2Overlapped : public IUnknown {
  virtual HRESULT ND_CALL CancelOverlappedRequests() = 0;
  virtual HRESULT ND_CALL GetOverlappedResult(OVERLAPPED* pOverlapped, BOOL bWait) = 0;
};

struct IND2CompletionQueue : public IND2Overlapped {
  virtual HRESULT ND_CALL GetNotifyAffinity(USHORT* pGroup, KAFFINITY* pAffinity) = 0;
  virtual HRESULT ND_CALL Resize(ULONG queueDepth) = 0;
  virtual HRESULT ND_CALL Notify(ULONG type, OVERLAPPED* pOverlapped) = 0;
  virtual ULONG ND_CALL GetResults(ND2_RESULT results[], ULONG nResults) = 0;
};

struct IND2SharedReceiveQueue : public IND2Overlapped {
  virtual HRESULT ND_CALL GetNotifyAffinity(USHORT* pGroup, KAFFINITY* pAffinity) = 0;
  virtual HRESULT ND_CALL Modify(ULONG queueDepth, ULONG notifyThreshold) = 0;
  virtual HRESULT ND_CALL Notify(OVERLAPPED* pOverlapped) = 0;
  virtual HRESULT ND_CALL Receive(VOID* requestContext, const ND2_SGE sge[], ULONG nSge) = 0;
};

struct IND2MemoryRegion : public IND2Overlapped {
  virtual HRESULT ND_CALL Register(const VOID* pBuffer, SIZE_T cbBuffer, ULONG flags, OVERLAPPED* pOverlapped) = 0;
  virtual HRESULT ND_CALL Deregister(OVERLAPPED* pOverlapped) = 0;
  virtual UINT32 ND_CALL GetLocalToken() = 0;
  virtual UINT32 ND_CALL GetRemoteToken() = 0;
};

struct IND2MemoryWindow : public IUnknown {
  virtual UINT32 ND_CALL GetRemoteToken() = 0;
};

struct IND2QueuePair : public IUnknown {
  virtual HRESULT ND_CALL Flush() = 0;
  virtual HRESULT ND_CALL Send(VOID* requestContext, const ND2_SGE sge[], ULONG nSge, ULONG flags) = 0;
  virtual HRESULT ND_CALL Receive(VOID* requestContext, const ND2_SGE sge[], ULONG nSge) = 0;
  virtual HRESULT ND_CALL Bind(VOID* requestContext, IUnknown* pMemoryRegion, IUnknown* pMemoryWindow,
                               const VOID* pBuffer, SIZE_T cbBuffer, ULONG flags) = 0;
  virtual HRESULT ND_CALL Invalidate(VOID* requestContext, IUnknown* pMemoryWindow, ULONG flags) = 0;
  virtual HRESULT ND_CALL Read(VOID* requestContext, const ND2_SGE sge[], ULONG nSge, UINT64 remoteAddress,
                               UINT32 remoteToken, ULONG flags) = 0;
  virtual HRESULT ND_CALL Write(VOID* requestContext, const ND2_SGE sge[], ULONG nSge, UINT64 remoteAddress,
                                UINT32 remoteToken, ULONG flags) = 0;
};

struct IND2Connector : public IND2Overlapped {
  virtual HRESULT ND_CALL Bind(const struct sockaddr* pAddress, ULONG cbAddress) = 0;
  virtual HRESULT ND_CALL Connect(IUnknown* pQueuePair, const struct sockaddr* pDestinationAddress,
                                  ULONG cbDestinationAddress, ULONG inboundReadLimit, ULONG outboundReadLimit,
                                  const VOID* pPrivateData, ULONG cbPrivateData, OVERLAPPED* pOverlapped) = 0;
  virtual HRESULT ND_CALL CompleteConnect(OVERLAPPED* pOverlapped) = 0;
  virtual HRESULT ND_CALL Accept(IUnknown* pQueuePair, ULONG inboundReadLimit, ULONG outboundReadLimit,
                                 const VOID* pPrivateData, ULONG cbPrivateData, OVERLAPPED* pOverlapped) = 0;
  virtual HRESULT ND_CALL Reject(const VOID* pPrivateData, ULONG cbPrivateData) = 0;
  virtual HRESULT ND_CALL GetReadLimits(ULONG* pInboundReadLimit, ULONG* pOutboundReadLimit) = 0;
  virtual HRESULT ND_CALL GetPrivateData(VOID* pPrivateData, ULONG* pcbPrivateData) = 0;
  virtual HRESULT ND_CALL GetLocalAddress(struct sockaddr* pAddress, ULONG* pcbAddress) = 0;
  virtual HRESULT ND_CALL GetPeerAddress(struct sockaddr* pAddress, ULONG* pcbAddress) = 0;
  virtual HRESULT ND_CALL NotifyDisconnect(OVERLAPPED* pOverlapped) = 0;
  virtual HRESULT ND_CALL Disconnect(OVERLAPPED* pOverlapped) = 0;
};

struct IND2Listener : public IND2Overlapped {
  virtual HRESULT ND_CALL Bind(const struct sockaddr* pAddress, ULONG cbAddress) = 0;
  virtual HRESULT ND_CALL Listen(ULONG backlog) = 0;
  virtual HRESULT ND_CALL GetLocalAddress(struct sockaddr* pAddress, ULONG* pcbAddress) = 0;
  virtual HRESULT ND_CALL GetConnectionRequest(IUnknown* pConnector, OVERLAPPED* pOverlapped) = 0;
};

// IND2Connector of the software provider: the active side (Bind, Connect, CompleteConnect) and the passive
// side of one connection (a request handed over by a listener: Accept or Reject), read limits and private
// data of the peer, disconnect notification and graceful disconnect through the QP.
//
// The ND face: it checks the arguments and forwards to its state machine, ConnectorCore (cm/connector_core.h),
// which engine tasks keep alive and which is always destroyed on the engine thread, so releasing the COM object
// never races with socket events.
#ifndef NETDIRECT_SOFT_CONNECTOR_H_
#define NETDIRECT_SOFT_CONNECTOR_H_

#include <memory>

#include "soft/cm/cm.h"
#include "soft/object.h"

namespace netdirect::soft {

class SoftAdapter;
class ConnectorCore;

class SoftConnector final : public ComObject<IND2Connector> {
 public:
  static HRESULT create(SoftAdapter* adapter, HANDLE overlapped_file, SoftConnector** out);

  // IND2Overlapped
  HRESULT ND_CALL CancelOverlappedRequests() override;
  HRESULT ND_CALL GetOverlappedResult(OVERLAPPED* pOverlapped, BOOL bWait) override;
  // IND2Connector
  HRESULT ND_CALL Bind(const sockaddr* pAddress, ULONG cbAddress) override;
  HRESULT ND_CALL Connect(IUnknown* pQueuePair, const sockaddr* pDestinationAddress, ULONG cbDestinationAddress,
                          ULONG inboundReadLimit, ULONG outboundReadLimit, const VOID* pPrivateData,
                          ULONG cbPrivateData, OVERLAPPED* pOverlapped) override;
  HRESULT ND_CALL CompleteConnect(OVERLAPPED* pOverlapped) override;
  HRESULT ND_CALL Accept(IUnknown* pQueuePair, ULONG inboundReadLimit, ULONG outboundReadLimit,
                         const VOID* pPrivateData, ULONG cbPrivateData, OVERLAPPED* pOverlapped) override;
  HRESULT ND_CALL Reject(const VOID* pPrivateData, ULONG cbPrivateData) override;
  HRESULT ND_CALL GetReadLimits(ULONG* pInboundReadLimit, ULONG* pOutboundReadLimit) override;
  HRESULT ND_CALL GetPrivateData(VOID* pPrivateData, ULONG* pcbPrivateData) override;
  HRESULT ND_CALL GetLocalAddress(sockaddr* pAddress, ULONG* pcbAddress) override;
  HRESULT ND_CALL GetPeerAddress(sockaddr* pAddress, ULONG* pcbAddress) override;
  HRESULT ND_CALL NotifyDisconnect(OVERLAPPED* pOverlapped) override;
  HRESULT ND_CALL Disconnect(OVERLAPPED* pOverlapped) override;

  // For the listener. reserve_incoming (any thread): the connector was passed to GetConnectionRequest;
  // ND_SUCCESS if it is fresh (never bound, connected or reserved), else ND_CONNECTION_ACTIVE.
  HRESULT reserve_incoming();
  // The GetConnectionRequest was cancelled: the connector is fresh again.
  void unreserve_incoming();
  // Engine thread: the connector now represents this incoming request (a Request is held by ch).
  void adopt_incoming(std::unique_ptr<cm::Channel> ch);
  SoftAdapter* adapter() const { return adapter_; }

 private:
  SoftConnector() = default;
  ~SoftConnector() override;
  // Every overlapped method's exit (soft/variance.h).
  HRESULT finish(OVERLAPPED* ov, HRESULT hr);

  SoftAdapter* adapter_ = nullptr;  // the core holds the reference
  HANDLE file_ = nullptr;           // the overlapped file (soft/variance.h completes on it)
  std::shared_ptr<ConnectorCore> core_;
};

}  // namespace netdirect::soft

#endif  // NETDIRECT_SOFT_CONNECTOR_H_

// IND2Listener of the software provider: TCP listening sockets (one per address of the adapter for a
// wildcard bind, like siw, all on the same port), the responder's wait for a valid MPA Request on every
// accepted connection, a queue of such requests, and GetConnectionRequest handing the next one to a fresh
// connector. Connections in setup (accepted, not yet handed to a connector) are bounded by Listen's backlog;
// beyond it a connection is refused, and so is a request that waited half an initiator's Reply timeout
// (docs/nd2.md "Listen backlog"). The ND face: its state machine is ListenerCore (cm/listener_core.h).
#ifndef NETDIRECT_SOFT_LISTENER_H_
#define NETDIRECT_SOFT_LISTENER_H_

#include <memory>

#include "soft/object.h"

namespace netdirect::soft {

class SoftAdapter;
class ListenerCore;

class SoftListener final : public ComObject<IND2Listener> {
 public:
  static HRESULT create(SoftAdapter* adapter, HANDLE overlapped_file, SoftListener** out);

  // IND2Overlapped
  HRESULT ND_CALL CancelOverlappedRequests() override;
  HRESULT ND_CALL GetOverlappedResult(OVERLAPPED* pOverlapped, BOOL bWait) override;
  // IND2Listener
  HRESULT ND_CALL Bind(const sockaddr* pAddress, ULONG cbAddress) override;
  HRESULT ND_CALL Listen(ULONG backlog) override;
  HRESULT ND_CALL GetLocalAddress(sockaddr* pAddress, ULONG* pcbAddress) override;
  HRESULT ND_CALL GetConnectionRequest(IUnknown* pConnector, OVERLAPPED* pOverlapped) override;

  // Tests: the most connections that were in setup at once, how many were refused for a full backlog, and how
  // many requests were refused after waiting too long for a GetConnectionRequest.
  ULONG setup_peak() const;
  ULONG refused() const;
  ULONG expired() const;

 private:
  SoftListener() = default;
  ~SoftListener() override;

  SoftAdapter* adapter_ = nullptr;  // the core holds the reference
  std::shared_ptr<ListenerCore> core_;
  HANDLE file_ = nullptr;  // the overlapped file (soft/variance.h completes on it)
};

}  // namespace netdirect::soft

#endif  // NETDIRECT_SOFT_LISTENER_H_

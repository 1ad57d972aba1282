#include "soft/connector.h"

#include <new>

#include "soft/adapter.h"
#include "soft/cm/connector_core.h"
#include "soft/queue_pair.h"
#include "soft/variance.h"

namespace netdirect::soft {

HRESULT SoftConnector::create(SoftAdapter* adapter, HANDLE overlapped_file, SoftConnector** out) {
  auto* c = new (std::nothrow) SoftConnector();
  if (c == nullptr) return ND_NO_MEMORY;
  c->adapter_ = adapter;
  c->file_ = overlapped_file;
  c->core_ = ConnectorCore::make(adapter, overlapped_file);
  if (!c->core_) {
    c->Release();
    return ND_NO_MEMORY;
  }
  *out = c;
  return ND_SUCCESS;
}

SoftConnector::~SoftConnector() {
  if (core_) core_->released();
}

HRESULT SoftConnector::CancelOverlappedRequests() {
  variance::flush(this);
  return core_->cancel();
}

HRESULT SoftConnector::finish(OVERLAPPED* ov, HRESULT hr) { return variance::finish_overlapped(this, file_, ov, hr); }

HRESULT SoftConnector::GetOverlappedResult(OVERLAPPED* pOverlapped, BOOL bWait) {
  if (pOverlapped == nullptr) return ND_INVALID_PARAMETER_1;
  return variance::overlapped_result(this, file_, pOverlapped, bWait);
}

HRESULT SoftConnector::Bind(const sockaddr* pAddress, ULONG cbAddress) { return core_->bind(pAddress, cbAddress); }

namespace {
// The QP argument of Connect/Accept: ours, of this adapter.
SoftQueuePair* qp_of(IUnknown* unk, SoftAdapter* adapter) {
  SoftQueuePair* qp = from_unknown<SoftQueuePair, IND2QueuePair>(unk);
  if (qp == nullptr || qp->adapter() != adapter) return nullptr;
  return qp;
}
}  // namespace

HRESULT SoftConnector::Connect(IUnknown* pQueuePair, const sockaddr* pDestinationAddress, ULONG cbDestinationAddress,
                               ULONG inboundReadLimit, ULONG outboundReadLimit, const VOID* pPrivateData,
                               ULONG cbPrivateData, OVERLAPPED* pOverlapped) {
  if (pOverlapped == nullptr) return ND_INVALID_PARAMETER_8;
  if (cbPrivateData > limits::kMaxPrivateData) return ND_INVALID_BUFFER_SIZE;
  if (cbPrivateData != 0 && pPrivateData == nullptr) return ND_INVALID_PARAMETER_6;
  SoftQueuePair* qp = qp_of(pQueuePair, adapter_);
  if (qp == nullptr) return ND_INVALID_PARAMETER_1;
  net::Address dest;
  HRESULT hr = net::address_from(pDestinationAddress, cbDestinationAddress, &dest);
  if (hr == ND_INVALID_PARAMETER) return ND_INVALID_PARAMETER_3;
  if (FAILED(hr)) return hr;
  // The unspecified address names no host: STATUS_BAD_NETWORK_NAME, what Windows kernel providers answer (the
  // SDK's NdInvalidIP; docs/nd2.md §3.6). Port 0 is a parameter error.
  if (dest.is_any()) return STATUS_BAD_NETWORK_NAME;
  if (dest.port() == 0) return ND_INVALID_ADDRESS;
  return finish(pOverlapped,
                core_->connect(qp, dest, inboundReadLimit, outboundReadLimit, pPrivateData, cbPrivateData, pOverlapped));
}

HRESULT SoftConnector::CompleteConnect(OVERLAPPED* pOverlapped) {
  if (pOverlapped == nullptr) return ND_INVALID_PARAMETER_1;
  return finish(pOverlapped, core_->complete_connect(pOverlapped));
}

HRESULT SoftConnector::Accept(IUnknown* pQueuePair, ULONG inboundReadLimit, ULONG outboundReadLimit,
                              const VOID* pPrivateData, ULONG cbPrivateData, OVERLAPPED* pOverlapped) {
  if (pOverlapped == nullptr) return ND_INVALID_PARAMETER_6;
  if (cbPrivateData > limits::kMaxPrivateData) return ND_INVALID_BUFFER_SIZE;
  if (cbPrivateData != 0 && pPrivateData == nullptr) return ND_INVALID_PARAMETER_4;
  SoftQueuePair* qp = qp_of(pQueuePair, adapter_);
  if (qp == nullptr) return ND_INVALID_PARAMETER_1;
  return finish(pOverlapped,
                core_->accept(qp, inboundReadLimit, outboundReadLimit, pPrivateData, cbPrivateData, pOverlapped));
}

HRESULT SoftConnector::Reject(const VOID* pPrivateData, ULONG cbPrivateData) {
  if (cbPrivateData > limits::kMaxPrivateData) return ND_INVALID_BUFFER_SIZE;
  if (cbPrivateData != 0 && pPrivateData == nullptr) return ND_INVALID_PARAMETER_1;
  return core_->reject(pPrivateData, cbPrivateData);
}

HRESULT SoftConnector::GetReadLimits(ULONG* pInboundReadLimit, ULONG* pOutboundReadLimit) {
  return core_->get_read_limits(pInboundReadLimit, pOutboundReadLimit);
}

HRESULT SoftConnector::GetPrivateData(VOID* pPrivateData, ULONG* pcbPrivateData) {
  if (pcbPrivateData == nullptr) return ND_INVALID_PARAMETER_2;
  return core_->get_private_data(pPrivateData, pcbPrivateData);
}

HRESULT SoftConnector::GetLocalAddress(sockaddr* pAddress, ULONG* pcbAddress) {
  if (pcbAddress == nullptr) return ND_INVALID_PARAMETER_2;
  return core_->get_local_address(pAddress, pcbAddress);
}

HRESULT SoftConnector::GetPeerAddress(sockaddr* pAddress, ULONG* pcbAddress) {
  if (pcbAddress == nullptr) return ND_INVALID_PARAMETER_2;
  return core_->get_peer_address(pAddress, pcbAddress);
}

HRESULT SoftConnector::NotifyDisconnect(OVERLAPPED* pOverlapped) {
  if (pOverlapped == nullptr) return ND_INVALID_PARAMETER_1;
  return finish(pOverlapped, core_->notify_disconnect(pOverlapped));
}

HRESULT SoftConnector::Disconnect(OVERLAPPED* pOverlapped) {
  if (pOverlapped == nullptr) return ND_INVALID_PARAMETER_1;
  return finish(pOverlapped, core_->disconnect(pOverlapped));
}

HRESULT SoftConnector::reserve_incoming() { return core_->reserve(); }
void SoftConnector::unreserve_incoming() { core_->unreserve(); }
void SoftConnector::adopt_incoming(std::unique_ptr<cm::Channel> ch) { core_->adopt(std::move(ch)); }

}  // namespace netdirect::soft

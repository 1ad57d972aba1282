#include "soft/listener.h"

#include <new>

#include "soft/cm/listener_core.h"
#include "soft/connector.h"
#include "soft/variance.h"

namespace netdirect::soft {

HRESULT SoftListener::create(SoftAdapter* adapter, HANDLE overlapped_file, SoftListener** out) {
  auto* l = new (std::nothrow) SoftListener();
  if (l == nullptr) return ND_NO_MEMORY;
  l->adapter_ = adapter;
  l->file_ = overlapped_file;
  l->core_ = ListenerCore::make(adapter, overlapped_file);
  if (!l->core_) {
    l->Release();
    return ND_NO_MEMORY;
  }
  *out = l;
  return ND_SUCCESS;
}

SoftListener::~SoftListener() {
  if (core_) core_->released();
}

HRESULT SoftListener::CancelOverlappedRequests() {
  variance::flush(this);
  return core_->cancel();
}

HRESULT SoftListener::GetOverlappedResult(OVERLAPPED* pOverlapped, BOOL bWait) {
  if (pOverlapped == nullptr) return ND_INVALID_PARAMETER_1;
  return variance::overlapped_result(this, file_, pOverlapped, bWait);
}

ULONG SoftListener::setup_peak() const { return core_->setup_peak(); }
ULONG SoftListener::refused() const { return core_->refused(); }
ULONG SoftListener::expired() const { return core_->expired(); }

HRESULT SoftListener::Bind(const sockaddr* pAddress, ULONG cbAddress) { return core_->bind(pAddress, cbAddress); }

HRESULT SoftListener::Listen(ULONG backlog) { return core_->listen(backlog); }

HRESULT SoftListener::GetLocalAddress(sockaddr* pAddress, ULONG* pcbAddress) {
  if (pcbAddress == nullptr) return ND_INVALID_PARAMETER_2;
  return core_->get_local_address(pAddress, pcbAddress);
}

HRESULT SoftListener::GetConnectionRequest(IUnknown* pConnector, OVERLAPPED* pOverlapped) {
  if (pOverlapped == nullptr) return ND_INVALID_PARAMETER_2;
  SoftConnector* conn = from_unknown<SoftConnector, IND2Connector>(pConnector);
  if (conn == nullptr || conn->adapter() != adapter_) return ND_INVALID_PARAMETER_1;
  return variance::finish_overlapped(this, file_, pOverlapped, core_->get_connection_request(conn, pOverlapped));
}

}  // namespace netdirect::soft

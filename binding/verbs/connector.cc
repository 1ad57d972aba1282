// VerbsConnector and VerbsListener over rdma_cm (docs/verbs.md §3 has the event -> ND status table). Every
// method and event handler runs under the adapter's progress lock (objects.h), so a connector's state needs no
// lock of its own. The QP is created by the consumer before connecting (ND), so rdma_cm gets its number in
// rdma_conn_param; on IB and RoCE this provider moves it to RTR/RTS itself (CompleteConnect, Accept), on
// iWARP the kernel's CM does.
#include <algorithm>
#include <cstring>
#include <new>

#include "verbs/objects.h"

namespace netdirect::verbs {

namespace {
constexpr int kResolveTimeoutMs = 5000;
constexpr uint8_t kRetryCount = 7;
constexpr uint8_t kRnrRetryCount = 7;  // 7 = retry forever on receiver-not-ready (as ND: the sender waits)

HRESULT status_of_cm_failure(const rdma_cm_event& ev) {
  switch (ev.event) {
    case RDMA_CM_EVENT_ADDR_ERROR: return ND_HOST_UNREACHABLE;
    case RDMA_CM_EVENT_ROUTE_ERROR: return ND_NETWORK_UNREACHABLE;
    case RDMA_CM_EVENT_UNREACHABLE: return ev.status == -ETIMEDOUT ? ND_IO_TIMEOUT : ND_HOST_UNREACHABLE;
    case RDMA_CM_EVENT_REJECTED: return ND_CONNECTION_REFUSED;
    case RDMA_CM_EVENT_CONNECT_ERROR: return ND_CONNECTION_ABORTED;
    case RDMA_CM_EVENT_DEVICE_REMOVAL: return ND_DEVICE_REMOVED;
    default: return ND_UNSUCCESSFUL;
  }
}

// rdma_bind_addr takes a non-const sockaddr: binds id to a copy of the caller's (checked) address. 0, or -1 with
// errno set.
int bind_copy(const Lib& lib, rdma_cm_id* id, const sockaddr* address) {
  sockaddr_storage copy{};
  std::memcpy(&copy, address, sockaddr_length(address));
  return lib.bind_addr(id, reinterpret_cast<sockaddr*>(&copy));
}
}  // namespace

// --- VerbsConnector -------------------------------------------------------------------------------------

HRESULT VerbsConnector::create(VerbsAdapter* adapter, HANDLE file, VerbsConnector** out) {
  *out = new (std::nothrow) VerbsConnector(adapter, file);
  return *out == nullptr ? ND_NO_MEMORY : ND_SUCCESS;
}

VerbsConnector::~VerbsConnector() {
  {
    std::lock_guard<ndkit::CheckedMutex> lock(adapter_->progress_mu());
    if (id_ != nullptr) adapter_->lib().destroy_id(id_);  // disconnects a connected id
    id_ = nullptr;
    if (qp_ != nullptr && qp_->connector == this) qp_->connector = nullptr;
  }
  if (qp_ != nullptr) qp_->Release();
  adapter_->Release();
}

void VerbsConnector::complete(OVERLAPPED** ov, HRESULT status) {
  if (*ov == nullptr) return;
  ndkit::complete_overlapped(file_, *ov, status);
  *ov = nullptr;
}

HRESULT VerbsConnector::ensure_id_locked() {
  adapter_->progress_mu().assert_held();
  if (id_ != nullptr) return ND_SUCCESS;
  if (adapter_->lib().create_id(adapter_->events(), &id_, static_cast<CmHandler*>(this), RDMA_PS_TCP) != 0) {
    id_ = nullptr;
    return status_of_errno(errno);
  }
  return ND_SUCCESS;
}

HRESULT VerbsConnector::CancelOverlappedRequests() {
  std::lock_guard<ndkit::CheckedMutex> lock(adapter_->progress_mu());
  complete(&connect_ov_, ND_CANCELED);
  complete(&accept_ov_, ND_CANCELED);
  complete(&disconnect_ov_, ND_CANCELED);
  for (OVERLAPPED* ov : notify_disc_) ndkit::complete_overlapped(file_, ov, ND_CANCELED);
  notify_disc_.clear();
  return ND_SUCCESS;
}

HRESULT VerbsConnector::GetOverlappedResult(OVERLAPPED* pOverlapped, BOOL bWait) {
  if (pOverlapped == nullptr) return ND_INVALID_PARAMETER;
  return ndkit::overlapped_result(pOverlapped, bWait);
}

HRESULT VerbsConnector::Bind(const struct sockaddr* pAddress, ULONG cbAddress) {
  if (!valid_sockaddr(pAddress, cbAddress)) return ND_INVALID_ADDRESS;
  std::lock_guard<ndkit::CheckedMutex> lock(adapter_->progress_mu());
  if (state_ != State::kIdle) return ND_INVALID_DEVICE_STATE;
  HRESULT hr = ensure_id_locked();
  if (FAILED(hr)) return hr;
  if (bind_copy(adapter_->lib(), id_, pAddress) != 0) return status_of_errno(errno);
  if (id_->verbs != nullptr && id_->verbs != adapter_->context()) return ND_INVALID_ADDRESS;  // another device's
  state_ = State::kBound;
  return ND_SUCCESS;
}

HRESULT VerbsConnector::Connect(IUnknown* pQueuePair, const struct sockaddr* pDestinationAddress,
                                ULONG cbDestinationAddress, ULONG inboundReadLimit, ULONG outboundReadLimit,
                                const VOID* pPrivateData, ULONG cbPrivateData, OVERLAPPED* pOverlapped) {
  auto* qp = from_unknown<VerbsQueuePair, IND2QueuePair>(pQueuePair);
  if (qp == nullptr || qp->adapter() != adapter_) return ND_INVALID_PARAMETER_1;
  if (!valid_sockaddr(pDestinationAddress, cbDestinationAddress)) return ND_INVALID_ADDRESS;
  if (unspecified_sockaddr(pDestinationAddress)) return STATUS_BAD_NETWORK_NAME;
  if (cbPrivateData > adapter_->max_private_data()) return ND_INVALID_BUFFER_SIZE;
  if (cbPrivateData != 0 && pPrivateData == nullptr) return ND_INVALID_PARAMETER_6;
  if (pOverlapped == nullptr) return ND_INVALID_PARAMETER_8;
  std::lock_guard<ndkit::CheckedMutex> lock(adapter_->progress_mu());
  if (state_ != State::kIdle && state_ != State::kBound) return ND_CONNECTION_ACTIVE;
  HRESULT hr = ensure_id_locked();
  if (FAILED(hr)) return hr;
  std::memcpy(&dest_, pDestinationAddress, sockaddr_length(pDestinationAddress));
  const auto* p = static_cast<const uint8_t*>(pPrivateData);
  out_pdata_.assign(p, p + cbPrivateData);
  ird_ = inboundReadLimit;
  ord_ = outboundReadLimit;
  if (adapter_->lib().resolve_addr(id_, nullptr, reinterpret_cast<sockaddr*>(&dest_), kResolveTimeoutMs) != 0) {
    return status_of_errno(errno);
  }
  qp->AddRef();
  qp_ = qp;
  qp->connector = this;
  state_ = State::kResolving;
  ndkit::mark_pending(pOverlapped);
  connect_ov_ = pOverlapped;
  return ND_PENDING;
}

void VerbsConnector::fail_connect_locked(HRESULT status) {
  adapter_->progress_mu().assert_held();
  state_ = State::kFailed;
  complete(&connect_ov_, status);
  complete(&accept_ov_, status);
}

void VerbsConnector::start_connect_locked() {
  adapter_->progress_mu().assert_held();
  if (id_->verbs != adapter_->context()) {
    fail_connect_locked(ND_NETWORK_UNREACHABLE);  // the route leaves through another device
    return;
  }
  rdma_conn_param p{};
  p.private_data = out_pdata_.empty() ? nullptr : out_pdata_.data();
  p.private_data_len = static_cast<uint8_t>(out_pdata_.size());
  p.responder_resources = static_cast<uint8_t>(std::min<ULONG>(ird_, 255));
  p.initiator_depth = static_cast<uint8_t>(std::min<ULONG>(ord_, 255));
  p.retry_count = kRetryCount;
  p.rnr_retry_count = kRnrRetryCount;
  p.qp_num = qp_->qp()->qp_num;
  if (adapter_->lib().connect(id_, &p) != 0) {
    fail_connect_locked(status_of_errno(errno));
    return;
  }
  state_ = State::kConnecting;
}

void VerbsConnector::save_conn_param(const rdma_cm_event& ev) {
  const auto* p = static_cast<const uint8_t*>(ev.param.conn.private_data);
  in_pdata_.assign(p, p == nullptr ? p : p + ev.param.conn.private_data_len);
  peer_ird_ = ev.param.conn.responder_resources;
  peer_ord_ = ev.param.conn.initiator_depth;
}

void VerbsConnector::end_after_failure_locked() {
  adapter_->progress_mu().assert_held();
  if (disconnect_sent_ || disconnected_ || id_ == nullptr) return;
  if (state_ != State::kEstablished && state_ != State::kConnected) return;
  disconnect_sent_ = true;
  // DISCONNECTED follows on both sides (on IB and RoCE once the peer's DREP arrives); it sweeps the QP.
  if (adapter_->lib().disconnect(id_) != 0) on_disconnected_locked();
}

void VerbsConnector::on_disconnected_locked() {
  adapter_->progress_mu().assert_held();
  disconnected_ = true;
  state_ = State::kDisconnected;
  if (qp_ != nullptr) qp_->sweep();  // outstanding requests complete ND_CANCELED
  complete(&disconnect_ov_, ND_SUCCESS);
  for (OVERLAPPED* ov : notify_disc_) ndkit::complete_overlapped(file_, ov, ND_SUCCESS);
  notify_disc_.clear();
}

void VerbsConnector::on_cm_event(const rdma_cm_event& ev) {
  switch (ev.event) {
    case RDMA_CM_EVENT_ADDR_RESOLVED:
      if (adapter_->lib().resolve_route(id_, kResolveTimeoutMs) != 0) fail_connect_locked(status_of_errno(errno));
      break;
    case RDMA_CM_EVENT_ROUTE_RESOLVED:
      start_connect_locked();
      break;
    case RDMA_CM_EVENT_CONNECT_RESPONSE:  // IB/RoCE, QP not owned by rdma_cm: CompleteConnect finishes
    case RDMA_CM_EVENT_ESTABLISHED:
      save_conn_param(ev);
      if (state_ == State::kConnecting) {
        state_ = ev.event == RDMA_CM_EVENT_ESTABLISHED ? State::kEstablished : State::kConnected;
        awaiting_complete_ = true;
        complete(&connect_ov_, ND_SUCCESS);
      } else if (state_ == State::kAccepting) {
        state_ = State::kEstablished;
        complete(&accept_ov_, ND_SUCCESS);
      }
      break;
    case RDMA_CM_EVENT_REJECTED:
      save_conn_param(ev);
      fail_connect_locked(ND_CONNECTION_REFUSED);
      break;
    case RDMA_CM_EVENT_ADDR_ERROR:
    case RDMA_CM_EVENT_ROUTE_ERROR:
    case RDMA_CM_EVENT_UNREACHABLE:
    case RDMA_CM_EVENT_CONNECT_ERROR:
      fail_connect_locked(status_of_cm_failure(ev));
      break;
    case RDMA_CM_EVENT_DISCONNECTED:
      // The peer disconnected (or answered ours): our side disconnects too, so that both ids finish (on IB and
      // RoCE this sends the DREP the peer's DREQ waits for; on iWARP it closes our half of the connection).
      if (!disconnect_sent_ && id_ != nullptr) {
        disconnect_sent_ = true;
        (void)adapter_->lib().disconnect(id_);
      }
      on_disconnected_locked();
      break;
    case RDMA_CM_EVENT_DEVICE_REMOVAL:
      fail_connect_locked(ND_DEVICE_REMOVED);
      on_disconnected_locked();
      break;
    default:
      break;  // TIMEWAIT_EXIT, ADDR_CHANGE: nothing for ND
  }
}

HRESULT VerbsConnector::CompleteConnect(OVERLAPPED* pOverlapped) {
  if (pOverlapped == nullptr) return ND_INVALID_PARAMETER_1;
  std::lock_guard<ndkit::CheckedMutex> lock(adapter_->progress_mu());
  if (state_ == State::kConnected) {  // IB/RoCE: RTR, RTS, then the RTU
    HRESULT hr = qp_->modify_by_cm(id_, IBV_QPS_RTR);
    if (SUCCEEDED(hr)) hr = qp_->modify_by_cm(id_, IBV_QPS_RTS);
    if (SUCCEEDED(hr) && adapter_->lib().establish(id_) != 0) hr = status_of_errno(errno);
    if (FAILED(hr)) return hr;
    state_ = State::kEstablished;
  } else if (state_ != State::kEstablished) {
    return state_ == State::kDisconnected ? ND_CONNECTION_ABORTED : ND_CONNECTION_INVALID;
  }
  awaiting_complete_ = false;
  ndkit::mark_done(pOverlapped, ND_SUCCESS);
  return ND_SUCCESS;
}

void VerbsConnector::adopt(rdma_cm_id* id, const rdma_cm_event& ev) {
  id_ = id;
  id_->context = static_cast<CmHandler*>(this);
  state_ = State::kRequested;
  save_conn_param(ev);
}

HRESULT VerbsConnector::Accept(IUnknown* pQueuePair, ULONG inboundReadLimit, ULONG outboundReadLimit,
                               const VOID* pPrivateData, ULONG cbPrivateData, OVERLAPPED* pOverlapped) {
  auto* qp = from_unknown<VerbsQueuePair, IND2QueuePair>(pQueuePair);
  if (qp == nullptr || qp->adapter() != adapter_) return ND_INVALID_PARAMETER_1;
  if (cbPrivateData > adapter_->max_private_data()) return ND_INVALID_BUFFER_SIZE;
  if (cbPrivateData != 0 && pPrivateData == nullptr) return ND_INVALID_PARAMETER_4;
  if (pOverlapped == nullptr) return ND_INVALID_PARAMETER_6;
  std::lock_guard<ndkit::CheckedMutex> lock(adapter_->progress_mu());
  if (state_ != State::kRequested) return ND_CONNECTION_INVALID;
  if (adapter_->transport() != Transport::kIwarp) {
    HRESULT hr = qp->modify_by_cm(id_, IBV_QPS_RTR);
    if (SUCCEEDED(hr)) hr = qp->modify_by_cm(id_, IBV_QPS_RTS);
    if (FAILED(hr)) return hr;
  }
  rdma_conn_param p{};
  p.private_data = pPrivateData;
  p.private_data_len = static_cast<uint8_t>(cbPrivateData);
  // Never more than the peer offered: our inbound Reads are its outbound ones and the other way round.
  p.responder_resources = static_cast<uint8_t>(std::min<ULONG>({inboundReadLimit, peer_ord_, 255}));
  p.initiator_depth = static_cast<uint8_t>(std::min<ULONG>({outboundReadLimit, peer_ird_, 255}));
  p.retry_count = kRetryCount;
  p.rnr_retry_count = kRnrRetryCount;
  p.qp_num = qp->qp()->qp_num;
  if (adapter_->lib().accept(id_, &p) != 0) return status_of_errno(errno);
  qp->AddRef();
  qp_ = qp;
  qp->connector = this;
  state_ = State::kAccepting;
  ndkit::mark_pending(pOverlapped);
  accept_ov_ = pOverlapped;
  return ND_PENDING;
}

HRESULT VerbsConnector::Reject(const VOID* pPrivateData, ULONG cbPrivateData) {
  if (cbPrivateData > adapter_->max_private_data()) return ND_INVALID_BUFFER_SIZE;
  std::lock_guard<ndkit::CheckedMutex> lock(adapter_->progress_mu());
  // The initiator declines after its Connect completed, before CompleteConnect (docs/nd2.md §3.6). IB/RoCE
  // (kConnected, the peer's REP in): the CM answers with a REJ and the peer's Accept fails ND_CONNECTION_REFUSED.
  // iWARP: the kernel established the connection before Connect completed and the peer's Accept has succeeded;
  // declining disconnects it.
  if (state_ == State::kEstablished && awaiting_complete_) {
    awaiting_complete_ = false;
    disconnect_sent_ = true;
    if (adapter_->lib().disconnect(id_) != 0) on_disconnected_locked();
    state_ = State::kFailed;
    return ND_SUCCESS;
  }
  if (state_ != State::kRequested && state_ != State::kConnected) return ND_CONNECTION_INVALID;
  if (adapter_->lib().reject(id_, pPrivateData, static_cast<uint8_t>(cbPrivateData)) != 0) {
    return status_of_errno(errno);
  }
  state_ = State::kFailed;
  return ND_SUCCESS;
}

HRESULT VerbsConnector::GetReadLimits(ULONG* pInboundReadLimit, ULONG* pOutboundReadLimit) {
  std::lock_guard<ndkit::CheckedMutex> lock(adapter_->progress_mu());
  if (state_ == State::kIdle || state_ == State::kBound || state_ == State::kResolving) return ND_CONNECTION_INVALID;
  if (pInboundReadLimit != nullptr) *pInboundReadLimit = peer_ird_;
  if (pOutboundReadLimit != nullptr) *pOutboundReadLimit = peer_ord_;
  return ND_SUCCESS;
}

HRESULT VerbsConnector::GetPrivateData(VOID* pPrivateData, ULONG* pcbPrivateData) {
  if (pcbPrivateData == nullptr) return ND_INVALID_PARAMETER_2;
  std::lock_guard<ndkit::CheckedMutex> lock(adapter_->progress_mu());
  const ULONG have = static_cast<ULONG>(in_pdata_.size());
  if (pPrivateData == nullptr || *pcbPrivateData < have) {
    *pcbPrivateData = have;
    return have == 0 ? ND_SUCCESS : ND_BUFFER_OVERFLOW;
  }
  if (have > 0) std::memcpy(pPrivateData, in_pdata_.data(), have);
  *pcbPrivateData = have;
  return ND_SUCCESS;
}

HRESULT VerbsConnector::GetLocalAddress(struct sockaddr* pAddress, ULONG* pcbAddress) {
  std::lock_guard<ndkit::CheckedMutex> lock(adapter_->progress_mu());
  if (id_ == nullptr) return ND_INVALID_DEVICE_STATE;
  return copy_sockaddr(rdma_get_local_addr(id_), pAddress, pcbAddress);
}

HRESULT VerbsConnector::GetPeerAddress(struct sockaddr* pAddress, ULONG* pcbAddress) {
  std::lock_guard<ndkit::CheckedMutex> lock(adapter_->progress_mu());
  if (id_ == nullptr || state_ == State::kIdle || state_ == State::kBound) return ND_CONNECTION_INVALID;
  return copy_sockaddr(rdma_get_peer_addr(id_), pAddress, pcbAddress);
}

HRESULT VerbsConnector::NotifyDisconnect(OVERLAPPED* pOverlapped) {
  if (pOverlapped == nullptr) return ND_INVALID_PARAMETER_1;
  std::lock_guard<ndkit::CheckedMutex> lock(adapter_->progress_mu());
  if (disconnected_) {
    ndkit::mark_done(pOverlapped, ND_SUCCESS);
    return ND_SUCCESS;
  }
  if (state_ != State::kEstablished && state_ != State::kConnected) return ND_CONNECTION_INVALID;
  ndkit::mark_pending(pOverlapped);
  notify_disc_.push_back(pOverlapped);
  return ND_PENDING;
}

HRESULT VerbsConnector::Disconnect(OVERLAPPED* pOverlapped) {
  if (pOverlapped == nullptr) return ND_INVALID_PARAMETER_1;
  std::lock_guard<ndkit::CheckedMutex> lock(adapter_->progress_mu());
  if (disconnected_) {
    ndkit::mark_done(pOverlapped, ND_SUCCESS);
    return ND_SUCCESS;
  }
  if (state_ != State::kEstablished && state_ != State::kConnected) return ND_CONNECTION_INVALID;
  if (disconnect_ov_ != nullptr) return ND_INVALID_DEVICE_STATE;
  disconnect_sent_ = true;
  if (adapter_->lib().disconnect(id_) != 0) {
    on_disconnected_locked();
    ndkit::mark_done(pOverlapped, ND_SUCCESS);
    return ND_SUCCESS;
  }
  ndkit::mark_pending(pOverlapped);
  disconnect_ov_ = pOverlapped;
  return ND_PENDING;
}

// --- VerbsListener --------------------------------------------------------------------------------------

HRESULT VerbsListener::create(VerbsAdapter* adapter, HANDLE file, VerbsListener** out) {
  *out = new (std::nothrow) VerbsListener(adapter, file);
  return *out == nullptr ? ND_NO_MEMORY : ND_SUCCESS;
}

VerbsListener::~VerbsListener() {
  std::lock_guard<ndkit::CheckedMutex> lock(adapter_->progress_mu());
  for (auto& in : incoming_) {
    adapter_->lib().reject(in.id, nullptr, 0);
    adapter_->lib().destroy_id(in.id);
  }
  for (auto& w : waiting_) {
    ndkit::complete_overlapped(file_, w.second, ND_CANCELED);
    w.first->Release();
  }
  if (id_ != nullptr) adapter_->lib().destroy_id(id_);
  adapter_->Release();
}

HRESULT VerbsListener::CancelOverlappedRequests() {
  std::lock_guard<ndkit::CheckedMutex> lock(adapter_->progress_mu());
  for (auto& w : waiting_) {
    ndkit::complete_overlapped(file_, w.second, ND_CANCELED);
    w.first->Release();
  }
  waiting_.clear();
  return ND_SUCCESS;
}

HRESULT VerbsListener::GetOverlappedResult(OVERLAPPED* pOverlapped, BOOL bWait) {
  if (pOverlapped == nullptr) return ND_INVALID_PARAMETER;
  return ndkit::overlapped_result(pOverlapped, bWait);
}

HRESULT VerbsListener::Bind(const struct sockaddr* pAddress, ULONG cbAddress) {
  if (!valid_sockaddr(pAddress, cbAddress)) return ND_INVALID_ADDRESS;
  std::lock_guard<ndkit::CheckedMutex> lock(adapter_->progress_mu());
  if (id_ != nullptr) return ND_INVALID_DEVICE_STATE;
  if (adapter_->lib().create_id(adapter_->events(), &id_, static_cast<CmHandler*>(this), RDMA_PS_TCP) != 0) {
    id_ = nullptr;
    return status_of_errno(errno);
  }
  if (bind_copy(adapter_->lib(), id_, pAddress) != 0) {
    const HRESULT hr = status_of_errno(errno);
    adapter_->lib().destroy_id(id_);
    id_ = nullptr;
    return hr;
  }
  return ND_SUCCESS;
}

HRESULT VerbsListener::Listen(ULONG backlog) {
  std::lock_guard<ndkit::CheckedMutex> lock(adapter_->progress_mu());
  if (id_ == nullptr || listening_) return ND_INVALID_DEVICE_STATE;
  if (adapter_->lib().listen(id_, backlog == 0 ? 16 : static_cast<int>(std::min<ULONG>(backlog, 1024))) != 0) {
    return status_of_errno(errno);
  }
  listening_ = true;
  return ND_SUCCESS;
}

HRESULT VerbsListener::GetLocalAddress(struct sockaddr* pAddress, ULONG* pcbAddress) {
  std::lock_guard<ndkit::CheckedMutex> lock(adapter_->progress_mu());
  if (id_ == nullptr) return ND_INVALID_DEVICE_STATE;
  return copy_sockaddr(rdma_get_local_addr(id_), pAddress, pcbAddress);
}

HRESULT VerbsListener::GetConnectionRequest(IUnknown* pConnector, OVERLAPPED* pOverlapped) {
  auto* c = from_unknown<VerbsConnector, IND2Connector>(pConnector);
  if (c == nullptr || c->adapter() != adapter_) return ND_INVALID_PARAMETER_1;
  if (pOverlapped == nullptr) return ND_INVALID_PARAMETER_2;
  std::lock_guard<ndkit::CheckedMutex> lock(adapter_->progress_mu());
  if (!listening_) return ND_INVALID_DEVICE_STATE;
  c->AddRef();
  ndkit::mark_pending(pOverlapped);
  waiting_.emplace_back(c, pOverlapped);
  hand_over_locked();
  return ND_PENDING;
}

void VerbsListener::hand_over_locked() {
  adapter_->progress_mu().assert_held();
  while (!incoming_.empty() && !waiting_.empty()) {
    Incoming in = std::move(incoming_.front());
    incoming_.pop_front();
    auto [c, ov] = waiting_.front();
    waiting_.pop_front();
    in.ev.param.conn.private_data = in.pdata.empty() ? nullptr : in.pdata.data();
    c->adopt(in.id, in.ev);
    ndkit::complete_overlapped(file_, ov, ND_SUCCESS);
    c->Release();
  }
}

void VerbsListener::on_cm_event(const rdma_cm_event& ev) {
  if (ev.event != RDMA_CM_EVENT_CONNECT_REQUEST) return;
  // A listener bound to the wildcard hears requests on every RDMA device (rdma_cm listens on all of them), but an
  // ND listener belongs to its adapter, whose QPs live on one device and could not accept a request that arrived
  // on another: refused at once (the initiator's Connect fails ND_CONNECTION_REFUSED). The event was acknowledged
  // before dispatch, so its id may be destroyed here (VerbsAdapter::drain_cm_events).
  if (ev.id != nullptr && (ev.id->verbs != adapter_->context() || (ev.id->port_num != 0 && ev.id->port_num != adapter_->port()))) {
    adapter_->lib().reject(ev.id, nullptr, 0);
    adapter_->lib().destroy_id(ev.id);
    return;
  }
  Incoming in{ev.id, ev, {}};
  const auto* p = static_cast<const uint8_t*>(ev.param.conn.private_data);
  if (p != nullptr) in.pdata.assign(p, p + ev.param.conn.private_data_len);
  incoming_.push_back(std::move(in));
  hand_over_locked();
}

}  // namespace netdirect::verbs

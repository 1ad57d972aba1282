// VerbsAdapter: one RDMA device (its librdmacm context), its protection domain, completion channel and rdma_cm
// event channel, and the progress that turns their events into ND notifications (objects.h: threads and locks).
#include <fcntl.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <cstring>
#include <new>

#include "verbs/objects.h"

namespace netdirect::verbs {

namespace {

constexpr int kThreadTickMs = 1000;  // the thread sleeps in epoll_wait; the eventfd wakes it to stop

bool set_nonblocking(int fd) {
  const int fl = fcntl(fd, F_GETFL);
  return fl >= 0 && fcntl(fd, F_SETFL, fl | O_NONBLOCK) == 0;
}

bool watch(int epfd, int fd) {
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.fd = fd;
  return epoll_ctl(epfd, EPOLL_CTL_ADD, fd, &ev) == 0;
}

// The largest inline size the device grants a small RC QP (verbs has no device attribute for it).
uint32_t probe_inline(const Lib& lib, ibv_context* ctx, ibv_pd* pd) {
  ibv_cq* cq = lib.create_cq(ctx, 2, nullptr, nullptr, 0);
  if (cq == nullptr) return 0;
  uint32_t best = 0;
  for (uint32_t want : {512u, 256u, 128u, 64u}) {
    ibv_qp_init_attr a{};
    a.send_cq = cq;
    a.recv_cq = cq;
    a.qp_type = IBV_QPT_RC;
    a.cap.max_send_wr = 1;
    a.cap.max_recv_wr = 1;
    a.cap.max_send_sge = 1;
    a.cap.max_recv_sge = 1;
    a.cap.max_inline_data = want;
    ibv_qp* qp = lib.create_qp(pd, &a);
    if (qp == nullptr) continue;
    best = a.cap.max_inline_data;
    lib.destroy_qp(qp);
    break;
  }
  lib.destroy_cq(cq);
  return best;
}

}  // namespace

const char* transport_name(Transport t) {
  switch (t) {
    case Transport::kIwarp: return "iwarp";
    case Transport::kInfiniBand: return "infiniband";
    case Transport::kRoce: return "roce";
  }
  return "unknown";
}

HRESULT status_of_errno(int err) {
  switch (err) {
    case 0: return ND_SUCCESS;
    case ENOMEM: return ND_NO_MEMORY;
    case EINVAL: return ND_INVALID_PARAMETER;
    case EFAULT: return ND_ACCESS_VIOLATION;
    case EACCES:
    case EPERM: return ND_ACCESS_VIOLATION;
    case EADDRINUSE: return ND_ADDRESS_ALREADY_EXISTS;
    case EADDRNOTAVAIL:
    case ENODEV: return ND_INVALID_ADDRESS;
    case ENETUNREACH: return ND_NETWORK_UNREACHABLE;
    case EHOSTUNREACH: return ND_HOST_UNREACHABLE;
    case ECONNREFUSED: return ND_CONNECTION_REFUSED;
    case ETIMEDOUT: return ND_IO_TIMEOUT;
    case EAGAIN:
    case ENOSPC: return ND_INSUFFICIENT_RESOURCES;
    case EISCONN: return ND_CONNECTION_ACTIVE;
    case ENOTCONN: return ND_CONNECTION_INVALID;
    case EOPNOTSUPP: return ND_NOT_SUPPORTED;
    default: return ND_UNSUCCESSFUL;
  }
}

HRESULT VerbsAdapter::open(UINT64 index, VerbsAdapter** out) {
  if (out == nullptr) return ND_INVALID_PARAMETER;
  *out = nullptr;
  auto* a = new (std::nothrow) VerbsAdapter();
  if (a == nullptr) return ND_NO_MEMORY;
  HRESULT hr = a->init(index);
  if (FAILED(hr)) {
    a->Release();
    return hr;
  }
  *out = a;
  return ND_SUCCESS;
}

HRESULT VerbsAdapter::init(UINT64 index) {
  lib_ = Lib::get();
  if (lib_ == nullptr) return ND_DEVICE_NOT_READY;
  index_ = index;
  const int device = device_of_id(index);
  port_ = port_of_id(index);
  int n = 0;
  ibv_context** list = lib_->get_devices(&n);
  if (list == nullptr) return ND_DEVICE_NOT_READY;
  if (device < n) ctx_ = list[device];
  lib_->free_devices(list);  // librdmacm keeps its contexts open for the process
  if (ctx_ == nullptr) return ND_INVALID_PARAMETER;
  if (lib_->query_device(ctx_, &attr_) != 0) return status_of_errno(errno);
  ibv_port_attr port{};
  if (lib_->query_port(ctx_, port_, reinterpret_cast<_compat_ibv_port_attr*>(&port)) == 0) {
    max_msg_ = port.max_msg_sz;
    if (ctx_->device->transport_type == IBV_TRANSPORT_IB) {
      transport_ = port.link_layer == IBV_LINK_LAYER_ETHERNET ? Transport::kRoce : Transport::kInfiniBand;
    }
  }
  if (ctx_->device->transport_type == IBV_TRANSPORT_IWARP) transport_ = Transport::kIwarp;
  pd_ = lib_->alloc_pd(ctx_);
  if (pd_ == nullptr) return status_of_errno(errno);
  max_inline_ = probe_inline(*lib_, ctx_, pd_);
  cc_ = lib_->create_comp_channel(ctx_);
  ec_ = lib_->create_event_channel();
  if (cc_ == nullptr || ec_ == nullptr) return ND_INSUFFICIENT_RESOURCES;
  epfd_ = epoll_create1(EPOLL_CLOEXEC);
  wakefd_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  failfd_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  // The device's asynchronous events (SRQ limit) share the epoll set. librdmacm shares one ibv_context per device
  // in the process; its async descriptor is made non-blocking for all of them (rdma-core reads it only on request).
  if (epfd_ < 0 || wakefd_ < 0 || failfd_ < 0 || !watch(epfd_, failfd_) || !set_nonblocking(cc_->fd) || !set_nonblocking(ec_->fd) ||
      !set_nonblocking(ctx_->async_fd) || !watch(epfd_, cc_->fd) || !watch(epfd_, ec_->fd) ||
      !watch(epfd_, ctx_->async_fd)) {
    return ND_INSUFFICIENT_RESOURCES;
  }
  thread_.need();
  return ND_SUCCESS;
}

VerbsAdapter::~VerbsAdapter() {
  thread_.close();  // (detached, defensively, if this runs on it: cannot happen while children hold the adapter)
  ndkit::release_overlapped_files(this);
  if (ec_ != nullptr) lib_->destroy_event_channel(ec_);
  if (cc_ != nullptr) lib_->destroy_comp_channel(cc_);
  if (pd_ != nullptr) lib_->dealloc_pd(pd_);
  if (epfd_ >= 0) close(epfd_);
  if (wakefd_ >= 0) close(wakefd_);
  if (failfd_ >= 0) close(failfd_);
}

void VerbsAdapter::run_rounds(const std::atomic<bool>& stop) {
  epoll_event evs[4];
  // The wake-up eventfd is watched by the thread's own epoll set only: the consumer's loop watches epfd_.
  const int own = epoll_create1(EPOLL_CLOEXEC);
  if (own < 0) return;
  watch(own, epfd_);
  watch(own, wakefd_);
  while (!stop.load()) {
    const int n = epoll_wait(own, evs, 4, kThreadTickMs);
    if (n < 0 && errno != EINTR) break;
    uint64_t drained = 0;
    (void)!read(wakefd_, &drained, sizeof(drained));
    if (stop.load()) break;
    std::lock_guard<ndkit::CheckedMutex> lock(progress_mu_);
    progress_round();
  }
  close(own);
}

void VerbsAdapter::wake() {
  const uint64_t one = 1;
  (void)!write(wakefd_, &one, sizeof(one));
}

uint32_t VerbsAdapter::progress_round() {
  return drain_cq_events() + drain_cm_events() + drain_async_events() + end_failed_connections();
}

void VerbsAdapter::note_qp_failure() {
  const uint64_t one = 1;
  (void)!write(failfd_, &one, sizeof(one));
}

uint32_t VerbsAdapter::end_failed_connections() {
  uint64_t n = 0;
  if (read(failfd_, &n, sizeof(n)) != static_cast<ssize_t>(sizeof(n)) || n == 0) return 0;
  // progress_mu_ held: a QP's connector is alive while it is set (~VerbsConnector clears it under progress_mu_),
  // and the connector holds a reference on the QP.
  std::lock_guard<ndkit::CheckedMutex> lock(qps_mu_);
  uint32_t work = 0;
  for (auto& [num, qp] : qps_) {
    if (qp->failed.load() && qp->connector != nullptr) {
      qp->connector->end_after_failure_locked();
      ++work;
    }
  }
  return work;
}

uint32_t VerbsAdapter::drain_async_events() {
  uint32_t work = 0;
  for (;;) {
    ibv_async_event ev{};
    if (lib_->get_async_event(ctx_, &ev) != 0) break;  // EAGAIN: the descriptor is non-blocking
    // Handled before the acknowledgement: ibv_destroy_srq waits for its events to be acknowledged, and it runs
    // under progress_mu_ (held here), so the SRQ is alive.
    if (ev.event_type == IBV_EVENT_SRQ_LIMIT_REACHED && ev.element.srq != nullptr &&
        ev.element.srq->srq_context != nullptr) {
      static_cast<VerbsSharedReceiveQueue*>(ev.element.srq->srq_context)->on_limit();
    }
    // ibv_destroy_cq waits for its events to be acknowledged too: the CQ is alive here.
    if (ev.event_type == IBV_EVENT_CQ_ERR && ev.element.cq != nullptr && ev.element.cq->cq_context != nullptr) {
      static_cast<VerbsCompletionQueue*>(ev.element.cq->cq_context)->on_error();
    }
    lib_->ack_async_event(&ev);
    ++work;
  }
  return work;
}

uint32_t VerbsAdapter::drain_cq_events() {
  uint32_t work = 0;
  for (;;) {
    ibv_cq* cq = nullptr;
    void* cq_ctx = nullptr;
    if (lib_->get_cq_event(cc_, &cq, &cq_ctx) != 0) break;  // EAGAIN: the channel is non-blocking
    lib_->ack_cq_events(cq, 1);
    static_cast<VerbsCompletionQueue*>(cq_ctx)->on_event();
    ++work;
  }
  return work;
}

uint32_t VerbsAdapter::drain_cm_events() {
  uint32_t work = 0;
  for (;;) {
    rdma_cm_event* raw = nullptr;
    if (lib_->get_cm_event(ec_, &raw) != 0) break;
    // Copied and acknowledged before dispatch: a handler may destroy the id (rdma_destroy_id waits for the
    // acknowledgement of its events). The private data is copied by the handlers that keep it.
    rdma_cm_event ev = *raw;
    std::vector<uint8_t> pdata;
    const void* pd = raw->param.conn.private_data;
    if (pd != nullptr && raw->param.conn.private_data_len > 0) {
      pdata.assign(static_cast<const uint8_t*>(pd), static_cast<const uint8_t*>(pd) + raw->param.conn.private_data_len);
    }
    lib_->ack_cm_event(raw);
    ev.param.conn.private_data = pdata.empty() ? nullptr : pdata.data();
    // A connection request names the listener's id as listen_id; the new id inherited its context and gets
    // none until a connector adopts it.
    rdma_cm_id* target = ev.event == RDMA_CM_EVENT_CONNECT_REQUEST ? ev.listen_id : ev.id;
    if (ev.event == RDMA_CM_EVENT_CONNECT_REQUEST && ev.id != nullptr) ev.id->context = nullptr;
    if (target != nullptr && target->context != nullptr) static_cast<CmHandler*>(target->context)->on_cm_event(ev);
    ++work;
  }
  return work;
}

HRESULT VerbsAdapter::QueryInterface(REFIID riid, VOID** ppv) {
  if (ppv != nullptr && IsEqualGUID(riid, IID_INDProgress)) {
    AddRef();
    *ppv = static_cast<INDProgress*>(this);
    return S_OK;
  }
  return ComObject::QueryInterface(riid, ppv);
}

HRESULT VerbsAdapter::GetDescriptor(UINT64* pDescriptor) {
  if (pDescriptor == nullptr) return ND_INVALID_PARAMETER_1;
  *pDescriptor = static_cast<UINT64>(epfd_);
  return ND_SUCCESS;
}

HRESULT VerbsAdapter::SetExternalDriver(BOOL external) {
  thread_.set_external(external != FALSE);  // TRUE: the thread is stopped and joined first
  return ND_SUCCESS;
}

HRESULT VerbsAdapter::Progress(ULONG flags, ULONG* pWork) {
  if ((flags & ~ND_PROGRESS_DEFER_TRANSMIT) != 0) return ND_INVALID_PARAMETER_1;
  std::lock_guard<ndkit::CheckedMutex> lock(progress_mu_);
  const uint32_t work = progress_round();
  if (pWork != nullptr) *pWork = work;
  return ND_SUCCESS;
}

HRESULT VerbsAdapter::GetNextTimeout(DWORD* pMilliseconds) {
  if (pMilliseconds == nullptr) return ND_INVALID_PARAMETER_1;
  *pMilliseconds = INFINITE;  // rdma-core keeps the CM's timers in the kernel
  return ND_SUCCESS;
}

HRESULT VerbsAdapter::CreateOverlappedFile(HANDLE* phOverlappedFile) {
  if (phOverlappedFile == nullptr) return ND_INVALID_PARAMETER_1;
  HANDLE h = ndkit::create_overlapped_file(this);  // released in ~VerbsAdapter, after the thread that completes
  if (h == nullptr) return ND_NO_MEMORY;
  *phOverlappedFile = h;
  return ND_SUCCESS;
}

ULONG VerbsAdapter::max_private_data() const {
  // docs/verbs.md §4: iWARP MPA carries up to 512 bytes (the kernel's MPA v2 takes 4 of them for IRD/ORD);
  // IB and RoCE: the IB CM's REQ has 92 bytes, of which rdma_cm's header takes 36 (the REP's 196 are more,
  // but ND reports one pair of limits per adapter and the caller's is the smaller).
  // librdmacm's rdma_conn_param carries the length in a uint8_t: 255 at most on any transport.
  return transport_ == Transport::kIwarp ? 255 : 56;
}

HRESULT VerbsAdapter::Query(ND2_ADAPTER_INFO* pInfo, ULONG* pcbInfo) {
  if (pcbInfo == nullptr) return ND_INVALID_PARAMETER_2;
  if (pInfo == nullptr || *pcbInfo < sizeof(ND2_ADAPTER_INFO)) {
    *pcbInfo = sizeof(ND2_ADAPTER_INFO);
    return ND_BUFFER_OVERFLOW;
  }
  ND2_ADAPTER_INFO info{};
  info.InfoVersion = ND_VERSION_2;
  info.VendorId = static_cast<UINT16>(attr_.vendor_id);
  info.DeviceId = static_cast<UINT16>(attr_.vendor_part_id);
  info.AdapterId = index_;
  info.MaxRegistrationSize = static_cast<SIZE_T>(attr_.max_mr_size);
  info.MaxWindowSize = attr_.max_mw > 0 ? static_cast<SIZE_T>(attr_.max_mr_size) : 0;
  info.MaxInitiatorSge = static_cast<ULONG>(attr_.max_sge);
  info.MaxReceiveSge = static_cast<ULONG>(attr_.max_sge);
  info.MaxReadSge = static_cast<ULONG>(attr_.max_sge_rd > 0 ? attr_.max_sge_rd : attr_.max_sge);
  info.MaxTransferLength = static_cast<ULONG>(max_transfer());
  info.MaxInlineDataSize = max_inline_;
  info.MaxInboundReadLimit = static_cast<ULONG>(attr_.max_qp_rd_atom);
  info.MaxOutboundReadLimit = static_cast<ULONG>(attr_.max_qp_init_rd_atom);
  info.MaxReceiveQueueDepth = static_cast<ULONG>(attr_.max_qp_wr);
  info.MaxInitiatorQueueDepth = static_cast<ULONG>(attr_.max_qp_wr);
  info.MaxSharedReceiveQueueDepth = static_cast<ULONG>(attr_.max_srq_wr);
  info.MaxCompletionQueueDepth = static_cast<ULONG>(attr_.max_cqe);
  info.InlineRequestThreshold = std::min<ULONG>(max_inline_, 64);
  info.LargeRequestThreshold = 64 * 1024;
  info.MaxCallerData = max_private_data();
  info.MaxCalleeData = max_private_data();
  info.AdapterFlags = ND_ADAPTER_FLAG_IN_ORDER_DMA_SUPPORTED |
                      ((attr_.device_cap_flags & IBV_DEVICE_RESIZE_MAX_WR) ? ND_ADAPTER_FLAG_CQ_RESIZE_SUPPORTED : 0);
  *pInfo = info;
  *pcbInfo = sizeof(ND2_ADAPTER_INFO);
  return ND_SUCCESS;
}


void VerbsAdapter::add_qp(uint32_t num, VerbsQueuePair* qp) {
  std::lock_guard<ndkit::CheckedMutex> lock(qps_mu_);
  qps_[num] = qp;
}

void VerbsAdapter::remove_qp(uint32_t num) {
  std::lock_guard<ndkit::CheckedMutex> lock(qps_mu_);
  qps_.erase(num);
}

VerbsQueuePair* VerbsAdapter::find_qp_locked(uint32_t num) {
  qps_mu_.assert_held();
  auto it = qps_.find(num);
  return it == qps_.end() ? nullptr : it->second;
}

uint32_t VerbsAdapter::add_srq(VerbsSharedReceiveQueue* srq) {
  std::lock_guard<ndkit::CheckedMutex> lock(qps_mu_);
  uint32_t id = next_srq_id_;
  while (id == 0 || id >= (1u << (64 - kWrSrqShift)) || srqs_.count(id) != 0) {
    id = id + 1 >= (1u << (64 - kWrSrqShift)) ? 1 : id + 1;  // 24 bits of wr_id carry the id
  }
  next_srq_id_ = id + 1;
  srqs_[id] = srq;
  return id;
}

void VerbsAdapter::remove_srq(uint32_t id) {
  std::lock_guard<ndkit::CheckedMutex> lock(qps_mu_);
  srqs_.erase(id);
}

VerbsSharedReceiveQueue* VerbsAdapter::find_srq_locked(uint32_t id) {
  qps_mu_.assert_held();
  auto it = srqs_.find(id);
  return it == srqs_.end() ? nullptr : it->second;
}

HRESULT VerbsAdapter::CreateCompletionQueue(REFIID iid, HANDLE hOverlappedFile, ULONG queueDepth, USHORT, KAFFINITY,
                                            VOID** ppCompletionQueue) {
  if (ppCompletionQueue == nullptr) return ND_INVALID_PARAMETER_6;
  *ppCompletionQueue = nullptr;
  if (!IsEqualGUID(iid, IID_IND2CompletionQueue)) return E_NOINTERFACE;
  if (queueDepth == 0 || queueDepth > static_cast<ULONG>(attr_.max_cqe)) return ND_INVALID_PARAMETER_3;
  VerbsCompletionQueue* cq = nullptr;
  HRESULT hr = VerbsCompletionQueue::create(this, hOverlappedFile, queueDepth, &cq);
  if (FAILED(hr)) return hr;
  *ppCompletionQueue = static_cast<IND2CompletionQueue*>(cq);
  return ND_SUCCESS;
}

HRESULT VerbsAdapter::CreateMemoryRegion(REFIID iid, HANDLE hOverlappedFile, VOID** ppMemoryRegion) {
  if (ppMemoryRegion == nullptr) return ND_INVALID_PARAMETER_3;
  *ppMemoryRegion = nullptr;
  if (!IsEqualGUID(iid, IID_IND2MemoryRegion)) return E_NOINTERFACE;
  VerbsMemoryRegion* mr = nullptr;
  HRESULT hr = VerbsMemoryRegion::create(this, hOverlappedFile, &mr);
  if (FAILED(hr)) return hr;
  *ppMemoryRegion = static_cast<IND2MemoryRegion*>(mr);
  return ND_SUCCESS;
}

HRESULT VerbsAdapter::CreateMemoryWindow(REFIID iid, VOID** ppMemoryWindow) {
  if (ppMemoryWindow == nullptr) return ND_INVALID_PARAMETER_2;
  *ppMemoryWindow = nullptr;
  if (!IsEqualGUID(iid, IID_IND2MemoryWindow)) return E_NOINTERFACE;
  VerbsMemoryWindow* mw = nullptr;
  HRESULT hr = VerbsMemoryWindow::create(this, &mw);
  if (FAILED(hr)) return hr;
  *ppMemoryWindow = static_cast<IND2MemoryWindow*>(mw);
  return ND_SUCCESS;
}

HRESULT VerbsAdapter::CreateSharedReceiveQueue(REFIID iid, HANDLE hOverlappedFile, ULONG queueDepth,
                                               ULONG maxRequestSge, ULONG notifyThreshold, USHORT, KAFFINITY,
                                               VOID** ppSharedReceiveQueue) {
  if (ppSharedReceiveQueue == nullptr) return ND_INVALID_PARAMETER_8;
  *ppSharedReceiveQueue = nullptr;
  if (!IsEqualGUID(iid, IID_IND2SharedReceiveQueue)) return E_NOINTERFACE;
  if (attr_.max_srq == 0 || attr_.max_srq_wr == 0) return ND_NOT_SUPPORTED;  // the device has no SRQs
  if (queueDepth == 0 || queueDepth > static_cast<ULONG>(attr_.max_srq_wr)) return ND_INVALID_PARAMETER_3;
  const ULONG max_sge = static_cast<ULONG>(attr_.max_srq_sge > 0 ? attr_.max_srq_sge : attr_.max_sge);
  if (maxRequestSge == 0 || maxRequestSge > std::min<ULONG>(max_sge, 64)) return ND_INVALID_PARAMETER_4;
  if (notifyThreshold > queueDepth) return ND_INVALID_PARAMETER_5;
  VerbsSharedReceiveQueue* srq = nullptr;
  HRESULT hr = VerbsSharedReceiveQueue::create(this, hOverlappedFile, queueDepth, maxRequestSge, notifyThreshold, &srq);
  if (FAILED(hr)) return hr;
  *ppSharedReceiveQueue = static_cast<IND2SharedReceiveQueue*>(srq);
  return ND_SUCCESS;
}

HRESULT VerbsAdapter::CreateQueuePair(REFIID iid, IUnknown* pReceiveCompletionQueue,
                                      IUnknown* pInitiatorCompletionQueue, VOID* context, ULONG receiveQueueDepth,
                                      ULONG initiatorQueueDepth, ULONG maxReceiveRequestSge,
                                      ULONG maxInitiatorRequestSge, ULONG inlineDataSize, VOID** ppQueuePair) {
  if (ppQueuePair == nullptr) return ND_INVALID_PARAMETER_10;
  *ppQueuePair = nullptr;
  if (!IsEqualGUID(iid, IID_IND2QueuePair)) return E_NOINTERFACE;
  auto* rcq = from_unknown<VerbsCompletionQueue, IND2CompletionQueue>(pReceiveCompletionQueue);
  if (rcq == nullptr || rcq->adapter() != this) return ND_INVALID_PARAMETER_2;
  auto* icq = from_unknown<VerbsCompletionQueue, IND2CompletionQueue>(pInitiatorCompletionQueue);
  if (icq == nullptr || icq->adapter() != this) return ND_INVALID_PARAMETER_3;
  if (receiveQueueDepth == 0 || receiveQueueDepth > static_cast<ULONG>(attr_.max_qp_wr)) return ND_INVALID_PARAMETER_5;
  if (initiatorQueueDepth == 0 || initiatorQueueDepth > static_cast<ULONG>(attr_.max_qp_wr)) {
    return ND_INVALID_PARAMETER_6;
  }
  if (maxReceiveRequestSge == 0 || maxReceiveRequestSge > static_cast<ULONG>(attr_.max_sge)) {
    return ND_INVALID_PARAMETER_7;
  }
  if (maxInitiatorRequestSge == 0 || maxInitiatorRequestSge > static_cast<ULONG>(attr_.max_sge)) {
    return ND_INVALID_PARAMETER_8;
  }
  if (inlineDataSize > max_inline_) return ND_INVALID_PARAMETER_9;
  VerbsQueuePair* qp = nullptr;
  HRESULT hr = VerbsQueuePair::create(this, rcq, icq, nullptr, context, receiveQueueDepth, initiatorQueueDepth,
                                      maxReceiveRequestSge, maxInitiatorRequestSge, inlineDataSize, &qp);
  if (FAILED(hr)) return hr;
  *ppQueuePair = static_cast<IND2QueuePair*>(qp);
  return ND_SUCCESS;
}

HRESULT VerbsAdapter::CreateQueuePairWithSrq(REFIID iid, IUnknown* pReceiveCompletionQueue,
                                             IUnknown* pInitiatorCompletionQueue, IUnknown* pSharedReceiveQueue,
                                             VOID* context, ULONG initiatorQueueDepth, ULONG maxInitiatorRequestSge,
                                             ULONG inlineDataSize, VOID** ppQueuePair) {
  if (ppQueuePair == nullptr) return ND_INVALID_PARAMETER_9;
  *ppQueuePair = nullptr;
  if (!IsEqualGUID(iid, IID_IND2QueuePair)) return E_NOINTERFACE;
  auto* rcq = from_unknown<VerbsCompletionQueue, IND2CompletionQueue>(pReceiveCompletionQueue);
  if (rcq == nullptr || rcq->adapter() != this) return ND_INVALID_PARAMETER_2;
  auto* icq = from_unknown<VerbsCompletionQueue, IND2CompletionQueue>(pInitiatorCompletionQueue);
  if (icq == nullptr || icq->adapter() != this) return ND_INVALID_PARAMETER_3;
  auto* srq = from_unknown<VerbsSharedReceiveQueue, IND2SharedReceiveQueue>(pSharedReceiveQueue);
  if (srq == nullptr || srq->adapter() != this) return ND_INVALID_PARAMETER_4;
  if (initiatorQueueDepth == 0 || initiatorQueueDepth > static_cast<ULONG>(attr_.max_qp_wr)) {
    return ND_INVALID_PARAMETER_6;
  }
  if (maxInitiatorRequestSge == 0 || maxInitiatorRequestSge > static_cast<ULONG>(attr_.max_sge)) {
    return ND_INVALID_PARAMETER_7;
  }
  if (inlineDataSize > max_inline_) return ND_INVALID_PARAMETER_8;
  VerbsQueuePair* qp = nullptr;
  HRESULT hr = VerbsQueuePair::create(this, rcq, icq, srq, context, 0, initiatorQueueDepth, 0, maxInitiatorRequestSge,
                                      inlineDataSize, &qp);
  if (FAILED(hr)) return hr;
  *ppQueuePair = static_cast<IND2QueuePair*>(qp);
  return ND_SUCCESS;
}

HRESULT VerbsAdapter::CreateConnector(REFIID iid, HANDLE hOverlappedFile, VOID** ppConnector) {
  if (ppConnector == nullptr) return ND_INVALID_PARAMETER_3;
  *ppConnector = nullptr;
  if (!IsEqualGUID(iid, IID_IND2Connector)) return E_NOINTERFACE;
  VerbsConnector* c = nullptr;
  HRESULT hr = VerbsConnector::create(this, hOverlappedFile, &c);
  if (FAILED(hr)) return hr;
  *ppConnector = static_cast<IND2Connector*>(c);
  return ND_SUCCESS;
}

HRESULT VerbsAdapter::CreateListener(REFIID iid, HANDLE hOverlappedFile, VOID** ppListener) {
  if (ppListener == nullptr) return ND_INVALID_PARAMETER_3;
  *ppListener = nullptr;
  if (!IsEqualGUID(iid, IID_IND2Listener)) return E_NOINTERFACE;
  VerbsListener* l = nullptr;
  HRESULT hr = VerbsListener::create(this, hOverlappedFile, &l);
  if (FAILED(hr)) return hr;
  *ppListener = static_cast<IND2Listener*>(l);
  return ND_SUCCESS;
}

}  // namespace netdirect::verbs

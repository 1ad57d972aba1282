#include "soft/adapter.h"

#include <cstddef>
#include <cstring>
#include <new>
#include <thread>

#include "soft/completion_queue.h"
#include "soft/connector.h"
#include "soft/listener.h"
#include "soft/memory_region.h"
#include "soft/memory_window.h"
#include "soft/queue_pair.h"
#include "soft/shared_receive_queue.h"
#include "soft/memory/shared_buffer.h"
#include "soft/memory/stag_table.h"
#include "soft/shm/link.h"
#include "soft/variance.h"
#include "soft/trace.h"

namespace netdirect::soft {

// SOCKET_ADDRESS_LIST size protocol (provider and adapter): header + one SOCKET_ADDRESS per entry, the
// sockaddrs packed behind them in the same buffer. NULL or too small → ND_BUFFER_OVERFLOW + size.
HRESULT write_address_list(const std::vector<net::Address>& addrs, SOCKET_ADDRESS_LIST* list, ULONG* size) {
  if (size == nullptr) return ND_INVALID_PARAMETER_2;
  const size_t head = offsetof(SOCKET_ADDRESS_LIST, Address) + addrs.size() * sizeof(SOCKET_ADDRESS);
  size_t need = head;
  for (const auto& a : addrs) need += a.length;
  if (list == nullptr || *size < need) {
    *size = static_cast<ULONG>(need);
    return ND_BUFFER_OVERFLOW;
  }
  // Test mode: the list grew between the consumer's size probe and this call (docs/testing.md).
  if (variance::overflow_first(static_cast<ULONG>(need), size, sizeof(SOCKET_ADDRESS) + sizeof(sockaddr_in6)))
    return ND_BUFFER_OVERFLOW;
  auto* base = reinterpret_cast<uint8_t*>(list);
  size_t off = head;
  list->iAddressCount = static_cast<INT>(addrs.size());
  for (size_t i = 0; i < addrs.size(); ++i) {
    std::memcpy(base + off, &addrs[i].storage, addrs[i].length);
    list->Address[i].lpSockaddr = reinterpret_cast<LPSOCKADDR>(base + off);
    list->Address[i].iSockaddrLength = static_cast<INT>(addrs[i].length);
    off += addrs[i].length;
  }
  *size = static_cast<ULONG>(need);
  return ND_SUCCESS;
}

SoftAdapter::SoftAdapter() = default;

SoftAdapter::~SoftAdapter() {
  stags_.reset();
  // The engine's last tasks may still complete requests on the overlapped files: they are released once it has
  // stopped. The last reference may be dropped by a task on the engine thread itself (a child released there):
  // the engine cannot join its own thread, so another thread stops and destroys it, then releases the files
  // (files_key_ goes along: the key stays unique until then).
  const bool on_engine_thread = engine_ && engine_->in_engine_thread();
  auto stop = [e = std::move(engine_), key = files_key_]() mutable {
    e.reset();
    release_overlapped_files(key.get());
  };
  if (on_engine_thread)
    std::thread(std::move(stop)).detach();
  else
    stop();
}

HRESULT SoftAdapter::open(UINT64 id, SoftAdapter** out) {
  if (out == nullptr) return ND_INVALID_PARAMETER;
  *out = nullptr;
  std::vector<net::Address> addrs;
  for (const auto& la : net::local_addresses()) {
    if (la.if_index == id) addrs.push_back(la.address);
  }
  if (addrs.empty()) return ND_INVALID_PARAMETER;
  auto* a = new (std::nothrow) SoftAdapter();
  if (a == nullptr) return ND_NO_MEMORY;
  a->id_ = id;
  a->handshake_timeout_ms_ = cm::handshake_timeout_from_env();
  a->shared_memory_ = shm::available() && shm::enabled_from_env();
  a->shm_spin_us_ = shm::spin_micros_from_env();
  trace_init();
  a->addresses_ = std::move(addrs);
  a->engine_.reset(new (std::nothrow) Engine());
  a->stags_.reset(new (std::nothrow) StagTable());
  if (!a->engine_ || !a->stags_) {
    a->Release();
    return ND_NO_MEMORY;
  }
  HRESULT hr = a->engine_->start();
  if (FAILED(hr)) {
    a->Release();
    return hr;
  }
  *out = a;
  return ND_SUCCESS;
}

HRESULT SoftAdapter::QueryInterface(REFIID riid, VOID** ppv) {
  if (ppv != nullptr && IsEqualGUID(riid, IID_INDProgress)) {
    AddRef();
    *ppv = static_cast<INDProgress*>(this);
    return S_OK;
  }
  if (ppv != nullptr && IsEqualGUID(riid, IID_INDProgressDescriptors)) {
    AddRef();
    *ppv = static_cast<INDProgressDescriptors*>(this);
    return S_OK;
  }
  if (ppv != nullptr && IsEqualGUID(riid, IID_INDSharedMemory)) {
    AddRef();
    *ppv = static_cast<INDSharedMemory*>(this);
    return S_OK;
  }
#ifdef __linux__
  if (ppv != nullptr && IsEqualGUID(riid, IID_INDSharedBuffers)) {
    AddRef();
    *ppv = static_cast<INDSharedBuffers*>(this);
    return S_OK;
  }
#endif
  if (ppv != nullptr && IsEqualGUID(riid, IID_INDConnectAdmission)) {
    AddRef();
    *ppv = static_cast<INDConnectAdmission*>(this);
    return S_OK;
  }
#ifdef _WIN32
  if (ppv != nullptr && IsEqualGUID(riid, IID_INDCompletionPort)) {
    AddRef();
    *ppv = static_cast<INDCompletionPort*>(this);
    return S_OK;
  }
#endif
  return ComObject::QueryInterface(riid, ppv);
}

HRESULT SoftAdapter::GetDescriptor(UINT64* pDescriptor) {
  if (pDescriptor == nullptr) return ND_INVALID_PARAMETER_1;
  const intptr_t fd = engine_->descriptor();
  if (fd < 0) return ND_NOT_SUPPORTED;
  *pDescriptor = static_cast<UINT64>(fd);
  return ND_SUCCESS;
}

HRESULT SoftAdapter::SetCreateConnectorWait(BOOL wait) {
  connector_wait_.store(wait != FALSE, std::memory_order_relaxed);
  return ND_SUCCESS;
}

HRESULT SoftAdapter::BindCompletionPort(HANDLE hOverlappedFile, HANDLE hIoCompletionPort, ULONG_PTR key) {
#ifdef _WIN32
  return ndkit::bind_overlapped_port(files_key_.get(), hOverlappedFile, hIoCompletionPort, key);
#else
  (void)hOverlappedFile;
  (void)hIoCompletionPort;
  (void)key;
  return ND_NOT_SUPPORTED;  // no completion ports here (not answered by QueryInterface)
#endif
}

HRESULT SoftAdapter::SetSharedMemory(BOOL enable) {
  // Where the transport is not built (not Linux), asking for it is refused; turning it off always works.
  if (enable != FALSE && !shm::available()) return ND_NOT_SUPPORTED;
  shared_memory_.store(enable != FALSE, std::memory_order_relaxed);
  return ND_SUCCESS;
}

HRESULT SoftAdapter::GetSharedMemory(BOOL* pEnabled) {
  if (pEnabled == nullptr) return ND_INVALID_PARAMETER_1;
  *pEnabled = shared_memory() ? TRUE : FALSE;
  return ND_SUCCESS;
}

HRESULT SoftAdapter::GetBusyPollMicros(ULONG* pMicros) {
  if (pMicros == nullptr) return ND_INVALID_PARAMETER_1;
  *pMicros = engine_->shm_links() > 0 ? shm_spin_us_ : 0;  // counted by the queue pairs (Engine::shm_link_up)
  return ND_SUCCESS;
}

namespace {

// The object AllocateBuffer hands out: owns one allocation (memory/shared_buffer.h), not the adapter, so that the
// consumer may release it (a garbage collector's finalizer) after the adapter is gone. Not an ND object: it
// answers IUnknown only.
class SharedBufferObject final : public IUnknown {
 public:
  explicit SharedBufferObject(std::shared_ptr<const SharedBuffer> b) : b_(std::move(b)) {}
  HRESULT ND_CALL QueryInterface(REFIID riid, VOID** ppv) override {
    if (ppv == nullptr) return E_POINTER;
    if (!IsEqualGUID(riid, IID_IUnknown)) {
      *ppv = nullptr;
      return E_NOINTERFACE;
    }
    AddRef();
    *ppv = static_cast<IUnknown*>(this);
    return S_OK;
  }
  ULONG ND_CALL AddRef() override { return static_cast<ULONG>(refs_.fetch_add(1) + 1); }
  ULONG ND_CALL Release() override {
    const long left = refs_.fetch_sub(1) - 1;
    if (left == 0) delete this;
    return static_cast<ULONG>(left);
  }

 private:
  virtual ~SharedBufferObject() { release_shared_buffer(b_); }
  std::shared_ptr<const SharedBuffer> b_;
  std::atomic<long> refs_{1};
};

}  // namespace

HRESULT SoftAdapter::AllocateBuffer(SIZE_T cb, IUnknown** ppBuffer, VOID** ppAddress) {
  if (ppBuffer == nullptr) return ND_INVALID_PARAMETER_2;
  if (ppAddress == nullptr) return ND_INVALID_PARAMETER_3;
  *ppBuffer = nullptr;
  *ppAddress = nullptr;
  if (cb == 0 || cb > limits::kMaxRegistrationSize) return ND_INVALID_PARAMETER_1;
  // Mapped memory serves same-host peers only (docs/shm.md "Mapped regions"): with shared memory off
  // (NETDIRECT_SHM=0, AdapterOptions.sharedMemory false) the caller allocates plain memory and holds no memfd.
  if (!shared_memory()) return ND_NOT_SUPPORTED;
  void* at = nullptr;
  std::shared_ptr<const SharedBuffer> b = allocate_shared_buffer(cb, &at);
  if (!b) return ND_NO_MEMORY;
  auto* o = new (std::nothrow) SharedBufferObject(b);
  if (o == nullptr) {
    release_shared_buffer(b);
    return ND_NO_MEMORY;
  }
  *ppBuffer = o;
  *ppAddress = at;
  return ND_SUCCESS;
}

HRESULT SoftAdapter::SetExternalDriver(BOOL external) { return engine_->set_external_driver(external != FALSE); }

HRESULT SoftAdapter::SetWatcher(INDProgressWatcher* pWatcher, UINT64* pWakeDescriptor) {
  static_assert(ND_PROGRESS_READ == Engine::kRead && ND_PROGRESS_WRITE == Engine::kWrite &&
                ND_PROGRESS_HANGUP == Engine::kHangup);
  if (pWatcher == nullptr) {
    const HRESULT hr = engine_->set_watcher(nullptr, nullptr);
    watcher_.to = nullptr;
    return hr;
  }
  if (pWakeDescriptor == nullptr) return ND_INVALID_PARAMETER_2;
  // The engine holds the bridge only while the watcher is set, and the bridge only this one watcher.
  if (watcher_.to != nullptr && watcher_.to != pWatcher) return ND_INVALID_DEVICE_STATE;
  watcher_.to = pWatcher;
  intptr_t wake = -1;
  const HRESULT hr = engine_->set_watcher(&watcher_, &wake);
  if (FAILED(hr)) {
    watcher_.to = nullptr;
    return hr;
  }
  *pWakeDescriptor = static_cast<UINT64>(wake);
  return ND_SUCCESS;
}

HRESULT SoftAdapter::ProgressReady(VOID* token, ULONG events, ULONG flags, ULONG* pWork) {
  if (token == nullptr) return ND_INVALID_PARAMETER_1;
  if ((flags & ~ND_PROGRESS_DEFER_TRANSMIT) != 0) return ND_INVALID_PARAMETER_3;
  const uint32_t ev = events & (Engine::kRead | Engine::kWrite | Engine::kHangup);
  const uint32_t work =
      engine_->progress_ready(static_cast<Engine::Handler*>(token), ev, (flags & ND_PROGRESS_DEFER_TRANSMIT) != 0);
  if (pWork != nullptr) *pWork = work;
  return ND_SUCCESS;
}

HRESULT SoftAdapter::Progress(ULONG flags, ULONG* pWork) {
  if ((flags & ~ND_PROGRESS_DEFER_TRANSMIT) != 0) return ND_INVALID_PARAMETER_1;
  const uint32_t work = engine_->progress((flags & ND_PROGRESS_DEFER_TRANSMIT) != 0);
  if (pWork != nullptr) *pWork = work;
  return ND_SUCCESS;
}

HRESULT SoftAdapter::Flush() {
  engine_->flush();
  return ND_SUCCESS;
}

HRESULT SoftAdapter::GetNextTimeout(DWORD* pMilliseconds) {
  if (pMilliseconds == nullptr) return ND_INVALID_PARAMETER_1;
  const int ms = engine_->next_timeout_ms();
  *pMilliseconds = ms < 0 ? INFINITE : static_cast<DWORD>(ms);
  return ND_SUCCESS;
}

bool SoftAdapter::serves(const net::Address& a) const {
  for (const auto& mine : addresses_) {
    if (mine.answers_for(a)) return true;
  }
  return false;
}

HRESULT SoftAdapter::CreateOverlappedFile(HANDLE* phOverlappedFile) {
  if (phOverlappedFile == nullptr) return ND_INVALID_PARAMETER_1;
  HANDLE h = create_overlapped_file(files_key_.get());
  if (h == nullptr) return ND_NO_MEMORY;
  *phOverlappedFile = h;
  return ND_SUCCESS;
}

HRESULT SoftAdapter::Query(ND2_ADAPTER_INFO* pInfo, ULONG* pcbInfo) {
  if (pcbInfo == nullptr) return ND_INVALID_PARAMETER_2;
  if (pInfo == nullptr || *pcbInfo < sizeof(ND2_ADAPTER_INFO)) {
    *pcbInfo = sizeof(ND2_ADAPTER_INFO);
    return ND_BUFFER_OVERFLOW;
  }
  ND2_ADAPTER_INFO info{};
  info.InfoVersion = ND_VERSION_2;
  info.VendorId = limits::kVendorId;
  info.DeviceId = limits::kDeviceId;
  info.AdapterId = id_;
  info.MaxRegistrationSize = limits::kMaxRegistrationSize;
  info.MaxWindowSize = limits::kMaxRegistrationSize;
  info.MaxInitiatorSge = limits::kMaxSge;
  info.MaxReceiveSge = limits::kMaxSge;
  info.MaxReadSge = limits::kMaxSge;
  info.MaxTransferLength = limits::kMaxTransferLength;
  info.MaxInlineDataSize = limits::kMaxInlineData;
  info.MaxInboundReadLimit = limits::kMaxReadLimit;
  info.MaxOutboundReadLimit = limits::kMaxReadLimit;
  info.MaxReceiveQueueDepth = limits::kMaxQueueDepth;
  info.MaxInitiatorQueueDepth = limits::kMaxQueueDepth;
  info.MaxSharedReceiveQueueDepth = limits::kMaxQueueDepth;
  info.MaxCompletionQueueDepth = limits::kMaxCqDepth;
  info.InlineRequestThreshold = limits::kInlineThreshold;
  info.LargeRequestThreshold = limits::kLargeRequestThreshold;
  info.MaxCallerData = limits::kMaxPrivateData;
  info.MaxCalleeData = limits::kMaxPrivateData;
  info.AdapterFlags = limits::kAdapterFlags;
  *pInfo = info;
  *pcbInfo = sizeof(ND2_ADAPTER_INFO);
  return ND_SUCCESS;
}

HRESULT SoftAdapter::QueryAddressList(SOCKET_ADDRESS_LIST* pAddressList, ULONG* pcbAddressList) {
  return write_address_list(addresses_, pAddressList, pcbAddressList);
}

HRESULT SoftAdapter::CreateCompletionQueue(REFIID iid, HANDLE hOverlappedFile, ULONG queueDepth, USHORT /*group*/,
                                           KAFFINITY /*affinity*/, VOID** ppCompletionQueue) {
  if (ppCompletionQueue == nullptr) return ND_INVALID_PARAMETER_6;
  *ppCompletionQueue = nullptr;
  if (!IsEqualGUID(iid, IID_IND2CompletionQueue)) return E_NOINTERFACE;
  SoftCompletionQueue* cq = nullptr;
  HRESULT hr = SoftCompletionQueue::create(this, hOverlappedFile, queueDepth, &cq);
  if (FAILED(hr)) return hr;
  *ppCompletionQueue = static_cast<IND2CompletionQueue*>(cq);
  return ND_SUCCESS;
}

HRESULT SoftAdapter::CreateMemoryRegion(REFIID iid, HANDLE hOverlappedFile, VOID** ppMemoryRegion) {
  if (ppMemoryRegion == nullptr) return ND_INVALID_PARAMETER_3;
  *ppMemoryRegion = nullptr;
  if (!IsEqualGUID(iid, IID_IND2MemoryRegion)) return E_NOINTERFACE;
  SoftMemoryRegion* mr = nullptr;
  HRESULT hr = SoftMemoryRegion::create(this, hOverlappedFile, &mr);
  if (FAILED(hr)) return hr;
  *ppMemoryRegion = static_cast<IND2MemoryRegion*>(mr);
  return ND_SUCCESS;
}

HRESULT SoftAdapter::CreateMemoryWindow(REFIID iid, VOID** ppMemoryWindow) {
  if (ppMemoryWindow == nullptr) return ND_INVALID_PARAMETER_2;
  *ppMemoryWindow = nullptr;
  if (!IsEqualGUID(iid, IID_IND2MemoryWindow)) return E_NOINTERFACE;
  SoftMemoryWindow* mw = nullptr;
  HRESULT hr = SoftMemoryWindow::create(this, &mw);
  if (FAILED(hr)) return hr;
  *ppMemoryWindow = static_cast<IND2MemoryWindow*>(mw);
  return ND_SUCCESS;
}

HRESULT SoftAdapter::CreateSharedReceiveQueue(REFIID iid, HANDLE hOverlappedFile, ULONG queueDepth,
                                              ULONG maxRequestSge, ULONG notifyThreshold, USHORT /*group*/,
                                              KAFFINITY /*affinity*/, VOID** ppSharedReceiveQueue) {
  if (ppSharedReceiveQueue == nullptr) return ND_INVALID_PARAMETER_8;
  *ppSharedReceiveQueue = nullptr;
  if (!IsEqualGUID(iid, IID_IND2SharedReceiveQueue)) return E_NOINTERFACE;
  SoftSharedReceiveQueue* srq = nullptr;
  HRESULT hr = SoftSharedReceiveQueue::create(this, hOverlappedFile, queueDepth, maxRequestSge, notifyThreshold, &srq);
  if (FAILED(hr)) return hr;
  *ppSharedReceiveQueue = static_cast<IND2SharedReceiveQueue*>(srq);
  return ND_SUCCESS;
}

HRESULT SoftAdapter::CreateQueuePair(REFIID iid, IUnknown* pReceiveCompletionQueue,
                                     IUnknown* pInitiatorCompletionQueue, VOID* context, ULONG receiveQueueDepth,
                                     ULONG initiatorQueueDepth, ULONG maxReceiveRequestSge,
                                     ULONG maxInitiatorRequestSge, ULONG inlineDataSize, VOID** ppQueuePair) {
  if (ppQueuePair == nullptr) return ND_INVALID_PARAMETER_10;
  *ppQueuePair = nullptr;
  if (!IsEqualGUID(iid, IID_IND2QueuePair)) return E_NOINTERFACE;
  auto* rcq = from_unknown<SoftCompletionQueue, IND2CompletionQueue>(pReceiveCompletionQueue);
  if (rcq == nullptr || rcq->adapter() != this) return ND_INVALID_PARAMETER_2;
  auto* icq = from_unknown<SoftCompletionQueue, IND2CompletionQueue>(pInitiatorCompletionQueue);
  if (icq == nullptr || icq->adapter() != this) return ND_INVALID_PARAMETER_3;
  SoftQueuePair* qp = nullptr;
  HRESULT hr = SoftQueuePair::create(this, rcq, icq, nullptr, context, receiveQueueDepth, initiatorQueueDepth,
                                     maxReceiveRequestSge, maxInitiatorRequestSge, inlineDataSize, &qp);
  if (FAILED(hr)) return hr;
  *ppQueuePair = static_cast<IND2QueuePair*>(qp);
  return ND_SUCCESS;
}

HRESULT SoftAdapter::CreateQueuePairWithSrq(REFIID iid, IUnknown* pReceiveCompletionQueue,
                                            IUnknown* pInitiatorCompletionQueue, IUnknown* pSharedReceiveQueue,
                                            VOID* context, ULONG initiatorQueueDepth, ULONG maxInitiatorRequestSge,
                                            ULONG inlineDataSize, VOID** ppQueuePair) {
  if (ppQueuePair == nullptr) return ND_INVALID_PARAMETER_9;
  *ppQueuePair = nullptr;
  if (!IsEqualGUID(iid, IID_IND2QueuePair)) return E_NOINTERFACE;
  auto* rcq = from_unknown<SoftCompletionQueue, IND2CompletionQueue>(pReceiveCompletionQueue);
  if (rcq == nullptr || rcq->adapter() != this) return ND_INVALID_PARAMETER_2;
  auto* icq = from_unknown<SoftCompletionQueue, IND2CompletionQueue>(pInitiatorCompletionQueue);
  if (icq == nullptr || icq->adapter() != this) return ND_INVALID_PARAMETER_3;
  auto* srq = from_unknown<SoftSharedReceiveQueue, IND2SharedReceiveQueue>(pSharedReceiveQueue);
  if (srq == nullptr || srq->adapter() != this) return ND_INVALID_PARAMETER_4;
  SoftQueuePair* qp = nullptr;
  HRESULT hr = SoftQueuePair::create(this, rcq, icq, srq, context, 0, initiatorQueueDepth, 0, maxInitiatorRequestSge,
                                     inlineDataSize, &qp);
  // The factory numbers parameters as CreateQueuePair does; here the SGE and inline limits come one earlier.
  if (hr == ND_INVALID_PARAMETER_8) return ND_INVALID_PARAMETER_7;
  if (hr == ND_INVALID_PARAMETER_9) return ND_INVALID_PARAMETER_8;
  if (FAILED(hr)) return hr;
  *ppQueuePair = static_cast<IND2QueuePair*>(qp);
  return ND_SUCCESS;
}

HRESULT SoftAdapter::CreateConnector(REFIID iid, HANDLE hOverlappedFile, VOID** ppConnector) {
  if (ppConnector == nullptr) return ND_INVALID_PARAMETER_3;
  *ppConnector = nullptr;
  if (!IsEqualGUID(iid, IID_IND2Connector)) return E_NOINTERFACE;
  // Out of connection-setup resources (cm/connect_gate.h): wait for a setup to end, up to a handshake's deadline
  // (in that time every running setup ends), unless the consumer asked for the refusal at once (INDConnectAdmission)
  // or this is the engine's own thread, which is what frees places.
  if (connect_gate_.full() &&
      (!connector_wait_.load(std::memory_order_relaxed) || engine_->in_engine_thread() ||
       !connect_gate_.wait_for_place(handshake_timeout_ms_)))
    return ND_INSUFFICIENT_RESOURCES;
  SoftConnector* c = nullptr;
  HRESULT hr = SoftConnector::create(this, hOverlappedFile, &c);
  if (FAILED(hr)) return hr;
  *ppConnector = static_cast<IND2Connector*>(c);
  return ND_SUCCESS;
}

HRESULT SoftAdapter::CreateListener(REFIID iid, HANDLE hOverlappedFile, VOID** ppListener) {
  if (ppListener == nullptr) return ND_INVALID_PARAMETER_3;
  *ppListener = nullptr;
  if (!IsEqualGUID(iid, IID_IND2Listener)) return E_NOINTERFACE;
  SoftListener* l = nullptr;
  HRESULT hr = SoftListener::create(this, hOverlappedFile, &l);
  if (FAILED(hr)) return hr;
  *ppListener = static_cast<IND2Listener*>(l);
  return ND_SUCCESS;
}

}  // namespace netdirect::soft

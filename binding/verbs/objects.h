// The ND v2 objects of the verbs provider (docs/verbs.md): each wraps the rdma-core object of the same role.
//
// Threads and locks (docs/threads.md). One progress thread per adapter, `nd-verbs` (ndkit's ProgressDriver, as the
// software provider's `nd-engine`; or the consumer's event loop, through INDProgress, which stops it) waits
// on the adapter's epoll descriptor, which watches the adapter's completion channel and rdma_cm event channel,
// and runs Progress(): CQ events fire the CQ's armed Notify requests, rdma_cm events advance connectors and
// listeners. Progress runs under the adapter's progress lock (VerbsAdapter::progress_mu_), and every object that
// rdma_cm or a completion channel can name (connector, listener, CQ) takes the same lock to unregister and
// destroy its rdma-core object: an event is therefore never dispatched to a freed object. Lock order
// (docs/threads.md): progress_mu_ before an object's own mu_; a CQ's mu_ before the adapter's QP table lock
// (qps_mu_), which comes before a QP's slots_mu_ and an SRQ's mu_. Data-path calls
// (Send/Write/Read/Receive, GetResults) never take progress_mu_.
#ifndef NETDIRECT_VERBS_OBJECTS_H_
#define NETDIRECT_VERBS_OBJECTS_H_

#include <atomic>
#include <deque>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "nd/netdirect_ext.h"
#include "ndkit/checked_mutex.h"
#include "ndkit/object.h"
#include "ndkit/progress_driver.h"
#include "verbs/lib.h"

namespace netdirect::verbs {

// Answered only by this provider's objects (ndkit::ComObject's Marker).
inline const GUID IID_NdVerbsObject = {0x6e657464, 0x6972, 0x6563, {0x74, 0x76, 0x72, 0x62, 0x73, 0x00, 0x00, 0x01}};

template <typename Iface>
using ComObject = ndkit::ComObject<Iface, IID_NdVerbsObject>;

template <typename Impl, typename Iface>
Impl* from_unknown(IUnknown* unk) {
  return ndkit::from_unknown<Impl, Iface, IID_NdVerbsObject>(unk);
}

class VerbsQueuePair;
class VerbsConnector;
class VerbsSharedReceiveQueue;
class VerbsMemoryRegion;

// wr_id of a posted request: the slot index in the low 32 bits; kWrRecv for the QP's receive slots; kWrSrq for
// a shared receive queue's, with the SRQ's id (VerbsAdapter::add_srq) from bit kWrSrqShift on: the completion
// names the QP that consumed the receive, not the SRQ it came from.
constexpr uint64_t kWrRecv = uint64_t{1} << 32;
constexpr uint64_t kWrSrq = uint64_t{1} << 33;
constexpr int kWrSrqShift = 40;

// What an rdma_cm id's context points to: the connector or listener its events are for (nullptr: nobody yet).
struct CmHandler {
  virtual void on_cm_event(const rdma_cm_event& ev) = 0;

 protected:
  ~CmHandler() = default;
};

enum class Transport { kIwarp, kInfiniBand, kRoce };

// An adapter is one port of one device: its ND adapter id (from ResolveAddress) packs the device's index in
// rdma_get_devices() and the port rdma_cm bound the address to, so a dual-port device is two adapters whose QPs
// start on their own port (docs/verbs.md).
// Port 0 (rdma_cm's "not bound to a port") is taken as port 1.
constexpr UINT64 adapter_id(int device, uint8_t port) { return (static_cast<UINT64>(device) << 8) | (port == 0 ? 1 : port); }
constexpr int device_of_id(UINT64 id) { return static_cast<int>(id >> 8); }
constexpr uint8_t port_of_id(UINT64 id) { return static_cast<uint8_t>(id & 0xff); }
const char* transport_name(Transport t);

// ND status of a work completion status and of errno values from rdma-core (the table: docs/verbs.md §3).
HRESULT status_of_wc(enum ibv_wc_status s);
HRESULT status_of_errno(int err);

class VerbsAdapter final : public ComObject<IND2Adapter>,
                           public INDProgress,
                           private ndkit::ProgressDriver::Rounds {
 public:
  // `index`: the device's position in rdma_get_devices() (the adapter id the provider hands out).
  static HRESULT open(UINT64 index, VerbsAdapter** out);

  HRESULT ND_CALL QueryInterface(REFIID riid, VOID** ppv) override;
  ULONG ND_CALL AddRef() override { return ComObject::AddRef(); }
  ULONG ND_CALL Release() override { return ComObject::Release(); }
  // INDProgress
  HRESULT ND_CALL GetDescriptor(UINT64* pDescriptor) override;
  HRESULT ND_CALL SetExternalDriver(BOOL external) override;
  HRESULT ND_CALL Progress(ULONG flags, ULONG* pWork) override;
  HRESULT ND_CALL Flush() override { return ND_SUCCESS; }
  HRESULT ND_CALL GetNextTimeout(DWORD* pMilliseconds) override;
  // IND2Adapter
  HRESULT ND_CALL CreateOverlappedFile(HANDLE* phOverlappedFile) override;
  HRESULT ND_CALL Query(ND2_ADAPTER_INFO* pInfo, ULONG* pcbInfo) override;
  HRESULT ND_CALL QueryAddressList(SOCKET_ADDRESS_LIST* pAddressList, ULONG* pcbAddressList) override;
  HRESULT ND_CALL CreateCompletionQueue(REFIID iid, HANDLE hOverlappedFile, ULONG queueDepth, USHORT group,
                                        KAFFINITY affinity, VOID** ppCompletionQueue) override;
  HRESULT ND_CALL CreateMemoryRegion(REFIID iid, HANDLE hOverlappedFile, VOID** ppMemoryRegion) override;
  HRESULT ND_CALL CreateMemoryWindow(REFIID iid, VOID** ppMemoryWindow) override;
  HRESULT ND_CALL CreateSharedReceiveQueue(REFIID iid, HANDLE hOverlappedFile, ULONG queueDepth, ULONG maxRequestSge,
                                           ULONG notifyThreshold, USHORT group, KAFFINITY affinity,
                                           VOID** ppSharedReceiveQueue) override;
  HRESULT ND_CALL CreateQueuePair(REFIID iid, IUnknown* pReceiveCompletionQueue, IUnknown* pInitiatorCompletionQueue,
                                  VOID* context, ULONG receiveQueueDepth, ULONG initiatorQueueDepth,
                                  ULONG maxReceiveRequestSge, ULONG maxInitiatorRequestSge, ULONG inlineDataSize,
                                  VOID** ppQueuePair) override;
  HRESULT ND_CALL CreateQueuePairWithSrq(REFIID iid, IUnknown* pReceiveCompletionQueue,
                                         IUnknown* pInitiatorCompletionQueue, IUnknown* pSharedReceiveQueue,
                                         VOID* context, ULONG initiatorQueueDepth, ULONG maxInitiatorRequestSge,
                                         ULONG inlineDataSize, VOID** ppQueuePair) override;
  HRESULT ND_CALL CreateConnector(REFIID iid, HANDLE hOverlappedFile, VOID** ppConnector) override;
  HRESULT ND_CALL CreateListener(REFIID iid, HANDLE hOverlappedFile, VOID** ppListener) override;

  const Lib& lib() const { return *lib_; }
  ibv_context* context() const { return ctx_; }
  uint8_t port() const { return port_; }
  ibv_pd* pd() const { return pd_; }
  ibv_comp_channel* channel() const { return cc_; }
  rdma_event_channel* events() const { return ec_; }
  Transport transport() const { return transport_; }
  ULONG max_private_data() const;
  // Adapter.info's MaxTransferLength: the port's max_msg_sz.
  size_t max_transfer() const { return max_msg_ != 0 ? max_msg_ : (size_t{1} << 31); }
  ndkit::CheckedMutex& progress_mu() { return progress_mu_; }
  // qp_num -> queue pair, for completions (wc.qp_num).
  void add_qp(uint32_t num, VerbsQueuePair* qp);
  void remove_qp(uint32_t num);
  // CQ poll (any thread, any lock): a QP's request failed; the next progress round ends its connection
  // (end_failed_connections). Wakes the consumer's loop or the adapter's thread through failfd_.
  void note_qp_failure();
  VerbsQueuePair* find_qp_locked(uint32_t num);
  // Shared receive queues by id (the id travels in wr_id); under qps_mu_ like the QP table.
  uint32_t add_srq(VerbsSharedReceiveQueue* srq);
  void remove_srq(uint32_t id);
  VerbsSharedReceiveQueue* find_srq_locked(uint32_t id);
  ndkit::CheckedMutex& qps_mu() { return qps_mu_; }
  const ibv_device_attr& attr() const { return attr_; }

 private:
  VerbsAdapter() = default;
  ~VerbsAdapter() override;
  HRESULT init(UINT64 index);
  void run_rounds(const std::atomic<bool>& stop) override;  // the thread nd-verbs (ProgressDriver::Rounds)
  void wake() override;                                      // ends the thread's wait (wakefd_)
  uint32_t progress_round();  // with progress_mu_ held
  uint32_t drain_cq_events();
  uint32_t drain_cm_events();
  uint32_t drain_async_events();
  uint32_t end_failed_connections();

  const Lib* lib_ = nullptr;
  UINT64 index_ = 0;
  ibv_context* ctx_ = nullptr;
  uint8_t port_ = 1;
  ibv_pd* pd_ = nullptr;
  ibv_comp_channel* cc_ = nullptr;
  rdma_event_channel* ec_ = nullptr;
  int epfd_ = -1;
  int wakefd_ = -1;  // eventfd: wakes the progress thread (to stop, or to see a consumer take over)
  int failfd_ = -1;  // eventfd in epfd_: a QP's request failed (note_qp_failure)
  Transport transport_ = Transport::kIwarp;
  ibv_device_attr attr_{};
  uint32_t max_msg_ = 0;
  uint32_t max_inline_ = 0;
  ndkit::CheckedMutex progress_mu_;
  ndkit::ProgressDriver thread_{"nd-verbs", this};  // started by init(), closed first by ~VerbsAdapter
  ndkit::CheckedMutex qps_mu_;
  std::unordered_map<uint32_t, VerbsQueuePair*> qps_;
  std::unordered_map<uint32_t, VerbsSharedReceiveQueue*> srqs_;
  uint32_t next_srq_id_ = 1;
};

class VerbsCompletionQueue final : public ComObject<IND2CompletionQueue> {
 public:
  static HRESULT create(VerbsAdapter* adapter, HANDLE file, ULONG depth, VerbsCompletionQueue** out);
  HRESULT ND_CALL CancelOverlappedRequests() override;
  HRESULT ND_CALL GetOverlappedResult(OVERLAPPED* pOverlapped, BOOL bWait) override;
  HRESULT ND_CALL GetNotifyAffinity(USHORT* pGroup, KAFFINITY* pAffinity) override;
  HRESULT ND_CALL Resize(ULONG queueDepth) override;
  HRESULT ND_CALL Notify(ULONG type, OVERLAPPED* pOverlapped) override;
  ULONG ND_CALL GetResults(ND2_RESULT results[], ULONG nResults) override;

  // Progress thread, progress_mu_ held: the completion channel reported this CQ.
  void on_event();
  // Progress thread, progress_mu_ held: the device reported IBV_EVENT_CQ_ERR (an overrun): every armed Notify,
  // ERRORS or not, completes ND_BUFFER_OVERFLOW, and every later one fails so at once (docs/nd2.md §7.3).
  void on_error();
  // Queue pair sweep (VerbsQueuePair::sweep): everything the device has into the stash, then `extra` behind it
  // and the armed notifications fired.
  void drain_to_stash();
  void append_and_fire(const std::vector<ND2_RESULT>& extra);
  ibv_cq* cq() const { return cq_; }
  VerbsAdapter* adapter() const { return adapter_; }

 private:
  VerbsCompletionQueue(VerbsAdapter* adapter, HANDLE file) : adapter_(adapter), file_(file) { adapter_->AddRef(); }
  ~VerbsCompletionQueue() override;
  // Polls up to n work completions and turns them into ND results (silent successes dropped). mu_ held.
  ULONG poll_locked(ND2_RESULT* out, ULONG n);
  bool translate(const ibv_wc& wc, ND2_RESULT* r);

  VerbsAdapter* adapter_;
  HANDLE file_;
  ibv_cq* cq_ = nullptr;
  ndkit::CheckedMutex mu_;
  std::deque<ND2_RESULT> stash_;  // polled while arming a notification, handed out first by GetResults
  std::vector<OVERLAPPED*> waiters_;
  std::vector<ULONG> waiter_types_;
  bool failed_ = false;  // mu_: IBV_EVENT_CQ_ERR arrived
};

class VerbsMemoryRegion final : public ComObject<IND2MemoryRegion> {
 public:
  static HRESULT create(VerbsAdapter* adapter, HANDLE file, VerbsMemoryRegion** out);
  HRESULT ND_CALL CancelOverlappedRequests() override { return ND_SUCCESS; }
  HRESULT ND_CALL GetOverlappedResult(OVERLAPPED* pOverlapped, BOOL bWait) override;
  HRESULT ND_CALL Register(const VOID* pBuffer, SIZE_T cbBuffer, ULONG flags, OVERLAPPED* pOverlapped) override;
  HRESULT ND_CALL Deregister(OVERLAPPED* pOverlapped) override;
  UINT32 ND_CALL GetLocalToken() override;
  UINT32 ND_CALL GetRemoteToken() override;
  ibv_mr* mr();  // nullptr while not registered
  VerbsAdapter* adapter() const { return adapter_; }

 private:
  explicit VerbsMemoryRegion(VerbsAdapter* adapter) : adapter_(adapter) { adapter_->AddRef(); }
  ~VerbsMemoryRegion() override;
  VerbsAdapter* adapter_;
  ndkit::CheckedMutex mu_;
  ibv_mr* mr_ = nullptr;
};

// A request's ND identity while the hardware holds it: wr_id indexes one of these.
struct Slot {
  void* context = nullptr;
  ND2_REQUEST_TYPE type = Nd2RequestTypeSend;
  bool silent = false;
  bool live = false;  // false: completed already (by a sweep); a late completion for it is dropped
};

// A type 1 memory window (ibv_alloc_mw), bound and invalidated through a queue pair (VerbsQueuePair::Bind /
// Invalidate: ibv_bind_mw, an invalidate being a bind of length 0). Devices without windows (siw) fail
// CreateMemoryWindow with ND_NOT_SUPPORTED (docs/verbs.md §2).
class VerbsMemoryWindow final : public ComObject<IND2MemoryWindow> {
 public:
  static HRESULT create(VerbsAdapter* adapter, VerbsMemoryWindow** out);
  UINT32 ND_CALL GetRemoteToken() override;

  ibv_mw* mw() const { return mw_; }
  VerbsAdapter* adapter() const { return adapter_; }
  // The region of the last bind (referenced until the next bind or the window's end): an invalidate names it.
  void set_region(VerbsMemoryRegion* mr);
  VerbsMemoryRegion* region();
  ndkit::CheckedMutex& post_mu() { return mu_; }

 private:
  explicit VerbsMemoryWindow(VerbsAdapter* adapter) : adapter_(adapter) { adapter_->AddRef(); }
  ~VerbsMemoryWindow() override;
  VerbsAdapter* adapter_;
  ibv_mw* mw_ = nullptr;
  ndkit::CheckedMutex mu_;
  VerbsMemoryRegion* region_ = nullptr;
};

// An ibv_srq. Each receive takes a slot (wr_id: kWrSrq, the SRQ's id and the slot); the completion arrives on
// the receive CQ of the QP that consumed it, with that QP's context. Notify: ND_SUCCESS at once when fewer than
// the threshold are outstanding; otherwise it arms the device's SRQ limit (IBV_EVENT_SRQ_LIMIT_REACHED, an
// asynchronous event the adapter's progress reads) and also completes when polling takes the count below it.
class VerbsSharedReceiveQueue final : public ComObject<IND2SharedReceiveQueue> {
 public:
  static HRESULT create(VerbsAdapter* adapter, HANDLE file, ULONG depth, ULONG maxSge, ULONG notifyThreshold,
                        VerbsSharedReceiveQueue** out);
  HRESULT ND_CALL CancelOverlappedRequests() override;
  HRESULT ND_CALL GetOverlappedResult(OVERLAPPED* pOverlapped, BOOL bWait) override;
  HRESULT ND_CALL GetNotifyAffinity(USHORT* pGroup, KAFFINITY* pAffinity) override;
  HRESULT ND_CALL Modify(ULONG queueDepth, ULONG notifyThreshold) override;
  HRESULT ND_CALL Notify(OVERLAPPED* pOverlapped) override;
  HRESULT ND_CALL Receive(VOID* requestContext, const ND2_SGE sge[], ULONG nSge) override;

  ibv_srq* srq() const { return srq_; }
  VerbsAdapter* adapter() const { return adapter_; }
  // CQ poll (adapter's qps_mu_ held): the slot a wr_id names, released.
  Slot take_slot(uint64_t wr_id);
  // Progress (progress_mu_ held): the device reported the SRQ limit.
  void on_limit();

 private:
  VerbsSharedReceiveQueue(VerbsAdapter* adapter, HANDLE file) : adapter_(adapter), file_(file) { adapter_->AddRef(); }
  ~VerbsSharedReceiveQueue() override;
  void check_threshold_locked(std::vector<OVERLAPPED*>* fire);

  VerbsAdapter* adapter_;
  HANDLE file_;
  ibv_srq* srq_ = nullptr;
  uint32_t id_ = 0;
  ULONG max_sge_ = 0;
  ndkit::CheckedMutex mu_;
  ULONG capacity_ = 0;   // ND depth: receives that may be outstanding
  ULONG threshold_ = 0;  // 0: no notification
  ULONG count_ = 0;      // posted and not yet completed
  std::vector<Slot> slots_;
  std::vector<uint32_t> free_;
  std::vector<OVERLAPPED*> waiters_;
};

class VerbsQueuePair final : public ComObject<IND2QueuePair> {
 public:
  // srq: nullable; with one, the QP has no receive queue of its own (rqDepth, rqSge 0).
  static HRESULT create(VerbsAdapter* adapter, VerbsCompletionQueue* rcq, VerbsCompletionQueue* icq,
                        VerbsSharedReceiveQueue* srq, void* context, ULONG rqDepth, ULONG sqDepth, ULONG rqSge,
                        ULONG sqSge, ULONG inlineSize, VerbsQueuePair** out);
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

  ibv_qp* qp() const { return qp_; }
  void* context() const { return context_; }
  VerbsAdapter* adapter() const { return adapter_; }
  // Completion side (CQ poll, under the adapter's qps_mu_): the slot a wr_id names, released.
  Slot take_slot(uint64_t wr_id);
  // Connection side: moves the QP to the state rdma_cm computes (INIT/RTR/RTS) or to ERR.
  HRESULT modify_by_cm(rdma_cm_id* id, ibv_qp_state state);
  // Moves the QP to ERR and completes every request still outstanding with ND_CANCELED: the device flushes what
  // it knows of, and a request a userspace provider queued in its ring after the kernel had moved the QP to
  // ERR (siw does, on a peer's disconnect) is completed here (docs/verbs.md §5). Later posts fail at once.
  void sweep();

 private:
  VerbsQueuePair(VerbsAdapter* adapter, void* context) : adapter_(adapter), context_(context) { adapter_->AddRef(); }
  ~VerbsQueuePair() override;
  HRESULT post_send(void* ctx, ND2_REQUEST_TYPE type, const ND2_SGE* sge, ULONG nSge, ULONG flags,
                    ibv_wr_opcode op, UINT64 remote, UINT32 rkey);
  bool alloc_slot(bool send, void* ctx, ND2_REQUEST_TYPE type, bool silent, uint64_t* wr_id);
  HRESULT post_bind(void* ctx, ND2_REQUEST_TYPE type, VerbsMemoryWindow* mw, VerbsMemoryRegion* mr, uint64_t addr,
                    uint64_t length, int access, ULONG flags);
  // The ND SGEs as verbs SGEs in out[0, *n) (copy_sges, below); *total their bytes.
  HRESULT fill_sges(const ND2_SGE* sge, ULONG nSge, ULONG max, bool receive, ibv_sge* out, ULONG* n,
                    size_t* total);

  VerbsAdapter* adapter_;
  void* context_;
  VerbsCompletionQueue* rcq_ = nullptr;
  VerbsCompletionQueue* icq_ = nullptr;
  VerbsSharedReceiveQueue* srq_ = nullptr;
  ibv_qp* qp_ = nullptr;
  ULONG sq_sge_ = 0, rq_sge_ = 0, inline_ = 0;
  std::atomic<bool> errored_{false};

 public:
  // A request completed with an error other than ND_CANCELED: ND ends the connection then ("the connection is
  // terminated and any further requests are completed with ND_CANCELED", docs/nd2.md §3.6). iWARP devices do it
  // on the wire (a Terminate, then the close); on IB and RoCE the QP goes to error and nothing tells the peer, so
  // the connector disconnects (VerbsAdapter::end_failed_connections, progress_mu_ held).
  std::atomic<bool> failed{false};
  VerbsConnector* connector = nullptr;  // the connector that holds this QP (progress_mu_)

 private:
  ndkit::CheckedMutex slots_mu_;
  std::vector<Slot> slots_;          // [0, sq) send slots, [sq, sq+rq) receive slots
  std::vector<uint32_t> free_send_, free_recv_;
};

class VerbsConnector final : public ComObject<IND2Connector>, public CmHandler {
 public:
  static HRESULT create(VerbsAdapter* adapter, HANDLE file, VerbsConnector** out);
  HRESULT ND_CALL CancelOverlappedRequests() override;
  HRESULT ND_CALL GetOverlappedResult(OVERLAPPED* pOverlapped, BOOL bWait) override;
  HRESULT ND_CALL Bind(const struct sockaddr* pAddress, ULONG cbAddress) override;
  HRESULT ND_CALL Connect(IUnknown* pQueuePair, const struct sockaddr* pDestinationAddress, ULONG cbDestinationAddress,
                          ULONG inboundReadLimit, ULONG outboundReadLimit, const VOID* pPrivateData,
                          ULONG cbPrivateData, OVERLAPPED* pOverlapped) override;
  HRESULT ND_CALL CompleteConnect(OVERLAPPED* pOverlapped) override;
  HRESULT ND_CALL Accept(IUnknown* pQueuePair, ULONG inboundReadLimit, ULONG outboundReadLimit,
                         const VOID* pPrivateData, ULONG cbPrivateData, OVERLAPPED* pOverlapped) override;
  HRESULT ND_CALL Reject(const VOID* pPrivateData, ULONG cbPrivateData) override;
  HRESULT ND_CALL GetReadLimits(ULONG* pInboundReadLimit, ULONG* pOutboundReadLimit) override;
  HRESULT ND_CALL GetPrivateData(VOID* pPrivateData, ULONG* pcbPrivateData) override;
  HRESULT ND_CALL GetLocalAddress(struct sockaddr* pAddress, ULONG* pcbAddress) override;
  HRESULT ND_CALL GetPeerAddress(struct sockaddr* pAddress, ULONG* pcbAddress) override;
  HRESULT ND_CALL NotifyDisconnect(OVERLAPPED* pOverlapped) override;
  HRESULT ND_CALL Disconnect(OVERLAPPED* pOverlapped) override;

  // Progress thread, progress_mu_ held.
  void on_cm_event(const rdma_cm_event& ev) override;
  // Progress (progress_mu_ held): a request of this connector's QP failed; ND ends the connection.
  void end_after_failure_locked();
  // Listener (progress_mu_ held): takes over an incoming connection's id.
  void adopt(rdma_cm_id* id, const rdma_cm_event& ev);
  VerbsAdapter* adapter() const { return adapter_; }

 private:
  enum class State { kIdle, kBound, kResolving, kConnecting, kConnected, kRequested, kAccepting, kEstablished,
                     kDisconnected, kFailed };
  VerbsConnector(VerbsAdapter* adapter, HANDLE file) : adapter_(adapter), file_(file) { adapter_->AddRef(); }
  ~VerbsConnector() override;
  HRESULT ensure_id_locked();
  void complete(OVERLAPPED** ov, HRESULT status);
  void save_conn_param(const rdma_cm_event& ev);
  void start_connect_locked();
  void fail_connect_locked(HRESULT status);
  void on_disconnected_locked();

  VerbsAdapter* adapter_;
  HANDLE file_;
  rdma_cm_id* id_ = nullptr;
  State state_ = State::kIdle;
  VerbsQueuePair* qp_ = nullptr;  // referenced while connecting/connected
  OVERLAPPED* connect_ov_ = nullptr;
  OVERLAPPED* accept_ov_ = nullptr;
  OVERLAPPED* disconnect_ov_ = nullptr;
  std::vector<OVERLAPPED*> notify_disc_;
  std::vector<uint8_t> out_pdata_, in_pdata_;
  ULONG ird_ = 0, ord_ = 0;            // ours, for Connect/Accept
  ULONG peer_ird_ = 0, peer_ord_ = 0;  // the peer's, from the request/reply
  bool disconnected_ = false;
  bool disconnect_sent_ = false;  // rdma_disconnect called (Disconnect, or answering the peer's)
  bool awaiting_complete_ = false;  // initiator: Connect completed, CompleteConnect not yet called
  sockaddr_storage dest_{};
};

class VerbsListener final : public ComObject<IND2Listener>, public CmHandler {
 public:
  static HRESULT create(VerbsAdapter* adapter, HANDLE file, VerbsListener** out);
  HRESULT ND_CALL CancelOverlappedRequests() override;
  HRESULT ND_CALL GetOverlappedResult(OVERLAPPED* pOverlapped, BOOL bWait) override;
  HRESULT ND_CALL Bind(const struct sockaddr* pAddress, ULONG cbAddress) override;
  HRESULT ND_CALL Listen(ULONG backlog) override;
  HRESULT ND_CALL GetLocalAddress(struct sockaddr* pAddress, ULONG* pcbAddress) override;
  HRESULT ND_CALL GetConnectionRequest(IUnknown* pConnector, OVERLAPPED* pOverlapped) override;
  void on_cm_event(const rdma_cm_event& ev) override;  // progress_mu_ held

 private:
  VerbsListener(VerbsAdapter* adapter, HANDLE file) : adapter_(adapter), file_(file) { adapter_->AddRef(); }
  ~VerbsListener() override;
  struct Incoming {
    rdma_cm_id* id;
    rdma_cm_event ev;
    std::vector<uint8_t> pdata;  // ev.param.conn.private_data points nowhere once queued
  };
  void hand_over_locked();
  VerbsAdapter* adapter_;
  HANDLE file_;
  rdma_cm_id* id_ = nullptr;
  bool listening_ = false;
  std::deque<Incoming> incoming_;
  std::deque<std::pair<VerbsConnector*, OVERLAPPED*>> waiting_;
};

// Helpers shared by the objects.
// Copies ND SGEs (at most 64) into verbs SGEs, leaving zero-length ones out: they carry no byte, and devices
// differ on them. A receive that is left with none (a 0-byte receive) gets one SGE of length 0, since siw's
// userspace driver refuses a receive without SGEs (EINVAL). *n: the SGEs written; *total: their bytes. False
// when more than 64 are given.
inline bool copy_sges(const ND2_SGE* sge, ULONG nSge, bool receive, ibv_sge* out, ULONG* n, size_t* total) {
  *n = 0;
  *total = 0;
  if (nSge > 64) return false;
  for (ULONG i = 0; i < nSge; ++i) {
    if (sge[i].BufferLength == 0) continue;
    out[*n].addr = reinterpret_cast<uintptr_t>(sge[i].Buffer);
    out[*n].length = sge[i].BufferLength;
    out[*n].lkey = sge[i].MemoryRegionToken;
    *total += sge[i].BufferLength;
    ++*n;
  }
  if (receive && *n == 0) {
    out[0].addr = nSge > 0 ? reinterpret_cast<uintptr_t>(sge[0].Buffer) : 0;
    out[0].length = 0;
    out[0].lkey = nSge > 0 ? sge[0].MemoryRegionToken : 0;
    *n = 1;
  }
  return true;
}
// A post call's result as a positive errno: userspace drivers return errno values, some of them negated (siw).
inline int errno_of(int rv) { return rv < 0 ? -rv : rv; }
HRESULT copy_sockaddr(const sockaddr* from, sockaddr* to, ULONG* size);
ULONG sockaddr_length(const sockaddr* a);
// A caller's address of a family we know, with `len` covering it.
inline bool valid_sockaddr(const sockaddr* a, ULONG len) { return sockaddr_length(a) != 0 && len >= sockaddr_length(a); }

// A destination with the unspecified address (0.0.0.0, ::) names no host: Connect fails STATUS_BAD_NETWORK_NAME, as
// the software provider's and Windows kernel providers' do (docs/nd2.md §3.6). `a` is a valid_sockaddr.
inline bool unspecified_sockaddr(const sockaddr* a) {
  if (a->sa_family == AF_INET) return reinterpret_cast<const sockaddr_in*>(a)->sin_addr.s_addr == 0;
  const in6_addr& ip = reinterpret_cast<const sockaddr_in6*>(a)->sin6_addr;
  for (const uint8_t b : ip.s6_addr) {
    if (b != 0) return false;
  }
  return true;
}

}  // namespace netdirect::verbs

#endif  // NETDIRECT_VERBS_OBJECTS_H_

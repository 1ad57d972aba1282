// IND2Adapter of the software provider: one per network interface (adapter id = interface index),
// serving that interface's IPv4/IPv6 addresses. Owns the progress engine and the STag table its
// children share, and reports honest limits in ND2_ADAPTER_INFO.
#ifndef NETDIRECT_SOFT_ADAPTER_H_
#define NETDIRECT_SOFT_ADAPTER_H_

#include <atomic>
#include <memory>
#include <vector>

#include "nd/netdirect_ext.h"
#include "soft/cm/connect_gate.h"
#include "soft/engine/engine.h"
#include "soft/limits.h"
#include "soft/object.h"
#include "soft/net/socket.h"

namespace netdirect::soft {

class StagTable;

class SoftAdapter final : public ComObject<IND2Adapter>,
                          public INDProgress,
                          public INDProgressDescriptors,
                          public INDSharedMemory,
                          public INDSharedBuffers,
                          public INDConnectAdmission,
                          public INDCompletionPort {
 public:
  // IUnknown, for every interface: the extensions are answered besides the ComObject's own ids.
  HRESULT ND_CALL QueryInterface(REFIID riid, VOID** ppv) override;
  ULONG ND_CALL AddRef() override { return ComObject::AddRef(); }
  ULONG ND_CALL Release() override { return ComObject::Release(); }
  // INDProgress (nd/netdirect_ext.h): the engine driven by the consumer's loop (engine.h).
  HRESULT ND_CALL GetDescriptor(UINT64* pDescriptor) override;
  HRESULT ND_CALL SetExternalDriver(BOOL external) override;
  HRESULT ND_CALL Progress(ULONG flags, ULONG* pWork) override;
  HRESULT ND_CALL Flush() override;
  HRESULT ND_CALL GetNextTimeout(DWORD* pMilliseconds) override;
  // INDProgressDescriptors (nd/netdirect_ext.h): the engine's sockets watched by the consumer's loop itself
  // (Engine::set_watcher).
  HRESULT ND_CALL SetWatcher(INDProgressWatcher* pWatcher, UINT64* pWakeDescriptor) override;
  HRESULT ND_CALL ProgressReady(VOID* token, ULONG events, ULONG flags, ULONG* pWork) override;
  // INDSharedMemory (nd/netdirect_ext.h): same-host connections through shared memory (docs/shm.md).
  HRESULT ND_CALL SetSharedMemory(BOOL enable) override;
  HRESULT ND_CALL GetSharedMemory(BOOL* pEnabled) override;
  HRESULT ND_CALL GetBusyPollMicros(ULONG* pMicros) override;
  // INDSharedBuffers (nd/netdirect_ext.h): memory a same-host peer can map (memory/shared_buffer.h); Linux only.
  HRESULT ND_CALL AllocateBuffer(SIZE_T cb, IUnknown** ppBuffer, VOID** ppAddress) override;
  // INDConnectAdmission (nd/netdirect_ext.h): CreateConnector with every connect place taken waits (the default)
  // or refuses at once.
  HRESULT ND_CALL SetCreateConnectorWait(BOOL wait) override;
  // INDCompletionPort (nd/netdirect_ext.h): completions of one of this adapter's overlapped files posted to the
  // consumer's port instead of through the carrier pipe (ndkit/overlapped_win.cc); Windows only.
  HRESULT ND_CALL BindCompletionPort(HANDLE hOverlappedFile, HANDLE hIoCompletionPort, ULONG_PTR key) override;

  // Opens adapter `id` (an interface index from ResolveAddress); ND_INVALID_PARAMETER if unknown.
  static HRESULT open(UINT64 id, SoftAdapter** out);

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

  // For children (children hold a reference to their adapter).
  Engine& engine() { return *engine_; }
  StagTable& stags() { return *stags_; }
  UINT64 id() const { return id_; }
  // IPs this adapter serves (port 0); a listener bound to the wildcard listens on each of them.
  const std::vector<net::Address>& addresses() const { return addresses_; }
  bool serves(const net::Address& a) const;
  // Deadline of a connection handshake in ms (cm::handshake_timeout_from_env, read at open).
  uint32_t handshake_timeout_ms() const { return handshake_timeout_ms_; }
  // Same-host connections through shared memory (docs/shm.md): NETDIRECT_SHM at open, then INDSharedMemory.
  bool shared_memory() const { return shared_memory_.load(std::memory_order_relaxed); }
  // Bounds the Connects in progress (engine thread only).
  cm::ConnectGate& connect_gate() { return connect_gate_; }

 private:
  SoftAdapter();
  ~SoftAdapter() override;

  UINT64 id_ = 0;
  uint32_t handshake_timeout_ms_ = 0;
  std::atomic<bool> shared_memory_{false};
  std::atomic<bool> connector_wait_{true};  // INDConnectAdmission
  uint32_t shm_spin_us_ = 0;  // NETDIRECT_SHM_SPIN_MICROS at open (shm::spin_micros_from_env)
  std::vector<net::Address> addresses_;
  std::unique_ptr<Engine> engine_;
  // The consumer's watcher as the engine's (SetWatcher); its calls go straight through.
  struct WatcherBridge final : Engine::Watcher {
    INDProgressWatcher* to = nullptr;
    void watch(net::Socket s, Engine::Handler* h, uint32_t events) override {
      to->Watch(static_cast<UINT64>(s), h, events);
    }
    void unwatch(net::Socket s) override { to->Unwatch(static_cast<UINT64>(s)); }
  };
  WatcherBridge watcher_;
  std::unique_ptr<StagTable> stags_;
  cm::ConnectGate connect_gate_;
  // What the overlapped files are registered under (ndkit/object.h): unique while they are, even when the engine
  // thread outlives the adapter (~SoftAdapter).
  std::shared_ptr<const char> files_key_ = std::make_shared<const char>('\0');
};

}  // namespace netdirect::soft

#endif  // NETDIRECT_SOFT_ADAPTER_H_

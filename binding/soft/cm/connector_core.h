// The connector's state machine (ConnectorCore): the active side's TCP connect, MPA Request/Reply and RTR, the
// passive side's Accept or Reject of a request a listener handed over, disconnect, and the handshake deadlines.
// The ND face (soft/connector.h, SoftConnector) holds one and forwards each IND2Connector call to it.
//
// Threading: ND methods run on any thread; sockets and the MPA channel are touched on the adapter's engine
// thread only (tasks posted there). The core is shared with engine tasks, which keep it alive, and is always
// destroyed on the engine thread, so releasing the COM object never races with socket events. Its mutex is a
// leaf but for Engine::task_mu_ and the port's (docs/threads.md).
#ifndef NETDIRECT_SOFT_CM_CONNECTOR_CORE_H_
#define NETDIRECT_SOFT_CM_CONNECTOR_CORE_H_

#include <chrono>
#include <cstdint>
#include <future>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "ndkit/checked_mutex.h"
#include "soft/cm/cm.h"
#include "soft/cm/connection.h"
#include "soft/engine/engine.h"
#include "soft/net/socket.h"

namespace netdirect::soft {

class SoftAdapter;
class QueuePairCore;

// The connector's state, shared with engine tasks; destroyed on the engine thread only.
class ConnectorCore final : public cm::Channel::Owner, public ConnectionEvents,
                            public std::enable_shared_from_this<ConnectorCore> {
 public:
  ConnectorCore(SoftAdapter* adapter, HANDLE file);
  ~ConnectorCore();
  static std::shared_ptr<ConnectorCore> make(SoftAdapter* adapter, HANDLE file);
  Engine& engine();

  // ---- ND methods (any thread) -------------------------------------------------------------------

  HRESULT bind(const sockaddr* addr, ULONG len);

  HRESULT connect(QueuePairCore* qp, const net::Address& dest, ULONG inbound, ULONG outbound, const void* pd,
                  ULONG cb, OVERLAPPED* ov);

  // mu_ held (connect() claims the QP first, then takes it).
  HRESULT connect_locked(QueuePairCore* qp, const net::Address& dest, ULONG inbound, ULONG outbound,
                         const void* pd, ULONG cb, OVERLAPPED* ov);
  HRESULT complete_connect(OVERLAPPED* ov);
  HRESULT accept(QueuePairCore* qp, ULONG inbound, ULONG outbound, const void* pd, ULONG cb, OVERLAPPED* ov);

  // mu_ held (accept() claims the QP first, then takes it).
  HRESULT accept_locked(QueuePairCore* qp, ULONG inbound, ULONG outbound, const void* pd, ULONG cb,
                        OVERLAPPED* ov);
  HRESULT reject(const void* pd, ULONG cb);
  HRESULT get_read_limits(ULONG* in, ULONG* out);
  HRESULT get_private_data(void* buf, ULONG* len);
  HRESULT get_local_address(sockaddr* out, ULONG* len);
  HRESULT get_peer_address(sockaddr* out, ULONG* len);
  HRESULT notify_disconnect(OVERLAPPED* ov);
  HRESULT disconnect(OVERLAPPED* ov);
  HRESULT cancel();

  // The COM object is gone (Release without Disconnect): abandon everything.
  void released();

  // ---- for the listener ------------------------------------------------------------------------------

  HRESULT reserve();
  void unreserve();
  void adopt(std::unique_ptr<cm::Channel> ch);  // engine thread

  // ---- engine-thread callbacks -------------------------------------------------------------------

  void on_channel_event(cm::Channel* ch, cm::MpaEvent ev) override;
  void on_rtr_received() override;
  void on_connection_closed(HRESULT status) override;

 private:
  enum class St : uint8_t {
    kIdle,             // fresh (possibly bound)
    kAwaitingRequest,  // passed to a listener's GetConnectionRequest
    kConnecting,       // Connect pending: TCP connect + MPA Request/Reply
    kConnected,        // Connect succeeded; CompleteConnect not yet called
    kCompleting,       // CompleteConnect pending
    kIncoming,         // represents an incoming request (GetConnectionRequest completed)
    kAccepting,        // Accept pending (P2P: waiting for the initiator's RTR)
    kEstablished,
    kDisconnecting,    // Disconnect pending
    kClosed,           // ended (disconnected, rejected, failed, cancelled): cannot be reused
  };

  HRESULT open_socket(const net::Address& a);  // mu_ held
  void complete(OVERLAPPED*& slot, HRESULT status);  // mu_ held
  void complete_all(std::vector<OVERLAPPED*>& list, HRESULT status);  // mu_ held
  void do_complete_connect();  // engine thread

  // The QP was flushed while the connection was set up and refused it (QueuePairCore::attach): the request that
  // would have established it is cancelled, the connection is over and no QP event will report it.
  void refused_by_qp(OVERLAPPED*& slot);  // mu_ held

  // Engine thread. The Accept's part of the handshake deadline (docs/security.md "Handshake deadline"):
  // a P2P initiator that withholds its RTR (or never reads our Reply) fails the Accept with ND_IO_TIMEOUT and
  // loses the connection, instead of holding the Accept for good.
  void arm_deadline(uint32_t ms);  // mu_ held
  void disarm_deadline();  // mu_ held (Engine::cancel_timer takes only the engine's leaf task lock)

  // Also the Connect's deadline while it waits for a slot of the adapter's ConnectGate (once it has one, the
  // channel's own timer bounds the rest).
  void on_deadline();  // engine thread

  // Engine thread: the posted half of Connect. Starts the setup when the adapter's ConnectGate has a slot
  // (cm/connect_gate.h), else waits for one under the Connect's deadline.
  void enter_gate();

  // Engine thread, from the gate: the slot is ours unless the Connect was cancelled meanwhile (false).
  bool start_setup();
  void leave_gate();  // engine thread, mu_ not held (the gate may start other connectors' setups)
  void do_accept(ULONG inbound, ULONG outbound, const std::vector<uint8_t>& pd);  // engine thread
  void on_disconnected();  // engine thread, from the QP

  // A decline on its way to the engine. The ND call that declines returns at once, and a consumer may end its
  // process right after (the SDK's NdDualConnection releases its connector and returns from main), which would
  // close the socket before the engine sent the Terminate: wait() lets the calling thread wait for it, a moment at
  // most, unless that thread drives the engine itself (the addon's event-loop mode; a round's own callers).
  struct Declining {
    std::future<void> sent;
    bool can_wait = false;
    void wait() {
      if (can_wait) sent.wait_for(std::chrono::milliseconds(kDeclineWaitMs));
    }
  };
  static constexpr int kDeclineWaitMs = 500;

  // `lock` holds mu_: posts the decline, lets go of mu_, and waits as Declining says.
  void decline_and_wait(std::unique_lock<ndkit::CheckedMutex>& lock, bool then_abandon);
  Declining post_decline(bool then_abandon);  // mu_ held

  // Engine thread: an initiator that accepted the peer's Reply declines the connection: a Terminate in place of
  // the RTR, then an orderly close (abortive if the Terminate cannot be sent at once).
  void decline();
  void abandon();  // engine thread: cancel, release or the handshake deadline
  SoftAdapter* adapter_;
  HANDLE file_;
  ndkit::CheckedMutex mu_;
  St st_ = St::kIdle;
  bool bound_ = false;
  net::Socket sock_ = net::kInvalidSocket;  // bound, not yet connecting
  net::Address local_;
  net::Address peer_;
  std::unique_ptr<cm::Channel> channel_;  // engine thread (set under mu_ before the first task)
  QueuePairCore* qp_ = nullptr;  // referenced from Connect/Accept on
  bool attached_ = false;
  bool broken_ = false;          // setup ended before CompleteConnect/Accept
  bool was_connected_ = false;
  bool disconnect_started_ = false;
  bool disconnect_done_ = false;
  bool have_peer_ = false;
  std::vector<uint8_t> peer_pd_;
  ULONG peer_inbound_ = 0;
  ULONG peer_outbound_ = 0;
  OVERLAPPED* connect_ov_ = nullptr;
  OVERLAPPED* complete_ov_ = nullptr;
  OVERLAPPED* accept_ov_ = nullptr;
  OVERLAPPED* disconnect_ov_ = nullptr;
  std::vector<OVERLAPPED*> notify_ovs_;
  uint64_t deadline_timer_ = 0;  // mu_: the Accept's handshake deadline, or the Connect's while it waits (0: none)
  std::chrono::steady_clock::time_point connect_time_;  // mu_: when Connect was called
  bool holds_slot_ = false;  // engine thread: this Connect's setup holds a slot of the adapter's ConnectGate
  std::string gate_dest_;    // engine thread: the destination this Connect's gate place counts for
};

}  // namespace netdirect::soft

#endif  // NETDIRECT_SOFT_CM_CONNECTOR_CORE_H_

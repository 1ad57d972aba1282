// The listener's state machine (ListenerCore): the listening sockets, the responder's wait for a valid MPA Request
// on each accepted connection, the queue of requests, their pairing with GetConnectionRequest calls, the Listen
// backlog and the descriptor-exhaustion defence. The ND face (soft/listener.h, SoftListener) holds one and forwards
// each IND2Listener call to it. Threading as the connector's (cm/connector_core.h): ND methods on any thread,
// sockets and channels on the engine thread; destroyed on the engine thread.
#ifndef NETDIRECT_SOFT_CM_LISTENER_CORE_H_
#define NETDIRECT_SOFT_CM_LISTENER_CORE_H_

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <vector>

#include "soft/cm/cm.h"
#include "soft/engine/engine.h"
#include "soft/net/socket.h"

namespace netdirect::soft {

class SoftAdapter;
class SoftConnector;

// The listener's state, shared with engine tasks; destroyed on the engine thread only.
class ListenerCore final : public cm::Channel::Owner, public std::enable_shared_from_this<ListenerCore> {
 public:
  ListenerCore(SoftAdapter* adapter, HANDLE file);
  ~ListenerCore();
  static std::shared_ptr<ListenerCore> make(SoftAdapter* adapter, HANDLE file);
  Engine& engine();

  // ---- ND methods (any thread) -------------------------------------------------------------------

  HRESULT bind(const sockaddr* addr, ULONG len);
  HRESULT listen(ULONG backlog);
  HRESULT get_local_address(sockaddr* out, ULONG* len);
  HRESULT get_connection_request(SoftConnector* conn, OVERLAPPED* ov);
  HRESULT cancel();
  void released();

  // ---- engine thread ---------------------------------------------------------------------------------

  void on_channel_event(cm::Channel* ch, cm::MpaEvent ev) override;

 private:
  // The bound on connections in setup per listener (docs/nd2.md "Listen backlog"): Listen's backlog, clamped to
  // kMaxSetupLimit; backlog 0 ("no limit" in the SDK docs, which let a provider apply its own) is
  // kDefaultSetupLimit, the default backlog of the Linux iWARP connection manager.
  static constexpr ULONG kDefaultSetupLimit = 256;
  static constexpr ULONG kMaxSetupLimit = 4096;
  static ULONG setup_limit(ULONG backlog) {
    return backlog == 0 ? kDefaultSetupLimit : std::min(backlog, kMaxSetupLimit);
  }
  using Clock = std::chrono::steady_clock;

  struct ListenSocket final : Engine::Handler {
    ListenerCore* core = nullptr;
    net::Socket socket = net::kInvalidSocket;
    bool registered = false;
    uint64_t resume_timer = 0;  // engine thread: pause() re-registers the socket when it fires
    void on_io(uint32_t /*events*/) override { core->on_accept(this); }
  };

  struct Waiter {
    OVERLAPPED* ov;
    SoftConnector* conn;  // referenced
  };

  // An accepted connection whose MPA Request has not arrived yet, with the address it came from.
  struct HalfOpen {
    std::unique_ptr<cm::Channel> ch;
    net::Address from;
  };
  std::unique_ptr<cm::Channel> take_half_open(cm::Channel* ch);

  // Drops the oldest half-open setup from `from` (any address when null): its socket is reset, the initiator's
  // Connect fails ND_CONNECTION_REFUSED as for a full backlog. handshaking_ is in accept order, oldest first.
  // False when there is none. Engine thread.
  bool evict_oldest_half_open(const net::Address* from);
  size_t half_open_from(const net::Address& from) const;

  // A request in the queue (mu_ held), taken out with its arrival time.
  std::unique_ptr<cm::Channel> take_queued(cm::Channel* ch);

  // Sends a reject Reply and closes (the initiator's Connect completes ND_CONNECTION_REFUSED). Engine thread.
  void refuse_request(std::unique_ptr<cm::Channel> req);

  // Engine thread: a timer for the oldest queued request's expiry, if there is one and none is set.
  void arm_sweep();

  // Engine thread: refuses the requests that waited longer than queued_limit_ms_ for a GetConnectionRequest.
  void sweep();
  HRESULT open_all(const std::vector<net::Address>& ips, uint16_t port);  // mu_ held
  static HRESULT close_all(std::vector<std::unique_ptr<ListenSocket>>& socks, HRESULT hr);
  void stop_sockets();  // engine thread (or destructor)
  void on_accept(ListenSocket* ls);

  // Connections in setup (engine thread): accepted and waiting for their Request, Requests waiting for a
  // GetConnectionRequest, refused ones still sending their reject Reply. Bounded by setup_limit_.
  size_t in_setup();
  void note_setup_peak();

 public:
  ULONG setup_peak() const;
  ULONG refused() const;
  ULONG expired() const;
  ULONG evicted() const;

 private:

  // Out of descriptors (EMFILE/ENFILE) or memory with connections queued (engine thread). The listener is
  // level-triggered: leaving them queued would have the engine report it ready again at once and spin a core.
  // With the spare descriptor free for a moment, one queued connection is accepted and closed at once (the
  // peer sees a reset); on_accept repeats that until the queue is empty. Without a spare (it could not be
  // reopened, or Windows) or when even that fails, the listener stops accepting for kAcceptPauseMs (pause).
  // Nothing is logged: a flood must not also fill the log.
  enum class Shed : uint8_t { kShed, kDrained, kFailed };
  Shed shed_one(ListenSocket* ls);
  void pause(ListenSocket* ls);  // engine thread

  // Pairs queued requests with waiting GetConnectionRequests (engine thread).
  void match();

  SoftAdapter* adapter_;
  HANDLE file_;
  std::mutex mu_;
  bool bound_ = false;
  bool listening_ = false;
  ULONG setup_limit_ = kDefaultSetupLimit;  // set by listen before the engine accepts anything
  std::atomic<ULONG> setup_peak_{0};        // most connections in setup at once (tests)
  std::atomic<ULONG> refused_{0};           // connections refused because the backlog was full (tests)
  std::atomic<ULONG> expired_{0};           // requests refused after waiting queued_limit_ms_ (tests)
  std::atomic<ULONG> evicted_{0};           // half-open setups dropped for a newer connection (also in refused_)
  net::Address bound_addr_;
  uint16_t port_ = 0;
  std::vector<std::unique_ptr<ListenSocket>> socks_;            // mu_
  std::deque<Waiter> waiters_;                                  // mu_
  std::deque<std::unique_ptr<cm::Channel>> queue_;              // mu_ (channels: engine thread)
  std::deque<Clock::time_point> queued_at_;                     // mu_: when each of queue_ arrived
  uint32_t queued_limit_ms_ = cm::kReplyTimeoutMs / 2;           // set by listen
  uint64_t sweep_timer_ = 0;                                    // engine thread
  std::vector<HalfOpen> handshaking_;                           // engine thread, in accept order
  std::vector<std::unique_ptr<cm::Channel>> closing_;           // engine thread
  int spare_fd_ = -1;                                           // engine thread: the reserve descriptor
  std::shared_ptr<shm::Rendezvous> rendezvous_;                 // mu_ (set by listen; read on the engine thread)
};

}  // namespace netdirect::soft

#endif  // NETDIRECT_SOFT_CM_LISTENER_CORE_H_

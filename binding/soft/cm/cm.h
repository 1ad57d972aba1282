// Connection setup of the software provider: the MPA Request/Reply exchange (docs/iwarp.md §1) as a
// socket-agnostic state machine (MpaSetup, testable on byte buffers), and the engine-driven channel that
// runs it on a non-blocking TCP socket until the socket is handed to a QP (Channel).
//
// Our choices (siw-compatible, docs/iwarp.md §1.2, §1.3, §1.5, §4):
//  * We always send MPA v2 (Rev 2 + Enhanced + IRD/ORD words) and request peer-to-peer mode (A bit)
//    offering Write and Read RTRs: the responder then learns exactly when the initiator called
//    CompleteConnect (the RTR is its first FPDU), which is when ND completes Accept. A peer initiator that
//    does not request P2P (Linux siw) gets a plain Reply and Accept completes when the Reply is sent.
//  * CRC32c is requested by default; NETDIRECT_SOFT_CRC=0 turns our request off, =1 forces it on (read
//    once per process). CRC is on for a connection if either side asks for it.
//  * Timeouts as siw: the initiator waits 10 s for the Reply (ND_IO_TIMEOUT), the responder 5 s for the
//    Request after TCP accept (then drops the connection silently). Both are capped by the adapter's
//    handshake deadline (handshake_timeout_from_env, docs/security.md "Handshake deadline"), which on the
//    initiator also covers the TCP connect and on the responder, after Accept, the wait for the RTR
//    (connector_core.cc).
//  * Every connection's socket detects a vanished peer (docs/liveness.md): keepalive while idle and a bound on
//    unacknowledged data, both about NETDIRECT_SOFT_TCP_TIMEOUT_MS (default 30 s; 0 = the OS defaults, read once
//    per process; set before connect, it bounds an unanswered connect too). The QP then fails and its pending
//    requests complete with ND_CANCELED.
//  * Nothing may follow a frame until the other side's turn (docs/iwarp.md §1.1): bytes behind the peer's
//    Request (before our Reply) or behind its Reply (before our first FPDU) fail the setup.
#ifndef NETDIRECT_SOFT_CM_H_
#define NETDIRECT_SOFT_CM_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "soft/engine/engine.h"
#include "soft/wire/mpa.h"
#include "soft/net/socket.h"
#include "soft/shm/link.h"

namespace netdirect::soft::cm {

constexpr uint32_t kReplyTimeoutMs = 10000;   // initiator: Request sent → Reply
constexpr uint32_t kRequestTimeoutMs = 5000;  // responder: TCP accepted → Request
constexpr uint32_t kHandshakeTimeoutMs = 10000;     // default deadline of a whole handshake
constexpr uint32_t kMaxHandshakeTimeoutMs = 3600000;

// The handshake deadline in ms: NETDIRECT_HANDSHAKE_TIMEOUT_MS (1 .. kMaxHandshakeTimeoutMs), otherwise
// kHandshakeTimeoutMs. Read by an adapter when it opens (on the thread opening it: the environment is not
// read from the engine thread).
uint32_t handshake_timeout_from_env();

constexpr uint32_t kTcpTimeoutMs = 30000;  // dead-peer bound (docs/liveness.md)

// Dead-peer timeout of the provider's connections in ms (NETDIRECT_SOFT_TCP_TIMEOUT_MS, default kTcpTimeoutMs).
uint32_t tcp_timeout_default();

// CRC default of the provider (NETDIRECT_SOFT_CRC, default on).
bool crc_default();

// MpaLocal for Connect: application read limits (ND inbound = IRD, outbound = ORD) clamped to
// limits::kMaxReadLimit, v2 + P2P with Write and Read RTRs, CRC per crc_default().
wire::MpaLocal initiator_settings(ULONG inbound_read_limit, ULONG outbound_read_limit);
// MpaLocal for Accept of `request`: our IRD is never raised above the application's inbound limit (ND:
// limits are min(own, peer's)), except to 1 when a Read RTR is the only RTR the peer offers.
wire::MpaLocal responder_settings(const wire::MpaFrame& request, ULONG inbound_read_limit,
                                  ULONG outbound_read_limit);

enum class MpaState : uint8_t {
  kIdle,
  kAwaitReply,     // initiator: Request queued, waiting for the Reply
  kReplyAccepted,  // initiator: Reply accepted; the peer may send nothing until our first FPDU
  kAwaitRequest,   // responder: waiting for the Request
  kRequestHeld,    // responder: Request received, waiting for the application's Accept or Reject
  kAccepted,       // responder: accepting Reply queued; the socket goes to the QP once it is sent
  kRejected,       // initiator: the peer rejected, or we declined (our Terminate is queued); responder: our reject
                   // Reply is queued
  kFailed,         // failed; status() says why
};

enum class MpaEvent : uint8_t {
  kNone,             // need more bytes
  kReplyAccepted,    // initiator: connected (Connect completes with ND_SUCCESS)
  kRejected,         // initiator: the peer rejected (ND_CONNECTION_REFUSED, its private data kept)
  kRequestReceived,  // responder: a valid Request is held for the application
  kFailed,           // status() has the ND status; send out_data() (if any) then close
};

class MpaSetup {
 public:
  MpaSetup() = default;
  MpaSetup(const MpaSetup&) = delete;
  MpaSetup& operator=(const MpaSetup&) = delete;

  // Initiator: queues the Request. ND_INVALID_BUFFER_SIZE if len > limits::kMaxPrivateData.
  HRESULT start_initiator(const wire::MpaLocal& local, const void* private_data, ULONG len);
  // Responder: waits for the Request.
  void start_responder();

  // Feeds bytes read from the socket; returns what happened (kNone: need more). Every byte offered is
  // consumed; bytes the peer was not allowed to send yet fail the setup.
  MpaEvent on_bytes(const uint8_t* data, size_t len);
  // The peer closed (EOF/RST) or the socket failed with status (ND_SUCCESS = orderly close).
  MpaEvent on_closed(HRESULT status = ND_SUCCESS);
  // The current state's timer (timeout_ms()) expired.
  MpaEvent on_timeout();
  // Timer for the current state in ms, 0 = none.
  uint32_t timeout_ms() const;

  // Responder, in kRequestHeld: the application accepts with these settings (see responder_settings).
  // Queues the Reply → kAccepted. If negotiation fails, queues a reject Reply (if the peer's Rev allows)
  // and fails with ND_CONNECTION_ABORTED. ND_INVALID_BUFFER_SIZE (nothing changes) if len is too long.
  HRESULT accept(const wire::MpaLocal& local, const void* private_data, ULONG len);
  // Responder, in kRequestHeld: queues a reject Reply with private data → kRejected.
  HRESULT reject(const void* private_data, ULONG len);
  // Responder: refuse a held Request without application involvement (backlog full).
  void refuse();
  // Initiator, in kReplyAccepted: the application declines the connection (Reject, Disconnect, or the connector
  // released before CompleteConnect). Queues an MPA Terminate (layer LLP, local catastrophic: an RFC 6581 code)
  // in place of the RTR, so the responder's Accept fails ND_CONNECTION_REFUSED, not ND_CONNECTION_ABORTED as for
  // an initiator that vanished (docs/nd2.md §3.6) → kRejected. ND_CONNECTION_INVALID in any other state.
  HRESULT decline();

  // Bytes to send (the driver writes them and calls out_consumed).
  const uint8_t* out_data() const { return out_.data() + out_off_; }
  size_t out_size() const { return out_.size() - out_off_; }
  void out_consumed(size_t n) { out_off_ += n; }

  MpaState state() const { return state_; }
  bool initiator() const { return initiator_; }
  HRESULT status() const { return status_; }                 // failure status (kFailed)
  wire::MpaError error() const { return error_; }            // protocol reason, if any
  const wire::MpaNegotiated& negotiated() const { return negotiated_; }  // kReplyAccepted / kAccepted
  const std::vector<uint8_t>& peer_private_data() const { return peer_pd_; }
  const wire::MpaFrame& peer_frame() const { return peer_frame_; }  // private_data not valid
  // The peer's read limits as offered in its frame (clamped to limits::kMaxReadLimit): its IRD (Reads it
  // serves) and ORD (Reads it issues). v1 peers carry none: the device maximum is reported.
  ULONG peer_ird() const { return peer_ird_; }
  ULONG peer_ord() const { return peer_ord_; }

 private:
  MpaEvent fail(HRESULT status, wire::MpaError e = wire::MpaError::kNone);
  void queue_frame(const wire::MpaFrame& f);
  void queue_terminate(wire::TermCode code, bool crc);
  void keep_peer_frame(const wire::MpaFrame& f);

  MpaState state_ = MpaState::kIdle;
  bool initiator_ = false;
  HRESULT status_ = ND_SUCCESS;
  wire::MpaError error_ = wire::MpaError::kNone;
  wire::MpaLocal local_;
  wire::MpaFrame request_;  // initiator: what we sent (private_data not kept)
  std::unique_ptr<wire::MpaParser> parser_;
  wire::MpaFrame peer_frame_;
  std::vector<uint8_t> peer_pd_;
  ULONG peer_ird_ = 0;
  ULONG peer_ord_ = 0;
  wire::MpaNegotiated negotiated_;
  std::vector<uint8_t> out_;
  size_t out_off_ = 0;
};

// Runs an MpaSetup on a non-blocking TCP socket on the adapter's engine thread. Every method except the
// constructor runs on the engine thread, and the channel is destroyed there too (its owner guarantees it).
class Channel final : public Engine::Handler {
 public:
  class Owner {
   public:
    // A setup event (kReplyAccepted, kRejected, kRequestReceived, kFailed) or kNone when an accepting /
    // rejecting Reply has been fully sent. On kFailed and after a reject the channel has closed its socket.
    virtual void on_channel_event(Channel* ch, MpaEvent ev) = 0;

   protected:
    ~Owner() = default;
  };

  // Takes the socket (created and possibly bound by the caller). `deadline_ms` caps the setup's own timers
  // and, on the initiator, runs from start_connect (the TCP connect included).
  Channel(Engine& engine, net::Socket s, Owner* owner, uint32_t deadline_ms);
  ~Channel();  // closes the socket unless released (abortively if the setup did not finish cleanly)
  Channel(const Channel&) = delete;
  Channel& operator=(const Channel&) = delete;

  void set_owner(Owner* owner) { owner_ = owner; }
  MpaSetup& setup() { return setup_; }
  net::Socket socket() const { return socket_; }

  // Initiator: TCP connect to peer, then send the queued Request (setup().start_initiator first); the setup
  // must end within deadline_ms (what is left of the Connect's deadline after it waited for a slot).
  void start_connect(const net::Address& peer, uint32_t deadline_ms);
  // Responder: the socket is an accepted connection; read the Request.
  void start_accept();
  // After setup().accept()/reject()/refuse(): send what is queued; kNone is reported when sent (accept),
  // a reject closes the socket gracefully once sent.
  void flush();
  // Stops watching the socket and hands it over (to a QP): the channel forgets it.
  net::Socket release_socket();
  // Closes the socket now (abortive = RST) and stops; no more events.
  void close(bool abortive);

  bool closed() const { return socket_ == net::kInvalidSocket; }

  // ---- same host (docs/shm.md; shm/link.h): agreed beside the MPA exchange, which stays as it is ----
  // Initiator: offer rings on the listener's side channel right after the TCP connect (before the Request).
  void enable_shm_offer() { shm_offer_ = true; }
  // Responder: the listener's side channel, where the initiator's offer is found when its Request arrives.
  void set_shm_rendezvous(std::shared_ptr<shm::Rendezvous> r) { rendezvous_ = std::move(r); }
  // The rings, once agreed (initiator: the Reply accepted; responder: the accepting Reply queued); null: TCP.
  std::shared_ptr<shm::Link> take_shm() { return std::move(shm_link_); }

 private:
  void on_io(uint32_t events) override;
  void update_interest();
  void arm_timer();
  void disarm_timer();
  void report(MpaEvent ev);
  bool send_pending();  // false if the socket failed (reported)
  void on_tcp_connected();  // the initiator's TCP connect finished: send the Request (or refuse a self-connect)
  void handle(MpaEvent ev);

  Engine& engine_;
  net::Socket socket_;
  Owner* owner_;
  MpaSetup setup_;
  uint32_t deadline_ms_;
  bool registered_ = false;
  bool connecting_ = false;
  bool reading_ = false;
  uint32_t interest_ = 0;
  uint64_t timer_ = 0;
  bool close_when_sent_ = false;
  bool notify_when_sent_ = false;
  bool shm_offer_ = false;
  std::shared_ptr<shm::Rendezvous> rendezvous_;
  std::unique_ptr<shm::Handshake> shm_hs_;
  std::shared_ptr<shm::Link> shm_link_;
};

}  // namespace netdirect::soft::cm

#endif  // NETDIRECT_SOFT_CM_H_

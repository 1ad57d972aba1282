// The queue pair's state machine (QueuePairCore): the iWARP data path (RDMAP over DDP over MPA FPDUs over TCP, or
// over a same-host link, docs/shm.md) behind the software provider's IND2QueuePair. Split by job as Linux siw does
// (siw_verbs.c apart from siw_qp.c, siw_qp_tx.c, siw_qp_rx.c):
//  * soft/queue_pair.h/.cc — the ND face (SoftQueuePair): creation, IUnknown, the IND2QueuePair methods' argument
//    checks and results. It derives from QueuePairCore and calls only its protected posting API below.
//  * qp/qp.h/.cc (this) — what the queue pair owns and does: the send and receive queues and their admission
//    (posting), request state, in-order completions, error state and flush, attach, inline progress, teardown.
//  * qp/qp_tx.cc — transmit; qp/qp_rx.cc — the queue pair side of the receive stream (socket readiness and the
//    RxEvents it calls); qp/tx_context.h and qp/rx_stream.h — the transmit context and the receive stream (FPDU
//    parsing, staging, CRC, checks, placement), testable on byte buffers (test/native/rx_stream_test.cc);
//    wire/terminate.cc (Terminate build/classify).
// The state machine reaches the CQs and the SRQ through qp/ports.h only, the adapter not at all (it is given the
// engine and the STag table): no file of qp/ includes an ND face (test/seams.test.ts).
//
// ---- Threads and locks -------------------------------------------------------------------------------
// One mutex (mu_) guards the QP and all of its job structs (lock order and threads: docs/threads.md).
//  * rx_ (RxStream, rx_stream.h: FPDU parse state, staging buffer, CRC state, placement target, Send/Read MSNs,
//    the receive being filled) is run by whichever thread does receive progress — the engine thread (on_io) or
//    an inline poller (poll_progress, try-lock) — always under mu_; it calls back into the QP (RxEvents, qp_rx.cc)
//    with mu_ still held. Posting threads never touch it; fail_locked stops it (any thread, under mu_).
//  * tx_ (TxContext, tx_context.h: current message, MSN counters, gather batch, Terminate slot) is run by a
//    posting thread (post_sq_locked transmits directly), the engine thread (EPOLLOUT, Read Responses) or an
//    inline poller, always under mu_.
//  * Shared between them, owned by the QP and also under mu_: the send queue (tx_ reads it; rx_ places Read
//    Responses into its SGEs), the outstanding-Read ring orq_ (tx_ appends, rx_ completes) and the inbound-Read
//    ring irq_ (rx_ appends, tx_ answers), the receive queue (posts append, rx_ takes), and the connection
//    fields (socket, crc_, mss_, ord_/ird_), which are fixed while attached.
// Posts come from any thread; RX and TX continuation run on the engine's driving thread (its own thread, or the
// JS thread in event-loop mode). Posting threads transmit directly while the socket accepts data (low latency) —
// except the event-loop consumer between its progress and its flush, which defers to the flush (qp_tx.cc
// tx_progress_or_defer_locked); on EAGAIN the engine continues on EPOLLOUT. Socket close, Engine::remove and
// ConnectionEvents callbacks happen on the driving thread with mu_ released.
// Inline progress: a thread that polls a CQ in a loop (INDPollingHint, nd/netdirect_ext.h: the JS thread in manual
// mode; inferred for a consumer that gives no hint, completion_queue.cc polling_inferred) and finds it empty runs
// the QP's receive/transmit progress itself (poll_progress, try-lock only) and, while it keeps polling, takes the
// connection from the engine (no EPOLLIN/EPOLLOUT interest, so a message wakes no thread); an engine timer hands
// it back ~1-2 ms after the last inline poll.
// Doorbell batching: a post behind requests still awaiting completion is only queued when someone transmits
// the queue soon anyway — the inline poller at its next empty poll, or else the engine thread when the
// response to an outstanding confirmation Read wakes it — in one gather send (post_sq_locked).
// Request rings (send queue, receive queue, inline buffers, outstanding/inbound Read queues, FPDU header
// scratch) are allocated at creation/attach; nothing is heap-allocated per request.
//
// ---- Transmit ----------------------------------------------------------------------------------------
// Whole messages, one after another (no interleaving within a class): a pending Terminate first, then the
// P2P RTR (initiator), then queued Read Responses (between messages), then the send queue in order, then
// an internal confirmation Read (below). Each FPDU is <= mss & ~7 and carries one DDP segment: header
// (QP scratch) + payload gathered straight from the SGEs + pad/CRC (a payload of <= 64 bytes is copied into the
// scratch slot: one iovec per small FPDU), many FPDUs per send_iov call. A batch of posts (begin_batch/end_batch,
// netdirect's INDPostBatch) is queued and leaves in one such call at its end.
// Read Requests respect ORD (the send queue stalls while the outstanding-Read queue is full);
// READ_FENCE stalls a request until every earlier Read has completed.
//
// ---- Completion confirmation ---------------------------------------------------------------------------
// iWARP does not acknowledge Writes or Sends, but ND must report a remote access violation of a Write as
// ND_ACCESS_VIOLATION on that Write — so a Write/Send may only complete ND_SUCCESS once the peer provably
// processed it. Sent-but-unconfirmed Writes/Sends stay in the send queue in order. A Read Response proves
// that the peer processed everything sent before the Read Request (responses come back in order, and a
// peer that found an error sends a Terminate instead). So when a Read completes, every earlier request is
// confirmed and completes ND_SUCCESS. When the send queue goes idle with unconfirmed requests and no
// already-issued Read covers them, the QP issues an internal zero-length Read Request (sink and source
// STag 1, one ORD slot, never reported to the application); responders answer zero-length Reads without
// STag checks (siw does, and so do we). While one confirmation Read is in flight, a new one is only issued
// once 32 more requests are unconfirmed; otherwise its response triggers the next (streams of small
// Writes: one Read round trip per batch, not per Write). A send queue that does not drain gets one every 64
// requests, so that completions flow back in chunks during a long stream. Silent requests (no completion on success) alone
// only call for a Read once min(32, depth/2) of them are unconfirmed; a failure among them still arrives
// as a Terminate and is reported on the offender. On a Terminate the requests before the offender complete
// ND_SUCCESS (Reads only if their response arrived), the offender gets the mapped status (Writes matched
// by STag/TO of the copied DDP header, Sends by MSN, Reads by Read MSN/order), the rest ND_CANCELED.
// The offender may be the request still being segmented (a large Write rejected on its first FPDU). A peer that
// closes after its Terminate with our Write's rest unread resets the connection: a send that fails first reads
// what the peer sent before the reset (qp_tx.cc tx_flush_locked), so that Terminate still names the offender.
// With a negotiated ORD of 0 no Read can be issued: Writes/Sends then complete on transmission (a
// remote error is then only visible as a Terminate / connection loss, as on hardware without this scheme).
// Bounded wait (qp_tx.cc): while any outbound Read is outstanding, an engine timer checks that bytes move in
// either direction; after response_timeout_ms() without one, the oldest request completes ND_IO_TIMEOUT, the
// rest ND_CANCELED, and the QP Terminates and closes (docs/nd2.md §3.6).
//
// ---- Receive -----------------------------------------------------------------------------------------
// A small state machine takes each FPDU header into a buffer, checks it (DDP/RDMAP validity, MSN/MO,
// STag/key/rights/bounds incl. 64-bit wrap), then places the payload into the target (registered memory of
// the Write's STag, the posted receive, or the Read's SGE list). Staged receive: one recv of up to 4 KiB
// into a per-QP staging buffer (allocated on first use) usually holds many small FPDUs; headers, payloads
// and trailers are copied out of it one FPDU after another. With CRC off, when the staging buffer runs dry
// inside an FPDU, the rest of the payload goes with recv_iov straight into the target, then the trailer,
// then a read-ahead into the staging buffer (a whole buffer behind a small FPDU, only 16 bytes behind one
// with a ULPDU over 16 KiB, so large payloads stay zero-copy). With CRC on, every FPDU goes through the
// staging buffer (grown to 64 KiB when an FPDU does not fit the small one: the whole rest of an FPDU after
// its header always fits, so memory stays bounded per QP): CRC32c runs over the bytes as received and the
// payload is copied into its target only after the check passed. The CRC is never computed over the
// target: the consumer may legitimately rewrite placed bytes at once (spinning on the last byte, which our
// in-order placement allows), and an FPDU that fails the check must place nothing (RFC 5044 §4.4, §7).
// A short read of a small FPDU ends the progress call (the socket is empty; no extra EAGAIN receive).
// Read Requests and Terminates are taken whole into the header buffer.
//
// ---- Errors ------------------------------------------------------------------------------------------
// A check failure sends a Terminate with the RFC code (best effort, as siw), fails the matching local
// request (receive too small → ND_BUFFER_OVERFLOW, a malformed Read Response's Read → ND_REMOTE_ERROR),
// flushes everything else ND_CANCELED, shuts the socket down (draining until the peer closes, so the Terminate
// is not destroyed by a reset), and reports on_connection_closed. A Send/Read/Write whose local SGE failed its
// check at post time is queued anyway, never transmitted, and fails ND_ACCESS_VIOLATION once it is the oldest
// request (then the same teardown). After any error completion the QP is dead: posts succeed and complete
// ND_CANCELED at once (docs/nd2.md §3.6).
#ifndef NETDIRECT_SOFT_QP_QP_H_
#define NETDIRECT_SOFT_QP_QP_H_

#ifndef _WIN32
#include <sys/uio.h>
#endif

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <vector>

#include "nd/nd2.h"
#include "ndkit/checked_mutex.h"
#include "soft/cm/connection.h"
#include "soft/engine/engine.h"
#include "soft/memory/local_sge.h"
#include "soft/qp/ports.h"
#include "soft/qp/rx_stream.h"
#include "soft/qp/tx_context.h"

namespace netdirect::soft {

class StagTable;

// How long a connection waits for a Read Response (our confirmation Read or an application Read) while no byte
// moves in either direction before the oldest request completes ND_IO_TIMEOUT and the connection is torn down
// (docs/nd2.md §3.6). NETDIRECT_SOFT_RESPONSE_TIMEOUT_MS overrides the default (read at each connection; 0 =
// wait for ever).
constexpr uint32_t kResponseTimeoutMsDefault = 10000;
uint32_t response_timeout_ms();

class QueuePairCore : private Engine::Handler, private ProgressSource, private RxEvents {
 public:
  // ---- connection lifecycle (called by the connector) ----
  // Any thread. ND_CONNECTION_ACTIVE if the QP is or was connected or connecting.
  HRESULT begin_connect();
  // Connection setup failed or was abandoned: the QP may connect again.
  void abort_connect();
  // Engine thread: takes ownership of c.socket and starts RX/TX. An initiator with c.mpa.p2p sends the RTR
  // (c.mpa.rtr) as its first FPDU; a P2P responder transmits nothing until that RTR arrived, then calls
  // events->on_rtr_received().
  // false: the QP was flushed while the connection was set up (or memory ran out); the socket is closed and
  // the connection refused, and no event will follow for it.
  bool attach(const Connection& c, ConnectionEvents* events);
  // Any thread. Graceful close: every outstanding request completes ND_CANCELED, the socket is shut down
  // and closed; done() runs on the engine thread afterwards (at once if not connected).
  void disconnect(std::function<void()> done);
  // Any thread: no ConnectionEvents call starts after this returns (one in progress on the engine thread
  // is waited for, unless called from inside it).
  void detach_events();

  // The owner's reference count (the ND face's COM count, soft/queue_pair.h): the connection and work posted to the
  // engine hold one, and so does the connector that drives this machine from Connect/Accept on.
  virtual void hold() = 0;
  virtual void drop() = 0;

  // ---- introspection (tests, connector) ----
  void* context() const { return context_; }
  bool connected() const;
  // The connection moves its FPDUs through shared memory (docs/shm.md), not the TCP stream.
  bool same_host() const;

 protected:
  // The ND face (soft/queue_pair.h) creates the core with the adapter's engine and STag table, its CQs and SRQ
  // (nullable), and the consumer's queue pair context; then sizes the queues (allocate) before any other call.
  QueuePairCore(Engine& engine, StagTable& stags, CompletionSink* rcq, CompletionSink* icq, ReceiveSource* srq,
                void* context);
  virtual ~QueuePairCore();
  // The rings of the send queue (initiatorDepth x max(maxInitiatorSge, 1) SGEs, inline buffers) and, without an
  // SRQ, of the receive queue. ND_NO_MEMORY when they cannot be allocated. Limits are the face's to check.
  HRESULT allocate(uint32_t receiveDepth, uint32_t initiatorDepth, uint32_t maxReceiveSge, uint32_t maxInitiatorSge,
                   uint32_t inlineDataSize);
  // The face's last call, from its destructor while the adapter (engine, STag table) is still referenced: a queue
  // pair released without a flush (never connected, or after teardown) gives back every pin, completes nothing,
  // and closes a socket still attached.
  void destroy();

  // ---- posting: the face's IND2QueuePair methods after their argument checks ----
  // Send / Write / Read (sge and flags checked by the face).
  HRESULT post_send_queue(void* ctx, ND2_REQUEST_TYPE type, const ND2_SGE* sge, ULONG nSge, ULONG flags,
                          uint64_t raddr, uint32_t rtoken);
  // A Receive on the queue pair's own receive queue (ND_INVALID_DEVICE_REQUEST with an SRQ).
  HRESULT post_receive(void* ctx, const ND2_SGE* sge, ULONG nSge);
  // A batch of posts (INDPostBatch, nd/netdirect_ext.h): from begin_batch to the matching end_batch, Send/Write/Read
  // posts are only queued; end_batch then transmits them as one post would (the doorbell batching of post_sq_locked
  // applies to the batch as a whole), so N small requests leave in one gather send instead of one send each.
  // Nested batches end with the outermost. Only transmission moves: admission, order and completions are the same.
  void begin_batch();
  void end_batch();
  // Bind / Invalidate: `apply` (the window's bind or invalidate, ND_SUCCESS or its error) runs under the queue pair's
  // lock once the request is admitted, and the request is queued only when it succeeded; its completion follows in
  // send-queue order.
  template <typename Apply>
  HRESULT post_window(void* ctx, ND2_REQUEST_TYPE type, ULONG flags, Apply&& apply) {
    std::unique_lock<ndkit::CheckedMutex> lock(mu_);
    if (flushed_post_locked(icq_, ctx, type, true)) return ND_SUCCESS;
    HRESULT hr = admit_window_locked();
    if (hr == ND_SUCCESS) hr = apply();
    if (hr == ND_SUCCESS) queue_window_locked(ctx, type, flags);
    lock.unlock();
    kick_teardown();
    return hr;
  }
  // Flush: every outstanding request completes ND_CANCELED, the connection (if any) closes.
  void flush();
  // GetTransport: false before the first connection; else *shm tells a same-host one.
  bool transport(bool* shm) const;

 private:
  HRESULT admit_window_locked();  // check_post_locked and room in the send queue
  void queue_window_locked(void* ctx, ND2_REQUEST_TYPE type, ULONG flags);

  enum class State : uint8_t { kIdle, kConnecting, kConnected, kClosing, kError };

  // Send-queue request kinds (ND2_REQUEST_TYPE values for app requests).
  enum class SqState : uint8_t { kQueued, kTransmitted };
  struct SqRequest {
    void* context;
    ND2_REQUEST_TYPE type;
    SqState state;
    bool read_done;        // Read: response complete
    ULONG flags;
    uint32_t nsge;
    uint32_t msn;          // Send: Send MSN; Read: Read Request MSN
    uint64_t length;
    uint64_t remote_addr;  // Write/Read: TO
    uint32_t remote_token; // Write/Read: STag
    HRESULT local_status = ND_SUCCESS;  // a local SGE failed its check at post time: fails in order (qp_tx.cc)
  };
  // Outstanding outbound Read (ORQ entry; app Read or internal confirmation/RTR Read).
  struct OutRead {
    uint64_t sq_seq;       // app Read: its send-queue sequence
    uint64_t confirm_seq;  // requests with seq < confirm_seq are confirmed by this Read's response
    bool internal;
    uint32_t msn;
    uint32_t sink_stag;
    uint64_t sink_to;
    uint32_t size;
    uint32_t received;
  };
  // Inbound Read to answer (IRQ entry).
  struct InRead {
    uint32_t sink_stag;
    uint64_t sink_to;
    uint32_t size;
    uint32_t sent;
    const uint8_t* src;
    uint32_t pin;          // region STag pinned for the response (0 = none)
  };

  // ---- qp/qp.cc ----
  HRESULT check_post_locked();        // state / CQ health for initiator posts
  // Posts to a queue pair whose connection failed or closed (ND: later requests complete ND_CANCELED): true when
  // the request was completed so (sq: an initiator request, which a never-connected queue pair refuses instead).
  bool flushed_post_locked(CompletionSink* cq, void* ctx, ND2_REQUEST_TYPE type, bool sq);
  HRESULT post_sq_locked(void* ctx, ND2_REQUEST_TYPE type, const ND2_SGE* sge, ULONG nSge, ULONG flags,
                         uint64_t raddr, uint32_t rtoken);
  // Transmits a post now, or leaves it queued for a transmission that comes soon anyway (doorbell batching, qp.cc).
  // total: the post's payload bytes (a batch's largest).
  void doorbell_locked(uint64_t total);
  uint32_t batch_depth_ = 0;   // begin_batch nesting (guarded by mu_)
  uint64_t batch_bytes_ = 0;   // the largest payload posted in the open batch
  LocalSge* sq_sges(uint64_t seq) { return &sq_sge_[(seq % sq_depth_) * sq_max_sge_]; }
  SqRequest& sq_at(uint64_t seq) { return sq_[seq % sq_depth_]; }
  void complete_ready_locked();  // completes transmitted+confirmed requests from the head, in order
  void complete_sq_head_locked(HRESULT status);
  void complete_recv_locked(RecvRequest& r, HRESULT status, ULONG bytes, bool solicited);
  void push_cqe_locked(CompletionSink* cq, void* ctx, ND2_REQUEST_TYPE type, HRESULT status, ULONG bytes,
                       bool solicited);
  // Enters the error state: completes the send queue (offender_seq gets offender_status, earlier
  // transmitted Writes/Sends/Binds ND_SUCCESS when `success_before`, the rest ND_CANCELED), flushes receives
  // (the one in progress gets recv_status), and schedules the socket close + on_connection_closed(event).
  // `report`: call on_connection_closed(event_status) (not for a local Disconnect).
  // `file`/`line`: the caller, for the diagnostic trace (trace.h).
  void fail_locked(HRESULT event_status, bool report, bool success_before, uint64_t offender_seq,
                   HRESULT offender_status, HRESULT recv_status, const char* file = __builtin_FILE(),
                   int line = __builtin_LINE());
  // After dropping mu_: posts the teardown scheduled by fail_locked to the engine thread.
  void kick_teardown();
  void post_teardown();  // runs run_teardown() on the engine thread
  // Engine thread, mu_ not held: closes or lingers the socket, fires events, runs disconnect callbacks.
  void run_teardown();
  void schedule_teardown_locked();
  void close_socket_now();  // engine thread, mu_ not held
  void fire_events();       // engine thread, mu_ not held
  void refuse(net::Socket s);  // attach() turns the connection down; mu_ not held

  // ---- qp/qp_tx.cc ----
  void tx_progress_or_defer_locked();  // tx_progress_locked, or after the driver's flush (qp_tx.cc)
  void tx_progress_locked();        // fills and sends batches until blocked or idle
  bool tx_fill_locked();            // appends FPDUs to the batch; false if nothing to add
  bool tx_next_message_locked();    // picks the next message at a boundary
  void tx_append_fpdu_locked(const wire::DdpHeader& h, const uint8_t* body, size_t body_len,
                             const LocalSge* sge, uint32_t nsge, uint64_t offset, uint32_t len);
  bool tx_flush_locked();           // sends the batch; true when fully sent
  void tx_batch_done_locked();
  void tx_set_want_write_locked(bool want);
  bool needs_confirmation_locked() const;
  bool confirm_read_outstanding_locked() const;  // an internal confirmation Read awaits its response
  bool tx_pending_locked() const;                // tx_progress_locked would transmit something
  bool tx_confirm_due_locked(bool idle) const;    // should a confirmation Read go out at this message boundary?
  void tx_fail_local_error_locked();  // the oldest request failed its local SGE check: it fails, the QP with it
  // Same host: places the Write at sq_next_ into the peer's memory itself (docs/shm.md "Placement by the
  // initiator"); false: it goes through the ring as usual.
  bool tx_place_locked(SqRequest& r);
  // Bounded wait for the peer (confirmation / Read Responses, qp.h "Completion confirmation").
  void peer_wait_started_locked();                // an outbound Read was issued: arm the deadline
  void peer_activity_locked();                    // bytes moved on the connection
  void peer_deadline_check();                     // engine timer
  void peer_timeout_locked();                     // the deadline passed: ND_IO_TIMEOUT, Terminate, close
  void fail_with_terminate_locked(wire::TermCode code, HRESULT event_status, uint64_t offender, HRESULT status);
  void tx_confirm_read_locked();                  // appends one
  void tx_internal_read_locked(uint64_t confirms);  // a zero-length Read Request of ours (RTR or confirmation)
  void send_terminate_locked(wire::TermCode code, const uint8_t* ulpdu, size_t avail, uint16_t ulpdu_len);

  // ---- qp/qp.cc: inline progress (a GetResults caller of rcq_/icq_ found it empty) ----
  // Same work as on_io(kRead) when mu_ is free; ConnectionEvents callbacks still run on the engine thread.
  void poll_progress() override;
  void polling_stopped() override;
  void end_inline_locked();  // the engine watches the socket again
  void add_progress_sources();
  void remove_progress_sources();
  std::atomic<bool> sources_added_{false};  // registered with rcq_/icq_ (changed without mu_)
  // While an inline poller is active the engine watches neither EPOLLIN nor EPOLLOUT (a message wakes no
  // engine thread; the poller reads, and continues blocked sends, itself); a lease timer on the engine gives
  // the connection back to it within ~2 ms of the last inline poll.
  bool rx_inline_ = false;              // guarded by mu_
  uint64_t inline_last_ns_ = 0;         // steady clock of the last inline poll
  uint64_t inline_timer_ = 0;           // the lease check (engine timer id), 0 = none
  bool posted_since_poll_ = false;      // doorbell batching: a post went out since the last inline poll
  void inline_lease_check();            // engine thread

  // ---- qp/qp_rx.cc: the queue pair side of the receive stream (rx_) ----
  void on_io(uint32_t events) override;
  void rx_progress_locked();        // rx_ reads from the socket
  bool rx_drain_locked();           // discards input; true when the lingering socket can be closed
  // RxEvents (rx_stream.h), called by rx_ under mu_.
  bool rx_take_receive(RecvRequest* out) override;
  void rx_receive_done(RecvRequest& r, HRESULT status, uint32_t bytes, bool solicited) override;
  bool rx_read_target(RxReadTarget* out) override;
  void rx_read_progress(uint32_t bytes) override;
  void rx_read_response_done() override;
  bool rx_inbound_read_room(bool rtr) override;
  void rx_inbound_read(uint32_t sink_stag, uint64_t sink_to, uint32_t size, const uint8_t* src,
                       uint32_t pin) override;
  void rx_rtr_received() override;
  void rx_terminate_received(const wire::TerminateInfo& t) override;
  void rx_protocol_error(wire::TermCode code, HRESULT recv_status, HRESULT read_status, const uint8_t* ulpdu,
                         size_t avail, uint16_t ulpdu_len) override;
  void rx_connection_failed(HRESULT status, bool peer_gone) override;

  // ---- fixed after creation ----
  Engine& engine_;                      // the adapter's
  StagTable& stags_;                    // the adapter's
  CompletionSink* rcq_;
  CompletionSink* icq_;
  ReceiveSource* srq_;                  // nullable
  void* context_;
  uint32_t sq_depth_ = 0;
  uint32_t sq_max_sge_ = 0;
  uint32_t rq_depth_ = 0;
  uint32_t rq_max_sge_ = 0;
  uint32_t inline_size_ = 0;
  uint32_t sq_max_sge_request_ = 0;     // maxInitiatorSge as created (sq_max_sge_ is at least 1)

  mutable ndkit::CheckedMutex mu_;
  bool tx_deferred_ = false;  // a flush of the round's driver will run tx_progress_locked (guarded by mu_)
  State state_ = State::kIdle;

  // ---- send queue: head <= sent <= next <= tail (sequence numbers, ring index = seq % depth) ----
  std::vector<SqRequest> sq_;
  std::vector<LocalSge> sq_sge_;        // sq_depth_ * sq_max_sge_
  std::vector<uint8_t> inline_buf_;     // sq_depth_ * inline_size_
  uint64_t sq_head_ = 0;                // oldest not completed
  uint64_t sq_sent_ = 0;                // < sent: every byte handed to the socket
  uint64_t sq_next_ = 0;                // next to start transmitting (< next: in a batch)
  uint64_t sq_tail_ = 0;                // next free
  uint64_t confirmed_seq_ = 0;          // < confirmed: peer processed it
  uint64_t confirm_requested_ = 0;      // an issued Read covers < this
  uint64_t last_unconfirmed_ = 0;       // seq + 1 of the latest transmitted Write/Send
  uint64_t last_signaled_unconfirmed_ = 0;  // the same for Writes/Sends without ND_OP_FLAG_SILENT_SUCCESS

  // ---- receive queue (own, when no SRQ) ----
  std::vector<RecvRequest> rq_;
  uint64_t rq_head_ = 0;
  uint64_t rq_tail_ = 0;

  // ---- peer deadline (13.5): how long an outbound Read may go unanswered while nothing moves ----
  uint32_t peer_timeout_ms_ = 0;        // from peer_timeout_ms() at attach; 0 = wait for ever
  uint64_t peer_timer_ = 0;             // engine timer id, 0 = none
  uint64_t peer_activity_ns_ = 0;       // steady clock of the last byte moved (or of the wait's start)

  // ---- same-host transport (docs/shm.md): FPDUs through shm_'s rings, the socket watched for the peer's end ----
  std::shared_ptr<shm::Link> shm_;      // fixed while attached
  bool shm_check_tcp_ = false;
  bool shm_used_ = false;               // mu_: the connection was a same-host one (transport() after it ended)
  // The engine's handler of shm_'s doorbell (an eventfd the peer writes when it placed bytes or freed space).
  struct Doorbell final : Engine::Handler {
    explicit Doorbell(QueuePairCore* q) : qp(q) {}
    void on_io(uint32_t events) override;
    QueuePairCore* qp;
  };
  Doorbell doorbell_{this};
  bool doorbell_added_ = false;         // registered with the engine (changed on the driving thread)
  uint32_t sock_interest_locked() const;  // kRead, plus kWrite while TCP transmission is blocked
  void io_locked(uint32_t events, bool* close_now);  // on_io's work, from the socket or the doorbell
  void shm_rx_progress_locked();       // rx_progress_locked on shm_ (qp_rx.cc)
  // Our table for the peer's own placements (shm/place.h) is published through the STag table: from when the peer
  // proved it can write into us until the connection fails or closes (then no placement lands any more).
  bool place_sink_on_ = false;          // mu_
  void place_sink_off_locked();

  // ---- connection ----
  ConnectionEvents* events_ = nullptr;
  std::recursive_mutex events_mu_;      // held while calling events_
  net::Socket sock_ = net::kInvalidSocket;
  bool crc_ = false;
  bool initiator_ = false;
  bool p2p_ = false;
  uint8_t rtr_ = 0;
  uint32_t mss_ = 1460;
  uint32_t ord_ = 0;
  uint32_t ird_ = 0;
  bool self_ref_ = false;               // AddRef held while the socket is attached

  // Outstanding outbound Reads (ring of ord_ entries, at least 1) and inbound Reads (ird_ entries).
  std::vector<OutRead> orq_;
  uint32_t orq_head_ = 0, orq_count_ = 0;
  std::vector<InRead> irq_;
  uint32_t irq_head_ = 0, irq_count_ = 0, irq_started_ = 0;  // started: responses queued into batches

  // ---- transmit context (tx_context.h): current message, segmentation, gather batch, Terminate slot ----
  TxContext tx_;

  // ---- receive stream (rx_stream.h): FPDU parsing, staging, CRC, placement ----
  RxStream rx_;

  // ---- teardown ----
  bool teardown_scheduled_ = false;
  bool teardown_kick_ = false;          // teardown scheduled but not yet posted
  bool ever_attached_ = false;
  bool flushing_ = false;  // mu_: fail_locked is completing the queues (CQ pushes may grow the CQ, docs/nd2.md §7.3)
  bool peer_eof_ = false;               // the peer closed / the socket failed: close without lingering
  bool linger_ = false;                 // closing: shut down, drain until EOF
  uint64_t linger_timer_ = 0;
  bool event_closed_pending_ = false;
  HRESULT event_closed_status_ = ND_SUCCESS;
  bool event_rtr_pending_ = false;
  std::vector<std::function<void()>> disconnect_done_;
};

}  // namespace netdirect::soft

#endif  // NETDIRECT_SOFT_QP_QP_H_

// The receive stream of a queue pair (the receive half of its state, as Linux siw's struct siw_rx_stream and
// libfabric tcp's cur_rx): MPA FPDU parsing, the staging buffer, CRC32c state, every check on inbound DDP/RDMAP
// segments and placement into the current target (a Write's registered memory through the STag table, a posted
// receive, or an outstanding Read's sink).
//
// It owns no socket and no queue: bytes come from an RxSource (the connection's socket in production, a byte
// buffer in test/native/rx_stream_test.cc), and everything it needs from or reports to its queue pair goes
// through RxEvents (posted receives, outstanding Reads, inbound Read queue, completions, errors). The locking
// rule is the queue pair's (qp.h): every call happens under the owner's lock.
// Design of the receive path: qp.h, "Receive"; checks and Terminate codes: RFC 5040 §7, RFC 5041 §7,
// RFC 5044 §7.
#ifndef NETDIRECT_SOFT_RX_STREAM_H_
#define NETDIRECT_SOFT_RX_STREAM_H_

#ifndef _WIN32
#include <sys/uio.h>
#endif

#include <cstddef>
#include <cstdint>
#include <memory>

#include "soft/wire/ddp_rdmap.h"
#include "soft/memory/local_sge.h"
#include "soft/net/socket.h"

namespace netdirect::soft {

class StagTable;

// Where the receive stream reads from. Same results as net::recv_bytes / net::recv_iov: bytes read, 0 at end of
// stream, -EAGAIN when nothing is there, another -errno when the connection broke.
class RxSource {
 public:
  virtual ptrdiff_t read(void* buf, size_t len) = 0;
  virtual ptrdiff_t readv(const iovec* iov, int iovcnt) = 0;

 protected:
  ~RxSource() = default;
};

// The production source: a connected, non-blocking socket.
class SocketRxSource final : public RxSource {
 public:
  explicit SocketRxSource(net::Socket s) : s_(s) {}
  ptrdiff_t read(void* buf, size_t len) override { return net::recv_bytes(s_, buf, len); }
  ptrdiff_t readv(const iovec* iov, int iovcnt) override { return net::recv_iov(s_, iov, iovcnt); }

 private:
  net::Socket s_;
};

// The oldest outstanding outbound Read, as the stream needs it to check and place a Read Response.
struct RxReadTarget {
  bool internal = false;       // our own zero-length Read (confirmation / RTR): the payload is discarded
  uint32_t size = 0;           // bytes requested
  uint32_t received = 0;       // bytes placed so far
  uint32_t sink_stag = 0;
  uint64_t sink_to = 0;
  const LocalSge* sge = nullptr;  // app Read: its sink SGEs
  uint32_t nsge = 0;
};

// What the stream needs from its queue pair. Called under the owner's lock, from inside RxStream::progress.
class RxEvents {
 public:
  // The next posted receive (own receive queue or SRQ), moved to *out; false: none posted.
  virtual bool rx_take_receive(RecvRequest* out) = 0;
  // A receive is finished (ND_SUCCESS with the Send's bytes, or the status of a failure): release and complete it.
  virtual void rx_receive_done(RecvRequest& r, HRESULT status, uint32_t bytes, bool solicited) = 0;
  // The oldest outstanding Read; false: none.
  virtual bool rx_read_target(RxReadTarget* out) = 0;
  // A Read Response segment of `bytes` for the oldest outstanding Read passed its header checks.
  virtual void rx_read_progress(uint32_t bytes) = 0;
  // Its last segment arrived whole.
  virtual void rx_read_response_done() = 0;
  // Can one more inbound Read Request be queued? Within IRD, or for the P2P RTR (rtr) within the queue's room.
  virtual bool rx_inbound_read_room(bool rtr) = 0;
  // Queues an inbound Read Request (source already checked and pinned: pin, 0 for zero-length ones).
  virtual void rx_inbound_read(uint32_t sink_stag, uint64_t sink_to, uint32_t size, const uint8_t* src,
                               uint32_t pin) = 0;
  // P2P responder: the initiator's RTR arrived.
  virtual void rx_rtr_received() = 0;
  // The peer sent a Terminate (fatal).
  virtual void rx_terminate_received(const wire::TerminateInfo& t) = 0;
  // The stream found a protocol error: send a Terminate with `code` (copying the offending headers from ulpdu,
  // avail bytes of a ULPDU of ulpdu_len) and fail the queue pair; the receive being filled gets recv_status, the
  // oldest outstanding Read read_status (ND_REMOTE_ERROR when its Read Response was malformed: the peer broke the
  // protocol, docs/nd2.md §3.6; ND_CANCELED otherwise).
  virtual void rx_protocol_error(wire::TermCode code, HRESULT recv_status, HRESULT read_status, const uint8_t* ulpdu,
                                 size_t avail, uint16_t ulpdu_len) = 0;
  // The source reached its end (status ND_SUCCESS at an FPDU boundary, else ND_CONNECTION_ABORTED; peer_gone) or
  // the stream ran out of memory (ND_INSUFFICIENT_RESOURCES, !peer_gone): fail the queue pair.
  virtual void rx_connection_failed(HRESULT status, bool peer_gone) = 0;

 protected:
  ~RxEvents() = default;
};

class RxStream {
 public:
  RxStream(StagTable& stags, RxEvents& events) : stags_(stags), events_(events) {}
  ~RxStream();  // gives back the pin of a placement in progress and the SGE pins of the receive being filled
  RxStream(const RxStream&) = delete;
  RxStream& operator=(const RxStream&) = delete;

  // Connection attached: CRC negotiated or not; a P2P responder (await_rtr) expects the initiator's zero-length
  // RTR of type rtr (wire::kRtrWrite or wire::kRtrRead, as its Reply chose) as the first FPDU.
  void start(bool crc, bool await_rtr, uint8_t rtr);
  // Reads and processes what the source has (bounded: kRxBudget reads), until it would block, the budget is
  // spent, or the stream stopped (error). Every error is reported through RxEvents.
  void progress(RxSource& src);
  // The queue pair failed or closes: no more processing; a placement pin is given back and the receive being
  // filled completes with recv_status (bytes placed so far).
  void stop(HRESULT recv_status);
  bool stopped() const { return state_ == State::kStopped; }
  // At an FPDU boundary with nothing received and not yet processed (same host: shm/place.h `processed`).
  bool idle() const { return state_ == State::kHeader && have_ == 0 && stage_pos_ == stage_end_; }
  // P2P responder before the RTR: the queue pair transmits nothing yet.
  bool awaiting_rtr() const { return awaiting_rtr_; }
  // Gives back the pins the stream holds, without completions (the owner is going away); also the destructor's job,
  // for owners whose STag table may be gone before their members are destroyed.
  void release();

  static constexpr int kRxBudget = 64;  // reads per progress call before other sockets get a turn

 private:
  enum class State : uint8_t { kHeader, kPayload, kStopped };

  bool header();                 // a full header is in buf_: check and set up placement
  bool control_fpdu();                // a whole Read Request / Terminate FPDU is in buf_
  bool staged_fpdu(const uint8_t* src);  // CRC on: check the staged rest of the FPDU, then place it
  bool segment_done();           // payload placed, trailer in: finish the segment
  bool grow_stage();
  void discard(uint32_t len);    // payload goes to a scratch sink (internal Read Responses)
  bool place_pieces(const LocalSge* sge, uint32_t nsge, uint64_t offset, uint32_t len);
  // Reports a protocol error (headers copied from ulpdu; default: the header bytes in buf_) and stops.
  void fail(wire::TermCode code, HRESULT recv_status, const uint8_t* ulpdu = nullptr, size_t avail = 0,
            HRESULT read_status = ND_CANCELED);
  // The same for a malformed Read Response: the outstanding Read it answers completes ND_REMOTE_ERROR.
  void fail_read_response(wire::TermCode code) { fail(code, ND_CANCELED, nullptr, 0, ND_REMOTE_ERROR); }
  // A ULPDU Length too short for any DDP header is a framing error as soon as its 2 bytes are in: the FPDU may
  // be all the peer sends (RFC 5044 §4, RFC 5041 §7). false: the stream failed.
  bool check_ulpdu_length();
  void lost(HRESULT status, bool peer_gone);  // reports rx_connection_failed and stops

  StagTable& stags_;
  RxEvents& events_;
  bool crc_ = false;
  bool awaiting_rtr_ = false;
  uint8_t rtr_ = 0;

  // ---- FPDU parse state ----
  State state_ = State::kHeader;
  uint8_t buf_[128];                    // FPDU header / whole control FPDU
  size_t have_ = 0;
  size_t need_ = wire::kFpduHdrTagged;
  uint32_t crc_state_ = 0;              // running CRC32c of the current FPDU
  wire::DdpHeader hdr_;
  uint16_t ulpdu_len_ = 0;
  size_t hdr_len_ = 0;                  // FPDU header bytes (incl. length)
  uint32_t payload_len_ = 0;            // payload bytes of the current FPDU
  uint8_t seg_hdr_[wire::kFpduHdrSend];  // copy of the current segment's header (buf_ is reused)

  // ---- current placement target: payload pieces still to fill, then the trailer (pad + CRC) ----
  iovec piece_[limits::kMaxSge + 1];
  int piece_count_ = 0;
  int piece_pos_ = 0;
  uint8_t trailer_[8];
  size_t trailer_len_ = 0;
  size_t trailer_have_ = 0;
  uint32_t pin_ = 0;                    // region pinned for the current tagged placement

  // ---- message continuity ----
  uint32_t send_msn_ = wire::kMsnFirst;  // expected MSN of the next Send message
  uint32_t read_msn_ = wire::kMsnFirst;  // expected MSN of the next Read Request
  bool in_send_ = false;                 // a Send message is partly received
  uint32_t send_placed_ = 0;
  RecvRequest recv_;                     // the receive being filled (taken from RQ/SRQ)
  bool have_recv_ = false;
  bool in_write_ = false;                // a Write message is partly received
  uint32_t write_stag_ = 0;
  uint64_t write_next_to_ = 0;

  // ---- staging buffer ----
  // Allocated on first progress: small and medium FPDUs arrive many per read and are parsed and copied from here;
  // bytes [stage_pos_, stage_end_) are received but not yet consumed. With CRC off, large payloads go straight
  // from the source into their targets (readv), with only a short read-ahead; with CRC on every FPDU passes
  // through here and is checked before placement. A connection starts with a small stage (idle QPs stay small)
  // and grows it once it receives medium FPDUs: copying up to kRxCopyFpdu bytes costs less than the extra
  // receive call per FPDU it saves (a 4 KiB Write stream: ~16 FPDUs per call instead of one; measured with
  // scripts/perf/abbench.js).
  static constexpr size_t kRxStageSmall = 4096;
  static constexpr size_t kRxStageLarge = 64 * 1024;
  static constexpr size_t kRxCopyFpdu = 16 * 1024;  // FPDUs up to this ULPDU length: read ahead a whole stage
  static constexpr size_t kRxMediumFpdu = 2048;     // FPDUs above this ULPDU length (up to kRxCopyFpdu) grow it
  // With CRC on, the rest of any FPDU after its header (payload, pad, CRC) must fit the large stage.
  static_assert(kRxStageLarge >= 0xFFFF - wire::kDdpTaggedHdrSize + 3 + wire::kMpaTrailerCrcSize);
  std::unique_ptr<uint8_t[]> stage_;
  size_t stage_cap_ = 0;
  size_t stage_pos_ = 0;
  size_t stage_end_ = 0;
};

}  // namespace netdirect::soft

#endif  // NETDIRECT_SOFT_RX_STREAM_H_

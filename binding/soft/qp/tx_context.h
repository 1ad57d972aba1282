// The transmit context of a queue pair (the transmit half of its state, as Linux siw's struct siw_iwarp_tx and
// libfabric tcp's cur_tx): the message being segmented, the MSN counters, the gather batch of FPDUs (headers,
// trailers, iovecs over the SGEs) being sent, and the Terminate slot. Scheduling (which message next: RTR, Read
// Responses, send queue, confirmation Reads) stays with the queue pair in qp_tx.cc, because it reads the send
// queue and the outstanding/inbound Read queues; this header is the state it works on plus FPDU building.
// Locking: the queue pair's (qp.h): everything here is touched only under its mu_.
#ifndef NETDIRECT_SOFT_TX_CONTEXT_H_
#define NETDIRECT_SOFT_TX_CONTEXT_H_

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

// What the current transmit message is.
enum class TxKind : uint8_t { kNone, kSq, kReadResponse, kInternalRead, kRtr };

// FPDUs gathered for one send_iov sequence: each FPDU is header (hdr slot) + payload iovecs straight over the
// SGEs + trailer (pad + CRC) (RFC 5044 §4); a small payload (<= kPackMax) is copied into the slot between its header
// and its trailer instead, so a small FPDU is one iovec, not three (the kernel walks each iovec of a send: a stream
// of 8-byte Writes spent more there than on the bytes). Heap-held: it is large.
struct TxBatch {
  static constexpr int kMaxFpdus = 128;  // a window of small requests leaves in one send (64 took two for 128 Writes)
  static constexpr int kMaxIov = 512;
  static constexpr size_t kMaxBytes = 1024 * 1024;
  static constexpr size_t kPackMax = 64;
  static constexpr size_t kHdrSlot = 128;
  static_assert(kHdrSlot >= wire::kFpduHdrReadReq + kPackMax + 3 + wire::kMpaTrailerCrcSize,
                "a slot holds the largest header, a packed payload, pad and CRC");
  static constexpr int kIovPerFpduMax = static_cast<int>(limits::kMaxSge) + 2;  // header, pieces, trailer

  iovec iov[kMaxIov];
  int iov_count = 0;
  int iov_pos = 0;                      // first iovec not fully sent
  int fpdus = 0;
  size_t bytes = 0;
  size_t sent = 0;
  uint8_t hdr[kMaxFpdus][kHdrSlot];
  uint8_t trailer[kMaxFpdus][8];
  uint64_t sq_done = 0;                 // the queue pair's sq_sent_ after this batch
  uint32_t irq_done = 0;                // Read Responses finished by this batch

  bool has_room() const { return fpdus < kMaxFpdus && iov_count + kIovPerFpduMax <= kMaxIov && bytes < kMaxBytes; }
  // Appends one FPDU: header h (+ body, for Read Requests), then `len` payload bytes of the SGE list starting at
  // `offset`, then pad and CRC32c (over the header and the payload as they are now, when crc) or zeros.
  void append_fpdu(const wire::DdpHeader& h, const uint8_t* body, size_t body_len, const LocalSge* sge,
                   uint32_t nsge, uint64_t offset, uint32_t len, bool crc);
  // Empties the batch (after it was sent, or to make way for a Terminate).
  void clear() {
    iov_count = iov_pos = fpdus = 0;
    bytes = sent = 0;
    irq_done = 0;
  }
};

struct TxContext {
  uint32_t send_msn = 0;                // last used (pre-incremented)
  uint32_t read_msn = 0;
  TxKind kind = TxKind::kNone;
  uint64_t off = 0;                     // payload bytes of the current message already in batches
  uint64_t len = 0;
  bool rtr_pending = false;             // P2P initiator: the RTR is not yet queued
  bool want_write = false;              // a send hit EAGAIN: waiting for the socket to drain (EPOLLOUT)
  std::unique_ptr<TxBatch> batch;       // allocated at creation
  uint8_t term_fpdu[128];
  bool term_sent = false;
};

}  // namespace netdirect::soft

#endif  // NETDIRECT_SOFT_TX_CONTEXT_H_

// Terminate handling of the queue pair (RDMAP Terminate, RFC 5040 §5.4 / docs/iwarp.md §3.3, §3.4):
// building the Terminate FPDU for an error we detected in an inbound FPDU, and classifying a Terminate the
// peer sent us — which of our requests it names and which ND status that request completes with.
// Pure functions over byte buffers (testable without a socket).
#ifndef NETDIRECT_SOFT_TERMINATE_H_
#define NETDIRECT_SOFT_TERMINATE_H_

#include <cstddef>
#include <cstdint>

#include "nd/nd2.h"
#include "soft/wire/ddp_rdmap.h"

namespace netdirect::soft {

// Largest Terminate FPDU we build: length + untagged hdr + body (+ copied headers) + pad + CRC.
constexpr size_t kTerminateFpduMax = wire::kMpaLenSize + wire::kDdpUntaggedHdrSize + wire::kTermMaxBody + 3 +
                                     wire::kMpaTrailerCrcSize;

// Builds a complete Terminate FPDU (QN 2, MSN 1, MO 0, L) for `code`, copying headers from the offending
// ULPDU (avail bytes at ulpdu, its ULPDU Length ulpdu_len; ulpdu may be null) the way siw does. Returns
// the FPDU size.
size_t build_terminate_fpdu(wire::TermCode code, const uint8_t* ulpdu, size_t avail, uint16_t ulpdu_len,
                            bool crc_on, uint8_t* out);

// Which of our requests a received Terminate names.
enum class TermTarget : uint8_t {
  kNone,         // not attributable: fail the oldest unconfirmed request
  kWrite,        // an RDMA Write: match by sink STag + TO (stag, to)
  kSend,         // a Send: match by Send MSN (msn)
  kRead,         // a Read: match by Read Request MSN (msn), else the oldest outstanding Read
};

struct TermVerdict {
  TermTarget target = TermTarget::kNone;
  uint32_t stag = 0;
  uint64_t to = 0;
  uint32_t msn = 0;
  bool have_msn = false;
  HRESULT status = ND_REMOTE_ERROR;  // status of the named request
};

// Classifies a decoded Terminate (docs/nd2.md §3.5): remote access violations of our Writes (DDP tagged
// errors) and Reads (RDMAP remote protection) → ND_ACCESS_VIOLATION; every other remote error (no
// receive posted, message too long, IRD exceeded, CRC, ...) → ND_REMOTE_ERROR. An unreliable decode
// (t.reliable false: RFC and siw control-word layouts disagree) → kNone, ND_REMOTE_ERROR.
TermVerdict classify_terminate(const wire::TerminateInfo& t);

// A P2P initiator's Terminate in place of its RTR that declines the connection: an MPA-layer Terminate, local
// catastrophic (its application rejected the connection or released the connector before CompleteConnect), or
// insufficient IRD / no matching RTR (it cannot meet the Reply's terms): the codes RFC 6581 adds to MPA. Before
// the RTR no RDMAP message exists on the stream, so an ambiguous control word whose other reading is one of these
// counts: the MPA codes 0x05-0x07 read in the other layout are defined RDMAP codes (decode_terminate_body).
bool terminate_declines_setup(const wire::TerminateInfo& t);

// Short human-readable name of a Terminate code ("DDP tagged 0x01 base or bounds"), for logs/tests.
const char* term_code_name(wire::TermCode c);

}  // namespace netdirect::soft

#endif  // NETDIRECT_SOFT_TERMINATE_H_

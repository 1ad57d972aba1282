// MPA Request/Reply frames (RFC 5044, MPA v2 / RFC 6581): encoding, incremental parsing and the
// connection-setup negotiation (CRC, IRD/ORD, peer-to-peer RTR) as pure functions.
// Layouts and siw behaviour: docs/iwarp.md §1, §4.
#ifndef NETDIRECT_SOFT_MPA_H_
#define NETDIRECT_SOFT_MPA_H_

#include <cstddef>
#include <cstdint>

#include "soft/wire/ddp_rdmap.h"

namespace netdirect::soft::wire {

// ---- frame layout ---------------------------------------------------------------------------------
constexpr size_t kMpaKeySize = 16;
constexpr char kMpaKeyRequest[kMpaKeySize + 1] = "MPA ID Req Frame";  // NUL not sent
constexpr char kMpaKeyReply[kMpaKeySize + 1] = "MPA ID Rep Frame";
constexpr size_t kMpaFlagsOffset = 16;
constexpr size_t kMpaRevOffset = 17;
constexpr size_t kMpaPdLenOffset = 18;
constexpr size_t kMpaHeaderSize = 20;

constexpr uint8_t kMpaFlagMarkers = 0x80;   // M
constexpr uint8_t kMpaFlagCrc = 0x40;       // C
constexpr uint8_t kMpaFlagReject = 0x20;    // R (Reply only)
constexpr uint8_t kMpaFlagEnhanced = 0x10;  // RFC 6581 enhanced connection establishment
constexpr uint8_t kMpaFlagReservedMask = 0x0F;  // sent 0, ignored on receipt (siw uses 0x08 privately)

constexpr uint8_t kMpaRev0 = 0;  // pre-standard (amso1100); accepted, echoed
constexpr uint8_t kMpaRev1 = 1;  // RFC 5044
constexpr uint8_t kMpaRev2 = 2;  // RFC 6581
constexpr uint8_t kMpaRevMax = kMpaRev2;

// MPA v2 IRD/ORD words: first 4 bytes of private data when Rev 2 + Enhanced.
constexpr size_t kMpaV2ParamsSize = 4;
constexpr uint16_t kMpaV2IrdP2p = 0x8000;       // IRD word: A, peer-to-peer (RTR) requested/confirmed
constexpr uint16_t kMpaV2IrdSendRtr = 0x4000;   // IRD word: zero-length Send RTR
constexpr uint16_t kMpaV2OrdWriteRtr = 0x8000;  // ORD word: zero-length RDMA Write RTR
constexpr uint16_t kMpaV2OrdReadRtr = 0x4000;   // ORD word: zero-length RDMA Read RTR
constexpr uint16_t kMpaV2IrdOrdMask = 0x3FFF;   // 14-bit IRD/ORD value
constexpr uint16_t kMpaIrdOrdNone = 0x3FFF;     // nes/Intel "no IRD/ORD given" (RFC meaning unconfirmed)

// Private data limits: RFC 5044 allows 512; Linux (siw, rdma_cm, cxgb4) aborts above 256.
constexpr size_t kMpaMaxPrivateDataSend = 256;  // we send at most this, incl. the 4 v2 bytes
constexpr size_t kMpaMaxPrivateDataRecv = 512;  // we accept up to the RFC limit
constexpr size_t kMpaMaxFrameRecv = kMpaHeaderSize + kMpaMaxPrivateDataRecv;

// Reference limits of Linux siw (informative defaults for MpaLocal).
constexpr uint16_t kSiwMaxIrdOrd = 128;

// RTR (ready-to-receive) operation types, as a bit mask.
constexpr uint8_t kRtrNone = 0;
constexpr uint8_t kRtrSend = 0x1;   // zero-length Send (needs a posted Receive: never chosen by us)
constexpr uint8_t kRtrWrite = 0x2;  // zero-length RDMA Write
constexpr uint8_t kRtrRead = 0x4;   // zero-length RDMA Read Request (uses one ORD/IRD slot)
constexpr uint8_t kRtrAll = kRtrSend | kRtrWrite | kRtrRead;

enum class MpaFrameKind : uint8_t { kRequest, kReply };

// v2 IRD/ORD words, decoded.
struct MpaV2Params {
  bool p2p = false;     // A bit
  uint8_t rtr = 0;      // kRtr* mask
  uint16_t ird = 0;     // 14-bit
  uint16_t ord = 0;     // 14-bit
};

// One MPA Request or Reply: what the parser produces and what the encoder takes.
struct MpaFrame {
  MpaFrameKind kind = MpaFrameKind::kRequest;
  bool markers = false;
  bool crc = false;
  bool reject = false;
  bool enhanced = false;
  uint8_t reserved_flags = 0;    // low flag nibble as received; never sent
  uint8_t rev = kMpaRev2;
  bool v2 = false;               // IRD/ORD words present (Rev 2 + Enhanced + PD_Length >= 4)
  MpaV2Params params;            // valid when v2
  const uint8_t* private_data = nullptr;  // application private data (after the v2 words)
  uint16_t private_data_len = 0;
  uint16_t pd_length = 0;        // parsed: PD_Length on the wire (incl. v2 words); ignored on encode
};

// Why parsing or negotiation failed.
enum class MpaError : uint8_t {
  kNone = 0,
  kBadKey,              // key is not the expected Request/Reply key
  kBadRev,              // Rev > 2 (or Reply Rev differs from the Request)
  kPrivateDataTooLong,  // PD_Length above the receive limit
  kV2ParamsMissing,     // Rev 2 + Enhanced but PD_Length < 4
  kEnhancedMismatch,    // Reply lacks Rev 2 + Enhanced although we sent them
  kMarkers,             // peer requires markers: refused
  kRejected,            // peer set R
  kNoMatchingRtr,       // no usable RTR type / A not echoed / RTR chosen that we did not offer
  kInsufficientIrd,     // IRD/ORD cannot be satisfied
  kEncodeTooLong,       // encode: private data above our send limit
  kEncodeNoSpace,       // encode: output buffer too small
};
const char* mpa_error_name(MpaError e);

// ---- encoding -------------------------------------------------------------------------------------
// Wire size of f (header + v2 words if f.v2 + application private data).
size_t mpa_frame_size(const MpaFrame& f);
// Largest application private data we may put in a frame (252 with v2 words, 256 without).
constexpr size_t mpa_max_app_private_data(bool v2) {
  return kMpaMaxPrivateDataSend - (v2 ? kMpaV2ParamsSize : 0);
}
// Encodes f (key from f.kind; reserved flags sent as 0). Returns bytes written, 0 on error (*err set).
size_t mpa_encode(const MpaFrame& f, uint8_t* out, size_t cap, MpaError* err = nullptr);
// Encodes / decodes the 4 v2 bytes.
void mpa_put_v2_params(const MpaV2Params& p, uint8_t* out);
MpaV2Params mpa_get_v2_params(const uint8_t* in);

// ---- parsing --------------------------------------------------------------------------------------
enum class MpaParseStatus : uint8_t { kNeedMore, kOk, kError };

// Incremental parser for exactly one frame; never consumes bytes past the frame's end (so the caller
// can detect "extra data" behind it). Fixed internal buffer, no heap.
class MpaParser {
 public:
  explicit MpaParser(MpaFrameKind expect, size_t max_private_data = kMpaMaxPrivateDataRecv);
  MpaParser(const MpaParser&) = delete;
  MpaParser& operator=(const MpaParser&) = delete;

  // Starts over, expecting a new frame.
  void reset();
  // Consumes up to len bytes; *consumed = bytes taken. Sticky once kOk or kError.
  MpaParseStatus feed(const uint8_t* data, size_t len, size_t* consumed);
  // Current state.
  MpaParseStatus status() const { return status_; }
  // Reason when status() == kError.
  MpaError error() const { return error_; }
  // Bytes still needed to finish the header, or (after the header) the private data.
  size_t bytes_needed() const;
  // The parsed frame when status() == kOk; private_data points into this parser.
  MpaFrame frame() const;

 private:
  MpaFrameKind expect_;
  size_t max_pd_;
  MpaParseStatus status_ = MpaParseStatus::kNeedMore;
  MpaError error_ = MpaError::kNone;
  size_t have_ = 0;    // bytes buffered
  size_t total_ = 0;   // header + PD_Length once the header is complete, else 0
  uint8_t buf_[kMpaMaxFrameRecv];
};

// One-shot parse of a frame at the start of data. On kOk *out aliases data, *consumed = frame size.
MpaParseStatus mpa_parse(const uint8_t* data, size_t len, MpaFrameKind expect, MpaFrame* out,
                         size_t* consumed, MpaError* err,
                         size_t max_private_data = kMpaMaxPrivateDataRecv);

// ---- negotiation ----------------------------------------------------------------------------------
// Our side's settings for one connection.
struct MpaLocal {
  bool want_crc = false;             // set C in our frame (CRC is on if either side sets it)
  bool use_v2 = true;                // initiator: send Rev 2 + Enhanced + IRD/ORD words
  uint16_t max_ird = kSiwMaxIrdOrd;  // device limit: inbound Reads we can queue
  uint16_t max_ord = kSiwMaxIrdOrd;  // device limit: outbound Reads we can have outstanding
  uint16_t ird = 1;                  // application's IRD (rdma_cm responder_resources)
  uint16_t ord = 1;                  // application's ORD (rdma_cm initiator_depth)
  bool p2p = false;                  // initiator: request an RTR exchange (A bit)
  uint8_t rtr_types = kRtrWrite | kRtrRead;  // initiator: types offered; responder: types acceptable
  bool strict_ird_ord = false;       // refuse (0x06) instead of adjusting the application's IRD/ORD
};

// What both sides settled on.
struct MpaNegotiated {
  uint8_t rev = kMpaRev2;
  bool v2 = false;          // IRD/ORD words exchanged
  bool crc = false;         // CRC32c on every FPDU in both directions
  uint16_t ird = 0;         // our effective IRD
  uint16_t ord = 0;         // our effective ORD
  bool p2p = false;         // RTR exchange required
  uint8_t rtr = kRtrNone;   // exactly one kRtr* when p2p: initiator sends it, responder awaits it
};

enum class MpaAction : uint8_t {
  kAccept,     // responder: send *reply, then (p2p) wait for the RTR; initiator: connection is up
  kReject,     // responder: send *reply (R=1) if reply_frame, then close
  kRejected,   // initiator: peer set R; report rejection (with its private data), close
  kTerminate,  // initiator: send a Terminate with term, then close
  kDrop,       // close without sending anything
};

struct MpaDecision {
  MpaAction action = MpaAction::kAccept;
  MpaError reason = MpaError::kNone;
  TermCode term;              // LLP/MPA code for kTerminate (also set for kReject as the cause)
  bool reply_frame = false;   // kReject: a Reply frame must be sent (Rev >= 1, as siw)
};

// What to do when parsing the peer's frame failed: a responder drops the connection silently (as siw),
// an initiator sends Terminate LLP/MPA/0x04 (invalid Request/Reply) and closes.
MpaDecision mpa_parse_failure(MpaFrameKind kind, MpaError e);

// Initiator: the Request to send for these settings (private_data must fit mpa_max_app_private_data).
MpaFrame mpa_make_request(const MpaLocal& local, const uint8_t* private_data, uint16_t len);

// Responder: decide on a parsed Request. Fills *reply (caller sets private_data before encoding) and
// *out when kAccept. Never sends a Send RTR; prefers Write, then Read.
MpaDecision mpa_respond(const MpaFrame& request, const MpaLocal& local, MpaFrame* reply,
                        MpaNegotiated* out);

// Responder: a reject Reply for a Request (application reject or failed negotiation).
MpaFrame mpa_make_reject(const MpaFrame& request, const MpaLocal& local, const uint8_t* private_data,
                         uint16_t len);

// Initiator: validate a parsed Reply against the Request we sent and compute the result.
MpaDecision mpa_check_reply(const MpaFrame& request, const MpaFrame& reply, const MpaLocal& local,
                            MpaNegotiated* out);

}  // namespace netdirect::soft::wire

#endif  // NETDIRECT_SOFT_MPA_H_

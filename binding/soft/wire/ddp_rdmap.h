// DDP (RFC 5041) and RDMAP (RFC 5040) header codecs, Terminate codes and MPA FPDU framing math.
// Pure functions on caller-provided byte buffers: no heap, no exceptions, big-endian on the wire.
// Layouts: docs/iwarp.md §1.4, §2, §3 (RFC 5041, RFC 5040).
#ifndef NETDIRECT_SOFT_DDP_RDMAP_H_
#define NETDIRECT_SOFT_DDP_RDMAP_H_

#include <cstddef>
#include <cstdint>

namespace netdirect::soft::wire {

// ---- big-endian helpers (unaligned-safe) ----------------------------------------------------------
inline void put_be16(uint8_t* p, uint16_t v) {
  p[0] = static_cast<uint8_t>(v >> 8);
  p[1] = static_cast<uint8_t>(v);
}
inline void put_be32(uint8_t* p, uint32_t v) {
  p[0] = static_cast<uint8_t>(v >> 24);
  p[1] = static_cast<uint8_t>(v >> 16);
  p[2] = static_cast<uint8_t>(v >> 8);
  p[3] = static_cast<uint8_t>(v);
}
inline void put_be64(uint8_t* p, uint64_t v) {
  put_be32(p, static_cast<uint32_t>(v >> 32));
  put_be32(p + 4, static_cast<uint32_t>(v));
}
inline uint16_t get_be16(const uint8_t* p) {
  return static_cast<uint16_t>((static_cast<uint16_t>(p[0]) << 8) | p[1]);
}
inline uint32_t get_be32(const uint8_t* p) {
  return (static_cast<uint32_t>(p[0]) << 24) | (static_cast<uint32_t>(p[1]) << 16) |
         (static_cast<uint32_t>(p[2]) << 8) | static_cast<uint32_t>(p[3]);
}
inline uint64_t get_be64(const uint8_t* p) {
  return (static_cast<uint64_t>(get_be32(p)) << 32) | get_be32(p + 4);
}

// ---- sizes ----------------------------------------------------------------------------------------
constexpr size_t kMpaLenSize = 2;             // ULPDU Length field in front of every FPDU
constexpr size_t kMpaTrailerCrcSize = 4;      // CRC32c trailer (zeros when CRC is off)
constexpr size_t kMpaMinFpdu = 8;             // smallest legal FPDU
constexpr size_t kMpaMaxUlpdu = 0xFFFF;       // ULPDU Length is 16 bits
constexpr size_t kDdpTaggedHdrSize = 14;      // ctrl, rdmap ctrl, STag, TO
constexpr size_t kDdpUntaggedHdrSize = 18;    // ctrl, rdmap ctrl, RsvdULP, QN, MSN, MO
constexpr size_t kRdmapReadReqSize = 28;      // Read Request body after the untagged header (§3.2)
constexpr size_t kTermCtrlSize = 4;           // Terminate control word
constexpr size_t kTermSegLenSize = 2;         // Terminate "DDP Segment Length" field (present if M or D)
constexpr size_t kTermMaxBody =               // control + seg len + untagged hdr + Read Request body
    kTermCtrlSize + kTermSegLenSize + kDdpUntaggedHdrSize + kRdmapReadReqSize;
// FPDU header sizes incl. the 2 length bytes, as siw's hdr_len (§1.8).
constexpr size_t kFpduHdrTagged = kMpaLenSize + kDdpTaggedHdrSize;                         // 16
constexpr size_t kFpduHdrSend = kMpaLenSize + kDdpUntaggedHdrSize;                         // 20
constexpr size_t kFpduHdrReadReq = kMpaLenSize + kDdpUntaggedHdrSize + kRdmapReadReqSize;  // 48
constexpr size_t kFpduHdrTerminate = kMpaLenSize + kDdpUntaggedHdrSize + kTermCtrlSize;    // 24
constexpr uint32_t kMssSegAlignMask = ~uint32_t{7};  // siw: FPDU <= mss & ~7

// ---- DDP control byte (ULPDU byte 0) --------------------------------------------------------------
constexpr uint8_t kDdpFlagTagged = 0x80;
constexpr uint8_t kDdpFlagLast = 0x40;
constexpr uint8_t kDdpReservedMask = 0x3C;
constexpr uint8_t kDdpVersionMask = 0x03;
constexpr uint8_t kDdpVersion = 1;

// ---- RDMAP control byte (ULPDU byte 1) ------------------------------------------------------------
constexpr uint8_t kRdmapVersionMask = 0xC0;
constexpr uint8_t kRdmapVersionShift = 6;
constexpr uint8_t kRdmapVersion = 1;
constexpr uint8_t kRdmapReservedMask = 0x30;
constexpr uint8_t kRdmapOpcodeMask = 0x0F;

enum class RdmapOpcode : uint8_t {
  kWrite = 0x0,              // tagged
  kReadRequest = 0x1,        // untagged QN 1, 28-byte body
  kReadResponse = 0x2,       // tagged
  kSend = 0x3,               // untagged QN 0
  kSendInvalidate = 0x4,     // untagged QN 0, RsvdULP = STag to invalidate
  kSendSe = 0x5,             // untagged QN 0, solicited event
  kSendSeInvalidate = 0x6,   // untagged QN 0, SE + invalidate
  kTerminate = 0x7,          // untagged QN 2, L = 1
};
constexpr uint8_t kRdmapMaxOpcode = 0x7;  // RFC 7306 opcodes 0x8..0xB are not implemented (siw lacks them)

// DDP queue numbers for untagged messages.
constexpr uint32_t kQnSend = 0;
constexpr uint32_t kQnReadRequest = 1;
constexpr uint32_t kQnTerminate = 2;
constexpr uint32_t kMsnFirst = 1;  // first MSN on each queue (§2.2)

constexpr bool opcode_is_tagged(RdmapOpcode op) {
  return op == RdmapOpcode::kWrite || op == RdmapOpcode::kReadResponse;
}
constexpr bool opcode_is_send(RdmapOpcode op) {
  return op == RdmapOpcode::kSend || op == RdmapOpcode::kSendInvalidate ||
         op == RdmapOpcode::kSendSe || op == RdmapOpcode::kSendSeInvalidate;
}
constexpr bool opcode_has_invalidate(RdmapOpcode op) {
  return op == RdmapOpcode::kSendInvalidate || op == RdmapOpcode::kSendSeInvalidate;
}
constexpr bool opcode_has_se(RdmapOpcode op) {
  return op == RdmapOpcode::kSendSe || op == RdmapOpcode::kSendSeInvalidate;
}
// Expected QN of an untagged opcode (Send* 0, Read Request 1, Terminate 2); tagged opcodes return 0.
constexpr uint32_t opcode_queue(RdmapOpcode op) {
  return op == RdmapOpcode::kReadRequest ? kQnReadRequest
         : op == RdmapOpcode::kTerminate ? kQnTerminate
                                         : kQnSend;
}
// DDP header size for an opcode (14 tagged / 18 untagged).
constexpr size_t ddp_header_size(RdmapOpcode op) {
  return opcode_is_tagged(op) ? kDdpTaggedHdrSize : kDdpUntaggedHdrSize;
}
// Full ULPDU header size incl. opcode-specific body, excluding the MPA length (14/18/46/22).
constexpr size_t ulpdu_header_size(RdmapOpcode op) {
  return op == RdmapOpcode::kReadRequest ? kDdpUntaggedHdrSize + kRdmapReadReqSize
         : op == RdmapOpcode::kTerminate ? kDdpUntaggedHdrSize + kTermCtrlSize
                                         : ddp_header_size(op);
}

// ---- Terminate codes (§2.3, §3.4) -----------------------------------------------------------------
enum class TermLayer : uint8_t { kRdmap = 0, kDdp = 1, kLlp = 2 };

enum class RdmapEtype : uint8_t { kLocalCatastrophic = 0, kRemoteProtection = 1, kRemoteOperation = 2 };
enum class DdpEtype : uint8_t { kCatastrophic = 0, kTagged = 1, kUntagged = 2, kLlpReserved = 3 };
enum class LlpEtype : uint8_t { kMpa = 0 };

enum class RdmapErr : uint8_t {
  kInvalidStag = 0x00,
  kBaseBounds = 0x01,
  kAccessRights = 0x02,
  kStagNotAssociated = 0x03,
  kToWrap = 0x04,
  kInvalidVersion = 0x05,
  kUnexpectedOpcode = 0x06,
  kCatastrophicStream = 0x07,
  kCatastrophicGlobal = 0x08,
  kStagCannotInvalidate = 0x09,
  kUnspecified = 0xFF,
};
enum class DdpCatastrophicErr : uint8_t { kLocalCatastrophic = 0x00 };
enum class DdpTaggedErr : uint8_t {
  kInvalidStag = 0x00,
  kBaseBounds = 0x01,
  kStagNotAssociated = 0x02,
  kToWrap = 0x03,
  kInvalidVersion = 0x04,
};
enum class DdpUntaggedErr : uint8_t {
  kInvalidQn = 0x01,
  kNoBuffer = 0x02,          // invalid MSN - no buffer available
  kMsnRange = 0x03,          // invalid MSN - MSN range not valid
  kInvalidMo = 0x04,
  kMessageTooLong = 0x05,
  kInvalidVersion = 0x06,
};
enum class LlpErr : uint8_t {
  kConnectionLost = 0x01,
  kCrcError = 0x02,
  kMarkerLengthMismatch = 0x03,  // marker / ULPDU length mismatch
  kInvalidRequestReply = 0x04,   // invalid MPA Request/Reply frame
  kLocalCatastrophic = 0x05,     // RFC 6581
  kInsufficientIrd = 0x06,       // RFC 6581
  kNoMatchingRtr = 0x07,         // RFC 6581
};

// A Terminate classification (layer / error type / error code), as carried in the control word.
struct TermCode {
  uint8_t layer = 0;
  uint8_t etype = 0;
  uint8_t code = 0;
};
constexpr bool operator==(TermCode a, TermCode b) {
  return a.layer == b.layer && a.etype == b.etype && a.code == b.code;
}
constexpr bool operator!=(TermCode a, TermCode b) { return !(a == b); }
constexpr TermCode term_code(RdmapEtype e, RdmapErr c) {
  return TermCode{static_cast<uint8_t>(TermLayer::kRdmap), static_cast<uint8_t>(e), static_cast<uint8_t>(c)};
}
constexpr TermCode term_code(DdpTaggedErr c) {
  return TermCode{static_cast<uint8_t>(TermLayer::kDdp), static_cast<uint8_t>(DdpEtype::kTagged),
                  static_cast<uint8_t>(c)};
}
constexpr TermCode term_code(DdpUntaggedErr c) {
  return TermCode{static_cast<uint8_t>(TermLayer::kDdp), static_cast<uint8_t>(DdpEtype::kUntagged),
                  static_cast<uint8_t>(c)};
}
constexpr TermCode term_code(DdpCatastrophicErr c) {
  return TermCode{static_cast<uint8_t>(TermLayer::kDdp), static_cast<uint8_t>(DdpEtype::kCatastrophic),
                  static_cast<uint8_t>(c)};
}
constexpr TermCode term_code(LlpErr c) {
  return TermCode{static_cast<uint8_t>(TermLayer::kLlp), static_cast<uint8_t>(LlpEtype::kMpa),
                  static_cast<uint8_t>(c)};
}

// Terminate control word bit layout: Layer[31:28] EType[27:24] ErrCode[23:16] M[15] D[14] R[13].
constexpr uint32_t kTermLayerShift = 28;
constexpr uint32_t kTermEtypeShift = 24;
constexpr uint32_t kTermCodeShift = 16;
constexpr uint32_t kTermFlagM = 0x8000;  // DDP Segment Length valid
constexpr uint32_t kTermFlagD = 0x4000;  // terminated DDP header included
constexpr uint32_t kTermFlagR = 0x2000;  // terminated RDMAP (Read Request) header included
constexpr uint32_t kTermReservedMask = 0x1FFF;

// ---- combined DDP + RDMAP header ------------------------------------------------------------------
// One struct for both DDP forms; fields of the other form are ignored on encode and zeroed on decode.
struct DdpHeader {
  RdmapOpcode opcode = RdmapOpcode::kSend;
  bool last = true;        // DDP L flag
  // tagged (Write, Read Response)
  uint32_t stag = 0;       // sink STag
  uint64_t to = 0;         // tagged offset of this segment's first byte
  // untagged (Send*, Read Request, Terminate)
  uint32_t rsvd_ulp = 0;   // STag to invalidate for Send-with-Invalidate, else 0
  uint32_t qn = 0;
  uint32_t msn = 0;
  uint32_t mo = 0;         // message offset of this segment's first byte
};

// Read Request body (follows the 18-byte untagged header, §3.2).
struct ReadRequest {
  uint32_t sink_stag = 0;  // requester's buffer
  uint64_t sink_to = 0;
  uint32_t size = 0;       // RDMA Read Message Size
  uint32_t src_stag = 0;   // responder's buffer (remote key the app used)
  uint64_t src_to = 0;
};

// Layout of a received Terminate control word (see decode_terminate_body).
enum class TermLayout : uint8_t {
  kRfc5040,    // Layer[31:28] EType[27:24] ErrCode[23:16] M/D/R = 0x8000/0x4000/0x2000 (what we send)
  kSiwLe,      // Linux siw on little-endian CPUs: Layer/EType nibbles swapped, M/D/R = 0x0100/0x0200/0x0400
  kAmbiguous,  // both readings plausible but different, or neither: code is the RFC reading, unreliable
};

// Terminate body (follows the 18-byte untagged header, §3.3). Copied headers point into a caller buffer.
struct TerminateInfo {
  TermCode code;
  TermCode other;  // kAmbiguous: the siw reading of the control word (code holds the RFC one)
  TermLayout layout = TermLayout::kRfc5040;  // set by decode_terminate_body
  bool reliable = true;  // false: code/flags may be misread — do not attribute the error to a request
  bool m = false;                     // ddp_seg_len valid
  bool d = false;                     // ddp_hdr present
  bool r = false;                     // rdmap_hdr present
  uint16_t ddp_seg_len = 0;           // ULPDU Length of the terminated segment
  const uint8_t* ddp_hdr = nullptr;   // terminated DDP header (14 or 18 bytes, starting at DDP ctrl)
  size_t ddp_hdr_len = 0;
  const uint8_t* rdmap_hdr = nullptr; // terminated Read Request body (28 bytes)
  size_t rdmap_hdr_len = 0;
};

// Result of a decode: ok, or the Terminate the receiver should send.
struct DecodeStatus {
  bool ok = true;
  TermCode term;        // valid when !ok
  size_t consumed = 0;  // bytes of header parsed when ok
};

// Encodes the 14/18-byte DDP+RDMAP header (RV=1, DV=1, T from the opcode). Returns bytes written.
size_t encode_ddp_header(const DdpHeader& h, uint8_t* out);

// Decodes and validates a DDP+RDMAP header from the start of a ULPDU of ulpdu_len bytes.
// Checks in siw's order: DV = 1 (DDP tagged 0x04 / untagged 0x06), RV = 1 (RDMAP op 0x05), opcode ≤ 7
// and T matching the opcode (RDMAP op 0x06), ULPDU long enough for the header (LLP 0x03), QN (DDP
// untagged 0x01). Reserved bits are ignored like siw does, unless strict_reserved (DDP bits → version
// code, RDMAP bits → 0x06). MSN/MO/STag checks belong to the receiver.
DecodeStatus decode_ddp_header(const uint8_t* ulpdu, size_t ulpdu_len, DdpHeader* out,
                               bool strict_reserved = false);

// Encodes the 28-byte Read Request body. Returns kRdmapReadReqSize.
size_t encode_read_request(const ReadRequest& rr, uint8_t* out);

// Decodes a Read Request body; len must be exactly kRdmapReadReqSize (a Read Request carries no payload).
DecodeStatus decode_read_request(const uint8_t* body, size_t len, ReadRequest* out);

// Packs / unpacks the Terminate control word.
uint32_t term_control_word(TermCode c, bool m, bool d, bool r);
TermCode term_control_code(uint32_t word);

// Builds the Terminate for an error found in a received ULPDU (avail bytes of it at ulpdu, its ULPDU
// Length ulpdu_len), copying headers the way siw does (docs/iwarp.md §3.3): DDP errors → DDP header (M+D);
// RDMAP remote protection → DDP header + Read Request body (M+D+R); other RDMAP remote-operation errors
// → DDP header (M+D); version/opcode errors, catastrophic and LLP errors → nothing. Aliases ulpdu.
TerminateInfo make_terminate(TermCode code, const uint8_t* ulpdu, size_t avail, uint16_t ulpdu_len);

// Bytes encode_terminate_body will write for this info.
size_t terminate_body_size(const TerminateInfo& t);

// Encodes the Terminate body (control, [seg len], [DDP hdr], [RDMAP hdr]); seg len present iff M or D.
// Returns bytes written, 0 if cap is too small or the copied header lengths are invalid.
size_t encode_terminate_body(const TerminateInfo& t, uint8_t* out, size_t cap);

// True if (layer, etype, code) is a combination RFC 5040 §7 / RFC 5041 §7 / RFC 5044 + 6581 define.
bool term_code_defined(TermCode c);

// Decodes a Terminate body; copied-header pointers alias the input. DDP hdr size comes from its T bit.
// Accepts RFC 5040's control word layout and Linux siw's (TermLayout); out->reliable is false when the
// layout cannot be told apart, and then out carries no copied headers.
DecodeStatus decode_terminate_body(const uint8_t* body, size_t len, TerminateInfo* out);

// ---- FPDU framing math (§1.4, §1.8) ---------------------------------------------------------------
// Zero pad after the ULPDU so that 2 + ulpdu_len + pad ≡ 0 (mod 4).
constexpr size_t fpdu_pad(size_t ulpdu_len) { return (4 - ((kMpaLenSize + ulpdu_len) & 3)) & 3; }
// ULPDU Length field value from ULPDU header size (excl. the 2 length bytes) and payload size.
constexpr uint16_t mpa_len(size_t ulpdu_hdr_size, size_t payload_len) {
  return static_cast<uint16_t>(ulpdu_hdr_size + payload_len);
}
// Whole FPDU on the wire: length + ULPDU + pad + CRC.
constexpr size_t fpdu_size(size_t ulpdu_len) {
  return kMpaLenSize + ulpdu_len + fpdu_pad(ulpdu_len) + kMpaTrailerCrcSize;
}
// Largest FPDU we emit for a TCP MSS (siw: mss & ~7, one DDP segment per FPDU).
constexpr size_t fpdu_max_size(uint32_t mss) { return mss & kMssSegAlignMask; }
// Largest payload per FPDU for a ULPDU header size (e.g. 14 tagged, 18 Send), kept a multiple of 4 so
// non-last segments need no pad; capped by the 16-bit ULPDU Length. 0 if the MSS is too small.
constexpr size_t fpdu_max_payload(uint32_t mss, size_t ulpdu_hdr_size) {
  size_t fpdu = fpdu_max_size(mss);
  size_t overhead = kMpaLenSize + ulpdu_hdr_size + kMpaTrailerCrcSize;
  if (fpdu <= overhead) return 0;
  size_t p = fpdu - overhead;
  if (p > kMpaMaxUlpdu - ulpdu_hdr_size) p = kMpaMaxUlpdu - ulpdu_hdr_size;
  return p & ~size_t{3};
}

// Payload per FPDU for a message of `len` bytes: the fewest FPDUs of at most `max_payload`, of nearly equal size
// (a multiple of 4; the last one takes the rest). A 64 KiB Write over a 65462-byte maximum goes as 2 x 32768,
// not 65462 + 74: a tiny tail FPDU would cost the receiver a receive call of its own (or a copy of the next
// message's payload out of its read-ahead).
constexpr size_t fpdu_even_payload(uint64_t len, size_t max_payload) {
  if (max_payload == 0 || len <= max_payload) return max_payload;
  const uint64_t n = (len + max_payload - 1) / max_payload;
  const uint64_t per = ((len + n - 1) / n + 3) & ~uint64_t{3};
  return per < max_payload ? static_cast<size_t>(per) : max_payload;
}
static_assert(fpdu_even_payload(65536, 65462) == 32768 && fpdu_even_payload(100, 65462) == 65462 &&
                  fpdu_even_payload(1048576, 65462) == 61684 && fpdu_even_payload(65537, 65462) == 32772,
              "even FPDU split");

// Writes the 2-byte ULPDU Length and the DDP+RDMAP header; returns 16 (tagged) or 20 (untagged).
// Opcode-specific bodies (Read Request, Terminate) are written separately after it.
size_t encode_fpdu_header(const DdpHeader& h, uint16_t ulpdu_len, uint8_t* out);

// Writes pad zeros and the CRC trailer; crc_state is the running CRC32c over length + ULPDU (raw,
// from kCrc32cInit) and is extended over the pad here. Zeros are sent when !crc_on. Returns pad + 4.
size_t encode_fpdu_trailer(uint32_t crc_state, size_t ulpdu_len, bool crc_on, uint8_t* out);

// Verifies the CRC of a complete FPDU held contiguously (fpdu_size(ulpdu_len) bytes from the length
// field); call only when CRC was negotiated (otherwise the trailer is ignored). Trailer is little-endian.
bool fpdu_check_crc(const uint8_t* fpdu, size_t ulpdu_len);

// Reads the ULPDU Length of an FPDU (first 2 bytes).
inline uint16_t peek_mpa_len(const uint8_t* fpdu) { return get_be16(fpdu); }

}  // namespace netdirect::soft::wire

#endif  // NETDIRECT_SOFT_DDP_RDMAP_H_

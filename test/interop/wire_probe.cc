// wire_probe: checks netdirect's iWARP wire codecs against a real iWARP stack (Linux siw running
// rdma-core's rping in the siw-vm guest). It uses only binding/soft/{crc32c,mpa,ddp_rdmap} and blocking
// POSIX sockets: no queue pairs, no connector, so a format error shows up here before any layer above
// the codecs exists.
//
//   wire_probe connect HOST PORT [opts]  MPA initiator + rping client  (peer: rping -s in the guest)
//   wire_probe listen PORT [opts]        MPA responder + rping server  (peer: rping -c -a 10.0.2.2 -p PORT)
//
// Options:
//   --crc            set C in our MPA frame (CRC32c is on if either side asks)
//   --p2p            initiator: request an RTR exchange (A bit), offering --rtr types
//   --rtr LIST       RTR types offered (initiator) / accepted (responder): write,read (default both)
//   --v1             initiator: send an MPA Rev 1 Request (no IRD/ORD words)
//   --size N         rping -S (default 64, 26..65535)
//   --count N        rping iterations to run (initiator) / required (responder); default 1
//   --mss N          largest FPDU we emit (siw: mss & ~7); default 1460
//   --timeout S      seconds to wait for any expected byte (default 20)
//   --bind ADDR      listen address (default 127.0.0.1)
//   --quiet          fewer hex dumps
//   --first-delay-ms N  initiator: wait N ms after the MPA Reply before the first FPDU (default 0)
//   --provoke KIND   initiator: instead of rping, send a Write to an unknown STag (bad-stag) or a Send with a
//                    corrupted CRC (bad-crc, needs CRC on) and check siw's Terminate with our decoder
//
// Prints a log, then one "SUMMARY {json}" line and a last line "RESULT PASS" or "RESULT FAIL <why>".
// Exit status 0 on PASS, 1 on FAIL, 2 on bad usage. All traffic is on the given loopback address.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include "soft/wire/crc32c.h"
#include "soft/wire/ddp_rdmap.h"
#include "soft/wire/mpa.h"

namespace {

namespace w = netdirect::soft::wire;
using netdirect::soft::crc32c_update;
using netdirect::soft::get_crc_le;
using netdirect::soft::kCrc32cInit;

// ---- options ----------------------------------------------------------------------------------------
struct Options {
  bool listen = false;
  std::string host = "127.0.0.1";
  int port = 0;
  bool crc = false;
  bool p2p = false;
  uint8_t rtr = w::kRtrWrite | w::kRtrRead;
  bool v1 = false;
  uint32_t size = 64;
  int count = 1;
  uint32_t mss = 1460;
  int timeout_s = 20;
  bool quiet = false;
  int first_delay_ms = 0;  // initiator: pause between the MPA Reply and our first FPDU
  std::string provoke;     // initiator: "bad-stag" or "bad-crc": make siw send a Terminate, check it
};

// Fake buffer identities we advertise to the peer. Non-zero STags everywhere (docs/iwarp.md §4).
constexpr uint32_t kStartStag = 0x00a1b200;  // rping client start_buf (Read source)
constexpr uint64_t kStartTo = 0x00007f1000001000ull;
constexpr uint32_t kRdmaStag = 0x00c3d400;   // rping client rdma_buf (Write sink)
constexpr uint64_t kRdmaTo = 0x00007f1000203000ull;
constexpr uint32_t kSinkStag = 0x00e5f600;   // rping server rdma_buf (Read sink)
constexpr uint64_t kSinkTo = 0x00007f2000405000ull;
constexpr size_t kRpingInfoSize = 16;        // struct rping_rdma_info: be64 buf, be32 rkey, be32 size

const auto g_t0 = std::chrono::steady_clock::now();

struct ProbeError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

std::string fmt(const char* f, ...) __attribute__((format(printf, 1, 2)));
std::string fmt(const char* f, ...) {
  char buf[1024];
  va_list ap;
  va_start(ap, f);
  vsnprintf(buf, sizeof buf, f, ap);
  va_end(ap);
  return buf;
}

void logf(const char* f, ...) __attribute__((format(printf, 1, 2)));
void logf(const char* f, ...) {
  const double t =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - g_t0).count();
  std::printf("%8.3fs ", t);
  va_list ap;
  va_start(ap, f);
  std::vprintf(f, ap);
  va_end(ap);
  std::printf("\n");
  std::fflush(stdout);
}

[[noreturn]] void fail(const std::string& why) { throw ProbeError(why); }

std::string hex(const uint8_t* p, size_t n) {
  std::string s;
  for (size_t i = 0; i < n; ++i) s += fmt("%02x", p[i]);
  return s;
}

void hexdump(const char* label, const uint8_t* p, size_t n, size_t limit = 256) {
  std::printf("          %s (%zu bytes)\n", label, n);
  const size_t shown = n < limit ? n : limit;
  for (size_t i = 0; i < shown; i += 16) {
    std::printf("            %04zx ", i);
    for (size_t j = i; j < i + 16; ++j) {
      if (j < shown) std::printf(" %02x", p[j]); else std::printf("   ");
    }
    std::printf("  ");
    for (size_t j = i; j < i + 16 && j < shown; ++j) std::putchar(p[j] >= 32 && p[j] < 127 ? p[j] : '.');
    std::printf("\n");
  }
  if (shown < n) std::printf("            ... %zu more bytes\n", n - shown);
  std::fflush(stdout);
}

const char* opcode_name(w::RdmapOpcode op) {
  switch (op) {
    case w::RdmapOpcode::kWrite: return "Write";
    case w::RdmapOpcode::kReadRequest: return "ReadRequest";
    case w::RdmapOpcode::kReadResponse: return "ReadResponse";
    case w::RdmapOpcode::kSend: return "Send";
    case w::RdmapOpcode::kSendInvalidate: return "SendInv";
    case w::RdmapOpcode::kSendSe: return "SendSE";
    case w::RdmapOpcode::kSendSeInvalidate: return "SendSEInv";
    case w::RdmapOpcode::kTerminate: return "Terminate";
  }
  return "?";
}

std::string rtr_name(uint8_t rtr) {
  std::string s;
  if (rtr & w::kRtrSend) s += "send,";
  if (rtr & w::kRtrWrite) s += "write,";
  if (rtr & w::kRtrRead) s += "read,";
  if (s.empty()) return "none";
  s.pop_back();
  return s;
}

std::string describe_frame(const w::MpaFrame& f) {
  std::string s = fmt("%s rev=%u M=%d C=%d R=%d E=%d rsvd=0x%x pd_len=%u", 
                      f.kind == w::MpaFrameKind::kRequest ? "Request" : "Reply", f.rev, f.markers,
                      f.crc, f.reject, f.enhanced, f.reserved_flags,
                      f.pd_length ? f.pd_length : static_cast<unsigned>(w::mpa_frame_size(f) - w::kMpaHeaderSize));
  if (f.v2) {
    s += fmt(" v2{IRD=%u ORD=%u P2P=%d RTR=%s}", f.params.ird, f.params.ord, f.params.p2p,
             rtr_name(f.params.rtr).c_str());
  }
  s += fmt(" app_pd=%u", f.private_data_len);
  return s;
}

// rping's buffer content for ping number `ping` (docs/iwarp.md §5): "rdma-ping-<n>: " then bytes
// cycling 'A'..'z' starting one later each ping, NUL in the last byte.
std::vector<uint8_t> rping_pattern(int ping, uint32_t size) {
  std::vector<uint8_t> b(size, 0);
  char head[40];
  const int cc = std::snprintf(head, sizeof head, "rdma-ping-%d: ", ping);
  for (int i = 0; i < cc && static_cast<uint32_t>(i) < size; ++i) b[i] = static_cast<uint8_t>(head[i]);
  int c = 65 + ping % 58;
  for (uint32_t i = static_cast<uint32_t>(cc); i < size; ++i) {
    b[i] = static_cast<uint8_t>(c);
    if (++c > 122) c = 65;
  }
  if (size > 0) b[size - 1] = 0;
  return b;
}

// ---- statistics for the summary -------------------------------------------------------------------
struct Stats {
  std::map<std::string, int> tx, rx;  // FPDUs per opcode
  int crc_checked = 0;
  int crc_bad = 0;
  int nonzero_trailer_without_crc = 0;
  int pings = 0;
  bool terminate_rx = false;
  std::string terminate_desc;
  std::string mpa_request_hex, mpa_reply_hex;
  std::string first_send_hex, first_read_request_hex;
  uint16_t read_request_ulpdu_len = 0;
  w::MpaNegotiated neg;
  bool negotiated = false;
  bool peer_closed_cleanly = false;
  std::vector<std::string> notes;
};
Stats g_stats;

// ---- connection: blocking socket + receive buffer -------------------------------------------------
class Conn {
 public:
  Conn(int fd, int timeout_s) : fd_(fd), timeout_ms_(timeout_s * 1000) {}
  ~Conn() { if (fd_ >= 0) ::close(fd_); }

  // Fills the buffer until at least n unread bytes are there; false on EOF.
  bool want(size_t n, const char* what) {
    while (buf_.size() - pos_ < n) {
      pollfd p{fd_, POLLIN, 0};
      const int r = ::poll(&p, 1, timeout_ms_);
      if (r < 0 && errno == EINTR) continue;
      if (r < 0) fail(fmt("poll: %s", std::strerror(errno)));
      if (r == 0) fail(fmt("timeout (%d ms) waiting for %s", timeout_ms_, what));
      uint8_t tmp[65536];
      const ssize_t got = ::recv(fd_, tmp, sizeof tmp, 0);
      if (got < 0 && errno == EINTR) continue;
      if (got < 0) fail(fmt("recv while waiting for %s: %s", what, std::strerror(errno)));
      if (got == 0) return false;
      if (pos_ > 0 && pos_ == buf_.size()) { buf_.clear(); pos_ = 0; }
      buf_.insert(buf_.end(), tmp, tmp + got);
      rx_total_ += static_cast<size_t>(got);
    }
    return true;
  }
  const uint8_t* peek() const { return buf_.data() + pos_; }
  size_t avail() const { return buf_.size() - pos_; }
  void consume(size_t n) { pos_ += n; }

  void send_all(const uint8_t* p, size_t n) {
    while (n > 0) {
      const ssize_t s = ::send(fd_, p, n, MSG_NOSIGNAL);
      if (s < 0 && errno == EINTR) continue;
      if (s < 0) fail(fmt("send: %s", std::strerror(errno)));
      p += s;
      n -= static_cast<size_t>(s);
    }
  }
  void shutdown_write() { ::shutdown(fd_, SHUT_WR); }
  size_t rx_total() const { return rx_total_; }

 private:
  int fd_;
  int timeout_ms_;
  std::vector<uint8_t> buf_;
  size_t pos_ = 0;
  size_t rx_total_ = 0;
};

// ---- FPDUs ----------------------------------------------------------------------------------------
struct Fpdu {
  std::vector<uint8_t> raw;  // whole FPDU: length, ULPDU, pad, CRC
  uint16_t ulpdu_len = 0;
  w::DdpHeader h;
  size_t body_off = 0;       // offset in raw of what follows the DDP header
  size_t body_len = 0;
  w::ReadRequest rr;         // opcode kReadRequest
  const uint8_t* body() const { return raw.data() + body_off; }
};

class Wire {
 public:
  Wire(Conn* c, const Options& o) : c_(c), o_(o) {}
  void set_crc(bool on) { crc_ = on; }

  // Reads one FPDU; returns false on a clean EOF at an FPDU boundary.
  bool read(Fpdu* f, const char* what) {
    if (!c_->want(w::kMpaLenSize, what)) {
      if (c_->avail() != 0) fail(fmt("EOF inside an FPDU length while waiting for %s", what));
      return false;
    }
    const uint16_t ulen = w::peek_mpa_len(c_->peek());
    const size_t total = w::fpdu_size(ulen);
    if (!c_->want(total, what)) fail(fmt("EOF inside an FPDU (ULPDU length %u) while waiting for %s", ulen, what));
    f->raw.assign(c_->peek(), c_->peek() + total);
    c_->consume(total);
    f->ulpdu_len = ulen;
    const uint8_t* raw = f->raw.data();
    const size_t pad = w::fpdu_pad(ulen);
    for (size_t i = 0; i < pad; ++i) {
      if (raw[w::kMpaLenSize + ulen + i] != 0) {
        hexdump("RX FPDU with non-zero pad", raw, total);
        fail("non-zero MPA pad");
      }
    }
    if (crc_) {
      ++g_stats.crc_checked;
      if (!w::fpdu_check_crc(raw, ulen)) {
        ++g_stats.crc_bad;
        const size_t covered = w::kMpaLenSize + ulen + pad;
        hexdump("RX FPDU with bad CRC", raw, total);
        fail(fmt("CRC mismatch: trailer 0x%08x (LE), ours 0x%08x", get_crc_le(raw + covered),
                 netdirect::soft::crc32c(raw, covered)));
      }
    } else if (get_crc_le(raw + total - 4) != 0) {
      ++g_stats.nonzero_trailer_without_crc;
    }
    const w::DecodeStatus st = w::decode_ddp_header(raw + w::kMpaLenSize, ulen, &f->h);
    if (!st.ok) {
      hexdump("RX FPDU our decoder refused", raw, total);
      fail(fmt("decode_ddp_header refused a siw FPDU: term layer %u etype %u code 0x%02x",
               st.term.layer, st.term.etype, st.term.code));
    }
    f->body_off = w::kMpaLenSize + st.consumed;
    f->body_len = ulen - st.consumed;
    ++g_stats.rx[opcode_name(f->h.opcode)];
    log_fpdu("RX", *f);
    if (f->h.opcode == w::RdmapOpcode::kReadRequest) {
      const w::DecodeStatus rs = w::decode_read_request(f->body(), f->body_len, &f->rr);
      if (!rs.ok) {
        hexdump("RX Read Request our decoder refused", raw, total);
        fail(fmt("decode_read_request refused siw's Read Request (ULPDU length %u)", ulen));
      }
      logf("     Read Request: sink STag 0x%08x TO 0x%016llx size %u  src STag 0x%08x TO 0x%016llx",
           f->rr.sink_stag, static_cast<unsigned long long>(f->rr.sink_to), f->rr.size, f->rr.src_stag,
           static_cast<unsigned long long>(f->rr.src_to));
    }
    if (f->h.opcode == w::RdmapOpcode::kTerminate) {
      g_stats.terminate_rx = true;
      w::TerminateInfo t;
      const w::DecodeStatus ts = w::decode_terminate_body(f->body(), f->body_len, &t);
      std::string d = ts.ok ? fmt("layer %u etype %u code 0x%02x M=%d D=%d R=%d seg_len %u", t.code.layer,
                                  t.code.etype, t.code.code, t.m, t.d, t.r, t.ddp_seg_len)
                            : std::string("undecodable Terminate body");
      if (ts.ok && t.ddp_hdr) d += " ddp_hdr " + hex(t.ddp_hdr, t.ddp_hdr_len);
      g_stats.terminate_desc = d;
      hexdump("RX Terminate", raw, total);
      if (!expect_terminate_) fail("siw sent a Terminate: " + d);
      if (!ts.ok) fail("decode_terminate_body refused siw's Terminate");
      if (f->h.msn != w::kMsnFirst || f->h.mo != 0 || !f->h.last) {
        fail(fmt("Terminate MSN %u MO %u L=%d, expected MSN 1 MO 0 L=1", f->h.msn, f->h.mo, f->h.last));
      }
      last_term_ = t;
      last_term_raw_ = f->raw;
    }
    return true;
  }

  // Provocation mode: a Terminate is the expected outcome; read() returns it instead of failing.
  void expect_terminate() { expect_terminate_ = true; }
  // The decoded body of the last Terminate (its header pointers alias last_term_raw()).
  const w::TerminateInfo& last_terminate() const { return last_term_; }
  const std::vector<uint8_t>& last_terminate_raw() const { return last_term_raw_; }
  // Sends raw bytes (a deliberately broken FPDU).
  void send_raw(const std::vector<uint8_t>& b) { c_->send_all(b.data(), b.size()); }

  // Reads one FPDU, failing on EOF.
  void expect(Fpdu* f, const char* what) {
    if (!read(f, what)) fail(fmt("peer closed the connection while we waited for %s", what));
  }

  // Builds and sends one FPDU: DDP header, optional opcode body (Read Request), payload.
  void send(const w::DdpHeader& h, const uint8_t* body, size_t body_len, const uint8_t* payload,
            size_t payload_len) {
    const size_t ulen = w::ddp_header_size(h.opcode) + body_len + payload_len;
    if (ulen > w::kMpaMaxUlpdu) fail("internal: ULPDU too long");
    std::vector<uint8_t> out(w::fpdu_size(ulen));
    size_t off = w::encode_fpdu_header(h, static_cast<uint16_t>(ulen), out.data());
    if (body_len) std::memcpy(out.data() + off, body, body_len);
    off += body_len;
    if (payload_len) std::memcpy(out.data() + off, payload, payload_len);
    off += payload_len;
    const uint32_t state = crc32c_update(kCrc32cInit, out.data(), off);
    off += w::encode_fpdu_trailer(state, ulen, crc_, out.data() + off);
    if (off != out.size()) fail("internal: FPDU size mismatch");
    Fpdu f;
    f.raw = out;
    f.ulpdu_len = static_cast<uint16_t>(ulen);
    f.h = h;
    f.body_off = w::kMpaLenSize + w::ddp_header_size(h.opcode);
    f.body_len = body_len + payload_len;
    ++g_stats.tx[opcode_name(h.opcode)];
    log_fpdu("TX", f);
    c_->send_all(out.data(), out.size());
  }

  void send_send(const uint8_t* payload, size_t len) {
    // Segment like siw: at most fpdu_max_payload bytes per FPDU, same MSN, MO advancing.
    const size_t seg = w::fpdu_max_payload(o_.mss, w::kDdpUntaggedHdrSize);
    size_t off = 0;
    const uint32_t msn = send_msn_++;
    do {
      const size_t n = std::min(seg, len - off);
      w::DdpHeader h;
      h.opcode = w::RdmapOpcode::kSend;
      h.qn = w::kQnSend;
      h.msn = msn;
      h.mo = static_cast<uint32_t>(off);
      h.last = off + n == len;
      send(h, nullptr, 0, payload + off, n);
      off += n;
    } while (off < len);
  }

  void send_tagged(w::RdmapOpcode op, uint32_t stag, uint64_t to, const uint8_t* data, size_t len) {
    const size_t seg = w::fpdu_max_payload(o_.mss, w::kDdpTaggedHdrSize);
    size_t off = 0;
    do {
      const size_t n = std::min(seg, len - off);
      w::DdpHeader h;
      h.opcode = op;
      h.stag = stag;
      h.to = to + off;
      h.last = off + n == len;
      send(h, nullptr, 0, data + off, n);
      off += n;
    } while (off < len);
  }

  void send_read_request(const w::ReadRequest& rr) {
    uint8_t body[w::kRdmapReadReqSize];
    w::encode_read_request(rr, body);
    w::DdpHeader h;
    h.opcode = w::RdmapOpcode::kReadRequest;
    h.qn = w::kQnReadRequest;
    h.msn = rreq_msn_++;
    h.mo = 0;
    send(h, body, sizeof body, nullptr, 0);
  }

  // Receives one untagged Send message (possibly segmented); checks QN, MSN and MO.
  std::vector<uint8_t> recv_send(const char* what) {
    std::vector<uint8_t> msg;
    for (;;) {
      Fpdu f;
      expect(&f, what);
      if (!w::opcode_is_send(f.h.opcode)) {
        fail(fmt("expected a Send (%s), got %s", what, opcode_name(f.h.opcode)));
      }
      if (f.h.msn != expect_send_msn_) fail(fmt("Send MSN %u, expected %u", f.h.msn, expect_send_msn_));
      if (f.h.mo != msg.size()) fail(fmt("Send MO %u, expected %zu", f.h.mo, msg.size()));
      if (g_stats.first_send_hex.empty()) g_stats.first_send_hex = hex(f.raw.data(), f.raw.size());
      msg.insert(msg.end(), f.body(), f.body() + f.body_len);
      if (f.h.last) break;
    }
    ++expect_send_msn_;
    return msg;
  }

  // Receives one tagged message (Write or Read Response) into a buffer at stag/to of len bytes.
  std::vector<uint8_t> recv_tagged(w::RdmapOpcode op, uint32_t stag, uint64_t to, size_t max_len,
                                   const char* what) {
    std::vector<uint8_t> msg;
    for (;;) {
      Fpdu f;
      expect(&f, what);
      if (f.h.opcode != op) fail(fmt("expected %s (%s), got %s", opcode_name(op), what, opcode_name(f.h.opcode)));
      if (f.h.stag != stag) fail(fmt("%s to STag 0x%08x, expected 0x%08x", what, f.h.stag, stag));
      if (f.h.to != to + msg.size()) {
        fail(fmt("%s TO 0x%llx, expected 0x%llx", what, static_cast<unsigned long long>(f.h.to),
                 static_cast<unsigned long long>(to + msg.size())));
      }
      if (msg.size() + f.body_len > max_len) fail(fmt("%s overruns the %zu-byte buffer", what, max_len));
      msg.insert(msg.end(), f.body(), f.body() + f.body_len);
      if (f.h.last) break;
    }
    return msg;
  }

  // The responder checks the first Send of each ping by hand (it may be a FIN instead); count it here.
  void skip_send_msn() { ++expect_send_msn_; }

  Fpdu recv_read_request(const char* what) {
    Fpdu f;
    expect(&f, what);
    if (f.h.opcode != w::RdmapOpcode::kReadRequest) {
      fail(fmt("expected a Read Request (%s), got %s", what, opcode_name(f.h.opcode)));
    }
    if (f.h.msn != expect_rreq_msn_) fail(fmt("Read Request MSN %u, expected %u", f.h.msn, expect_rreq_msn_));
    if (f.h.mo != 0) fail(fmt("Read Request MO %u, expected 0", f.h.mo));
    if (!f.h.last) fail("Read Request without L");
    ++expect_rreq_msn_;
    if (g_stats.first_read_request_hex.empty()) {
      g_stats.first_read_request_hex = hex(f.raw.data(), f.raw.size());
      g_stats.read_request_ulpdu_len = f.ulpdu_len;
    }
    return f;
  }

 private:
  void log_fpdu(const char* dir, const Fpdu& f) {
    const w::DdpHeader& h = f.h;
    if (w::opcode_is_tagged(h.opcode)) {
      logf("%s %-12s len=%-5u %s STag 0x%08x TO 0x%016llx payload %zu%s", dir, opcode_name(h.opcode),
           f.ulpdu_len, h.last ? "L" : "-", h.stag, static_cast<unsigned long long>(h.to), f.body_len,
           crc_ ? " crc" : "");
    } else {
      logf("%s %-12s len=%-5u %s QN %u MSN %u MO %u body %zu%s", dir, opcode_name(h.opcode), f.ulpdu_len,
           h.last ? "L" : "-", h.qn, h.msn, h.mo, f.body_len, crc_ ? " crc" : "");
    }
    if (!o_.quiet || (dumped_[std::string(dir) + opcode_name(h.opcode)]++ == 0)) {
      hexdump("bytes", f.raw.data(), f.raw.size(), o_.quiet ? 64 : 96);
    }
  }

  Conn* c_;
  const Options& o_;
  bool crc_ = false;
  uint32_t send_msn_ = w::kMsnFirst;
  uint32_t rreq_msn_ = w::kMsnFirst;
  uint32_t expect_send_msn_ = w::kMsnFirst;
  uint32_t expect_rreq_msn_ = w::kMsnFirst;
  std::map<std::string, int> dumped_;
  bool expect_terminate_ = false;
  w::TerminateInfo last_term_;
  std::vector<uint8_t> last_term_raw_;
};

void put_info(uint8_t* out, uint64_t buf, uint32_t stag, uint32_t size) {
  w::put_be64(out, buf);
  w::put_be32(out + 8, stag);
  w::put_be32(out + 12, size);
}

// ---- MPA ------------------------------------------------------------------------------------------
// Reads one MPA frame through the incremental parser, leaving any later byte in the buffer.
w::MpaFrame read_mpa(Conn* c, w::MpaParser* parser, std::vector<uint8_t>* raw, const char* what) {
  while (parser->status() == w::MpaParseStatus::kNeedMore) {
    if (!c->want(1, what)) fail(fmt("peer closed the connection while we waited for %s", what));
    size_t used = 0;
    parser->feed(c->peek(), c->avail(), &used);
    raw->insert(raw->end(), c->peek(), c->peek() + used);
    c->consume(used);
  }
  hexdump(what, raw->data(), raw->size());
  if (parser->status() == w::MpaParseStatus::kError) {
    fail(fmt("our MPA parser refused siw's %s: %s", what, w::mpa_error_name(parser->error())));
  }
  return parser->frame();
}

void log_negotiated(const w::MpaNegotiated& n) {
  logf("negotiated: rev %u v2=%d crc=%d IRD %u ORD %u p2p=%d rtr=%s", n.rev, n.v2, n.crc, n.ird, n.ord,
       n.p2p, rtr_name(n.rtr).c_str());
  g_stats.neg = n;
  g_stats.negotiated = true;
}

// After our side is done: we close (or the peer does) and see whether anything else arrives.
void drain_until_eof(Conn* c, Wire* wire, bool we_close) {
  if (we_close) c->shutdown_write();
  Fpdu f;
  try {
    while (wire->read(&f, "the peer's FIN")) {
      g_stats.notes.push_back(fmt("unexpected %s after the last ping", opcode_name(f.h.opcode)));
    }
    g_stats.peer_closed_cleanly = true;
    logf("peer closed the connection (FIN)");
  } catch (const ProbeError& e) {
    if (std::string(e.what()).rfind("siw sent a Terminate", 0) == 0) throw;
    // A reset after our FIN is not a protocol error of ours; note it.
    g_stats.notes.push_back(std::string("close: ") + e.what());
    logf("close: %s", e.what());
  }
}

// ---- provocations: make siw send a Terminate and check it with our decoder -------------------------
void provoke_terminate(const Options& o, Conn* c, Wire* wire, const w::MpaNegotiated& neg) {
  wire->expect_terminate();
  w::TermCode want;
  std::vector<uint8_t> sent_ddp_hdr;  // the header siw should copy into its Terminate
  uint16_t sent_ulpdu_len = 0;
  if (o.provoke == "bad-stag") {
    // A 16-byte RDMA Write to an STag siw never issued: DDP / tagged / invalid STag (docs/iwarp.md §3.4).
    uint8_t data[16];
    std::memset(data, 0x5a, sizeof data);
    w::DdpHeader h;
    h.opcode = w::RdmapOpcode::kWrite;
    h.stag = 0x00dead00;
    h.to = 0x1000;
    h.last = true;
    wire->send(h, nullptr, 0, data, sizeof data);
    sent_ddp_hdr.resize(w::kDdpTaggedHdrSize);
    w::encode_ddp_header(h, sent_ddp_hdr.data());
    sent_ulpdu_len = static_cast<uint16_t>(w::kDdpTaggedHdrSize + sizeof data);
    want = w::term_code(w::DdpTaggedErr::kInvalidStag);
  } else if (o.provoke == "bad-crc") {
    if (!neg.crc) fail("--provoke bad-crc needs CRC negotiated (--crc)");
    // rping's first Send with one CRC bit flipped: LLP / MPA / CRC error.
    uint8_t info[kRpingInfoSize];
    put_info(info, kStartTo, kStartStag, o.size);
    w::DdpHeader h;
    h.opcode = w::RdmapOpcode::kSend;
    h.qn = w::kQnSend;
    h.msn = w::kMsnFirst;
    const size_t ulen = w::kDdpUntaggedHdrSize + sizeof info;
    std::vector<uint8_t> out(w::fpdu_size(ulen));
    size_t off = w::encode_fpdu_header(h, static_cast<uint16_t>(ulen), out.data());
    std::memcpy(out.data() + off, info, sizeof info);
    off += sizeof info;
    off += w::encode_fpdu_trailer(crc32c_update(kCrc32cInit, out.data(), off), ulen, true, out.data() + off);
    out[off - 1] ^= 0x01;
    hexdump("TX Send with a corrupted CRC", out.data(), out.size());
    wire->send_raw(out);
    want = w::term_code(w::LlpErr::kCrcError);
  } else {
    fail("unknown --provoke " + o.provoke);
  }
  Fpdu f;
  bool got = false;
  // siw may skip the Terminate and just close (docs/iwarp.md §3.3); then there is nothing to decode.
  while (wire->read(&f, "siw's Terminate")) {
    if (f.h.opcode == w::RdmapOpcode::kTerminate) {
      got = true;
      break;
    }
  }
  if (!got) fail("siw closed without a Terminate");
  const w::TerminateInfo& t = wire->last_terminate();
  const std::vector<uint8_t>& raw = wire->last_terminate_raw();
  const size_t body_off = w::kMpaLenSize + w::kDdpUntaggedHdrSize;
  const size_t body_len = w::peek_mpa_len(raw.data()) - w::kDdpUntaggedHdrSize;
  const uint8_t* b = raw.data() + body_off;
  logf("Terminate control word %02x %02x %02x %02x; our decoder: layer %u etype %u code 0x%02x M=%d D=%d R=%d",
       b[0], b[1], b[2], b[3], t.code.layer, t.code.etype, t.code.code, t.m, t.d, t.r);
  // siw declares the control word as C bitfields of a __be32 (iwarp.h struct iwarp_terminate); on a
  // little-endian CPU that puts Layer in the LOW nibble of byte 0 (EType in the high one) and M/D/R in
  // bits 0/1/2 of byte 2, instead of RFC 5040's Layer-high-nibble and M/D/R = 0x80/0x40/0x20.
  // Both readings computed here independently of decode_terminate_body, which must agree (below).
  const uint32_t word = w::get_be32(b);
  const w::TermCode rfc = w::term_control_code(word);
  const bool rfc_m = (word & w::kTermFlagM) != 0, rfc_d = (word & w::kTermFlagD) != 0;
  const w::TermCode siw_x86{static_cast<uint8_t>(b[0] & 0x0F), static_cast<uint8_t>(b[0] >> 4), b[1]};
  const bool siw_m = (b[2] & 0x01) != 0, siw_d = (b[2] & 0x02) != 0, siw_r = (b[2] & 0x04) != 0;
  std::string layout;
  if (rfc == want && (rfc_m || rfc_d || !(siw_m || siw_d))) layout = "rfc5040";
  else if (siw_x86 == want) layout = "siw-le-bitfields";
  else {
    fail(fmt("Terminate code: RFC reading %u/%u/0x%02x, siw-LE reading %u/%u/0x%02x; expected %u/%u/0x%02x",
             rfc.layer, rfc.etype, rfc.code, siw_x86.layer, siw_x86.etype, siw_x86.code, want.layer, want.etype,
             want.code));
  }
  const bool m = layout == "rfc5040" ? rfc_m : siw_m;
  const bool d = layout == "rfc5040" ? rfc_d : siw_d;
  logf("Terminate layout %s: M=%d D=%d R=%d", layout.c_str(), m, d, layout == "rfc5040" ? (word & w::kTermFlagR) != 0 : siw_r);
  // The provider's decoder (binding/soft/wire/ddp_rdmap.cc) must read siw's Terminate the same way, reliably.
  if (!t.reliable || t.code != want || t.m != m || t.d != d) {
    fail(fmt("decode_terminate_body read %u/%u/0x%02x M=%d D=%d reliable=%d layout=%d; expected %u/%u/0x%02x M=%d D=%d",
             t.code.layer, t.code.etype, t.code.code, t.m, t.d, t.reliable, static_cast<int>(t.layout), want.layer,
             want.etype, want.code, m, d));
  }
  g_stats.notes.push_back(fmt("decode_terminate_body layout %s", t.layout == w::TermLayout::kSiwLe ? "siw-le" : t.layout == w::TermLayout::kRfc5040 ? "rfc5040" : "ambiguous"));
  g_stats.notes.push_back(fmt("terminate layout %s: ctrl %02x%02x%02x%02x", layout.c_str(), b[0], b[1], b[2], b[3]));
  if (!sent_ddp_hdr.empty()) {
    // DDP Segment Length, then the copied DDP header.
    if (!m || !d || body_len < 4 + 2 + sent_ddp_hdr.size()) fail("Terminate without the copied DDP header");
    const uint16_t seg_len = w::get_be16(b + 4);
    if (std::memcmp(b + 6, sent_ddp_hdr.data(), sent_ddp_hdr.size()) != 0) {
      fail("the DDP header copied into the Terminate is not the one we sent: " + hex(b + 6, sent_ddp_hdr.size()));
    }
    // siw reports the segment's payload length (ULPDU length minus the DDP/RDMAP header, siw_qp.c).
    g_stats.notes.push_back(fmt("terminate DDP segment length %u (our ULPDU length %u, payload %zu)", seg_len,
                                sent_ulpdu_len, sent_ulpdu_len - sent_ddp_hdr.size()));
    logf("Terminate DDP segment length %u (ULPDU %u); copied DDP header matches", seg_len, sent_ulpdu_len);
  }
  if (layout == "rfc5040") {
    // Then our encoder must reproduce the body byte for byte from what we decoded.
    uint8_t body[w::kTermMaxBody];
    const size_t n = w::encode_terminate_body(t, body, sizeof body);
    if (n == 0 || n != body_len || std::memcmp(body, b, n) != 0) {
      hexdump("siw's Terminate body", b, body_len);
      hexdump("our re-encoding", body, n);
      fail("encode_terminate_body does not reproduce siw's Terminate body");
    }
  }
  g_stats.notes.push_back("terminate verified: " + g_stats.terminate_desc);
  drain_until_eof(c, wire, /*we_close=*/false);
}

// ---- initiator: MPA Request + rping client --------------------------------------------------------
void run_initiator(const Options& o) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) fail(fmt("socket: %s", std::strerror(errno)));
  const int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(o.port));
  if (::inet_pton(AF_INET, o.host.c_str(), &a.sin_addr) != 1) fail("bad host address " + o.host);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    const int e = errno;
    ::close(fd);
    fail(fmt("connect %s:%d: %s", o.host.c_str(), o.port, std::strerror(e)));
  }
  Conn c(fd, o.timeout_s);
  logf("connected to %s:%d", o.host.c_str(), o.port);

  w::MpaLocal local;
  local.want_crc = o.crc;
  local.use_v2 = !o.v1;
  local.ird = 1;  // rping: responder_resources = initiator_depth = 1
  local.ord = 1;
  local.p2p = o.p2p;
  local.rtr_types = o.rtr;
  const w::MpaFrame req = w::mpa_make_request(local, nullptr, 0);
  uint8_t reqb[w::kMpaHeaderSize + w::kMpaMaxPrivateDataSend];
  w::MpaError err = w::MpaError::kNone;
  const size_t reqn = w::mpa_encode(req, reqb, sizeof reqb, &err);
  if (reqn == 0) fail(std::string("mpa_encode: ") + w::mpa_error_name(err));
  logf("TX MPA %s", describe_frame(req).c_str());
  hexdump("MPA Request (ours)", reqb, reqn);
  g_stats.mpa_request_hex = hex(reqb, reqn);
  c.send_all(reqb, reqn);

  w::MpaParser parser(w::MpaFrameKind::kReply);
  std::vector<uint8_t> raw;
  const w::MpaFrame rep = read_mpa(&c, &parser, &raw, "MPA Reply (siw)");
  g_stats.mpa_reply_hex = hex(raw.data(), raw.size());
  logf("RX MPA %s", describe_frame(rep).c_str());
  if (c.avail() != 0) fail(fmt("%zu bytes followed the MPA Reply before our first FPDU", c.avail()));
  w::MpaNegotiated neg;
  const w::MpaDecision d = w::mpa_check_reply(req, rep, local, &neg);
  if (d.action != w::MpaAction::kAccept) {
    fail(fmt("mpa_check_reply: action %d reason %s", static_cast<int>(d.action), w::mpa_error_name(d.reason)));
  }
  log_negotiated(neg);

  Wire wire(&c, o);
  wire.set_crc(neg.crc);
  if (o.first_delay_ms > 0) {
    logf("pausing %d ms before the first FPDU", o.first_delay_ms);
    ::usleep(static_cast<useconds_t>(o.first_delay_ms) * 1000);
  }

  if (neg.p2p) {
    if (neg.rtr == w::kRtrWrite) {
      // Zero-length RDMA Write RTR to STag 1, TO 0, as siw sends it (STag 0 is refused by some HW).
      w::DdpHeader h;
      h.opcode = w::RdmapOpcode::kWrite;
      h.stag = 1;
      h.to = 0;
      h.last = true;
      wire.send(h, nullptr, 0, nullptr, 0);
    } else if (neg.rtr == w::kRtrRead) {
      // Zero-length Read RTR; siw answers with a zero-length Read Response to our sink STag.
      w::ReadRequest rr;
      rr.sink_stag = kSinkStag;
      rr.sink_to = 0;
      rr.size = 0;
      rr.src_stag = 1;
      rr.src_to = 0;
      wire.send_read_request(rr);
      const auto resp = wire.recv_tagged(w::RdmapOpcode::kReadResponse, kSinkStag, 0, 0, "Read RTR response");
      (void)resp;
    } else {
      fail("negotiated an RTR type we cannot send: " + rtr_name(neg.rtr));
    }
  }

  if (!o.provoke.empty()) {
    provoke_terminate(o, &c, &wire, neg);
    return;
  }

  for (int ping = 0; ping < o.count; ++ping) {
    const std::vector<uint8_t> start = rping_pattern(ping, o.size);
    uint8_t info[kRpingInfoSize];
    put_info(info, kStartTo, kStartStag, o.size);
    wire.send_send(info, sizeof info);  // 1. start_buf advertisement

    Fpdu rrf = wire.recv_read_request("siw's RDMA Read Request");  // 2. server reads start_buf
    const w::ReadRequest& rr = rrf.rr;
    if (rrf.ulpdu_len != w::ulpdu_header_size(w::RdmapOpcode::kReadRequest)) {
      fail(fmt("Read Request ULPDU length %u, codec says %zu", rrf.ulpdu_len,
               w::ulpdu_header_size(w::RdmapOpcode::kReadRequest)));
    }
    if (rr.src_stag != kStartStag || rr.src_to != kStartTo || rr.size != o.size) {
      fail(fmt("Read Request source STag 0x%08x TO 0x%llx size %u does not match what we advertised "
               "(0x%08x 0x%llx %u)", rr.src_stag, static_cast<unsigned long long>(rr.src_to), rr.size,
               kStartStag, static_cast<unsigned long long>(kStartTo), o.size));
    }
    wire.send_tagged(w::RdmapOpcode::kReadResponse, rr.sink_stag, rr.sink_to, start.data(), rr.size);

    std::vector<uint8_t> go = wire.recv_send("go-ahead after the Read");  // 3.
    if (go.size() != kRpingInfoSize) fail(fmt("go-ahead Send of %zu bytes, rping sends 16", go.size()));

    put_info(info, kRdmaTo, kRdmaStag, o.size);
    wire.send_send(info, sizeof info);  // 4. rdma_buf advertisement

    std::vector<uint8_t> echo =  // 5. server writes the data back
        wire.recv_tagged(w::RdmapOpcode::kWrite, kRdmaStag, kRdmaTo, o.size, "siw's RDMA Write");
    go = wire.recv_send("go-ahead after the Write");  // 6.
    if (go.size() != kRpingInfoSize) fail(fmt("go-ahead Send of %zu bytes, rping sends 16", go.size()));

    // 7. -V: the echo must equal what the server read (rping writes strlen+1 bytes = size).
    if (echo.size() != o.size || std::memcmp(echo.data(), start.data(), o.size) != 0) {
      hexdump("written back", echo.data(), echo.size(), 128);
      fail(fmt("ping %d: data written back (%zu bytes) differs from start_buf", ping, echo.size()));
    }
    ++g_stats.pings;
    logf("ping %d verified: %.40s", ping, reinterpret_cast<const char*>(echo.data()));
  }
  drain_until_eof(&c, &wire, /*we_close=*/true);
}

// ---- responder: MPA Reply + rping server ----------------------------------------------------------
void run_responder(const Options& o, const std::string& bind_addr) {
  const int ls = ::socket(AF_INET, SOCK_STREAM, 0);
  if (ls < 0) fail(fmt("socket: %s", std::strerror(errno)));
  const int one = 1;
  ::setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(o.port));
  if (::inet_pton(AF_INET, bind_addr.c_str(), &a.sin_addr) != 1) fail("bad bind address " + bind_addr);
  if (::bind(ls, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 || ::listen(ls, 1) != 0) {
    const int e = errno;
    ::close(ls);
    fail(fmt("listen %s:%d: %s", bind_addr.c_str(), o.port, std::strerror(e)));
  }
  logf("LISTENING %s:%d", bind_addr.c_str(), o.port);
  pollfd p{ls, POLLIN, 0};
  int r;
  do r = ::poll(&p, 1, o.timeout_s * 1000); while (r < 0 && errno == EINTR);
  if (r <= 0) { ::close(ls); fail("no connection within the timeout"); }
  const int fd = ::accept(ls, nullptr, nullptr);
  ::close(ls);
  if (fd < 0) fail(fmt("accept: %s", std::strerror(errno)));
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  Conn c(fd, o.timeout_s);
  logf("accepted a connection");

  w::MpaParser parser(w::MpaFrameKind::kRequest);
  std::vector<uint8_t> raw;
  const w::MpaFrame req = read_mpa(&c, &parser, &raw, "MPA Request (siw)");
  g_stats.mpa_request_hex = hex(raw.data(), raw.size());
  logf("RX MPA %s", describe_frame(req).c_str());
  if (c.avail() != 0) fail(fmt("%zu bytes followed the MPA Request before our Reply", c.avail()));

  w::MpaLocal local;
  local.want_crc = o.crc;
  local.ird = 1;  // rping server: rdma_accept(NULL) takes IRD/ORD from the request
  local.ord = 1;
  local.rtr_types = o.rtr;
  w::MpaFrame rep;
  w::MpaNegotiated neg;
  const w::MpaDecision d = w::mpa_respond(req, local, &rep, &neg);
  uint8_t repb[w::kMpaHeaderSize + w::kMpaMaxPrivateDataSend];
  w::MpaError err = w::MpaError::kNone;
  const size_t repn = w::mpa_encode(rep, repb, sizeof repb, &err);
  if (repn == 0) fail(std::string("mpa_encode: ") + w::mpa_error_name(err));
  logf("TX MPA %s", describe_frame(rep).c_str());
  hexdump("MPA Reply (ours)", repb, repn);
  g_stats.mpa_reply_hex = hex(repb, repn);
  if (d.action != w::MpaAction::kAccept) {
    if (d.reply_frame) c.send_all(repb, repn);
    fail(fmt("mpa_respond: action %d reason %s", static_cast<int>(d.action), w::mpa_error_name(d.reason)));
  }
  c.send_all(repb, repn);
  log_negotiated(neg);

  Wire wire(&c, o);
  wire.set_crc(neg.crc);

  if (neg.p2p) {
    Fpdu f;
    wire.expect(&f, "the initiator's RTR");
    if (neg.rtr == w::kRtrWrite) {
      if (f.h.opcode != w::RdmapOpcode::kWrite || f.body_len != 0 || !f.h.last) {
        fail(fmt("expected a zero-length Write RTR, got %s with %zu bytes", opcode_name(f.h.opcode), f.body_len));
      }
      logf("RTR: zero-length Write to STag 0x%08x TO 0x%llx", f.h.stag, static_cast<unsigned long long>(f.h.to));
    } else {
      if (f.h.opcode != w::RdmapOpcode::kReadRequest || f.rr.size != 0) {
        fail(fmt("expected a zero-length Read RTR, got %s", opcode_name(f.h.opcode)));
      }
      // Answer with a zero-length Read Response to its sink, whatever the STag (docs/iwarp.md §4).
      wire.send_tagged(w::RdmapOpcode::kReadResponse, f.rr.sink_stag, f.rr.sink_to, nullptr, 0);
    }
  }

  for (int ping = 0;; ++ping) {
    // 1. The client's start_buf advertisement, or its FIN after the last ping.
    Fpdu f;
    if (!wire.read(&f, "the client's Send (or FIN)")) {
      g_stats.peer_closed_cleanly = true;
      logf("peer closed the connection (FIN) after %d pings", ping);
      break;
    }
    // Re-run the Send checks of recv_send for this first segment.
    if (f.h.opcode != w::RdmapOpcode::kSend || !f.h.last || f.h.msn != static_cast<uint32_t>(2 * ping + 1) ||
        f.h.mo != 0) {
      fail(fmt("expected rping's start Send (MSN %d), got %s MSN %u MO %u L=%d", 2 * ping + 1,
               opcode_name(f.h.opcode), f.h.msn, f.h.mo, f.h.last));
    }
    if (g_stats.first_send_hex.empty()) g_stats.first_send_hex = hex(f.raw.data(), f.raw.size());
    if (f.body_len != kRpingInfoSize) fail(fmt("rping info Send of %zu bytes", f.body_len));
    const uint64_t src_to = w::get_be64(f.body());
    const uint32_t src_stag = w::get_be32(f.body() + 8);
    const uint32_t len = w::get_be32(f.body() + 12);
    logf("     client start_buf: TO 0x%016llx STag 0x%08x size %u", static_cast<unsigned long long>(src_to),
         src_stag, len);
    if (len != o.size) fail(fmt("client advertises size %u, we run --size %u", len, o.size));
    wire.skip_send_msn();

    // 2. RDMA Read it into our sink.
    w::ReadRequest rr;
    rr.sink_stag = kSinkStag;
    rr.sink_to = kSinkTo;
    rr.size = len;
    rr.src_stag = src_stag;
    rr.src_to = src_to;
    wire.send_read_request(rr);
    const std::vector<uint8_t> data =
        wire.recv_tagged(w::RdmapOpcode::kReadResponse, kSinkStag, kSinkTo, len, "siw's Read Response");
    if (data.size() != len) fail(fmt("Read Response carried %zu bytes, asked %u", data.size(), len));
    const std::vector<uint8_t> want = rping_pattern(ping, len);
    if (data != want) {
      hexdump("read", data.data(), data.size(), 128);
      hexdump("expected", want.data(), want.size(), 128);
      fail(fmt("ping %d: data read from the client differs from rping's pattern", ping));
    }
    logf("server ping data: %.60s", reinterpret_cast<const char*>(data.data()));

    // 3. Go ahead (16 bytes, rping leaves them zero).
    uint8_t go[kRpingInfoSize] = {};
    wire.send_send(go, sizeof go);

    // 4. The client's rdma_buf advertisement.
    const std::vector<uint8_t> info = wire.recv_send("the client's rdma_buf Send");
    if (info.size() != kRpingInfoSize) fail(fmt("rping info Send of %zu bytes", info.size()));
    const uint64_t dst_to = w::get_be64(info.data());
    const uint32_t dst_stag = w::get_be32(info.data() + 8);
    const uint32_t dst_len = w::get_be32(info.data() + 12);
    if (dst_len < len) fail(fmt("client rdma_buf of %u bytes < %u", dst_len, len));

    // 5. Write strlen+1 bytes back (= size for rping data), then 6. go ahead.
    const size_t wlen = std::strlen(reinterpret_cast<const char*>(data.data())) + 1;
    wire.send_tagged(w::RdmapOpcode::kWrite, dst_stag, dst_to, data.data(), wlen);
    wire.send_send(go, sizeof go);
    ++g_stats.pings;
  }
  if (o.count > 0 && g_stats.pings != o.count) fail(fmt("%d pings, expected %d", g_stats.pings, o.count));
}

void usage() {
  std::fprintf(stderr,
               "usage: wire_probe connect HOST PORT [opts] | wire_probe listen PORT [opts]\n"
               "  opts: --crc --p2p --rtr write,read --v1 --size N --count N --mss N --timeout S\n"
               "        --bind ADDR --quiet --first-delay-ms N\n");
}

std::string json_escape(const std::string& s) {
  std::string o;
  for (char ch : s) {
    if (ch == '"' || ch == '\\') { o += '\\'; o += ch; }
    else if (static_cast<unsigned char>(ch) < 0x20) o += fmt("\\u%04x", ch);
    else o += ch;
  }
  return o;
}

void print_summary(const Options& o, bool pass, const std::string& why) {
  std::string j = "{";
  j += fmt("\"role\":\"%s\",\"pass\":%s", o.listen ? "responder" : "initiator", pass ? "true" : "false");
  j += ",\"error\":\"" + json_escape(why) + "\"";
  j += fmt(",\"want_crc\":%s,\"p2p_requested\":%s,\"size\":%u,\"pings\":%d", o.crc ? "true" : "false",
           o.p2p ? "true" : "false", o.size, g_stats.pings);
  if (g_stats.negotiated) {
    const auto& n = g_stats.neg;
    j += fmt(",\"negotiated\":{\"rev\":%u,\"v2\":%s,\"crc\":%s,\"ird\":%u,\"ord\":%u,\"p2p\":%s,\"rtr\":\"%s\"}",
             n.rev, n.v2 ? "true" : "false", n.crc ? "true" : "false", n.ird, n.ord, n.p2p ? "true" : "false",
             rtr_name(n.rtr).c_str());
  }
  auto map_json = [](const std::map<std::string, int>& m) {
    std::string s = "{";
    for (const auto& [k, v] : m) s += fmt("%s\"%s\":%d", s.size() > 1 ? "," : "", k.c_str(), v);
    return s + "}";
  };
  j += ",\"tx\":" + map_json(g_stats.tx) + ",\"rx\":" + map_json(g_stats.rx);
  j += fmt(",\"crc_checked\":%d,\"crc_bad\":%d,\"nonzero_trailer_without_crc\":%d", g_stats.crc_checked,
           g_stats.crc_bad, g_stats.nonzero_trailer_without_crc);
  j += fmt(",\"terminate\":%s,\"terminate_desc\":\"%s\"", g_stats.terminate_rx ? "true" : "false",
           json_escape(g_stats.terminate_desc).c_str());
  j += fmt(",\"read_request_ulpdu_len\":%u", g_stats.read_request_ulpdu_len);
  j += ",\"mpa_request\":\"" + g_stats.mpa_request_hex + "\",\"mpa_reply\":\"" + g_stats.mpa_reply_hex + "\"";
  j += ",\"first_send\":\"" + g_stats.first_send_hex + "\",\"first_read_request\":\"" +
       g_stats.first_read_request_hex + "\"";
  j += fmt(",\"peer_closed_cleanly\":%s", g_stats.peer_closed_cleanly ? "true" : "false");
  j += ",\"notes\":[";
  for (size_t i = 0; i < g_stats.notes.size(); ++i) j += (i ? ",\"" : "\"") + json_escape(g_stats.notes[i]) + "\"";
  j += "]}";
  std::printf("SUMMARY %s\n", j.c_str());
  if (pass) std::printf("RESULT PASS\n"); else std::printf("RESULT FAIL %s\n", why.c_str());
  std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
  ::signal(SIGPIPE, SIG_IGN);
  Options o;
  std::string bind_addr = "127.0.0.1";
  int i = 1;
  if (argc < 3) { usage(); return 2; }
  const std::string mode = argv[i++];
  if (mode == "connect") {
    if (argc < 4) { usage(); return 2; }
    o.host = argv[i++];
    o.port = std::atoi(argv[i++]);
  } else if (mode == "listen") {
    o.listen = true;
    o.port = std::atoi(argv[i++]);
  } else {
    usage();
    return 2;
  }
  for (; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() -> const char* {
      if (i + 1 >= argc) { usage(); std::exit(2); }
      return argv[++i];
    };
    if (a == "--crc") o.crc = true;
    else if (a == "--p2p") o.p2p = true;
    else if (a == "--v1") o.v1 = true;
    else if (a == "--quiet") o.quiet = true;
    else if (a == "--size") o.size = static_cast<uint32_t>(std::strtoul(next(), nullptr, 0));
    else if (a == "--count") o.count = std::atoi(next());
    else if (a == "--mss") o.mss = static_cast<uint32_t>(std::strtoul(next(), nullptr, 0));
    else if (a == "--timeout") o.timeout_s = std::atoi(next());
    else if (a == "--bind") bind_addr = next();
    else if (a == "--first-delay-ms") o.first_delay_ms = std::atoi(next());
    else if (a == "--provoke") o.provoke = next();
    else if (a == "--rtr") {
      const std::string v = next();
      o.rtr = 0;
      if (v.find("write") != std::string::npos) o.rtr |= w::kRtrWrite;
      if (v.find("read") != std::string::npos) o.rtr |= w::kRtrRead;
      if (v.find("send") != std::string::npos) o.rtr |= w::kRtrSend;
    } else { usage(); return 2; }
  }
  if (o.port <= 0 || o.port > 65535 || o.size < 26 || o.size > 65535 || o.count < 0 || o.mss < 64) {
    usage();
    return 2;
  }
  logf("wire_probe %s port %d crc=%d p2p=%d rtr=%s v1=%d size %u count %d mss %u (crc32c %s)",
       mode.c_str(), o.port, o.crc, o.p2p, rtr_name(o.rtr).c_str(), o.v1, o.size, o.count, o.mss,
       netdirect::soft::crc32c_hardware() ? "hw" : "table");
  try {
    if (o.listen) run_responder(o, bind_addr); else run_initiator(o);
  } catch (const ProbeError& e) {
    logf("FAIL: %s", e.what());
    print_summary(o, false, e.what());
    return 1;
  }
  print_summary(o, true, "");
  return 0;
}

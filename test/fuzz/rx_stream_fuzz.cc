// Fuzz target: a queue pair's receive path (binding/soft/qp/rx_stream.*): MPA FPDU framing and CRC, every DDP/RDMAP
// check (MSN, MO, STag, rights, bounds, Read Response matching, IRD, RTR), placement into registered memory, posted
// receives and Read sinks, Read Request queuing and Terminate decoding, on a byte stream fed through an RxSource as
// test/native/rx_stream_test.cc does.
//
// Input: two settings bytes, then the byte stream the peer sends after MPA setup.
//   byte 0: bit 0 CRC on; bit 1 recompute every FPDU's CRC (else the input's trailers count); bit 2 P2P responder
//           awaiting the RTR; bit 3 RTR type Read (else Write); bit 4 end of stream after the input (else it just
//           stops arriving); bits 5-7 receive chunk size (fuzz::chunk_size).
//   byte 1: bits 0-2 posted receives (0-7; receive i has 1 + i % 3 SGEs of 100 bytes); bits 3-4 outstanding Reads
//           (0-3, each in its own kSinkSlot of the sinks' region, two SGEs with a gap); bit 5 the first Read is our
//           internal zero-length one; bits 6-7 the Reads' size (kReadSizes).
// STags and tagged offsets in the stream are symbolic, so that seeds and mutations reach real memory although
// the table's STags are random: a wire STag 0x5EED000k (k = 1..7) is replaced by entry k's real STag and its TO by
// entry base + TO (tagged headers, a Read Request's source, a Send with Invalidate's STag), before the CRC is
// recomputed (bit 1). Entries: 1 remote-writable region, 2 remote-readable region, 3 region without remote rights,
// 4 a window (remote read + write) inside 1, 5 a deregistered region, 6 the receive buffers' region (local write),
// 7 the Read sinks' region (the Read Responses' sink STag). Any other STag goes through unchanged.
//
// Invariants beyond "no crash":
//  * placement writes only what a region with the right access allows: guard bytes around and between all buffers
//    (and the gaps between a receive's SGEs) are intact, the read-only, no-access and deregistered regions unchanged;
//  * an inbound Read Request's source lies inside a region or window with remote read, and is pinned iff non-empty;
//  * every protocol error names a defined Terminate code, and the Terminate FPDU built for it decodes back to it;
//    after a fatal event the stream reports nothing more; completions never exceed the receive's length;
//  * the stream never stalls with bytes available; every pin is given back (all regions deregister at once);
//  * with CRC on, an FPDU whose CRC fails places nothing: memory ends as after the stream cut just before it.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cerrno>
#include <cstring>
#include <deque>
#include <memory>
#include <vector>

#include "fuzz_check.h"
#include "soft/memory/stag_table.h"
#include "soft/qp/rx_stream.h"
#include "soft/wire/crc32c.h"
#include "soft/wire/ddp_rdmap.h"
#include "soft/wire/mpa.h"
#include "soft/wire/terminate.h"

using namespace netdirect::soft;
using namespace netdirect::soft::wire;

namespace {

using Bytes = std::vector<uint8_t>;

constexpr uint32_t kSymBase = 0x5EED0000;
constexpr uint8_t kGuard = 0xA5;
constexpr size_t kGuardLen = 64;
constexpr int kMaxRecv = 7;
constexpr uint32_t kSgeLen = 100;
constexpr size_t kSgeGap = 16;
constexpr int kMaxReads = 3;
constexpr size_t kSinkSlot = 4100;
constexpr uint32_t kReadSizes[4] = {0, 64, 1000, 4000};  // every Read of a run has the same size

// The memory the stream may touch, in one arena: guard, part, guard, part, ..., guard.
struct Layout {
  size_t rw, ro, noacc, dead, rx, sink, total;
  // The writable region takes a Write of any FPDU size (up to 64 KiB), so that short inputs whose ULPDU Length
  // claims more than kRxCopyFpdu reach the large-FPDU receive path (direct placement, header-sized read-ahead).
  static constexpr size_t kRw = 80 * 1024, kRo = 4096, kNoacc = 1024, kDead = 1024;
  static constexpr size_t kRx = kMaxRecv * 3 * (kSgeLen + kSgeGap), kSink = kMaxReads * kSinkSlot;
  static constexpr size_t kWinOff = 1024, kWinLen = 2048;  // the window inside the writable region
  Layout() {
    size_t at = kGuardLen;
    rw = at, at += kRw + kGuardLen;
    ro = at, at += kRo + kGuardLen;
    noacc = at, at += kNoacc + kGuardLen;
    dead = at, at += kDead + kGuardLen;
    rx = at, at += kRx + kGuardLen;
    sink = at, at += kSink + kGuardLen;
    total = at;
  }
};
const Layout kL;

// NETDIRECT_FUZZ_VERBOSE=1: print what the stream reports (to see what a seed or a crash input does).
const bool kVerbose = std::getenv("NETDIRECT_FUZZ_VERBOSE") != nullptr;
#define VERBOSE(...) (kVerbose ? static_cast<void>(std::fprintf(stderr, __VA_ARGS__)) : static_cast<void>(0))

// The arena's initial contents: guard bytes, and a pattern in every part (built once; copied per run, so that the
// harness's own loops do not dominate the fuzzer's time).
const std::vector<uint8_t>& initial_arena() {
  static const std::vector<uint8_t> image = [] {
    std::vector<uint8_t> b(kL.total, kGuard);
    const size_t parts[] = {kL.rw, kL.ro, kL.noacc, kL.dead, kL.rx, kL.sink};
    const size_t lens[] = {Layout::kRw, Layout::kRo, Layout::kNoacc, Layout::kDead, Layout::kRx, Layout::kSink};
    for (int p = 0; p < 6; ++p) {
      for (size_t i = 0; i < lens[p]; ++i) b[parts[p] + i] = static_cast<uint8_t>(i * 31 + 7 + p);
    }
    // The gaps between a receive's SGEs are guards too.
    for (int i = 0; i < kMaxRecv * 3; ++i) std::memset(&b[kL.rx + i * (kSgeLen + kSgeGap) + kSgeLen], kGuard, kSgeGap);
    return b;
  }();
  return image;
}

struct Settings {
  bool crc, fix_crc, await_rtr, rtr_read, eof;
  size_t chunk;
  int receives, reads;
  bool internal_first;
  uint8_t read_sel;
};

class BufSource final : public RxSource {
 public:
  const Bytes* data = nullptr;
  size_t pos = 0;
  size_t chunk = ~size_t{0};
  bool eof = false;
  ptrdiff_t read(void* buf, size_t len) override {
    const size_t n = avail(len);
    if (n == 0) return empty();
    std::memcpy(buf, data->data() + pos, n);
    pos += n;
    return static_cast<ptrdiff_t>(n);
  }
  ptrdiff_t readv(const iovec* iov, int iovcnt) override {
    size_t want = 0;
    for (int i = 0; i < iovcnt; ++i) want += iov[i].iov_len;
    size_t n = avail(want);
    if (n == 0) return empty();
    const size_t total = n;
    for (int i = 0; i < iovcnt && n > 0; ++i) {
      const size_t k = std::min(n, iov[i].iov_len);
      std::memcpy(iov[i].iov_base, data->data() + pos, k);
      pos += k;
      n -= k;
    }
    return static_cast<ptrdiff_t>(total);
  }

 private:
  size_t avail(size_t want) const { return std::min({want, data->size() - pos, chunk}); }
  ptrdiff_t empty() const { return eof ? 0 : -EAGAIN; }
};

// One connection's worth of memory, STag table, queue pair stand-in and stream.
class Run final : public RxEvents {
 public:
  Run(const Settings& s) : s_(s), arena_(initial_arena()) {
    writable_.push_back({kL.rw, Layout::kRw});
    sym_[1] = add(kL.rw, Layout::kRw, access::kRemoteWrite | access::kLocalWrite);
    sym_[2] = add(kL.ro, Layout::kRo, access::kRemoteRead);
    sym_[3] = add(kL.noacc, Layout::kNoacc, access::kLocalWrite);
    FUZZ_CHECK(stags_.bind_window(sym_[1].stag, addr(kL.rw + Layout::kWinOff), Layout::kWinLen,
                                  access::kRemoteRead | access::kRemoteWrite, &sym_[4].stag) == ND_SUCCESS,
               "bind_window failed");
    sym_[4].base = addr(kL.rw + Layout::kWinOff);
    sym_[5] = add(kL.dead, Layout::kDead, access::kRemoteRead | access::kRemoteWrite | access::kLocalWrite);
    FUZZ_CHECK(stags_.remove_region(sym_[5].stag, nullptr) == ND_SUCCESS, "remove_region failed");
    sym_[6] = add(kL.rx, Layout::kRx, access::kLocalWrite);
    sym_[7] = add(kL.sink, Layout::kSink, access::kLocalWrite);
    for (int i = 0; i < s.receives; ++i) post_receive(i);
    for (int i = 0; i < s.reads; ++i) add_read(i);
    initial_ = arena_;
    stream_.reset(new RxStream(stags_, *this));
    stream_->start(s.crc, s.await_rtr, s.rtr_read ? kRtrRead : kRtrWrite);
  }

  // Replaces symbolic STags/TOs in a copy of the stream (see the file comment); recomputes CRCs if asked.
  Bytes resolve(const uint8_t* p, size_t n) const {
    Bytes b(p, p + n);
    for (size_t pos = 0; b.size() - pos >= kMpaLenSize;) {
      const uint16_t ulen = get_be16(&b[pos]);
      const size_t whole = fpdu_size(ulen);
      if (b.size() - pos < whole) break;
      uint8_t* u = &b[pos + kMpaLenSize];
      if (ulen >= kDdpTaggedHdrSize && (u[0] & kDdpFlagTagged) != 0) {
        map(u + 2, u + 6);
      } else if (ulen >= kDdpUntaggedHdrSize) {
        const auto op = static_cast<RdmapOpcode>(u[1] & kRdmapOpcodeMask);
        if (op == RdmapOpcode::kReadRequest && ulen >= kDdpUntaggedHdrSize + kRdmapReadReqSize) {
          map(u + kDdpUntaggedHdrSize + 16, u + kDdpUntaggedHdrSize + 20);
        } else if (opcode_has_invalidate(op)) {
          map(u + 2, nullptr);
        }
      }
      if (s_.crc && s_.fix_crc) put_crc_le(&b[pos + whole - kMpaTrailerCrcSize], crc32c(&b[pos], whole - kMpaTrailerCrcSize));
      pos += whole;
    }
    return b;
  }

  // Feeds the stream all of `bytes`, as an engine would: progress until it stops or has read everything.
  void feed(const Bytes& bytes) {
    src_.data = &bytes;
    src_.chunk = s_.chunk;
    src_.eof = s_.eof;
    int idle = 0;
    while (!stream_->stopped() && src_.pos < bytes.size()) {
      const size_t before = src_.pos;
      stream_->progress(src_);
      FUZZ_CHECK(!fatal_ || stream_->stopped(), "the stream goes on after a fatal event");
      idle = src_.pos == before && !stream_->stopped() ? idle + 1 : 0;
      FUZZ_CHECK(idle < 3, "the stream stalls with %zu of %zu bytes unread", bytes.size() - src_.pos, bytes.size());
    }
    stream_->progress(src_);  // the end of stream (eof), or -EAGAIN
  }

  // Ends the connection as the queue pair does and checks the invariants that hold at the end.
  void finish() {
    fatal_ = false;  // stop() completes the receive being filled
    stream_->stop(ND_CANCELED);
    stream_.reset();
    for (RecvRequest& r : posted_) release_local_sges(stags_, r.sge, r.nsge);
    posted_.clear();
    for (uint32_t pin : inbound_pins_) stags_.unpin(pin);
    for (uint32_t pin : read_pins_) stags_.unpin(pin);
    stags_.invalidate_window(sym_[4].stag);
    for (int k : {1, 2, 3, 6, 7}) {
      FUZZ_CHECK(stags_.remove_region(sym_[k].stag, nullptr) == ND_SUCCESS, "region %d still pinned at the end", k);
    }
    FUZZ_CHECK(stags_.live() == 0, "%zu STag table entries left", stags_.live());
    check_memory();
  }

  const Bytes& arena() const { return arena_; }

 private:
  struct Sym {
    uint32_t stag = 0;
    uint64_t base = 0;
  };

  uint8_t* at(size_t off) { return arena_.data() + off; }
  uint64_t addr(size_t off) { return reinterpret_cast<uintptr_t>(at(off)); }
  Sym add(size_t off, size_t len, uint32_t rights) {
    Sym s;
    s.base = addr(off);
    s.stag = stags_.add_region(s.base, len, rights);
    FUZZ_CHECK(s.stag != 0, "add_region failed");
    return s;
  }
  void map(uint8_t* stag_field, uint8_t* to_field) const {
    const uint32_t v = get_be32(stag_field);
    if ((v & 0xFFFFFF00u) != kSymBase || (v & 0xFF) < 1 || (v & 0xFF) > 7) return;
    const Sym& s = sym_[v & 0xFF];
    put_be32(stag_field, s.stag);
    if (to_field != nullptr) put_be64(to_field, s.base + get_be64(to_field));
  }

  void post_receive(int i) {
    RecvRequest r;
    r.context = reinterpret_cast<void*>(static_cast<uintptr_t>(i + 1));
    r.nsge = static_cast<uint32_t>(1 + i % 3);
    for (uint32_t k = 0; k < r.nsge; ++k) {
      const size_t off = kL.rx + (i * 3 + k) * (kSgeLen + kSgeGap);
      r.sge[k] = LocalSge{at(off), kSgeLen, sym_[6].stag};
      writable_.push_back({off, kSgeLen});
      FUZZ_CHECK(stags_.pin_local(sym_[6].stag, addr(off), kSgeLen, access::kLocalWrite) == StagCheck::kOk, "pin_local");
      r.length += kSgeLen;
    }
    posted_.push_back(r);
  }

  void add_read(int i) {
    Read rd;
    rd.t.internal = i == 0 && s_.internal_first;
    rd.t.size = rd.t.internal ? 0 : kReadSizes[s_.read_sel & 3];
    rd.t.sink_stag = sym_[7].stag;
    rd.t.sink_to = addr(kL.sink + i * kSinkSlot);
    // Two SGEs with a guard gap between them.
    const uint32_t half = rd.t.size / 2;
    rd.sge[0] = LocalSge{at(kL.sink + i * kSinkSlot), half, sym_[7].stag};
    rd.sge[1] = LocalSge{at(kL.sink + i * kSinkSlot + half + kSgeGap), rd.t.size - half, sym_[7].stag};
    std::memset(at(kL.sink + i * kSinkSlot + half), kGuard, kSgeGap);
    for (const LocalSge& g : rd.sge) {
      writable_.push_back({static_cast<size_t>(g.addr - arena_.data()), g.length});
      FUZZ_CHECK(stags_.pin_local(sym_[7].stag, reinterpret_cast<uintptr_t>(g.addr), g.length, access::kLocalWrite) ==
                     StagCheck::kOk,
                 "pin_local (read sink)");
      read_pins_.push_back(sym_[7].stag);
    }
    reads_.push_back(rd);
  }

  // Placement may change only the writable ranges (the writable region, posted receive SGEs, Read sink SGEs);
  // every other byte of the arena (guards, gaps, read-only, no-access and deregistered regions, receives never
  // posted) keeps its initial value.
  void check_memory() {
    std::sort(writable_.begin(), writable_.end());
    size_t pos = 0;
    for (const auto& w : writable_) {
      check_unchanged(pos, w.first);
      pos = std::max(pos, w.first + w.second);
    }
    check_unchanged(pos, kL.total);
  }
  void check_unchanged(size_t from, size_t to) const {
    if (from >= to || std::memcmp(arena_.data() + from, initial_.data() + from, to - from) == 0) return;
    size_t i = from;
    while (arena_[i] == initial_[i]) ++i;
    FUZZ_CHECK(false, "arena byte %zu (%s) written, outside every writable range", i, part_name(i));
  }
  static const char* part_name(size_t off) {
    const size_t parts[] = {kL.rw, kL.ro, kL.noacc, kL.dead, kL.rx, kL.sink, kL.total};
    const char* names[] = {"guard before the writable region", "writable region", "read-only region",
                           "no-access region", "deregistered region", "receive buffers", "Read sinks"};
    int k = 0;
    while (k < 7 && off >= parts[k]) ++k;
    return names[k];
  }

  void no_event_after_fatal(const char* what) const {
    FUZZ_CHECK(!fatal_, "%s reported after the stream already failed", what);
  }
  bool inside(uint64_t a, uint64_t n, size_t off, size_t len) const {
    return range_inside(reinterpret_cast<uintptr_t>(arena_.data() + off), len, a, n);
  }

  // ---- RxEvents ----
  bool rx_take_receive(RecvRequest* out) override {
    no_event_after_fatal("rx_take_receive");
    if (posted_.empty()) return false;
    *out = posted_.front();
    posted_.pop_front();
    return true;
  }
  void rx_receive_done(RecvRequest& r, HRESULT status, uint32_t bytes, bool) override {
    // After a fatal event only the receive being filled may still complete, with an error (stop()).
    FUZZ_CHECK(!fatal_ || status != ND_SUCCESS, "a receive completed successfully after the stream failed");
    FUZZ_CHECK(bytes <= r.length, "receive completed with %u bytes into %llu", bytes,
               static_cast<unsigned long long>(r.length));
    FUZZ_CHECK(status == ND_SUCCESS || status == ND_CANCELED || status == ND_BUFFER_OVERFLOW ||
                   status == ND_INVALID_DEVICE_REQUEST,
               "receive status %08x", static_cast<unsigned>(status));
    VERBOSE("receive %p done: %08x, %u bytes\n", r.context, static_cast<unsigned>(status), bytes);
    release_local_sges(stags_, r.sge, r.nsge);
  }
  bool rx_read_target(RxReadTarget* out) override {
    no_event_after_fatal("rx_read_target");
    if (reads_done_ >= reads_.size()) return false;
    Read& rd = reads_[reads_done_];
    *out = rd.t;
    out->sge = rd.sge;
    out->nsge = 2;
    return true;
  }
  void rx_read_progress(uint32_t bytes) override {
    no_event_after_fatal("rx_read_progress");
    FUZZ_CHECK(reads_done_ < reads_.size(), "Read progress without a Read");
    Read& rd = reads_[reads_done_];
    FUZZ_CHECK(rd.t.internal || rd.t.received + bytes <= rd.t.size, "Read Response beyond the Read's %u bytes",
               rd.t.size);
    rd.t.received += bytes;
  }
  void rx_read_response_done() override {
    no_event_after_fatal("rx_read_response_done");
    FUZZ_CHECK(reads_done_ < reads_.size(), "Read done without a Read");
    const Read& rd = reads_[reads_done_];
    FUZZ_CHECK(rd.t.internal || rd.t.received == rd.t.size, "Read done with %u of %u bytes", rd.t.received,
               rd.t.size);
    VERBOSE("Read %zu done (%u bytes)\n", reads_done_, rd.t.received);
    ++reads_done_;
  }
  bool rx_inbound_read_room(bool rtr) override {
    no_event_after_fatal("rx_inbound_read_room");
    return rtr || inbound_ < 2;
  }
  void rx_inbound_read(uint32_t, uint64_t, uint32_t size, const uint8_t* src, uint32_t pin) override {
    no_event_after_fatal("rx_inbound_read");
    ++inbound_;
    VERBOSE("inbound Read Request of %u bytes\n", size);
    FUZZ_CHECK((size == 0) == (pin == 0), "inbound Read of %u bytes with pin %08x", size, pin);
    if (size == 0) return;
    const uint64_t a = reinterpret_cast<uintptr_t>(src);
    FUZZ_CHECK(inside(a, size, kL.ro, Layout::kRo) || inside(a, size, kL.rw + Layout::kWinOff, Layout::kWinLen),
               "inbound Read source of %u bytes outside every remote-readable region", size);
    inbound_pins_.push_back(pin);
  }
  void rx_rtr_received() override {
    no_event_after_fatal("rx_rtr_received");
    VERBOSE("RTR received\n");
    FUZZ_CHECK(s_.await_rtr && ++rtrs_ == 1, "RTR reported %d times (awaited: %d)", rtrs_, s_.await_rtr);
  }
  void rx_terminate_received(const TerminateInfo&) override {
    no_event_after_fatal("rx_terminate_received");
    VERBOSE("Terminate received\n");
    fatal_ = true;
  }
  void rx_protocol_error(TermCode code, HRESULT recv_status, HRESULT read_status, const uint8_t* ulpdu, size_t avail,
                         uint16_t ulpdu_len) override {
    no_event_after_fatal("rx_protocol_error");
    VERBOSE("protocol error %u/%u/%u (%s)\n", code.layer, code.etype, code.code, term_code_name(code));
    // A malformed Read Response blames the peer for the Read it answers; everything else cancels it.
    FUZZ_CHECK(read_status == ND_CANCELED || (read_status == ND_REMOTE_ERROR && reads_done_ < reads_.size()),
               "Read status %08x with %zu of %zu Reads done", static_cast<unsigned>(read_status), reads_done_,
               reads_.size());
    FUZZ_CHECK(term_code_defined(code), "protocol error with undefined Terminate code %u/%u/%u", code.layer,
               code.etype, code.code);
    uint8_t f[kTerminateFpduMax];
    const size_t n = build_terminate_fpdu(code, ulpdu, avail, ulpdu_len, s_.crc, f);
    const uint16_t ulen = get_be16(f);
    TerminateInfo t;
    FUZZ_CHECK(n == fpdu_size(ulen) && ulen >= kDdpUntaggedHdrSize + kTermCtrlSize &&
                   decode_terminate_body(f + kFpduHdrSend, ulen - kDdpUntaggedHdrSize, &t).ok && t.code == code &&
                   (!s_.crc || fpdu_check_crc(f, ulen)),
               "the Terminate for %u/%u/%u does not decode back", code.layer, code.etype, code.code);
    fatal_ = true;
    stream_->stop(recv_status);  // as the queue pair's failure handling does
  }
  void rx_connection_failed(HRESULT status, bool peer_gone) override {
    no_event_after_fatal("rx_connection_failed");
    VERBOSE("connection failed %08x (peer gone %d)\n", static_cast<unsigned>(status), peer_gone);
    FUZZ_CHECK(peer_gone ? (status == ND_SUCCESS || status == ND_CONNECTION_ABORTED) : status == ND_INSUFFICIENT_RESOURCES,
               "connection failed with %08x (peer gone %d)", static_cast<unsigned>(status), peer_gone);
    fatal_ = true;
    stream_->stop(ND_CANCELED);
  }

  struct Read {
    RxReadTarget t;
    LocalSge sge[2];
  };

  Settings s_;
  Bytes arena_;
  StagTable stags_;
  Sym sym_[8];
  std::deque<RecvRequest> posted_;
  std::vector<Read> reads_;
  size_t reads_done_ = 0;
  std::vector<uint32_t> read_pins_;
  std::vector<uint32_t> inbound_pins_;
  std::vector<std::pair<size_t, size_t>> writable_;  // (offset, length) in the arena
  Bytes initial_;
  int inbound_ = 0;
  int rtrs_ = 0;
  bool fatal_ = false;
  BufSource src_;
  std::unique_ptr<RxStream> stream_;
};

// Byte offset of the first whole FPDU whose CRC trailer is wrong, or the stream's size.
size_t first_bad_crc(const Bytes& b) {
  for (size_t pos = 0; b.size() - pos >= kMpaLenSize;) {
    const uint16_t ulen = get_be16(&b[pos]);
    const size_t whole = fpdu_size(ulen);
    if (b.size() - pos < whole) break;
    if (!fpdu_check_crc(&b[pos], ulen)) return pos;
    pos += whole;
  }
  return b.size();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  fuzz::Input in(data, size);
  const uint8_t b0 = in.byte();
  const uint8_t b1 = in.byte();
  Settings s;
  s.crc = (b0 & 0x01) != 0;
  s.fix_crc = (b0 & 0x02) != 0;
  s.await_rtr = (b0 & 0x04) != 0;
  s.rtr_read = (b0 & 0x08) != 0;
  s.eof = (b0 & 0x10) != 0;
  s.chunk = fuzz::chunk_size(static_cast<uint8_t>(b0 >> 5));
  s.receives = b1 & 7;
  s.reads = (b1 >> 3) & 3;
  s.internal_first = (b1 & 0x20) != 0;
  s.read_sel = static_cast<uint8_t>(b1 >> 6);

  Run a(s);
  const Bytes stream = a.resolve(in.rest(), in.rest_size());
  a.feed(stream);
  a.finish();

  if (!s.crc) return 0;
  // CRC on: an FPDU that fails its CRC places nothing. Its effect on memory must be nil: compare with a run of the
  // stream cut just before it (that run's end is not the peer's: no end of stream).
  const size_t cut = first_bad_crc(stream);
  if (cut == stream.size()) return 0;
  Settings sb = s;
  sb.eof = false;
  Run b(sb);
  const Bytes prefix = b.resolve(in.rest(), in.rest_size());
  b.feed(Bytes(prefix.begin(), prefix.begin() + static_cast<ptrdiff_t>(cut)));
  b.finish();
  FUZZ_CHECK(a.arena() == b.arena(), "an FPDU with a bad CRC (at byte %zu) changed memory", cut);
  return 0;
}

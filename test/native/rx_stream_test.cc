// Receive-stream tests without a socket: hand-built FPDU byte streams (Writes, Sends, Read Requests, Read
// Responses) are fed to RxStream (binding/soft/qp/rx_stream.h) from a byte buffer, whole, split at every byte boundary,
// and one byte per read, with CRC on and off; placement goes through a real StagTable and posted receives of a
// recording RxEvents. Checks placed bytes, completions, queued inbound Reads, and the Terminate code of every
// error (bad CRC, bad STag, out of bounds, missing receive), and that a failing FPDU places nothing.
// Prints "N passed, M failed"; exits non-zero on failure.
#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <deque>
#include <functional>
#include <string>
#include <vector>

#include "soft/wire/crc32c.h"
#include "soft/wire/ddp_rdmap.h"
#include "soft/wire/mpa.h"
#include "check.h"
#include "soft/qp/rx_stream.h"
#include "soft/memory/stag_table.h"
#include "soft/wire/terminate.h"

using namespace netdirect::soft;
using namespace netdirect::soft::wire;

namespace {


using Bytes = std::vector<uint8_t>;

Bytes operator+(Bytes a, const Bytes& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

Bytes pat(size_t n, uint8_t seed = 0x30) {
  Bytes b(n);
  for (size_t i = 0; i < n; ++i) b[i] = static_cast<uint8_t>(seed + i * 7);
  return b;
}

// ---- FPDU building (RFC 5044 §4: length, ULPDU, pad, CRC32c LSB first) ----------------------------------
Bytes tagged(RdmapOpcode op, bool last, uint32_t stag, uint64_t to, const Bytes& payload) {
  DdpHeader h;
  h.opcode = op;
  h.last = last;
  h.stag = stag;
  h.to = to;
  Bytes u(kDdpTaggedHdrSize);
  encode_ddp_header(h, u.data());
  return u + payload;
}

Bytes untagged(RdmapOpcode op, bool last, uint32_t qn, uint32_t msn, uint32_t mo, const Bytes& body) {
  DdpHeader h;
  h.opcode = op;
  h.last = last;
  h.qn = qn;
  h.msn = msn;
  h.mo = mo;
  Bytes u(kDdpUntaggedHdrSize);
  encode_ddp_header(h, u.data());
  return u + body;
}

Bytes read_request(uint32_t msn, uint32_t sink_stag, uint64_t sink_to, uint32_t size, uint32_t src_stag,
                   uint64_t src_to) {
  Bytes body(kRdmapReadReqSize);
  encode_read_request(ReadRequest{sink_stag, sink_to, size, src_stag, src_to}, body.data());
  return untagged(RdmapOpcode::kReadRequest, true, kQnReadRequest, msn, 0, body);
}

Bytes frame(const Bytes& ulpdu, bool crc) {
  Bytes f(2);
  put_be16(f.data(), static_cast<uint16_t>(ulpdu.size()));
  f = f + ulpdu;
  f.resize(f.size() + fpdu_pad(ulpdu.size()), 0);
  uint8_t c[4] = {0, 0, 0, 0};
  if (crc) put_crc_le(c, crc32c(f.data(), f.size()));
  f.insert(f.end(), c, c + 4);
  return f;
}

Bytes bad_crc(Bytes f) {
  f.back() ^= 0x5A;
  return f;
}

// ---- the byte source: a buffer released up to a limit, at most `chunk` bytes per read ----------------------
class BufSource final : public RxSource {
 public:
  Bytes data;
  size_t pos = 0;
  size_t limit = 0;      // bytes readable so far
  size_t chunk = ~size_t{0};
  bool eof = false;      // at the end of data: 0 (end of stream) instead of -EAGAIN
  ptrdiff_t read(void* buf, size_t len) override {
    const size_t n = avail(len);
    if (n == 0) return empty();
    std::memcpy(buf, data.data() + pos, n);
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
      std::memcpy(iov[i].iov_base, data.data() + pos, k);
      pos += k;
      n -= k;
    }
    return static_cast<ptrdiff_t>(total);
  }

 private:
  size_t avail(size_t want) const { return std::min({want, limit - pos, chunk}); }
  ptrdiff_t empty() const { return eof && pos == data.size() ? 0 : -EAGAIN; }
};

// ---- the queue pair stand-in ------------------------------------------------------------------------------
struct Done {
  void* ctx;
  HRESULT status;
  uint32_t bytes;
};
struct InboundRead {
  uint32_t sink_stag;
  uint64_t sink_to;
  uint32_t size;
  const uint8_t* src;
  uint32_t pin;
};

class Events final : public RxEvents {
 public:
  RxStream* stream = nullptr;
  std::deque<RecvRequest> posted;
  std::vector<Done> done;
  bool have_read = false;
  RxReadTarget read;
  int reads_done = 0;
  std::vector<InboundRead> inbound;
  uint32_t ird = 4;
  int rtrs = 0;
  int terminates = 0;
  int errors = 0;
  TermCode code;
  HRESULT read_status = ND_PENDING;  // what the failure blames on the outstanding Read
  int failures = 0;
  HRESULT failure = ND_SUCCESS;

  bool rx_take_receive(RecvRequest* out) override {
    if (posted.empty()) return false;
    *out = posted.front();
    posted.pop_front();
    return true;
  }
  void rx_receive_done(RecvRequest& r, HRESULT status, uint32_t bytes, bool) override {
    done.push_back(Done{r.context, status, bytes});
  }
  bool rx_read_target(RxReadTarget* out) override {
    if (!have_read) return false;
    *out = read;
    return true;
  }
  void rx_read_progress(uint32_t bytes) override { read.received += bytes; }
  void rx_read_response_done() override {
    have_read = false;
    ++reads_done;
  }
  bool rx_inbound_read_room(bool rtr) override { return rtr || inbound.size() < ird; }
  void rx_inbound_read(uint32_t sink_stag, uint64_t sink_to, uint32_t size, const uint8_t* src,
                       uint32_t pin) override {
    inbound.push_back(InboundRead{sink_stag, sink_to, size, src, pin});
  }
  void rx_rtr_received() override { ++rtrs; }
  void rx_terminate_received(const TerminateInfo&) override { ++terminates; }
  void rx_protocol_error(TermCode c, HRESULT recv_status, HRESULT read_st, const uint8_t*, size_t, uint16_t) override {
    ++errors;
    code = c;
    read_status = read_st;
    stream->stop(recv_status);  // as the queue pair's failure handling does
  }
  void rx_connection_failed(HRESULT status, bool) override {
    ++failures;
    failure = status;
    stream->stop(ND_CANCELED);
  }
};

// Memory: a remote-writable region, a remote-readable one and a receive buffer, each with canaries around it.
constexpr size_t kRegion = 96 * 1024;
struct Mem {
  StagTable stags;
  Bytes rw = Bytes(kRegion + 128, 0);
  Bytes ro = Bytes(4096 + 128, 0);
  Bytes rx = Bytes(kRegion + 128, 0);
  uint32_t rw_stag, ro_stag;
  Mem() {
    rw_stag = stags.add_region(addr(rw, 64), kRegion, access::kRemoteWrite | access::kLocalWrite);
    ro_stag = stags.add_region(addr(ro, 64), 4096, access::kRemoteRead);
  }
  static uint64_t addr(Bytes& b, size_t off) { return reinterpret_cast<uintptr_t>(b.data() + off); }
  uint8_t* rwp(size_t off = 0) { return rw.data() + 64 + off; }
  uint8_t* rxp(size_t off = 0) { return rx.data() + 64 + off; }
  // No pin left on either region (removing them succeeds at once).
  bool unpinned() {
    const bool ok = stags.remove_region(rw_stag, nullptr) == ND_SUCCESS && stags.remove_region(ro_stag, nullptr) == ND_SUCCESS;
    rw_stag = ro_stag = 0;
    return ok;
  }
  bool rw_zero() const { return std::all_of(rw.begin(), rw.end(), [](uint8_t b) { return b == 0; }); }
  bool rx_zero() const { return std::all_of(rx.begin(), rx.end(), [](uint8_t b) { return b == 0; }); }
  RecvRequest recv(void* ctx, size_t off, uint32_t len, int nsge = 1) {
    RecvRequest r;
    r.context = ctx;
    r.nsge = static_cast<uint32_t>(nsge);
    r.length = len;
    uint32_t per = len / nsge, pos = 0;
    for (int i = 0; i < nsge; ++i) {
      const uint32_t k = i == nsge - 1 ? len - pos : per;
      r.sge[i] = LocalSge{rxp(off + pos + i * 5), k, 0};  // 5-byte gaps between pieces
      pos += k;
    }
    return r;
  }
};

// Feeds `stream` with `s.data` released at the given split points (then the rest), running progress after each
// release until the stream stops or wants more.
void feed(RxStream& stream, BufSource& s, const std::vector<size_t>& splits) {
  for (size_t lim : splits) {
    s.limit = std::min(lim, s.data.size());
    for (int i = 0; i < 100000 && !stream.stopped() && s.pos < s.limit; ++i) stream.progress(s);
  }
  s.limit = s.data.size();
  for (int i = 0; i < 100000 && !stream.stopped() && s.pos < s.limit; ++i) stream.progress(s);
  stream.progress(s);  // the last FPDU's processing, then -EAGAIN
}

struct Run {
  Mem m;
  Events ev;
  RxStream stream{m.stags, ev};
  BufSource src;
  explicit Run(bool crc) {
    ev.stream = &stream;
    stream.start(crc, false, 0);
  }
};

// Every way of cutting a stream: whole, each single split point, one byte per read.
void each_split(const std::string& name, const Bytes& stream_bytes, bool crc, bool every_point,
                const std::function<void(Run&)>& prepare, const std::function<void(Run&)>& check) {
  std::vector<std::vector<size_t>> plans;
  plans.push_back({});
  const size_t step = every_point ? 1 : std::max<size_t>(1, stream_bytes.size() / 97);
  for (size_t k = 1; k < stream_bytes.size(); k += step) plans.push_back({k});
  for (size_t p = 0; p < plans.size() + 1; ++p) {
    g_test = name + (crc ? " crc" : " nocrc") +
             (p < plans.size() ? (plans[p].empty() ? " whole" : " split@" + std::to_string(plans[p][0]))
                               : " 1 byte per read");
    Run r(crc);
    r.src.data = stream_bytes;
    if (p == plans.size()) r.src.chunk = 1;
    prepare(r);
    feed(r.stream, r.src, p < plans.size() ? plans[p] : std::vector<size_t>{});
    check(r);
    if (g_failed > 40) return;
  }
}

// ---- cases ------------------------------------------------------------------------------------------------
void test_writes(bool crc) {
  const Bytes a = pat(100, 1), b = pat(37, 2);
  // Two Writes (one of them two segments) back to back.
  auto build = [crc, a, b](Run& r) {
    r.src.data = frame(tagged(RdmapOpcode::kWrite, false, r.m.rw_stag, Mem::addr(r.m.rw, 64 + 10), Bytes(a.begin(), a.begin() + 60)), crc) +
                 frame(tagged(RdmapOpcode::kWrite, true, r.m.rw_stag, Mem::addr(r.m.rw, 64 + 70), Bytes(a.begin() + 60, a.end())), crc) +
                 frame(tagged(RdmapOpcode::kWrite, true, r.m.rw_stag, Mem::addr(r.m.rw, 64 + 500), b), crc);
  };
  Run sizer(crc);
  build(sizer);
  each_split("writes", sizer.src.data, crc, true, build, [&](Run& r) {
    CHECK(r.ev.errors == 0 && r.ev.failures == 0 && !r.stream.stopped());
    CHECK(std::memcmp(r.m.rwp(10), a.data(), a.size()) == 0);
    CHECK(std::memcmp(r.m.rwp(500), b.data(), b.size()) == 0);
    CHECK(r.m.rwp(9)[0] == 0 && r.m.rwp(110)[0] == 0 && r.m.rwp(499)[0] == 0 && r.m.rwp(537)[0] == 0);
    CHECK(r.m.unpinned());
  });
}

void test_large_write(bool crc) {
  // One FPDU near the 64 KiB maximum, and a medium one: the stage grows, large payloads take the direct path
  // (CRC off) or the staged one (CRC on).
  const Bytes big = pat(60000, 3), mid = pat(9000, 4);
  auto build = [crc, big, mid](Run& r) {
    r.src.data = frame(tagged(RdmapOpcode::kWrite, true, r.m.rw_stag, Mem::addr(r.m.rw, 64), big), crc) +
                 frame(tagged(RdmapOpcode::kWrite, true, r.m.rw_stag, Mem::addr(r.m.rw, 64 + 70000), mid), crc);
  };
  Run sizer(crc);
  build(sizer);
  each_split("large write", sizer.src.data, crc, false, build, [&](Run& r) {
    CHECK(r.ev.errors == 0 && r.ev.failures == 0);
    CHECK(std::memcmp(r.m.rwp(0), big.data(), big.size()) == 0);
    CHECK(std::memcmp(r.m.rwp(70000), mid.data(), mid.size()) == 0);
  });
}

void test_sends(bool crc) {
  const Bytes a = pat(300, 5), b = pat(1, 6), c = pat(0);
  auto build = [crc, a, b, c](Run& r) {
    r.ev.posted.push_back(r.m.recv(reinterpret_cast<void*>(1), 0, 400, 3));
    r.ev.posted.push_back(r.m.recv(reinterpret_cast<void*>(2), 1000, 16));
    r.ev.posted.push_back(r.m.recv(reinterpret_cast<void*>(3), 2000, 16));
    r.src.data = frame(untagged(RdmapOpcode::kSend, false, kQnSend, 1, 0, Bytes(a.begin(), a.begin() + 100)), crc) +
                 frame(untagged(RdmapOpcode::kSend, true, kQnSend, 1, 100, Bytes(a.begin() + 100, a.end())), crc) +
                 frame(untagged(RdmapOpcode::kSendSe, true, kQnSend, 2, 0, b), crc) +
                 frame(untagged(RdmapOpcode::kSend, true, kQnSend, 3, 0, c), crc);
  };
  Run sizer(crc);
  build(sizer);
  each_split("sends", sizer.src.data, crc, true, build, [&](Run& r) {
    CHECK(r.ev.errors == 0 && r.ev.failures == 0);
    CHECK(r.ev.done.size() == 3);
    if (r.ev.done.size() != 3) return;
    CHECK(r.ev.done[0].ctx == reinterpret_cast<void*>(1) && r.ev.done[0].status == ND_SUCCESS &&
          r.ev.done[0].bytes == 300);
    CHECK(r.ev.done[1].bytes == 1 && r.ev.done[2].bytes == 0);
    // 3 SGEs of 133/133/134 bytes with 5-byte gaps.
    Bytes got;
    got.insert(got.end(), r.m.rxp(0), r.m.rxp(133));
    got.insert(got.end(), r.m.rxp(138), r.m.rxp(138 + 133));
    got.insert(got.end(), r.m.rxp(276), r.m.rxp(276 + 34));
    CHECK(got == a);
    CHECK(r.m.rxp(133)[0] == 0 && r.m.rxp(1000)[0] == b[0]);
  });
}

void test_read_requests(bool crc) {
  auto build = [crc](Run& r) {
    r.src.data = frame(read_request(1, 0x77, 0x1000, 512, r.m.ro_stag, Mem::addr(r.m.ro, 64 + 100)), crc) +
                 frame(read_request(2, 0x78, 0x2000, 0, 0x12345, 0), crc);  // zero-length: no STag check
  };
  Run sizer(crc);
  build(sizer);
  each_split("read requests", sizer.src.data, crc, true, build, [&](Run& r) {
    CHECK(r.ev.errors == 0 && r.ev.failures == 0);
    CHECK(r.ev.inbound.size() == 2);
    if (r.ev.inbound.size() != 2) return;
    const InboundRead& a = r.ev.inbound[0];
    CHECK(a.sink_stag == 0x77 && a.sink_to == 0x1000 && a.size == 512 && a.src == r.m.ro.data() + 64 + 100 &&
          a.pin == r.m.ro_stag);
    CHECK(r.ev.inbound[1].size == 0 && r.ev.inbound[1].pin == 0);
    r.m.stags.unpin(a.pin);
  });
}

void test_read_response(bool crc) {
  const Bytes data = pat(3000, 8);
  auto build = [crc, data](Run& r) {
    static LocalSge sink[2];
    sink[0] = LocalSge{r.m.rxp(0), 1000, 0};
    sink[1] = LocalSge{r.m.rxp(2000), 2000, 0};
    r.ev.have_read = true;
    r.ev.read = RxReadTarget{false, 3000, 0, 0x55, 0x9000, sink, 2};
    r.src.data = frame(tagged(RdmapOpcode::kReadResponse, false, 0x55, 0x9000, Bytes(data.begin(), data.begin() + 1500)), crc) +
                 frame(tagged(RdmapOpcode::kReadResponse, true, 0x55, 0x9000 + 1500, Bytes(data.begin() + 1500, data.end())), crc);
  };
  Run sizer(crc);
  build(sizer);
  each_split("read response", sizer.src.data, crc, false, build, [&](Run& r) {
    CHECK(r.ev.errors == 0 && r.ev.failures == 0 && r.ev.reads_done == 1);
    CHECK(std::memcmp(r.m.rxp(0), data.data(), 1000) == 0);
    CHECK(std::memcmp(r.m.rxp(2000), data.data() + 1000, 2000) == 0);
    CHECK(r.m.rxp(1000)[0] == 0);
  });
}

// A stream that must fail: the Terminate code, nothing placed into `rw` beyond `placed_ok` bytes at its start.
void expect_error(const std::string& name, bool crc, bool every_point, const std::function<Bytes(Run&)>& bytes,
                  TermCode want, size_t placed_ok = 0, int recvs = 0) {
  Run sizer(crc);
  each_split(name, bytes(sizer), crc, every_point,
             [&](Run& r) {
               for (int i = 0; i < recvs; ++i) r.ev.posted.push_back(r.m.recv(nullptr, i * 256, 256));
               r.src.data = bytes(r);
             },
             [&](Run& r) {
               CHECK(r.ev.errors == 1 && r.stream.stopped());
               if (r.ev.errors == 1 && !(r.ev.code == want)) {
                 std::printf("  [%s] Terminate %s, want %s\n", g_test.c_str(), term_code_name(r.ev.code),
                             term_code_name(want));
               }
               CHECK(r.ev.code == want);
               bool untouched = true;
               for (size_t i = 64 + placed_ok; i < r.m.rw.size(); ++i) untouched = untouched && r.m.rw[i] == 0;
               CHECK(untouched);
               CHECK(r.m.unpinned());  // nothing left pinned
             });
}

void test_errors(bool crc) {
  if (crc) {
    expect_error("bad crc write", crc, true,
                 [](Run& r) { return bad_crc(frame(tagged(RdmapOpcode::kWrite, true, r.m.rw_stag, Mem::addr(r.m.rw, 64), pat(64)), true)); },
                 term_code(LlpErr::kCrcError));
    expect_error("bad crc large write", crc, false,
                 [](Run& r) { return bad_crc(frame(tagged(RdmapOpcode::kWrite, true, r.m.rw_stag, Mem::addr(r.m.rw, 64), pat(50000)), true)); },
                 term_code(LlpErr::kCrcError));
    expect_error("good write then bad crc write", crc, true,
                 [](Run& r) {
                   return frame(tagged(RdmapOpcode::kWrite, true, r.m.rw_stag, Mem::addr(r.m.rw, 64), pat(32)), true) +
                          bad_crc(frame(tagged(RdmapOpcode::kWrite, true, r.m.rw_stag, Mem::addr(r.m.rw, 64 + 32), pat(32)), true));
                 },
                 term_code(LlpErr::kCrcError), 32);
    expect_error("bad crc read request", crc, true,
                 [](Run& r) { return bad_crc(frame(read_request(1, 5, 0, 8, r.m.ro_stag, Mem::addr(r.m.ro, 64)), true)); },
                 term_code(LlpErr::kCrcError));
    expect_error("bad crc send", crc, true, [](Run&) { return bad_crc(frame(untagged(RdmapOpcode::kSend, true, kQnSend, 1, 0, pat(20)), true)); },
                 term_code(LlpErr::kCrcError), 0, 1);
  }
  expect_error("write bad stag", crc, true,
               [crc](Run& r) { return frame(tagged(RdmapOpcode::kWrite, true, r.m.rw_stag ^ 0x10u, Mem::addr(r.m.rw, 64), pat(64)), crc); },
               term_code(DdpTaggedErr::kInvalidStag));
  expect_error("write past the end", crc, true,
               [crc](Run& r) { return frame(tagged(RdmapOpcode::kWrite, true, r.m.rw_stag, Mem::addr(r.m.rw, 64 + kRegion - 63), pat(64)), crc); },
               term_code(DdpTaggedErr::kBaseBounds));
  expect_error("write to read-only region", crc, true,
               [crc](Run& r) { return frame(tagged(RdmapOpcode::kWrite, true, r.m.ro_stag, Mem::addr(r.m.ro, 64), pat(8)), crc); },
               term_code(DdpTaggedErr::kInvalidStag));
  expect_error("read request bad source stag", crc, true,
               [crc](Run& r) { return frame(read_request(1, 5, 0, 8, r.m.ro_stag ^ 0x10u, Mem::addr(r.m.ro, 64)), crc); },
               term_code(RdmapEtype::kRemoteProtection, RdmapErr::kInvalidStag));
  expect_error("read request out of bounds", crc, true,
               [crc](Run& r) { return frame(read_request(1, 5, 0, 4097, r.m.ro_stag, Mem::addr(r.m.ro, 64)), crc); },
               term_code(RdmapEtype::kRemoteProtection, RdmapErr::kBaseBounds));
  expect_error("send without receive", crc, true,
               [crc](Run&) { return frame(untagged(RdmapOpcode::kSend, true, kQnSend, 1, 0, pat(8)), crc); },
               term_code(DdpUntaggedErr::kNoBuffer));
  expect_error("send too long", crc, true,
               [crc](Run&) { return frame(untagged(RdmapOpcode::kSend, true, kQnSend, 1, 0, pat(300)), crc); },
               term_code(DdpUntaggedErr::kMessageTooLong), 0, 1);
  expect_error("read response without read", crc, true,
               [crc](Run&) { return frame(tagged(RdmapOpcode::kReadResponse, true, 5, 0, pat(8)), crc); },
               term_code(DdpCatastrophicErr::kLocalCatastrophic));
}

// A malformed Read Response fails the Read it answers with ND_REMOTE_ERROR (the peer broke the protocol), not
// ND_CANCELED; other errors leave the Read ND_CANCELED.
void test_read_response_errors(bool crc) {
  struct Case {
    const char* name;
    std::function<Bytes(Run&)> bytes;
    TermCode code;
  };
  auto sink = [](Run& r) { return Mem::addr(r.m.rx, 64); };
  const std::vector<Case> cases = {
      {"read response wrong sink stag",
       [crc, sink](Run& r) { return frame(tagged(RdmapOpcode::kReadResponse, true, 0x56, sink(r), pat(64)), crc); },
       term_code(DdpTaggedErr::kInvalidStag)},
      {"read response beyond the sink",
       [crc, sink](Run& r) { return frame(tagged(RdmapOpcode::kReadResponse, true, 0x55, sink(r) + 8, pat(56)), crc); },
       term_code(DdpTaggedErr::kBaseBounds)},
      {"read response too long",
       [crc, sink](Run& r) { return frame(tagged(RdmapOpcode::kReadResponse, true, 0x55, sink(r), pat(65)), crc); },
       term_code(DdpTaggedErr::kBaseBounds)},
      {"read response short with last",
       [crc, sink](Run& r) { return frame(tagged(RdmapOpcode::kReadResponse, true, 0x55, sink(r), pat(63)), crc); },
       term_code(DdpTaggedErr::kBaseBounds)},
  };
  for (const Case& c : cases) {
    Run sizer(crc);
    each_split(c.name, c.bytes(sizer), crc, false,
               [&](Run& r) {
                 static LocalSge sge;
                 sge = LocalSge{r.m.rxp(0), 64, 0};
                 r.ev.have_read = true;
                 r.ev.read = RxReadTarget{false, 64, 0, 0x55, sink(r), &sge, 1};
                 r.src.data = c.bytes(r);
               },
               [&](Run& r) {
                 CHECK(r.ev.errors == 1 && r.stream.stopped());
                 CHECK(r.ev.code == c.code);
                 CHECK_ST(r.ev.read_status, ND_REMOTE_ERROR);
                 CHECK(r.ev.reads_done == 0);
               });
  }
  g_test = std::string("write error leaves the read cancelled") + (crc ? " crc" : " nocrc");
  Run r(crc);
  r.ev.have_read = true;
  r.src.data = frame(tagged(RdmapOpcode::kWrite, true, r.m.rw_stag ^ 0x10u, Mem::addr(r.m.rw, 64), pat(8)), crc);
  feed(r.stream, r.src, {});
  CHECK(r.ev.errors == 1);
  CHECK_ST(r.ev.read_status, ND_CANCELED);
}

// An FPDU whose ULPDU is shorter than any DDP header, with nothing behind it: a framing error at once (RFC 5044 §4,
// RFC 5041 §7), not a wait for the 16 header bytes that will never come.
void test_short_ulpdu_then_silence(bool crc) {
  for (uint16_t len : {0, 1, 4, 13}) {
    Bytes f = frame(Bytes(len, 0x41), crc);
    for (size_t cut : {size_t{2}, f.size()}) {
      g_test = "ulpdu length " + std::to_string(len) + " then silence, " + std::to_string(cut) + " bytes" +
               (crc ? " crc" : " nocrc");
      Run r(crc);
      r.src.data = Bytes(f.begin(), f.begin() + static_cast<ptrdiff_t>(cut));
      feed(r.stream, r.src, {});
      CHECK(r.ev.errors == 1 && r.stream.stopped());
      CHECK(r.ev.code == term_code(LlpErr::kMarkerLengthMismatch));
      CHECK(r.m.rw_zero() && r.m.rx_zero());
    }
  }
  g_test = std::string("ulpdu length 14 waits for the rest") + (crc ? " crc" : " nocrc");
  Run r(crc);
  r.src.data = frame(tagged(RdmapOpcode::kWrite, true, r.m.rw_stag, Mem::addr(r.m.rw, 64), {}), crc);
  r.src.data.resize(8);
  feed(r.stream, r.src, {});
  CHECK(r.ev.errors == 0 && r.ev.failures == 0 && !r.stream.stopped());
}

void test_end_of_stream() {
  g_test = "end of stream mid-FPDU";
  Run r(true);
  r.src.data = frame(tagged(RdmapOpcode::kWrite, true, r.m.rw_stag, Mem::addr(r.m.rw, 64), pat(64)), true);
  r.src.data.resize(40);
  r.src.eof = true;
  feed(r.stream, r.src, {});
  CHECK(r.ev.failures == 1 && r.ev.failure == ND_CONNECTION_ABORTED && r.stream.stopped());
  CHECK(r.m.rw_zero());
  CHECK(r.m.unpinned());
}

}  // namespace

int main() {
  for (bool crc : {true, false}) {
    test_writes(crc);
    test_large_write(crc);
    test_sends(crc);
    test_read_requests(crc);
    test_read_response(crc);
    test_errors(crc);
    test_read_response_errors(crc);
    test_short_ulpdu_then_silence(crc);
  }
  test_end_of_stream();
  return finish();
}

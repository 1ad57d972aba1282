// Robustness tests of the software provider against a hostile or broken peer: a raw TCP socket on loopback
// speaks just enough MPA to get through connection setup with a real listener/connector + SoftQueuePair
// (through the provider's COM interfaces only), then sends malformed MPA frames and FPDUs.
//
// For every case: no crash, no hang (every wait is bounded), every outstanding request of the local QP
// completes (ND_CANCELED or the status the error calls for), the connection is closed, a Terminate the
// provider sends decodes with our own decoder to the RFC code docs/iwarp.md §3.4 names, and registered
// memory outside what a legitimate Write could touch is unchanged (canary bytes).
// Ends with a seeded random mutation loop over a valid captured stream.
// Same host (docs/shm.md): the hostile also offers shared-memory rings on the listener's side channel, sends its
// FPDUs through them, and scribbles over them (indices out of range, random bytes everywhere, lengths that lie);
// a process of another uid (the test forks one when it runs as root) cannot attach.
//
// Prints "N passed, M failed"; exits non-zero on failure.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <linux/capability.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <functional>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "check.h"
#include "nd/nd2.h"
#include "nd/netdirect_ext.h"
#include "soft/adapter.h"
#include "soft/wire/crc32c.h"
#include "soft/wire/ddp_rdmap.h"
#include "soft/wire/mpa.h"
#include "soft/provider.h"
#include "soft/shm/link.h"
#include "soft/wire/terminate.h"

using namespace netdirect::soft;
using namespace netdirect::soft::wire;

namespace {

bool g_quiet = false;  // mutation loop: no per-failure detail lines (check.h caps the FAIL lines)


using Clock = std::chrono::steady_clock;
using Bytes = std::vector<uint8_t>;

// ---- environment ---------------------------------------------------------------------------------------
struct Ov {
  OVERLAPPED ov{};
  Ov() { ov.hEvent = CreateEventW(nullptr, FALSE, FALSE, nullptr); }
  ~Ov() { CloseHandle(ov.hEvent); }
};

HRESULT wait_ov(IND2Overlapped* obj, Ov& o, int ms) {
  const auto until = Clock::now() + std::chrono::milliseconds(ms);
  for (;;) {
    HRESULT hr = obj->GetOverlappedResult(&o.ov, FALSE);
    if (hr != ND_PENDING) return hr;
    if (Clock::now() >= until) return ND_PENDING;
    WaitForSingleObject(o.ov.hEvent, 5);
  }
}

sockaddr_in loopback(uint16_t port) {
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(port);
  return a;
}

IND2Adapter* g_adapter = nullptr;
HANDLE g_file = nullptr;
IND2Listener* g_listener = nullptr;
uint16_t g_port = 0;

// Memory: canary | rw region (remote read+write) | canary | local region (receives, Read sink) | canary |
// ro region (remote read only) | canary. Everything lives in one allocation so canaries are adjacent.
constexpr size_t kCanary = 256;
constexpr size_t kRwSize = 4096;
constexpr size_t kLocSize = 2048;
constexpr size_t kRoSize = 1024;
constexpr size_t kRwOff = kCanary;
constexpr size_t kLocOff = kRwOff + kRwSize + kCanary;
constexpr size_t kRoOff = kLocOff + kLocSize + kCanary;
constexpr size_t kTotal = kRoOff + kRoSize + kCanary;
constexpr size_t kRecvLen = 256;           // each posted receive
constexpr size_t kRecvOff = 0;             // receives at loc + 0, +256, +512, +768
constexpr int kMaxRecvs = 4;
constexpr size_t kSinkOff = 1024;          // app Read sink inside loc
constexpr size_t kSinkLen = 64;
constexpr size_t kSrcOff = 1536;           // app Write/Send source inside loc

struct Mem {
  Bytes buf = Bytes(kTotal);
  IND2MemoryRegion* rw = nullptr;
  IND2MemoryRegion* loc = nullptr;
  IND2MemoryRegion* ro = nullptr;
  uint8_t* p(size_t off) { return buf.data() + off; }
  uint64_t addr(size_t off) { return reinterpret_cast<uintptr_t>(buf.data() + off); }
  void pattern() {
    std::mt19937 r(7);
    for (auto& b : buf) b = static_cast<uint8_t>(r());
  }
};
Mem* g_mem = nullptr;
Bytes* g_hidden = nullptr;  // a remote-writable region never advertised to any peer (test_stag_guessing)
constexpr int kHandshakeTimeoutMs = 1500;  // NETDIRECT_HANDSHAKE_TIMEOUT_MS for this process

IND2MemoryRegion* reg_at(void* at, size_t len, ULONG flags) {
  void* p = nullptr;
  CHECK_ST(g_adapter->CreateMemoryRegion(IID_IND2MemoryRegion, g_file, &p), ND_SUCCESS);
  auto* mr = static_cast<IND2MemoryRegion*>(p);
  Ov o;
  HRESULT hr = mr->Register(at, len, flags, &o.ov);
  if (hr == ND_PENDING) hr = wait_ov(mr, o, 2000);
  CHECK_ST(hr, ND_SUCCESS);
  return mr;
}

IND2MemoryRegion* reg(size_t off, size_t len, ULONG flags) { return reg_at(g_mem->p(off), len, flags); }

void dereg(IND2MemoryRegion* mr) {
  Ov o;
  HRESULT hr = mr->Deregister(&o.ov);
  if (hr == ND_PENDING) hr = wait_ov(mr, o, 3000);
  CHECK_ST(hr, ND_SUCCESS);
  mr->Release();
}

// ---- wire building -----------------------------------------------------------------------------------
Bytes tagged(RdmapOpcode op, bool last, uint32_t stag, uint64_t to, const Bytes& payload = {}) {
  DdpHeader h;
  h.opcode = op;
  h.last = last;
  h.stag = stag;
  h.to = to;
  Bytes u(kDdpTaggedHdrSize);
  encode_ddp_header(h, u.data());
  u.insert(u.end(), payload.begin(), payload.end());
  return u;
}

Bytes untagged(RdmapOpcode op, bool last, uint32_t qn, uint32_t msn, uint32_t mo, const Bytes& body = {},
               uint32_t rsvd = 0) {
  DdpHeader h;
  h.opcode = op;
  h.last = last;
  h.qn = qn;
  h.msn = msn;
  h.mo = mo;
  h.rsvd_ulp = rsvd;
  Bytes u(kDdpUntaggedHdrSize);
  encode_ddp_header(h, u.data());
  u.insert(u.end(), body.begin(), body.end());
  return u;
}

Bytes send_u(uint32_t msn, const Bytes& data, uint32_t mo = 0, bool last = true) {
  return untagged(RdmapOpcode::kSend, last, kQnSend, msn, mo, data);
}

Bytes rreq_u(uint32_t msn, uint32_t sink_stag, uint64_t sink_to, uint32_t size, uint32_t src_stag, uint64_t src_to,
             uint32_t qn = kQnReadRequest) {
  Bytes body(kRdmapReadReqSize);
  encode_read_request(ReadRequest{sink_stag, sink_to, size, src_stag, src_to}, body.data());
  return untagged(RdmapOpcode::kReadRequest, true, qn, msn, 0, body);
}

// One FPDU around a ULPDU: length field (len_field, default the real size), pad, CRC (or zeros).
Bytes frame(const Bytes& ulpdu, bool crc, int len_field = -1) {
  Bytes f(2);
  put_be16(f.data(), static_cast<uint16_t>(len_field < 0 ? ulpdu.size() : static_cast<size_t>(len_field)));
  f.insert(f.end(), ulpdu.begin(), ulpdu.end());
  f.resize(f.size() + fpdu_pad(ulpdu.size()), 0);
  uint8_t c[4] = {0, 0, 0, 0};
  if (crc) put_crc_le(c, crc32c(f.data(), f.size()));
  f.insert(f.end(), c, c + 4);
  return f;
}

Bytes bytes_of(const char* s) { return Bytes(s, s + std::strlen(s)); }
Bytes operator+(Bytes a, const Bytes& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

Bytes mpa_request(bool crc, bool p2p, uint16_t ird, uint16_t ord) {
  MpaFrame f;
  f.kind = MpaFrameKind::kRequest;
  f.crc = crc;
  f.rev = kMpaRev2;
  f.enhanced = true;
  f.v2 = true;
  f.params.ird = ird;
  f.params.ord = ord;
  f.params.p2p = p2p;
  f.params.rtr = p2p ? kRtrWrite : 0;
  Bytes out(64);
  out.resize(mpa_encode(f, out.data(), out.size()));
  return out;
}

// ---- raw socket helpers ------------------------------------------------------------------------------
int tcp_connect(uint16_t port) {
  int s = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a = loopback(port);
  if (::connect(s, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    ::close(s);
    return -1;
  }
  int one = 1;
  ::setsockopt(s, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  return s;
}

bool send_all(int fd, const Bytes& b, bool slow = false) {
  size_t off = 0;
  while (off < b.size()) {
    const size_t n = slow ? 1 : b.size() - off;
    const ssize_t r = ::send(fd, b.data() + off, n, MSG_NOSIGNAL);
    if (r <= 0) return false;
    off += static_cast<size_t>(r);
    if (slow) std::this_thread::sleep_for(std::chrono::microseconds(150));
  }
  return true;
}

// Reads exactly n bytes (bounded wait). False on EOF/error/timeout.
bool recv_exact(int fd, uint8_t* out, size_t n, int ms) {
  const auto until = Clock::now() + std::chrono::milliseconds(ms);
  size_t got = 0;
  while (got < n) {
    const int left = static_cast<int>(std::chrono::duration_cast<std::chrono::milliseconds>(until - Clock::now()).count());
    if (left <= 0) return false;
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, left) <= 0) return false;
    const ssize_t r = ::recv(fd, out + got, n - got, 0);
    if (r <= 0) return false;
    got += static_cast<size_t>(r);
  }
  return true;
}

// Appends everything the peer sends until EOF/reset (true) or the deadline (false).
bool recv_until_eof(int fd, Bytes* out, int ms) {
  const auto until = Clock::now() + std::chrono::milliseconds(ms);
  uint8_t buf[4096];
  for (;;) {
    const int left = static_cast<int>(std::chrono::duration_cast<std::chrono::milliseconds>(until - Clock::now()).count());
    if (left <= 0) return false;
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, left) <= 0) return false;
    const ssize_t r = ::recv(fd, buf, sizeof buf, 0);
    if (r == 0) return true;
    if (r < 0) return errno == ECONNRESET || errno == EPIPE;
    out->insert(out->end(), buf, buf + r);
  }
}

// ---- parsing what the provider sent --------------------------------------------------------------------
struct Fpdu {
  DdpHeader h;
  Bytes ulpdu;
};
struct Parsed {
  std::vector<Fpdu> fpdus;
  bool framing_ok = true;   // every FPDU complete, CRC right, header decodes
  int terminates = 0;
  bool term_decodes = true;
  TermCode term;
  bool term_d = false;      // the Terminate carries the offending DDP header
  bool term_last = true;    // the Terminate is the last FPDU
};

Parsed parse_stream(const Bytes& s, bool crc) {
  Parsed p;
  size_t off = 0;
  while (off < s.size()) {
    if (s.size() - off < 2) {
      p.framing_ok = false;
      break;
    }
    const uint16_t len = get_be16(s.data() + off);
    const size_t total = fpdu_size(len);
    if (s.size() - off < total) {
      p.framing_ok = false;
      break;
    }
    if (crc && !fpdu_check_crc(s.data() + off, len)) p.framing_ok = false;
    Fpdu f;
    f.ulpdu.assign(s.begin() + static_cast<ptrdiff_t>(off) + 2, s.begin() + static_cast<ptrdiff_t>(off) + 2 + len);
    if (!decode_ddp_header(f.ulpdu.data(), f.ulpdu.size(), &f.h, true).ok) p.framing_ok = false;
    if (f.h.opcode == RdmapOpcode::kTerminate && f.ulpdu.size() >= kDdpUntaggedHdrSize) {
      ++p.terminates;
      TerminateInfo t;
      DecodeStatus st = decode_terminate_body(f.ulpdu.data() + kDdpUntaggedHdrSize,
                                              f.ulpdu.size() - kDdpUntaggedHdrSize, &t);
      if (!st.ok || st.consumed != f.ulpdu.size() - kDdpUntaggedHdrSize || t.code.layer > 2 ||
          f.h.qn != kQnTerminate || f.h.msn != kMsnFirst || !f.h.last) {
        p.term_decodes = false;
      }
      p.term = t.code;
      p.term_d = t.d && t.m && t.ddp_hdr != nullptr;
    } else if (p.terminates > 0) {
      p.term_last = false;
    }
    p.fpdus.push_back(std::move(f));
    off += total;
  }
  return p;
}

// ---- the victim: listener side -----------------------------------------------------------------------
template <typename T>
T* as(void* p) {
  return static_cast<T*>(p);
}

constexpr uintptr_t kCtxRead = 0x100, kCtxWrite = 0x200, kCtxSend = 0x300, kCtxBind = 0x500, kCtxRecv = 0x400;
constexpr uint32_t kRemoteFakeStag = 0x00ABCD77;  // the hostile peer's "buffers" for our Read / Write
constexpr uint64_t kRemoteReadTo = 0x1000;
constexpr uint64_t kRemoteWriteTo = 0x2000;

uint32_t rw_token() { return g_mem->rw->GetRemoteToken(); }
uint32_t ro_token() { return g_mem->ro->GetRemoteToken(); }
uint32_t loc_token() { return g_mem->loc->GetLocalToken(); }
uint64_t rw_base() { return g_mem->addr(kRwOff); }

struct Posts {
  bool read = true, write = true, send = true;
  int recvs = 2;
  ULONG ird = 4, ord = 4;     // application read limits on Accept
  bool p2p = false;
  Bytes rtr;                  // P2P: custom RTR bytes (then Accept is expected to fail, nothing is posted)
  bool slow_setup = false;    // the Request 1 byte at a time
  bool crc = true;            // the hostile asks for CRC (the provider asks by default anyway)
  bool shm = false;           // the hostile offers shared-memory rings and speaks through them (docs/shm.md)
};

struct Conn {
  IND2CompletionQueue* cq = nullptr;
  IND2QueuePair* qp = nullptr;
  IND2Connector* conn = nullptr;
  Ov req, acc, notify;
  int fd = -1;
  bool crc = false;
  int outstanding = 0;
  Bytes rx;       // bytes from the provider after the MPA Reply
  Bytes snap;     // memory before the hostile bytes
  HRESULT accept_status = ND_PENDING;
  std::unique_ptr<shm::Link> link;  // same host: the rings the victim agreed to (nullptr: TCP)
};

// Same host: everything the hostile sends goes into the ring (waiting while it is full, bounded).
bool link_send_all(shm::Link& l, const Bytes& b) {
  size_t off = 0;
  const auto until = Clock::now() + std::chrono::milliseconds(3000);
  while (off < b.size()) {
    iovec v{const_cast<uint8_t*>(b.data()) + off, b.size() - off};
    const ptrdiff_t n = l.send_iov(&v, 1);
    if (n > 0) {
      off += static_cast<size_t>(n);
    } else if (n != -EAGAIN || Clock::now() >= until) {
      return false;
    } else {
      std::this_thread::sleep_for(std::chrono::microseconds(100));
    }
  }
  return true;
}

bool hostile_send(Conn& c, const Bytes& b, bool slow = false) {
  return c.link ? link_send_all(*c.link, b) : send_all(c.fd, b, slow);
}

// Same host: what the victim puts in our ring until it closes the TCP connection (true) or the deadline.
bool link_recv_until_eof(Conn& c, Bytes* out, int ms) {
  const auto until = Clock::now() + std::chrono::milliseconds(ms);
  uint8_t buf[4096];
  for (;;) {
    for (;;) {
      const ptrdiff_t n = c.link->recv(buf, sizeof buf);
      if (n <= 0) break;
      out->insert(out->end(), buf, buf + n);
    }
    const int left = static_cast<int>(std::chrono::duration_cast<std::chrono::milliseconds>(until - Clock::now()).count());
    if (left <= 0) return false;
    pollfd p{c.fd, POLLIN, 0};
    if (::poll(&p, 1, std::min(left, 5)) <= 0) continue;
    const ssize_t r = ::recv(c.fd, buf, sizeof buf, 0);
    if (r > 0) return false;  // the victim sent bytes on the socket of a same-host connection
    for (;;) {  // what it placed before it closed
      const ptrdiff_t n = c.link->recv(buf, sizeof buf);
      if (n <= 0) break;
      out->insert(out->end(), buf, buf + n);
    }
    return r == 0 || errno == ECONNRESET || errno == EPIPE;
  }
}

bool post_recvs(Conn& c, int n) {
  for (int i = 0; i < n; ++i) {
    ND2_SGE sge{g_mem->p(kLocOff + kRecvOff + i * kRecvLen), static_cast<ULONG>(kRecvLen), loc_token()};
    HRESULT hr = c.qp->Receive(reinterpret_cast<void*>(kCtxRecv + i), &sge, 1);
    CHECK_ST(hr, ND_SUCCESS);
    if (hr != ND_SUCCESS) return false;
    ++c.outstanding;
  }
  return true;
}

// Builds the victim, lets the hostile socket connect and finish MPA, posts the application's requests.
bool setup(Conn& c, const Posts& po) {
  void* p = nullptr;
  CHECK_ST(g_adapter->CreateCompletionQueue(IID_IND2CompletionQueue, g_file, 64, 0, 0, &p), ND_SUCCESS);
  c.cq = as<IND2CompletionQueue>(p);
  CHECK_ST(g_adapter->CreateQueuePair(IID_IND2QueuePair, c.cq, c.cq, reinterpret_cast<void*>(0x9), 8, 8, 2, 2, 0, &p),
           ND_SUCCESS);
  c.qp = as<IND2QueuePair>(p);
  CHECK_ST(g_adapter->CreateConnector(IID_IND2Connector, g_file, &p), ND_SUCCESS);
  c.conn = as<IND2Connector>(p);
  if (!c.cq || !c.qp || !c.conn) return false;
  if (!post_recvs(c, po.recvs)) return false;
  CHECK_ST(g_listener->GetConnectionRequest(c.conn, &c.req.ov), ND_PENDING);
  c.fd = tcp_connect(g_port);
  CHECK(c.fd >= 0);
  if (c.fd < 0) return false;
  std::unique_ptr<shm::Handshake> hs;
  if (po.shm) {
    hs = shm::Handshake::offer(c.fd);  // before the Request, as an initiator of ours does
    CHECK(hs != nullptr);
    if (!hs) return false;
  }
  const Bytes req = mpa_request(po.crc, po.p2p, 4, 4);
  CHECK(send_all(c.fd, req, po.slow_setup));
  HRESULT hr = wait_ov(g_listener, c.req, 3000);
  CHECK_ST(hr, ND_SUCCESS);
  if (hr != ND_SUCCESS) return false;
  CHECK_ST(c.conn->Accept(c.qp, po.ird, po.ord, nullptr, 0, &c.acc.ov), ND_PENDING);
  uint8_t rep[kMpaMaxFrameRecv];
  bool ok = recv_exact(c.fd, rep, kMpaHeaderSize, 3000);
  CHECK(ok);
  if (!ok) return false;
  const size_t pd = get_be16(rep + kMpaPdLenOffset);
  ok = pd <= kMpaMaxPrivateDataRecv && recv_exact(c.fd, rep + kMpaHeaderSize, pd, 3000);
  CHECK(ok);
  if (!ok) return false;
  MpaFrame f;
  size_t used = 0;
  MpaError err;
  CHECK(mpa_parse(rep, kMpaHeaderSize + pd, MpaFrameKind::kReply, &f, &used, &err) == MpaParseStatus::kOk);
  CHECK(!f.reject && f.v2 && f.params.p2p == po.p2p);
  c.crc = po.crc || f.crc;
  if (hs) {
    c.link = hs->finish();  // the victim answered before its Reply
    CHECK(c.link != nullptr);
    if (!c.link) return false;
    c.crc = false;  // same host: no CRC (docs/shm.md)
  }
  if (po.p2p) {
    if (!po.rtr.empty()) {
      CHECK(hostile_send(c, po.rtr));
      c.accept_status = wait_ov(c.conn, c.acc, 3000);
      return true;
    }
    CHECK(f.params.rtr == kRtrWrite);
    CHECK(hostile_send(c, frame(tagged(RdmapOpcode::kWrite, true, 1, 0), c.crc)));
  }
  c.accept_status = wait_ov(c.conn, c.acc, 3000);
  CHECK_ST(c.accept_status, ND_SUCCESS);
  if (c.accept_status != ND_SUCCESS) return false;
  CHECK_ST(c.conn->NotifyDisconnect(&c.notify.ov), ND_PENDING);
  if (po.read) {
    ND2_SGE sge{g_mem->p(kLocOff + kSinkOff), static_cast<ULONG>(kSinkLen), loc_token()};
    CHECK_ST(c.qp->Read(reinterpret_cast<void*>(kCtxRead), &sge, 1, kRemoteReadTo, kRemoteFakeStag, 0), ND_SUCCESS);
    ++c.outstanding;
  }
  if (po.write) {
    ND2_SGE sge{g_mem->p(kLocOff + kSrcOff), 32, loc_token()};
    CHECK_ST(c.qp->Write(reinterpret_cast<void*>(kCtxWrite), &sge, 1, kRemoteWriteTo, kRemoteFakeStag, 0),
             ND_SUCCESS);
    ++c.outstanding;
  }
  if (po.send) {
    ND2_SGE sge{g_mem->p(kLocOff + kSrcOff), 16, loc_token()};
    CHECK_ST(c.qp->Send(reinterpret_cast<void*>(kCtxSend), &sge, 1, 0), ND_SUCCESS);
    ++c.outstanding;
  }
  return true;
}

struct Range {
  size_t off, len;
};

struct Expect {
  bool term = false;          // the provider must send exactly this Terminate
  TermCode code;
  bool no_term = false;       // the provider must not send a Terminate
  bool local_error = true;    // the provider found the error: every send-queue request completes ND_CANCELED
  HRESULT recv_alt = ND_CANCELED;  // allowed status of the receive being filled
  int recv_success = 0;       // receives that legitimately complete ND_SUCCESS (at most)
  HRESULT write_status = ND_PENDING;  // if set: the app Write must complete with this (Terminate naming it)
  HRESULT read_status = ND_PENDING;   // if set: the app Read must complete with this (a malformed Read Response)
  bool shutdown_after = false;     // the hostile half-closes after sending
  bool slow = false;               // the hostile bytes go out 1 byte at a time
  std::vector<Range> allowed;      // memory a legitimate Write could touch (absolute buffer offsets)
};

bool valid_for(ND2_REQUEST_TYPE t, HRESULT s) {
  // docs/nd2.md §3.5.
  switch (s) {
    case ND_SUCCESS: case ND_CANCELED: case ND_INVALID_DEVICE_REQUEST: case ND_INTERNAL_ERROR: return true;
    case ND_DATA_OVERRUN: return t == Nd2RequestTypeSend || t == Nd2RequestTypeRead || t == Nd2RequestTypeWrite;
    case ND_BUFFER_OVERFLOW: return t == Nd2RequestTypeReceive;
    case ND_ACCESS_VIOLATION: case ND_IO_TIMEOUT: case ND_REMOTE_ERROR:
      return t != Nd2RequestTypeBind && t != Nd2RequestTypeInvalidate;
    default: return false;
  }
}

// Collects n completions (bounded) and checks them.
void check_completions(Conn& c, const Expect& e) {
  std::vector<ND2_RESULT> got;
  const auto until = Clock::now() + std::chrono::milliseconds(3000);
  while (static_cast<int>(got.size()) < c.outstanding && Clock::now() < until) {
    ND2_RESULT r[16];
    const ULONG n = c.cq->GetResults(r, 16);
    got.insert(got.end(), r, r + n);
    if (n == 0) std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  CHECK(static_cast<int>(got.size()) == c.outstanding);
  std::this_thread::sleep_for(std::chrono::milliseconds(1));
  ND2_RESULT extra[4];
  CHECK(c.cq->GetResults(extra, 4) == 0);  // nothing completes twice
  int recv_ok = 0, recv_alt = 0;
  for (const ND2_RESULT& r : got) {
    CHECK(valid_for(r.RequestType, r.Status));
    const uintptr_t ctx = reinterpret_cast<uintptr_t>(r.RequestContext);
    if (r.RequestType == Nd2RequestTypeReceive) {
      if (r.Status == ND_SUCCESS) {
        ++recv_ok;
      } else if (r.Status != ND_CANCELED) {
        ++recv_alt;
        CHECK_ST(r.Status, e.recv_alt);
      }
      CHECK(r.Status != ND_SUCCESS || r.BytesTransferred <= kRecvLen);
      continue;
    }
    if (ctx == kCtxRead) CHECK(r.Status != ND_SUCCESS);  // the hostile never answered it
    if (ctx == kCtxBind) continue;
    if (ctx == kCtxRead && e.read_status != ND_PENDING) {
      CHECK_ST(r.Status, e.read_status);
    } else if (ctx == kCtxWrite && e.write_status != ND_PENDING) {
      CHECK_ST(r.Status, e.write_status);
    } else if (e.local_error) {
      CHECK_ST(r.Status, ND_CANCELED);
    }
  }
  CHECK(recv_ok <= e.recv_success);
  CHECK(recv_alt <= 1);
}

void check_memory(Conn& c, const Expect& e) {
  std::vector<bool> ok(kTotal, false);
  auto allow = [&](size_t off, size_t len) {
    for (size_t i = off; i < off + len && i < kTotal; ++i) ok[i] = true;
  };
  allow(kLocOff + kRecvOff, kMaxRecvs * kRecvLen);
  allow(kLocOff + kSinkOff, kSinkLen);
  for (const Range& r : e.allowed) allow(r.off, r.len);
  size_t bad = 0, first = 0;
  for (size_t i = 0; i < kTotal; ++i) {
    if (!ok[i] && g_mem->buf[i] != c.snap[i]) {
      if (bad++ == 0) first = i;
    }
  }
  CHECK(bad == 0);
  if (bad != 0 && !g_quiet) std::printf("  %zu bytes changed outside the allowed ranges, first at %zu\n", bad, first);
}

void teardown(Conn& c) {
  if (c.fd >= 0) ::close(c.fd);
  c.fd = -1;
  c.link.reset();
  if (c.conn) c.conn->Release();
  if (c.qp) c.qp->Release();
  if (c.cq) c.cq->Release();
  c.conn = nullptr;
  c.qp = nullptr;
  c.cq = nullptr;
}

// Sends the hostile bytes, then checks everything the case promises.
void finish(Conn& c, const Bytes& junk, const Expect& e) {
  if (!junk.empty()) hostile_send(c, junk, e.slow);
  if (e.shutdown_after) ::shutdown(c.fd, SHUT_WR);
  const bool closed = c.link ? link_recv_until_eof(c, &c.rx, 4000) : recv_until_eof(c.fd, &c.rx, 4000);
  CHECK(closed);  // the provider closed the connection (no hang)
  ::close(c.fd);
  c.fd = -1;
  CHECK_ST(wait_ov(c.conn, c.notify, 3000), ND_SUCCESS);
  check_completions(c, e);
  // The QP is dead: a later request is accepted and completes ND_CANCELED at once (docs/nd2.md §3.6).
  ND2_SGE sge{g_mem->p(kLocOff + kSrcOff), 4, loc_token()};
  CHECK_ST(c.qp->Send(reinterpret_cast<void*>(0x5EAD), &sge, 1, 0), ND_SUCCESS);
  ND2_RESULT late{};
  CHECK(c.cq->GetResults(&late, 1) == 1 && late.Status == ND_CANCELED &&
        late.RequestContext == reinterpret_cast<void*>(0x5EAD));
  const Parsed p = parse_stream(c.rx, c.crc);
  CHECK(p.framing_ok);
  CHECK(p.term_decodes);
  CHECK(p.term_last);
  CHECK(p.terminates <= 1);
  if (e.term) {
    CHECK(p.terminates == 1);
    if (p.terminates == 1 && p.term != e.code && !g_quiet) {
      std::printf("  Terminate %u/%u/0x%02x (%s), want %u/%u/0x%02x (%s)\n", p.term.layer, p.term.etype, p.term.code,
                  term_code_name(p.term), e.code.layer, e.code.etype, e.code.code, term_code_name(e.code));
    }
    CHECK(p.term == e.code);
    // DDP errors (except version errors) copy the offending DDP header, as siw does (docs/iwarp.md §3.3).
    const bool version = (e.code.etype == 1 && e.code.code == 4) || (e.code.etype == 2 && e.code.code == 6);
    if (p.terminates == 1 && e.code.layer == 1 && e.code.etype != 0 && !version) CHECK(p.term_d);
  }
  if (e.no_term) {
    CHECK(p.terminates == 0);
    if (p.terminates != 0 && !g_quiet) {
      std::printf("  unexpected Terminate %u/%u/0x%02x (%s)\n", p.term.layer, p.term.etype, p.term.code,
                  term_code_name(p.term));
    }
  }
  check_memory(c, e);
}

void run(const std::string& name, const Posts& po, const std::function<Bytes(Conn&)>& junk, const Expect& e) {
  g_test = name;
  g_mem->pattern();
  Conn c;
  if (setup(c, po)) {
    c.snap = g_mem->buf;
    finish(c, junk(c), e);
  } else {
    std::printf("  [%s] setup failed\n", name.c_str());
  }
  teardown(c);
}

// Shorthands for expected Terminate codes.
Expect term(TermCode code) {
  Expect e;
  e.term = true;
  e.code = code;
  return e;
}
TermCode llp(LlpErr c) { return term_code(c); }
TermCode ddp_t(DdpTaggedErr c) { return term_code(c); }
TermCode ddp_u(DdpUntaggedErr c) { return term_code(c); }
TermCode rdmap(RdmapEtype e, RdmapErr c) { return term_code(e, c); }
const TermCode kBadOpcode = term_code(RdmapEtype::kRemoteOperation, RdmapErr::kUnexpectedOpcode);

Bytes pat(size_t n, uint8_t seed = 0x30) {
  Bytes b(n);
  for (size_t i = 0; i < n; ++i) b[i] = static_cast<uint8_t>(seed + i);
  return b;
}

// ---- cases: malformed FPDUs against the responder's QP ---------------------------------------------
void test_framing() {
  Posts po;
  // ULPDU Length 0 (then more bytes so a whole header is there).
  run("ulpdu len 0", po, [](Conn& c) { return frame({}, c.crc) + frame(send_u(1, pat(8)), c.crc); },
      term(llp(LlpErr::kMarkerLengthMismatch)));
  // ULPDU Length 0 and nothing behind it: answered at once, not by waiting for a DDP header that never comes.
  run("ulpdu len 0 then silence", po, [](Conn& c) { return frame({}, c.crc); },
      term(llp(LlpErr::kMarkerLengthMismatch)));
  run("ulpdu len 5 then silence", po, [](Conn& c) { return frame(pat(5), c.crc); },
      term(llp(LlpErr::kMarkerLengthMismatch)));
  run("ulpdu len < tagged header", po,
      [](Conn& c) { return frame(tagged(RdmapOpcode::kWrite, true, rw_token(), rw_base(), pat(8)), c.crc, 10); },
      term(llp(LlpErr::kMarkerLengthMismatch)));
  run("ulpdu len < untagged header", po,
      [](Conn& c) { return frame(send_u(1, pat(8)), c.crc, 12) + pat(16); }, term(llp(LlpErr::kMarkerLengthMismatch)));
  run("ulpdu len 1", po, [](Conn& c) { return frame(send_u(1, pat(8)), c.crc, 1); },
      term(llp(LlpErr::kMarkerLengthMismatch)));
  {
    Expect e = term(ddp_u(DdpUntaggedErr::kMessageTooLong));
    e.recv_alt = ND_BUFFER_OVERFLOW;
    run("ulpdu len 0xFFFF send", po, [](Conn& c) { return frame(send_u(1, pat(200)), c.crc, 0xFFFF); }, e);
  }
  run("ulpdu len 0xFFFF write", po,
      [](Conn& c) { return frame(tagged(RdmapOpcode::kWrite, true, rw_token(), rw_base(), pat(64)), c.crc, 0xFFFF); },
      term(ddp_t(DdpTaggedErr::kBaseBounds)));
  run("ulpdu len 0xFFFF read request", po,
      [](Conn& c) { return frame(rreq_u(1, 5, 0, 8, rw_token(), rw_base()), c.crc, 0xFFFF); },
      term(llp(LlpErr::kMarkerLengthMismatch)));
  run("ulpdu len 0xFFFF terminate", po,
      [](Conn& c) { return frame(untagged(RdmapOpcode::kTerminate, true, kQnTerminate, 1, 0, pat(4)), c.crc, 0xFFFF); },
      term(llp(LlpErr::kMarkerLengthMismatch)));
  run("read request ulpdu short", po,
      [](Conn& c) {
        Bytes u = rreq_u(1, 5, 0, 8, rw_token(), rw_base());
        u.resize(kDdpUntaggedHdrSize + 20);
        return frame(u, c.crc);
      },
      term(llp(LlpErr::kMarkerLengthMismatch)));
  run("read request with payload", po,
      [](Conn& c) { return frame(rreq_u(1, 5, 0, 8, rw_token(), rw_base()) + pat(4), c.crc); }, term(kBadOpcode));
  run("terminate ulpdu 17", po,
      [](Conn& c) {
        Bytes u = untagged(RdmapOpcode::kTerminate, true, kQnTerminate, 1, 0);
        u.resize(17);
        return frame(u, c.crc) + pat(16);
      },
      term(llp(LlpErr::kMarkerLengthMismatch)));
}

void test_versions_opcodes_qn() {
  Posts po;
  run("ddp version tagged", po,
      [](Conn& c) {
        Bytes u = tagged(RdmapOpcode::kWrite, true, rw_token(), rw_base(), pat(8));
        u[0] = static_cast<uint8_t>((u[0] & ~kDdpVersionMask) | 2);
        return frame(u, c.crc);
      },
      term(ddp_t(DdpTaggedErr::kInvalidVersion)));
  run("ddp version untagged send", po,
      [](Conn& c) {
        Bytes u = send_u(1, pat(8));
        u[0] &= static_cast<uint8_t>(~kDdpVersionMask);
        return frame(u, c.crc);
      },
      term(ddp_u(DdpUntaggedErr::kInvalidVersion)));
  run("ddp version read request", po,
      [](Conn& c) {
        Bytes u = rreq_u(1, 5, 0, 8, rw_token(), rw_base());
        u[0] |= 3;
        return frame(u, c.crc);
      },
      term(ddp_u(DdpUntaggedErr::kInvalidVersion)));
  for (uint8_t rv : {0, 2, 3}) {
    run("rdmap version " + std::to_string(rv), po,
        [rv](Conn& c) {
          Bytes u = send_u(1, pat(8));
          u[1] = static_cast<uint8_t>((u[1] & ~kRdmapVersionMask) | (rv << kRdmapVersionShift));
          return frame(u, c.crc);
        },
        term(rdmap(RdmapEtype::kRemoteOperation, RdmapErr::kInvalidVersion)));
  }
  for (uint8_t op = 8; op <= 15; ++op) {
    for (bool tag : {false, true}) {
      run("reserved opcode " + std::to_string(op) + (tag ? " tagged" : " untagged"), po,
          [op, tag](Conn& c) {
            Bytes u = tag ? tagged(RdmapOpcode::kWrite, true, rw_token(), rw_base(), pat(8)) : send_u(1, pat(8));
            u[1] = static_cast<uint8_t>((u[1] & ~kRdmapOpcodeMask) | op);
            return frame(u, c.crc);
          },
          term(kBadOpcode));
    }
  }
  run("tagged send", po,
      [](Conn& c) {
        Bytes u = tagged(RdmapOpcode::kWrite, true, rw_token(), rw_base(), pat(8));
        u[1] = static_cast<uint8_t>((u[1] & ~kRdmapOpcodeMask) | 3);
        return frame(u, c.crc);
      },
      term(kBadOpcode));
  run("untagged write", po,
      [](Conn& c) {
        Bytes u = send_u(1, pat(8));
        u[1] = static_cast<uint8_t>(u[1] & ~kRdmapOpcodeMask);
        return frame(u, c.crc);
      },
      term(kBadOpcode));
  for (uint32_t qn : {1u, 2u, 3u, 0xFFFFFFFFu}) {
    run("send qn " + std::to_string(qn), po,
        [qn](Conn& c) { return frame(untagged(RdmapOpcode::kSend, true, qn, 1, 0, pat(8)), c.crc); },
        term(ddp_u(DdpUntaggedErr::kInvalidQn)));
  }
  run("read request qn 0", po, [](Conn& c) { return frame(rreq_u(1, 5, 0, 8, rw_token(), rw_base(), 0), c.crc); },
      term(ddp_u(DdpUntaggedErr::kInvalidQn)));
  run("terminate qn 0", po,
      [](Conn& c) { return frame(untagged(RdmapOpcode::kTerminate, true, 0, 1, 0, pat(4)), c.crc); },
      term(ddp_u(DdpUntaggedErr::kInvalidQn)));
}

void test_msn_mo() {
  Posts po;
  run("send msn 2 first", po, [](Conn& c) { return frame(send_u(2, pat(8)), c.crc); },
      term(ddp_u(DdpUntaggedErr::kMsnRange)));
  run("send msn 0", po, [](Conn& c) { return frame(send_u(0, pat(8)), c.crc); }, term(ddp_u(DdpUntaggedErr::kMsnRange)));
  {
    Expect e = term(ddp_u(DdpUntaggedErr::kMsnRange));
    e.recv_success = 1;
    run("send msn jump", po, [](Conn& c) { return frame(send_u(1, pat(8)), c.crc) + frame(send_u(3, pat(8)), c.crc); },
        e);
    run("send msn repeat", po,
        [](Conn& c) { return frame(send_u(1, pat(8)), c.crc) + frame(send_u(1, pat(8)), c.crc); }, e);
  }
  run("send msn 0xFFFFFFFF", po, [](Conn& c) { return frame(send_u(0xFFFFFFFF, pat(8)), c.crc); },
      term(ddp_u(DdpUntaggedErr::kMsnRange)));
  run("read request msn 7", po, [](Conn& c) { return frame(rreq_u(7, 5, 0, 8, rw_token(), rw_base()), c.crc); },
      term(ddp_u(DdpUntaggedErr::kMsnRange)));
  run("read request msn 0", po, [](Conn& c) { return frame(rreq_u(0, 5, 0, 8, rw_token(), rw_base()), c.crc); },
      term(ddp_u(DdpUntaggedErr::kMsnRange)));
  run("send mo 4 first", po, [](Conn& c) { return frame(send_u(1, pat(8), 4), c.crc); },
      term(ddp_u(DdpUntaggedErr::kInvalidMo)));
  run("send mo gap", po,
      [](Conn& c) { return frame(send_u(1, pat(8), 0, false), c.crc) + frame(send_u(1, pat(8), 12), c.crc); },
      term(ddp_u(DdpUntaggedErr::kInvalidMo)));
  run("send mo overlap", po,
      [](Conn& c) { return frame(send_u(1, pat(8), 0, false), c.crc) + frame(send_u(1, pat(8), 0), c.crc); },
      term(ddp_u(DdpUntaggedErr::kInvalidMo)));
  run("send mo 0xFFFFFFF8", po,
      [](Conn& c) { return frame(send_u(1, pat(8), 0, false), c.crc) + frame(send_u(1, pat(8), 0xFFFFFFF8u), c.crc); },
      term(ddp_u(DdpUntaggedErr::kInvalidMo)));
  run("send msn changes mid-message", po,
      [](Conn& c) { return frame(send_u(1, pat(8), 0, false), c.crc) + frame(send_u(2, pat(8), 8), c.crc); },
      term(ddp_u(DdpUntaggedErr::kMsnRange)));
  {
    Expect e = term(ddp_u(DdpUntaggedErr::kMessageTooLong));
    e.recv_alt = ND_BUFFER_OVERFLOW;
    run("send longer than receive", po, [](Conn& c) { return frame(send_u(1, pat(kRecvLen + 4)), c.crc); }, e);
    run("send grows past receive", po,
        [](Conn& c) {
          return frame(send_u(1, pat(200), 0, false), c.crc) + frame(send_u(1, pat(200), 200), c.crc);
        },
        e);
  }
  Posts none = po;
  none.recvs = 0;
  run("send without receive", none, [](Conn& c) { return frame(send_u(1, pat(8)), c.crc); },
      term(ddp_u(DdpUntaggedErr::kNoBuffer)));
}

void test_tagged_writes() {
  Posts po;
  const TermCode stag = ddp_t(DdpTaggedErr::kInvalidStag);
  const TermCode bounds = ddp_t(DdpTaggedErr::kBaseBounds);
  struct W {
    const char* name;
    std::function<uint32_t()> stag;
    std::function<uint64_t()> to;
    size_t len;
    TermCode code;
  };
  const std::vector<W> ws = {
      {"write random stag", [] { return 0xDEADBEEFu; }, [] { return rw_base(); }, 8, stag},
      {"write stag 0", [] { return 0u; }, [] { return rw_base(); }, 8, stag},
      {"write stag 1", [] { return 1u; }, [] { return rw_base(); }, 8, stag},
      {"write forged key", [] { return rw_token() ^ 1u; }, [] { return rw_base(); }, 8, stag},
      {"write forged index", [] { return rw_token() + (1u << 12); }, [] { return rw_base(); }, 8, stag},
      {"write local-only region", [] { return loc_token(); }, [] { return g_mem->addr(kLocOff + kSrcOff); }, 8, stag},
      {"write read-only region", [] { return ro_token(); }, [] { return g_mem->addr(kRoOff); }, 8, stag},
      {"write past end", [] { return rw_token(); }, [] { return rw_base() + kRwSize - 4; }, 8, bounds},
      {"write before base", [] { return rw_token(); }, [] { return rw_base() - 1; }, 8, bounds},
      {"write to wrap", [] { return rw_token(); }, [] { return 0xFFFFFFFFFFFFFFF8ull; }, 16, bounds},
      {"write to max", [] { return rw_token(); }, [] { return ~0ull; }, 1, bounds},
      {"write into canary via rw stag", [] { return rw_token(); }, [] { return g_mem->addr(kRwOff + kRwSize); }, 4,
       bounds},
  };
  for (const W& w : ws) {
    run(w.name, po, [&w](Conn& c) { return frame(tagged(RdmapOpcode::kWrite, true, w.stag(), w.to(), pat(w.len)), c.crc); },
        term(w.code));
  }
  {
    Expect e = term(stag);
    e.allowed.push_back(Range{kRwOff, 8});
    run("write stag changes mid-message", po,
        [](Conn& c) {
          return frame(tagged(RdmapOpcode::kWrite, false, rw_token(), rw_base(), pat(8)), c.crc) +
                 frame(tagged(RdmapOpcode::kWrite, true, ro_token(), g_mem->addr(kRoOff), pat(8)), c.crc);
        },
        e);
    e.code = bounds;
    run("write to gap mid-message", po,
        [](Conn& c) {
          return frame(tagged(RdmapOpcode::kWrite, false, rw_token(), rw_base(), pat(8)), c.crc) +
                 frame(tagged(RdmapOpcode::kWrite, true, rw_token(), rw_base() + 16, pat(8)), c.crc);
        },
        e);
  }
}

void test_read_requests() {
  Posts po;
  const TermCode prot_stag = rdmap(RdmapEtype::kRemoteProtection, RdmapErr::kInvalidStag);
  const TermCode prot_bounds = rdmap(RdmapEtype::kRemoteProtection, RdmapErr::kBaseBounds);
  const TermCode prot_access = rdmap(RdmapEtype::kRemoteProtection, RdmapErr::kAccessRights);
  run("read request size 0xFFFFFFFF", po,
      [](Conn& c) { return frame(rreq_u(1, 5, 0, 0xFFFFFFFFu, rw_token(), rw_base()), c.crc); }, term(prot_bounds));
  run("read request one past end", po,
      [](Conn& c) { return frame(rreq_u(1, 5, 0, kRwSize + 1, rw_token(), rw_base()), c.crc); }, term(prot_bounds));
  run("read request to wrap", po,
      [](Conn& c) { return frame(rreq_u(1, 5, 0, 0x200, rw_token(), 0xFFFFFFFFFFFFFF00ull), c.crc); },
      term(prot_bounds));
  run("read request forged source", po,
      [](Conn& c) { return frame(rreq_u(1, 5, 0, 8, rw_token() ^ 0x10u, rw_base()), c.crc); }, term(prot_stag));
  run("read request source stag 0", po, [](Conn& c) { return frame(rreq_u(1, 5, 0, 8, 0, rw_base()), c.crc); },
      term(prot_stag));
  run("read request no remote read", po,
      [](Conn& c) { return frame(rreq_u(1, 5, 0, 8, loc_token(), g_mem->addr(kLocOff)), c.crc); }, term(prot_access));
  {
    Posts one = po;
    one.ird = 1;
    run("read requests beyond IRD", one,
        [](Conn& c) {
          return frame(rreq_u(1, 5, 0, 8, rw_token(), rw_base()), c.crc) +
                 frame(rreq_u(2, 5, 8, 8, rw_token(), rw_base()), c.crc);
        },
        term(rdmap(RdmapEtype::kRemoteOperation, RdmapErr::kCatastrophicStream)));
    Posts zero = po;
    zero.ird = 0;
    run("read request with IRD 0", zero,
        [](Conn& c) { return frame(rreq_u(1, 5, 0, 8, rw_token(), rw_base()), c.crc); },
        term(rdmap(RdmapEtype::kRemoteOperation, RdmapErr::kCatastrophicStream)));
  }
}

void test_read_responses() {
  Posts idle;
  idle.read = idle.write = idle.send = false;
  run("read response unsolicited", idle,
      [](Conn& c) { return frame(tagged(RdmapOpcode::kReadResponse, true, 5, 0, pat(8)), c.crc); },
      term(term_code(DdpCatastrophicErr::kLocalCatastrophic)));
  run("read response zero-length unsolicited", idle,
      [](Conn& c) { return frame(tagged(RdmapOpcode::kReadResponse, true, 5, 0), c.crc); },
      term(term_code(DdpCatastrophicErr::kLocalCatastrophic)));
  Posts po;  // the app Read is the oldest outstanding Read
  // A malformed response to it fails it with ND_REMOTE_ERROR (the peer broke the protocol), not ND_CANCELED.
  auto bad = [](TermCode code) {
    Expect e = term(code);
    e.read_status = ND_REMOTE_ERROR;
    return e;
  };
  run("read response wrong stag", po,
      [](Conn& c) {
        return frame(tagged(RdmapOpcode::kReadResponse, true, 0xBADBAD00u, g_mem->addr(kLocOff + kSinkOff), pat(64)),
                     c.crc);
      },
      bad(ddp_t(DdpTaggedErr::kInvalidStag)));
  run("read response wrong to", po,
      [](Conn& c) {
        return frame(tagged(RdmapOpcode::kReadResponse, true, loc_token(), g_mem->addr(kLocOff + kSinkOff) + 4, pat(60)),
                     c.crc);
      },
      bad(ddp_t(DdpTaggedErr::kBaseBounds)));
  run("read response too long", po,
      [](Conn& c) {
        return frame(tagged(RdmapOpcode::kReadResponse, true, loc_token(), g_mem->addr(kLocOff + kSinkOff), pat(128)),
                     c.crc);
      },
      bad(ddp_t(DdpTaggedErr::kBaseBounds)));
  run("read response short last", po,
      [](Conn& c) {
        return frame(tagged(RdmapOpcode::kReadResponse, true, loc_token(), g_mem->addr(kLocOff + kSinkOff), pat(32)),
                     c.crc);
      },
      bad(ddp_t(DdpTaggedErr::kBaseBounds)));
  run("read response zero-length for a sized read", po,
      [](Conn& c) { return frame(tagged(RdmapOpcode::kReadResponse, true, 0x12345600u, 0), c.crc); },
      bad(ddp_t(DdpTaggedErr::kInvalidStag)));
  run("read response second too many", po,
      [](Conn& c) {
        const uint64_t to = g_mem->addr(kLocOff + kSinkOff);
        return frame(tagged(RdmapOpcode::kReadResponse, false, loc_token(), to, pat(32)), c.crc) +
               frame(tagged(RdmapOpcode::kReadResponse, true, loc_token(), to + 32, pat(64)), c.crc);
      },
      bad(ddp_t(DdpTaggedErr::kBaseBounds)));
}

void test_terminates_received() {
  Posts po;
  for (uint8_t layer = 0; layer <= 3; ++layer) {
    for (uint8_t etype = 0; etype <= 3; ++etype) {
      for (int body = 0; body < 4; ++body) {
        Expect e;
        e.no_term = true;
        e.local_error = false;
        if (body == 1 && ((layer == 1 && etype == 1) || (layer == 0 && etype == 1))) e.write_status = ND_ACCESS_VIOLATION;
        run("terminate " + std::to_string(layer) + "/" + std::to_string(etype) + " body " + std::to_string(body), po,
            [layer, etype, body](Conn& c) {
              Bytes b(4);
              put_be32(b.data(), term_control_word(TermCode{layer, etype, 0x01}, body == 1, body >= 1, false));
              if (body == 1) {  // names our Write: M + D + its DDP header
                Bytes seg(2);
                put_be16(seg.data(), 14 + 32);
                b = b + seg + tagged(RdmapOpcode::kWrite, true, kRemoteFakeStag, kRemoteWriteTo);
              } else if (body == 2) {  // D set but the header is cut short
                b = b + Bytes{0, 30, 0xC1};
              } else if (body == 3) {  // R with garbage
                put_be32(b.data(), term_control_word(TermCode{layer, etype, 0xFF}, true, true, true));
                b = b + Bytes{0, 64} + send_u(9, {}) + pat(28);
              }
              return frame(untagged(RdmapOpcode::kTerminate, true, kQnTerminate, 1, 0, b), c.crc);
            },
            e);
      }
    }
  }
  Expect e;
  e.no_term = true;
  e.local_error = false;
  // Too short for the control word: a framing error (the provider answers with its own Terminate).
  run("terminate empty body", po,
      [](Conn& c) { return frame(untagged(RdmapOpcode::kTerminate, true, kQnTerminate, 1, 0), c.crc) + pat(8); },
      term(llp(LlpErr::kMarkerLengthMismatch)));
  run("terminate wrong msn and mo", po,
      [](Conn& c) { return frame(untagged(RdmapOpcode::kTerminate, true, kQnTerminate, 77, 99, pat(4, 0x10)), c.crc); },
      e);
}

// A peer rejects a large Write on its first FPDU with a Terminate and closes at once, with the rest of the Write
// unread, so the close is a reset (the ND SDK's NdWriteViolation client does this with a 4 MiB Write to a window
// without remote write). The Write must complete ND_ACCESS_VIOLATION: the reset fails the provider's next send
// while the Terminate still waits in its socket, and what the peer sent before resetting decides the statuses
// (#16.4; before, every request completed ND_CANCELED). Several rounds: the provider may also read the Terminate
// before it tries to send again, which passed before too.
void test_terminate_then_reset() {
  Posts po;
  po.read = po.write = po.send = false;
  po.recvs = 1;
  constexpr size_t kBig = size_t{32} << 20;  // far more than both socket buffers hold
  Bytes big(kBig, 0x5A);
  IND2MemoryRegion* mr = reg_at(big.data(), big.size(), ND_MR_FLAG_ALLOW_LOCAL_WRITE);
  for (int round = 0; round < 20; ++round) {
    g_test = "terminate then reset, round " + std::to_string(round);
    g_mem->pattern();
    Conn c;
    if (!setup(c, po)) {
      teardown(c);
      continue;
    }
    ND2_SGE sge{big.data(), static_cast<ULONG>(kBig), mr->GetLocalToken()};
    CHECK_ST(c.qp->Write(reinterpret_cast<void*>(kCtxWrite), &sge, 1, kRemoteWriteTo, kRemoteFakeStag, 0),
             ND_SUCCESS);
    // The Write's first FPDU header, then let the provider fill both socket buffers (it waits to write).
    uint8_t head[2 + kDdpTaggedHdrSize];
    CHECK(recv_exact(c.fd, head, sizeof head, 3000));
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    Bytes b(4);
    put_be32(b.data(), term_control_word(term_code(DdpTaggedErr::kInvalidStag), true, true, false));
    Bytes seg(2);
    put_be16(seg.data(), 14 + 32);
    b = b + seg + tagged(RdmapOpcode::kWrite, false, kRemoteFakeStag, kRemoteWriteTo);
    CHECK(send_all(c.fd, frame(untagged(RdmapOpcode::kTerminate, true, kQnTerminate, 1, 0, b), c.crc)));
    linger lg{1, 0};
    ::setsockopt(c.fd, SOL_SOCKET, SO_LINGER, &lg, sizeof lg);
    ::close(c.fd);
    c.fd = -1;
    ND2_RESULT r[4];
    int got = 0;
    HRESULT write_status = ND_PENDING, recv_status = ND_PENDING;
    const auto until = Clock::now() + std::chrono::seconds(5);
    while (got < 2 && Clock::now() < until) {
      const ULONG n = c.cq->GetResults(r, 4);
      for (ULONG i = 0; i < n; ++i, ++got) {
        if (r[i].RequestContext == reinterpret_cast<void*>(kCtxWrite)) write_status = r[i].Status;
        if (r[i].RequestContext == reinterpret_cast<void*>(kCtxRecv)) recv_status = r[i].Status;
      }
      if (n == 0) std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    CHECK_ST(write_status, ND_ACCESS_VIOLATION);
    CHECK_ST(recv_status, ND_CANCELED);
    CHECK_ST(wait_ov(c.conn, c.notify, 3000), ND_SUCCESS);
    teardown(c);
  }
  dereg(mr);
}

// A peer that takes the application's Write (and the confirmation Read behind it) but never answers the Read: the
// Write completes ND_IO_TIMEOUT once the response deadline passes, the provider Terminates and closes
// (docs/nd2.md §3.6). The same for an application Read left unanswered. The deadline is shortened for the test
// through NETDIRECT_SOFT_RESPONSE_TIMEOUT_MS (read at each connection).
void test_unanswered_reads() {
  setenv("NETDIRECT_SOFT_RESPONSE_TIMEOUT_MS", "300", 1);
  for (bool with_read : {false, true}) {
    g_test = with_read ? "unanswered read" : "unanswered confirmation read";
    g_mem->pattern();
    Posts po;
    po.read = with_read;
    po.send = false;
    Conn c;
    const auto t0 = Clock::now();
    if (setup(c, po)) {
      c.snap = g_mem->buf;
      Expect e;
      e.term = true;
      e.code = TermCode{0, 0, 0};  // RDMAP local catastrophic error
      // The oldest request is the one that timed out; the rest are cancelled.
      if (with_read) e.read_status = ND_IO_TIMEOUT;
      else e.write_status = ND_IO_TIMEOUT;
      finish(c, {}, e);
      const double waited = std::chrono::duration<double>(Clock::now() - t0).count();
      CHECK(waited > 0.25 && waited < 3.5);
      // The Write (and a Read Request behind it) did reach the peer before the wait began.
      const Parsed p = parse_stream(c.rx, c.crc);
      bool write_seen = false, rreq_seen = false;
      for (const Fpdu& f : p.fpdus) {
        write_seen = write_seen || f.h.opcode == RdmapOpcode::kWrite;
        rreq_seen = rreq_seen || f.h.opcode == RdmapOpcode::kReadRequest;
      }
      CHECK(write_seen && rreq_seen);
    } else {
      std::printf("  [%s] setup failed\n", g_test.c_str());
    }
    teardown(c);
  }
  unsetenv("NETDIRECT_SOFT_RESPONSE_TIMEOUT_MS");
}

void test_send_invalidate() {
  Posts po;
  const TermCode cannot = rdmap(RdmapEtype::kRemoteOperation, RdmapErr::kStagCannotInvalidate);
  for (int which = 0; which < 4; ++which) {
    Expect e = term(cannot);
    e.recv_alt = ND_INVALID_DEVICE_REQUEST;
    e.recv_success = 0;
    static const char* names[] = {"send-inv region stag", "send-inv random stag", "send-inv stag 0",
                                  "send-se-inv local region"};
    run(names[which], po,
        [which](Conn& c) {
          const uint32_t s = which == 0 ? rw_token() : which == 1 ? 0x31337000u : which == 2 ? 0u : loc_token();
          const RdmapOpcode op = which == 3 ? RdmapOpcode::kSendSeInvalidate : RdmapOpcode::kSendInvalidate;
          return frame(untagged(op, true, kQnSend, 1, 0, pat(8), s), c.crc);
        },
        e);
  }
  // A legitimately bound window: invalidated by the peer, then unusable.
  {
    g_test = "send-inv own window then write through it";
    g_mem->pattern();
    Posts idle;
    idle.read = idle.write = idle.send = false;
    Conn c;
    if (setup(c, idle)) {
      void* p = nullptr;
      CHECK_ST(g_adapter->CreateMemoryWindow(IID_IND2MemoryWindow, &p), ND_SUCCESS);
      auto* mw = as<IND2MemoryWindow>(p);
      CHECK_ST(c.qp->Bind(reinterpret_cast<void*>(kCtxBind), g_mem->rw, mw, g_mem->p(kRwOff + 512), 256,
                          ND_OP_FLAG_ALLOW_WRITE | ND_OP_FLAG_ALLOW_READ),
               ND_SUCCESS);
      ++c.outstanding;
      const uint32_t wt = mw->GetRemoteToken();
      c.snap = g_mem->buf;
      Expect e = term(ddp_t(DdpTaggedErr::kInvalidStag));
      e.recv_success = 1;
      e.allowed.push_back(Range{kRwOff + 512, 8});  // only if the window were still valid (it is not)
      finish(c,
             frame(untagged(RdmapOpcode::kSendInvalidate, true, kQnSend, 1, 0, pat(8), wt), c.crc) +
                 frame(tagged(RdmapOpcode::kWrite, true, wt, g_mem->addr(kRwOff + 512), pat(8)), c.crc),
             e);
      CHECK(std::memcmp(g_mem->p(kRwOff + 512), c.snap.data() + kRwOff + 512, 8) == 0);
      mw->Release();
    }
    teardown(c);
  }
}

void test_crc_and_truncation() {
  Posts po;
  auto bad_crc = [](Bytes f) {
    f.back() ^= 0x5A;
    return f;
  };
  run("crc error send", po, [&](Conn& c) { return bad_crc(frame(send_u(1, pat(8)), c.crc)); },
      term(llp(LlpErr::kCrcError)));
  run("crc error read request", po,
      [&](Conn& c) { return bad_crc(frame(rreq_u(1, 5, 0, 8, rw_token(), rw_base()), c.crc)); },
      term(llp(LlpErr::kCrcError)));
  run("crc error terminate", po,
      [&](Conn& c) { return bad_crc(frame(untagged(RdmapOpcode::kTerminate, true, kQnTerminate, 1, 0, pat(4)), c.crc)); },
      term(llp(LlpErr::kCrcError)));
  {
    // A Write that fails the CRC places no byte: check_memory allows no change in the target (RFC 5044 §4.4, §7).
    Expect e = term(llp(LlpErr::kCrcError));
    run("crc error write", po,
        [&](Conn& c) { return bad_crc(frame(tagged(RdmapOpcode::kWrite, true, rw_token(), rw_base() + 100, pat(40)), c.crc)); },
        e);
    run("crc zero trailer write", po,
        [&](Conn& c) {
          Bytes f = frame(tagged(RdmapOpcode::kWrite, true, rw_token(), rw_base() + 100, pat(40)), c.crc);
          std::memset(f.data() + f.size() - 4, 0, 4);
          return f;
        },
        e);
    // Larger than the provider's first staging buffer (the rest of the FPDU arrives in later receives).
    run("crc error write 4000 bytes", po,
        [&](Conn& c) { return bad_crc(frame(tagged(RdmapOpcode::kWrite, true, rw_token(), rw_base(), pat(4000)), c.crc)); },
        e);
    // A good Write, then a bad one behind it in the same receive: the first is placed, the second not a byte.
    Expect two = e;
    two.allowed.push_back(Range{kRwOff, 64});
    run("good write then crc error write", po,
        [&](Conn& c) {
          return frame(tagged(RdmapOpcode::kWrite, true, rw_token(), rw_base(), pat(64)), c.crc) +
                 bad_crc(frame(tagged(RdmapOpcode::kWrite, true, rw_token(), rw_base() + 1024, pat(64, 0x80)), c.crc));
        },
        two);
    Expect slow = e;
    slow.slow = true;  // one byte per receive: every partial state of the FPDU
    run("crc error write 64 bytes, one byte at a time", po,
        [&](Conn& c) { return bad_crc(frame(tagged(RdmapOpcode::kWrite, true, rw_token(), rw_base() + 200, pat(64)), c.crc)); },
        slow);
  }
  Expect cut;
  cut.no_term = true;
  cut.shutdown_after = true;
  run("half fpdu then close", po,
      [](Conn& c) {
        Bytes f = frame(send_u(1, pat(64)), c.crc);
        f.resize(30);
        return f;
      },
      cut);
  run("half header then close", po,
      [](Conn& c) {
        Bytes f = frame(send_u(1, pat(64)), c.crc);
        f.resize(9);
        return f;
      },
      cut);
  run("half read request then close", po,
      [](Conn& c) {
        Bytes f = frame(rreq_u(1, 5, 0, 8, rw_token(), rw_base()), c.crc);
        f.resize(30);
        return f;
      },
      cut);
  {
    Expect e = cut;
    e.allowed.push_back(Range{kRwOff, 16});
    run("half write then close", po,
        [](Conn& c) {
          Bytes f = frame(tagged(RdmapOpcode::kWrite, true, rw_token(), rw_base(), pat(64)), c.crc);
          f.resize(30);
          return f;
        },
        e);
    e.recv_success = 1;
    run("bytes after a valid fpdu then close", po,
        [](Conn& c) { return frame(send_u(1, pat(8)), c.crc) + Bytes{1, 2, 3}; }, e);
  }
  Expect clean = cut;
  clean.recv_success = 1;
  run("orderly close after a send", po, [](Conn& c) { return frame(send_u(1, pat(8)), c.crc); }, clean);
}

// A valid stream one byte at a time: everything must still be processed correctly.
void test_slow_loris() {
  g_test = "slow loris";
  g_mem->pattern();
  Posts po;
  po.read = po.write = po.send = false;
  po.slow_setup = true;
  Conn c;
  if (setup(c, po)) {
    c.snap = g_mem->buf;
    const Bytes wdata = pat(40, 0x90);
    const Bytes s1 = pat(100, 0x11), s2 = pat(20, 0x22);
    const Bytes stream = frame(send_u(1, s1), c.crc) +
                         frame(tagged(RdmapOpcode::kWrite, false, rw_token(), rw_base() + 100, Bytes(wdata.begin(), wdata.begin() + 16)), c.crc) +
                         frame(tagged(RdmapOpcode::kWrite, true, rw_token(), rw_base() + 116, Bytes(wdata.begin() + 16, wdata.end())), c.crc) +
                         frame(rreq_u(1, 0x5555, 0x10, 40, rw_token(), rw_base() + 100), c.crc) +
                         frame(untagged(RdmapOpcode::kSendSe, true, kQnSend, 2, 0, s2), c.crc);
    CHECK(send_all(c.fd, stream, true));
    ND2_RESULT r[2];
    int n = 0;
    const auto until = Clock::now() + std::chrono::seconds(3);
    while (n < 2 && Clock::now() < until) n += static_cast<int>(c.cq->GetResults(r + n, 2 - n));
    CHECK(n == 2);
    for (int i = 0; i < n; ++i) CHECK_ST(r[i].Status, ND_SUCCESS);
    if (n == 2) {
      CHECK(r[0].BytesTransferred == 100 && r[1].BytesTransferred == 20);
      CHECK(std::memcmp(g_mem->p(kLocOff), s1.data(), s1.size()) == 0);
      CHECK(std::memcmp(g_mem->p(kLocOff + kRecvLen), s2.data(), s2.size()) == 0);
    }
    c.outstanding = 0;
    CHECK(std::memcmp(g_mem->p(kRwOff + 100), wdata.data(), wdata.size()) == 0);
    Expect e;
    e.no_term = true;
    e.shutdown_after = true;
    e.allowed.push_back(Range{kRwOff + 100, 40});
    finish(c, {}, e);
    const Parsed p = parse_stream(c.rx, c.crc);
    bool found = false;
    for (const Fpdu& f : p.fpdus) {
      if (f.h.opcode == RdmapOpcode::kReadResponse && f.h.stag == 0x5555 && f.h.to == 0x10 && f.h.last) {
        found = f.ulpdu.size() == kDdpTaggedHdrSize + 40 &&
                std::memcmp(f.ulpdu.data() + kDdpTaggedHdrSize, wdata.data(), 40) == 0;
      }
    }
    CHECK(found);
  }
  teardown(c);
}

// P2P: the responder waits for the RTR; anything else is refused.
void test_p2p_rtr() {
  struct R {
    const char* name;
    std::function<Bytes(bool)> rtr;
  };
  const std::vector<R> rs = {
      {"p2p rtr is a send", [](bool crc) { return frame(send_u(1, {}), crc); }},
      {"p2p rtr write with payload", [](bool crc) { return frame(tagged(RdmapOpcode::kWrite, true, 1, 0, pat(4)), crc); }},
      {"p2p rtr is a read (write chosen)", [](bool crc) { return frame(rreq_u(1, 1, 0, 0, 1, 0), crc); }},
      {"p2p rtr is a read response", [](bool crc) { return frame(tagged(RdmapOpcode::kReadResponse, true, 1, 0), crc); }},
  };
  for (const R& r : rs) {
    g_test = r.name;
    g_mem->pattern();
    Posts po;
    po.p2p = true;
    po.read = po.write = po.send = false;
    po.rtr = r.rtr(true);
    Conn c;
    if (setup(c, po)) {
      c.snap = g_mem->buf;
      CHECK_ST(c.accept_status, ND_CONNECTION_ABORTED);
      Bytes rx;
      CHECK(recv_until_eof(c.fd, &rx, 4000));
      const Parsed p = parse_stream(rx, true);
      CHECK(p.framing_ok && p.terminates == 1 && p.term_decodes);
      CHECK(p.term == llp(LlpErr::kNoMatchingRtr));
      check_completions(c, Expect{});
      check_memory(c, Expect{});
    }
    teardown(c);
  }
  {  // the initiator never sends its RTR but keeps the connection: the application cancels the Accept
    g_test = "p2p rtr never sent, accept cancelled";
    void* p = nullptr;
    Conn c;
    g_adapter->CreateCompletionQueue(IID_IND2CompletionQueue, g_file, 64, 0, 0, &p);
    c.cq = as<IND2CompletionQueue>(p);
    g_adapter->CreateQueuePair(IID_IND2QueuePair, c.cq, c.cq, nullptr, 8, 8, 2, 2, 0, &p);
    c.qp = as<IND2QueuePair>(p);
    g_adapter->CreateConnector(IID_IND2Connector, g_file, &p);
    c.conn = as<IND2Connector>(p);
    post_recvs(c, 2);
    CHECK_ST(g_listener->GetConnectionRequest(c.conn, &c.req.ov), ND_PENDING);
    c.fd = tcp_connect(g_port);
    send_all(c.fd, mpa_request(true, true, 4, 4));
    CHECK_ST(wait_ov(g_listener, c.req, 3000), ND_SUCCESS);
    CHECK_ST(c.conn->Accept(c.qp, 4, 4, nullptr, 0, &c.acc.ov), ND_PENDING);
    uint8_t rep[24];
    CHECK(recv_exact(c.fd, rep, sizeof rep, 3000));
    std::this_thread::sleep_for(std::chrono::milliseconds(30));
    CHECK_ST(c.conn->GetOverlappedResult(&c.acc.ov, FALSE), ND_PENDING);
    CHECK_ST(c.conn->CancelOverlappedRequests(), ND_SUCCESS);
    CHECK_ST(wait_ov(c.conn, c.acc, 3000), ND_CANCELED);
    Bytes rx;
    CHECK(recv_until_eof(c.fd, &rx, 4000));  // the connection is torn down
    check_completions(c, Expect{});
    teardown(c);
  }
  // The initiator sends a Terminate in place of its RTR. An MPA-layer one says it declined the connection (its
  // application rejected it or released the connector before CompleteConnect) or cannot meet our Reply's terms:
  // the Accept is refused. Any other Terminate is a broken setup: aborted. A Terminate is not answered with one.
  struct T {
    const char* name;
    TermCode code;
    HRESULT accept;
  };
  const std::vector<T> ts = {
      {"p2p terminate for rtr: declined", llp(LlpErr::kLocalCatastrophic), ND_CONNECTION_REFUSED},
      {"p2p terminate for rtr: insufficient ird", llp(LlpErr::kInsufficientIrd), ND_CONNECTION_REFUSED},
      {"p2p terminate for rtr: no matching rtr", llp(LlpErr::kNoMatchingRtr), ND_CONNECTION_REFUSED},
      {"p2p terminate for rtr: rdmap catastrophic",
       term_code(RdmapEtype::kLocalCatastrophic, RdmapErr::kCatastrophicStream), ND_CONNECTION_ABORTED},
  };
  for (const T& t : ts) {
    g_test = t.name;
    g_mem->pattern();
    Posts po;
    po.p2p = true;
    po.read = po.write = po.send = false;
    uint8_t term[64];
    const size_t n = build_terminate_fpdu(t.code, nullptr, 0, 0, true, term);
    po.rtr.assign(term, term + n);
    Conn c;
    if (setup(c, po)) {
      c.snap = g_mem->buf;
      CHECK_ST(c.accept_status, t.accept);
      Bytes rx;
      CHECK(recv_until_eof(c.fd, &rx, 4000));
      const Parsed p = parse_stream(rx, true);
      CHECK(p.framing_ok && p.terminates == 0);
      check_completions(c, Expect{});
      check_memory(c, Expect{});
    }
    teardown(c);
  }
  {  // the initiator goes away without its RTR
    g_test = "p2p close before rtr";
    Posts po;
    po.p2p = true;
    po.read = po.write = po.send = false;
    po.rtr = Bytes{};
    Conn c;
    void* p = nullptr;
    g_adapter->CreateCompletionQueue(IID_IND2CompletionQueue, g_file, 64, 0, 0, &p);
    c.cq = as<IND2CompletionQueue>(p);
    g_adapter->CreateQueuePair(IID_IND2QueuePair, c.cq, c.cq, nullptr, 8, 8, 2, 2, 0, &p);
    c.qp = as<IND2QueuePair>(p);
    g_adapter->CreateConnector(IID_IND2Connector, g_file, &p);
    c.conn = as<IND2Connector>(p);
    post_recvs(c, 2);
    CHECK_ST(g_listener->GetConnectionRequest(c.conn, &c.req.ov), ND_PENDING);
    c.fd = tcp_connect(g_port);
    send_all(c.fd, mpa_request(true, true, 4, 4));
    CHECK_ST(wait_ov(g_listener, c.req, 3000), ND_SUCCESS);
    CHECK_ST(c.conn->Accept(c.qp, 4, 4, nullptr, 0, &c.acc.ov), ND_PENDING);
    uint8_t rep[24];
    CHECK(recv_exact(c.fd, rep, sizeof rep, 3000));
    ::shutdown(c.fd, SHUT_WR);
    CHECK_ST(wait_ov(c.conn, c.acc, 3000), ND_CONNECTION_ABORTED);
    check_completions(c, Expect{});
    teardown(c);
  }
}

// ---- MPA setup against the listener ----------------------------------------------------------------
void test_mpa_requests() {
  void* p = nullptr;
  g_adapter->CreateConnector(IID_IND2Connector, g_file, &p);
  auto* conn = as<IND2Connector>(p);
  Ov req;
  CHECK_ST(g_listener->GetConnectionRequest(conn, &req.ov), ND_PENDING);
  struct M {
    const char* name;
    Bytes bytes;
    bool reject_frame;  // a Reply with R is expected before the close
    bool shutdown;
  };
  Bytes good = mpa_request(true, false, 4, 4);
  Bytes markers = good;
  markers[kMpaFlagsOffset] |= kMpaFlagMarkers;
  Bytes rev3 = good;
  rev3[kMpaRevOffset] = 3;
  Bytes huge = good;
  put_be16(huge.data() + kMpaPdLenOffset, 0xFFFF);
  Bytes over = good;
  put_be16(over.data() + kMpaPdLenOffset, 513);
  over.resize(kMpaHeaderSize + 513, 0);
  Bytes short_v2 = good;
  put_be16(short_v2.data() + kMpaPdLenOffset, 2);
  short_v2.resize(kMpaHeaderSize + 2);
  Bytes reply_key = good;
  std::memcpy(reply_key.data(), kMpaKeyReply, kMpaKeySize);
  const std::vector<M> ms = {
      {"mpa garbage", bytes_of("GET / HTTP/1.1\r\nHost: x\r\n\r\n"), false, false},
      {"mpa truncated request", Bytes(good.begin(), good.begin() + 10), false, true},
      {"mpa truncated private data", Bytes(good.begin(), good.end() - 2), false, true},
      {"mpa pd_length 0xFFFF", huge, false, false},
      {"mpa pd_length 513", over, false, false},
      {"mpa bytes after request", good + Bytes{0, 0, 0, 0}, false, false},
      {"mpa fpdu right after request", good + frame(send_u(1, pat(8)), true), false, false},
      {"mpa markers", markers, true, false},
      {"mpa rev 3", rev3, false, false},
      {"mpa v2 without ird/ord", short_v2, true, false},
      {"mpa reply key in request", reply_key, false, false},
  };
  for (const M& m : ms) {
    g_test = m.name;
    int fd = tcp_connect(g_port);
    CHECK(fd >= 0);
    if (fd < 0) continue;
    send_all(fd, m.bytes);
    if (m.shutdown) ::shutdown(fd, SHUT_WR);
    Bytes rx;
    CHECK(recv_until_eof(fd, &rx, 3000));
    if (m.reject_frame) {
      MpaFrame f;
      size_t used;
      MpaError err;
      CHECK(mpa_parse(rx.data(), rx.size(), MpaFrameKind::kReply, &f, &used, &err) == MpaParseStatus::kOk && f.reject);
    } else {
      CHECK(rx.empty());
    }
    ::close(fd);
    CHECK_ST(conn->GetOverlappedResult(&req.ov, FALSE), ND_PENDING);  // nothing reached the application
    CHECK_ST(g_listener->GetOverlappedResult(&req.ov, FALSE), ND_PENDING);
  }
  // Bytes behind the Request while the application holds it: Accept fails, the peer is dropped.
  {
    g_test = "mpa bytes while the request is held";
    void* q = nullptr;
    g_adapter->CreateCompletionQueue(IID_IND2CompletionQueue, g_file, 16, 0, 0, &q);
    auto* cq = as<IND2CompletionQueue>(q);
    g_adapter->CreateQueuePair(IID_IND2QueuePair, cq, cq, nullptr, 4, 4, 1, 1, 0, &q);
    auto* qp = as<IND2QueuePair>(q);
    g_adapter->CreateConnector(IID_IND2Connector, g_file, &q);
    auto* held = as<IND2Connector>(q);
    Ov hreq, hacc;
    CHECK_ST(g_listener->GetConnectionRequest(held, &hreq.ov), ND_PENDING);
    // The older waiter (conn) gets the first Request: give it a valid one and keep it pending below.
    int fd = tcp_connect(g_port);
    send_all(fd, mpa_request(true, false, 4, 4));
    HRESULT first = wait_ov(g_listener, req, 3000);
    CHECK_ST(first, ND_SUCCESS);
    int fd2 = tcp_connect(g_port);
    send_all(fd2, mpa_request(true, false, 4, 4));
    CHECK_ST(wait_ov(g_listener, hreq, 3000), ND_SUCCESS);
    send_all(fd2, pat(5));
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    HRESULT hr = held->Accept(qp, 4, 4, nullptr, 0, &hacc.ov);
    if (hr == ND_PENDING) hr = wait_ov(held, hacc, 3000);
    CHECK_ST(hr, ND_CONNECTION_ABORTED);
    Bytes rx;
    CHECK(recv_until_eof(fd2, &rx, 3000));
    CHECK(rx.empty());
    ::close(fd2);
    CHECK_ST(conn->Reject(nullptr, 0), ND_SUCCESS);
    CHECK(recv_until_eof(fd, &rx, 3000));
    ::close(fd);
    held->Release();
    qp->Release();
    cq->Release();
    conn->Release();
    g_adapter->CreateConnector(IID_IND2Connector, g_file, &q);
    conn = as<IND2Connector>(q);
    CHECK_ST(g_listener->GetConnectionRequest(conn, &req.ov), ND_PENDING);
  }
  // The listener still works: a valid Request is delivered to the waiting connector.
  g_test = "mpa listener survives";
  int fd = tcp_connect(g_port);
  send_all(fd, mpa_request(true, false, 4, 4), true);
  CHECK_ST(wait_ov(g_listener, req, 3000), ND_SUCCESS);
  CHECK_ST(conn->Reject(nullptr, 0), ND_SUCCESS);
  Bytes rx;
  CHECK(recv_until_eof(fd, &rx, 3000));
  ::close(fd);
  conn->Release();
}

// ---- the provider as initiator against a hostile responder -------------------------------------------
struct Active {
  IND2CompletionQueue* cq = nullptr;
  IND2QueuePair* qp = nullptr;
  IND2Connector* conn = nullptr;
  int lfd = -1, fd = -1;
  Ov con, comp, notify;
  Bytes request;
};

bool active_start(Active& a) {
  void* p = nullptr;
  g_adapter->CreateCompletionQueue(IID_IND2CompletionQueue, g_file, 64, 0, 0, &p);
  a.cq = as<IND2CompletionQueue>(p);
  g_adapter->CreateQueuePair(IID_IND2QueuePair, a.cq, a.cq, nullptr, 8, 8, 2, 2, 0, &p);
  a.qp = as<IND2QueuePair>(p);
  g_adapter->CreateConnector(IID_IND2Connector, g_file, &p);
  a.conn = as<IND2Connector>(p);
  a.lfd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in sa = loopback(0);
  ::bind(a.lfd, reinterpret_cast<sockaddr*>(&sa), sizeof sa);
  ::listen(a.lfd, 4);
  socklen_t len = sizeof sa;
  ::getsockname(a.lfd, reinterpret_cast<sockaddr*>(&sa), &len);
  CHECK_ST(a.conn->Connect(a.qp, reinterpret_cast<sockaddr*>(&sa), sizeof sa, 4, 4, nullptr, 0, &a.con.ov), ND_PENDING);
  pollfd pf{a.lfd, POLLIN, 0};
  if (::poll(&pf, 1, 3000) != 1) return false;
  a.fd = ::accept(a.lfd, nullptr, nullptr);
  uint8_t hdr[kMpaMaxFrameRecv];
  if (!recv_exact(a.fd, hdr, kMpaHeaderSize, 3000)) return false;
  const size_t pd = get_be16(hdr + kMpaPdLenOffset);
  if (!recv_exact(a.fd, hdr + kMpaHeaderSize, pd, 3000)) return false;
  a.request.assign(hdr, hdr + kMpaHeaderSize + pd);
  return true;
}

void active_end(Active& a) {
  if (a.fd >= 0) ::close(a.fd);
  if (a.lfd >= 0) ::close(a.lfd);
  if (a.conn) a.conn->Release();
  if (a.qp) a.qp->Release();
  if (a.cq) a.cq->Release();
}

Bytes make_reply(const Bytes& request, bool p2p_echo, uint8_t rtr) {
  MpaFrame req;
  size_t used;
  MpaError err;
  mpa_parse(request.data(), request.size(), MpaFrameKind::kRequest, &req, &used, &err);
  MpaFrame f;
  f.kind = MpaFrameKind::kReply;
  f.crc = req.crc;
  f.rev = kMpaRev2;
  f.enhanced = true;
  f.v2 = true;
  f.params.ird = 4;
  f.params.ord = 4;
  f.params.p2p = p2p_echo;
  f.params.rtr = rtr;
  Bytes out(64);
  out.resize(mpa_encode(f, out.data(), out.size()));
  return out;
}

void test_mpa_replies() {
  struct M {
    const char* name;
    std::function<Bytes(const Bytes&)> reply;
    bool shutdown;
    HRESULT status;
    bool term;
    TermCode code;
  };
  const TermCode bad = llp(LlpErr::kInvalidRequestReply);
  const std::vector<M> ms = {
      {"reply wrong key",
       [](const Bytes& r) {
         Bytes b = make_reply(r, true, kRtrWrite);
         std::memcpy(b.data(), kMpaKeyRequest, kMpaKeySize);
         return b;
       },
       false, ND_CONNECTION_ABORTED, true, bad},
      {"reply garbage", [](const Bytes&) { return bytes_of("HTTP/1.1 400 Bad Request\r\n\r\n"); }, false,
       ND_CONNECTION_ABORTED, true, bad},
      {"reply pd_length 0xFFFF",
       [](const Bytes& r) {
         Bytes b = make_reply(r, true, kRtrWrite);
         put_be16(b.data() + kMpaPdLenOffset, 0xFFFF);
         return b;
       },
       false, ND_CONNECTION_ABORTED, true, bad},
      {"reply rev 3",
       [](const Bytes& r) {
         Bytes b = make_reply(r, true, kRtrWrite);
         b[kMpaRevOffset] = 3;
         return b;
       },
       false, ND_CONNECTION_ABORTED, true, bad},
      {"reply markers",
       [](const Bytes& r) {
         Bytes b = make_reply(r, true, kRtrWrite);
         b[kMpaFlagsOffset] |= kMpaFlagMarkers;
         return b;
       },
       false, ND_CONNECTION_ABORTED, true, bad},
      {"reply without A", [](const Bytes& r) { return make_reply(r, false, 0); }, false, ND_CONNECTION_REFUSED, true,
       llp(LlpErr::kNoMatchingRtr)},
      {"reply with a send rtr", [](const Bytes& r) { return make_reply(r, true, kRtrSend); }, false,
       ND_CONNECTION_REFUSED, true, llp(LlpErr::kNoMatchingRtr)},
      {"reply then extra bytes", [](const Bytes& r) { return make_reply(r, true, kRtrWrite) + Bytes{0, 1}; }, false,
       ND_CONNECTION_ABORTED, false, {}},
      {"reply truncated then close",
       [](const Bytes& r) {
         Bytes b = make_reply(r, true, kRtrWrite);
         b.resize(b.size() - 3);
         return b;
       },
       true, ND_CONNECTION_REFUSED, false, {}},
  };
  for (const M& m : ms) {
    g_test = m.name;
    Active a;
    if (active_start(a)) {
      send_all(a.fd, m.reply(a.request));
      if (m.shutdown) ::shutdown(a.fd, SHUT_WR);
      CHECK_ST(wait_ov(a.conn, a.con, 3000), m.status);
      Bytes rx;
      CHECK(recv_until_eof(a.fd, &rx, 3000));
      const Parsed p = parse_stream(rx, (a.request[kMpaFlagsOffset] & kMpaFlagCrc) != 0);
      CHECK(p.framing_ok && p.term_decodes);
      if (m.term) {
        CHECK(p.terminates == 1 && p.term == m.code);
      } else {
        CHECK(rx.empty());
      }
      CHECK_ST(a.conn->CompleteConnect(&a.comp.ov), ND_CONNECTION_INVALID);
    } else {
      CHECK(false);
    }
    active_end(a);
  }
  // The application declines after Connect succeeded, by Reject or by releasing the connector before
  // CompleteConnect: the responder gets an MPA Terminate (local catastrophic) in place of the RTR, then FIN.
  for (const bool by_release : {false, true}) {
    g_test = by_release ? "initiator: connector released before CompleteConnect" : "initiator: Reject after Connect";
    Active a;
    if (active_start(a)) {
      Bytes rep = make_reply(a.request, true, kRtrWrite);
      rep[kMpaFlagsOffset] |= kMpaFlagCrc;
      CHECK(send_all(a.fd, rep));
      CHECK_ST(wait_ov(a.conn, a.con, 3000), ND_SUCCESS);
      if (by_release) {
        a.conn->Release();
        a.conn = nullptr;
      } else {
        CHECK_ST(a.conn->Reject(nullptr, 0), ND_SUCCESS);
        CHECK_ST(a.conn->CompleteConnect(&a.comp.ov), ND_CONNECTION_INVALID);
      }
      Bytes rx;
      CHECK(recv_until_eof(a.fd, &rx, 3000));
      const Parsed p = parse_stream(rx, true);
      CHECK(p.framing_ok && p.term_decodes && p.terminates == 1 && p.fpdus.size() == 1);
      CHECK(p.term == llp(LlpErr::kLocalCatastrophic));
    } else {
      CHECK(false);
    }
    active_end(a);
  }
  // A valid slow-loris Reply, then junk after the RTR: the initiator's QP terminates correctly.
  g_test = "initiator: slow reply then reserved opcode";
  Active a;
  g_mem->pattern();
  if (active_start(a)) {
    const bool crc = true;  // we ask for it in our Reply
    Bytes rep = make_reply(a.request, true, kRtrWrite);
    rep[kMpaFlagsOffset] |= kMpaFlagCrc;
    CHECK(send_all(a.fd, rep, true));
    CHECK_ST(wait_ov(a.conn, a.con, 3000), ND_SUCCESS);
    CHECK_ST(a.conn->CompleteConnect(&a.comp.ov), ND_PENDING);
    CHECK_ST(wait_ov(a.conn, a.comp, 3000), ND_SUCCESS);
    CHECK_ST(a.conn->NotifyDisconnect(&a.notify.ov), ND_PENDING);
    ND2_SGE sge{g_mem->p(kLocOff + kSinkOff), static_cast<ULONG>(kSinkLen), loc_token()};
    CHECK_ST(a.qp->Read(reinterpret_cast<void*>(kCtxRead), &sge, 1, kRemoteReadTo, kRemoteFakeStag, 0), ND_SUCCESS);
    const Bytes snap = g_mem->buf;
    Bytes u = send_u(1, pat(8));
    u[1] = static_cast<uint8_t>((u[1] & ~kRdmapOpcodeMask) | 0xC);
    send_all(a.fd, frame(u, crc));
    Bytes rx;
    CHECK(recv_until_eof(a.fd, &rx, 3000));
    const Parsed p = parse_stream(rx, crc);
    CHECK(p.framing_ok && p.term_decodes && p.terminates == 1);
    CHECK(!p.fpdus.empty() && p.fpdus[0].h.opcode == RdmapOpcode::kWrite && p.fpdus[0].h.stag == 1 &&
          p.fpdus[0].ulpdu.size() == kDdpTaggedHdrSize);  // the RTR first
    CHECK(p.term == kBadOpcode);
    CHECK_ST(wait_ov(a.conn, a.notify, 3000), ND_SUCCESS);
    ND2_RESULT r;
    const auto until = Clock::now() + std::chrono::seconds(3);
    ULONG n = 0;
    while (n == 0 && Clock::now() < until) n = a.cq->GetResults(&r, 1);
    CHECK(n == 1);
    if (n == 1) CHECK_ST(r.Status, ND_CANCELED);
    CHECK(std::memcmp(snap.data(), g_mem->buf.data(), kLocOff + kSinkOff) == 0);
  }
  active_end(a);
}

// ---- seeded random mutations of a valid stream ---------------------------------------------------------
void test_mutations(int iterations, uint32_t seed) {
  std::mt19937 rng(seed);
  Posts po;
  po.read = po.write = po.send = false;
  po.recvs = kMaxRecvs;
  g_quiet = true;
  int terms = 0, clean = 0, slow_iters = 0;
  const auto t0 = Clock::now();
  for (int it = 0; it < iterations; ++it) {
    g_test = "mutation #" + std::to_string(it);
    g_mem->pattern();
    Conn c;
    if (!setup(c, po)) {
      teardown(c);
      continue;
    }
    c.snap = g_mem->buf;
    // The valid stream, as FPDUs.
    std::vector<Bytes> fp = {
        frame(send_u(1, pat(24, 0x41)), c.crc),
        frame(send_u(2, pat(8), 0, false), c.crc),
        frame(send_u(2, pat(8), 8), c.crc),
        frame(tagged(RdmapOpcode::kWrite, false, rw_token(), rw_base() + 100, pat(20)), c.crc),
        frame(tagged(RdmapOpcode::kWrite, true, rw_token(), rw_base() + 120, pat(20)), c.crc),
        frame(rreq_u(1, 0x5555, 0, 32, rw_token(), rw_base()), c.crc),
        frame(untagged(RdmapOpcode::kSendSe, true, kQnSend, 3, 0, pat(4)), c.crc),
        frame(rreq_u(2, 1, 0, 0, 1, 0), c.crc),
        frame(untagged(RdmapOpcode::kSendInvalidate, true, kQnSend, 4, 0, pat(4), 0x77777000u), c.crc),
    };
    const int nmut = 1 + static_cast<int>(rng() % 3);
    bool truncated = false;
    for (int m = 0; m < nmut; ++m) {
      Bytes& f = fp[rng() % fp.size()];
      uint32_t kind = rng() % 10;
      if (f.size() < 8) kind = 7;  // truncated before: only insertions make sense
      const size_t hdr_end = std::min<size_t>(f.size() - 4, 2 + 46);
      auto fix_crc = [&] {
        if (!c.crc || f.size() < 8) return;
        const size_t covered = f.size() - 4;
        put_crc_le(f.data() + covered, crc32c(f.data(), covered));
      };
      switch (kind) {
        case 0: case 1: case 2: {  // header bit flip, CRC recomputed
          const size_t at = rng() % hdr_end;
          f[at] ^= static_cast<uint8_t>(1u << (rng() % 8));
          fix_crc();
          break;
        }
        case 3: {  // interesting 32-bit value in the header, CRC recomputed
          static const uint32_t vals[] = {0, 1, 2, 0x7FFFFFFF, 0x80000000u, 0xFFFFFFFFu, 0xFFFFFFF0u, 0x10000};
          const size_t at = 2 + (rng() % (hdr_end > 6 ? hdr_end - 6 : 1));
          uint32_t v = vals[rng() % 8];
          if (rng() % 4 == 0) v = rng() % 3 == 0 ? rw_token() : rng() % 2 ? ro_token() : loc_token();
          put_be32(f.data() + at, v);
          fix_crc();
          break;
        }
        case 4: {  // random length field
          put_be16(f.data(), static_cast<uint16_t>(rng()));
          if (rng() % 2) fix_crc();
          break;
        }
        case 5: {  // any bit, CRC left alone
          f[rng() % f.size()] ^= static_cast<uint8_t>(1u << (rng() % 8));
          break;
        }
        case 6: {  // truncate this FPDU (and the stream after it)
          f.resize(rng() % f.size());
          truncated = true;
          if (f.empty()) f.push_back(static_cast<uint8_t>(rng()));
          break;
        }
        case 7: {  // insert random bytes
          Bytes junk(1 + rng() % 12);
          for (auto& b : junk) b = static_cast<uint8_t>(rng());
          f.insert(f.begin() + static_cast<ptrdiff_t>(rng() % (f.size() + 1)), junk.begin(), junk.end());
          break;
        }
        case 8: {  // duplicate
          f = f + f;
          break;
        }
        default: {  // payload byte (with CRC fix): data changes, framing stays valid
          f[rng() % f.size()] = static_cast<uint8_t>(rng());
          fix_crc();
          break;
        }
      }
      (void)truncated;
    }
    Bytes stream;
    for (const Bytes& f : fp) stream = stream + f;
    Expect e;
    e.local_error = false;
    e.recv_alt = ND_CANCELED;
    e.recv_success = kMaxRecvs;
    e.shutdown_after = true;
    e.slow = (it % 64) == 0;  // now and then byte by byte
    if (e.slow) ++slow_iters;
    e.allowed.push_back(Range{kRwOff, kRwSize});  // any in-bounds Write through the rw STag is legitimate
    // Statuses of the receive being filled vary with the mutation: accept any valid one.
    send_all(c.fd, stream, e.slow);
    ::shutdown(c.fd, SHUT_WR);
    const bool closed = recv_until_eof(c.fd, &c.rx, 4000);
    CHECK(closed);
    ::close(c.fd);
    c.fd = -1;
    CHECK_ST(wait_ov(c.conn, c.notify, 3000), ND_SUCCESS);
    std::vector<ND2_RESULT> got;
    const auto until = Clock::now() + std::chrono::milliseconds(3000);
    while (static_cast<int>(got.size()) < c.outstanding && Clock::now() < until) {
      ND2_RESULT r[8];
      const ULONG n = c.cq->GetResults(r, 8);
      got.insert(got.end(), r, r + n);
      if (n == 0) std::this_thread::sleep_for(std::chrono::microseconds(100));
    }
    CHECK(static_cast<int>(got.size()) == c.outstanding);
    for (const ND2_RESULT& r : got) {
      CHECK(valid_for(r.RequestType, r.Status));
      CHECK(r.BytesTransferred <= kRecvLen);
    }
    const Parsed p = parse_stream(c.rx, c.crc);
    CHECK(p.framing_ok);
    CHECK(p.term_decodes && p.term_last && p.terminates <= 1);
    terms += p.terminates;
    clean += p.terminates == 0;
    check_memory(c, e);
    teardown(c);
  }
  g_quiet = false;
  const double secs = std::chrono::duration<double>(Clock::now() - t0).count();
  std::printf("mutations: %d iterations (seed %u, %d slow), %d with a Terminate, %d without, %.1f s\n", iterations,
              seed, slow_iters, terms, clean, secs);
}

// Guessing the STag of a remote-writable region that was never advertised (docs/security.md, "STag space").
// The peer knows one advertised STag (rw) and that the hidden region was registered right after it; each guess
// costs a connection (a wrong STag is Terminated and the connection closed). First every value a "known index +
// 1, any 12-bit key" layout allows (the layout before STags became random: a hit within 4096 guesses), then
// random values. A hit would place bytes in the hidden region or answer with a base/bounds Terminate.
void test_stag_guessing(int random_guesses) {
  g_test = "stag guessing";
  Bytes hidden_before(g_hidden->size());
  std::memcpy(hidden_before.data(), g_hidden->data(), g_hidden->size());
  const uint64_t hidden_base = reinterpret_cast<uintptr_t>(g_hidden->data());
  const TermCode want = ddp_t(DdpTaggedErr::kInvalidStag);
  const uint32_t known = rw_token();
  std::vector<uint32_t> guesses;
  for (uint32_t key = 0; key < 4096; ++key) guesses.push_back((((known >> 12) + 1) << 12) | key);
  std::mt19937 r(std::random_device{}());
  for (int i = 0; i < random_guesses; ++i) guesses.push_back(r());
  Posts po;
  po.read = po.write = po.send = false;
  po.recvs = 0;
  const auto t0 = Clock::now();
  int tried = 0, hits = 0, setup_failures = 0;
  const int failed_before = g_failed;
  for (uint32_t g : guesses) {
    if (g == known) continue;
    Conn c;
    if (!setup(c, po)) {
      teardown(c);
      if (++setup_failures > 3) break;
      continue;
    }
    ++tried;
    send_all(c.fd, frame(tagged(RdmapOpcode::kWrite, true, g, hidden_base, pat(8)), c.crc));
    Bytes rx;
    const bool closed = recv_until_eof(c.fd, &rx, 2000);
    const Parsed p = parse_stream(rx, c.crc);
    const bool miss = closed && p.terminates == 1 && p.term == want;
    teardown(c);
    if (!miss) {
      ++hits;
      std::printf("  guess %d (%08x) was not refused as an invalid STag (advertised %08x)\n", tried, g, known);
      break;
    }
  }
  const double secs = std::chrono::duration<double>(Clock::now() - t0).count();
  // Only the outcome counts as checks: setup() would otherwise add thousands of passes.
  CHECK(g_failed == failed_before);
  CHECK(setup_failures == 0);
  CHECK(hits == 0);
  CHECK(std::memcmp(hidden_before.data(), g_hidden->data(), g_hidden->size()) == 0);
  std::printf("stag guessing: %d connections, %d hits, %.1f s (%.0f guesses/s)\n", tried, hits, secs,
              tried / (secs > 0 ? secs : 1));
}

// P2P: the initiator sends its Request, gets our Reply and then withholds its RTR. The handshake deadline
// (NETDIRECT_HANDSHAKE_TIMEOUT_MS, set short in main) fails the Accept with ND_IO_TIMEOUT and closes the socket.
void test_withheld_rtr() {
  g_test = "p2p rtr withheld: handshake deadline";
  void* p = nullptr;
  Conn c;
  g_adapter->CreateCompletionQueue(IID_IND2CompletionQueue, g_file, 64, 0, 0, &p);
  c.cq = as<IND2CompletionQueue>(p);
  g_adapter->CreateQueuePair(IID_IND2QueuePair, c.cq, c.cq, nullptr, 8, 8, 2, 2, 0, &p);
  c.qp = as<IND2QueuePair>(p);
  g_adapter->CreateConnector(IID_IND2Connector, g_file, &p);
  c.conn = as<IND2Connector>(p);
  post_recvs(c, 2);
  CHECK_ST(g_listener->GetConnectionRequest(c.conn, &c.req.ov), ND_PENDING);
  c.fd = tcp_connect(g_port);
  send_all(c.fd, mpa_request(true, true, 4, 4));
  CHECK_ST(wait_ov(g_listener, c.req, 3000), ND_SUCCESS);
  const auto t0 = Clock::now();
  CHECK_ST(c.conn->Accept(c.qp, 4, 4, nullptr, 0, &c.acc.ov), ND_PENDING);
  uint8_t rep[24];
  CHECK(recv_exact(c.fd, rep, sizeof rep, 3000));
  CHECK_ST(wait_ov(c.conn, c.acc, kHandshakeTimeoutMs + 3000), ND_IO_TIMEOUT);
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t0).count();
  CHECK(ms >= kHandshakeTimeoutMs - 50 && ms < kHandshakeTimeoutMs + 3000);
  Bytes rx;
  CHECK(recv_until_eof(c.fd, &rx, 3000));  // the connection is closed
  check_completions(c, Expect{});          // the posted receives are flushed
  teardown(c);
}

// A Request that never completes: the responder drops it after its 5 s timer (checked at the end).
// ---- same host: the rings are the peer's to scribble on (docs/shm.md "Threat model") -------------------------
// Direction 0 of the mapping carries hostile → victim; its control block is the first of the page (shm/link.cc).
shm::RingControl* victim_rx_control(Conn& c) { return reinterpret_cast<shm::RingControl*>(c.link->shared_bytes()); }
shm::RingControl* victim_tx_control(Conn& c) {
  return reinterpret_cast<shm::RingControl*>(c.link->shared_bytes() + 1024);
}

void test_same_host() {
  Posts po;
  po.shm = true;
  const TermCode stag = ddp_t(DdpTaggedErr::kInvalidStag);
  const TermCode bounds = ddp_t(DdpTaggedErr::kBaseBounds);
  // The checks a TCP peer meets decide what lands from the ring too.
  run("shm: write random stag", po,
      [](Conn& c) { return frame(tagged(RdmapOpcode::kWrite, true, 0xDEADBEEFu, rw_base(), pat(8)), c.crc); },
      term(stag));
  run("shm: write read-only region", po,
      [](Conn& c) { return frame(tagged(RdmapOpcode::kWrite, true, ro_token(), g_mem->addr(kRoOff), pat(8)), c.crc); },
      term(stag));
  {
    Expect e = term(bounds);
    e.allowed.push_back(Range{kRwOff, 64});
    run("shm: a write lands, the next one past the end is refused", po,
        [](Conn& c) {
          return frame(tagged(RdmapOpcode::kWrite, true, rw_token(), rw_base(), pat(64, 0x41)), c.crc) +
                 frame(tagged(RdmapOpcode::kWrite, true, rw_token(), rw_base() + kRwSize - 4, pat(8)), c.crc);
        },
        e);
    CHECK(std::memcmp(g_mem->p(kRwOff), pat(64, 0x41).data(), 64) == 0);
  }
  run("shm: read request for a local-only region", po,
      [](Conn& c) {
        return frame(rreq_u(1, kRemoteFakeStag, 0, 16, loc_token(), g_mem->addr(kLocOff + kSrcOff)), c.crc);
      },
      term(rdmap(RdmapEtype::kRemoteProtection, RdmapErr::kAccessRights)));  // as over TCP (test_read_requests)
  // Indices that cannot be: the victim ends the connection (no Terminate needed: its stream is broken).
  {
    Expect e;
    e.shutdown_after = false;
    run("shm: head published far ahead of the ring", po,
        [](Conn& c) {
          victim_rx_control(c)->head.store(uint64_t{1} << 40);
          c.link->kick_peer();
          return Bytes{};
        },
        e);
    run("shm: head published behind the victim's tail", po,
        [](Conn& c) {
          victim_rx_control(c)->head.store(~uint64_t{0});
          c.link->kick_peer();
          return Bytes{};
        },
        e);
    run("shm: tail of the victim's ring moved ahead of its head, then a Read to answer", po,
        [](Conn& c) {
          // Take what the victim sent so far first: reading later would publish our honest tail over the bad one.
          uint8_t buf[4096];
          for (auto quiet = Clock::now() + std::chrono::milliseconds(20); Clock::now() < quiet;) {
            const ptrdiff_t n = c.link->recv(buf, sizeof buf);
            if (n > 0) {
              c.rx.insert(c.rx.end(), buf, buf + n);
              quiet = Clock::now() + std::chrono::milliseconds(20);
            }
          }
          victim_tx_control(c)->tail.store(uint64_t{1} << 50);
          return frame(rreq_u(1, kRemoteFakeStag, 0, 16, ro_token(), g_mem->addr(kRoOff)), c.crc);
        },
        e);
  }
  // Random bytes with valid indices (lengths that lie), and random bytes over the whole mapping (control blocks
  // too): closed in bounded time, nothing placed anywhere.
  for (uint32_t seed = 1; seed <= 8; ++seed) {
    Expect e;
    e.shutdown_after = true;  // a length that promises more than comes: the socket's end ends the wait
    e.recv_success = 2;
    run("shm: random stream, seed " + std::to_string(seed), po,
        [seed](Conn&) {
          std::mt19937 r(seed);
          Bytes b(1 + r() % 9000);
          for (auto& x : b) x = static_cast<uint8_t>(r());
          return b;
        },
        e);
    Expect s;
    s.shutdown_after = true;
    s.recv_success = 2;
    run("shm: random bytes over the whole mapping, seed " + std::to_string(seed), po,
        [seed](Conn& c) {
          std::mt19937 r(seed * 7919);
          uint8_t* m = c.link->shared_bytes();
          for (size_t i = 0; i < c.link->shared_size(); ++i) m[i] = static_cast<uint8_t>(r());
          c.link->kick_peer();
          return Bytes{};
        },
        s);
  }
}

// ---- same host: placement by the initiator (shm/place.h, docs/shm.md "Placement by the initiator") -------------
// The hostile side is an initiator of ours here: its Link's Placer writes into this process (CMA to itself is
// always allowed), against the table the victim publishes.

// Probes, then sends one Write through the ring so that the victim processes it, sees the proof and publishes its
// table; true once the table is on and everything sent is processed.
bool place_ready(Conn& c) {
  CHECK(c.link->placer().probe() == shm::Placer::Probe::kOn);
  CHECK(hostile_send(c, frame(tagged(RdmapOpcode::kWrite, true, rw_token(), rw_base(), pat(8, 0x11)), c.crc)));
  shm::PlaceArea* a = c.link->peer_place_area();
  const auto until = Clock::now() + std::chrono::milliseconds(3000);
  while (Clock::now() < until) {
    if (a->enabled.load() == 1 && a->processed.load() == c.link->tx_produced()) return true;
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  CHECK(!"the victim published its table");
  return false;
}

bool place_bytes(Conn& c, uint32_t stag, uint64_t to, const Bytes& b) {
  iovec v{const_cast<uint8_t*>(b.data()), b.size()};
  return c.link->placer().place(stag, to, &v, 1, b.size(), c.link->tx_produced());
}

// One round of "deregister while Writes are being placed": a thread places `n` bytes of pattern `seed` into the
// region over [p, p + n) until told to stop; once one landed, the region is deregistered and the application
// reuses the memory at once (0xEE). Nothing placed may land after Deregister returned.
void deregister_while_placing(Conn& c, IND2MemoryRegion* mr, uint8_t* p, size_t n, uint8_t seed) {
  const uint32_t tok = mr->GetRemoteToken();
  const uint64_t at = reinterpret_cast<uintptr_t>(p);
  std::atomic<bool> stop{false};
  std::atomic<uint64_t> ok{0};
  std::thread placer([&] {
    const Bytes b = pat(n, seed);
    while (!stop.load()) {
      if (place_bytes(c, tok, at, b)) ok++;
    }
  });
  const auto until = Clock::now() + std::chrono::milliseconds(3000);
  while (ok.load() == 0 && Clock::now() < until) std::this_thread::yield();
  CHECK(ok.load() > 0);
  dereg(mr);
  std::memset(p, 0xEE, n);
  std::this_thread::sleep_for(std::chrono::milliseconds(5));
  stop = true;
  placer.join();
  CHECK(std::all_of(p, p + n, [](uint8_t v) { return v == 0xEE; }));
}

void test_same_host_placement() {
  // Where placing pays (Placer::worth_it): a burst of Writes with nothing back is placed, a longer stream goes through
  // the ring until the target says something; a target that keeps polling its ring takes Writes from there.
  {
    g_test = "shm place: a stream takes the ring after a burst";
    shm::Placer p;
    uint64_t polls = 0, sent = 0;
    for (uint32_t i = 0; i < shm::kPlaceBurst; ++i) CHECK(p.worth_it(true, polls, sent));
    CHECK(!p.worth_it(true, polls, sent));
    CHECK(!p.worth_it(false, polls, sent));
    sent += 64;  // the target answered (its ring, or a Write it placed into us)
    CHECK(p.worth_it(true, polls, sent));
    CHECK(p.worth_it(false, polls, sent));  // a target that does not look at its ring: spins on memory, or sleeps
    polls += 2;
    CHECK(!p.worth_it(false, polls, sent));  // one that keeps looking takes it from the ring
    CHECK(p.worth_it(true, polls, sent));    // asleep on its doorbell again
  }
  Posts idle;
  idle.shm = true;
  idle.read = idle.write = idle.send = false;
  // Lands at once, with nothing of the victim's running for it; two pieces gathered into one placement.
  {
    g_test = "shm place: a Write lands by the initiator's copy";
    g_mem->pattern();
    Conn c;
    if (setup(c, idle) && place_ready(c)) {
      const Bytes a = pat(24, 0x61), b = pat(40, 0x71);
      iovec v[2] = {{const_cast<uint8_t*>(a.data()), a.size()}, {const_cast<uint8_t*>(b.data()), b.size()}};
      CHECK(c.link->placer().place(rw_token(), rw_base() + 256, v, 2, 64, c.link->tx_produced()));
      CHECK(std::memcmp(g_mem->p(kRwOff + 256), a.data(), a.size()) == 0);
      CHECK(std::memcmp(g_mem->p(kRwOff + 256 + a.size()), b.data(), b.size()) == 0);
      // The whole region, to its last byte.
      CHECK(place_bytes(c, rw_token(), rw_base() + kRwSize - 8, pat(8, 0x21)));
      CHECK(std::memcmp(g_mem->p(kRwOff + kRwSize - 8), pat(8, 0x21).data(), 8) == 0);
      CHECK(c.link->placer().placed() == 2);
      // A byte in the ring not yet processed by the victim: the next Write must go after it, through the ring.
      const uint64_t produced = c.link->tx_produced();
      Bytes x = pat(8, 0x31);
      iovec xv{x.data(), x.size()};
      CHECK(!c.link->placer().place(rw_token(), rw_base() + 512, &xv, 1, 8, produced + 1));
    }
    teardown(c);
  }
  // Whatever the victim would refuse is not placed: the ring then carries it and the victim answers as over TCP.
  struct Refused {
    const char* name;
    std::function<uint32_t()> stag;
    std::function<uint64_t()> to;
    size_t len;
    TermCode code;
  };
  const TermCode bad_stag = ddp_t(DdpTaggedErr::kInvalidStag);
  const TermCode bounds = ddp_t(DdpTaggedErr::kBaseBounds);
  const Refused cases[] = {
      {"shm place: wrong token", [] { return 0xDEADBEEFu; }, [] { return rw_base(); }, 8, bad_stag},
      {"shm place: token of another region, this one's address", [] { return ro_token(); }, [] { return rw_base(); },
       8, bad_stag},
      {"shm place: read-only region", [] { return ro_token(); }, [] { return g_mem->addr(kRoOff); }, 8, bad_stag},
      {"shm place: one byte past the end", [] { return rw_token(); }, [] { return rw_base() + kRwSize - 7; }, 8,
       bounds},
      {"shm place: before the start", [] { return rw_token(); }, [] { return rw_base() - 8; }, 16, bounds},
      {"shm place: address that wraps", [] { return rw_token(); }, [] { return ~uint64_t{0} - 3; }, 8, bounds},
  };
  for (const Refused& k : cases) {
    g_test = k.name;
    g_mem->pattern();
    Conn c;
    if (setup(c, idle) && place_ready(c)) {
      c.snap = g_mem->buf;
      CHECK(!place_bytes(c, k.stag(), k.to(), pat(k.len, 0x41)));
      CHECK(c.link->placer().placed() == 0);
      finish(c, frame(tagged(RdmapOpcode::kWrite, true, k.stag(), k.to(), pat(k.len, 0x41)), c.crc), term(k.code));
    }
    teardown(c);
  }
  // A deregistered region and an invalidated window are taken back before Deregister / Invalidate complete.
  {
    g_test = "shm place: deregistered region";
    g_mem->pattern();
    Conn c;
    Bytes mine(256, 0);
    if (setup(c, idle) && place_ready(c)) {
      IND2MemoryRegion* mr =
          reg_at(mine.data(), mine.size(), ND_MR_FLAG_ALLOW_LOCAL_WRITE | ND_MR_FLAG_ALLOW_REMOTE_WRITE);
      const uint32_t tok = mr->GetRemoteToken();
      const uint64_t at = reinterpret_cast<uintptr_t>(mine.data());
      CHECK(place_bytes(c, tok, at, pat(16, 0x51)));
      CHECK(std::memcmp(mine.data(), pat(16, 0x51).data(), 16) == 0);
      dereg(mr);
      std::fill(mine.begin(), mine.end(), 0xEE);
      CHECK(!place_bytes(c, tok, at, pat(16, 0x52)));
      CHECK(std::all_of(mine.begin(), mine.end(), [](uint8_t v) { return v == 0xEE; }));
      c.snap = g_mem->buf;
      finish(c, frame(tagged(RdmapOpcode::kWrite, true, tok, at, pat(16, 0x52)), c.crc), term(bad_stag));
      CHECK(std::all_of(mine.begin(), mine.end(), [](uint8_t v) { return v == 0xEE; }));
    }
    teardown(c);
  }
  {
    g_test = "shm place: invalidated window";
    g_mem->pattern();
    Conn c;
    if (setup(c, idle) && place_ready(c)) {
      void* p = nullptr;
      CHECK_ST(g_adapter->CreateMemoryWindow(IID_IND2MemoryWindow, &p), ND_SUCCESS);
      auto* mw = as<IND2MemoryWindow>(p);
      CHECK_ST(c.qp->Bind(reinterpret_cast<void*>(kCtxBind), g_mem->rw, mw, g_mem->p(kRwOff + 1024), 256,
                          ND_OP_FLAG_ALLOW_WRITE),
               ND_SUCCESS);
      const uint32_t wt = mw->GetRemoteToken();
      CHECK(place_bytes(c, wt, g_mem->addr(kRwOff + 1024), pat(8, 0x53)));
      CHECK(!place_bytes(c, wt, g_mem->addr(kRwOff + 1024 + 252), pat(8, 0x54)));  // the window's bounds
      CHECK_ST(c.qp->Invalidate(reinterpret_cast<void*>(0x1A), mw, 0), ND_SUCCESS);
      CHECK(!place_bytes(c, wt, g_mem->addr(kRwOff + 1024), pat(8, 0x55)));
      // The Bind and the Invalidate complete in order.
      for (int k = 0; k < 2; ++k) {
        ND2_RESULT r{};
        const auto until = Clock::now() + std::chrono::milliseconds(2000);
        while (c.cq->GetResults(&r, 1) == 0 && Clock::now() < until) std::this_thread::sleep_for(std::chrono::microseconds(100));
        CHECK_ST(r.Status, ND_SUCCESS);
      }
      c.snap = g_mem->buf;
      finish(c, frame(tagged(RdmapOpcode::kWrite, true, wt, g_mem->addr(kRwOff + 1024), pat(8, 0x55)), c.crc),
             term(bad_stag));
      mw->Release();
    }
    teardown(c);
  }
  // Deregistration while placements fly: once Deregister completed, nothing lands any more.
  {
    g_test = "shm place: deregister while Writes are being placed";
    g_mem->pattern();
    Conn c;
    if (setup(c, idle) && place_ready(c)) {
      for (int round = 0; round < 20; ++round) {
        std::vector<uint8_t> mine(64 * 1024, 0);
        IND2MemoryRegion* mr =
            reg_at(mine.data(), mine.size(), ND_MR_FLAG_ALLOW_LOCAL_WRITE | ND_MR_FLAG_ALLOW_REMOTE_WRITE);
        deregister_while_placing(c, mr, mine.data(), mine.size(), static_cast<uint8_t>(round));
      }
      c.snap = g_mem->buf;
      Expect e;
      e.shutdown_after = true;  // the victim sees the end of the connection and closes
      finish(c, Bytes{}, e);
    }
    teardown(c);
  }
}

// Mapped regions (docs/shm.md "Mapped regions"): memory from INDSharedBuffers lies in a memfd the victim hands to a
// peer that passed the proof; the peer's Placer maps it and places with a store.
struct Mapped {
  IUnknown* owner = nullptr;
  uint8_t* p = nullptr;
  size_t n = 0;
  Mapped() = default;
  Mapped(const Mapped&) = delete;
  Mapped& operator=(const Mapped&) = delete;
  ~Mapped() {
    if (owner != nullptr) owner->Release();
  }
};

bool alloc_mapped(size_t n, Mapped* m) {
  INDSharedBuffers* sb = nullptr;
  CHECK_ST(g_adapter->QueryInterface(IID_INDSharedBuffers, reinterpret_cast<void**>(&sb)), ND_SUCCESS);
  if (sb == nullptr) return false;
  void* at = nullptr;
  CHECK_ST(sb->AllocateBuffer(n, &m->owner, &at), ND_SUCCESS);
  sb->Release();
  m->p = static_cast<uint8_t*>(at);
  m->n = n;
  return m->p != nullptr;
}

// The victim's published entry for `stag` (the hostile side can write it: the table lives in the shared mapping).
shm::PlaceEntry* entry_of(Conn& c, uint32_t stag) {
  for (shm::PlaceEntry& e : c.link->peer_place_area()->entries) {
    const uint32_t g = e.gen.load();
    if (g != 0 && (g & 1) == 0 && e.stag.load() == stag) return &e;
  }
  return nullptr;
}

// Messages waiting on our end of the side channel.
bool side_channel_empty(Conn& c) {
  char b[64];
  return recv(c.link->side_channel(), b, sizeof b, MSG_PEEK | MSG_DONTWAIT) < 0 && errno == EAGAIN;
}

void test_same_host_mapped() {
  Posts idle;
  idle.shm = true;
  idle.read = idle.write = idle.send = false;
  const ULONG rw = ND_MR_FLAG_ALLOW_LOCAL_WRITE | ND_MR_FLAG_ALLOW_REMOTE_WRITE;
  {
    g_test = "shm place: a mapped region takes a store, gathered, at every size, to its last byte";
    g_mem->pattern();
    Conn c;
    Mapped m;
    if (setup(c, idle) && place_ready(c) && alloc_mapped(256 * 1024 + 100, &m)) {
      IND2MemoryRegion* mr = reg_at(m.p + 100, 256 * 1024, rw);  // not at the memfd's start
      const uint32_t tok = mr->GetRemoteToken();
      const uint64_t at = reinterpret_cast<uintptr_t>(m.p + 100);
      CHECK(entry_of(c, tok) != nullptr && entry_of(c, tok)->map_id.load() != 0);
      std::mt19937 r(5);
      uint64_t n = 0;
      for (uint64_t len : {uint64_t{1}, uint64_t{2}, uint64_t{7}, uint64_t{8}, uint64_t{63}, uint64_t{64}, uint64_t{65},
                           uint64_t{4095}, uint64_t{4096}, uint64_t{4097}, uint64_t{65536}, uint64_t{256 * 1024}}) {
        const uint64_t off = len == 256 * 1024 ? 0 : r() % (256 * 1024 - len + 1);
        const Bytes b = pat(len, static_cast<uint8_t>(len * 7 + 1));
        // Two pieces (the gather of a Write from two SGEs), split anywhere.
        const size_t cut = static_cast<size_t>(r() % (len + 1));
        iovec v[2] = {{const_cast<uint8_t*>(b.data()), cut}, {const_cast<uint8_t*>(b.data()) + cut, len - cut}};
        std::memset(m.p, 0xEE, m.n);
        CHECK(c.link->placer().place(tok, at + off, v, 2, len, c.link->tx_produced()));
        CHECK(std::memcmp(m.p + 100 + off, b.data(), len) == 0);
        // Nothing else in the memfd changed.
        bool rest = true;
        for (size_t i = 0; i < m.n; ++i) {
          if ((i < 100 + off || i >= 100 + off + len) && m.p[i] != 0xEE) rest = false;
        }
        CHECK(rest);
        ++n;
      }
      CHECK(c.link->placer().placed_mapped() == n);
      CHECK(c.link->placer().mappings() == 1);
      dereg(mr);
      // The memfd is given back: the next placement attempt unmaps it.
      CHECK(!place_bytes(c, tok, at, pat(8, 0x12)));
      CHECK(c.link->placer().mappings() == 0);
    }
    teardown(c);
  }
  // Deregistration while stores fly: once Deregister completed, nothing lands any more, though the peer still maps
  // the memory.
  {
    g_test = "shm place: a mapped region deregistered while Writes are being placed into it";
    g_mem->pattern();
    Conn c;
    if (setup(c, idle) && place_ready(c)) {
      for (int round = 0; round < 20; ++round) {
        Mapped m;
        if (!alloc_mapped(64 * 1024, &m)) break;
        std::memset(m.p, 0, m.n);
        IND2MemoryRegion* mr = reg_at(m.p, m.n, rw);
        const uint64_t mapped_before = c.link->placer().placed_mapped();
        deregister_while_placing(c, mr, m.p, m.n, static_cast<uint8_t>(round));
        CHECK(c.link->placer().placed_mapped() > mapped_before);  // by stores, not process_vm_writev
      }
      c.snap = g_mem->buf;
      Expect e;
      e.shutdown_after = true;
      finish(c, Bytes{}, e);
    }
    teardown(c);
  }
  // A lying entry (the table is in the shared mapping: the peer it is published for can write it, and so could
  // the target itself) never makes the initiator write outside the mapping it received.
  {
    g_test = "shm place: a lying entry cannot move a store outside the mapping";
    g_mem->pattern();
    Conn c;
    Mapped m;
    if (setup(c, idle) && place_ready(c) && alloc_mapped(8192, &m)) {
      std::memset(m.p, 0, m.n);
      IND2MemoryRegion* mr = reg_at(m.p, 4096, rw);
      const uint32_t tok = mr->GetRemoteToken();
      const uint64_t at = reinterpret_cast<uintptr_t>(m.p);
      CHECK(place_bytes(c, tok, at, pat(8, 0x31)));  // maps the memfd (8192 bytes: two pages)
      CHECK(c.link->placer().mappings() == 1);
      shm::PlaceEntry* e = entry_of(c, tok);
      CHECK(e != nullptr);
      if (e != nullptr) {
        const uint64_t mapped_before = c.link->placer().placed_mapped();
        struct Lie {
          uint64_t length, map_offset, to_off, len;
          bool placed;
        };
        const Lie lies[] = {
            {4096, 8192 - 4, 0, 8, false},                  // the offset puts the end past the mapping
            {4096, 8192, 0, 1, false},                      // the offset is the mapping's end
            {4096, ~uint64_t{0} - 2, 0, 8, false},          // the offset wraps
            {uint64_t{1} << 40, 0, 8192, 8, false},         // a length past the memfd: the address past the mapping
            {uint64_t{1} << 40, 4096, 4096, 8, false},      // both: inside the entry, past the mapping
            {~uint64_t{0} - at, 1, ~uint64_t{0} - at - 8, 8, false},  // a length to the end of the address space
            {4096, 4096, 100, 8, true},                     // inside the memfd: lands where the lie says, in it
        };
        for (const Lie& l : lies) {
          e->length.store(l.length);
          e->map_offset.store(l.map_offset);
          const Bytes b = pat(l.len, 0x44);
          const bool placed = place_bytes(c, tok, at + l.to_off, b);
          CHECK(placed == l.placed);
        }
        CHECK(c.link->placer().placed_mapped() == mapped_before + 1);
        CHECK(std::memcmp(m.p + 4096 + 100, pat(8, 0x44).data(), 8) == 0);
        // An id the target never handed over: placed by process_vm_writev, where the entry's address says.
        e->length.store(4096);
        e->map_offset.store(0);
        e->map_id.store(e->map_id.load() + 1000);
        CHECK(place_bytes(c, tok, at + 200, pat(8, 0x45)));
        CHECK(c.link->placer().placed_mapped() == mapped_before + 1);
        CHECK(std::memcmp(m.p + 200, pat(8, 0x45).data(), 8) == 0);
      }
      dereg(mr);
    }
    teardown(c);
  }
}

// A same-user peer the kernel does not let write into us (here: we are not dumpable and it lacks CAP_SYS_PTRACE)
// never learns our table and places nothing: its Writes take the ring (docs/shm.md "Placement by the initiator").
void test_same_host_placement_refused() {
  g_test = "shm place: a peer without CMA rights uses the ring";
  g_mem->pattern();
  Posts idle;
  idle.shm = true;
  idle.read = idle.write = idle.send = false;
  Conn c;
  Mapped m;
  IND2MemoryRegion* mapped_mr = nullptr;
  if (alloc_mapped(4096, &m)) {
    mapped_mr = reg_at(m.p, m.n, ND_MR_FLAG_ALLOW_LOCAL_WRITE | ND_MR_FLAG_ALLOW_REMOTE_WRITE);
  }
  if (setup(c, idle)) {
    CHECK(prctl(PR_SET_DUMPABLE, 0) == 0);
    const pid_t pid = fork();
    if (pid == 0) {
      __user_cap_header_struct h{_LINUX_CAPABILITY_VERSION_3, 0};
      __user_cap_data_struct d[2] = {};
      if (syscall(SYS_capget, &h, d) != 0) _exit(20);
      d[0].effective &= ~(1u << CAP_SYS_PTRACE);
      d[0].permitted &= ~(1u << CAP_SYS_PTRACE);
      d[0].inheritable &= ~(1u << CAP_SYS_PTRACE);
      if (syscall(SYS_capset, &h, d) != 0) _exit(21);
      if (c.link->placer().probe() != shm::Placer::Probe::kOff) _exit(22);
      if (place_bytes(c, rw_token(), rw_base() + 64, pat(8, 0x61))) _exit(23);
      if (!link_send_all(*c.link, frame(tagged(RdmapOpcode::kWrite, true, rw_token(), rw_base() + 64, pat(8, 0x61)),
                                        c.crc))) {
        _exit(24);
      }
      _exit(0);
    }
    int status = 0;
    CHECK(waitpid(pid, &status, 0) == pid);
    CHECK(prctl(PR_SET_DUMPABLE, 1) == 0);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) std::printf("  child status %d\n", status);
    // The child's Write came through the ring; the victim's table never went public.
    const auto until = Clock::now() + std::chrono::milliseconds(3000);
    while (std::memcmp(g_mem->p(kRwOff + 64), pat(8, 0x61).data(), 8) != 0 && Clock::now() < until) {
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
    CHECK(std::memcmp(g_mem->p(kRwOff + 64), pat(8, 0x61).data(), 8) == 0);
    CHECK(c.link->peer_place_area()->enabled.load() == 0);
    for (const shm::PlaceEntry& e : c.link->peer_place_area()->entries) CHECK(e.gen.load() == 0);
    // Nor was any memfd of a mapped region handed over (fd handover needs the proof, as the table).
    CHECK(c.link->peer_place_area()->regions_sent.load() == 0);
    CHECK(side_channel_empty(c));
    CHECK(c.link->placer().mappings() == 0);
  }
  teardown(c);
  if (mapped_mr != nullptr) dereg(mapped_mr);
}

// A process of another uid can neither take the listener's offers nor be offered rings (docs/shm.md).
void test_same_host_other_uid() {
  g_test = "shm: another uid cannot attach";
  if (geteuid() != 0) {
    std::printf("  (skipped: needs root to make a second uid)\n");
    return;
  }
  int sync_pipe[2];
  CHECK(::pipe(sync_pipe) == 0);
  const pid_t pid = fork();
  if (pid == 0) {
    ::close(sync_pipe[0]);
    if (setgid(65534) != 0 || setuid(65534) != 0) _exit(10);
    // Through our own code: the listener answers as another uid, so no offer is made.
    int fd = tcp_connect(g_port);
    if (fd < 0) _exit(11);
    if (shm::Handshake::offer(fd) != nullptr) _exit(12);
    ::close(fd);
    // By hand: connect to the side channel and send an offer without descriptors; the listener must close it.
    const int u = socket(AF_UNIX, SOCK_SEQPACKET, 0);
    sockaddr_un un{};
    un.sun_family = AF_UNIX;
    net::Address la;
    sockaddr_in lo = loopback(g_port);
    net::address_from(reinterpret_cast<sockaddr*>(&lo), sizeof lo, &la);
    const std::string name = shm::rendezvous_name(la);
    std::memcpy(un.sun_path + 1, name.data(), name.size());
    const socklen_t len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + name.size());
    if (connect(u, reinterpret_cast<sockaddr*>(&un), len) != 0) _exit(13);
    uint8_t junk[96] = {'N', 'D', 'S', 'H', 'M', 'v', '1', 0, 1};
    if (send(u, junk, sizeof junk, MSG_NOSIGNAL) != static_cast<ssize_t>(sizeof junk)) _exit(14);
    (void)!::write(sync_pipe[1], "x", 1);  // the parent now makes the listener look at its side channel
    pollfd p{u, POLLIN, 0};
    if (::poll(&p, 1, 5000) <= 0) _exit(15);
    uint8_t b[128];
    const ssize_t r = ::recv(u, b, sizeof b, MSG_DONTWAIT);
    _exit(r == 0 || (r < 0 && errno == ECONNRESET) ? 0 : 16);  // closed, nothing said
  }
  ::close(sync_pipe[1]);
  char x;
  CHECK(::read(sync_pipe[0], &x, 1) == 1);
  ::close(sync_pipe[0]);
  Posts po;
  po.shm = true;
  run("shm: another uid's offer is dropped, ours still works", po,
      [](Conn& c) { return frame(tagged(RdmapOpcode::kWrite, true, 0xDEADBEEFu, rw_base(), pat(8)), c.crc); },
      term(ddp_t(DdpTaggedErr::kInvalidStag)));
  g_test = "shm: another uid cannot attach";
  int status = 0;
  CHECK(waitpid(pid, &status, 0) == pid);
  CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) std::printf("  child status %d\n", status);
}

int g_stalled_fd = -1;
Clock::time_point g_stalled_since;

}  // namespace

int main(int argc, char** argv) {
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  int mutations = argc > 1 ? std::atoi(argv[1]) : 2000;
  const int random_guesses = argc > 2 ? std::atoi(argv[2]) : 1024;
  setenv("NETDIRECT_HANDSHAKE_TIMEOUT_MS", std::to_string(kHandshakeTimeoutMs).c_str(), 1);  // read by OpenAdapter
  void* p = nullptr;
  HRESULT hr = NdSoftGetProvider(IID_IND2Provider, &p);
  if (hr != ND_SUCCESS) {
    std::printf("no provider\n0 passed, 1 failed\n");
    return 1;
  }
  auto* provider = static_cast<IND2Provider*>(p);
  sockaddr_in lo = loopback(0);
  UINT64 id = 0;
  CHECK_ST(provider->ResolveAddress(reinterpret_cast<sockaddr*>(&lo), sizeof lo, &id), ND_SUCCESS);
  CHECK_ST(provider->OpenAdapter(IID_IND2Adapter, id, &p), ND_SUCCESS);
  g_adapter = static_cast<IND2Adapter*>(p);
  provider->Release();
  if (g_adapter == nullptr) {
    std::printf("%d passed, %d failed\n", g_passed, g_failed + 1);
    return 1;
  }
  CHECK_ST(g_adapter->CreateOverlappedFile(&g_file), ND_SUCCESS);
  {
    // The listener offers the same-host side channel (docs/shm.md): only test_same_host's peers use it.
    INDSharedMemory* shm = nullptr;
    CHECK_ST(g_adapter->QueryInterface(IID_INDSharedMemory, reinterpret_cast<void**>(&shm)), ND_SUCCESS);
    if (shm != nullptr) {
      CHECK_ST(shm->SetSharedMemory(TRUE), ND_SUCCESS);
      shm->Release();
    }
  }
  CHECK_ST(g_adapter->CreateListener(IID_IND2Listener, g_file, &p), ND_SUCCESS);
  g_listener = static_cast<IND2Listener*>(p);
  sockaddr_in a = loopback(0);
  CHECK_ST(g_listener->Bind(reinterpret_cast<sockaddr*>(&a), sizeof a), ND_SUCCESS);
  CHECK_ST(g_listener->Listen(0), ND_SUCCESS);
  ULONG cb = sizeof a;
  CHECK_ST(g_listener->GetLocalAddress(reinterpret_cast<sockaddr*>(&a), &cb), ND_SUCCESS);
  g_port = ntohs(a.sin_port);

  Mem mem;
  g_mem = &mem;
  mem.pattern();
  mem.rw = reg(kRwOff, kRwSize, ND_MR_FLAG_ALLOW_LOCAL_WRITE | ND_MR_FLAG_ALLOW_REMOTE_READ | ND_MR_FLAG_ALLOW_REMOTE_WRITE);
  Bytes hidden(4096, 0x5A);
  g_hidden = &hidden;
  IND2MemoryRegion* hidden_mr = reg_at(hidden.data(), hidden.size(),
                                       ND_MR_FLAG_ALLOW_LOCAL_WRITE | ND_MR_FLAG_ALLOW_REMOTE_WRITE);
  mem.loc = reg(kLocOff, kLocSize, ND_MR_FLAG_ALLOW_LOCAL_WRITE);
  mem.ro = reg(kRoOff, kRoSize, ND_MR_FLAG_ALLOW_REMOTE_READ);

  g_stalled_fd = tcp_connect(g_port);
  const Bytes stalled = mpa_request(true, false, 1, 1);
  send_all(g_stalled_fd, Bytes(stalled.begin(), stalled.begin() + 7));
  g_stalled_since = Clock::now();

  const auto t0 = Clock::now();
  test_mpa_requests();
  test_mpa_replies();
  test_framing();
  test_versions_opcodes_qn();
  test_msn_mo();
  test_tagged_writes();
  test_read_requests();
  test_read_responses();
  test_terminates_received();
  test_terminate_then_reset();
  test_send_invalidate();
  test_unanswered_reads();
  test_crc_and_truncation();
  test_slow_loris();
  test_p2p_rtr();
  test_withheld_rtr();
  test_stag_guessing(random_guesses);
  test_same_host();
  test_same_host_other_uid();
  test_same_host_placement();
  test_same_host_mapped();
  test_same_host_placement_refused();
  std::printf("cases: %.1f s\n", std::chrono::duration<double>(Clock::now() - t0).count());
  test_mutations(mutations, 20240611u);

  g_test = "stalled request dropped by the responder's timer";
  {
    Bytes rx;
    const auto waited = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - g_stalled_since).count();
    CHECK(recv_until_eof(g_stalled_fd, &rx, static_cast<int>(std::max<long long>(0, 6500 - waited)) + 200));
    CHECK(rx.empty());
    ::close(g_stalled_fd);
  }

  dereg(hidden_mr);
  dereg(mem.rw);
  dereg(mem.loc);
  dereg(mem.ro);
  g_listener->Release();
  CloseHandle(g_file);
  g_adapter->Release();
  return finish();
}

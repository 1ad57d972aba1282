// ndbench's native TCP baseline: the same patterns as the RDMA tests (ping-pong for *_lat, a one-way stream for
// *_bw) over plain TCP sockets, run on a libuv worker thread so that the JS thread of the process stays free.
// Not part of the ND stack: it only gives `ndbench --compare tcp` a figure taken in the same run.
//
//   tcpBenchListen(host, port) -> { fd, port }     a listening socket (port 0: ephemeral)
//   tcpBenchClose(fd)                               closes a listening socket that will not be used
//   tcpBenchRun(params) -> Promise<result>          one side of one measurement (see RunParams)
//
// Ping-pong: the client sends `size` bytes, the server answers `replySize` bytes once it has them all (replySize
// = size for write/send, small request + size reply for read). The server echoes until EOF. Stream: the sender
// writes `size`-byte messages, then shuts its write side; the receiver reads to EOF and answers with the byte
// count (8 bytes), which stops the sender's clock. Every wait is bounded by timeoutMs.
// Its sockets are the software provider's socket seam (binding/soft/net/socket.h: non-blocking TCP, POSIX and
// Winsock), the same calls the provider's connections make.
#include <napi.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#ifndef _WIN32
#include <sys/uio.h>  // iovec (the seam's own on Windows)
#endif

#include "bench/bench.h"
#include "soft/net/socket.h"

namespace netdirect {
namespace {

namespace net = soft::net;
using Sock = net::Socket;
constexpr Sock kBad = net::kInvalidSocket;

std::string ErrorText(int negativeErrno) { return std::strerror(-negativeErrno); }

using Clock = std::chrono::steady_clock;

int64_t NowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch()).count();
}

struct RunParams {
  bool server = false;
  int64_t listenFd = -1;  // server: from tcpBenchListen
  std::string host;       // client
  uint32_t port = 0;      // client
  bool pingpong = true;
  bool sender = true;     // stream: this side sends
  size_t size = 0;
  size_t replySize = 0;
  uint64_t iters = 1000;
  uint64_t warmup = 0;
  double durationMs = 0;  // > 0: run for this long instead of `iters`
  bool spin = false;      // busy-poll with non-blocking sockets instead of blocking calls
  int timeoutMs = 60000;
};

struct RunResult {
  std::vector<double> samples;  // ping-pong client: RTT of each measured iteration, ns
  uint64_t iterations = 0;
  uint64_t bytes = 0;
  int64_t elapsedNs = 0;
};

// One connected socket with bounded, optionally busy-polling I/O. Errors carry a message for the promise.
class Conn {
 public:
  // s is non-blocking (net::tcp_socket, net::accept_from).
  Conn(Sock s, bool spin, int timeoutMs) : s_(s), spin_(spin), timeoutMs_(timeoutMs) { net::set_nodelay(s_); }
  ~Conn() { net::close_socket(s_); }
  Conn(const Conn&) = delete;
  Conn& operator=(const Conn&) = delete;

  // Reads exactly n bytes; false on EOF before the first byte (*eof set), throws-by-message on error.
  bool ReadFull(uint8_t* p, size_t n, bool* eof, std::string* err) {
    size_t got = 0;
    *eof = false;
    while (got < n) {
      const ptrdiff_t r = net::recv_bytes(s_, p + got, std::min<size_t>(n - got, 1 << 30));
      if (r > 0) {
        got += static_cast<size_t>(r);
        spinStart_ = 0;
        continue;
      }
      if (r == 0) {
        if (got == 0) {
          *eof = true;
          return false;
        }
        *err = "peer closed mid-message";
        return false;
      }
      if (r != -EAGAIN) {
        *err = "recv: " + ErrorText(static_cast<int>(r));
        return false;
      }
      if (!Wait(false, err)) return false;
    }
    return true;
  }

  // Reads what is available (waiting for at least one byte): > 0 bytes, 0 at EOF, -1 on error.
  int64_t ReadSome(uint8_t* p, size_t n, std::string* err) {
    for (;;) {
      const ptrdiff_t r = net::recv_bytes(s_, p, std::min<size_t>(n, 1 << 30));
      if (r >= 0) {
        spinStart_ = 0;
        return static_cast<int64_t>(r);
      }
      if (r != -EAGAIN) {
        *err = "recv: " + ErrorText(static_cast<int>(r));
        return -1;
      }
      if (!Wait(false, err)) return -1;
    }
  }

  bool WriteFull(const uint8_t* p, size_t n, std::string* err) {
    size_t put = 0;
    while (put < n) {
      iovec iov{const_cast<uint8_t*>(p + put), std::min<size_t>(n - put, 1 << 30)};
      const ptrdiff_t r = net::send_iov(s_, &iov, 1);  // no SIGPIPE (MSG_NOSIGNAL)
      if (r > 0) {
        put += static_cast<size_t>(r);
        spinStart_ = 0;
        continue;
      }
      if (r < 0 && r != -EAGAIN) {
        *err = "send: " + ErrorText(static_cast<int>(r));
        return false;
      }
      if (!Wait(true, err)) return false;
    }
    return true;
  }

  void ShutdownWrite() { net::shutdown_write(s_); }

 private:
  // Spin mode: return at once (the caller retries, i.e. busy-polls) until timeoutMs without progress; else
  // poll() for it.
  bool Wait(bool write, std::string* err) {
    if (spin_) {
      if (spinStart_ == 0) spinStart_ = NowNs();
      if (++spins_ % 4096 == 0 && NowNs() - spinStart_ > int64_t(timeoutMs_) * 1000000) {
        *err = "timed out";
        return false;
      }
      return true;
    }
    const int r = net::wait_ready(s_, write, timeoutMs_);
    if (r == 0) {
      *err = "timed out";
      return false;
    }
    if (r < 0 && r != -EINTR) {
      *err = "poll: " + ErrorText(r);
      return false;
    }
    return true;
  }

  Sock s_;
  bool spin_;
  int timeoutMs_;
  int64_t spinStart_ = 0;
  uint64_t spins_ = 0;
};

Sock AcceptOne(Sock listener, int timeoutMs, std::string* err) {
  const int r = net::wait_ready(listener, false, timeoutMs);
  if (r <= 0) {
    *err = r == 0 ? "accept timed out" : "poll: " + ErrorText(r);
    return kBad;
  }
  Sock s = net::accept_from(listener, nullptr);
  if (s == kBad) *err = "accept: " + ErrorText(-errno);
  return s;
}

Sock ConnectTo(const std::string& host, uint32_t port, int timeoutMs, std::string* err) {
  net::Address a;
  if (port > 65535 || !net::parse_numeric(host, static_cast<uint16_t>(port), &a)) {
    *err = "'" + host + "' is not a numeric IPv4/IPv6 address";
    return kBad;
  }
  const auto deadline = Clock::now() + std::chrono::milliseconds(timeoutMs);
  for (;;) {
    Sock s = net::tcp_socket(a.family());
    if (s == kBad) {
      *err = "socket: " + ErrorText(-errno);
      return kBad;
    }
    int r = net::connect_to(s, a);
    if (r == -EINPROGRESS) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
      r = net::wait_ready(s, true, static_cast<int>(std::max<int64_t>(left, 1)));
      r = r > 0 ? net::connect_result(s) : r == 0 ? -ETIMEDOUT : r;
    }
    if (r == 0) return s;
    net::close_socket(s);
    // The peer may not be listening yet: retry briefly on refusal.
    if (Clock::now() > deadline || r != -ECONNREFUSED) {
      *err = "connect: " + ErrorText(r);
      return kBad;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

bool RunPingPongClient(Conn& c, const RunParams& p, RunResult* out, std::string* err) {
  std::vector<uint8_t> tx(std::max<size_t>(p.size, 1), 0), rx(std::max<size_t>(p.replySize, 1), 0);
  bool eof = false;
  for (uint64_t i = 0; i < p.warmup; ++i) {
    tx[0] = static_cast<uint8_t>(i);
    if (!c.WriteFull(tx.data(), p.size, err) || !c.ReadFull(rx.data(), p.replySize, &eof, err)) {
      if (eof) *err = "server closed during warm-up";
      return false;
    }
  }
  const bool timed = p.durationMs > 0;
  const int64_t end = timed ? NowNs() + static_cast<int64_t>(p.durationMs * 1e6) : 0;
  out->samples.reserve(timed ? 1 << 16 : p.iters);
  const int64_t start = NowNs();
  for (uint64_t i = 0; timed || i < p.iters; ++i) {
    tx[0] = static_cast<uint8_t>(i);
    const int64_t t0 = NowNs();
    if (!c.WriteFull(tx.data(), p.size, err) || !c.ReadFull(rx.data(), p.replySize, &eof, err)) {
      if (eof) *err = "server closed during the test";
      return false;
    }
    const int64_t t1 = NowNs();
    out->samples.push_back(static_cast<double>(t1 - t0));
    if (timed && t1 >= end) break;
  }
  out->elapsedNs = NowNs() - start;
  out->iterations = out->samples.size();
  out->bytes = out->iterations * (p.size + p.replySize);
  return true;
}

bool RunPingPongServer(Conn& c, const RunParams& p, RunResult* out, std::string* err) {
  std::vector<uint8_t> rx(std::max<size_t>(p.size, 1), 0), tx(std::max<size_t>(p.replySize, 1), 0);
  for (;;) {
    bool eof = false;
    if (!c.ReadFull(rx.data(), p.size, &eof, err)) return eof;  // EOF between messages: the client is done
    tx[0] = rx[0];
    if (!c.WriteFull(tx.data(), p.replySize, err)) return false;
    out->iterations++;
  }
}

// Stream warm-up (p.warmup messages, untimed, as ndbench's RDMA side does): the sender sends them and waits
// for the receiver's 8-byte acknowledgement, so that the timed part starts with nothing in flight.
bool StreamWarmupSend(Conn& c, const RunParams& p, const std::vector<uint8_t>& tx, std::string* err) {
  if (p.warmup == 0) return true;
  for (uint64_t i = 0; i < p.warmup; ++i) {
    if (!c.WriteFull(tx.data(), p.size, err)) return false;
  }
  uint8_t ack[8];
  bool eof = false;
  if (!c.ReadFull(ack, sizeof(ack), &eof, err)) {
    if (eof) *err = "receiver closed during the warm-up";
    return false;
  }
  return true;
}

bool RunStreamSender(Conn& c, const RunParams& p, RunResult* out, std::string* err) {
  std::vector<uint8_t> tx(std::max<size_t>(p.size, 1), 0x5a);
  if (!StreamWarmupSend(c, p, tx, err)) return false;
  const bool timed = p.durationMs > 0;
  const int64_t start = NowNs();
  const int64_t end = timed ? start + static_cast<int64_t>(p.durationMs * 1e6) : 0;
  uint64_t n = 0;
  for (; timed || n < p.iters; ++n) {
    if (!c.WriteFull(tx.data(), p.size, err)) return false;
    if (timed && (n & 15) == 15 && NowNs() >= end) {
      ++n;
      break;
    }
  }
  c.ShutdownWrite();
  uint8_t ack[8];
  bool eof = false;
  if (!c.ReadFull(ack, sizeof(ack), &eof, err)) {
    if (eof) *err = "receiver closed without acknowledging";
    return false;
  }
  out->elapsedNs = NowNs() - start;
  out->iterations = n;
  uint64_t received = 0;
  std::memcpy(&received, ack, sizeof(received));
  out->bytes = received;
  if (received != n * p.size) {
    *err = "receiver counted " + std::to_string(received) + " bytes, sender sent " + std::to_string(n * p.size);
    return false;
  }
  return true;
}

bool RunStreamReceiver(Conn& c, const RunParams& p, RunResult* out, std::string* err) {
  // Reads in chunks of the message size (what a receiver of `size`-byte messages would post), at most 1 MiB.
  std::vector<uint8_t> rx(std::min<size_t>(std::max<size_t>(p.size, 4096), size_t(1) << 20));
  if (p.warmup > 0) {
    for (uint64_t left = p.warmup * p.size; left > 0;) {
      const int64_t r = c.ReadSome(rx.data(), std::min<uint64_t>(rx.size(), left), err);
      if (r <= 0) {
        if (r == 0) *err = "sender closed during the warm-up";
        return false;
      }
      left -= static_cast<uint64_t>(r);
    }
    uint8_t warm[8] = {0};
    if (!c.WriteFull(warm, sizeof(warm), err)) return false;
  }
  uint64_t total = 0;
  const int64_t start = NowNs();
  for (;;) {
    const int64_t r = c.ReadSome(rx.data(), rx.size(), err);
    if (r < 0) return false;
    if (r == 0) break;
    total += static_cast<uint64_t>(r);
  }
  out->bytes = total;
  out->elapsedNs = NowNs() - start;
  uint8_t ack[8];
  std::memcpy(ack, &total, sizeof(total));
  return c.WriteFull(ack, sizeof(ack), err);
}

class RunWorker : public Napi::AsyncWorker {
 public:
  RunWorker(Napi::Env env, RunParams params)
      : Napi::AsyncWorker(env, "ndbench.tcp"), params_(std::move(params)), deferred_(Napi::Promise::Deferred::New(env)) {}

  Napi::Promise Promise() { return deferred_.Promise(); }

  void Execute() override {
    std::string err;
    Sock s = kBad;
    if (params_.server) {
      s = AcceptOne(static_cast<Sock>(params_.listenFd), params_.timeoutMs, &err);
      net::close_socket(static_cast<Sock>(params_.listenFd));
    } else {
      s = ConnectTo(params_.host, params_.port, params_.timeoutMs, &err);
    }
    if (s == kBad) {
      SetError("tcpBench: " + err);
      return;
    }
    Conn c(s, params_.spin, params_.timeoutMs);
    bool ok;
    if (params_.pingpong) {
      ok = params_.server ? RunPingPongServer(c, params_, &result_, &err) : RunPingPongClient(c, params_, &result_, &err);
    } else {
      ok = params_.sender ? RunStreamSender(c, params_, &result_, &err) : RunStreamReceiver(c, params_, &result_, &err);
    }
    if (!ok) SetError("tcpBench: " + (err.empty() ? std::string("failed") : err));
  }

  void OnOK() override {
    Napi::Env env = Env();
    Napi::Object o = Napi::Object::New(env);
    Napi::Float64Array samples = Napi::Float64Array::New(env, result_.samples.size());
    if (!result_.samples.empty()) std::memcpy(samples.Data(), result_.samples.data(), result_.samples.size() * sizeof(double));
    o.Set("samples", samples);
    o.Set("iterations", Napi::Number::New(env, static_cast<double>(result_.iterations)));
    o.Set("bytes", Napi::Number::New(env, static_cast<double>(result_.bytes)));
    o.Set("elapsedNs", Napi::Number::New(env, static_cast<double>(result_.elapsedNs)));
    deferred_.Resolve(o);
  }

  void OnError(const Napi::Error& e) override { deferred_.Reject(e.Value()); }

 private:
  RunParams params_;
  RunResult result_;
  Napi::Promise::Deferred deferred_;
};

double NumberOr(Napi::Object o, const char* key, double fallback) {
  Napi::Value v = o.Get(key);
  return v.IsNumber() ? v.As<Napi::Number>().DoubleValue() : fallback;
}

Napi::Value TcpBenchListen(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  if (!info[0].IsString() || !info[1].IsNumber()) throw Napi::TypeError::New(env, "tcpBenchListen(host: string, port: number)");
  const std::string host = info[0].As<Napi::String>().Utf8Value();
  const uint32_t port = info[1].As<Napi::Number>().Uint32Value();
  net::Address a;
  if (port > 65535 || !net::parse_numeric(host, static_cast<uint16_t>(port), &a))
    throw Napi::Error::New(env, "tcpBenchListen: '" + host + "' is not a numeric address");
  Sock s = net::tcp_socket(a.family());
  if (s == kBad) throw Napi::Error::New(env, "tcpBenchListen: socket: " + ErrorText(-errno));
  net::set_reuseaddr(s);
  int r = net::bind_to(s, a);
  if (r == 0) r = net::listen_on(s, 4);
  net::Address bound;
  if (r == 0) r = net::local_address(s, &bound);
  if (r != 0) {
    net::close_socket(s);
    throw Napi::Error::New(env, "tcpBenchListen: " + ErrorText(r));
  }
  const uint16_t p = bound.port();
  Napi::Object o = Napi::Object::New(env);
  o.Set("fd", Napi::Number::New(env, static_cast<double>(s)));
  o.Set("port", Napi::Number::New(env, p));
  return o;
}

Napi::Value TcpBenchClose(const Napi::CallbackInfo& info) {
  if (info[0].IsNumber()) net::close_socket(static_cast<Sock>(info[0].As<Napi::Number>().Int64Value()));
  return info.Env().Undefined();
}

Napi::Value TcpBenchRun(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  if (!info[0].IsObject()) throw Napi::TypeError::New(env, "tcpBenchRun(params: object)");
  Napi::Object o = info[0].As<Napi::Object>();
  RunParams p;
  p.server = o.Get("role").ToString().Utf8Value() == "server";
  p.listenFd = static_cast<int64_t>(NumberOr(o, "fd", -1));
  if (o.Get("host").IsString()) p.host = o.Get("host").As<Napi::String>().Utf8Value();
  p.port = static_cast<uint32_t>(NumberOr(o, "port", 0));
  p.pingpong = o.Get("pattern").ToString().Utf8Value() != "stream";
  p.sender = o.Get("sender").ToBoolean().Value();
  p.size = static_cast<size_t>(NumberOr(o, "size", 8));
  p.replySize = static_cast<size_t>(NumberOr(o, "replySize", static_cast<double>(p.size)));
  p.iters = static_cast<uint64_t>(NumberOr(o, "iters", 1000));
  p.warmup = static_cast<uint64_t>(NumberOr(o, "warmup", 0));
  p.durationMs = NumberOr(o, "durationMs", 0);
  p.spin = o.Get("spin").ToBoolean().Value();
  p.timeoutMs = static_cast<int>(NumberOr(o, "timeoutMs", 60000));
  if (p.server && p.listenFd < 0) throw Napi::TypeError::New(env, "tcpBenchRun: a server needs fd from tcpBenchListen()");
  if (!p.server && p.host.empty()) throw Napi::TypeError::New(env, "tcpBenchRun: a client needs host and port");
  if (p.size == 0 || (p.pingpong && p.replySize == 0)) throw Napi::RangeError::New(env, "tcpBenchRun: sizes must be >= 1");
  auto* w = new RunWorker(env, std::move(p));
  Napi::Promise promise = w->Promise();
  w->Queue();
  return promise;
}

}  // namespace

// Called from the addon's Init (binding/addon/addon.cc): adds tcpBenchListen, tcpBenchRun, tcpBenchClose.
void InitBenchTcp(Napi::Env env, Napi::Object exports) {
  exports.Set("tcpBenchListen", Napi::Function::New(env, TcpBenchListen, "tcpBenchListen"));
  exports.Set("tcpBenchRun", Napi::Function::New(env, TcpBenchRun, "tcpBenchRun"));
  exports.Set("tcpBenchClose", Napi::Function::New(env, TcpBenchClose, "tcpBenchClose"));
}

}  // namespace netdirect

#ifdef NETDIRECT_BENCH_TCP_STANDALONE
// Development build of this file alone as its own addon, with binding/soft/net/socket_address.cc and the socket file
// of the platform (lib/bench/baselines.ts loads it when NETDIRECT_BENCH_TCP_ADDON names it).
static Napi::Object InitStandalone(Napi::Env env, Napi::Object exports) {
  netdirect::InitBenchTcp(env, exports);
  return exports;
}
NODE_API_MODULE(netdirect_bench_tcp, InitStandalone)
#endif

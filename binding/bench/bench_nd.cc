// ndbench's native ND baseline (`--compare native`): the same test, on the same connected queue pair, completion
// queue and registered memory as the netdirect phase, driven by a loop in C++ that calls the ND v2 interfaces
// directly (IND2QueuePair::Write/Read, IND2CompletionQueue::GetResults), as perftest drives verbs. Beside the
// netdirect figure it tells what the JS layers (lib/, Node-API, V8) add to a round trip, separately from what the
// provider costs.
//
//   ndBenchRun(params) -> { samples: Float64Array } | undefined
//
// It runs on the calling (JS) thread, synchronously, as lib/bench/nd.ts's manual-mode loops do: the adapter must
// be in manual mode, so that nothing else takes results from the completion queue. The requests it posts carry
// contexts of its own; every one is retired before it returns (a final signaled request follows the silent ones),
// and a result of any other request is handed back for the CQ's next poll() (CqState::HandBack, binding/delivery/).
// Wire pattern (the same offsets as lib/bench/nd.ts):
//   write_lat  ping-pong: the client writes `size` bytes from `sendOffset` to the peer's offset 0 with a tag in the
//              last byte; the server answers once its last byte shows the tag. The client then writes the stop
//              byte (`stopSource` -> the peer's `stop`) and waits for it; the server, seeing it, retires its
//              silent writes with a zero-byte signaled write (`drainSource`).
//   read_lat   the client reads `size` bytes from the peer's `sendOffset` into offset 0, one at a time; the
//              server is passive (it does not call this).
//   send_lat   ping-pong of `size`-byte Sends from `sendOffset`: the client sends and waits for a receive to
//              complete, the server answers each receive with a Send; the client's zero-byte Send ends it, and the
//              server retires its silent Sends with a zero-byte Write (`drainSource`). Receives land at offset 0.
//              The receives lib/ keeps posted (`receives` of them) are used first: their results are handed back to
//              lib/ (which counts them); after those, the loop keeps one receive of its own posted, so that none of
//              its own is left posted when it returns.
//   write_bw   message rate: the client keeps `window` Writes of `size` bytes from `sendOffset` to the peer's offset 0
//              in flight, every `moderation`-th and the last one signaled (as lib/bench/nd.ts bwClient in manual
//              mode); the server is passive. With `postList` > 1 the free slots are posted in groups of that many,
//              each between INDPostBatch's BeginBatch and EndBatch (when the provider answers it) and each group's
//              last signaled, as the JS loop's qp.batch() posts do.
#include <napi.h>

#include <chrono>
#include <cstdio>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "addon/addon.h"
#include "addon/adapter.h"
#include "addon/completion_queue.h"
#include "addon/memory_region.h"
#include "addon/queue_pair.h"
#include "bench/bench.h"
#include "nd/netdirect_ext.h"

namespace netdirect {
namespace {

using Clock = std::chrono::steady_clock;

// Request contexts of this loop. They follow the addon's context encoding (binding/delivery/poller.h: the request id in the
// low 32 bits, no counted flags) with ids lib/requests.ts never hands out (its ids are dense from 0): a result of
// the loop that reaches lib/ after all (the loop failed with requests in flight) is counted as unknown and ignored.
void* const kPingContext = reinterpret_cast<void*>(uintptr_t{0xFFFFFF01u});
void* const kStopContext = reinterpret_cast<void*>(uintptr_t{0xFFFFFF02u});
void* const kDrainContext = reinterpret_cast<void*>(uintptr_t{0xFFFFFF03u});
void* const kReceiveContext = reinterpret_cast<void*>(uintptr_t{0xFFFFFF04u});
// write_bw: a signaled Write's context is kStreamBase + the number of Writes it retires (1..kStreamMax).
constexpr uintptr_t kStreamBase = 0xFFFE0000u;
constexpr uintptr_t kStreamMax = 0xFFFFu;

struct Params {
  bool client = false;
  bool write = true;  // write_lat; else read_lat
  uint32_t size = 0;
  uint64_t sendOffset = 0, stop = 0, stopSource = 0, drainSource = 0;
  uint64_t remoteAddress = 0;
  uint32_t remoteToken = 0;
  int64_t iters = 0, warmup = 0;
  double durationMs = 0;
  uint32_t moderation = 1;
  bool inline_ = false;
  double timeoutMs = 0;
  uint32_t window = 1;  // write_bw
  uint32_t postList = 1;  // write_bw: Writes posted per INDPostBatch bracket (ndbench -l), each bracket's last signaled
  bool send = false;    // send_lat
  int64_t receives = 0;  // send_lat: receives lib/ has posted on the queue pair
};

double Number(Napi::Object o, const char* key, double min, double max) {
  Napi::Value v = o.Get(key);
  if (!v.IsNumber() || !(v.As<Napi::Number>().DoubleValue() >= min && v.As<Napi::Number>().DoubleValue() <= max)) {
    char range[64];
    std::snprintf(range, sizeof range, "[%.0f, %.0f]", min, max);
    ThrowMisuse(o.Env(), "ERR_ND_INVALID_ARGUMENT", "ndBenchRun", std::string(key) + " must be a number in " + range);
  }
  return v.As<Napi::Number>().DoubleValue();
}

// The loop's state: the ND objects, the region's memory and what it has posted but not yet seen retired.
class Loop {
 public:
  Loop(Napi::Env env, const Params& p, IND2QueuePair* qp, CqState* cq, uint8_t* base, UINT32 localToken)
      : env_(env), p_(p), qp_(qp), state_(cq), cq_(cq->cq), base_(base), localToken_(localToken), hint_(cq->hint) {
    if (p_.postList > 1 && FAILED(qp_->QueryInterface(IID_INDPostBatch, reinterpret_cast<void**>(batch_.put())))) {
      batch_.reset();
    }
    if (hint_ != nullptr) hint_->SetPollingThread(TRUE);
    Progress();
  }
  ~Loop() {
    if (hint_ != nullptr) hint_->SetPollingThread(FALSE);
  }
  Loop(const Loop&) = delete;
  Loop& operator=(const Loop&) = delete;

  std::vector<double> WriteLatClient();
  void WriteLatServer();
  std::vector<double> ReadLatClient();
  // Returns { messages completed, ns } of the timed part.
  std::pair<int64_t, double> WriteBwClient();
  std::vector<double> SendLatClient();
  void SendLatServer();

 private:
  volatile uint8_t& At(uint64_t offset) { return reinterpret_cast<volatile uint8_t*>(base_)[offset]; }

  void Post(bool write, uint64_t localOffset, uint32_t length, uint64_t remoteOffset, void* context, bool silent) {
    ND2_SGE sge{base_ + localOffset, static_cast<ULONG>(length), localToken_};
    ULONG flags = (silent ? ND_OP_FLAG_SILENT_SUCCESS : 0) | (p_.inline_ && write ? ND_OP_FLAG_INLINE : 0);
    const HRESULT hr = write ? qp_->Write(context, length == 0 ? nullptr : &sge, length == 0 ? 0 : 1,
                                          p_.remoteAddress + remoteOffset, p_.remoteToken, flags)
                             : qp_->Read(context, &sge, 1, p_.remoteAddress + remoteOffset, p_.remoteToken, flags);
    if (FAILED(hr)) ThrowNdStatus(env_, hr, write ? "write" : "read");
  }

  // One GetResults round: throws on a failed request of the loop's own. A result of a request the loop did not post
  // (the application's, on a CQ it shares) is handed back for the application's next poll(). Returns how many of the
  // results were `wanted`.
  int Poll(const void* wanted) {
    ND2_RESULT results[16];
    const ULONG n = cq_->GetResults(results, 16);
    int seen = 0;
    for (ULONG i = 0; i < n; ++i) {
      const ND2_RESULT& r = results[i];
      const uintptr_t c = reinterpret_cast<uintptr_t>(r.RequestContext);
      const bool stream = c > kStreamBase && c <= kStreamBase + kStreamMax;
      if (p_.send && r.RequestType == Nd2RequestTypeReceive) {
        // send_lat: a message arrived, in one of lib/'s receives (handed back to it) or the loop's own.
        if (r.RequestContext != kReceiveContext) state_->HandBack(r);
        else ownReceive_ = false;
        if (r.Status != ND_SUCCESS) ThrowNdStatus(env_, r.Status, "receive");
        if (libReceives_ > 0 && r.RequestContext != kReceiveContext) --libReceives_;
        ++received_;
        lastBytes_ = r.BytesTransferred;
        continue;
      }
      if (r.RequestContext != kPingContext && r.RequestContext != kStopContext && r.RequestContext != kDrainContext &&
          !stream) {
        state_->HandBack(r);
        continue;
      }
      if (r.Status != ND_SUCCESS) ThrowNdStatus(env_, r.Status, r.RequestType == Nd2RequestTypeRead ? "read" : "write");
      if (stream) retired_ += static_cast<int64_t>(c - kStreamBase);
      if (r.RequestContext == wanted) ++seen;
    }
    return seen;
  }

  // A round trip completed: the stall clock starts again. Returns the time it read.
  Clock::time_point Progress() {
    spins_ = 0;
    const Clock::time_point now = Clock::now();
    deadline_ = now + std::chrono::microseconds(static_cast<int64_t>(p_.timeoutMs * 1000));
    return now;
  }
  // As lib/bench/nd.ts's Stall: the clock is read every 4096 spins, so that waiting costs what the JS loop's does.
  void CheckStall(const char* what) {
    if ((++spins_ & 0xfff) == 0 && Clock::now() > deadline_) {
      char seconds[32];
      std::snprintf(seconds, sizeof seconds, "%g", p_.timeoutMs / 1000);
      throw Napi::Error::New(env_, std::string("native ") + what + ": no progress for " + seconds + " s (is the peer alive?)");
    }
  }
  static uint8_t NextTag(uint8_t t) { return t == 255 ? 1 : t + 1; }
  bool Signaled() {
    if (++unsignaled_ < p_.moderation) return false;
    unsignaled_ = 0;
    return true;
  }
  // Posts one signaled request and polls until it retires (the silent ones before it retire with it).
  void RetireWith(uint64_t localOffset, uint32_t length, uint64_t remoteOffset, void* context, const char* what) {
    Post(true, localOffset, length, remoteOffset, context, false);
    while (Poll(context) == 0) CheckStall(what);
    unsignaled_ = 0;
  }
  bool Timed() const { return p_.durationMs > 0; }
  template <typename Round>
  std::vector<double> Measure(Round round);

  Napi::Env env_;
  const Params& p_;
  IND2QueuePair* qp_;
  CqState* state_;           // the CQ as delivery shares it (delivery/poller.h): HandBack
  IND2CompletionQueue* cq_;
  uint8_t* base_;
  UINT32 localToken_;
  INDPollingHint* hint_;
  NdPtr<INDPostBatch> batch_;  // postList > 1: the provider's batch hint, when it answers one
  uint32_t unsignaled_ = 0;
  uint32_t spins_ = 0;
  int64_t retired_ = 0;  // write_bw: Writes retired by the signaled results polled so far
  // send_lat: lib/'s receives still posted, whether the loop's own is, messages received, the last one's bytes.
  int64_t libReceives_ = 0;
  bool ownReceive_ = false;
  int64_t received_ = 0;
  ULONG lastBytes_ = 0;
  // send_lat: a receive is posted for the next message (lib/'s while it has some, else the loop's own one).
  void EnsureReceive() {
    if (libReceives_ > 0 || ownReceive_) return;
    ND2_SGE sge{base_, static_cast<ULONG>(p_.size), localToken_};
    const HRESULT hr = qp_->Receive(kReceiveContext, &sge, 1);
    if (FAILED(hr)) ThrowNdStatus(env_, hr, "receive");
    ownReceive_ = true;
  }
  void PostSend(uint32_t length, void* context, bool silent) {
    ND2_SGE sge{base_ + p_.sendOffset, static_cast<ULONG>(length), localToken_};
    const ULONG flags = (silent ? ND_OP_FLAG_SILENT_SUCCESS : 0) | (p_.inline_ && length > 0 ? ND_OP_FLAG_INLINE : 0);
    const HRESULT hr = qp_->Send(context, length == 0 ? nullptr : &sge, length == 0 ? 0 : 1, flags);
    if (FAILED(hr)) ThrowNdStatus(env_, hr, "send");
  }
  // Polls until another message arrived.
  void AwaitMessage(const char* what) {
    const int64_t before = received_;
    while (received_ == before) {
      Poll(nullptr);
      CheckStall(what);
    }
  }
  Clock::time_point deadline_;
};

// The iterations of a latency test: `round` runs one round trip and returns its time in ns. Warm-up rounds are not
// kept; with durationMs, rounds go on until that much time has passed.
template <typename Round>
std::vector<double> Loop::Measure(Round round) {
  std::vector<double> samples;
  samples.reserve(Timed() ? 1 << 16 : static_cast<size_t>(p_.iters));
  const Clock::time_point end =
      Clock::now() + std::chrono::microseconds(static_cast<int64_t>(p_.durationMs * 1000));
  for (int64_t i = -p_.warmup; Timed() || i < p_.iters; ++i) {
    const double ns = round();
    if (i >= 0) samples.push_back(ns);
    const Clock::time_point now = Progress();
    if (Timed() && i >= 0 && now >= end) break;
  }
  return samples;
}

double Since(Clock::time_point t0) {
  return static_cast<double>(std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - t0).count());
}

std::vector<double> Loop::WriteLatClient() {
  const uint64_t last = p_.size - 1;
  uint8_t t = 0;
  std::vector<double> samples = Measure([&] {
    t = NextTag(t);
    At(p_.sendOffset + last) = t;
    const Clock::time_point t0 = Clock::now();
    Post(true, p_.sendOffset, p_.size, 0, kPingContext, !Signaled());
    while (At(last) != t) {
      Poll(nullptr);
      CheckStall("write_lat");
    }
    return Since(t0);
  });
  At(p_.stopSource) = 1;
  RetireWith(p_.stopSource, 1, p_.stop, kStopContext, "write_lat stop");
  return samples;
}

void Loop::WriteLatServer() {
  const uint64_t last = p_.size - 1;
  uint8_t t = 1;
  for (;;) {
    while (At(last) != t) {
      if (At(p_.stop) != 0) {
        RetireWith(p_.drainSource, 0, p_.drainSource, kDrainContext, "write_lat drain");
        return;
      }
      Poll(nullptr);
      CheckStall("write_lat server");
    }
    At(p_.sendOffset + last) = t;
    Post(true, p_.sendOffset, p_.size, 0, kPingContext, !Signaled());
    Progress();
    t = NextTag(t);
  }
}

std::vector<double> Loop::ReadLatClient() {
  return Measure([&] {
    const Clock::time_point t0 = Clock::now();
    Post(false, 0, p_.size, p_.sendOffset, kPingContext, false);
    while (Poll(kPingContext) == 0) CheckStall("read_lat");
    return Since(t0);
  });
}

std::pair<int64_t, double> Loop::WriteBwClient() {
  const int64_t window = p_.window;
  const uint32_t k = p_.moderation > kStreamMax ? static_cast<uint32_t>(kStreamMax) : p_.moderation;
  // Runs `count` Writes (or, timed, until `end`), at most `window` in flight; returns the Writes completed.
  auto run = [&](int64_t count, bool timed, Clock::time_point end) {
    const int64_t base = retired_;
    int64_t posted = 0;
    uint32_t unsignaled = 0;
    bool stopping = false;
    for (;;) {
      while (!stopping && (timed || posted < count) && posted - (retired_ - base) < window) {
        // A group of up to postList Writes (one Write without -l), bracketed as one batch.
        int64_t group = window - (posted - (retired_ - base));
        if (group > p_.postList) group = p_.postList;
        if (!timed && group > count - posted) group = count - posted;
        if (batch_) batch_->BeginBatch();
        for (int64_t i = 0; i < group; ++i) {
          ++unsignaled;
          const bool last = (!timed && posted + 1 == count) || (p_.postList > 1 && i + 1 == group);
          const bool signaled = unsignaled >= k || last;
          Post(true, p_.sendOffset, p_.size, 0, reinterpret_cast<void*>(kStreamBase + unsignaled), !signaled);
          if (signaled) unsignaled = 0;
          ++posted;
        }
        if (batch_) batch_->EndBatch();
      }
      if (timed && !stopping && Clock::now() >= end) {
        stopping = true;
        // A last signaled Write retires the silent ones behind it.
        if (unsignaled > 0) {
          Post(true, p_.sendOffset, p_.size, 0, reinterpret_cast<void*>(kStreamBase + unsignaled + 1), false);
          ++posted;
          unsignaled = 0;
        }
      }
      const int64_t before = retired_;
      Poll(nullptr);
      if (retired_ != before) Progress();
      if (retired_ - base >= posted && (stopping || (!timed && posted >= count))) return retired_ - base;
      CheckStall("write_bw");
    }
  };
  if (p_.warmup > 0) run(p_.warmup, false, Clock::now());
  const Clock::time_point t0 = Clock::now();
  const int64_t done = run(p_.iters, Timed(), t0 + std::chrono::microseconds(static_cast<int64_t>(p_.durationMs * 1000)));
  return {done, Since(t0)};
}

std::vector<double> Loop::SendLatClient() {
  libReceives_ = p_.receives;
  std::vector<double> samples = Measure([&] {
    EnsureReceive();
    const Clock::time_point t0 = Clock::now();
    PostSend(p_.size, kPingContext, !Signaled());
    AwaitMessage("send_lat");
    return Since(t0);
  });
  // The zero-byte Send that ends it, signaled: it retires the silent pings before it.
  PostSend(0, kStopContext, false);
  while (Poll(kStopContext) == 0) CheckStall("send_lat stop");
  return samples;
}

void Loop::SendLatServer() {
  libReceives_ = p_.receives;
  EnsureReceive();
  for (;;) {
    AwaitMessage("send_lat server");
    Progress();
    if (lastBytes_ == 0) {
      RetireWith(p_.drainSource, 0, p_.drainSource, kDrainContext, "send_lat drain");
      return;
    }
    EnsureReceive();  // for the next ping, or the stop
    PostSend(p_.size, kPingContext, !Signaled());
  }
}

// ndBenchRun({ role, test, qp, cq, region, size, sendOffset, stop, stopSource, drainSource, remoteAddress,
//              remoteToken, iters, warmup, durationMs, moderation, inline, timeoutMs })
Napi::Value NdBenchRun(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  const char* op = "ndBenchRun";
  if (!info[0].IsObject()) ThrowMisuse(env, "ERR_ND_INVALID_ARGUMENT", op, "params must be an object");
  Napi::Object o = info[0].As<Napi::Object>();
  Params p;
  const std::string role = o.Get("role").ToString();
  const std::string test = o.Get("test").ToString();
  if (role != "client" && role != "server")
    ThrowMisuse(env, "ERR_ND_INVALID_ARGUMENT", op, "role must be 'client' or 'server'");
  if (test != "write_lat" && test != "read_lat" && test != "write_bw" && test != "send_lat")
    ThrowMisuse(env, "ERR_ND_INVALID_ARGUMENT", op, "the native baseline runs write_lat, read_lat, send_lat and write_bw, not " + test);
  p.client = role == "client";
  p.write = test != "read_lat";
  const bool bw = test == "write_bw";
  if ((!p.write || bw) && !p.client) ThrowMisuse(env, "ERR_ND_INVALID_ARGUMENT", op, test + "'s server is passive");
  auto* qp = UnwrapTagged<QueuePair>(o.Get("qp"), op, "qp");
  Adapter* adapter = qp->adapter();
  if (adapter == nullptr) ThrowMisuse(env, "ERR_ND_CLOSED", op, "qp is closed");
  auto* cq = UnwrapChild<CompletionQueue>(o.Get("cq"), adapter, op, "cq");
  auto* mr = UnwrapChild<MemoryRegion>(o.Get("region"), adapter, op, "region");
  if (!adapter->manual())
    ThrowMisuse(env, "ERR_ND_INVALID_ARGUMENT", op,
                "the native baseline polls the completion queue itself: the adapter must be in manual mode");
  RegionSlot* slot = adapter->Region(mr->id());
  if (slot == nullptr || slot->state != kRegionRegistered)
    ThrowMisuse(env, "ERR_ND_INVALID_REGION", op, "region is not registered");
  const double length = static_cast<double>(slot->length);
  p.size = static_cast<uint32_t>(Number(o, "size", 1, 1u << 30));
  if (p.size > length) ThrowMisuse(env, "ERR_ND_OUT_OF_RANGE", op, "size exceeds the region");
  p.sendOffset = static_cast<uint64_t>(Number(o, "sendOffset", 0, length - p.size));
  p.stop = static_cast<uint64_t>(Number(o, "stop", 0, length - 1));
  p.stopSource = static_cast<uint64_t>(Number(o, "stopSource", 0, length - 1));
  p.drainSource = static_cast<uint64_t>(Number(o, "drainSource", 0, length));
  Napi::Value ra = o.Get("remoteAddress");
  if (!ra.IsBigInt()) ThrowMisuse(env, "ERR_ND_INVALID_ARGUMENT", op, "remoteAddress must be a bigint");
  bool lossless = false;
  p.remoteAddress = ra.As<Napi::BigInt>().Uint64Value(&lossless);
  p.remoteToken = static_cast<uint32_t>(Number(o, "remoteToken", 0, 4294967295.0));
  p.iters = static_cast<int64_t>(Number(o, "iters", 0, 1e12));
  p.warmup = static_cast<int64_t>(Number(o, "warmup", 0, 1e9));
  p.durationMs = Number(o, "durationMs", 0, 1e9);
  p.moderation = static_cast<uint32_t>(Number(o, "moderation", 1, 1 << 20));
  p.inline_ = o.Get("inline").ToBoolean();
  p.timeoutMs = Number(o, "timeoutMs", 1, 1e9);
  if (bw) p.window = static_cast<uint32_t>(Number(o, "window", 1, 1 << 16));
  if (bw && !o.Get("postList").IsUndefined()) p.postList = static_cast<uint32_t>(Number(o, "postList", 1, 1 << 16));
  p.send = test == "send_lat";
  if (p.send) p.receives = static_cast<int64_t>(Number(o, "receives", 0, 1 << 20));
  if (p.client && p.durationMs == 0 && p.iters == 0)
    ThrowMisuse(env, "ERR_ND_INVALID_ARGUMENT", op, "iters must be at least 1 without durationMs");

  CqState* state = cq->state();
  if (state == nullptr) ThrowMisuse(env, "ERR_ND_CLOSED", op, "cq is closed");
  Loop loop(env, p, qp->nd(), state, slot->base, mr->nd()->GetLocalToken());
  if (!p.client) {
    if (p.send) loop.SendLatServer();
    else loop.WriteLatServer();
    return env.Undefined();
  }
  if (bw) {
    const auto [done, ns] = loop.WriteBwClient();
    Napi::Object result = Napi::Object::New(env);
    result.Set("samples", Napi::Float64Array::New(env, 0));
    result.Set("messages", Napi::Number::New(env, static_cast<double>(done)));
    result.Set("elapsedNs", Napi::Number::New(env, ns));
    return result;
  }
  const std::vector<double> samples = p.send ? loop.SendLatClient() : p.write ? loop.WriteLatClient() : loop.ReadLatClient();
  Napi::Float64Array out = Napi::Float64Array::New(env, samples.size());
  std::copy(samples.begin(), samples.end(), out.Data());
  Napi::Object result = Napi::Object::New(env);
  result.Set("samples", out);
  return result;
}

}  // namespace

void InitBenchNd(Napi::Env env, Napi::Object exports) {
  exports.Set("ndBenchRun", Napi::Function::New(env, NdBenchRun, "ndBenchRun"));
}

}  // namespace netdirect

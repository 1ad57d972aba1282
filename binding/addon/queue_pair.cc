#include "addon/queue_pair.h"

#include "addon/memory_region.h"
#include "addon/memory_window.h"

namespace netdirect {

namespace {

const char* OpName(uint32_t op) {
  switch (op) {
    case Nd2RequestTypeReceive: return "receive";
    case Nd2RequestTypeSend: return "send";
    case Nd2RequestTypeRead: return "read";
    case Nd2RequestTypeWrite: return "write";
    default: return "post";
  }
}

}  // namespace

Napi::Function QueuePair::Define(Napi::Env env) {
  return DefineClass(env, "QueuePair",
                     {
                         InstanceMethod<&QueuePair::Post>("post"),
                         InstanceMethod<&QueuePair::PostMany>("postMany"),
                         InstanceMethod<&QueuePair::Bind>("bind"),
                         InstanceMethod<&QueuePair::Invalidate>("invalidate"),
                         InstanceMethod<&QueuePair::Flush>("flush"),
                         InstanceMethod<&QueuePair::Transport>("transport"),
                         InstanceMethod<&QueuePair::Close>("close"),
                     });
}

QueuePair::QueuePair(const Napi::CallbackInfo& info) : Child(kChildQueuePair), Napi::ObjectWrap<QueuePair>(info) {
  auto* init = static_cast<Init*>(TakeInit(info, kChildQueuePair, kClassName));
  qp_ = std::move(init->qp);
  receiveCq_ = init->receiveCq;
  receiveCq_->Ref();
  initiatorCq_ = init->initiatorCq;
  initiatorCq_->Ref();
  qpId_ = init->qpId;
  if (FAILED(qp_->QueryInterface(IID_INDPostBatch, reinterpret_cast<void**>(batch_.put())))) batch_.reset();
  Napi::Object self = info.This().As<Napi::Object>();
  TagObject(self, kTag);
  BindHotMethod<&QueuePair::PostBound>(info.Env(), self, "post", this);
  Attach(init);
}

Napi::Value QueuePair::PostBound(const Napi::CallbackInfo& info) { return static_cast<QueuePair*>(info.Data())->Post(info); }

QueuePair::~QueuePair() {
  if (receiveCq_ != nullptr) receiveCq_->Unref();
  if (initiatorCq_ != nullptr) initiatorCq_->Unref();
}

void QueuePair::ReleaseNd(bool /*teardown*/) {
  // Outstanding requests complete with ND_CANCELED and are still delivered (lib/ normally flushed and
  // drained already; flushing twice is harmless).
  qp_->Flush();
  batch_.reset();
  qp_.reset();
  receiveCq_->Unref();
  receiveCq_ = nullptr;
  initiatorCq_->Unref();
  initiatorCq_ = nullptr;
}

void* QueuePair::Context(Napi::Env env, uint32_t id, CqState* cq, bool silent, const char* operation, bool* counted) {
  if (cq->closed.load(std::memory_order_relaxed))
    ThrowMisuse(env, "ERR_ND_CLOSED", operation, "the queue pair's completion queue is closed");
  // A silent request's id is its number among the queue pair's silent requests (lib/requests.ts SilentRequests):
  // it has no request table entry, and its record says so (kRecordSilent).
  uint64_t ctx = silent ? (id | kContextSilent) : id;
  // Silent successes produce no completion (failures still do and are delivered uncounted); in manual mode
  // CQ completions are the caller's to poll, so they do not hold the event loop.
  *counted = !silent && !adapter_->manual();
  if (*counted) {
    ctx |= kContextCounted | kContextCqCounted;
    cq->outstanding.fetch_add(1, std::memory_order_relaxed);
    adapter_->AddPending();
  }
  return reinterpret_cast<void*>(static_cast<uintptr_t>(ctx));
}

void QueuePair::Uncount(CqState* cq, bool counted) {
  if (!counted) return;
  cq->outstanding.fetch_sub(1, std::memory_order_relaxed);
  adapter_->SubPending(1);
}

// post(op | flags << 8, id, nSge, remoteAddress (bigint), remoteOffset, remoteToken). Six arguments: node-addon-api
// copies up to six without allocating. The address arrives as the caller's BigInt and the offset as a number:
// lib/ does no BigInt arithmetic per post (each operation allocates).
Napi::Value QueuePair::Post(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  const uint32_t opFlags = ArgU32(info, 0);
  const uint32_t op = opFlags & 0xFF;
  const uint32_t flags = opFlags >> 8;
  const char* name = OpName(op);
  CheckThis(info, this, name);
  const uint32_t id = ArgU32(info, 1);
  const uint32_t nSge = ArgU32(info, 2);
  ND2_SGE sge[Adapter::kMaxSge];
  adapter_->BuildSges(env, nSge, sge, name);
  const bool silent = (flags & ND_OP_FLAG_SILENT_SUCCESS) != 0;
  HRESULT hr;
  bool counted = false;
  CqState* cq = op == Nd2RequestTypeReceive ? receiveCq_ : initiatorCq_;
  switch (op) {
    case Nd2RequestTypeSend:
      hr = qp_->Send(Context(env, id, cq, silent, name, &counted), sge, nSge, flags);
      break;
    case Nd2RequestTypeReceive:
      hr = qp_->Receive(Context(env, id, cq, false, name, &counted), sge, nSge);
      break;
    case Nd2RequestTypeRead:
    case Nd2RequestTypeWrite: {
      uint64_t remote = 0;
      bool lossless = false;
      napi_get_value_bigint_uint64(env, info[3], &remote, &lossless);
      remote += static_cast<uint64_t>(ArgDouble(info, 4));  // lib/ checked that it does not wrap
      const uint32_t token = ArgU32(info, 5);
      void* ctx = Context(env, id, cq, silent, name, &counted);
      hr = op == Nd2RequestTypeRead ? qp_->Read(ctx, sge, nSge, remote, token, flags)
                                    : qp_->Write(ctx, sge, nSge, remote, token, flags);
      break;
    }
    default:
      ThrowMisuse(env, "ERR_ND_INVALID_ARGUMENT", "post", "op must be K_SEND, K_RECEIVE, K_READ or K_WRITE (lib/records.ts)");
  }
  if (FAILED(hr)) {
    Uncount(cq, counted);
    ThrowNdStatus(env, hr, name);
  }
  return env.Undefined();
}

namespace {

constexpr size_t kDescWords = 8;  // lib/batch.ts DESC_WORDS

double* Float64Arg(Napi::Env env, const Napi::Value& value, size_t* length, const char* op, const char* name) {
  napi_typedarray_type type = napi_int8_array;
  void* data = nullptr;
  bool isTyped = false;
  napi_is_typedarray(env, value, &isTyped);
  if (isTyped) napi_get_typedarray_info(env, value, &type, length, &data, nullptr, nullptr);
  if (!isTyped || type != napi_float64_array || (data == nullptr && *length != 0))
    ThrowMisuse(env, "ERR_ND_INVALID_ARGUMENT", op, std::string(name) + " must be a Float64Array");
  return static_cast<double*>(data);
}

}  // namespace

// postMany(descriptors, sges, count) -> requests posted (lib/native.ts). Every request's SGEs are built, and the
// whole batch checked, before the first is posted: misuse throws with nothing posted. A provider that refuses
// request k stops the batch there: k is returned and its status written over its id, descriptors[8k + 1].
Napi::Value QueuePair::PostMany(const Napi::CallbackInfo& info) {
  const char* name = "post";
  CheckThis(info, this, name);
  Napi::Env env = info.Env();
  size_t descLength = 0, sgeLength = 0;
  double* desc = Float64Arg(env, info[0], &descLength, name, "descriptors");
  const double* triples = Float64Arg(env, info[1], &sgeLength, name, "sges");
  const uint32_t count = ArgU32(info, 2);
  if (static_cast<size_t>(count) * kDescWords > descLength)
    ThrowMisuse(env, "ERR_ND_OUT_OF_RANGE", name, "count exceeds the descriptors");
  size_t total = 0;
  for (uint32_t i = 0; i < count; ++i) {
    const double* d = desc + i * kDescWords;
    const uint32_t op = static_cast<uint32_t>(d[0]) & 0xFF;
    if (op != Nd2RequestTypeSend && op != Nd2RequestTypeReceive && op != Nd2RequestTypeRead && op != Nd2RequestTypeWrite)
      ThrowMisuse(env, "ERR_ND_INVALID_ARGUMENT", name, "op must be K_SEND, K_RECEIVE, K_READ or K_WRITE (lib/records.ts)");
    const double nSge = d[2], first = d[3];
    if (!(nSge >= 0 && nSge <= Adapter::kMaxSge && first >= 0 && (first + nSge) * 3 <= static_cast<double>(sgeLength)))
      ThrowMisuse(env, "ERR_ND_OUT_OF_RANGE", name, "request " + std::to_string(i) + ": its SGEs are outside the batch's array");
    CqState* cq = op == Nd2RequestTypeReceive ? receiveCq_ : initiatorCq_;
    if (cq->closed.load(std::memory_order_relaxed))
      ThrowMisuse(env, "ERR_ND_CLOSED", name, "the queue pair's completion queue is closed");
    total += static_cast<size_t>(nSge);
  }
  batchSges_.resize(total);
  size_t at = 0;
  for (uint32_t i = 0; i < count; ++i) {
    const double* d = desc + i * kDescWords;
    const uint32_t nSge = static_cast<uint32_t>(d[2]);
    adapter_->BuildSgesFrom(env, triples + 3 * static_cast<size_t>(d[3]), nSge, batchSges_.data() + at, name);
    at += nSge;
  }
  // A provider that answers INDPostBatch transmits the whole batch at its end (the built-in one: one gather send).
  struct BatchScope {
    INDPostBatch* b;
    ~BatchScope() {
      if (b != nullptr) b->EndBatch();
    }
  } scope{count > 1 && batch_ && SUCCEEDED(batch_->BeginBatch()) ? batch_.get() : nullptr};
  at = 0;
  for (uint32_t i = 0; i < count; ++i) {
    double* d = desc + i * kDescWords;
    const uint32_t opFlags = static_cast<uint32_t>(d[0]);
    const uint32_t op = opFlags & 0xFF;
    const uint32_t flags = opFlags >> 8;
    const uint32_t id = static_cast<uint32_t>(d[1]);
    const uint32_t nSge = static_cast<uint32_t>(d[2]);
    ND2_SGE* sge = nSge == 0 ? nullptr : batchSges_.data() + at;
    at += nSge;
    const bool silent = (flags & ND_OP_FLAG_SILENT_SUCCESS) != 0;
    CqState* cq = op == Nd2RequestTypeReceive ? receiveCq_ : initiatorCq_;
    bool counted = false;
    HRESULT hr;
    if (op == Nd2RequestTypeReceive) {
      hr = qp_->Receive(Context(env, id, cq, false, OpName(op), &counted), sge, nSge);
    } else if (op == Nd2RequestTypeSend) {
      hr = qp_->Send(Context(env, id, cq, silent, OpName(op), &counted), sge, nSge, flags);
    } else {
      // lib/ checked that address + offset does not wrap.
      const uint64_t remote = ((static_cast<uint64_t>(d[5]) << 32) | static_cast<uint64_t>(d[4])) + static_cast<uint64_t>(d[6]);
      const uint32_t token = static_cast<uint32_t>(d[7]);
      void* ctx = Context(env, id, cq, silent, OpName(op), &counted);
      hr = op == Nd2RequestTypeRead ? qp_->Read(ctx, sge, nSge, remote, token, flags)
                                    : qp_->Write(ctx, sge, nSge, remote, token, flags);
    }
    if (FAILED(hr)) {
      Uncount(cq, counted);
      d[1] = static_cast<double>(static_cast<uint32_t>(hr));
      return Napi::Number::New(env, i);
    }
  }
  return Napi::Number::New(env, count);
}

// bind(id, region, window, offset, length, flags) -> the window's remote token
Napi::Value QueuePair::Bind(const Napi::CallbackInfo& info) {
  const char* op = "bind";
  CheckThis(info, this, op);
  Napi::Env env = info.Env();
  const uint32_t id = ArgU32(info, 0);
  auto* mr = UnwrapChild<MemoryRegion>(info[1], adapter_, op, "region");
  auto* mw = UnwrapChild<MemoryWindow>(info[2], adapter_, op, "window");
  const double offset = ArgDouble(info, 3), length = ArgDouble(info, 4);
  const uint32_t flags = ArgU32(info, 5);
  RegionSlot* slot = adapter_->Region(mr->id());
  if (slot == nullptr || slot->state != kRegionRegistered)
    ThrowMisuse(env, "ERR_ND_INVALID_REGION", op, "memory region " + std::to_string(mr->id()) + " is not registered");
  if (!(offset >= 0 && length >= 0 && offset + length <= static_cast<double>(slot->length)))
    ThrowMisuse(env, "ERR_ND_OUT_OF_RANGE", op, "window range is outside the memory region");
  bool counted = false;
  void* ctx = Context(env, id, initiatorCq_, (flags & ND_OP_FLAG_SILENT_SUCCESS) != 0, op, &counted);
  HRESULT hr = qp_->Bind(ctx, mr->nd(), mw->nd(), slot->base + static_cast<uint64_t>(offset),
                         static_cast<SIZE_T>(length), flags);
  if (FAILED(hr)) {
    Uncount(initiatorCq_, counted);
    ThrowNdStatus(env, hr, op);
  }
  return Napi::Number::New(env, mw->nd()->GetRemoteToken());
}

// invalidate(id, window, flags)
Napi::Value QueuePair::Invalidate(const Napi::CallbackInfo& info) {
  const char* op = "invalidate";
  CheckThis(info, this, op);
  Napi::Env env = info.Env();
  const uint32_t id = ArgU32(info, 0);
  auto* mw = UnwrapChild<MemoryWindow>(info[1], adapter_, op, "window");
  const uint32_t flags = ArgU32(info, 2);
  bool counted = false;
  void* ctx = Context(env, id, initiatorCq_, (flags & ND_OP_FLAG_SILENT_SUCCESS) != 0, op, &counted);
  HRESULT hr = qp_->Invalidate(ctx, mw->nd(), flags);
  if (FAILED(hr)) {
    Uncount(initiatorCq_, counted);
    ThrowNdStatus(env, hr, op);
  }
  return env.Undefined();
}

Napi::Value QueuePair::Flush(const Napi::CallbackInfo& info) {
  CheckThis(info, this, "flush");
  HRESULT hr = qp_->Flush();
  if (FAILED(hr)) ThrowNdStatus(info.Env(), hr, "flush");
  return info.Env().Undefined();
}

// 'shm' or 'tcp' from a provider that answers INDTransport (the built-in one, docs/shm.md); undefined from any other,
// and before the queue pair was connected.
Napi::Value QueuePair::Transport(const Napi::CallbackInfo& info) {
  CheckThis(info, this, "transport");
  Napi::Env env = info.Env();
  NdPtr<INDTransport> t;
  if (FAILED(qp_->QueryInterface(IID_INDTransport, reinterpret_cast<void**>(t.put()))) || !t) return env.Undefined();
  ULONG v = 0;
  if (FAILED(t->GetTransport(&v))) return env.Undefined();
  return Napi::String::New(env, v == ND_TRANSPORT_SHM ? "shm" : "tcp");
}

Napi::Value QueuePair::Close(const Napi::CallbackInfo& info) {
  if (!HasTag(info.This(), kTag))
    ThrowMisuse(info.Env(), "ERR_ND_FOREIGN_OBJECT", "close", "receiver is not a netdirect QueuePair object");
  CloseNow(false);
  return info.Env().Undefined();
}

}  // namespace netdirect

#include "delivery/poller.h"

#if defined(__linux__)
#include <pthread.h>
#endif

#include <chrono>
#include <cstring>
#include <thread>

namespace netdirect {

namespace {

constexpr ULONG_PTR kFileKey = Poller::kFileKey;  // packets of the adapter's overlapped file (ND requests)
constexpr ULONG_PTR kStopKey = 2;      // end the thread
constexpr ULONG_PTR kAddCqKey = 3;     // start arming a CQ
constexpr ULONG_PTR kRemoveCqKey = 4;  // stop arming a CQ, drain it, drop it
constexpr ULONG kPortBatch = 64;       // packets per GetQueuedCompletionStatusEx
constexpr ULONG kCqBatch = 64;         // results per GetResults
constexpr size_t kFlushWords = 4096 * kRecordWords;  // hand over early past this many records
constexpr auto kStopGrace = std::chrono::seconds(2);  // how long Stop() waits for cancelled requests

using Clock = std::chrono::steady_clock;

}  // namespace

OvRecord::OvRecord(IND2Overlapped* issuerIn, uint32_t idIn, uint8_t kindIn, bool countedIn)
    : issuer(issuerIn), id(idIn), counted(countedIn) {
  std::memset(&ov, 0, sizeof(ov));
  kind = kindIn;
  issuer->AddRef();
}

OvRecord::~OvRecord() {
  if (hold != nullptr) hold->Release();
  issuer->Release();
}

void OvRecord::Hold(IUnknown* obj) {
  obj->AddRef();
  if (hold != nullptr) hold->Release();
  hold = obj;
}

CqState::CqState(IND2CompletionQueue* cqIn) : cq(cqIn) {
  std::memset(&ov, 0, sizeof(ov));
  kind = kKindCqNotify;
  cq->AddRef();
  void* p = nullptr;
  if (SUCCEEDED(cq->QueryInterface(IID_INDPollingHint, &p)) && p != nullptr) hint = static_cast<INDPollingHint*>(p);
}

CqState::~CqState() {
  if (hint != nullptr) hint->Release();
  cq->Release();
}

void CqState::Unref() {
  if (refs.fetch_sub(1) == 1) delete this;
}

Poller::Poller(DeliverFn deliver, void* ctx, uint32_t spinMicros, bool armCqs)
    : deliver_(deliver), ctx_(ctx), spinMicros_(spinMicros), armCqs_(armCqs) {}

Poller::~Poller() { Stop(); }

bool Poller::Start(HANDLE file, bool ownThread, const char** why) {
  port_ = CreateIoCompletionPort(INVALID_HANDLE_VALUE, nullptr, 0, 1);
  if (port_ == nullptr) {
    *why = "CreateIoCompletionPort failed";
    return false;
  }
  if (CreateIoCompletionPort(file, port_, kFileKey, 0) == nullptr) {
    *why = "associating the adapter's overlapped file with the completion port failed";
    CloseHandle(port_);
    port_ = nullptr;
    return false;
  }
  if (!ownThread) return true;
#ifdef NETDIRECT_HAVE_UV
  if (uv_thread_create(&thread_, &Poller::ThreadMain, this) != 0) {
    *why = "uv_thread_create failed";
    return false;  // the port stays open; the file still refers to it and is closed by the adapter
  }
#else
  thread_ = std::thread(&Poller::ThreadMain, this);
#endif
  started_ = true;
  return true;
}

void Poller::Stop() {
  if (started_) {
    PostQueuedCompletionStatus(port_, 0, kStopKey, nullptr);
#ifdef NETDIRECT_HAVE_UV
    uv_thread_join(&thread_);
#else
    thread_.join();
#endif
    started_ = false;
  } else if (port_ != nullptr && !stopping_) {
    // No thread: the stop runs here, with the same bounded wait for cancelled requests.
    deliver_ = nullptr;
    spinMicros_ = 0;
    PostQueuedCompletionStatus(port_, 0, kStopKey, nullptr);
    Run();
  }
  if (port_ != nullptr) {
    CloseHandle(port_);
    port_ = nullptr;
  }
}

void Poller::AddCq(CqState* cq) {
  cq->Ref();  // the poller's reference, dropped in Finalize
  PostQueuedCompletionStatus(port_, 0, kAddCqKey, &cq->ov);
}

void Poller::RemoveCq(CqState* cq) { PostQueuedCompletionStatus(port_, 0, kRemoveCqKey, &cq->ov); }

void Poller::ThreadMain(void* arg) {
#if defined(__linux__)
  pthread_setname_np(pthread_self(), "nd-poller");  // tells the threads apart in /proc, top and perf
#endif
  static_cast<Poller*>(arg)->Run();
}

Batch* Poller::RunOnce() {
  if (loopBatch_.words.capacity() > kFlushWords) loopBatch_.words = std::vector<uint32_t>();  // after a burst
  loopBatch_.Clear();
  OVERLAPPED_ENTRY entries[kPortBatch];
  ULONG n = 0;
  while (GetQueuedCompletionStatusEx(port_, entries, kPortBatch, &n, 0, FALSE) && n > 0) {
    wakeups_.fetch_add(1, std::memory_order_relaxed);
    for (ULONG i = 0; i < n; ++i) Handle(entries[i], &loopBatch_);
    if (n < kPortBatch) break;
  }
  return &loopBatch_;
}

void Poller::WillDrain(bool on) {
#ifndef _WIN32
  NdCompatPortDraining(on ? port_ : nullptr);
#else
  (void)on;
#endif
}

int Poller::Descriptor() {
#ifdef _WIN32
  return -1;
#else
  return NdCompatPortDescriptor(port_);
#endif
}

void Poller::AppendResult(const ND2_RESULT& r, Batch* batch, CqState* cq) {
  const uint64_t ctx = static_cast<uint64_t>(reinterpret_cast<uintptr_t>(r.RequestContext));
  batch->words.push_back(static_cast<uint32_t>(ctx));
  batch->words.push_back(static_cast<uint32_t>(r.Status));
  batch->words.push_back(r.BytesTransferred);
  batch->words.push_back(static_cast<uint32_t>(r.RequestType) | ((ctx & kContextSilent) != 0 ? kRecordSilent : 0));
  batch->words.push_back(static_cast<uint32_t>(reinterpret_cast<uintptr_t>(r.QueuePairContext)));
  if (ctx & kContextCounted) batch->counted++;
  if ((ctx & kContextCqCounted) && cq != nullptr) cq->outstanding.fetch_sub(1, std::memory_order_relaxed);
}

// Takes what the CQ holds into its `taken` list (under its lock, so that a cq.poll() on the JS thread never
// takes a later result first: CqState::mu), and names the CQ in the batch, which delivers them.
void Poller::Drain(CqState* s, Batch* batch) {
  ND2_RESULT results[kCqBatch];
  const ULONG want = stallMs_ > 0 ? 1 : kCqBatch;
  if (!s->shared.load(std::memory_order_relaxed)) s->shared.store(true);  // manual mode: from now on cq.poll() locks
  for (;;) {
    ULONG n = 0;
    {
      std::lock_guard<std::mutex> lock(s->mu);
      n = s->cq->GetResults(results, want);
      if (n > 0 && s->taken.empty()) {
        // The first undelivered result: this batch's delivery (or an earlier poll()) takes it and whatever follows.
        s->Ref();
        batch->cqs.push_back(s);
        const uint32_t marker[kRecordWords] = {static_cast<uint32_t>(batch->cqs.size() - 1), 0, 0, kKindCqTaken, 0};
        batch->words.insert(batch->words.end(), marker, marker + kRecordWords);
      }
      for (ULONG i = 0; i < n; ++i) {
        const uint64_t ctx = static_cast<uint64_t>(reinterpret_cast<uintptr_t>(results[i].RequestContext));
        if (ctx & kContextCqCounted) s->outstanding.fetch_sub(1, std::memory_order_relaxed);
        s->taken.push_back(results[i]);
      }
    }
    if (n < want) break;
    if (stallMs_ > 0) std::this_thread::sleep_for(std::chrono::milliseconds(stallMs_));
  }
}

void Poller::Collect(Batch* batch) {
  if (batch->cqs.empty()) return;
  std::vector<uint32_t>& out = batch->spare;
  out.clear();
  std::vector<uint32_t>& words = batch->words;
  Batch taken;  // AppendResult's target: the results' records and what they settle
  for (size_t i = 0; i + kRecordWords <= words.size(); i += kRecordWords) {
    if (words[i + 3] != kKindCqTaken) {
      out.insert(out.end(), words.begin() + static_cast<std::ptrdiff_t>(i), words.begin() + static_cast<std::ptrdiff_t>(i + kRecordWords));
      continue;
    }
    CqState* s = batch->cqs[words[i]];
    std::lock_guard<std::mutex> lock(s->mu);
    taken.words.swap(out);
    for (const ND2_RESULT& r : s->taken) AppendResult(r, &taken, nullptr);  // outstanding counted down when taken
    taken.words.swap(out);
    s->taken.clear();
  }
  batch->counted += taken.counted;
  words.swap(out);
  for (CqState* s : batch->cqs) s->Unref();
  batch->cqs.clear();
}

// Drain, then arm. ND_SUCCESS from Notify means a completion slipped in between the drain and the arm and
// the CQ is NOT armed (no packet will come): drain again and retry until Notify says ND_PENDING.
// Manual mode: JS drains; the CQ is armed for errors only.
void Poller::DrainAndArm(CqState* s, Batch* batch) {
  if (!armCqs_) {
    ArmForErrors(s, batch);
    return;
  }
  for (int round = 0; round < 100000; ++round) {
    Drain(s, batch);
    HRESULT hr = s->cq->Notify(ND_CQ_NOTIFY_ANY, &s->ov);
    if (hr == ND_PENDING) {
      s->armed = true;
      armed_++;
      return;
    }
    if (hr != ND_SUCCESS) {  // CQ unusable (overrun, device removed): leave it unarmed
      s->failed = true;
      ReportFailure(s, hr, batch);
      return;
    }
  }
}

// Manual mode: Notify(ND_CQ_NOTIFY_ERRORS) completes only on a CQ error (ND SDK docs/IND2CompletionQueue.md), so
// the poller learns of an overrun without taking a result JS would poll. A provider that answers ND_SUCCESS (a
// quirk: nothing to report) is asked again, a few times at most.
void Poller::ArmForErrors(CqState* s, Batch* batch) {
  for (int round = 0; round < 8; ++round) {
    HRESULT hr = s->cq->Notify(ND_CQ_NOTIFY_ERRORS, &s->ov);
    if (hr == ND_PENDING) {
      s->armed = true;
      armed_++;
      return;
    }
    if (hr != ND_SUCCESS) {
      s->failed = true;
      Drain(s, batch);  // what arrived before the failure goes first (JS may be polling too: the CQ is dead)
      ReportFailure(s, hr, batch);
      return;
    }
  }
}

// A CQ's Notify packet. The status is the issuer's to tell (IND2Overlapped::GetOverlappedResult, ND SDK
// docs/IND2Overlapped.md): ND_PENDING means the provider started a next phase of the same request, whose own packet
// follows (the CQ is still armed: issuing another Notify on this OVERLAPPED now would reuse it while in flight);
// a failure other than ND_CANCELED is a CQ error (overrun, device removed: docs/nd2.md §7.3), after which Notify
// would only fail again — the CQ is drained once and left unarmed instead of re-armed in a loop.
void Poller::OnNotify(CqState* s, Batch* batch) {
  if (!s->armed) return;  // not ours to handle (cannot happen with a conforming provider)
  const HRESULT hr = s->cq->GetOverlappedResult(&s->ov, FALSE);
  if (hr == ND_PENDING) return;
  s->armed = false;
  armed_--;
  if (FAILED(hr) && hr != ND_CANCELED) s->failed = true;
  if (s->closing) {
    Finalize(s, batch);
  } else if (s->failed) {
    Drain(s, batch);
    ReportFailure(s, hr, batch);
  } else if (!armCqs_) {
    ArmForErrors(s, batch);  // no error after all (a spurious or quirky completion): watch again
  } else if (spinMicros_ > 0 || loopSpin_) {
    Drain(s, batch);  // the spin window that follows watches it; ArmAll re-arms it before sleeping
  } else {
    DrainAndArm(s, batch);
  }
}

// What completes into a failed CQ is lost (an overrun CQ takes nothing more, not even the flush of its queue
// pairs), so the requests waiting on it would never settle: one record tells lib/, which fails them
// (lib/adapter.ts _cqFailed).
void Poller::ReportFailure(CqState* s, HRESULT hr, Batch* batch) {
  if (s->reported || stopping_) return;
  s->reported = true;
  batch->words.push_back(s->id);
  batch->words.push_back(static_cast<uint32_t>(hr));
  batch->words.push_back(0);
  batch->words.push_back(kKindCqError);
  batch->words.push_back(0);
}

// The CQ's last visit: whatever is still in it is delivered, requests counted on it that will never
// complete here stop holding the event loop, and the poller's reference goes.
void Poller::Finalize(CqState* s, Batch* batch) {
  if (armCqs_) Drain(s, batch);  // manual mode: what is left is JS's to poll (or lost with the CQ)
  int64_t left = s->outstanding.exchange(0);
  if (left > 0) batch->counted += static_cast<uint32_t>(left);
  s->Unref();
}

void Poller::BeginStop(Batch* batch) {
  stopping_ = true;
  std::vector<CqState*> cqs;
  cqs.swap(cqs_);
  for (CqState* s : cqs) {
    s->closing = true;
    if (s->armed)
      s->cq->CancelOverlappedRequests();  // its Notify comes back ND_CANCELED, then Finalize
    else
      Finalize(s, batch);
  }
}

void Poller::Handle(const OVERLAPPED_ENTRY& e, Batch* batch) {
  switch (e.lpCompletionKey) {
    case kStopKey:
      BeginStop(batch);
      return;
    case kAddCqKey: {
      auto* s = static_cast<CqState*>(reinterpret_cast<PollHeader*>(e.lpOverlapped));
      if (stopping_) {
        s->Unref();
        return;
      }
      cqs_.push_back(s);
      DrainAndArm(s, batch);
      return;
    }
    case kRemoveCqKey: {
      auto* s = static_cast<CqState*>(reinterpret_cast<PollHeader*>(e.lpOverlapped));
      for (size_t i = 0; i < cqs_.size(); ++i) {
        if (cqs_[i] == s) {
          cqs_[i] = cqs_.back();
          cqs_.pop_back();
          break;
        }
      }
      if (s->closing) return;  // already being stopped
      s->closing = true;
      if (s->armed)
        s->cq->CancelOverlappedRequests();
      else
        Finalize(s, batch);
      return;
    }
    default:
      break;
  }
  if (e.lpOverlapped == nullptr) return;
  auto* h = reinterpret_cast<PollHeader*>(e.lpOverlapped);
  if (h->kind == kKindCqNotify) {
    OnNotify(static_cast<CqState*>(h), batch);
    return;
  }
  auto* r = static_cast<OvRecord*>(h);
  HRESULT status = r->issuer->GetOverlappedResult(&r->ov, FALSE);
  if (status == ND_PENDING) return;  // the provider started a next phase: another packet will come
  if (!stopping_) {
    batch->words.push_back(r->id);
    batch->words.push_back(static_cast<uint32_t>(status));
    batch->words.push_back(0);
    batch->words.push_back(r->kind);
    batch->words.push_back(0);
    if (r->mrId != 0) batch->mrUpdates.push_back(MrUpdate{r->mrId, r->kind, status});
    if (r->counted) batch->counted++;
  }
  delete r;
  inflight_.fetch_sub(1, std::memory_order_relaxed);
}

void Poller::Flush(std::unique_ptr<Batch>* batch) {
  if ((*batch)->empty()) return;
  if (stopping_) {
    (*batch)->Clear();
    return;
  }
  Batch* b = batch->release();
  if (deliver_ == nullptr || !deliver_(ctx_, b)) delete b;
  batch->reset(new Batch());
}

// Busy window before sleeping (AdapterOptions.spinMicros): polls the port without waiting and takes the CQs'
// results directly, telling the provider that this thread polls in a loop (INDPollingHint). A provider that can
// make progress on the polling thread (the software provider reads its sockets there) then needs no thread of
// its own to wake for a message: one hop (poller -> JS) instead of two. CQs are not armed meanwhile (arming
// says "I stop polling and wait"); ArmAll arms them before the thread sleeps. true: port packets are in entries.
bool Poller::Spin(OVERLAPPED_ENTRY* entries, ULONG* n, std::unique_ptr<Batch>* batch) {
  const auto spin = std::chrono::microseconds(spinMicros_);
  auto deadline = Clock::now() + spin;
  bool got = false;
  SetPollingThread(TRUE);
  for (;;) {
    if (GetQueuedCompletionStatusEx(port_, entries, kPortBatch, n, 0, FALSE) && *n > 0) {
      got = true;
      break;
    }
    for (CqState* s : cqs_) Drain(s, batch->get());
    if (!(*batch)->empty()) {
      Flush(batch);
      deadline = Clock::now() + spin;
    } else {
      std::this_thread::yield();  // an empty round offers the core (docs/threads.md, "Busy-polling")
    }
    if (Clock::now() >= deadline) break;
  }
  SetPollingThread(FALSE);
  return got;
}

void Poller::PollCqs(Batch* batch) {
  // Set on every call: another adapter's window on this thread may have ended the hint (it is the thread's).
  SetPollingThread(TRUE);
  for (CqState* s : cqs_) {
    if (!s->closing && !s->failed) Drain(s, batch);
  }
}

Batch* Poller::EndLoopSpin() {
  loopBatch_.Clear();
  loopSpin_ = false;
  // The thread stops polling: a CQ still armed from before the window gives its connections back to the
  // provider's own progress now (the others when ArmAll's Notify arms them).
  SetPollingThread(FALSE);
  ArmAll(&loopBatch_);
  return &loopBatch_;
}

void Poller::SetPollingThread(BOOL polling) {
  for (CqState* s : cqs_) {
    if (s->hint != nullptr) s->hint->SetPollingThread(polling);
  }
}

// Before sleeping: arms every CQ the spin window left unarmed. false if results came in meanwhile (in batch):
// then the caller delivers them and polls again instead of sleeping.
bool Poller::ArmAll(Batch* batch) {
  for (CqState* s : cqs_) {
    if (!s->armed && !s->closing && !s->failed) DrainAndArm(s, batch);
  }
  return batch->empty();
}

void Poller::Run() {
  OVERLAPPED_ENTRY entries[kPortBatch];
  std::unique_ptr<Batch> batch(new Batch());
  Clock::time_point stopDeadline{};
  for (;;) {
    ULONG n = 0;
    bool got = false;
    if (spinMicros_ > 0 && !stopping_) {
      got = Spin(entries, &n, &batch);
      if (!got && !ArmAll(batch.get())) {
        Flush(&batch);
        continue;
      }
    }
    if (!got) {
      const DWORD timeout = stopping_ ? 20 : INFINITE;
      if (GetQueuedCompletionStatusEx(port_, entries, kPortBatch, &n, timeout, FALSE)) {
        wakeups_.fetch_add(1, std::memory_order_relaxed);
      } else {
        n = 0;
      }
    }
    const bool wasStopping = stopping_;
    for (ULONG i = 0; i < n; ++i) {
      Handle(entries[i], batch.get());
      if (batch->words.size() >= kFlushWords) Flush(&batch);
    }
    Flush(&batch);
    if (stopping_) {
      if (!wasStopping) stopDeadline = Clock::now() + kStopGrace;
      // Requests still pending after the grace period are abandoned (leaked, never freed: the provider
      // may still write their OVERLAPPED).
      if ((inflight_.load() <= 0 && armed_ == 0) || Clock::now() >= stopDeadline) break;
    }
  }
}

}  // namespace netdirect

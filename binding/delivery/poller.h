// The completion poller: owns the adapter's I/O completion port. The adapter's overlapped file is associated with
// the port, so every pending overlapped request (registration, connection management, CQ notification) ends as
// one packet there. The poller turns packets and drained CQ entries into completion records, in batches.
// Who runs it (docs/threads.md):
//  * thread mode: a thread of its own (a libuv thread) blocks on the port and hands each batch to the JS thread
//    through a thread-safe function (one call per batch);
//  * event-loop mode: the JS thread runs RunOnce() when the port's descriptor is readable (event_loop.h) and
//    delivers the batch itself — no thread at all;
//  * manual mode: a thread as in thread mode, for overlapped requests only; JS polls the CQs itself (cq.poll()),
//    and the poller watches each CQ for errors alone (Notify ND_CQ_NOTIFY_ERRORS), so an overrun still reaches
//    lib/ as a cqError record instead of leaving the promises on that CQ pending.
#ifndef NETDIRECT_POLLER_H_
#define NETDIRECT_POLLER_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "nd/nd2.h"
#include "nd/netdirect_ext.h"
#include "delivery/records.h"  // kRecordWords, RecordKind

#include "delivery/uv_min.h"  // the poller is a libuv thread where Node exports libuv (std::thread otherwise)
#ifndef NETDIRECT_HAVE_UV
#include <thread>
#endif

namespace netdirect {

// requestContext of posted requests: the lib/ id in the low 32 bits plus accounting bits.
constexpr uint64_t kContextCounted = uint64_t(1) << 32;     // refs the event loop until its completion
constexpr uint64_t kContextCqCounted = uint64_t(1) << 33;   // also counted in its CQ's `outstanding`
// A silent request (ND_OP_FLAG_SILENT_SUCCESS): the low 32 bits are not a request id but the request's number among
// its queue pair's silent requests (lib/requests.ts SilentRequests); its record's kind carries kRecordSilent.
constexpr uint64_t kContextSilent = uint64_t(1) << 34;

// Common head of everything whose OVERLAPPED goes to the port: the OVERLAPPED first, then the kind.
struct PollHeader {
  OVERLAPPED ov;
  uint8_t kind;
};

// One overlapped request in flight (heap; owned by the poller once the call returned ND_PENDING).
struct OvRecord : PollHeader {
  IND2Overlapped* issuer;  // AddRef'd: GetOverlappedResult is asked on it
  uint32_t id;
  bool counted;                  // refs the event loop while pending
  uint32_t mrId = 0;             // Register/Deregister: the region whose state the completion updates
  IUnknown* hold = nullptr;      // another object the request uses (QP, connector): AddRef'd
  std::unique_ptr<uint8_t[]> keep;  // bytes the provider may read until completion (private data, address)

  OvRecord(IND2Overlapped* issuerIn, uint32_t idIn, uint8_t kindIn, bool countedIn);
  ~OvRecord();
  OvRecord(const OvRecord&) = delete;
  OvRecord& operator=(const OvRecord&) = delete;
  void Hold(IUnknown* obj);
};

// A CQ as the poller and the post path share it. `ov` is the poller's Notify OVERLAPPED.
struct CqState : PollHeader {
  IND2CompletionQueue* cq;                 // AddRef'd
  INDPollingHint* hint = nullptr;          // AddRef'd, when the provider offers the extension (nd/netdirect_ext.h)
  std::atomic<int64_t> outstanding{0};     // counted requests expected on this CQ
  std::atomic<bool> closed{false};         // JS closed it: no more counted posts
  std::atomic<int> refs{1};
  // Poller thread only:
  bool armed = false;
  bool closing = false;
  bool failed = false;  // a Notify completed with a CQ error (overrun, device removed): never armed again
  bool reported = false;  // the failure went to JS (one kKindCqError record)
  uint32_t id = 0;        // lib/'s id of the CompletionQueue, named by that record
  // JS thread only (manual mode): results that native code on the JS thread took from the CQ with GetResults but
  // does not own (ndbench's native loop, binding/bench/bench_nd.cc, which shares the application's CQ) are handed
  // back here; the wrapper's next poll() delivers them first, so the requests they belong to still settle.
  std::vector<ND2_RESULT> handedBack;
  void HandBack(const ND2_RESULT& r) { handedBack.push_back(r); }
  // Results the poller took off the CQ and has not delivered yet, oldest first (their `outstanding` already
  // counted down). `mu` is held across every GetResults on the CQ and every change to `taken`, by the poller
  // (Poller::Drain) and by the JS thread (cq.poll(), which takes `taken` before the CQ: completions reach lib/ in
  // the order the CQ produced them however poll() and the poller's deliveries interleave). The batch that
  // carries the poller's take names the CQ (a kKindCqTaken record); its delivery takes what is left of `taken`.
  // cq.poll() takes `mu` only while `shared` is set: from the start where the poller takes the CQ's results ('thread'
  // and 'loop' mode), and from the poller's first take in manual mode (where it drains a CQ only once it failed, so
  // that a manual-mode loop pays for no lock; a poll racing that one drain of a dead CQ may still see a later result
  // first).
  std::mutex mu;
  std::atomic<bool> shared{false};
  std::vector<ND2_RESULT> taken;

  explicit CqState(IND2CompletionQueue* cqIn);
  void Ref() { refs.fetch_add(1); }
  void Unref();

 private:
  ~CqState();
};

struct MrUpdate {
  uint32_t mrId;
  uint8_t kind;  // kKindRegister | kKindDeregister
  HRESULT status;
};

// What one JS-thread crossing carries. A kKindCqTaken record [i, 0, 0, kKindCqTaken, 0] stands for what CQ
// cqs[i] holds in `taken` when the batch is delivered (Poller::Collect puts those results in its place).
struct Batch {
  std::vector<uint32_t> words;  // kRecordWords per record
  std::vector<MrUpdate> mrUpdates;
  uint32_t counted = 0;  // pending requests settled by this batch (refs to drop)
  std::vector<CqState*> cqs;  // the CQs kKindCqTaken records name (a reference each)
  std::vector<uint32_t> spare;  // Collect's scratch, kept for its capacity
  Batch() = default;
  Batch(const Batch&) = delete;
  Batch& operator=(const Batch&) = delete;
  ~Batch() { Clear(); }
  bool empty() const { return words.empty() && mrUpdates.empty() && counted == 0; }
  void Clear() {
    words.clear();
    mrUpdates.clear();
    counted = 0;
    for (CqState* s : cqs) s->Unref();
    cqs.clear();
  }
};

class Poller {
 public:
  // deliver(ctx, batch) takes ownership of batch (returns false if it could not, then the poller frees it).
  using DeliverFn = bool (*)(void* ctx, Batch* batch);

  Poller(DeliverFn deliver, void* ctx, uint32_t spinMicros, bool armCqs);
  ~Poller();
  Poller(const Poller&) = delete;
  Poller& operator=(const Poller&) = delete;

  // Creates the port, associates `file` with it and, with ownThread, starts the thread. false: *why says what
  // failed. Without a thread, deliver is never called: the owner runs RunOnce() and delivers what it returns.
  bool Start(HANDLE file, bool ownThread, const char** why);
  // Posts the stop packet and joins the thread (or, without one, runs the stop on the calling thread).
  // Requests still pending are waited for (bounded), then abandoned; nothing is delivered after Stop began.
  void Stop();
  // No thread: handles every packet queued now, without waiting; the records for the JS thread.
  Batch* RunOnce();
  // Readable while packets are queued (for an event loop); -1 where the port has no such descriptor.
  int Descriptor();
  // The calling thread runs RunOnce() before it next waits: its own packets need not signal the descriptor.
  void WillDrain(bool on);

  HANDLE port() const { return port_; }
  // The key the adapter's overlapped file is associated with on port() (what a provider that posts its completions
  // itself, INDCompletionPort, posts them with).
  static constexpr ULONG_PTR kFileKey = 1;
  // true: CQs are armed for every completion and their results delivered (thread and event-loop modes); false:
  // only watched for errors (manual mode: JS polls them).
  bool armsCqs() const { return armCqs_; }

  // JS thread: an overlapped call is about to be issued / was not left pending after all.
  void WillIssue() { inflight_.fetch_add(1, std::memory_order_relaxed); }
  void NotPending() { inflight_.fetch_sub(1, std::memory_order_relaxed); }

  // JS thread: hand a CQ to the poller (it arms it, for errors only in manual mode) / take it back (it cancels its
  // Notify, drains it once more unless JS polls it, and drops its reference).
  void AddCq(CqState* cq);
  void RemoveCq(CqState* cq);

  uint64_t wakeups() const { return wakeups_.load(std::memory_order_relaxed); }

  // Event-loop mode's busy window (the JS thread, between RunOnce() calls; delivery/event_loop.h SetSpin). While
  // it is open, a CQ whose Notify completes is drained and left unarmed (the window watches it), and PollCqs()
  // drains every CQ telling the provider that this thread polls (INDPollingHint): the built-in provider then reads
  // its connections on this thread — a same-host ring with no system call on either side, the peer's doorbell
  // included (docs/shm.md "Waking"). EndLoopSpin() ends the polling and arms every CQ again; what it drained
  // meanwhile is in the batch it returns (RunOnce's: deliver it before the next RunOnce).
  void BeginLoopSpin() { loopSpin_ = true; }
  void PollCqs(Batch* batch);
  Batch* EndLoopSpin();
  bool loopSpinning() const { return loopSpin_; }

  // Appends one CQ result as a record and settles its accounting (batch->counted, cq->outstanding unless cq is
  // nullptr); shared with cq.poll() on the JS thread.
  static void AppendResult(const ND2_RESULT& r, Batch* batch, CqState* cq);
  // JS thread, before a batch is handed to lib/: each kKindCqTaken record becomes the results its CQ holds in
  // `taken` (none when a cq.poll() took them first), and the batch lets go of its CQs.
  static void Collect(Batch* batch);

  // A debugging seam (NETDIRECT_DEBUG_POLLER_STALL_MS, read by the adapter): the poller takes one result per
  // GetResults and sleeps this long after each, holding what it took undelivered, so that a cq.poll() on the JS
  // thread runs in between (test/batch.test.ts). 0: off.
  void SetStall(uint32_t ms) { stallMs_ = ms; }

 private:
  static void ThreadMain(void* arg);
  void Run();
  bool Spin(OVERLAPPED_ENTRY* entries, ULONG* n, std::unique_ptr<Batch>* batch);
  void SetPollingThread(BOOL polling);
  bool ArmAll(Batch* batch);
  void Handle(const OVERLAPPED_ENTRY& e, Batch* batch);
  void DrainAndArm(CqState* s, Batch* batch);
  void ArmForErrors(CqState* s, Batch* batch);
  void OnNotify(CqState* s, Batch* batch);
  void ReportFailure(CqState* s, HRESULT hr, Batch* batch);
  void Drain(CqState* s, Batch* batch);
  void Finalize(CqState* s, Batch* batch);
  void BeginStop(Batch* batch);
  void Flush(std::unique_ptr<Batch>* batch);

  DeliverFn deliver_;
  void* ctx_;
  uint32_t spinMicros_;
  bool armCqs_;
  uint32_t stallMs_ = 0;
  HANDLE port_ = nullptr;
  bool started_ = false;  // the thread runs
  Batch loopBatch_;       // RunOnce()'s records, reused
#ifdef NETDIRECT_HAVE_UV
  uv_thread_t thread_{};
#else
  std::thread thread_;
#endif
  std::atomic<int64_t> inflight_{0};
  std::atomic<uint64_t> wakeups_{0};
  // Poller thread only:
  std::vector<CqState*> cqs_;
  int armed_ = 0;
  bool stopping_ = false;
  bool loopSpin_ = false;  // event-loop mode's busy window is open (BeginLoopSpin .. EndLoopSpin)
};

}  // namespace netdirect

#endif  // NETDIRECT_POLLER_H_

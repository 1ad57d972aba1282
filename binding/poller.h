// The completion poller: one thread per adapter (a libuv thread) that owns an I/O completion port. The
// adapter's overlapped file is associated with the port, so every pending overlapped request (registration,
// connection management, CQ notification) ends as one packet there. The thread turns packets and drained CQ
// entries into completion records and hands them to the JS thread in batches (one call per batch).
#ifndef NETDIRECT_POLLER_H_
#define NETDIRECT_POLLER_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

#include "nd/nd2.h"
#include "nd/netdirect_ext.h"
#include "records.h"  // kRecordWords, RecordKind

// The poller is a libuv thread. node-api-headers ship no uv.h, but Node exports libuv's symbols to
// addons; on POSIX uv_thread_t is pthread_t, so the two thread functions are declared here. The Windows
// import library (node.lib from node-api-headers' .def) has no libuv symbols: std::thread there.
#if defined(__has_include)
#if __has_include(<uv.h>)
#include <uv.h>
#define NETDIRECT_HAVE_UV 1
#endif
#endif
#if !defined(NETDIRECT_HAVE_UV) && !defined(_WIN32)
#include <pthread.h>
extern "C" {
typedef pthread_t uv_thread_t;
int uv_thread_create(uv_thread_t* tid, void (*entry)(void* arg), void* arg);
int uv_thread_join(uv_thread_t* tid);
}
#define NETDIRECT_HAVE_UV 1
#endif
#ifndef NETDIRECT_HAVE_UV
#include <thread>
#endif

namespace netdirect {

// requestContext of posted requests: the lib/ id in the low 32 bits plus accounting bits.
constexpr uint64_t kContextCounted = uint64_t(1) << 32;     // refs the event loop until its completion
constexpr uint64_t kContextCqCounted = uint64_t(1) << 33;   // also counted in its CQ's `outstanding`

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

// A CQ as the poller and the post path share it. `ov` is the Notify OVERLAPPED (thread mode).
struct CqState : PollHeader {
  IND2CompletionQueue* cq;                 // AddRef'd
  INDPollingHint* hint = nullptr;          // AddRef'd, when the provider offers the extension (nd/netdirect_ext.h)
  std::atomic<int64_t> outstanding{0};     // counted requests expected on this CQ
  std::atomic<bool> closed{false};         // JS closed it: no more counted posts
  std::atomic<int> refs{1};
  // Poller thread only:
  bool armed = false;
  bool closing = false;

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

// What one JS-thread crossing carries.
struct Batch {
  std::vector<uint32_t> words;  // kRecordWords per record
  std::vector<MrUpdate> mrUpdates;
  uint32_t counted = 0;  // pending requests settled by this batch (refs to drop)
  bool empty() const { return words.empty() && mrUpdates.empty() && counted == 0; }
};

class Poller {
 public:
  // deliver(ctx, batch) takes ownership of batch (returns false if it could not, then the poller frees it).
  using DeliverFn = bool (*)(void* ctx, Batch* batch);

  Poller(DeliverFn deliver, void* ctx, uint32_t spinMicros, bool armCqs);
  ~Poller();
  Poller(const Poller&) = delete;
  Poller& operator=(const Poller&) = delete;

  // Creates the port, associates `file` with it and starts the thread. false: *why says what failed.
  bool Start(HANDLE file, const char** why);
  // Posts the stop packet and joins. Requests still pending are waited for (bounded), then abandoned.
  void Stop();

  HANDLE port() const { return port_; }
  bool armsCqs() const { return armCqs_; }

  // JS thread: an overlapped call is about to be issued / was not left pending after all.
  void WillIssue() { inflight_.fetch_add(1, std::memory_order_relaxed); }
  void NotPending() { inflight_.fetch_sub(1, std::memory_order_relaxed); }

  // JS thread, thread mode: hand a CQ to the poller (it arms it) / take it back (it cancels its Notify,
  // drains it once more and drops its reference).
  void AddCq(CqState* cq);
  void RemoveCq(CqState* cq);

  uint64_t wakeups() const { return wakeups_.load(std::memory_order_relaxed); }

  // Appends one CQ result as a record and settles its accounting (batch->counted, cq->outstanding); shared
  // with cq.poll() on the JS thread.
  static void AppendResult(const ND2_RESULT& r, Batch* batch, CqState* cq);

 private:
  static void ThreadMain(void* arg);
  void Run();
  bool Spin(OVERLAPPED_ENTRY* entries, ULONG* n, std::unique_ptr<Batch>* batch);
  void SetPollingThread(BOOL polling);
  bool ArmAll(Batch* batch);
  void Handle(const OVERLAPPED_ENTRY& e, Batch* batch);
  void DrainAndArm(CqState* s, Batch* batch);
  static void Drain(CqState* s, Batch* batch);
  void Finalize(CqState* s, Batch* batch);
  void BeginStop(Batch* batch);
  void Flush(std::unique_ptr<Batch>* batch);

  DeliverFn deliver_;
  void* ctx_;
  uint32_t spinMicros_;
  bool armCqs_;
  HANDLE port_ = nullptr;
  bool started_ = false;
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
};

}  // namespace netdirect

#endif  // NETDIRECT_POLLER_H_

// Adapter: owns the IND2Adapter, its overlapped file and its completion poller; tracks its children and
// closes them first. Also the base class of every child wrapper.
#ifndef NETDIRECT_ADAPTER_H_
#define NETDIRECT_ADAPTER_H_

#include <napi.h>

#include <memory>
#include <string>
#include <unordered_set>
#include <vector>

#include "addon/addon.h"
#include "delivery/event_loop.h"
#include "delivery/loop_win.h"
#include "nd/nd2.h"
#include "ndkit/nd_ptr.h"
#include "delivery/poller.h"

namespace netdirect {

class Adapter;

// Close order of an adapter's children (docs/architecture.md, Lifetime: connector -> QP -> MW -> MR -> CQ -> listener).
enum ChildKind : int {
  kChildConnector = 0,
  kChildQueuePair,
  kChildMemoryWindow,
  kChildMemoryRegion,
  kChildSharedReceiveQueue,
  kChildCompletionQueue,
  kChildListener,
  kChildKindCount,
};

// What Adapter::NewChild hands a child constructor (through AddonData::constructing).
struct ChildInit {
  ChildKind kind;
  Adapter* adapter;
  Napi::Object adapterObject;
};

// Base of every child wrapper: holds its adapter (JS object strongly, so the adapter outlives it) and
// keeps itself alive from creation until close().
class Child {
 public:
  explicit Child(ChildKind kind) : kind_(kind) {}
  virtual ~Child() = default;
  Child(const Child&) = delete;
  Child& operator=(const Child&) = delete;

  ChildKind childKind() const { return kind_; }
  bool closed() const { return adapter_ == nullptr; }
  Adapter* adapter() const { return adapter_; }

  // Cancels outstanding overlapped requests (first phase of the adapter's teardown).
  virtual void CancelAll() {}
  // Releases the ND object and detaches from the adapter. teardown: the adapter is going away (close() or
  // env exit): do whatever makes release safe, synchronously.
  void CloseNow(bool teardown);

 protected:
  // Takes the init the adapter prepared, or throws ERR_ND_ILLEGAL_CONSTRUCTOR.
  static ChildInit* TakeInit(const Napi::CallbackInfo& info, ChildKind kind, const char* className);
  void Attach(ChildInit* init);
  virtual void ReleaseNd(bool teardown) = 0;
  virtual void KeepAlive(bool on) = 0;  // ObjectWrap Ref()/Unref() of the derived class

  // Refuses calls on a closed object: ERR_ND_CLOSED.
  void RequireOpen(Napi::Env env, const char* operation, const char* className) const;

  Adapter* adapter_ = nullptr;
  Napi::ObjectReference adapterRef_;

 private:
  ChildKind kind_;
};

// Checks the receiver of an InstanceMethod call: open (ERR_ND_CLOSED). No type-tag check: napi_define_class gives
// methods a signature, so V8 throws "Illegal invocation" for a receiver that is not an instance of the class
// before the callback runs (test/misuse.test.ts, "foreign receivers"); the tag lookup cost ~0.3 µs on every
// post() and poll().
// The hottest methods (qp.post, cq.poll: once per message) are also own properties of each instance, bound
// to its C++ object through the function's data: a call then skips the prototype method's napi_unwrap (a
// private-symbol property lookup through V8's runtime, ~800 instructions — measured with callgrind, more than
// the rest of an empty cq.poll()). The function holds its instance (a non-enumerable `owner`), so it can never
// outlive the object it points to; the prototype methods stay for any other receiver.
template <Napi::Value (*Cb)(const Napi::CallbackInfo&)>
void BindHotMethod(Napi::Env env, Napi::Object self, const char* name, void* object) {
  Napi::Function fn = Napi::Function::New<Cb>(env, name, object);
  fn.DefineProperty(Napi::PropertyDescriptor::Value("owner", self));
  self.DefineProperty(Napi::PropertyDescriptor::Value(name, fn));
}

template <typename T>
void CheckThis(const Napi::CallbackInfo& info, T* self, const char* operation) {
  if (self->closed())
    ThrowMisuse(info.Env(), "ERR_ND_CLOSED", operation, std::string(T::kClassName) + " is closed");
}

// The same for an InstanceAccessor callback: accessors have no signature, so the type tag is checked too
// (ERR_ND_FOREIGN_OBJECT): a foreign wrapped object would otherwise be unwrapped as the wrong C++ class.
template <typename T>
void CheckAccessorThis(const Napi::CallbackInfo& info, T* self, const char* operation) {
  if (!HasTag(info.This(), T::kTag))
    ThrowMisuse(info.Env(), "ERR_ND_FOREIGN_OBJECT", operation,
                std::string("receiver is not a netdirect ") + T::kClassName + " object");
  CheckThis(info, self, operation);
}

// Unwraps an argument that must be an open child of `adapter`.
template <typename T>
T* UnwrapChild(Napi::Value value, Adapter* adapter, const char* operation, const char* what) {
  T* child = UnwrapTagged<T>(value, operation, what);
  if (child->closed())
    ThrowMisuse(value.Env(), "ERR_ND_CLOSED", operation, std::string(what) + " is closed");
  if (child->adapter() != adapter)
    ThrowMisuse(value.Env(), "ERR_ND_WRONG_ADAPTER", operation,
                std::string(what) + " belongs to another adapter");
  return child;
}

// Registration state of a memory region (JS thread only).
enum RegionState : uint8_t { kRegionIdle, kRegionRegistering, kRegionRegistered, kRegionDeregistering };

struct RegionSlot {
  IND2MemoryRegion* mr = nullptr;  // not owned (the MemoryRegion wrapper owns it); nullptr: free slot
  uint8_t* base = nullptr;
  uint64_t length = 0;
  RegionState state = kRegionIdle;
  bool inUse = false;
};

// Who delivers completions (AdapterOptions.completion; docs/threads.md). The values cross from lib/adapter.ts.
enum CompletionMode : uint32_t {
  kModeThread = 0,  // the poller thread, then a thread-safe function
  kModeManual = 1,  // only cq.poll() on the JS thread
  kModeLoop = 2,    // the JS thread's event loop runs the provider's progress and the poller (event_loop.h)
  kModeAuto = 3,    // constructor argument only: kModeLoop where the provider offers it, else kModeThread
};

class Adapter : public Napi::ObjectWrap<Adapter> {
 public:
  static constexpr napi_type_tag kTag = tags::kAdapter;
  static constexpr const char* kClassName = "Adapter";
  static constexpr uint32_t kMaxSge = 256;  // SGEs per request built on the stack

  static Napi::Function Init(Napi::Env env);

  explicit Adapter(const Napi::CallbackInfo& info);
  ~Adapter() override;

  bool closed() const { return closed_; }
  IND2Adapter* nd() const { return nd_.get(); }
  HANDLE file() const { return file_; }
  // The overlapped file CQs are created on: in Windows event-loop mode a second one, on libuv's port (loop_win.h).
  HANDLE cqFile() const {
#ifdef _WIN32
    if (cqFile_ != nullptr) return cqFile_;
#endif
    return file_;
  }
#ifdef _WIN32
  WinLoop* winLoop() const { return winLoop_; }
#endif
  Poller* poller() const { return poller_.get(); }
  bool manual() const { return mode_ == kModeManual; }
  bool loopMode() const { return mode_ == kModeLoop; }
  // Event-loop mode: one non-blocking round of the provider's progress on the JS thread (cq.poll() of an empty
  // CQ uses it, so a loop that spins on cq.poll() is never starved). Completions it produces reach JS through
  // the next loop turn (or the cq.poll() that asked). Such a loop may run inside the event-loop turn that settled
  // the promise it continues (OnLoopReady delivers before it flushes): what that turn deferred — a Read Response,
  // a confirmation Read, the loop's own posts — leaves first, or it would wait for a Flush that only comes after
  // the loop ends.
  void ProgressInline() {
    if (!progress_) return;
    progress_->Flush();
    progress_->Progress(0, nullptr);
  }

  void AddChild(Child* child);
  void RemoveChild(Child* child);

  // Pending requests (JS thread): the TSFN, and so the event loop, is referenced while > 0.
  void AddPending() {
    if (pending_++ == 0) KeepLoopAlive(true);
    if (loop_ && SpinWindowNs() != 0) SpinFromNow();
  }
  void SubPending(uint64_t n);

  // Issues one overlapped request: call(&r->ov) -> HRESULT. ND_PENDING hands `r` to the poller, which may
  // complete and delete it before the call even returns (a provider completing from another thread), so
  // nothing reads `r` after the call: `counted` is taken before, and `call` gets only the OVERLAPPED (take
  // anything else it passes from `r` before too). Returns ND_PENDING or ND_SUCCESS, or throws NdError.
  template <typename Call>
  uint32_t IssueOverlapped(Napi::Env env, OvRecord* r, const char* operation, Call&& call) {
    const bool counted = r->counted;
    poller_->WillIssue();
    const HRESULT hr = call(&r->ov);
    return FinishOverlapped(env, r, counted, hr, operation);
  }

  // Memory region table: ids used in SGE triples.
  uint32_t AllocRegion(IND2MemoryRegion* mr);
  void FreeRegion(uint32_t id);
  RegionSlot* Region(uint32_t id) { return id < regions_.size() && regions_[id].inUse ? &regions_[id] : nullptr; }
  // The teardown keeps references a region's buffer needs until the poller has stopped.
  void DeferUntilStopped(Napi::Reference<Napi::ArrayBuffer>&& ref) { deferred_.push_back(std::move(ref)); }

  // Reads nSge triples [memoryRegionId, offset, length] from the scratch array into sge[].
  void BuildSges(Napi::Env env, uint32_t nSge, ND2_SGE* sge, const char* operation);
  // The same from `triples` ([memoryRegionId, offset, length] each): a batch's own array (lib/batch.ts).
  void BuildSgesFrom(Napi::Env env, const double* triples, uint32_t nSge, ND2_SGE* sge, const char* operation);

  // Runs a child constructor with its init.
  Napi::Object NewChild(Napi::FunctionReference& ctor, ChildInit* init);

 private:
  // After IssueOverlapped's call: ND_PENDING counts the request (r is the poller's now: never read); otherwise
  // frees r (no packet will come) and returns ND_SUCCESS or throws NdError.
  uint32_t FinishOverlapped(Napi::Env env, OvRecord* r, bool counted, HRESULT hr, const char* operation);
  static void CallJs(Napi::Env env, Napi::Function callback, Adapter* self, Batch* batch);
  static void OnLoopReady(void* ctx);
  // A provider socket the loop watches itself is ready (INDProgressDescriptors): the same turn, for that one.
  static void OnSocketReady(void* ctx, void* token, uint32_t events);
  static void Turn(Adapter* self, void* token, uint32_t events);  // token nullptr: Progress()
  void WatchProviderSet();  // libuv refused a socket: the loop watches the provider's own descriptor again
  void CallFromLoop(Napi::Env env, Napi::Function callback, const Batch* batch);
  void KeepLoopAlive(bool on);
  bool StartLoop(Napi::Env env, const char** why);
  void StopLoop();
  static bool Deliver(void* ctx, Batch* batch);
#ifdef _WIN32
  bool StartWinLoop(Napi::Env env, std::string* why);
  void StopWinLoop();  // detaches the WinLoop and closes the CQs' overlapped file
  void BindProviderPort(HANDLE file, HANDLE port, ULONG_PTR key);  // INDCompletionPort, when the provider has it
  static void DeliverFromWinLoop(void* ctx, Batch* batch);
#endif
  static void EnvCleanup(void* arg);
  void OnBatch(Napi::Env env, Napi::Function callback, Batch* batch);
  void Teardown(bool envExit);

  Napi::Value GetInfo(const Napi::CallbackInfo& info);
  Napi::Value GetProvider(const Napi::CallbackInfo& info);
  Napi::Value QueryAddressList(const Napi::CallbackInfo& info);
  Napi::Value CreateCompletionQueue(const Napi::CallbackInfo& info);
  Napi::Value CreateQueuePair(const Napi::CallbackInfo& info);
  Napi::Value CreateMemoryRegion(const Napi::CallbackInfo& info);
  Napi::Value CreateMemoryWindow(const Napi::CallbackInfo& info);
  Napi::Value CreateSharedReceiveQueue(const Napi::CallbackInfo& info);
  Napi::Value CreateConnector(const Napi::CallbackInfo& info);
  Napi::Value CreateListener(const Napi::CallbackInfo& info);
  Napi::Value Stats(const Napi::CallbackInfo& info);
  Napi::Value KeepAlive(const Napi::CallbackInfo& info);
  Napi::Value SetSharedMemory(const Napi::CallbackInfo& info);
  Napi::Value AllocateShared(const Napi::CallbackInfo& info);
  Napi::Value GetCompletion(const Napi::CallbackInfo& info);
  Napi::Value Close(const Napi::CallbackInfo& info);

  void RequireOpen(const Napi::CallbackInfo& info, const char* operation);

  using Tsfn = Napi::TypedThreadSafeFunction<Adapter, Batch, &Adapter::CallJs>;

  NdPtr<IND2Adapter> nd_;
  HANDLE file_ = nullptr;
  std::unique_ptr<Poller> poller_;
  Tsfn tsfn_;
  bool tsfnLive_ = false;
  bool hookAdded_ = false;
  bool closed_ = true;  // until the constructor succeeded
  CompletionMode mode_ = kModeThread;
  // Event-loop mode:
  NdPtr<INDProgress> progress_;  // the provider's progress, driven by this thread (nullptr: none to drive)
  std::unique_ptr<LoopWatch> loop_;
  // The provider's sockets watched by the loop itself (nd/netdirect_ext.h INDProgressDescriptors), so libuv's one
  // wait says which is ready and no wait on the provider's own set (an epoll set inside libuv's) runs per wake-up;
  // nullptr: the loop watches that set's descriptor, progressFd_.
  NdPtr<INDProgressDescriptors> descriptors_;
  struct SocketWatcher final : INDProgressWatcher {
    Adapter* self = nullptr;
    void ND_CALL Watch(UINT64 descriptor, VOID* token, ULONG events) override;
    void ND_CALL Unwatch(UINT64 descriptor) override;
  };
  SocketWatcher socketWatcher_;
  int progressFd_ = -1;
#ifdef _WIN32
  // Windows event-loop mode: CQ notifications on libuv's port (loop_win.h); overlapped requests keep the poller
  // thread and the thread-safe function.
  WinLoop* winLoop_ = nullptr;  // frees itself after Detach()
  HANDLE cqFile_ = nullptr;
#endif
  // Busy-polling in event-loop mode (AdapterOptions.spinMicros; 0: off): after a post or a delivered batch the
  // loop keeps polling the provider, without blocking, until spinUntilNs_ (steady clock), or until nothing is
  // pending. A reply that comes back within the window is found without a wake-up from epoll.
  uint64_t spinNs_ = 0;
  uint64_t spinUntilNs_ = 0;
  // Without a window of its own (spinNs_ 0), the provider's for same-host connections while it has one
  // (INDSharedMemory::GetBusyPollMicros, docs/shm.md "Waking"); nullptr: a provider without the interface.
  NdPtr<INDSharedMemory> shmHint_;
  // The provider's window backs off while the machine has more runnable threads than cores: an empty round's
  // yield that gave the core away for long (OnLoopReady) ends it, and it stays shut until shmBackoffUntilNs_ —
  // spinning then only costs the ranks their share of the CPU against the threads they wait for.
  uint64_t shmBackoffUntilNs_ = 0;
  uint64_t SpinWindowNs();
  void SpinFromNow();
  bool EndSpin();
  Napi::FunctionReference onBatch_;
  std::unique_ptr<Napi::AsyncContext> asyncContext_;
  // Event-loop delivery's records (CallFromLoop): one array for every batch that fits, not one per batch.
  static constexpr size_t kLoopRecordWords = 4096;
  Napi::Reference<Napi::Uint32Array> loopRecords_;
  uint32_t* loopRecordsData_ = nullptr;  // its bytes (the ArrayBuffer is never detached: JS only reads it)
  bool delivering_ = false;              // inside CallFromLoop's call into JS
  std::string provider_;
  ND2_ADAPTER_INFO info_{};
  Napi::Reference<Napi::Float64Array> scratch_;  // keeps scratchData_ alive
  const double* scratchData_ = nullptr;
  size_t scratchLength_ = 0;  // doubles
  std::unordered_set<Child*> children_[kChildKindCount];
  std::vector<RegionSlot> regions_;  // index = region id (0 unused)
  std::vector<uint32_t> freeRegions_;
  std::vector<Napi::Reference<Napi::ArrayBuffer>> deferred_;
  uint64_t pending_ = 0;
  // keepAlive(false): pending requests no longer keep the event loop alive (lib/job/job.ts: a job's standing
  // receives must not keep a finished program from reaching 'beforeExit').
  bool keepAlive_ = true;
  uint64_t batches_ = 0;
  uint64_t completions_ = 0;
  uint64_t spinRounds_ = 0;  // event-loop rounds run inside a busy-poll window
};

}  // namespace netdirect

#endif  // NETDIRECT_ADAPTER_H_

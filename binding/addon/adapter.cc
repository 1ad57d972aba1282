#include "addon/adapter.h"

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>

#include "addon/completion_queue.h"
#include "addon/connector.h"
#include "addon/listener.h"
#include "addon/memory_region.h"
#include "addon/memory_window.h"
#include "providers/providers.h"
#include "addon/queue_pair.h"
#include "addon/shared_receive_queue.h"

namespace netdirect {

// ---- Child ---------------------------------------------------------------------------------------------

ChildInit* Child::TakeInit(const Napi::CallbackInfo& info, ChildKind kind, const char* className) {
  AddonData* data = GetAddonData(info.Env());
  auto* init = static_cast<ChildInit*>(data->constructing);
  if (init == nullptr || init->kind != kind)
    ThrowMisuse(info.Env(), "ERR_ND_ILLEGAL_CONSTRUCTOR", className,
                std::string(className) + " objects are created by their adapter");
  data->constructing = nullptr;
  return init;
}

void Child::Attach(ChildInit* init) {
  adapter_ = init->adapter;
  adapterRef_ = Napi::Persistent(init->adapterObject);  // the adapter outlives its children
  adapter_->AddChild(this);
  KeepAlive(true);  // prevent GC of an open object: it lives until close()
}

void Child::RequireOpen(Napi::Env env, const char* operation, const char* className) const {
  if (closed()) ThrowMisuse(env, "ERR_ND_CLOSED", operation, std::string(className) + " is closed");
}

void Child::CloseNow(bool teardown) {
  if (adapter_ == nullptr) return;
  ReleaseNd(teardown);
  adapter_->RemoveChild(this);
  adapter_ = nullptr;
  adapterRef_.Reset();
  KeepAlive(false);
}

// ---- Adapter -------------------------------------------------------------------------------------------

Napi::Function Adapter::Init(Napi::Env env) {
  return DefineClass(env, "Adapter",
                     {
                         TaggedAccessor<Adapter, &Adapter::GetInfo>("info"),
                         TaggedAccessor<Adapter, &Adapter::GetProvider>("provider"),
                         TaggedAccessor<Adapter, &Adapter::GetCompletion>("completion"),
                         InstanceMethod<&Adapter::QueryAddressList>("queryAddressList"),
                         InstanceMethod<&Adapter::CreateCompletionQueue>("createCompletionQueue"),
                         InstanceMethod<&Adapter::CreateQueuePair>("createQueuePair"),
                         InstanceMethod<&Adapter::CreateMemoryRegion>("createMemoryRegion"),
                         InstanceMethod<&Adapter::CreateMemoryWindow>("createMemoryWindow"),
                         InstanceMethod<&Adapter::CreateSharedReceiveQueue>("createSharedReceiveQueue"),
                         InstanceMethod<&Adapter::CreateConnector>("createConnector"),
                         InstanceMethod<&Adapter::CreateListener>("createListener"),
                         InstanceMethod<&Adapter::Stats>("stats"),
                         InstanceMethod<&Adapter::KeepAlive>("keepAlive"),
                         InstanceMethod<&Adapter::SetSharedMemory>("sharedMemory"),
                         InstanceMethod<&Adapter::AllocateShared>("allocateShared"),
                         InstanceMethod<&Adapter::Close>("close"),
                     });
}

// new Adapter(provider, address, mode (CompletionMode), spinMicros, scratch, onBatch)
Adapter::Adapter(const Napi::CallbackInfo& info) : Napi::ObjectWrap<Adapter>(info) {
  Napi::Env env = info.Env();
  const char* op = "openAdapter";
  std::string spec = ArgString(info, 0, op, "provider");
  std::string address = ArgString(info, 1, op, "address");
  const uint32_t modeArg = ArgU32(info, 2);
  if (modeArg > kModeAuto) ThrowMisuse(env, "ERR_ND_INVALID_ARGUMENT", op, "unknown completion mode");
  const uint32_t spinMicros = ArgU32(info, 3);
  if (!info[4].IsTypedArray() || info[4].As<Napi::TypedArray>().TypedArrayType() != napi_float64_array)
    ThrowMisuse(env, "ERR_ND_INVALID_ARGUMENT", op, "scratch must be a Float64Array");
  if (!info[5].IsFunction()) ThrowMisuse(env, "ERR_ND_INVALID_ARGUMENT", op, "onBatch must be a function");

  NdPtr<IND2Provider> provider;
  std::string why;
  HRESULT hr = netdirect::GetProvider(spec, &provider, &provider_, &why);
  if (FAILED(hr)) ThrowNdError(env, NdStatusName(hr) ? NdStatusName(hr) : "ND_UNSUCCESSFUL", hr, op, why);
  SockAddr sa = ParseAddress(env, address, 0, op);
  netdirect::PreferDeviceProvider(spec, sa.get(), sa.length, &provider, &provider_);  // 'auto': an RDMA device
  hr = netdirect::OpenAdapter(provider.get(), sa.get(), sa.length, &nd_, &why);
  if (FAILED(hr)) {
    const char* name = NdStatusName(hr);
    ThrowNdError(env, name ? name : "ND_UNSUCCESSFUL", hr, op, "cannot open an adapter for " + address + ": " + why);
  }
  provider.reset();  // the adapter keeps the provider loaded
  {
    // createConnector() runs on the JS thread: with every connect place taken it must refuse at once rather than
    // block the loop (nd/netdirect_ext.h INDConnectAdmission; docs/nd2.md "Connect flood"). Other providers do not
    // answer, and make their own choice.
    NdPtr<INDConnectAdmission> admission;
    if (SUCCEEDED(nd_->QueryInterface(IID_INDConnectAdmission, reinterpret_cast<void**>(admission.put()))) && admission)
      (void)admission->SetCreateConnectorWait(FALSE);
  }

  ULONG size = sizeof(info_);
  info_.InfoVersion = ND_VERSION_2;
  hr = nd_->Query(&info_, &size);
  if (FAILED(hr)) ThrowNdStatus(env, hr, "queryAdapterInfo");
  hr = nd_->CreateOverlappedFile(&file_);
  if (FAILED(hr)) {
    file_ = nullptr;
    ThrowNdStatus(env, hr, "createOverlappedFile");
  }

  // A throwing constructor runs no destructor body: undo by hand what plain members do not.
  try {
#ifdef _WIN32
    // IND2Adapter::CreateOverlappedFile says the provider sets both modes; set them again, so that a provider
    // which did not cannot post a packet for a request that completed inline (FinishOverlapped frees those at
    // once). With them, every provider behaves alike: ND_SUCCESS -> no packet, ND_PENDING -> one packet, whose
    // port result (success, or a failure such as a cancel) the poller does not rely on: it asks
    // GetOverlappedResult (docs/nd2.md, 7.2).
    if (!SetFileCompletionNotificationModes(file_, FILE_SKIP_COMPLETION_PORT_ON_SUCCESS | FILE_SKIP_SET_EVENT_ON_HANDLE))
      ThrowNdError(env, "ND_NOT_SUPPORTED", ND_NOT_SUPPORTED, op,
                   "the provider's overlapped file refuses FILE_SKIP_COMPLETION_PORT_ON_SUCCESS (Windows error " +
                       std::to_string(GetLastError()) + "), which ND v2 requires; the provider cannot be used");
#endif
    regions_.resize(1);  // id 0 is never used
    Napi::Float64Array scratch = info[4].As<Napi::Float64Array>();
    scratch_ = Napi::Persistent(scratch);
    // Read once, not per post (that lookup was ~8% of a post's instructions). Fetching the array's ArrayBuffer
    // (napi does, for `data`) moves a small on-heap array's bytes off the V8 heap for good, so the pointer is
    // stable while scratch_ holds the array; lib/ marks its buffer untransferable (never detached).
    napi_typedarray_type type;
    void* data = nullptr;
    napi_value buffer;
    size_t byteOffset = 0;
    napi_get_typedarray_info(env, scratch, &type, &scratchLength_, &data, &buffer, &byteOffset);
    scratchData_ = static_cast<const double*>(data);
    mode_ = modeArg == kModeManual ? kModeManual : kModeThread;
#ifdef _WIN32
    // 'loop' on Windows only when asked for: 'auto' stays 'thread' (docs/windows-event-loop.md says why).
    if (modeArg == kModeLoop) {
      std::string why;
      if (!StartWinLoop(env, &why))
        ThrowNdError(env, "ND_NOT_SUPPORTED", ND_NOT_SUPPORTED, op, "completion 'loop' is not available: " + why);
      mode_ = kModeLoop;
    }
#else
    std::string loopWhy;
    if (modeArg == kModeLoop || modeArg == kModeAuto) {
      UINT64 fd = 0;
      if (!LoopWatch::Supported()) {
        loopWhy = "this build of the addon cannot reach the event loop (no libuv symbols on this platform)";
      } else if (FAILED(nd_->QueryInterface(IID_INDProgress, progress_.put())) || !progress_) {
        loopWhy = "the provider '" + provider_ + "' cannot be driven from the event loop (it has no INDProgress)";
      } else {
        if (FAILED(progress_->GetDescriptor(&fd))) {
          loopWhy = "the provider has no descriptor to watch on this platform";
          progress_.reset();
        } else {
          mode_ = kModeLoop;
        }
      }
      if (modeArg == kModeLoop && mode_ != kModeLoop)
        ThrowNdError(env, "ND_NOT_SUPPORTED", ND_NOT_SUPPORTED, op, "completion 'loop' is not available: " + loopWhy);
    }
#endif
    // The poller's own busy window is thread mode's; in loop mode the loop spins (SpinFromNow) and the poller,
    // run by the loop, keeps every CQ armed.
    poller_.reset(new Poller(&Adapter::Deliver, this, mode_ == kModeThread ? spinMicros : 0, mode_ != kModeManual));
    if (const char* stall = std::getenv("NETDIRECT_DEBUG_POLLER_STALL_MS")) {
      poller_->SetStall(static_cast<uint32_t>(std::strtoul(stall, nullptr, 10)));  // a debugging seam: poller.h SetStall
    }
    const char* pollerWhy = nullptr;
#ifdef _WIN32
    const bool loopDrivesPoller = false;  // Windows: the poller thread keeps the overlapped requests in every mode
#else
    const bool loopDrivesPoller = mode_ == kModeLoop;
#endif
    if (!poller_->Start(file_, !loopDrivesPoller, &pollerWhy))
      ThrowNdError(env, "ND_INSUFFICIENT_RESOURCES", ND_INSUFFICIENT_RESOURCES, op, pollerWhy);
#ifdef _WIN32
    BindProviderPort(file_, poller_->port(), Poller::kFileKey);
#endif
    if (loopDrivesPoller) {
      const char* why = nullptr;
      if (!StartLoop(env, &why))
        ThrowNdError(env, "ND_INSUFFICIENT_RESOURCES", ND_INSUFFICIENT_RESOURCES, op,
                     std::string("event-loop completions: ") + why);
      onBatch_ = Napi::Persistent(info[5].As<Napi::Function>());
      spinNs_ = static_cast<uint64_t>(spinMicros) * 1000;
      if (FAILED(nd_->QueryInterface(IID_INDSharedMemory, reinterpret_cast<void**>(shmHint_.put())))) shmHint_.reset();
    } else {
      tsfn_ = Tsfn::New(env, info[5].As<Napi::Function>(), "netdirect.completions", 0, 1, this);
      tsfnLive_ = true;
      tsfn_.Unref(env);  // nothing pending yet: an idle adapter does not keep the process alive
#ifdef _WIN32
      if (winLoop_ != nullptr) {  // CQ batches arrive from libuv's callback: delivered as loop mode delivers
        onBatch_ = Napi::Persistent(info[5].As<Napi::Function>());
        asyncContext_.reset(new Napi::AsyncContext(env, "netdirect.completions"));
      }
#endif
    }
  } catch (...) {
    StopLoop();
#ifdef _WIN32
    StopWinLoop();
#endif
    poller_.reset();
    if (tsfnLive_) tsfn_.Abort();
    tsfnLive_ = false;
    CloseHandle(file_);
    file_ = nullptr;
    throw;
  }

  TagObject(info.This().As<Napi::Object>(), kTag);
  // Registered after the TSFN, so it runs before the TSFN's own cleanup (hooks run last-in first-out).
  napi_add_env_cleanup_hook(env, &Adapter::EnvCleanup, this);
  hookAdded_ = true;
  closed_ = false;
  Ref();  // prevent GC of an open adapter: it lives until close()
}

Adapter::~Adapter() {
  // An open adapter is never collected (it references itself until close()); the env cleanup hook closes
  // what is left at exit before finalizers run. Nothing to do here.
}

void Adapter::EnvCleanup(void* arg) {
  // No exception may leave a cleanup hook; at env exit there is nobody left to report to.
  try {
    static_cast<Adapter*>(arg)->Teardown(true);
  } catch (...) {
  }
}

void Adapter::AddChild(Child* child) { children_[child->childKind()].insert(child); }

void Adapter::RemoveChild(Child* child) { children_[child->childKind()].erase(child); }

void Adapter::SubPending(uint64_t n) {
  if (n == 0 || pending_ == 0) return;
  pending_ = n >= pending_ ? 0 : pending_ - n;
  if (pending_ == 0) KeepLoopAlive(false);
}

void Adapter::KeepLoopAlive(bool on) {
  on = on && keepAlive_;
  if (loop_) {
    loop_->SetRef(on);
  } else if (tsfnLive_) {
    on ? tsfn_.Ref(Env()) : tsfn_.Unref(Env());
  }
}

uint32_t Adapter::FinishOverlapped(Napi::Env env, OvRecord* r, bool counted, HRESULT hr, const char* operation) {
  if (hr == ND_PENDING) {
    if (counted) AddPending();
    return static_cast<uint32_t>(ND_PENDING);
  }
  // ND_SUCCESS: no packet will come (skip-on-success); failures: none either.
  poller_->NotPending();
  delete r;
  if (hr != ND_SUCCESS) ThrowNdStatus(env, hr, operation);
  return 0;
}

uint32_t Adapter::AllocRegion(IND2MemoryRegion* mr) {
  uint32_t id;
  if (!freeRegions_.empty()) {
    id = freeRegions_.back();
    freeRegions_.pop_back();
  } else {
    id = static_cast<uint32_t>(regions_.size());
    regions_.emplace_back();
  }
  regions_[id] = RegionSlot{};
  regions_[id].mr = mr;
  regions_[id].inUse = true;
  return id;
}

void Adapter::FreeRegion(uint32_t id) {
  if (id == 0 || id >= regions_.size() || !regions_[id].inUse) return;
  regions_[id] = RegionSlot{};
  freeRegions_.push_back(id);
}

void Adapter::BuildSges(Napi::Env env, uint32_t nSge, ND2_SGE* sge, const char* operation) {
  if (nSge == 0) return;
  if (nSge > kMaxSge)
    ThrowMisuse(env, "ERR_ND_TOO_MANY_SGES", operation, "at most " + std::to_string(kMaxSge) + " SGEs per request");
  if (static_cast<size_t>(nSge) * 3 > scratchLength_)
    ThrowMisuse(env, "ERR_ND_TOO_MANY_SGES", operation, "more SGEs than the scratch array holds");
  BuildSgesFrom(env, scratchData_, nSge, sge, operation);
}

void Adapter::BuildSgesFrom(Napi::Env env, const double* triples, uint32_t nSge, ND2_SGE* sge, const char* operation) {
  for (uint32_t i = 0; i < nSge; ++i) {
    const double idD = triples[3 * i], offD = triples[3 * i + 1], lenD = triples[3 * i + 2];
    const uint32_t id = static_cast<uint32_t>(idD >= 0 && idD < 4294967296.0 ? idD : 0);
    RegionSlot* slot = Region(id);
    if (slot == nullptr || slot->state != kRegionRegistered)
      ThrowMisuse(env, "ERR_ND_INVALID_REGION", operation,
                  "SGE " + std::to_string(i) + ": memory region " + std::to_string(id) + " is not registered");
    // Bounds are memory safety, not validation: a wrong range would let the provider touch foreign memory.
    if (!(offD >= 0 && lenD >= 0 && lenD <= 4294967295.0 && offD + lenD <= static_cast<double>(slot->length)))
      ThrowMisuse(env, "ERR_ND_OUT_OF_RANGE", operation,
                  "SGE " + std::to_string(i) + " [" + Num(offD) + ", +" + Num(lenD) +
                      ") is outside memory region " + std::to_string(id) + " of " + std::to_string(slot->length) +
                      " bytes");
    sge[i].Buffer = slot->base + static_cast<uint64_t>(offD);
    sge[i].BufferLength = static_cast<ULONG>(lenD);
    sge[i].MemoryRegionToken = slot->mr->GetLocalToken();
  }
}

Napi::Object Adapter::NewChild(Napi::FunctionReference& ctor, ChildInit* init) {
  AddonData* data = GetAddonData(Env());
  data->constructing = init;
  struct Reset {
    AddonData* d;
    ~Reset() { d->constructing = nullptr; }
  } reset{data};
  return ctor.New({});
}

void Adapter::RequireOpen(const Napi::CallbackInfo& info, const char* operation) {
  CheckThis(info, this, operation);
}

// ---- completions -----------------------------------------------------------------------------------------

bool Adapter::Deliver(void* ctx, Batch* batch) {
  auto* self = static_cast<Adapter*>(ctx);
  return self->tsfn_.NonBlockingCall(batch) == napi_ok;
}

void Adapter::CallJs(Napi::Env env, Napi::Function callback, Adapter* self, Batch* batch) {
  std::unique_ptr<Batch> owned(batch);
  // env == nullptr: the TSFN is being torn down with items still queued; the adapter may be gone.
  if (env == nullptr || batch == nullptr || self == nullptr) return;
  self->OnBatch(env, callback, batch);
}

void Adapter::OnBatch(Napi::Env env, Napi::Function callback, Batch* batch) {
  if (closed_) return;
  Poller::Collect(batch);  // the CQ results the poller took, unless a cq.poll() took them first (CqState::mu)
  for (const MrUpdate& u : batch->mrUpdates) {
    RegionSlot* slot = Region(u.mrId);
    if (slot == nullptr) continue;
    if (u.kind == kKindRegister && slot->state == kRegionRegistering)
      slot->state = u.status == ND_SUCCESS ? kRegionRegistered : kRegionIdle;
    else if (u.kind == kKindDeregister && slot->state == kRegionDeregistering)
      slot->state = u.status == ND_SUCCESS ? kRegionIdle : kRegionRegistered;
  }
  SubPending(batch->counted);
  const size_t words = batch->words.size();
  if (words == 0) return;
  batches_++;
  completions_ += words / kRecordWords;
  if (asyncContext_) {
    CallFromLoop(env, callback, batch);
    return;
  }
  Napi::Uint32Array records = Napi::Uint32Array::New(env, words);
  std::memcpy(records.Data(), batch->words.data(), words * sizeof(uint32_t));
  try {
    callback.Call({records});
  } catch (const Napi::Error& e) {
    e.ThrowAsJavaScriptException();  // surfaces as an uncaught exception, as for any callback
  }
}

// Event-loop mode: the call into JS from libuv, in a callback scope of our own (promise reactions run when it
// returns). Raw Node-API calls with their statuses checked, never node-addon-api's throwing wrappers: while a
// worker is being terminated JS cannot run, every call fails, and turning that failure into a Napi::Error would
// itself fail fatally. Then the batch is dropped: nobody is left to deliver it to.
// The records go into one Uint32Array the adapter keeps (loopRecords_), with their count as the second argument:
// no ArrayBuffer per batch for the garbage collector. lib/adapter.ts reads them before anything else runs (promise
// reactions run after the callback), so the next batch may overwrite them; a batch delivered while one is being
// delivered (a callback re-entered) or larger than the array gets an array of its own.
void Adapter::CallFromLoop(Napi::Env env, Napi::Function callback, const Batch* batch) {
  const size_t words = batch->words.size();
  napi_value args[2], global, result;
  if (!delivering_ && words <= kLoopRecordWords) {
    if (loopRecordsData_ == nullptr) {
      void* data = nullptr;
      napi_value buffer, array;
      if (napi_create_arraybuffer(env, kLoopRecordWords * sizeof(uint32_t), &data, &buffer) != napi_ok) return;
      if (napi_create_typedarray(env, napi_uint32_array, kLoopRecordWords, buffer, 0, &array) != napi_ok) return;
      loopRecords_ = Napi::Persistent(Napi::Uint32Array(env, array));
      loopRecordsData_ = static_cast<uint32_t*>(data);
    }
    std::memcpy(loopRecordsData_, batch->words.data(), words * sizeof(uint32_t));
    args[0] = loopRecords_.Value();
  } else {
    void* data = nullptr;
    napi_value buffer;
    if (napi_create_arraybuffer(env, words * sizeof(uint32_t), &data, &buffer) != napi_ok) return;
    std::memcpy(data, batch->words.data(), words * sizeof(uint32_t));
    if (napi_create_typedarray(env, napi_uint32_array, words, buffer, 0, &args[0]) != napi_ok) return;
  }
  if (napi_create_uint32(env, static_cast<uint32_t>(words), &args[1]) != napi_ok) return;
  if (napi_get_global(env, &global) != napi_ok) return;
  const bool outer = !delivering_;
  delivering_ = true;
  const napi_status status = napi_make_callback(env, *asyncContext_, global, callback, 2, args, &result);
  if (outer) delivering_ = false;
  if (status == napi_pending_exception) {
    // The callback threw: nobody to throw to, so the process's 'uncaughtException' (as for any callback).
    napi_value error;
    if (napi_get_and_clear_last_exception(env, &error) == napi_ok) napi_fatal_exception(env, error);
  }
}

// ---- event-loop mode -------------------------------------------------------------------------------------

bool Adapter::StartLoop(Napi::Env env, const char** why) {
  UINT64 progressFd = 0;
  if (FAILED(progress_->GetDescriptor(&progressFd))) {
    *why = "the provider's descriptor went away";
    return false;
  }
  progressFd_ = static_cast<int>(progressFd);
  const int portFd = poller_->Descriptor();
  if (portFd < 0) {
    *why = "the completion port has no descriptor";
    return false;
  }
  loop_.reset(new LoopWatch());
  if (!loop_->Start(env, &portFd, 1, &Adapter::OnLoopReady, this, why)) return false;
  if (FAILED(progress_->SetExternalDriver(TRUE))) {
    *why = "the provider refused to be driven from the event loop";
    return false;
  }
  // The provider's sockets in libuv's own set when it offers them; its wake-up descriptor then stands for the
  // rest (work posted from other threads). Otherwise its one descriptor, an epoll set: a nested wait per wake-up.
  int watchFd = progressFd_;
  if (SUCCEEDED(nd_->QueryInterface(IID_INDProgressDescriptors, descriptors_.put())) && descriptors_) {
    socketWatcher_.self = this;
    loop_->SetSocketCallback(&Adapter::OnSocketReady);
    UINT64 wake = 0;
    if (SUCCEEDED(descriptors_->SetWatcher(&socketWatcher_, &wake)) && descriptors_) {
      watchFd = static_cast<int>(wake);
    } else {
      loop_->UnwatchSockets();
      descriptors_.reset();
    }
  } else {
    descriptors_.reset();
  }
  if (!loop_->AddFd(watchFd, why)) return false;
  asyncContext_.reset(new Napi::AsyncContext(env, "netdirect.completions"));
  loop_->SetTimeout(0);  // a first round at once: whatever the provider queued while opening
  return true;
}

namespace {
constexpr uint64_t kYieldedLongNs = 50 * 1000;       // a yield this long: another thread had the core
constexpr uint64_t kShmBackoffNs = 100 * 1000 * 1000;  // the provider's window stays shut this long after one
uint64_t SteadyNs() {
  return static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch()).count());
}
}  // namespace

// Busy-poll window length: the application's (spinMicros), else the provider's for same-host connections unless
// it is backing off (shmBackoffUntilNs_); 0: none.
uint64_t Adapter::SpinWindowNs() {
  if (spinNs_ != 0) return spinNs_;
  ULONG us = 0;
  if (!shmHint_ || FAILED(shmHint_->GetBusyPollMicros(&us)) || us == 0) return 0;
  if (shmBackoffUntilNs_ != 0) {
    if (SteadyNs() < shmBackoffUntilNs_) return 0;
    shmBackoffUntilNs_ = 0;
  }
  return static_cast<uint64_t>(us) * 1000;
}

// Opens (or extends) the busy-poll window: something was posted or delivered, so an answer may be close.
void Adapter::SpinFromNow() {
  if (!loop_) return;
  const uint64_t window = SpinWindowNs();
  if (window == 0) return;
  spinUntilNs_ = SteadyNs() + window;
  loop_->SetSpin(true);
  poller_->BeginLoopSpin();
}

// The window has passed (or nothing is pending): every CQ is armed again and the loop may block. false when
// results came in meanwhile: then the window goes on, and they were delivered.
bool Adapter::EndSpin() {
  Batch* late = poller_->EndLoopSpin();
  loop_->SetSpin(false);
  if (late->empty()) return true;
  SpinFromNow();  // opens a new window when one is wanted
  Napi::Env env = Env();
  Napi::HandleScope scope(env);
  OnBatch(env, onBatch_.Value(), late);
  if (!closed_ && progress_) progress_->Flush();
  return false;
}

// Hands progress back to the provider's own thread and closes the loop's handles. Idempotent.
void Adapter::StopLoop() {
  spinNs_ = 0;
  shmHint_.reset();
  if (poller_ && poller_->loopSpinning()) (void)poller_->EndLoopSpin();  // the thread's polling hint ends
  // The sockets go back to the provider's own wait before its thread may close one: libuv lets go of them first.
  if (descriptors_) {
    NdPtr<INDProgressDescriptors> d = std::move(descriptors_);
    d->SetWatcher(nullptr, nullptr);
  }
  if (loop_) loop_->UnwatchSockets();
  if (progress_) progress_->SetExternalDriver(FALSE);
  progress_.reset();
  loop_.reset();  // closes the handles
  asyncContext_.reset();
}

void Adapter::SocketWatcher::Watch(UINT64 descriptor, VOID* token, ULONG events) {
  if (!self->loop_ || !self->descriptors_) return;
  if (!self->loop_->WatchSocket(static_cast<int>(descriptor), token, events)) self->WatchProviderSet();
}

void Adapter::SocketWatcher::Unwatch(UINT64 descriptor) {
  if (self->loop_) self->loop_->UnwatchSocket(static_cast<int>(descriptor));
}

void Adapter::WatchProviderSet() {
  NdPtr<INDProgressDescriptors> d = std::move(descriptors_);
  if (d) d->SetWatcher(nullptr, nullptr);
  loop_->UnwatchSockets();
  const char* why = nullptr;
  if (loop_->AddFd(progressFd_, &why)) loop_->SetTimeout(0);  // a round at once: what was ready meanwhile
}

// The loop found work (a descriptor readable, or the provider's deadline): progress, drain the port, deliver.
void Adapter::OnLoopReady(void* ctx) { Turn(static_cast<Adapter*>(ctx), nullptr, 0); }

// A socket the loop watches for the provider is ready: the same turn, its round for that socket alone.
void Adapter::OnSocketReady(void* ctx, void* token, uint32_t events) { Turn(static_cast<Adapter*>(ctx), token, events); }

void Adapter::Turn(Adapter* self, void* token, uint32_t events) {
  if (self->closed_ || !self->progress_) return;
  if (self->loop_->spinning()) self->spinRounds_++;
  self->poller_->WillDrain(true);  // what the progress completes, RunOnce takes right after: no wake-up needed
  // Answers the round owes the peer wait for Flush(): the application's reply, posted from the callback below,
  // then leaves in the same segment (one send and one wake-up of the peer instead of two).
  if (token != nullptr && self->descriptors_) {
    self->descriptors_->ProgressReady(token, events, ND_PROGRESS_DEFER_TRANSMIT, nullptr);
  } else {
    self->progress_->Progress(ND_PROGRESS_DEFER_TRANSMIT, nullptr);
  }
  // Packets posted while RunOnce handles the port (a Notify or GetOverlappedResult the provider completes before
  // it returns) must wake the loop again: RunOnce does not look a second time.
  self->poller_->WillDrain(false);
  Batch* batch = self->poller_->RunOnce();
  // Inside the busy window, the CQs are polled (their connections read on this thread: a same-host ring with no
  // doorbell, docs/shm.md "Waking") instead of waiting for their Notify.
  if (self->loop_->spinning() && self->poller_->loopSpinning()) self->poller_->PollCqs(batch);
  const bool delivered = !batch->empty();
  if (delivered) {
    self->SpinFromNow();
    Napi::Env env = self->Env();
    Napi::HandleScope scope(env);
    self->OnBatch(env, self->onBatch_.Value(), batch);
    // The callback (and the promise reactions after it) may have closed this adapter: then the provider's own
    // thread took over, deferred work included.
    if (self->closed_ || !self->progress_) return;
  }
  self->progress_->Flush();
  // The spin window closes when it has passed with nothing delivered, or when nothing is pending: then the loop
  // blocks on the descriptors again.
  if (self->loop_->spinning() && (self->pending_ == 0 || SteadyNs() >= self->spinUntilNs_)) {
    if (!self->EndSpin() && (self->closed_ || !self->progress_)) return;
  }
  // An empty round inside the window offers the core to whatever else is runnable (MPI libraries' "yield when
  // idle"): on a machine with more busy threads than cores a spinning rank would otherwise hold its core for a
  // whole time slice while the peer it waits for, or the thread that would answer it, cannot run. With a core
  // to itself the call returns at once.
  if (!delivered && self->loop_->spinning()) {
    const uint64_t before = SteadyNs();
    LoopWatch::YieldCpu();
    // The provider's window (not one the application asked for) stops when the yield gave the core to another
    // thread for long: more runnable threads than cores, where a spinning rank only loses its share of the CPU
    // to the threads it waits for and a sleeper is woken sooner (measured: osu_latency with 2 ranks on 2 cores
    // busy with other work, docs/shm.md "Busy window").
    if (self->spinNs_ == 0 && SteadyNs() - before > kYieldedLongNs) {
      self->shmBackoffUntilNs_ = SteadyNs() + kShmBackoffNs;
      self->spinUntilNs_ = 0;  // closes the window below
    }
  }
  DWORD ms = INFINITE;
  self->progress_->GetNextTimeout(&ms);
  self->loop_->SetTimeout(ms == INFINITE ? -1 : static_cast<int>(ms));
}

#ifdef _WIN32
// ---- Windows event-loop mode (delivery/loop_win.h) ---------------------------------------------------------

// The CQs' handles close once their cancelled Notify packets are back (WinLoop frees itself then).
void Adapter::StopWinLoop() {
  if (winLoop_ != nullptr) winLoop_->Detach();
  winLoop_ = nullptr;
  if (cqFile_ != nullptr) CloseHandle(cqFile_);
  cqFile_ = nullptr;
}

bool Adapter::StartWinLoop(Napi::Env env, std::string* why) {
  // A second overlapped file for the CQs: a file is associated with one port, and libuv's may see nothing but
  // Notify packets whose OVERLAPPED sits in a uv_async_t (docs/windows-event-loop.md).
  HRESULT hr = nd_->CreateOverlappedFile(&cqFile_);
  if (FAILED(hr)) {
    cqFile_ = nullptr;
    *why = "the provider refused a second overlapped file (" + std::string(NdStatusName(hr) ? NdStatusName(hr) : "error") + ")";
    return false;
  }
  if (!SetFileCompletionNotificationModes(cqFile_, FILE_SKIP_COMPLETION_PORT_ON_SUCCESS | FILE_SKIP_SET_EVENT_ON_HANDLE)) {
    *why = "the CQs' overlapped file refuses FILE_SKIP_COMPLETION_PORT_ON_SUCCESS";
    CloseHandle(cqFile_);
    cqFile_ = nullptr;
    return false;
  }
  winLoop_ = WinLoop::Create(env, cqFile_, &Adapter::DeliverFromWinLoop, this, why);
  if (winLoop_ == nullptr) {
    CloseHandle(cqFile_);
    cqFile_ = nullptr;
    return false;
  }
  // Notify packets posted by the provider itself carry the OVERLAPPED inside the uv_async_t, exactly as the
  // kernel's would: libuv cannot tell them apart (key 0, status unread; WinLoop::OnWake asks GetOverlappedResult).
  BindProviderPort(cqFile_, winLoop_->port(), 0);
  return true;
}

// A provider that can post its completions to our port itself (INDCompletionPort: the built-in software provider,
// linked in or as netdirect_soft.dll) saves the per-completion work it would do to make the kernel queue the
// packet (docs/windows-event-loop.md "Completions posted to the consumer's port"). Nothing else changes: every
// status is read with GetOverlappedResult already, and a provider without the interface, or one that refuses,
// completes through the file as before.
void Adapter::BindProviderPort(HANDLE file, HANDLE port, ULONG_PTR key) {
  NdPtr<INDCompletionPort> cp;
  if (FAILED(nd_->QueryInterface(IID_INDCompletionPort, reinterpret_cast<void**>(cp.put()))) || !cp) return;
  (void)cp->BindCompletionPort(file, port, key);
}

// From libuv's callback on the JS thread, outside any JS scope. Raw Node-API for the scope: while a worker is
// being terminated every call fails, and a throwing wrapper would turn that into a fatal error.
void Adapter::DeliverFromWinLoop(void* ctx, Batch* batch) {
  auto* self = static_cast<Adapter*>(ctx);
  if (self->closed_) return;
  napi_env env = self->Env();
  napi_handle_scope scope;
  if (napi_open_handle_scope(env, &scope) != napi_ok) return;
  napi_value fn = nullptr;
  if (napi_get_reference_value(env, self->onBatch_, &fn) == napi_ok && fn != nullptr) {
    try {
      self->OnBatch(Napi::Env(env), Napi::Function(env, fn), batch);
    } catch (...) {
    }
  }
  napi_close_handle_scope(env, scope);
}
#endif

// ---- teardown --------------------------------------------------------------------------------------------

void Adapter::Teardown(bool envExit) {
  if (closed_) return;
  closed_ = true;
  // Event-loop mode: the provider's own thread finishes what the teardown starts (this thread stops driving).
  StopLoop();
  // Stop asynchronous connection work first, then close children in the dependency order.
  for (ChildKind k : {kChildConnector, kChildListener}) {
    for (Child* c : std::vector<Child*>(children_[k].begin(), children_[k].end())) c->CancelAll();
  }
  for (int k = 0; k < kChildKindCount; ++k) {
    for (Child* c : std::vector<Child*>(children_[k].begin(), children_[k].end())) c->CloseNow(true);
  }
  if (poller_) poller_->Stop();  // waits (bounded) for cancelled requests, so their memory may go now
  poller_.reset();
#ifdef _WIN32
  StopWinLoop();
#endif
  deferred_.clear();
  if (tsfnLive_) {
    tsfn_.Abort();  // queued batches are dropped (CallJs with env == nullptr)
    tsfnLive_ = false;
  }
  nd_.reset();
  if (file_ != nullptr) {
    CloseHandle(file_);
    file_ = nullptr;
  }
  scratch_.Reset();
  scratchData_ = nullptr;
  scratchLength_ = 0;
  loopRecords_.Reset();
  loopRecordsData_ = nullptr;
  if (hookAdded_) {
    // Inside the hook itself removal is not allowed (and not needed).
    if (!envExit) napi_remove_env_cleanup_hook(Env(), &Adapter::EnvCleanup, this);
    hookAdded_ = false;
  }
  pending_ = 0;
  Unref();
}

Napi::Value Adapter::Close(const Napi::CallbackInfo& info) {
  if (!HasTag(info.This(), kTag))
    ThrowMisuse(info.Env(), "ERR_ND_FOREIGN_OBJECT", "close", "receiver is not a netdirect Adapter object");
  Teardown(false);
  return info.Env().Undefined();
}

// ---- queries ---------------------------------------------------------------------------------------------

namespace {

Napi::Value SizeValue(Napi::Env env, uint64_t v) {
  if (v <= (uint64_t(1) << 53)) return Napi::Number::New(env, static_cast<double>(v));
  return Napi::BigInt::New(env, v);
}

}  // namespace

Napi::Value Adapter::GetInfo(const Napi::CallbackInfo& info) {
  CheckAccessorThis(info, this, "info");
  Napi::Env env = info.Env();
  Napi::Object o = Napi::Object::New(env);
  const ND2_ADAPTER_INFO& a = info_;
  o.Set("infoVersion", Napi::Number::New(env, a.InfoVersion));
  o.Set("vendorId", Napi::Number::New(env, a.VendorId));
  o.Set("deviceId", Napi::Number::New(env, a.DeviceId));
  o.Set("adapterId", Napi::BigInt::New(env, static_cast<uint64_t>(a.AdapterId)));
  o.Set("maxRegistrationSize", SizeValue(env, a.MaxRegistrationSize));
  o.Set("maxWindowSize", SizeValue(env, a.MaxWindowSize));
  o.Set("maxInitiatorSge", Napi::Number::New(env, a.MaxInitiatorSge));
  o.Set("maxReceiveSge", Napi::Number::New(env, a.MaxReceiveSge));
  o.Set("maxReadSge", Napi::Number::New(env, a.MaxReadSge));
  o.Set("maxTransferLength", Napi::Number::New(env, a.MaxTransferLength));
  o.Set("maxInlineDataSize", Napi::Number::New(env, a.MaxInlineDataSize));
  o.Set("maxInboundReadLimit", Napi::Number::New(env, a.MaxInboundReadLimit));
  o.Set("maxOutboundReadLimit", Napi::Number::New(env, a.MaxOutboundReadLimit));
  o.Set("maxReceiveQueueDepth", Napi::Number::New(env, a.MaxReceiveQueueDepth));
  o.Set("maxInitiatorQueueDepth", Napi::Number::New(env, a.MaxInitiatorQueueDepth));
  o.Set("maxSharedReceiveQueueDepth", Napi::Number::New(env, a.MaxSharedReceiveQueueDepth));
  o.Set("maxCompletionQueueDepth", Napi::Number::New(env, a.MaxCompletionQueueDepth));
  o.Set("inlineRequestThreshold", Napi::Number::New(env, a.InlineRequestThreshold));
  o.Set("largeRequestThreshold", Napi::Number::New(env, a.LargeRequestThreshold));
  o.Set("maxCallerData", Napi::Number::New(env, a.MaxCallerData));
  o.Set("maxCalleeData", Napi::Number::New(env, a.MaxCalleeData));
  o.Set("adapterFlags", Napi::Number::New(env, a.AdapterFlags));
  return o;
}

Napi::Value Adapter::GetProvider(const Napi::CallbackInfo& info) {
  if (!HasTag(info.This(), kTag))
    ThrowMisuse(info.Env(), "ERR_ND_FOREIGN_OBJECT", "provider", "receiver is not a netdirect Adapter object");
  return Napi::String::New(info.Env(), provider_);
}

Napi::Value Adapter::QueryAddressList(const Napi::CallbackInfo& info) {
  RequireOpen(info, "queryAddressList");
  std::vector<std::string> list;
  IND2Adapter* nd = nd_.get();
  HRESULT hr = QueryAddressStrings(
      [nd](SOCKET_ADDRESS_LIST* l, ULONG* cb) { return nd->QueryAddressList(l, cb); }, &list);
  if (FAILED(hr)) ThrowNdStatus(info.Env(), hr, "queryAddressList");
  Napi::Array a = Napi::Array::New(info.Env(), list.size());
  for (size_t i = 0; i < list.size(); ++i) a.Set(static_cast<uint32_t>(i), list[i]);
  return a;
}

// sharedMemory(enable?): same-host connections through shared memory (INDSharedMemory, docs/shm.md) for the
// connections set up from now on (a boolean sets it; undefined only asks). Returns whether they are on: false from a
// provider without the interface.
Napi::Value Adapter::SetSharedMemory(const Napi::CallbackInfo& info) {
  if (!HasTag(info.This(), kTag))
    ThrowMisuse(info.Env(), "ERR_ND_FOREIGN_OBJECT", "setSharedMemory", "receiver is not a netdirect Adapter object");
  Napi::Env env = info.Env();
  if (!nd_) ThrowMisuse(env, "ERR_ND_CLOSED", "setSharedMemory", "the adapter is closed");
  NdPtr<INDSharedMemory> shm;
  if (FAILED(nd_->QueryInterface(IID_INDSharedMemory, reinterpret_cast<void**>(shm.put()))) || !shm)
    return Napi::Boolean::New(env, false);
  if (info[0].IsBoolean()) (void)shm->SetSharedMemory(info[0].ToBoolean() ? TRUE : FALSE);  // refused: not built
  BOOL on = FALSE;
  if (FAILED(shm->GetSharedMemory(&on))) on = FALSE;
  return Napi::Boolean::New(env, on != FALSE);
}

// allocateShared(length): an ArrayBuffer over memory the provider allocated for a same-host peer to map
// (INDSharedBuffers, docs/shm.md "Mapped regions"), or undefined where there is none (a provider without the
// interface, no memory of that kind now, or a runtime that refuses external buffers: napi_no_external_buffers_allowed
// under a V8 sandbox); the caller then allocates a plain ArrayBuffer. The buffer's finalizer releases the memory: the
// caller keeps the buffer referenced while it is registered (lib/adapter.ts allocateMemory: the region holds it).
Napi::Value Adapter::AllocateShared(const Napi::CallbackInfo& info) {
  if (!HasTag(info.This(), kTag))
    ThrowMisuse(info.Env(), "ERR_ND_FOREIGN_OBJECT", "allocateMemory", "receiver is not a netdirect Adapter object");
  Napi::Env env = info.Env();
  if (!nd_) ThrowMisuse(env, "ERR_ND_CLOSED", "allocateMemory", "the adapter is closed");
  const double length = info[0].IsNumber() ? info[0].As<Napi::Number>().DoubleValue() : 0;
  if (!(length >= 1) || length > 9007199254740991.0 || std::floor(length) != length) return env.Undefined();
  NdPtr<INDSharedBuffers> buffers;
  if (FAILED(nd_->QueryInterface(IID_INDSharedBuffers, reinterpret_cast<void**>(buffers.put()))) || !buffers)
    return env.Undefined();
  IUnknown* owner = nullptr;
  void* at = nullptr;
  const size_t bytes = static_cast<size_t>(length);
  if (FAILED(buffers->AllocateBuffer(bytes, &owner, &at)) || owner == nullptr || at == nullptr) {
    if (owner != nullptr) owner->Release();
    return env.Undefined();
  }
  napi_value ab = nullptr;
  const napi_status st = napi_create_external_arraybuffer(
      env, at, bytes,
      [](napi_env, void*, void* hint) { static_cast<IUnknown*>(hint)->Release(); },
      owner, &ab);
  if (st != napi_ok) {  // napi_no_external_buffers_allowed, or out of memory: plain memory then
    owner->Release();
    return env.Undefined();
  }
  return Napi::Value(env, ab);
}

Napi::Value Adapter::Stats(const Napi::CallbackInfo& info) {
  if (!HasTag(info.This(), kTag))
    ThrowMisuse(info.Env(), "ERR_ND_FOREIGN_OBJECT", "stats", "receiver is not a netdirect Adapter object");
  Napi::Env env = info.Env();
  Napi::Object o = Napi::Object::New(env);
  o.Set("batches", Napi::Number::New(env, static_cast<double>(batches_)));
  o.Set("completions", Napi::Number::New(env, static_cast<double>(completions_)));
  double wakeups = poller_ ? static_cast<double>(poller_->wakeups()) : 0.0;
#ifdef _WIN32
  if (winLoop_ != nullptr) wakeups += static_cast<double>(winLoop_->wakeups());
#endif
  o.Set("wakeups", Napi::Number::New(env, wakeups));
  o.Set("pending", Napi::Number::New(env, static_cast<double>(pending_)));
  o.Set("spinRounds", Napi::Number::New(env, static_cast<double>(spinRounds_)));
  return o;
}

Napi::Value Adapter::KeepAlive(const Napi::CallbackInfo& info) {
  if (!HasTag(info.This(), kTag))
    ThrowMisuse(info.Env(), "ERR_ND_FOREIGN_OBJECT", "keepAlive", "receiver is not a netdirect Adapter object");
  keepAlive_ = info.Length() > 0 && info[0].ToBoolean().Value();
  KeepLoopAlive(pending_ > 0);
  return info.Env().Undefined();
}

Napi::Value Adapter::GetCompletion(const Napi::CallbackInfo& info) {
  if (!HasTag(info.This(), kTag))
    ThrowMisuse(info.Env(), "ERR_ND_FOREIGN_OBJECT", "completion", "receiver is not a netdirect Adapter object");
  static const char* const kNames[] = {"thread", "manual", "loop"};
  return Napi::String::New(info.Env(), kNames[mode_ <= kModeLoop ? static_cast<int>(mode_) : 0]);
}

// ---- children --------------------------------------------------------------------------------------------

Napi::Value Adapter::CreateCompletionQueue(const Napi::CallbackInfo& info) {
  const char* op = "createCompletionQueue";
  RequireOpen(info, op);
  CompletionQueue::Init init{{kChildCompletionQueue, this, Value()}, {}, ArgU32(info, 0), ArgU32(info, 1)};
  HRESULT hr = nd_->CreateCompletionQueue(IID_IND2CompletionQueue, cqFile(), init.depth, 0, 0, init.cq.put());
  if (FAILED(hr)) ThrowNdStatus(info.Env(), hr, op);
  return NewChild(GetAddonData(info.Env())->completionQueueCtor, &init);
}

// createQueuePair(receiveCq, initiatorCq, srq | null, qpId, receiveDepth, initiatorDepth, maxReceiveSge,
//                 maxInitiatorSge, inlineDataSize)
Napi::Value Adapter::CreateQueuePair(const Napi::CallbackInfo& info) {
  const char* op = "createQueuePair";
  RequireOpen(info, op);
  auto* rcq = UnwrapChild<CompletionQueue>(info[0], this, op, "receiveCq");
  auto* icq = UnwrapChild<CompletionQueue>(info[1], this, op, "initiatorCq");
  SharedReceiveQueue* srq = nullptr;
  if (!info[2].IsNull() && !info[2].IsUndefined()) srq = UnwrapChild<SharedReceiveQueue>(info[2], this, op, "srq");
  const uint32_t qpId = ArgU32(info, 3);
  QueuePair::Init init{{kChildQueuePair, this, Value()}, {}, rcq->state(), icq->state(), qpId};
  void* context = reinterpret_cast<void*>(static_cast<uintptr_t>(qpId));
  HRESULT hr;
  if (srq == nullptr) {
    hr = nd_->CreateQueuePair(IID_IND2QueuePair, rcq->nd(), icq->nd(), context, ArgU32(info, 4), ArgU32(info, 5),
                              ArgU32(info, 6), ArgU32(info, 7), ArgU32(info, 8), init.qp.put());
  } else {
    hr = nd_->CreateQueuePairWithSrq(IID_IND2QueuePair, rcq->nd(), icq->nd(), srq->nd(), context, ArgU32(info, 5),
                                     ArgU32(info, 7), ArgU32(info, 8), init.qp.put());
  }
  if (FAILED(hr)) ThrowNdStatus(info.Env(), hr, op);
  return NewChild(GetAddonData(info.Env())->queuePairCtor, &init);
}

Napi::Value Adapter::CreateMemoryRegion(const Napi::CallbackInfo& info) {
  const char* op = "createMemoryRegion";
  RequireOpen(info, op);
  MemoryRegion::Init init{{kChildMemoryRegion, this, Value()}, {}};
  HRESULT hr = nd_->CreateMemoryRegion(IID_IND2MemoryRegion, file_, init.mr.put());
  if (FAILED(hr)) ThrowNdStatus(info.Env(), hr, op);
  return NewChild(GetAddonData(info.Env())->memoryRegionCtor, &init);
}

Napi::Value Adapter::CreateMemoryWindow(const Napi::CallbackInfo& info) {
  const char* op = "createMemoryWindow";
  RequireOpen(info, op);
  MemoryWindow::Init init{{kChildMemoryWindow, this, Value()}, {}};
  HRESULT hr = nd_->CreateMemoryWindow(IID_IND2MemoryWindow, init.mw.put());
  if (FAILED(hr)) ThrowNdStatus(info.Env(), hr, op);
  return NewChild(GetAddonData(info.Env())->memoryWindowCtor, &init);
}

Napi::Value Adapter::CreateSharedReceiveQueue(const Napi::CallbackInfo& info) {
  const char* op = "createSharedReceiveQueue";
  RequireOpen(info, op);
  SharedReceiveQueue::Init init{{kChildSharedReceiveQueue, this, Value()}, {}};
  HRESULT hr = nd_->CreateSharedReceiveQueue(IID_IND2SharedReceiveQueue, file_, ArgU32(info, 0), ArgU32(info, 1),
                                             ArgU32(info, 2), 0, 0, init.srq.put());
  if (FAILED(hr)) ThrowNdStatus(info.Env(), hr, op);
  return NewChild(GetAddonData(info.Env())->sharedReceiveQueueCtor, &init);
}

Napi::Value Adapter::CreateConnector(const Napi::CallbackInfo& info) {
  const char* op = "createConnector";
  RequireOpen(info, op);
  Connector::Init init{{kChildConnector, this, Value()}, {}};
  HRESULT hr = nd_->CreateConnector(IID_IND2Connector, file_, init.connector.put());
  if (FAILED(hr)) ThrowNdStatus(info.Env(), hr, op);
  return NewChild(GetAddonData(info.Env())->connectorCtor, &init);
}

Napi::Value Adapter::CreateListener(const Napi::CallbackInfo& info) {
  const char* op = "createListener";
  RequireOpen(info, op);
  Listener::Init init{{kChildListener, this, Value()}, {}};
  HRESULT hr = nd_->CreateListener(IID_IND2Listener, file_, init.listener.put());
  if (FAILED(hr)) ThrowNdStatus(info.Env(), hr, op);
  return NewChild(GetAddonData(info.Env())->listenerCtor, &init);
}

}  // namespace netdirect

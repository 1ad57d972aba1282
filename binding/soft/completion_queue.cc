#include "soft/completion_queue.h"

#include <new>

#include "soft/adapter.h"
#include "soft/variance.h"
#include "soft/trace.h"

namespace netdirect::soft {

HRESULT SoftCompletionQueue::create(SoftAdapter* adapter, HANDLE file, ULONG depth, SoftCompletionQueue** out) {
  if (out == nullptr) return ND_INVALID_PARAMETER;
  *out = nullptr;
  if (depth == 0 || depth > limits::kMaxCqDepth) return ND_INVALID_PARAMETER_3;
  auto* cq = new (std::nothrow) SoftCompletionQueue(adapter, file);
  if (cq == nullptr) return ND_NO_MEMORY;
  try {
    cq->ring_.resize(depth);
    cq->depth_ = depth;
    cq->waiters_.reserve(4);
  } catch (...) {
    cq->Release();
    return ND_NO_MEMORY;
  }
  *out = cq;
  return ND_SUCCESS;
}

namespace {
uint64_t next_cq_serial() {
  static std::atomic<uint64_t> serial{0};
  return ++serial;
}
}  // namespace

SoftCompletionQueue::SoftCompletionQueue(SoftAdapter* adapter, HANDLE file)
    : adapter_(adapter), file_(file), serial_(next_cq_serial()) {
  adapter_->AddRef();
}

SoftCompletionQueue::~SoftCompletionQueue() {
  // Outstanding notifications end with the CQ (docs/nd2.md §7.3: ND_CANCELED when destroyed).
  std::vector<Waiter> w;
  {
    std::lock_guard<ndkit::CheckedMutex> lock(mu_);
    w.swap(waiters_);
  }
  for (auto& x : w) complete_overlapped(file_, x.ov, ND_CANCELED);
  adapter_->Release();
}

HRESULT SoftCompletionQueue::CancelOverlappedRequests() {
  variance::flush(static_cast<IND2CompletionQueue*>(this));
  std::lock_guard<ndkit::CheckedMutex> lock(mu_);
  // Completed in request order (ndcq checks this).
  for (auto& x : waiters_) complete_overlapped(file_, x.ov, ND_CANCELED);
  waiters_.clear();
  return ND_SUCCESS;
}

HRESULT SoftCompletionQueue::GetOverlappedResult(OVERLAPPED* pOverlapped, BOOL bWait) {
  if (pOverlapped == nullptr) return ND_INVALID_PARAMETER;
  return variance::overlapped_result(static_cast<IND2CompletionQueue*>(this), file_, pOverlapped, bWait);
}

HRESULT SoftCompletionQueue::GetNotifyAffinity(USHORT*, KAFFINITY*) { return ND_NOT_SUPPORTED; }

HRESULT SoftCompletionQueue::Resize(ULONG queueDepth) {
  if (queueDepth == 0 || queueDepth > limits::kMaxCqDepth) return ND_INVALID_PARAMETER;
  std::lock_guard<ndkit::CheckedMutex> lock(mu_);
  if (queueDepth < count_) return ND_BUFFER_OVERFLOW;
  if (!relayout_locked(queueDepth)) return ND_NO_MEMORY;
  depth_ = queueDepth;
  return ND_SUCCESS;
}

bool SoftCompletionQueue::matches_queued_locked(ULONG type) const {
  mu_.assert_held();
  if (type == ND_CQ_NOTIFY_ANY) return count_ > 0;
  if (type == ND_CQ_NOTIFY_SOLICITED) {
    for (size_t i = 0; i < count_; ++i) {
      const Entry& e = ring_[(head_ + i) % ring_.size()];
      if (e.solicited || FAILED(e.result.Status)) return true;
    }
  }
  return false;  // ERRORS: only CQ errors, handled by the caller
}

namespace {
thread_local bool t_inline_progress = false;
constexpr size_t kMaxInlineSources = 8;  // queue pairs on one CQ beyond which GetResults drives none inline

// A consumer that never asked for INDPollingHint (an ND program of its own, like the SDK's examples) is taken to
// poll once one thread has found the same CQ empty this many times in a row with no Notify in between. A thread
// that waits instead calls GetResults once, finds it empty, arms Notify and sleeps; one that polls spins on
// GetResults, and without progress of its own would wait for the engine thread, which a spinning consumer on
// a busy machine keeps from running (the SDK's ndpingpong in polling mode: 5-26 ms per message under Wine).
constexpr uint32_t kEmptyPollsMeanPolling = 2;
thread_local uint64_t t_polled_cq = 0;  // the CQ this thread last found empty (its serial_: never reused)
thread_local uint32_t t_empty_polls = 0;          // ... and how many times in a row
}  // namespace

HRESULT SoftCompletionQueue::Notify(ULONG type, OVERLAPPED* pOverlapped) {
  const HRESULT hr = notify_now(type, pOverlapped);
  // Test mode: an armed notification may fire with nothing new in the CQ (docs/testing.md).
  if (hr == ND_PENDING && variance::roll(variance::kSpuriousNotify)) {
    variance::later(static_cast<IND2CompletionQueue*>(this), [this, pOverlapped] { fire_spurious(pOverlapped); });
  }
  return variance::finish_overlapped(static_cast<IND2CompletionQueue*>(this), file_, pOverlapped, hr);
}

void SoftCompletionQueue::fire_spurious(OVERLAPPED* ov) {
  std::lock_guard<ndkit::CheckedMutex> lock(mu_);
  for (size_t i = 0; i < waiters_.size(); ++i) {
    if (waiters_[i].ov == ov) {
      waiters_.erase(waiters_.begin() + static_cast<std::ptrdiff_t>(i));
      complete_overlapped(file_, ov, ND_SUCCESS);
      return;
    }
  }
}

HRESULT SoftCompletionQueue::notify_now(ULONG type, OVERLAPPED* pOverlapped) {
  if (type != ND_CQ_NOTIFY_ANY && type != ND_CQ_NOTIFY_SOLICITED && type != ND_CQ_NOTIFY_ERRORS) {
    return ND_INVALID_PARAMETER_1;
  }
  if (pOverlapped == nullptr) return ND_INVALID_PARAMETER_2;
  if (t_polled_cq == serial_) t_empty_polls = 0;  // this thread waits now: not polling (polling_inferred)
  {
    std::lock_guard<ndkit::CheckedMutex> lock(mu_);
    if (overrun_.load(std::memory_order_relaxed)) return ND_BUFFER_OVERFLOW;
    // A matching completion is already queued: report it now instead of arming (closes the drain/arm race). On
    // Windows as a kernel provider does, whose armed CQ fires at once: ND_PENDING and the notification through the
    // overlapped file. The SDK's programs take any Notify that did not fail as armed and wait for its packet (ndconn
    // drains, arms and returns), so an ND_SUCCESS, which posts nothing, lost their completions (docs/nd2.md 7.3).
    if (matches_queued_locked(type)) return ndkit::succeed_overlapped(file_, pOverlapped);
    try {
      waiters_.push_back(Waiter{pOverlapped, type});
    } catch (...) {
      return ND_NO_MEMORY;
    }
    mark_pending(pOverlapped);
  }
  // Arming means the consumer stops polling and waits (a poller thread ending its spin window): connections
  // that a polling thread drove inline go back to the engine now, so the awaited message wakes someone.
  if (polled_inline_.exchange(false, std::memory_order_relaxed)) {
    std::lock_guard<std::mutex> lock(src_mu_);
    for (ProgressSource* s : sources_) s->polling_stopped();
  }
  return ND_PENDING;
}

void SoftCompletionQueue::fire_locked(HRESULT status, bool solicited_event, bool error_event) {
  mu_.assert_held();
  if (waiters_.empty()) return;
  // One event completes every outstanding Notify, provided one of them is satisfied by it; ANY overrides
  // a pending SOLICITED, so all go together.
  bool trigger = false;
  for (auto& w : waiters_) {
    if (error_event || w.type == ND_CQ_NOTIFY_ANY || (w.type == ND_CQ_NOTIFY_SOLICITED && solicited_event)) {
      trigger = true;
      break;
    }
  }
  if (!trigger) return;
  for (auto& w : waiters_) complete_overlapped(file_, w.ov, status);
  waiters_.clear();
}

// A ring of `size` entries (at least count_) holding the queued ones from its start. false without memory.
bool SoftCompletionQueue::relayout_locked(size_t size) {
  mu_.assert_held();
  std::vector<Entry> ring;
  try {
    ring.resize(size);
  } catch (...) {
    return false;
  }
  for (size_t i = 0; i < count_; ++i) ring[i] = ring_[(head_ + i) % ring_.size()];
  ring_.swap(ring);
  head_ = 0;
  return true;
}

bool SoftCompletionQueue::append_locked(const ND2_RESULT& result, bool solicited, bool flush) {
  mu_.assert_held();
  if (overrun_.load(std::memory_order_relaxed)) return false;
  // Traffic overruns at the consumer's depth; a flush only if the ring cannot grow (no memory).
  const bool full = flush ? count_ == ring_.size() && !relayout_locked(ring_.size() * 2) : count_ >= depth_;
  if (full) {
    overrun_.store(true, std::memory_order_release);
    trace("cq %p overrun at depth %zu", static_cast<void*>(this), ring_.size());
    fire_locked(ND_BUFFER_OVERFLOW, true, true);
    return false;
  }
  ring_[(head_ + count_) % ring_.size()] = Entry{result, solicited};
  ++count_;
  return true;
}

bool SoftCompletionQueue::push(const ND2_RESULT& result, bool solicited, bool flush) {
  std::lock_guard<ndkit::CheckedMutex> lock(mu_);
  if (!append_locked(result, solicited, flush)) return false;
  fire_locked(ND_SUCCESS, solicited || FAILED(result.Status), false);
  return true;
}

bool SoftCompletionQueue::push_many(const ND2_RESULT* results, size_t n) {
  std::lock_guard<ndkit::CheckedMutex> lock(mu_);
  bool failed = false;
  for (size_t i = 0; i < n; ++i) {
    if (!append_locked(results[i], false, false)) return false;
    failed = failed || FAILED(results[i].Status);
  }
  if (n > 0) fire_locked(ND_SUCCESS, failed, false);
  return true;
}

void SoftCompletionQueue::add_source(ProgressSource* s) {
  std::lock_guard<std::mutex> lock(src_mu_);
  sources_.push_back(s);
  have_sources_.store(true, std::memory_order_relaxed);
}

void SoftCompletionQueue::remove_source(ProgressSource* s) {
  std::lock_guard<std::mutex> lock(src_mu_);
  for (size_t i = 0; i < sources_.size(); ++i) {
    if (sources_[i] == s) {
      sources_[i] = sources_.back();
      sources_.pop_back();
      break;
    }
  }
  have_sources_.store(!sources_.empty(), std::memory_order_relaxed);
}


HRESULT SoftCompletionQueue::QueryInterface(REFIID riid, VOID** ppv) {
  if (ppv != nullptr && IsEqualGUID(riid, IID_INDPollingHint)) {
    hinted_.store(true, std::memory_order_relaxed);  // the consumer says when it polls; no inference
    AddRef();
    *ppv = static_cast<INDPollingHint*>(this);
    return S_OK;
  }
  return ComObject::QueryInterface(riid, ppv);
}

HRESULT SoftCompletionQueue::SetPollingThread(BOOL polling) {
  t_inline_progress = polling != FALSE;
  if (polling != FALSE) return ND_SUCCESS;
  // The thread stops polling while this CQ is armed (armed before the polling began, and nothing completed since):
  // the consumer waits now, as when it arms (notify_now), so the connections polled inline go back to the engine.
  bool armed = false;  // for completions: an ERRORS-only Notify (manual mode's poller) does not wait for messages
  {
    std::lock_guard<ndkit::CheckedMutex> lock(mu_);
    for (const Waiter& w : waiters_) armed = armed || w.type != ND_CQ_NOTIFY_ERRORS;
  }
  if (armed && polled_inline_.exchange(false, std::memory_order_relaxed)) {
    std::lock_guard<std::mutex> lock(src_mu_);
    for (ProgressSource* s : sources_) s->polling_stopped();
  }
  return ND_SUCCESS;
}

ULONG SoftCompletionQueue::GetResults(ND2_RESULT results[], ULONG nResults) {
  if (results == nullptr || nResults == 0) return 0;
  nResults = variance::results_limit(nResults);  // test mode: fewer than asked (docs/testing.md)
  if (nResults == 0) return 0;
  ULONG n = take(results, nResults);
  if (n != 0) return n;
  if (!t_inline_progress && !polling_inferred()) return 0;
  if (have_sources_.load(std::memory_order_relaxed)) {
    // Empty: drive the connections' receive progress on this thread (inline progress), then look again.
    // Only for a few connections: each costs a receive call per empty poll; many are the engine's (epoll).
    std::unique_lock<std::mutex> lock(src_mu_, std::try_to_lock);
    if (lock.owns_lock() && sources_.size() <= kMaxInlineSources) {
      polled_inline_.store(true, std::memory_order_relaxed);
      for (ProgressSource* s : sources_) s->poll_progress();
      lock.unlock();
      n = take(results, nResults);
    }
  }
  return n;
}

bool SoftCompletionQueue::polling_inferred() const {
  if (hinted_.load(std::memory_order_relaxed)) return false;
  if (t_polled_cq != serial_) {
    t_polled_cq = serial_;
    t_empty_polls = 0;
  }
  if (t_empty_polls < kEmptyPollsMeanPolling) ++t_empty_polls;
  return t_empty_polls >= kEmptyPollsMeanPolling;
}

ULONG SoftCompletionQueue::take(ND2_RESULT results[], ULONG nResults) {
  std::lock_guard<ndkit::CheckedMutex> lock(mu_);
  ULONG n = 0;
  const size_t size = ring_.size();
  while (n < nResults && count_ > 0) {
    results[n++] = ring_[head_].result;
    head_ = (head_ + 1) % size;
    --count_;
  }
  return n;
}

ULONG SoftCompletionQueue::count() const {
  std::lock_guard<ndkit::CheckedMutex> lock(mu_);
  return static_cast<ULONG>(count_);
}

}  // namespace netdirect::soft

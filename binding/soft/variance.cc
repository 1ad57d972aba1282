#include "soft/env.h"
#include "soft/variance.h"

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <atomic>
#include <deque>
#include <mutex>
#include <thread>
#include <vector>

#include "soft/object.h"

namespace netdirect::soft::variance {

namespace {

using Clock = std::chrono::steady_clock;

struct Name {
  const char* name;
  uint32_t bits;
};
constexpr Name kNames[] = {
    {"pending", kPending},     {"fail-async", kFailAsync},
    {"overflow", kOverflow},   {"short-poll", kShortPoll},
    {"spurious-notify", kSpuriousNotify}, {"phased", kPhased},
    {"all", kPending | kFailAsync | kOverflow | kShortPoll | kSpuriousNotify | kPhased},
};

// The process's settings and the seeded generator (splitmix64: small, and the same sequence everywhere).
struct Settings {
  uint32_t bits = 0;
  std::mutex mu;
  uint64_t state = 0;
};

Settings& settings() {
  static Settings* s = [] {
    auto* st = new Settings();  // never freed: the variance thread and late releases may use it at exit
    std::string spec_env;
    const char* spec = env_value("NETDIRECT_SOFT_VARIANCE", spec_env);
    const char* bad = nullptr;
    st->bits = spec != nullptr ? parse(spec, &bad) : 0;
    if (bad != nullptr)
      std::fprintf(stderr, "netdirect: NETDIRECT_SOFT_VARIANCE: unknown behaviour in '%s' (known: pending, "
                           "fail-async, overflow, short-poll, spurious-notify, phased, all)\n", bad);
    if (st->bits != 0) {
      std::string seed_env;
      const char* seed = env_value("NETDIRECT_SOFT_VARIANCE_SEED", seed_env);
      uint64_t v = seed != nullptr && *seed != '\0'
                       ? std::strtoull(seed, nullptr, 0)
                       : static_cast<uint64_t>(Clock::now().time_since_epoch().count()) % 1000000007u;
      st->state = v;
      if (seed == nullptr || *seed == '\0')
        std::fprintf(stderr, "netdirect: soft provider variance '%s', seed %llu (NETDIRECT_SOFT_VARIANCE_SEED repeats it)\n",
                     spec, static_cast<unsigned long long>(v));
    }
    return st;
  }();
  return *s;
}

uint64_t next_random() {
  Settings& s = settings();
  std::lock_guard<std::mutex> lock(s.mu);
  uint64_t z = (s.state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// Deferred work: what a provider completing requests from its own thread (an interrupt, a DPC) looks like to the
// consumer. One thread, started on first use and never joined (it sleeps while there is nothing to do).
struct Item {
  Clock::time_point due;
  IUnknown* owner;  // referenced
  std::function<void()> fn;
};

class Deferred {
 public:
  void add(IUnknown* owner, std::function<void()> fn, Clock::duration delay) {
    owner->AddRef();
    {
      std::lock_guard<std::mutex> lock(mu_);
      items_.push_back(Item{Clock::now() + delay, owner, std::move(fn)});
      if (!started_) {
        started_ = true;
        std::thread([this] { run(); }).detach();
      }
    }
    cv_.notify_one();
  }

  void flush(IUnknown* owner) {
    std::vector<Item> mine;
    {
      std::lock_guard<std::mutex> lock(mu_);
      for (auto it = items_.begin(); it != items_.end();) {
        if (it->owner == owner) {
          mine.push_back(std::move(*it));
          it = items_.erase(it);
        } else {
          ++it;
        }
      }
    }
    for (Item& i : mine) finish(&i);
  }

 private:
  static void finish(Item* i) {
    i->fn();
    i->owner->Release();
  }

  void run() {
    std::unique_lock<std::mutex> lock(mu_);
    for (;;) {
      if (items_.empty()) {
        cv_.wait(lock);
        continue;
      }
      auto first = items_.begin();
      for (auto it = items_.begin(); it != items_.end(); ++it) {
        if (it->due < first->due) first = it;
      }
      if (first->due > Clock::now()) {
        cv_.wait_until(lock, first->due);
        continue;
      }
      Item i = std::move(*first);
      items_.erase(first);
      lock.unlock();
      finish(&i);
      lock.lock();
    }
  }

  std::mutex mu_;  // a leaf: held only around items_
  std::condition_variable cv_;
  std::deque<Item> items_;
  bool started_ = false;
};

Deferred& deferred() {
  static Deferred* d = new Deferred();  // never freed, like its thread
  return *d;
}

// Requests in their first phase (phased): the OVERLAPPED, the status the second phase ends with, the issuer.
struct Phase {
  OVERLAPPED* ov;
  HRESULT final_status;
  IUnknown* owner;
};
std::mutex g_phase_mu;  // a leaf
std::vector<Phase> g_phases;

bool take_phase(OVERLAPPED* ov, HRESULT* final_status) {
  std::lock_guard<std::mutex> lock(g_phase_mu);
  for (size_t i = 0; i < g_phases.size(); ++i) {
    if (g_phases[i].ov == ov) {
      *final_status = g_phases[i].final_status;
      g_phases[i] = g_phases.back();
      g_phases.pop_back();
      return true;
    }
  }
  return false;
}

// A cancelled or released owner: its first phases end where they are (GetOverlappedResult then reports the final
// status, no second packet).
void drop_phases(IUnknown* owner) {
  std::lock_guard<std::mutex> lock(g_phase_mu);
  for (size_t i = 0; i < g_phases.size();) {
    if (g_phases[i].owner == owner) {
      reinterpret_cast<std::atomic<ULONG_PTR>*>(&g_phases[i].ov->Internal)
          ->store(static_cast<ULONG_PTR>(static_cast<ULONG>(g_phases[i].final_status)));
      g_phases[i] = g_phases.back();
      g_phases.pop_back();
    } else {
      ++i;
    }
  }
}

// Completes the first phase: a packet saying ND_SUCCESS; the consumer's GetOverlappedResult starts the second.
void complete_first_phase(IUnknown* owner, HANDLE file, OVERLAPPED* ov, HRESULT final_status) {
  {
    std::lock_guard<std::mutex> lock(g_phase_mu);
    g_phases.push_back(Phase{ov, final_status, owner});
  }
  complete_overlapped(file, ov, ND_SUCCESS);
}

thread_local bool t_overflowed = false;  // this thread's last size query was answered ND_BUFFER_OVERFLOW by us

}  // namespace

uint32_t parse(const char* spec, const char** bad) {
  uint32_t bits = 0;
  *bad = nullptr;
  const char* p = spec;
  while (*p != '\0') {
    const char* end = std::strchr(p, ',');
    const size_t len = end != nullptr ? static_cast<size_t>(end - p) : std::strlen(p);
    bool known = len == 0;
    for (const Name& n : kNames) {
      if (std::strlen(n.name) == len && std::strncmp(n.name, p, len) == 0) {
        bits |= n.bits;
        known = true;
      }
    }
    if (!known && *bad == nullptr) *bad = p;
    p += len;
    if (*p == ',') ++p;
  }
  return bits;
}

uint32_t enabled() {
  static const uint32_t bits = settings().bits;
  return bits;
}

bool roll(Behaviour b) { return (enabled() & b) != 0 && (next_random() & 1) != 0; }

uint32_t uniform(uint32_t n) { return static_cast<uint32_t>(next_random() % n); }

void later(IUnknown* owner, std::function<void()> fn) {
  deferred().add(owner, std::move(fn), std::chrono::microseconds(uniform(2000)));
}

void flush(IUnknown* owner) {
  if (enabled() == 0) return;
  deferred().flush(owner);
  if ((enabled() & kPhased) != 0) drop_phases(owner);
}

HRESULT overlapped_result(IUnknown* owner, HANDLE file, OVERLAPPED* ov, BOOL wait) {
  HRESULT final_status;
  if ((enabled() & kPhased) == 0 || ov == nullptr || !take_phase(ov, &final_status))
    return ndkit::overlapped_result(ov, wait);
  // The second phase: the request is in progress again, its event unsignalled (as when an I/O is issued).
  mark_pending(ov);
  HANDLE ev = reinterpret_cast<HANDLE>(reinterpret_cast<uintptr_t>(ov->hEvent) & ~uintptr_t(1));
  if (ev != nullptr) ResetEvent(ev);
  later(owner, [file, ov, final_status] { complete_overlapped(file, ov, final_status); });
  return wait ? ndkit::overlapped_result(ov, TRUE) : ND_PENDING;
}

HRESULT finish_overlapped(IUnknown* owner, HANDLE file, OVERLAPPED* ov, HRESULT hr) {
  if (enabled() == 0 || ov == nullptr || hr == ND_PENDING) return hr;
  if (!(hr == ND_SUCCESS ? roll(kPending) : FAILED(hr) && roll(kFailAsync))) return hr;
  mark_pending(ov);
  // Completed before the call returns (the consumer's port may hand the packet to another thread before it sees
  // ND_PENDING), or later from another thread.
  const bool phased = roll(kPhased);
  if (uniform(4) == 0) {
    phased ? complete_first_phase(owner, file, ov, hr) : complete_overlapped(file, ov, hr);
  } else if (phased) {
    later(owner, [owner, file, ov, hr] { complete_first_phase(owner, file, ov, hr); });
  } else {
    later(owner, [file, ov, hr] { complete_overlapped(file, ov, hr); });
  }
  return ND_PENDING;
}

ULONG results_limit(ULONG n) {
  if (n == 0 || !roll(kShortPoll)) return n;
  return uniform(n);  // 0 .. n-1: what a CQ whose entries are still being written shows
}

bool overflow_first(ULONG need, ULONG* size, ULONG grow) {
  if ((enabled() & kOverflow) == 0) return false;
  if (t_overflowed) {
    t_overflowed = false;
    return false;
  }
  if (!roll(kOverflow)) return false;
  t_overflowed = true;
  *size = need + 1 + uniform(grow > 0 ? grow : 1);
  return true;
}

}  // namespace netdirect::soft::variance

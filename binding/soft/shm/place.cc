// Placement by the initiator on a same-host connection (design: place.h, docs/shm.md "Placement by the initiator").
#include "soft/shm/place.h"

#include <cerrno>
#include <chrono>
#include <string>
#include <thread>

#include "soft/env.h"

#ifdef __linux__
#include <poll.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>
#endif

namespace netdirect::soft::shm {

bool place_enabled_from_env() { return env_switch("NETDIRECT_SHM_PLACE", true); }

// ---- PlaceTable (the target) -----------------------------------------------------------------------------------

void PlaceTable::init(PlaceArea* area, const uint64_t* secret) {
  a_ = area;
  secret_ = secret;
  a_->probe_addr.store(reinterpret_cast<uintptr_t>(secret), std::memory_order_release);
}

bool PlaceTable::proof_ok() const {
  return a_ != nullptr && *secret_ != 0 && a_->proof.load(std::memory_order_acquire) == *secret_;
}

void PlaceTable::set_processed(uint64_t consumed) {
  if (a_ == nullptr || consumed == processed_) return;  // a look that found nothing writes nothing here
  processed_ = consumed;
  a_->processed.store(consumed, std::memory_order_release);
}

void PlaceTable::publish(uint32_t stag, uint64_t base, uint64_t length, uint32_t rights) {
  if (a_ == nullptr || gave_up_ || !(rights & access::kRemoteWrite)) return;
  uint32_t slot = kPlaceSlots;
  for (uint32_t i = 0; i < kPlaceProbe && slot == kPlaceSlots; ++i) {
    if (occupant_[(stag + i) % kPlaceSlots] == 0) slot = (stag + i) % kPlaceSlots;
  }
  if (slot == kPlaceSlots) return;  // all taken: Writes to this one go through the ring
  occupant_[slot] = stag;
  PlaceEntry& e = a_->entries[slot];
  // The slot is dead (odd) since its last unpublish, or was never used (0): no reader takes it while we write.
  if ((gen_[slot] & 1) == 0) {
    gen_[slot]++;
    e.gen.store(gen_[slot], std::memory_order_relaxed);
    std::atomic_thread_fence(std::memory_order_release);
  }
  e.stag.store(stag, std::memory_order_relaxed);
  e.rights.store(rights, std::memory_order_relaxed);
  e.base.store(base, std::memory_order_relaxed);
  e.length.store(length, std::memory_order_relaxed);
  gen_[slot]++;
  e.gen.store(gen_[slot], std::memory_order_release);
}

void PlaceTable::unpublish(uint32_t stag) {
  if (a_ == nullptr) return;
  const uint32_t home = stag % kPlaceSlots;
  uint32_t slot = kPlaceSlots;
  for (uint32_t i = 0; i < kPlaceProbe && slot == kPlaceSlots; ++i) {
    if (occupant_[(home + i) % kPlaceSlots] == stag) slot = (home + i) % kPlaceSlots;
  }
  if (slot == kPlaceSlots) return;  // never published
  occupant_[slot] = 0;
  gen_[slot]++;  // odd: dead
  a_->entries[slot].gen.store(gen_[slot], std::memory_order_seq_cst);
  std::atomic_thread_fence(std::memory_order_seq_cst);  // the Dekker pair with Placer::place
  if (on_) wait_placing(home + 1);
}

void PlaceTable::enable() {
  if (a_ == nullptr || gave_up_) return;
  on_ = true;
  a_->enabled.store(1, std::memory_order_release);
}

void PlaceTable::disable() {
  if (a_ == nullptr) return;
  a_->enabled.store(0, std::memory_order_seq_cst);
  std::atomic_thread_fence(std::memory_order_seq_cst);
  if (on_) wait_placing(0);
  on_ = false;
}

// A placement that read the entry (or `enabled`) before we changed it holds `placing` until its copy returned:
// wait until the word changes from what we see now (a later attempt sees our change, place.h). A correct peer
// holds it for one copy; one that holds it longer than kPlaceWaitMs is given up on: the table is switched off for
// good (only the ring then) and we go on. Such a peer can write into this process by CMA anyway
// (docs/shm.md "Threat model").
void PlaceTable::wait_placing(uint32_t home_plus_1) {
  const uint64_t seen = a_->placing.load(std::memory_order_seq_cst);
  const uint32_t low = static_cast<uint32_t>(seen);
  if (low == 0 || (home_plus_1 != 0 && low != home_plus_1)) return;
  const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(kPlaceWaitMs);
  for (uint32_t i = 0; a_->placing.load(std::memory_order_acquire) == seen; ++i) {
    if (i < 64) continue;
    if (std::chrono::steady_clock::now() >= until) {
      gave_up_ = true;
      a_->enabled.store(0, std::memory_order_seq_cst);
      for (uint32_t s = 0; s < kPlaceSlots; ++s) {
        if (occupant_[s] == 0) continue;
        occupant_[s] = 0;
        gen_[s] = (gen_[s] | 1) + 2;
        a_->entries[s].gen.store(gen_[s], std::memory_order_seq_cst);
      }
      return;
    }
    std::this_thread::yield();
  }
}

// ---- Placer (the initiator) ------------------------------------------------------------------------------------

#ifndef __linux__

Placer::~Placer() = default;
void Placer::init(PlaceArea*, int, bool) {}
Placer::Probe Placer::probe() { return Probe::kOff; }
bool Placer::place(uint32_t, uint64_t, const iovec*, int, uint64_t, uint64_t) { return false; }

#else

Placer::~Placer() {
  if (pidfd_ >= 0) ::close(pidfd_);
}

void Placer::init(PlaceArea* peer_area, int peer_pid, bool allowed) {
  a_ = peer_area;
  pid_ = peer_pid;
  probe_ = allowed && peer_pid > 0 ? Probe::kUnknown : Probe::kOff;
}

Placer::Probe Placer::probe() {
  if (probe_ != Probe::kUnknown) return probe_;
  const uint64_t addr = a_->probe_addr.load(std::memory_order_acquire);
  if (addr == 0) return probe_;  // the target has not published it yet
  // The pidfd first: the probe then proves that the process it names is the one holding the secret (a pid
  // reused in between would not have it), and before each copy it says whether that process still runs.
  pidfd_ = static_cast<int>(syscall(SYS_pidfd_open, pid_, 0));
  if (pidfd_ < 0) {
    probe_ = Probe::kOff;
    return probe_;
  }
  uint64_t v = 0;
  iovec l{&v, sizeof v};
  iovec r{reinterpret_cast<void*>(static_cast<uintptr_t>(addr)), sizeof v};
  if (process_vm_readv(pid_, &l, 1, &r, 1, 0) != static_cast<ssize_t>(sizeof v) || v == 0) {
    probe_ = Probe::kOff;  // EPERM (ptrace rules, another user, Yama), or a target that lied: the ring only
    return probe_;
  }
  a_->proof.store(v, std::memory_order_release);
  probe_ = Probe::kOn;
  return probe_;
}

bool Placer::place(uint32_t stag, uint64_t to, const iovec* local, int n, uint64_t len, uint64_t produced) {
  if (probe_ != Probe::kOn && probe() != Probe::kOn) return false;
  if (len == 0 || len > kPlaceMaxBytes || stag == 0) return false;
  const uint32_t home = stag % kPlaceSlots;
  const uint64_t mark = (static_cast<uint64_t>(++attempt_) << 32) | (home + 1);
  a_->placing.store(mark, std::memory_order_seq_cst);
  std::atomic_thread_fence(std::memory_order_seq_cst);  // the Dekker pair with PlaceTable::unpublish / disable
  bool ok = a_->enabled.load(std::memory_order_seq_cst) == 1 &&
            a_->processed.load(std::memory_order_acquire) == produced;
  if (ok) {
    // The entry, under its sequence lock; then what the target's receive stream checks (StagTable::pin_remote).
    bool found = false;
    for (uint32_t i = 0; i < kPlaceProbe && !found; ++i) {
      const PlaceEntry& e = a_->entries[(home + i) % kPlaceSlots];
      const uint32_t g1 = e.gen.load(std::memory_order_seq_cst);
      const uint32_t s = e.stag.load(std::memory_order_relaxed);
      const uint32_t rights = e.rights.load(std::memory_order_relaxed);
      const uint64_t base = e.base.load(std::memory_order_relaxed);
      const uint64_t length = e.length.load(std::memory_order_relaxed);
      std::atomic_thread_fence(std::memory_order_acquire);
      const uint32_t g2 = e.gen.load(std::memory_order_relaxed);
      if (g1 == 0 || (g1 & 1) != 0 || g1 != g2 || s != stag) continue;
      found = true;
      ok = (rights & access::kRemoteWrite) != 0 && range_inside(base, length, to, len);
    }
    ok = ok && found;
  }
  if (ok) {
    const uint64_t now = static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                                   std::chrono::steady_clock::now().time_since_epoch())
                                                   .count());
    if (now - alive_ns_ >= kPlaceAliveNs) {
      pollfd p{pidfd_, POLLIN, 0};  // readable once the process has exited (its pid could then be reused)
      ok = ::poll(&p, 1, 0) == 0;
      if (ok) alive_ns_ = now;
    }
  }
  if (ok) {
    iovec r{reinterpret_cast<void*>(static_cast<uintptr_t>(to)), static_cast<size_t>(len)};
    const ssize_t w = process_vm_writev(pid_, local, static_cast<unsigned long>(n), &r, 1, 0);
    if (w < 0 && errno == EPERM) probe_ = Probe::kOff;
    // A short or failed copy: the ring carries the whole Write again and the target decides.
    ok = w == static_cast<ssize_t>(len);
  }
  a_->placing.store(0, std::memory_order_release);
  if (ok) a_->placed.store(++placed_, std::memory_order_relaxed);
  return ok;
}

#endif  // __linux__

}  // namespace netdirect::soft::shm

// Placement by the initiator on a same-host connection (design: place.h, docs/shm.md "Placement by the initiator").
#include "soft/shm/place.h"

#include <cerrno>
#include <chrono>
#include <cstring>
#include <string>
#include <thread>

#include "soft/env.h"
#include "soft/limits.h"
#include "soft/shm/fds.h"

#ifdef __linux__
#include <fcntl.h>
#include <poll.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>
#endif

namespace netdirect::soft::shm {

bool place_enabled_from_env() { return env_switch("NETDIRECT_SHM_PLACE", true); }

namespace {

constexpr char kRegionMagic[8] = {'N', 'D', 'S', 'H', 'M', 'v', '3', 0};

#ifdef __linux__
// One RegionMsg on the side channel, with the descriptor `fd` attached (-1: none). Never blocks: a full side channel
// says no (the region then takes process_vm_writev).
bool send_region_msg(int sock, uint32_t kind, uint64_t id, uint64_t size, int fd) {
  RegionMsg m{};
  std::memcpy(m.magic, kRegionMagic, sizeof m.magic);
  m.kind = kind;
  m.id = id;
  m.size = size;
  return send_fds(sock, &m, sizeof m, &fd, fd >= 0 ? 1 : 0);
}
#endif

}  // namespace

// ---- PlaceTable (the target) -----------------------------------------------------------------------------------

void PlaceTable::init(PlaceArea* area, const uint64_t* secret, int side) {
  a_ = area;
  secret_ = secret;
  side_ = side;
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

void PlaceTable::publish(uint32_t stag, uint64_t base, uint64_t length, uint32_t rights, const SharedBuffer* buf) {
  if (a_ == nullptr || gave_up_ || !(rights & access::kRemoteWrite)) return;
  uint32_t slot = kPlaceSlots;
  for (uint32_t i = 0; i < kPlaceProbe && slot == kPlaceSlots; ++i) {
    if (occupant_[(stag + i) % kPlaceSlots] == 0) slot = (stag + i) % kPlaceSlots;
  }
  if (slot == kPlaceSlots) return;  // all taken: Writes to this one go through the ring
  // The memfd first: the peer finds it on the side channel when it sees an entry naming it.
  const uint64_t id = buf != nullptr ? offer_buffer(*buf) : 0;
  occupant_[slot] = stag;
  map_id_[slot] = id;
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
  e.map_id.store(id, std::memory_order_relaxed);
  e.map_offset.store(id != 0 ? base - buf->base : 0, std::memory_order_relaxed);
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
  const uint64_t id = map_id_[slot];
  map_id_[slot] = 0;
  if (id != 0) release_buffer(id);
}

// The id of b's memfd for an entry: the peer has the memfd (sent now, or for an entry before), or 0 (no side
// channel, no proof, too many messages unread, the side channel full): the entry then says "process_vm_writev".
uint64_t PlaceTable::offer_buffer(const SharedBuffer& b) {
#ifdef __linux__
  if (side_ < 0 || !proof_ok()) return 0;  // the memfd goes only where CMA already reaches
  auto it = handed_.find(b.id);
  if (it != handed_.end()) {
    it->second++;
    return b.id;
  }
  if (sent_ - a_->regions_taken.load(std::memory_order_relaxed) >= kPlaceMaxUnread) return 0;
  if (!send_region_msg(side_, kRegionMsg, b.id, b.size, b.fd)) return 0;
  a_->regions_sent.store(++sent_, std::memory_order_release);
  handed_.emplace(b.id, 1);
  return b.id;
#else
  (void)b;
  return 0;
#endif
}

// After the last entry naming a memfd was taken back: the peer may unmap it (if this message is lost to a full side
// channel, it keeps its mapping until the table goes off or the link ends).
void PlaceTable::release_buffer(uint64_t id) {
  auto it = handed_.find(id);
  if (it == handed_.end() || --it->second > 0) return;
  handed_.erase(it);
#ifdef __linux__
  if (send_region_msg(side_, kForgetMsg, id, 0, -1)) a_->regions_sent.store(++sent_, std::memory_order_release);
#endif
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
  // The peer unmaps every memfd when it sees the table off; a table on again hands them over anew.
  handed_.clear();
  for (uint64_t& id : map_id_) id = 0;
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
        map_id_[s] = 0;
        gen_[s] = (gen_[s] | 1) + 2;
        a_->entries[s].gen.store(gen_[s], std::memory_order_seq_cst);
      }
      handed_.clear();
      return;
    }
    std::this_thread::yield();
  }
}

// ---- Placer (the initiator) ------------------------------------------------------------------------------------

#ifndef __linux__

Placer::~Placer() = default;
void Placer::init(PlaceArea*, int, bool, int) {}
Placer::Probe Placer::probe() { return Probe::kOff; }
bool Placer::place(uint32_t, uint64_t, const iovec*, int, uint64_t, uint64_t, bool) { return false; }
void Placer::drop_mappings() {}
void Placer::take_region_msgs() {}
const Placer::Mapping* Placer::mapping(uint64_t) const { return nullptr; }

#else

Placer::~Placer() {
  if (pidfd_ >= 0) ::close(pidfd_);
  drop_mappings();
}

void Placer::init(PlaceArea* peer_area, int peer_pid, bool allowed, int side) {
  a_ = peer_area;
  pid_ = peer_pid;
  side_ = side;
  probe_ = allowed && peer_pid > 0 ? Probe::kUnknown : Probe::kOff;
}

void Placer::drop_mappings() {
  for (const Mapping& m : maps_) munmap(m.at, static_cast<size_t>(m.size));
  maps_.clear();
}

const Placer::Mapping* Placer::mapping(uint64_t id) const {
  for (const Mapping& m : maps_) {
    if (m.id == id) return &m;
  }
  return nullptr;
}

// Reads the RegionMsgs waiting on the side channel (the target sent them before it published entries naming them, so
// they are there). Whatever they say is checked: a message that is not one, a descriptor that is not a sealed memfd
// of the size said, is dropped (its entries then take process_vm_writev).
void Placer::take_region_msgs() {
  if (side_ < 0) return;
  for (int i = 0; i < 256; ++i) {
    RegionMsg m{};
    Received r = recv_fds(side_, &m, sizeof m);
    if (r.bytes <= 0) return;  // nothing more (or the side channel closed)
    a_->regions_taken.store(++taken_, std::memory_order_relaxed);
    const bool whole = r.bytes == static_cast<ssize_t>(sizeof m) && !r.cut &&
                       std::memcmp(m.magic, kRegionMagic, sizeof m.magic) == 0 && m.id != 0;
    if (whole && (m.kind == kRegionMsg || m.kind == kForgetMsg)) {
      for (size_t j = 0; j < maps_.size(); ++j) {
        if (maps_[j].id != m.id) continue;
        munmap(maps_[j].at, static_cast<size_t>(maps_[j].size));  // a new memfd under a known id replaces it
        maps_.erase(maps_.begin() + static_cast<ptrdiff_t>(j));
        break;
      }
    }
    if (whole && m.kind == kRegionMsg && r.nfds == 1 && maps_.size() < kPlaceMaxMappings && m.size > 0 &&
        m.size <= limits::kMaxRegistrationSize && is_mappable_memfd(r.fds[0], m.size)) {
      void* at = mmap(nullptr, static_cast<size_t>(m.size), PROT_READ | PROT_WRITE, MAP_SHARED, r.fds[0], 0);
      if (at != MAP_FAILED) maps_.push_back(Mapping{m.id, static_cast<uint8_t*>(at), m.size});
    }
    r.close_fds();  // a mapping keeps the memory
  }
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

// Copies len bytes gathered from local into dst, the last byte after the others (release): a receiver spinning on
// the last byte of a Write (perftest-style) sees the rest once it sees that one, as on an RNIC that places in order.
// (glibc's memcpy ends its non-temporal stores with an sfence itself.)
static void copy_released(uint8_t* dst, const iovec* local, int n, uint64_t len) {
  uint64_t left = len - 1;
  const uint8_t* last = nullptr;
  for (int i = 0; i < n; ++i) {
    const auto* src = static_cast<const uint8_t*>(local[i].iov_base);
    const uint64_t k = local[i].iov_len;
    const uint64_t now = k < left ? k : left;
    if (now > 0) std::memcpy(dst, src, static_cast<size_t>(now));
    dst += now;
    left -= now;
    if (now < k) {
      last = src + now;  // the first byte not copied: the Write's last (len counts exactly the pieces' bytes)
      break;
    }
  }
  std::atomic_thread_fence(std::memory_order_release);
  reinterpret_cast<std::atomic<uint8_t>*>(dst)->store(*last, std::memory_order_relaxed);
}

bool Placer::place(uint32_t stag, uint64_t to, const iovec* local, int n, uint64_t len, uint64_t produced,
                   bool by_syscall) {
  if (probe_ != Probe::kOn && probe() != Probe::kOn) return false;
  if (len == 0 || len > kPlaceMaxBytes || stag == 0) return false;
  // What the target handed over or took back on the side channel (its count moved): before the entry names it.
  if (side_ >= 0 && a_->regions_sent.load(std::memory_order_acquire) != taken_) take_region_msgs();
  const uint32_t home = stag % kPlaceSlots;
  const uint64_t mark = (static_cast<uint64_t>(++attempt_) << 32) | (home + 1);
  a_->placing.store(mark, std::memory_order_seq_cst);
  std::atomic_thread_fence(std::memory_order_seq_cst);  // the Dekker pair with PlaceTable::unpublish / disable
  const bool on = a_->enabled.load(std::memory_order_seq_cst) == 1;
  bool ok = on && a_->processed.load(std::memory_order_acquire) == produced;
  uint8_t* dst = nullptr;  // set when the entry lies in a memfd we map
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
      const uint64_t map_id = e.map_id.load(std::memory_order_relaxed);
      const uint64_t map_offset = e.map_offset.load(std::memory_order_relaxed);
      std::atomic_thread_fence(std::memory_order_acquire);
      const uint32_t g2 = e.gen.load(std::memory_order_relaxed);
      if (g1 == 0 || (g1 & 1) != 0 || g1 != g2 || s != stag) continue;
      found = true;
      ok = (rights & access::kRemoteWrite) != 0 && range_inside(base, length, to, len);
      const Mapping* m = ok && map_id != 0 ? mapping(map_id) : nullptr;
      if (m == nullptr && !by_syscall) ok = false;  // the ring then
      if (m != nullptr) {
        // Where the Write goes in our mapping of the target's memfd: inside it whatever the entry says (a lying
        // offset only moves the bytes elsewhere in the target's own memory).
        const uint64_t d = to - base;
        ok = map_offset <= m->size && d <= m->size - map_offset && range_inside(0, m->size, map_offset + d, len);
        if (ok) dst = m->at + map_offset + d;
      }
    }
    ok = ok && found;
  }
  if (ok && dst != nullptr) {
    uint64_t have = 0;
    for (int i = 0; i < n; ++i) have += local[i].iov_len;
    ok = have >= len;  // the pieces hold the Write (as process_vm_writev would find)
    if (ok) {
      copy_released(dst, local, n, len);  // a store into memory we map: no system call
      ++placed_mapped_;
    }
  } else if (ok) {
    const uint64_t now = static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                                   std::chrono::steady_clock::now().time_since_epoch())
                                                   .count());
    if (now - alive_ns_ >= kPlaceAliveNs) {
      pollfd p{pidfd_, POLLIN, 0};  // readable once the process has exited (its pid could then be reused)
      ok = ::poll(&p, 1, 0) == 0;
      if (ok) alive_ns_ = now;
    }
  }
  if (ok && dst == nullptr) {
    iovec r{reinterpret_cast<void*>(static_cast<uintptr_t>(to)), static_cast<size_t>(len)};
    const ssize_t w = process_vm_writev(pid_, local, static_cast<unsigned long>(n), &r, 1, 0);
    if (w < 0 && errno == EPERM) probe_ = Probe::kOff;
    // A short or failed copy: the ring carries the whole Write again and the target decides.
    ok = w == static_cast<ssize_t>(len);
  }
  a_->placing.store(0, std::memory_order_release);  // after the copy: the target's wait sees it done
  if (ok) a_->placed.store(++placed_, std::memory_order_relaxed);
  if (!on && !maps_.empty()) drop_mappings();  // the table went off (the target disconnects or gave up on us)
  return ok;
}

#endif  // __linux__

}  // namespace netdirect::soft::shm

#include "soft/memory/stag_table.h"

#include <cstring>
#include <random>

#if defined(__linux__)
#include <sys/random.h>
#endif

namespace netdirect::soft {

// ---- SecureRandom -------------------------------------------------------------------------------------

void SecureRandom::refill() {
#if defined(__linux__)
  // getrandom(2) without flags: blocks only before the kernel's pool is first initialised (early boot).
  size_t got = 0;
  auto* out = reinterpret_cast<uint8_t*>(buf_);
  while (got < sizeof buf_) {
    const ssize_t n = getrandom(out + got, sizeof buf_ - got, 0);
    if (n <= 0) break;  // EINTR or ENOSYS: the fallback below finishes the batch
    got += static_cast<size_t>(n);
  }
  if (got == sizeof buf_) {
    left_ = sizeof buf_ / sizeof buf_[0];
    return;
  }
#endif
  std::random_device rd;  // RtlGenRandom (rand_s) on Windows, the OS source elsewhere
  for (auto& w : buf_) w = rd();
  left_ = sizeof buf_ / sizeof buf_[0];
}

uint32_t SecureRandom::next() {
  if (left_ == 0) refill();
  const uint32_t v = buf_[--left_];
  buf_[left_] = 0;  // a value handed out does not stay in memory
  return v;
}

// ---- StagIndex ----------------------------------------------------------------------------------------

void StagIndex::grow() {
  std::vector<Slot> old = std::move(slots_);
  const size_t cap = old.empty() ? 64 : old.size() * 2;
  slots_.assign(cap, Slot{0, 0});
  mask_ = cap - 1;
  size_ = 0;
  for (const Slot& s : old) {
    if (s.key != 0) insert(s.key, s.value);
  }
}

void StagIndex::insert(uint32_t key, uint32_t value) {
  if ((size_ + 1) * 2 > slots_.size()) grow();
  size_t i = key & mask_;
  while (slots_[i].key != 0) i = (i + 1) & mask_;
  slots_[i] = Slot{key, value};
  ++size_;
}

void StagIndex::erase(uint32_t key) {
  if (slots_.empty()) return;
  size_t i = key & mask_;
  while (slots_[i].key != key) {
    if (slots_[i].key == 0) return;
    i = (i + 1) & mask_;
  }
  // Backward shift: move later members of the probe run into the hole while that keeps them reachable.
  size_t hole = i;
  for (size_t j = (hole + 1) & mask_; slots_[j].key != 0; j = (j + 1) & mask_) {
    const size_t home = slots_[j].key & mask_;
    // The member at j may move to the hole unless its home lies cyclically in (hole, j].
    const bool home_after_hole = hole <= j ? (home > hole && home <= j) : (home > hole || home <= j);
    if (!home_after_hole) {
      slots_[hole] = slots_[j];
      hole = j;
    }
  }
  slots_[hole] = Slot{0, 0};
  --size_;
}

// ---- StagTable ----------------------------------------------------------------------------------------

uint32_t StagTable::draw_stag_locked() {
  mu_.assert_held();
  for (;;) {
    const uint32_t s = random_.next();
    if (!reserved(s) && !index_.contains(s) && !retired_.contains(s)) return s;
  }
}

uint32_t StagTable::allocate_locked(Kind kind) {
  mu_.assert_held();
  uint32_t slot;
  if (!free_.empty()) {
    slot = free_.back();
    free_.pop_back();
  } else {
    if (entries_.size() >= kMaxEntries) return kNoSlot;
    slot = static_cast<uint32_t>(entries_.size());
    entries_.emplace_back();
  }
  Entry& e = entries_[slot];
  e = Entry{};
  e.kind = kind;
  e.stag = draw_stag_locked();
  index_.insert(e.stag, slot);
  ++live_;
  return slot;
}

void StagTable::free_slot_locked(uint32_t slot) {
  mu_.assert_held();
  Entry& e = entries_[slot];
  index_.erase(e.stag);
  // Remember the STag for a while so a stale token held by a peer never names a later region.
  if (retired_ring_.size() < kRetiredKept) {
    retired_ring_.push_back(e.stag);
  } else {
    retired_.erase(retired_ring_[retired_next_]);
    retired_ring_[retired_next_] = e.stag;
    retired_next_ = (retired_next_ + 1) % kRetiredKept;
  }
  retired_.insert(e.stag, 0);
  e = Entry{};
  free_.push_back(slot);
  --live_;
}

uint32_t StagTable::slot_of_locked(uint32_t stag) const {
  mu_.assert_held();
  return index_.find(stag);
}

StagTable::Entry* StagTable::live_entry_locked(uint32_t stag, Kind kind) {
  mu_.assert_held();
  const uint32_t slot = slot_of_locked(stag);
  if (slot == kNoSlot) return nullptr;
  Entry& e = entries_[slot];
  if (e.kind != kind || e.dead) return nullptr;
  return &e;
}

void StagTable::publish_locked(const Entry& e) {
  mu_.assert_held();
  if (!(e.rights & access::kRemoteWrite)) return;
  const SharedBuffer* buf = (e.kind == Kind::kWindow ? entries_[e.region].buf : e.buf).get();
  for (PlaceSink* s : sinks_) s->publish(e.stag, e.base, e.length, e.rights, buf);
}

void StagTable::unpublish_locked(uint32_t stag) {
  mu_.assert_held();
  for (PlaceSink* s : sinks_) s->unpublish(stag);
}

void StagTable::add_place_sink(PlaceSink* s) {
  std::lock_guard<ndkit::CheckedMutex> lock(mu_);
  for (PlaceSink* t : sinks_) {
    if (t == s) return;
  }
  sinks_.push_back(s);
  for (const Entry& e : entries_) {
    if (e.kind == Kind::kFree || e.dead || !(e.rights & access::kRemoteWrite)) continue;
    if (e.kind == Kind::kWindow && entries_[e.region].dead) continue;
    s->publish(e.stag, e.base, e.length, e.rights, (e.kind == Kind::kWindow ? entries_[e.region].buf : e.buf).get());
  }
  s->enable();
}

void StagTable::remove_place_sink(PlaceSink* s) {
  std::lock_guard<ndkit::CheckedMutex> lock(mu_);
  for (size_t i = 0; i < sinks_.size(); ++i) {
    if (sinks_[i] != s) continue;
    s->disable();
    sinks_.erase(sinks_.begin() + static_cast<ptrdiff_t>(i));
    return;
  }
}

uint32_t StagTable::add_region(uint64_t base, uint64_t length, uint32_t rights) {
  // Looked up before the table's lock (the registry has its own); a region only ever names the buffer it lay in
  // when registered.
  std::shared_ptr<const SharedBuffer> buf = find_shared_buffer(base, length);
  std::lock_guard<ndkit::CheckedMutex> lock(mu_);
  const uint32_t slot = allocate_locked(Kind::kRegion);
  if (slot == kNoSlot) return 0;
  Entry& e = entries_[slot];
  e.base = base;
  e.length = length;
  e.rights = rights;
  e.buf = std::move(buf);
  publish_locked(e);
  return e.stag;
}

HRESULT StagTable::remove_region(uint32_t stag, std::function<void()> on_released) {
  std::lock_guard<ndkit::CheckedMutex> lock(mu_);
  Entry* e = live_entry_locked(stag, Kind::kRegion);
  if (e == nullptr) return ND_INVALID_DEVICE_STATE;
  if (e->windows > 0) return ND_DEVICE_BUSY;
  unpublish_locked(stag);  // no placement by a same-host peer lands after this
  if (e->pins == 0) {
    free_slot_locked(slot_of_locked(stag));
    return ND_SUCCESS;
  }
  e->dead = true;
  e->on_released = std::move(on_released);
  return ND_PENDING;
}

void StagTable::force_remove_region(uint32_t stag) {
  std::lock_guard<ndkit::CheckedMutex> lock(mu_);
  const uint32_t slot = slot_of_locked(stag);
  if (slot == kNoSlot) return;
  Entry& e = entries_[slot];
  if (e.kind != Kind::kRegion) return;
  // Windows over the region die with it.
  if (e.windows > 0) {
    for (uint32_t i = 0; i < entries_.size(); ++i) {
      Entry& w = entries_[i];
      if (w.kind == Kind::kWindow && !w.dead && w.region == slot) {
        unpublish_locked(w.stag);
        free_slot_locked(i);
      }
    }
    e.windows = 0;
  }
  if (!e.dead) unpublish_locked(e.stag);
  if (e.pins == 0) {
    free_slot_locked(slot);
  } else {
    e.dead = true;
    e.on_released = nullptr;
  }
}

HRESULT StagTable::bind_window(uint32_t region_stag, uint64_t base, uint64_t length, uint32_t rights,
                               uint32_t* out_stag) {
  std::lock_guard<ndkit::CheckedMutex> lock(mu_);
  Entry* r = live_entry_locked(region_stag, Kind::kRegion);
  if (r == nullptr) return ND_INVALID_PARAMETER;
  if (!range_inside(r->base, r->length, base, length)) return ND_ACCESS_VIOLATION;
  if ((rights & access::kRemoteWrite) && !(r->rights & access::kLocalWrite)) return ND_ACCESS_VIOLATION;
  const uint32_t region_slot = slot_of_locked(region_stag);
  const uint32_t slot = allocate_locked(Kind::kWindow);  // may move entries_: r is not used below
  if (slot == kNoSlot) return ND_INSUFFICIENT_RESOURCES;
  Entry& w = entries_[slot];
  w.base = base;
  w.length = length;
  w.rights = rights & (access::kRemoteRead | access::kRemoteWrite);
  w.region = region_slot;
  entries_[region_slot].windows++;
  publish_locked(w);
  *out_stag = w.stag;
  return ND_SUCCESS;
}

bool StagTable::invalidate_window(uint32_t stag) {
  std::lock_guard<ndkit::CheckedMutex> lock(mu_);
  Entry* w = live_entry_locked(stag, Kind::kWindow);
  if (w == nullptr) return false;
  Entry& r = entries_[w->region];
  if (r.windows > 0) r.windows--;
  unpublish_locked(stag);
  free_slot_locked(slot_of_locked(stag));
  return true;
}

bool StagTable::window_live(uint32_t stag) const {
  std::lock_guard<ndkit::CheckedMutex> lock(mu_);
  return const_cast<StagTable*>(this)->live_entry_locked(stag, Kind::kWindow) != nullptr;
}

StagCheck StagTable::pin_local(uint32_t stag, uint64_t addr, uint64_t length, uint32_t rights) {
  std::lock_guard<ndkit::CheckedMutex> lock(mu_);
  Entry* e = live_entry_locked(stag, Kind::kRegion);
  if (e == nullptr) return StagCheck::kInvalid;
  if ((e->rights & rights) != rights) return StagCheck::kAccess;
  if (!range_inside(e->base, e->length, addr, length)) return StagCheck::kBounds;
  e->pins++;
  return StagCheck::kOk;
}

StagCheck StagTable::pin_remote(uint32_t stag, uint64_t to, uint64_t length, uint32_t rights, uint32_t* pinned) {
  std::lock_guard<ndkit::CheckedMutex> lock(mu_);
  const uint32_t slot = slot_of_locked(stag);
  if (slot == kNoSlot) return StagCheck::kInvalid;
  Entry& e = entries_[slot];
  if (e.kind == Kind::kFree || e.dead) return StagCheck::kInvalid;
  if ((e.rights & rights) != rights) return StagCheck::kAccess;
  if (!range_inside(e.base, e.length, to, length)) return StagCheck::kBounds;
  Entry& region = e.kind == Kind::kWindow ? entries_[e.region] : e;
  if (region.dead) return StagCheck::kInvalid;
  region.pins++;
  *pinned = region.stag;
  return StagCheck::kOk;
}

std::function<void()> StagTable::unpin_locked(uint32_t stag) {
  mu_.assert_held();
  const uint32_t slot = slot_of_locked(stag);
  if (slot == kNoSlot) return nullptr;
  Entry& e = entries_[slot];
  if (e.kind != Kind::kRegion || e.pins == 0) return nullptr;
  if (--e.pins == 0 && e.dead) {
    std::function<void()> cb = std::move(e.on_released);
    free_slot_locked(slot);
    return cb;
  }
  return nullptr;
}

void StagTable::unpin(uint32_t stag) {
  std::function<void()> cb;
  {
    std::lock_guard<ndkit::CheckedMutex> lock(mu_);
    cb = unpin_locked(stag);
  }
  if (cb) cb();
}

void StagTable::unpin_many(const uint32_t* stags, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    if (stags[i] != 0) unpin(stags[i]);
  }
}

size_t StagTable::live() const {
  std::lock_guard<ndkit::CheckedMutex> lock(mu_);
  return live_;
}

}  // namespace netdirect::soft

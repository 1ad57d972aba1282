#include "soft/memory/stag_table.h"

#include <array>

namespace netdirect::soft {

namespace {
std::mt19937 seeded_rng() {
  std::random_device rd;  // getrandom()/urandom on Linux, RtlGenRandom on Windows
  std::array<uint32_t, 8> seed{};
  for (auto& s : seed) s = rd();
  std::seed_seq seq(seed.begin(), seed.end());
  return std::mt19937(seq);
}
}  // namespace

StagTable::StagTable() : entries_(1), rng_(seeded_rng()) {}

uint32_t StagTable::allocate(Kind kind) {
  uint32_t index;
  if (!free_.empty()) {
    index = free_.back();
    free_.pop_back();
  } else {
    if (entries_.size() > kMaxEntries) return 0;
    index = static_cast<uint32_t>(entries_.size());
    entries_.emplace_back();
  }
  Entry& e = entries_[index];
  const uint32_t old_key = e.stag & kKeyMask;
  uint32_t key;
  do {
    key = static_cast<uint32_t>(rng_()) & kKeyMask;
  } while (key == old_key);  // a reused slot never gives back a token that was valid before
  e = Entry{};
  e.kind = kind;
  e.stag = (index << kKeyBits) | key;
  ++live_;
  return index;
}

void StagTable::free_slot(uint32_t index) {
  Entry& e = entries_[index];
  const uint32_t keep = e.stag;  // remembered so the next key differs
  e = Entry{};
  e.stag = keep;
  free_.push_back(index);
  --live_;
}

StagTable::Entry* StagTable::live_entry(uint32_t stag, Kind kind) {
  const uint32_t index = index_of(stag);
  if (index == 0 || index >= entries_.size()) return nullptr;
  Entry& e = entries_[index];
  if (e.kind != kind || e.dead || e.stag != stag) return nullptr;
  return &e;
}

uint32_t StagTable::add_region(uint64_t base, uint64_t length, uint32_t rights) {
  std::lock_guard<ndkit::CheckedMutex> lock(mu_);
  const uint32_t index = allocate(Kind::kRegion);
  if (index == 0) return 0;
  Entry& e = entries_[index];
  e.base = base;
  e.length = length;
  e.rights = rights;
  return e.stag;
}

HRESULT StagTable::remove_region(uint32_t stag, std::function<void()> on_released) {
  std::lock_guard<ndkit::CheckedMutex> lock(mu_);
  Entry* e = live_entry(stag, Kind::kRegion);
  if (e == nullptr) return ND_INVALID_DEVICE_STATE;
  if (e->windows > 0) return ND_DEVICE_BUSY;
  if (e->pins == 0) {
    free_slot(index_of(stag));
    return ND_SUCCESS;
  }
  e->dead = true;
  e->on_released = std::move(on_released);
  return ND_PENDING;
}

void StagTable::force_remove_region(uint32_t stag) {
  std::lock_guard<ndkit::CheckedMutex> lock(mu_);
  const uint32_t index = index_of(stag);
  if (index == 0 || index >= entries_.size()) return;
  Entry& e = entries_[index];
  if (e.kind != Kind::kRegion || e.stag != stag) return;
  // Windows over the region die with it.
  if (e.windows > 0) {
    for (uint32_t i = 1; i < entries_.size(); ++i) {
      Entry& w = entries_[i];
      if (w.kind == Kind::kWindow && !w.dead && w.region == index) free_slot(i);
    }
    e.windows = 0;
  }
  if (e.pins == 0) {
    free_slot(index);
  } else {
    e.dead = true;
    e.on_released = nullptr;
  }
}

HRESULT StagTable::bind_window(uint32_t region_stag, uint64_t base, uint64_t length, uint32_t rights,
                               uint32_t* out_stag) {
  std::lock_guard<ndkit::CheckedMutex> lock(mu_);
  Entry* r = live_entry(region_stag, Kind::kRegion);
  if (r == nullptr) return ND_INVALID_PARAMETER;
  if (!range_inside(r->base, r->length, base, length)) return ND_ACCESS_VIOLATION;
  if ((rights & access::kRemoteWrite) && !(r->rights & access::kLocalWrite)) return ND_ACCESS_VIOLATION;
  const uint32_t region_index = index_of(region_stag);
  const uint32_t index = allocate(Kind::kWindow);
  if (index == 0) return ND_INSUFFICIENT_RESOURCES;
  Entry& w = entries_[index];
  w.base = base;
  w.length = length;
  w.rights = rights & (access::kRemoteRead | access::kRemoteWrite);
  w.region = region_index;
  entries_[region_index].windows++;
  *out_stag = w.stag;
  return ND_SUCCESS;
}

bool StagTable::invalidate_window(uint32_t stag) {
  std::lock_guard<ndkit::CheckedMutex> lock(mu_);
  Entry* w = live_entry(stag, Kind::kWindow);
  if (w == nullptr) return false;
  Entry& r = entries_[w->region];
  if (r.windows > 0) r.windows--;
  free_slot(index_of(stag));
  return true;
}

bool StagTable::window_live(uint32_t stag) const {
  std::lock_guard<ndkit::CheckedMutex> lock(mu_);
  return const_cast<StagTable*>(this)->live_entry(stag, Kind::kWindow) != nullptr;
}

StagCheck StagTable::pin_local(uint32_t stag, uint64_t addr, uint64_t length, uint32_t rights) {
  std::lock_guard<ndkit::CheckedMutex> lock(mu_);
  Entry* e = live_entry(stag, Kind::kRegion);
  if (e == nullptr) return StagCheck::kInvalid;
  if ((e->rights & rights) != rights) return StagCheck::kAccess;
  if (!range_inside(e->base, e->length, addr, length)) return StagCheck::kBounds;
  e->pins++;
  return StagCheck::kOk;
}

StagCheck StagTable::pin_remote(uint32_t stag, uint64_t to, uint64_t length, uint32_t rights, uint32_t* pinned) {
  std::lock_guard<ndkit::CheckedMutex> lock(mu_);
  const uint32_t index = index_of(stag);
  if (index == 0 || index >= entries_.size()) return StagCheck::kInvalid;
  Entry& e = entries_[index];
  if (e.kind == Kind::kFree || e.dead || e.stag != stag) return StagCheck::kInvalid;
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
  const uint32_t index = index_of(stag);
  if (index == 0 || index >= entries_.size()) return nullptr;
  Entry& e = entries_[index];
  if (e.kind != Kind::kRegion || e.stag != stag || e.pins == 0) return nullptr;
  if (--e.pins == 0 && e.dead) {
    std::function<void()> cb = std::move(e.on_released);
    free_slot(index);
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

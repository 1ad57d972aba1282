// The adapter's STag space: every memory region and bound memory window of one adapter has an entry, and
// every local SGE and every remote access (inbound Write, Read Request source) is checked against it.
//
// STags (32 bits, host order; big-endian on the wire) carry no structure: each is 32 bits drawn from the
// operating system's cryptographic random source (SecureRandom), redrawn while it is reserved (0, 1 and
// 0xFFFFFFFF: RTR / zero-length operations on the wire), in use, or among the last kRetiredKept STags given
// back (a stale token does not name a new region). A hash index (StagIndex) maps an STag to its entry. A peer
// that guesses therefore hits one of L live entries with probability L / (2^32 - 3) per guess, whatever it has
// seen before; docs/security.md has the figures.
//
// Pins: a pin keeps an entry's memory "in use" (placement or transmission in progress, or a posted
// request referencing it). Removing a region marks it dead at once (no new lookups succeed) but the entry
// and the Deregister completion wait until the last pin is released.
//
// Locking: one mutex (mu_) guards everything; see docs/threads.md for its place in the lock order.
#ifndef NETDIRECT_SOFT_STAG_TABLE_H_
#define NETDIRECT_SOFT_STAG_TABLE_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <vector>

#include "ndkit/checked_mutex.h"

#include "nd/nd2.h"

#include "soft/memory/shared_buffer.h"

namespace netdirect::soft {

// Access rights of an entry (internal bits; ND_MR_FLAG_* / ND_OP_FLAG_ALLOW_* map onto them).
namespace access {
constexpr uint32_t kLocalWrite = 0x1;   // local placement (Receive target, Read sink)
constexpr uint32_t kRemoteRead = 0x2;   // Read Request source
constexpr uint32_t kRemoteWrite = 0x4;  // inbound RDMA Write target
}  // namespace access

// Outcome of a lookup, mapped by callers onto ND statuses or Terminate codes.
enum class StagCheck : uint8_t {
  kOk,
  kInvalid,      // unknown STag, dead entry, wrong kind
  kAccess,       // entry lacks a required right
  kBounds,       // range outside the entry (incl. 64-bit wrap-around)
};

// A table published to a same-host peer that places inbound RDMA Writes itself (shm/place.h PlaceTable, docs/shm.md
// "Placement by the initiator"). The STag table calls it under its lock: publish for each live region / window
// with the remote-write right (when added, and for all of them when the sink is added), unpublish before such an
// entry stops accepting remote access (returning only when no placement into it can still land), enable once
// everything is published, disable when the sink is removed (returning only when no placement can still land).
// `buf`: the memory a same-host peer can map that holds the entry (memory/shared_buffer.h), nullptr for any other.
class PlaceSink {
 public:
  virtual void publish(uint32_t stag, uint64_t base, uint64_t length, uint32_t rights, const SharedBuffer* buf) = 0;
  virtual void unpublish(uint32_t stag) = 0;
  virtual void enable() = 0;
  virtual void disable() = 0;

 protected:
  ~PlaceSink() = default;
};

// 32-bit values from the OS CSPRNG (getrandom(2) on Linux, std::random_device elsewhere: RtlGenRandom on
// Windows), fetched in batches. Not thread-safe: its owner's lock guards it.
class SecureRandom {
 public:
  uint32_t next();

 private:
  void refill();
  uint32_t buf_[64] = {};
  size_t left_ = 0;
};

// Open-addressing hash map from a non-zero 32-bit key to a 32-bit value, linear probing with backward-shift
// deletion (no tombstones), at most half full. Keys are uniformly random STags, so their low bits are the hash.
class StagIndex {
 public:
  static constexpr uint32_t kNone = 0xFFFFFFFFu;
  uint32_t find(uint32_t key) const {
    if (key == 0 || slots_.empty()) return kNone;  // 0 marks an empty slot: never a member
    for (size_t i = key & mask_;; i = (i + 1) & mask_) {
      if (slots_[i].key == key) return slots_[i].value;
      if (slots_[i].key == 0) return kNone;
    }
  }
  bool contains(uint32_t key) const { return find(key) != kNone; }
  void insert(uint32_t key, uint32_t value);  // key not present, non-zero
  void erase(uint32_t key);                   // no-op if absent
  size_t size() const { return size_; }

 private:
  struct Slot {
    uint32_t key;  // 0 = empty
    uint32_t value;
  };
  void grow();
  std::vector<Slot> slots_;  // key and value side by side: a lookup touches one cache line
  size_t mask_ = 0;
  size_t size_ = 0;
};

class StagTable {
 public:
  static constexpr uint32_t kMaxEntries = (1u << 20) - 1;  // live regions + windows + dead-but-pinned (as before)
  static constexpr size_t kRetiredKept = 4096;         // recently freed STags never handed out again

  // True for values that never name memory (never returned by add_region / bind_window).
  static constexpr bool reserved(uint32_t stag) { return stag == 0 || stag == 1 || stag == 0xFFFFFFFFu; }

  StagTable() = default;
  StagTable(const StagTable&) = delete;
  StagTable& operator=(const StagTable&) = delete;

  // Adds a region over [base, base + length) with `rights` (access::*). Returns its STag, 0 if full. A region that
  // lies in memory a same-host peer can map (find_shared_buffer) holds that buffer and publishes it with its entry.
  uint32_t add_region(uint64_t base, uint64_t length, uint32_t rights);

  // Removes a region. ND_DEVICE_BUSY if windows are bound to it (nothing changes); ND_SUCCESS if it was
  // unpinned (entry freed); ND_PENDING if pinned: `on_released` runs (without table locks, on the thread
  // releasing the last pin) once the last pin is gone. ND_INVALID_DEVICE_STATE if stag is not a live region.
  HRESULT remove_region(uint32_t stag, std::function<void()> on_released);

  // Removes a region regardless of windows (object destruction): windows over it die with it.
  void force_remove_region(uint32_t stag);

  // Binds a window over [base, base + length) inside region `region_stag` with `rights` (remote bits).
  // ND_ACCESS_VIOLATION if the range is outside the region or ALLOW_WRITE without the region's LOCAL_WRITE;
  // ND_INVALID_PARAMETER if the region is not live; ND_INSUFFICIENT_RESOURCES if full.
  HRESULT bind_window(uint32_t region_stag, uint64_t base, uint64_t length, uint32_t rights, uint32_t* out_stag);

  // Invalidates a window STag (local Invalidate, or an inbound Send with Invalidate when remote = true).
  // False if stag is not a live window.
  bool invalidate_window(uint32_t stag);
  // True if stag names a live window.
  bool window_live(uint32_t stag) const;

  // Checks a local SGE (regions only) and pins it on success. `rights` = access::kLocalWrite for placement.
  StagCheck pin_local(uint32_t stag, uint64_t addr, uint64_t length, uint32_t rights);
  // Checks a remote access (regions or windows) and pins the region behind it on success; *pinned gets
  // the STag to unpin (the region's).
  StagCheck pin_remote(uint32_t stag, uint64_t to, uint64_t length, uint32_t rights, uint32_t* pinned);
  // Pins several local SGE STags at once (already validated) / releases pins. Unpinning never checks
  // liveness (the entry may be dead); a dead entry whose last pin goes away is freed and its callback runs.
  void unpin(uint32_t stag);
  void unpin_many(const uint32_t* stags, size_t n);

  // Live entries (regions + windows), for tests and leak checks.
  size_t live() const;

  // Same-host placement (PlaceSink): add publishes every live remote-writable entry, then enables the sink;
  // remove disables it (waiting out a placement in progress). Removing a sink not added is a no-op.
  void add_place_sink(PlaceSink* s);
  void remove_place_sink(PlaceSink* s);

 private:
  enum class Kind : uint8_t { kFree, kRegion, kWindow };
  struct Entry {
    Kind kind = Kind::kFree;
    bool dead = false;          // region removed, waiting for pins
    uint32_t stag = 0;
    uint64_t base = 0;
    uint64_t length = 0;
    uint32_t rights = 0;
    uint32_t pins = 0;
    uint32_t windows = 0;       // region: bound windows
    uint32_t region = 0;        // window: slot of its region
    std::function<void()> on_released;
    std::shared_ptr<const SharedBuffer> buf;  // region: the mappable memory it lies in, if any (windows: their region's)
  };
  static constexpr uint32_t kNoSlot = StagIndex::kNone;

  uint32_t slot_of_locked(uint32_t stag) const;          // any entry holding stag, kNoSlot if none
  Entry* live_entry_locked(uint32_t stag, Kind kind);    // a live entry of `kind`, nullptr if none
  uint32_t allocate_locked(Kind kind);                   // a slot with a fresh STag; kNoSlot if full
  uint32_t draw_stag_locked();
  void free_slot_locked(uint32_t slot);
  void publish_locked(const Entry& e);
  void unpublish_locked(uint32_t stag);
  std::function<void()> unpin_locked(uint32_t stag);

  mutable ndkit::CheckedMutex mu_;
  std::vector<Entry> entries_;          // slots; a slot number never leaves this class
  std::vector<uint32_t> free_;          // free slots
  StagIndex index_;                     // STag → slot, for every non-free slot
  StagIndex retired_;                   // the last kRetiredKept freed STags (values unused)
  std::vector<uint32_t> retired_ring_;  // the same, oldest first from retired_next_
  size_t retired_next_ = 0;
  SecureRandom random_;
  size_t live_ = 0;
  std::vector<PlaceSink*> sinks_;       // same-host peers placing Writes themselves
};

// True if [addr, addr + length) lies inside [base, base + size), without overflow.
constexpr bool range_inside(uint64_t base, uint64_t size, uint64_t addr, uint64_t length) {
  return addr >= base && length <= size && addr - base <= size - length;
}

}  // namespace netdirect::soft

#endif  // NETDIRECT_SOFT_STAG_TABLE_H_

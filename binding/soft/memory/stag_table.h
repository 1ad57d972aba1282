// The adapter's STag space: every memory region and bound memory window of one adapter has an entry, and
// every local SGE and every remote access (inbound Write, Read Request source) is checked against it.
//
// STag layout (32 bits, host order; big-endian on the wire): table index in the high 20 bits, a random
// key in the low 12 bits. The key comes from a CSPRNG-seeded generator and changes every time a slot is
// reused, so a token cannot be guessed and a stale token (after deregister/invalidate) does not match.
// Index 0 is never used, so STags 0 and 1 (RTR / zero-length operations on the wire) never name memory.
//
// Pins: a pin keeps an entry's memory "in use" (placement or transmission in progress, or a posted
// request referencing it). Removing a region marks it dead at once (no new lookups succeed) but the slot
// and the Deregister completion wait until the last pin is released.
#ifndef NETDIRECT_SOFT_STAG_TABLE_H_
#define NETDIRECT_SOFT_STAG_TABLE_H_

#include <cstdint>
#include <functional>
#include <mutex>
#include <random>
#include <vector>

#include "ndkit/checked_mutex.h"

#include "nd/nd2.h"

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
  kInvalid,      // unknown index, key mismatch, dead entry, wrong kind
  kAccess,       // entry lacks a required right
  kBounds,       // range outside the entry (incl. 64-bit wrap-around)
};

class StagTable {
 public:
  static constexpr uint32_t kKeyBits = 12;
  static constexpr uint32_t kKeyMask = (1u << kKeyBits) - 1;
  static constexpr uint32_t kMaxEntries = (1u << (32 - kKeyBits)) - 1;

  StagTable();
  StagTable(const StagTable&) = delete;
  StagTable& operator=(const StagTable&) = delete;

  // Adds a region over [base, base + length) with `rights` (access::*). Returns its STag, 0 if full.
  uint32_t add_region(uint64_t base, uint64_t length, uint32_t rights);

  // Removes a region. ND_DEVICE_BUSY if windows are bound to it (nothing changes); ND_SUCCESS if it was
  // unpinned (slot freed); ND_PENDING if pinned: `on_released` runs (without table locks, on the thread
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
  // Pins several local SGE STags at once (already validated) / releases pins. Unpinning never checks the
  // key (the entry may be dead); a dead entry whose last pin goes away is freed and its callback runs.
  void unpin(uint32_t stag);
  void unpin_many(const uint32_t* stags, size_t n);

  // Live entries (regions + windows), for tests and leak checks.
  size_t live() const;

 private:
  enum class Kind : uint8_t { kFree, kRegion, kWindow };
  struct Entry {
    Kind kind = Kind::kFree;
    bool dead = false;          // region removed, waiting for pins
    uint32_t stag = 0;          // current STag (index + key)
    uint64_t base = 0;
    uint64_t length = 0;
    uint32_t rights = 0;
    uint32_t pins = 0;
    uint32_t windows = 0;       // region: bound windows
    uint32_t region = 0;        // window: index of its region
    std::function<void()> on_released;
  };

  static uint32_t index_of(uint32_t stag) { return stag >> kKeyBits; }
  Entry* live_entry(uint32_t stag, Kind kind);  // mu_ held
  uint32_t allocate(Kind kind);                  // mu_ held; returns the index (0 = full)
  void free_slot(uint32_t index);                // mu_ held
  std::function<void()> unpin_locked(uint32_t stag);

  mutable ndkit::CheckedMutex mu_;
  std::vector<Entry> entries_;       // [0] unused
  std::vector<uint32_t> free_;       // free indices
  std::mt19937 rng_;                 // seeded from std::random_device (CSPRNG-backed on Linux)
  size_t live_ = 0;
};

// True if [addr, addr + length) lies inside [base, base + size), without overflow.
constexpr bool range_inside(uint64_t base, uint64_t size, uint64_t addr, uint64_t length) {
  return addr >= base && length <= size && addr - base <= size - length;
}

}  // namespace netdirect::soft

#endif  // NETDIRECT_SOFT_STAG_TABLE_H_

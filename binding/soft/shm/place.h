// Placement by the initiator on a same-host connection (docs/shm.md "Placement by the initiator"): an RDMA Write
// whose bytes the initiator's provider copies straight into the target's registered memory with
// process_vm_writev (CMA), so that they land with no CPU of the target, as an RNIC places by DMA.
//
//  * PlaceArea: one per direction, in the link's shared mapping (shm/link.cc). The target of that direction (the
//    consumer of its ring) publishes there: the address of its probe word, whether its table may be used
//    (`enabled`), how far it has processed its ring (`processed`), and the table of what an inbound Write may
//    name. The initiator (the producer of the ring) writes only `proof` and `placing`.
//  * PlaceTable: the target's side. It publishes an entry per memory region / window with the remote-write right
//    (memory/stag_table.h PlaceSink), and takes it back with a Dekker pair against the initiator's `placing`
//    word, so that no placement lands after a Deregister / Invalidate / disconnect returned. It never reads the
//    table back: what it decides comes from its own private copy (occupant_, gen_).
//  * Placer: the initiator's side. It probes once whether the kernel lets it write into the target (it reads the
//    target's secret probe word with process_vm_readv and shows it in `proof`: a target publishes its table only
//    to a peer that has shown this, so a peer without CMA rights never learns its STags), then, per Write, runs
//    the target's checks against the published entry (STag, remote-write right, bounds without wrap) and places.
//    Anything it cannot prove (no entry, a check that fails, the ring not yet processed, the target's table
//    off) is left to the ring, where the target's own checks decide as over TCP.
//  * Mapped regions: a region that lies in memory the peer can map (memory/shared_buffer.h: adapter.allocateMemory)
//    is published with the memfd's id and the region's offset in it, and the target hands the memfd itself over
//    the side channel (SCM_RIGHTS, RegionMsg below) — only after the proof, as the table. The initiator maps each
//    memfd once and places Writes into such a region with a store (memcpy, the last byte released after the rest)
//    instead of process_vm_writev: no system call per Write. Everything else still takes process_vm_writev.
// Everything read from the shared mapping is the peer's to lie about. The target trusts nothing in it but
// compares `proof` with its secret and waits (bounded) on `placing`. The initiator trusts the table only to
// the extent that it writes only into the target's own address space (what CMA already allows it) or into a memfd
// the target handed it, inside the bounds of its own mapping of it: a lying target can make its own memory change,
// nothing else.
#ifndef NETDIRECT_SOFT_SHM_PLACE_H_
#define NETDIRECT_SOFT_SHM_PLACE_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <unordered_map>
#include <vector>

#ifndef _WIN32
#include <sys/uio.h>
#else
#include "soft/net/socket.h"  // iovec
#endif

#include "soft/memory/stag_table.h"

namespace netdirect::soft::shm {

constexpr uint32_t kPlaceSlots = 128;  // entries per table (a power of two)
// An STag's entry is in one of the kPlaceProbe slots from its home slot (stag % kPlaceSlots) on; one that finds
// them all taken is not published (its Writes take the ring). `placing` names the home slot.
constexpr uint32_t kPlaceProbe = 8;
constexpr uint64_t kPlaceMaxBytes = 1 << 20;  // larger Writes go through the ring
constexpr uint32_t kPlaceBurst = 4;           // Writes in a row with no word from the target that may be placed
// How long a target waits for a placement in progress before it gives up on the link (PlaceTable::wait_placing).
constexpr uint32_t kPlaceWaitMs = 1000;
// How long a liveness check of the target (its pidfd) stays good: a pid can only name another process after the
// kernel allocated every other pid (pids are handed out cyclically; the default pid_max is 32,768 or more), which no
// machine does in a millisecond.
constexpr uint64_t kPlaceAliveNs = 1000000;
// Mapped regions: memfds an initiator keeps mapped per link (more are not mapped: their Writes take
// process_vm_writev), and region messages a target lets wait unread on the side channel (each holds a descriptor,
// so the memory behind it; more are not sent: those regions take process_vm_writev).
constexpr size_t kPlaceMaxMappings = 256;
constexpr uint64_t kPlaceMaxUnread = 64;

// One published entry, read with a sequence lock: gen odd = being written or dead; even and non-zero = live.
struct PlaceEntry {
  std::atomic<uint32_t> gen;
  std::atomic<uint32_t> stag;
  std::atomic<uint32_t> rights;
  std::atomic<uint32_t> reserved;
  std::atomic<uint64_t> base;
  std::atomic<uint64_t> length;
  std::atomic<uint64_t> map_id;      // the memfd the region lies in (RegionMsg::id), 0 = none: process_vm_writev
  std::atomic<uint64_t> map_offset;  // where `base` is in that memfd
};

// On the side channel, target → initiator, after the handshake (layout version 3): a memfd the initiator may map
// (kRegion, the descriptor attached), or one it may unmap (kForget, none attached). The target sends a kRegion
// only once the peer's proof matched, and before it publishes an entry naming the id.
struct RegionMsg {
  char magic[8];  // "NDSHMv3"
  uint32_t kind;
  uint32_t reserved;
  uint64_t id;
  uint64_t size;  // kRegion: the memfd's size (the initiator checks it against fstat)
};
constexpr uint32_t kRegionMsg = 3;
constexpr uint32_t kForgetMsg = 4;

struct PlaceArea {
  alignas(64) std::atomic<uint64_t> probe_addr;  // target: where its probe word is (0 = not yet)
  std::atomic<uint32_t> enabled;                 // target: 1 while the table may be used
  std::atomic<uint64_t> regions_sent;            // target: RegionMsgs sent on the side channel so far
  alignas(64) std::atomic<uint64_t> processed;   // target: ring bytes processed, at an FPDU boundary, no error
  alignas(64) std::atomic<uint64_t> proof;       // initiator: the probe word as it read it
  alignas(64) std::atomic<uint64_t> placing;     // initiator: (attempt << 32) | (slot + 1) while it may place
  std::atomic<uint64_t> placed;                  // initiator: Writes it placed so far (a hint, Placer::worth_it)
  std::atomic<uint64_t> regions_taken;           // initiator: RegionMsgs it took from the side channel (a hint)
  alignas(64) PlaceEntry entries[kPlaceSlots];
};
constexpr size_t kPlaceAreaBytes = (sizeof(PlaceArea) + 4095) & ~size_t{4095};

// NETDIRECT_SHM_PLACE: "0" turns placement by the initiator off (both roles) for links set up afterwards.
bool place_enabled_from_env();

// The target's side of one link.
class PlaceTable final : public PlaceSink {
 public:
  PlaceTable() = default;
  // area: the direction whose ring this side consumes; secret: a random non-zero value in this side's memory;
  // side: the side-channel connection to the peer (RegionMsgs go there; -1: none, mapped regions are not offered).
  void init(PlaceArea* area, const uint64_t* secret, int side = -1);
  // The peer has shown it can write into this process (it read the secret): the table may be published.
  bool proof_ok() const;
  // After the receive stream processed everything it took from the ring, without error.
  void set_processed(uint64_t consumed);
  // PlaceSink (called under the STag table's lock).
  void publish(uint32_t stag, uint64_t base, uint64_t length, uint32_t rights, const SharedBuffer* buf) override;
  void unpublish(uint32_t stag) override;
  void enable() override;
  void disable() override;

  // Writes the peer placed into us so far (its word: a hint only).
  uint64_t peer_placed() const { return a_ != nullptr ? a_->placed.load(std::memory_order_relaxed) : 0; }
  // Tests: did a wait for a placement give up (the peer held `placing` past kPlaceWaitMs)?
  bool gave_up() const { return gave_up_; }

 private:
  void wait_placing(uint32_t home_plus_1);  // 0: any placement
  uint64_t offer_buffer(const SharedBuffer& b);  // the id to publish (the peer has the memfd), 0 if not
  void release_buffer(uint64_t id);              // a slot naming it went away
  PlaceArea* a_ = nullptr;
  const uint64_t* secret_ = nullptr;
  int side_ = -1;
  uint32_t occupant_[kPlaceSlots] = {};  // our own copy: which STag each slot holds (0 = none)
  uint32_t gen_[kPlaceSlots] = {};
  uint64_t map_id_[kPlaceSlots] = {};                  // the memfd id each slot's entry names (0 = none)
  std::unordered_map<uint64_t, uint32_t> handed_;      // memfd ids the peer has: slots naming each
  uint64_t sent_ = 0;                                  // RegionMsgs sent
  bool on_ = false;
  bool gave_up_ = false;
  uint64_t processed_ = 0;  // what we published last
};

// The initiator's side of one link.
class Placer {
 public:
  enum class Probe : uint8_t { kUnknown, kOn, kOff };
  Placer() = default;
  ~Placer();
  Placer(const Placer&) = delete;
  Placer& operator=(const Placer&) = delete;
  // side: the side-channel connection to the target (its RegionMsgs come from there; -1: none).
  void init(PlaceArea* peer_area, int peer_pid, bool allowed, int side = -1);

  // Places len bytes gathered from local (n pieces) at `to` of the target's `stag`, if everything the target
  // checks holds for the published entry and the target has processed all `produced` bytes of its ring (so an
  // earlier message cannot land after this one). true: the bytes are in the target's memory.
  // by_syscall false: only by a store into a mapped region (anything else is left to the ring).
  bool place(uint32_t stag, uint64_t to, const iovec* local, int n, uint64_t len, uint64_t produced,
             bool by_syscall = true);
  // Could a Write be placed by a store (a memfd mapped, or one on its way)? Cheap: no shared line but the target's
  // message count.
  bool may_store() const {
    return !maps_.empty() || (side_ >= 0 && a_->regions_sent.load(std::memory_order_relaxed) != taken_);
  }
  // Is placing this Write worth its two system calls? (A store into a mapped region is always worth it: the caller
  // asks may_store() and places with by_syscall = false.) Yes while the target sleeps on its doorbell (the ring would
  // cost a doorbell and a wake-up), and while it does not keep looking at its ring: one that looked at most once
  // since our previous Write spins on placed memory, or does something else, and would find a Write in the ring
  // late. One that keeps polling its ring takes the Write from there sooner than we place it. But a stream (more
  // than kPlaceBurst Writes in a row with nothing from the target between them) goes through the ring: it carries
  // a small Write for a fraction of the system calls' cost (8 B Writes: ~4x the message rate), and one wake-up of
  // the target serves the whole stream. A burst (data, then a flag) is still placed whole, so a target that spins
  // on the flag, or is stopped, sees it land. A hint only: either way the Write lands where and when the target's
  // checks allow.
  // target_polls: the ring's RingControl::polls; target_sent: what the target put in its ring towards us and
  // placed into us so far (Link::peer_sent).
  bool worth_it(bool target_asleep, uint64_t target_polls, uint64_t target_sent) {
    const bool polling = target_polls - seen_polls_ >= 2;
    seen_polls_ = target_polls;
    if (target_sent != seen_sent_) unanswered_ = 0;
    seen_sent_ = target_sent;
    if (++unanswered_ > kPlaceBurst) return false;
    return target_asleep || !polling;
  }
  // Probes once (when the target published its probe word): kOn when the kernel lets us write into it.
  Probe probe();
  Probe state() const { return probe_; }
  uint64_t placed() const { return placed_; }
  // Writes placed with a store into a mapped region (the rest of placed() took process_vm_writev).
  uint64_t placed_mapped() const { return placed_mapped_; }
  // The target's memfds mapped now (tests).
  size_t mappings() const { return maps_.size(); }
  // Unmaps them all (the target's table went off: disconnect, or the link's end).
  void drop_mappings();

 private:
  struct Mapping {
    uint64_t id;
    uint8_t* at;
    uint64_t size;
  };
  void take_region_msgs();  // reads what the target sent on the side channel
  const Mapping* mapping(uint64_t id) const;
  int side_ = -1;
  std::vector<Mapping> maps_;
  uint64_t taken_ = 0;
  uint64_t placed_mapped_ = 0;
  PlaceArea* a_ = nullptr;
  int pid_ = 0;
  int pidfd_ = -1;
  Probe probe_ = Probe::kOff;
  uint32_t attempt_ = 0;
  uint64_t placed_ = 0;
  uint64_t alive_ns_ = 0;    // steady clock of the last liveness check that found the target running
  uint64_t seen_polls_ = 0;  // the target's RingControl::polls at our previous Write
  uint64_t seen_sent_ = 0;   // what the target had sent us at our previous Write
  uint32_t unanswered_ = 0;  // Writes since the target last sent us something
};

}  // namespace netdirect::soft::shm

#endif  // NETDIRECT_SOFT_SHM_PLACE_H_

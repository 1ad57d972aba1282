// A byte ring in memory shared by two processes: one direction of a same-host connection (docs/shm.md). It carries
// exactly the byte stream the connection would carry over TCP (MPA FPDUs, RFC 5044 §6, without CRC), so every check
// the receiving queue pair runs on an FPDU (binding/soft/qp/rx_stream.cc) still decides what lands.
//
// The memory is writable by the peer, which may be hostile (a process of the same user scribbling over it): nothing
// read from it is trusted. Each side keeps its own index privately (the producer its head, the consumer its tail) and
// only publishes it; the other side's index is read, checked against the ring's size like a wire header, and a value
// that cannot be right fails the ring (corrupt(): the connection ends, docs/shm.md "Threat model"). Data offsets are
// always the private index masked by the size, so no value in shared memory can move an access outside the ring.
//
// Waking (a Dekker pair, each side: publish, full fence, look at the other's flag):
//  * consumer about to sleep: consumer_armed = 1, fence, look at head again; producer after publishing head: fence,
//    exchange(consumer_armed, 0) == 1 → kick the consumer's doorbell.
//  * producer finding the ring full: producer_waiting = 1, fence, look at tail again; consumer after publishing
//    tail: fence, exchange(producer_waiting, 0) == 1 → kick the producer's doorbell.
// A side that never arms (a thread spinning on the ring, completion mode 'manual') costs its peer no system call.
// Testable on plain memory: test/fuzz/shm_ring_fuzz.cc drives two rings against a peer that scribbles on them, and
// test/native/hostile_test.cc does so on a live connection's rings (its "shm:" cases).
#ifndef NETDIRECT_SOFT_SHM_RING_H_
#define NETDIRECT_SOFT_SHM_RING_H_

#include <atomic>
#include <cstddef>
#include <cstdint>

#ifndef _WIN32
#include <sys/uio.h>
#else
#include "soft/net/socket.h"  // iovec
#endif

namespace netdirect::soft::shm {

// The control block of one direction, in shared memory. Indices count bytes since the connection started (64 bits:
// they never wrap in practice); head - tail is the number of bytes in the ring.
struct RingControl {
  alignas(64) std::atomic<uint64_t> head;            // written by the producer
  alignas(64) std::atomic<uint64_t> tail;            // written by the consumer
  // Written by the consumer each time it looks at the ring (a hint for placement by the initiator, shm/place.h).
  // Beside the tail, which the producer reads at every write anyway: reading it costs the producer no extra
  // cache line transfer, and the consumer's stores while it waits leave the line its own for its next tail.
  std::atomic<uint64_t> polls;
  alignas(64) std::atomic<uint32_t> consumer_armed;  // consumer sleeps: kick its doorbell after publishing head
  alignas(64) std::atomic<uint32_t> producer_waiting;  // producer found the ring full: kick it after consuming
};
static_assert(std::atomic<uint64_t>::is_always_lock_free, "shared-memory rings need lock-free 64-bit atomics");
static_assert(std::atomic<uint32_t>::is_always_lock_free, "shared-memory rings need lock-free 32-bit atomics");
constexpr size_t kRingControlSize = sizeof(RingControl);

// Ring sizes a side accepts (a power of two in this range; the offer names it, docs/shm.md "Side channel").
constexpr uint64_t kMinRingBytes = 4096;
constexpr uint64_t kMaxRingBytes = uint64_t{64} << 20;
inline bool valid_ring_size(uint64_t n) { return n >= kMinRingBytes && n <= kMaxRingBytes && (n & (n - 1)) == 0; }

// Initialises a control block (the creator, before the other side maps it): empty, the consumer armed, so the first
// bytes written before the consumer watches its doorbell still wake it.
void init_control(RingControl* c);

// The consumer of one direction.
class RingReader {
 public:
  RingReader() = default;
  RingReader(RingControl* c, const uint8_t* data, uint64_t size);

  // Bytes that can be read now; 0 when empty or when the ring is corrupt (see corrupt()).
  uint64_t readable();
  // Copies up to len bytes out and publishes the new tail. Returns the count; 0 when empty or corrupt.
  size_t read(void* buf, size_t len);
  size_t readv(const iovec* iov, int iovcnt);
  // After read(): true when the producer asked to be woken because the ring was full (the flag is cleared).
  bool take_producer_waiting();
  // About to sleep: arms the consumer flag and looks again. true: bytes arrived meanwhile (do not sleep).
  bool arm();
  void disarm();
  // The producer published an index that cannot be (more bytes than the ring holds, or a head behind our tail).
  bool corrupt() const { return corrupt_; }
  uint64_t consumed() const { return tail_; }
  // What the producer has published so far (its word: a hint only, never trusted for reading).
  uint64_t produced_hint() const { return c_ != nullptr ? c_->head.load(std::memory_order_relaxed) : 0; }
  // We looked at the ring (RingControl::polls).
  void note_poll() {
    if (c_ != nullptr) c_->polls.store(++polls_, std::memory_order_relaxed);
  }

 private:
  RingControl* c_ = nullptr;
  const uint8_t* data_ = nullptr;
  uint64_t size_ = 0;
  uint64_t tail_ = 0;  // ours: the shared copy is only published
  uint64_t polls_ = 0;
  bool corrupt_ = false;
};

// The producer of one direction.
class RingWriter {
 public:
  RingWriter() = default;
  RingWriter(RingControl* c, uint8_t* data, uint64_t size);

  // Free bytes now; 0 when full or corrupt.
  uint64_t writable();
  // Gathers as much of iov as fits and publishes the new head. Returns the count (0: full or corrupt).
  size_t writev(const iovec* iov, int iovcnt);
  // After writev(): true when the consumer was asleep and must be kicked (the flag is cleared).
  bool take_consumer_armed();
  // The ring is full: asks the consumer for a kick and looks again. true: space appeared meanwhile.
  bool arm();
  bool corrupt() const { return corrupt_; }
  uint64_t produced() const { return head_; }
  // The consumer said it sleeps on its doorbell (a hint only: the flag is the peer's to write).
  bool consumer_asleep() const { return c_ != nullptr && c_->consumer_armed.load(std::memory_order_relaxed) != 0; }
  uint64_t consumer_polls() const { return c_ != nullptr ? c_->polls.load(std::memory_order_relaxed) : 0; }

 private:
  RingControl* c_ = nullptr;
  uint8_t* data_ = nullptr;
  uint64_t size_ = 0;
  uint64_t head_ = 0;  // ours
  bool corrupt_ = false;
};

}  // namespace netdirect::soft::shm

#endif  // NETDIRECT_SOFT_SHM_RING_H_

// The shared-memory byte ring (design and threat model: ring.h, docs/shm.md).
#include "soft/shm/ring.h"

#include <algorithm>
#include <cstring>
#include <new>

namespace netdirect::soft::shm {

namespace {

// Copies n bytes from the ring at logical offset `at` (wrapping) into dst.
void copy_out(const uint8_t* ring, uint64_t size, uint64_t at, uint8_t* dst, size_t n) {
  const uint64_t off = at & (size - 1);
  const size_t first = static_cast<size_t>(std::min<uint64_t>(n, size - off));
  std::memcpy(dst, ring + off, first);
  if (first < n) std::memcpy(dst + first, ring, n - first);
}

void copy_in(uint8_t* ring, uint64_t size, uint64_t at, const uint8_t* src, size_t n) {
  const uint64_t off = at & (size - 1);
  const size_t first = static_cast<size_t>(std::min<uint64_t>(n, size - off));
  std::memcpy(ring + off, src, first);
  if (first < n) std::memcpy(ring, src + first, n - first);
}

}  // namespace

void init_control(RingControl* c) {
  new (&c->head) std::atomic<uint64_t>(0);
  new (&c->tail) std::atomic<uint64_t>(0);
  new (&c->polls) std::atomic<uint64_t>(0);
  new (&c->consumer_armed) std::atomic<uint32_t>(1);
  new (&c->producer_waiting) std::atomic<uint32_t>(0);
}

// ---- RingReader --------------------------------------------------------------------------------------------

RingReader::RingReader(RingControl* c, const uint8_t* data, uint64_t size) : c_(c), data_(data), size_(size) {}

uint64_t RingReader::readable() {
  if (corrupt_ || c_ == nullptr) return 0;
  const uint64_t head = c_->head.load(std::memory_order_acquire);
  const uint64_t avail = head - tail_;  // a head behind our tail wraps to a huge value: caught below
  if (avail > size_) {
    corrupt_ = true;
    return 0;
  }
  return avail;
}

size_t RingReader::read(void* buf, size_t len) {
  iovec v{buf, len};
  return readv(&v, 1);
}

size_t RingReader::readv(const iovec* iov, int iovcnt) {
  uint64_t avail = readable();
  if (avail == 0) return 0;
  size_t done = 0;
  for (int i = 0; i < iovcnt && avail > 0; ++i) {
    const size_t n = static_cast<size_t>(std::min<uint64_t>(iov[i].iov_len, avail));
    if (n == 0) continue;
    copy_out(data_, size_, tail_, static_cast<uint8_t*>(iov[i].iov_base), n);
    tail_ += n;
    avail -= n;
    done += n;
  }
  if (done > 0) c_->tail.store(tail_, std::memory_order_release);
  return done;
}

bool RingReader::take_producer_waiting() {
  if (c_ == nullptr) return false;
  std::atomic_thread_fence(std::memory_order_seq_cst);  // our tail before its flag (ring.h, "Waking")
  if (c_->producer_waiting.load(std::memory_order_relaxed) == 0) return false;
  return c_->producer_waiting.exchange(0, std::memory_order_acq_rel) != 0;
}

bool RingReader::arm() {
  if (c_ == nullptr) return false;
  c_->consumer_armed.store(1, std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_seq_cst);  // our flag before its head (ring.h, "Waking")
  return readable() > 0 || corrupt_;
}

void RingReader::disarm() {
  if (c_ != nullptr) c_->consumer_armed.store(0, std::memory_order_relaxed);
}

// ---- RingWriter --------------------------------------------------------------------------------------------

RingWriter::RingWriter(RingControl* c, uint8_t* data, uint64_t size) : c_(c), data_(data), size_(size) {}

uint64_t RingWriter::writable() {
  if (corrupt_ || c_ == nullptr) return 0;
  const uint64_t tail = c_->tail.load(std::memory_order_acquire);
  const uint64_t used = head_ - tail;  // a tail ahead of our head wraps to a huge value: caught below
  if (used > size_) {
    corrupt_ = true;
    return 0;
  }
  return size_ - used;
}

size_t RingWriter::writev(const iovec* iov, int iovcnt) {
  uint64_t room = writable();
  if (room == 0) return 0;
  size_t done = 0;
  for (int i = 0; i < iovcnt && room > 0; ++i) {
    const size_t n = static_cast<size_t>(std::min<uint64_t>(iov[i].iov_len, room));
    if (n == 0) continue;
    copy_in(data_, size_, head_, static_cast<const uint8_t*>(iov[i].iov_base), n);
    head_ += n;
    room -= n;
    done += n;
  }
  if (done > 0) c_->head.store(head_, std::memory_order_release);
  return done;
}

bool RingWriter::take_consumer_armed() {
  if (c_ == nullptr) return false;
  std::atomic_thread_fence(std::memory_order_seq_cst);  // our head before its flag (ring.h, "Waking")
  if (c_->consumer_armed.load(std::memory_order_relaxed) == 0) return false;
  return c_->consumer_armed.exchange(0, std::memory_order_acq_rel) != 0;
}

bool RingWriter::arm() {
  if (c_ == nullptr) return false;
  c_->producer_waiting.store(1, std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_seq_cst);  // our flag before its tail (ring.h, "Waking")
  return writable() > 0 || corrupt_;
}

}  // namespace netdirect::soft::shm

// Fuzz target: the same-host rings (binding/soft/shm/ring.*, docs/shm.md) against a peer that owns the other index
// and can scribble on everything shared. Two rings as a connection has them: one we consume (the peer produces: it
// writes the head and the data), one we produce into (the peer consumes: it writes the tail). Input: one settings
// byte (ring size 4 KiB << (b % 4)), then a program of operations, each an opcode byte and its operands:
//   0 the peer publishes a head (8 bytes, any value)       1 the peer publishes a tail (8 bytes, any value)
//   2 the peer scribbles data bytes (offset 2, count 1)     3 we read, into 1..3 buffers of sizes from the input
//   4 the peer produces honestly (count 2 bytes of data)    5 we write (count 2), the peer consumes honestly (count 2)
//   6 flags: the peer writes consumer_armed / producer_waiting; we arm / take them
// Invariants: no access outside the ring's data or our buffers (ASan: every buffer is its own allocation of exactly
// its size); a read never returns more than asked or than the ring holds, and a write never more than given or than
// there is room; a ring found corrupt stays corrupt and moves no byte; while the peer only produced honestly, we read
// exactly its bytes in order; while it only consumed honestly, it reads exactly our bytes in order.
#include <cstring>
#include <deque>
#include <memory>
#include <vector>

#include "fuzz_check.h"
#include "soft/shm/ring.h"

using namespace netdirect::soft::shm;

namespace {

uint64_t u64(fuzz::Input& in) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v = (v << 8) | in.byte();
  return v;
}
uint16_t u16(fuzz::Input& in) {
  const uint16_t hi = in.byte();
  return static_cast<uint16_t>((hi << 8) | in.byte());
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  fuzz::Input in(data, size);
  const uint64_t ring = kMinRingBytes << (in.byte() % 4);
  auto rx_ctl = std::make_unique<RingControl>();
  auto tx_ctl = std::make_unique<RingControl>();
  init_control(rx_ctl.get());
  init_control(tx_ctl.get());
  std::vector<uint8_t> rx_data(ring), tx_data(ring);
  RingReader reader(rx_ctl.get(), rx_data.data(), ring);
  RingWriter writer(tx_ctl.get(), tx_data.data(), ring);

  // The peer's honest side of each ring, and what an honest run must deliver.
  uint64_t peer_head = 0, peer_tail = 0;
  std::deque<uint8_t> expect_rx, expect_tx;
  bool rx_tampered = false, tx_tampered = false;
  uint8_t counter = 0;

  for (int steps = 0; steps < 4096 && in.rest_size() > 0; ++steps) {
    switch (in.byte() % 7) {
      case 0:
        rx_ctl->head.store(u64(in));
        rx_tampered = true;
        break;
      case 1:
        tx_ctl->tail.store(u64(in));
        tx_tampered = true;
        break;
      case 2: {
        const uint16_t off = u16(in);
        const uint8_t n = in.byte();
        for (uint8_t i = 0; i < n; ++i) rx_data[(off + i) % ring] = in.byte();
        rx_tampered = true;
        break;
      }
      case 3: {
        const int k = 1 + in.byte() % 3;
        std::vector<std::unique_ptr<uint8_t[]>> bufs;
        std::vector<iovec> iov;
        size_t asked = 0;
        for (int i = 0; i < k; ++i) {
          const size_t len = u16(in) % (2 * ring + 1);
          bufs.emplace_back(new uint8_t[len + 1]);
          iov.push_back(iovec{bufs.back().get(), len});
          asked += len;
        }
        const bool was_corrupt = reader.corrupt();
        const uint64_t held = reader.readable();
        const size_t n = reader.readv(iov.data(), static_cast<int>(iov.size()));
        FUZZ_CHECK(n <= asked, "read %zu, asked %zu", n, asked);
        FUZZ_CHECK(held <= ring, "readable %llu of a %llu-byte ring", static_cast<unsigned long long>(held),
                   static_cast<unsigned long long>(ring));
        if (was_corrupt) FUZZ_CHECK(n == 0 && reader.corrupt(), "a corrupt ring moved %zu bytes", n);
        if (!rx_tampered) {
          FUZZ_CHECK(!reader.corrupt(), "an honest producer's ring called corrupt");
          FUZZ_CHECK(n == std::min<uint64_t>(asked, expect_rx.size()), "read %zu of %zu available", n, expect_rx.size());
          size_t left = n;
          for (const iovec& v : iov) {
            for (size_t j = 0; j < v.iov_len && left > 0; ++j, --left) {
              FUZZ_CHECK(static_cast<uint8_t*>(v.iov_base)[j] == expect_rx.front(), "byte out of order");
              expect_rx.pop_front();
            }
          }
        }
        break;
      }
      case 4: {
        // The peer produces honestly: as far as its room allows, from our published tail.
        const uint16_t n = u16(in);
        if (rx_tampered) break;
        const uint64_t tail = rx_ctl->tail.load();
        const uint64_t room = ring - (peer_head - tail);
        const uint64_t m = std::min<uint64_t>(n, room);
        for (uint64_t i = 0; i < m; ++i) {
          rx_data[(peer_head + i) % ring] = counter;
          expect_rx.push_back(counter++);
        }
        peer_head += m;
        rx_ctl->head.store(peer_head);
        break;
      }
      case 5: {
        const uint16_t n = u16(in);
        const uint16_t take = u16(in);
        std::unique_ptr<uint8_t[]> src(new uint8_t[n + 1]);
        for (uint16_t i = 0; i < n; ++i) src[i] = static_cast<uint8_t>(counter + i);
        iovec v{src.get(), n};
        const bool was_corrupt = writer.corrupt();
        const uint64_t room = writer.writable();
        const size_t w = writer.writev(&v, 1);
        FUZZ_CHECK(w <= n && w <= room, "wrote %zu of %u with %llu free", w, n, static_cast<unsigned long long>(room));
        if (was_corrupt) FUZZ_CHECK(w == 0 && writer.corrupt(), "a corrupt ring took %zu bytes", w);
        for (size_t i = 0; i < w; ++i) expect_tx.push_back(src[i]);
        counter = static_cast<uint8_t>(counter + w);
        if (tx_tampered) break;
        FUZZ_CHECK(!writer.corrupt(), "an honest consumer's ring called corrupt");
        // The peer consumes honestly what we published.
        const uint64_t head = tx_ctl->head.load();
        const uint64_t m = std::min<uint64_t>(take, head - peer_tail);
        for (uint64_t i = 0; i < m; ++i) {
          FUZZ_CHECK(tx_data[(peer_tail + i) % ring] == expect_tx.front(), "the peer read a byte out of order");
          expect_tx.pop_front();
        }
        peer_tail += m;
        tx_ctl->tail.store(peer_tail);
        break;
      }
      case 6: {
        const uint8_t f = in.byte();
        if (f & 1) rx_ctl->producer_waiting.store(f >> 4);
        if (f & 2) tx_ctl->consumer_armed.store(f >> 4);
        if (f & 4) (void)reader.arm();
        if (f & 8) (void)writer.arm();
        (void)reader.take_producer_waiting();
        (void)writer.take_consumer_armed();
        break;
      }
    }
  }
  return 0;
}

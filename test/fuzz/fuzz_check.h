// Shared by the libFuzzer targets in test/fuzz/ (README.md there): an invariant check that aborts with a
// message (libFuzzer then saves the input as a crash artifact and scripts/fuzz.js prints it), and a cursor over
// the fuzz input for the few bytes a target takes as its settings.
#ifndef NETDIRECT_FUZZ_CHECK_H_
#define NETDIRECT_FUZZ_CHECK_H_

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>

// An invariant of the code under test failed for this input: report it and abort (a crash for libFuzzer).
#define FUZZ_CHECK(cond, ...)                                                         \
  do {                                                                                \
    if (!(cond)) {                                                                    \
      std::fprintf(stderr, "fuzz invariant failed at %s:%d: %s\n  ", __FILE__, __LINE__, #cond); \
      std::fprintf(stderr, __VA_ARGS__);                                              \
      std::fprintf(stderr, "\n");                                                     \
      std::abort();                                                                   \
    }                                                                                 \
  } while (0)

namespace fuzz {

// Takes settings bytes from the front of the input; reads past the end give 0.
class Input {
 public:
  Input(const uint8_t* data, size_t size) : p_(data), n_(size) {}
  uint8_t byte() {
    if (n_ == 0) return 0;
    --n_;
    return *p_++;
  }
  const uint8_t* rest() const { return p_; }
  size_t rest_size() const { return n_; }

 private:
  const uint8_t* p_;
  size_t n_;
};

// Read sizes used to cut a byte stream into receive calls (index from a settings byte): whole, one byte at a
// time, and a few odd sizes that straddle headers, trailers and the staging buffer's size.
inline size_t chunk_size(uint8_t sel) {
  static constexpr size_t kChunks[8] = {~size_t{0}, 1, 3, 7, 16, 61, 1500, 4099};
  return kChunks[sel & 7];
}

}  // namespace fuzz

#endif  // NETDIRECT_FUZZ_CHECK_H_

// Provider variance: a test mode of the software provider that behaves, where ND v2 leaves a choice, the way
// another ND v2 provider (a vendor's, on Windows) may — so the consumer code above the ND interfaces (binding/addon/, binding/delivery/)
// meets those behaviours on every platform. Off unless NETDIRECT_SOFT_VARIANCE names some (docs/testing.md):
//
//   pending          an overlapped request that finished inside the call (ND_SUCCESS) returns ND_PENDING and
//                    completes through the overlapped file instead (at once, or a little later on another thread)
//   fail-async       an overlapped request that failed inside the call returns ND_PENDING and completes with
//                    that failure (a failed completion packet)
//   overflow         a size query (QueryAddressList, GetPrivateData) given a large enough buffer answers
//                    ND_BUFFER_OVERFLOW first, with a larger size, then the data
//   short-poll       CQ GetResults returns fewer results than asked although more are queued
//   spurious-notify  an armed CQ Notify completes although no new completion arrived
//   phased           a request turned pending (above) completes in two phases: the first packet's
//                    GetOverlappedResult answers ND_PENDING and starts the second, which ends with its own packet
//   all              every one of them
//
// Each applicable call takes its variant with probability 1/2, from a generator seeded by
// NETDIRECT_SOFT_VARIANCE_SEED (a number; default: chosen from the clock and printed to stderr), so a failing
// run can be repeated (thread interleavings aside). The hooks sit at the ND object layer (binding/soft/*.cc
// top-level objects) only: the engine, QPs and wire are untouched, and with the variable unset every hook is one
// load of a constant.
#ifndef NETDIRECT_SOFT_VARIANCE_H_
#define NETDIRECT_SOFT_VARIANCE_H_

#include <cstdint>
#include <functional>

#include "nd/nd2.h"

namespace netdirect::soft::variance {

enum Behaviour : uint32_t {
  kPending = 1u << 0,
  kFailAsync = 1u << 1,
  kOverflow = 1u << 2,
  kShortPoll = 1u << 3,
  kSpuriousNotify = 1u << 4,
  kPhased = 1u << 5,
};

// The behaviours NETDIRECT_SOFT_VARIANCE switched on (read once per process); 0 normally.
uint32_t enabled();
// Parses a NETDIRECT_SOFT_VARIANCE value ("pending,short-poll", "all", ""). Unknown names: *bad points at the
// first one (the caller reports it) and it is ignored.
uint32_t parse(const char* spec, const char** bad);

// True with probability 1/2 when `b` is enabled (the seeded generator); false when it is not.
bool roll(Behaviour b);
// A number in [0, n) from the seeded generator (n > 0).
uint32_t uniform(uint32_t n);

// The exit of an overlapped ND method: `hr` is what the provider decided for request `ov` on `file`. Returns what
// the consumer is told: `hr` itself, or ND_PENDING with a completion carrying `hr` (pending / fail-async).
// `owner` is the issuing ND object, referenced while its completion is deferred.
HRESULT finish_overlapped(IUnknown* owner, HANDLE file, OVERLAPPED* ov, HRESULT hr);

// IND2Overlapped::GetOverlappedResult of every overlapped object: ndkit::overlapped_result, except for a request
// in its first phase (phased), whose second phase starts now (ND_PENDING, or the final status when `wait`).
HRESULT overlapped_result(IUnknown* owner, HANDLE file, OVERLAPPED* ov, BOOL wait);

// Runs `fn` a little later (up to ~2 ms) on the variance thread, holding a reference to `owner`.
void later(IUnknown* owner, std::function<void()> fn);
// Runs now, on the calling thread, whatever later() holds for `owner`: a CancelOverlappedRequests calls it
// first (with none of the owner's locks held), so no request of the owner completes after the cancel returned.
void flush(IUnknown* owner);

// GetResults: how many results to return at most, given the consumer asked for n (short-poll).
ULONG results_limit(ULONG n);

// A size query that would succeed (`need` <= *size, buffer given): true when it answers ND_BUFFER_OVERFLOW
// instead, *size set to a requirement larger than `need` (by up to `grow` bytes). Never twice in a row on one
// thread, so a consumer that retries with the size it was told gets the data.
bool overflow_first(ULONG need, ULONG* size, ULONG grow);

}  // namespace netdirect::soft::variance

#endif  // NETDIRECT_SOFT_VARIANCE_H_

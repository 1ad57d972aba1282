// Local SGEs: a request's validated and pinned scatter/gather list, the walk over it, and the posted receive
// (a queue pair's receive queue or a shared receive queue) built from one. Needs only the limits and the STag
// table, so the queue pair's units (qp/rx_stream.h, qp/tx_context.h) stay testable on byte buffers.
#ifndef NETDIRECT_SOFT_MEMORY_LOCAL_SGE_H_
#define NETDIRECT_SOFT_MEMORY_LOCAL_SGE_H_

#include <cstdint>

#include "nd/nd2.h"
#include "soft/limits.h"

namespace netdirect::soft {

class StagTable;

// One validated local SGE. stag != 0: a pin on that region is held until the request completes;
// stag == 0: QP-owned memory (inline copy).
struct LocalSge {
  uint8_t* addr = nullptr;
  uint32_t length = 0;
  uint32_t stag = 0;
};

// Calls fn(addr, length) for each piece of the byte range [offset, offset + len) of an SGE list, in order (the
// gather of a transmit and the scatter of a placement walk it the same way). Returns the bytes of the range the
// list does not cover: 0 when it fits.
template <typename Fn>
uint32_t for_each_sge_piece(const LocalSge* sge, uint32_t nsge, uint64_t offset, uint32_t len, Fn&& fn) {
  uint64_t skip = offset;
  uint32_t left = len;
  for (uint32_t i = 0; i < nsge && left > 0; ++i) {
    if (skip >= sge[i].length) {
      skip -= sge[i].length;
      continue;
    }
    const uint32_t take = static_cast<uint32_t>(sge[i].length - skip < left ? sge[i].length - skip : left);
    fn(sge[i].addr + skip, take);
    left -= take;
    skip = 0;
  }
  return left;
}

// A posted receive (QP receive queue or SRQ).
struct RecvRequest {
  void* context = nullptr;
  uint32_t nsge = 0;
  uint64_t length = 0;  // sum of SGE lengths
  LocalSge sge[limits::kMaxSge];
};

// Validates and pins the SGEs of a Receive (or a Read sink with `rights` = access::kLocalWrite):
// ND_DATA_OVERRUN (nSge > maxSge), ND_BUFFER_OVERFLOW (> MaxTransferLength), ND_ACCESS_VIOLATION (token,
// range or LOCAL_WRITE right). On failure nothing stays pinned.
HRESULT prepare_local_sges(StagTable& stags, const ND2_SGE* sge, ULONG nSge, ULONG maxSge, uint32_t rights,
                           LocalSge* out, uint64_t* total);
// Releases the pins of a request's SGEs.
void release_local_sges(StagTable& stags, const LocalSge* sge, uint32_t n);

}  // namespace netdirect::soft

#endif  // NETDIRECT_SOFT_MEMORY_LOCAL_SGE_H_

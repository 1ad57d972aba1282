#include "soft/memory/local_sge.h"

#include "soft/memory/stag_table.h"

namespace netdirect::soft {

HRESULT prepare_local_sges(StagTable& stags, const ND2_SGE* sge, ULONG nSge, ULONG maxSge, uint32_t rights,
                           LocalSge* out, uint64_t* total) {
  if (nSge > maxSge) return ND_DATA_OVERRUN;
  if (nSge > 0 && sge == nullptr) return ND_INVALID_PARAMETER;
  uint64_t sum = 0;
  for (ULONG i = 0; i < nSge; ++i) sum += sge[i].BufferLength;
  if (sum > limits::kMaxTransferLength) return ND_BUFFER_OVERFLOW;
  ULONG pinned = 0;
  for (; pinned < nSge; ++pinned) {
    const ND2_SGE& s = sge[pinned];
    const uint64_t addr = reinterpret_cast<uintptr_t>(s.Buffer);
    if (s.BufferLength == 0) {
      // An empty SGE touches no memory: nothing to check or pin.
      out[pinned] = LocalSge{static_cast<uint8_t*>(s.Buffer), 0, 0};
      continue;
    }
    if (stags.pin_local(s.MemoryRegionToken, addr, s.BufferLength, rights) != StagCheck::kOk) break;
    out[pinned] = LocalSge{static_cast<uint8_t*>(s.Buffer), s.BufferLength, s.MemoryRegionToken};
  }
  if (pinned != nSge) {
    release_local_sges(stags, out, pinned);
    return ND_ACCESS_VIOLATION;
  }
  *total = sum;
  return ND_SUCCESS;
}

void release_local_sges(StagTable& stags, const LocalSge* sge, uint32_t n) {
  for (uint32_t i = 0; i < n; ++i) {
    if (sge[i].stag != 0) stags.unpin(sge[i].stag);
  }
}

}  // namespace netdirect::soft

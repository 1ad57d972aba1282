// Memory a same-host peer can map (docs/shm.md "Placement by the initiator", "Mapped regions"): buffers the
// provider allocates itself (INDSharedBuffers::AllocateBuffer, nd/netdirect_ext.h; adapter.allocateMemory in the
// addon) live in a memfd mapped MAP_SHARED, sealed at its size. A region registered over such a buffer can be
// handed to the peer that places our inbound Writes (shm/place.h), which then places with a store into its own
// mapping of the memfd instead of a process_vm_writev system call.
//
//  * SharedBuffer: one memfd and where it is mapped in this process. Shared (std::shared_ptr): the allocation and
//    each registration over it (the STag table's entry) hold it, and the last of them unmaps it and closes the
//    descriptor. So registered memory stays mapped even when the allocation is released first (its JS buffer
//    transferred to a worker and collected there: lib/memory-region.ts does not mark these untransferable).
//  * The registry: process-wide, address → SharedBuffer, for registration to find the buffer a range lies in.
// Linux only; elsewhere allocate_shared_buffer says no and the consumer allocates plain memory.
#ifndef NETDIRECT_SOFT_SHARED_BUFFER_H_
#define NETDIRECT_SOFT_SHARED_BUFFER_H_

#include <cstddef>
#include <cstdint>
#include <memory>

namespace netdirect::soft {

struct SharedBuffer {
  uint64_t id = 0;    // process-unique, never reused (the peer's cache key)
  int fd = -1;        // the memfd: sealed against shrinking and growing (a peer's mapping cannot fault)
  uint64_t base = 0;  // where it is mapped here
  uint64_t size = 0;  // bytes (whole pages)
  SharedBuffer() = default;
  SharedBuffer(const SharedBuffer&) = delete;
  SharedBuffer& operator=(const SharedBuffer&) = delete;
  ~SharedBuffer();  // unmaps base and closes fd
};

// At most this many allocations live at once (each holds a descriptor); beyond it the consumer gets plain memory.
constexpr size_t kMaxSharedBuffers = 4096;

// Maps `size` zero-filled bytes (rounded up to whole pages) from a new sealed memfd and records them. *address:
// the mapping; nullptr when no memfd could be had (not Linux, EMFILE, ENOMEM, the cap above, more than the machine's
// physical memory).
std::shared_ptr<const SharedBuffer> allocate_shared_buffer(size_t size, void** address);
// Forgets an allocation (its owner let go); the mapping lives on while registrations hold it.
void release_shared_buffer(const std::shared_ptr<const SharedBuffer>& b);
// The live allocation that holds [addr, addr + length) whole, if any.
std::shared_ptr<const SharedBuffer> find_shared_buffer(uint64_t addr, uint64_t length);

}  // namespace netdirect::soft

#endif  // NETDIRECT_SOFT_SHARED_BUFFER_H_

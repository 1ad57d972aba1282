// Memory a same-host peer can map (design: shared_buffer.h).
#include "soft/memory/shared_buffer.h"

#include <map>
#include <mutex>

#include "soft/memory/stag_table.h"  // range_inside

#ifdef __linux__
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>
#endif

namespace netdirect::soft {

#ifndef __linux__

SharedBuffer::~SharedBuffer() = default;
std::shared_ptr<const SharedBuffer> allocate_shared_buffer(size_t, void** address) {
  *address = nullptr;
  return nullptr;
}
void release_shared_buffer(const std::shared_ptr<const SharedBuffer>&) {}
std::shared_ptr<const SharedBuffer> find_shared_buffer(uint64_t, uint64_t) { return nullptr; }

#else

namespace {

struct Registry {
  std::mutex mu;
  std::map<uint64_t, std::shared_ptr<const SharedBuffer>> by_base;  // live allocations by their address
  uint64_t next_id = 1;
};

Registry& registry() {
  static Registry* r = new Registry();  // never destroyed: finalizers may run during the process's exit
  return *r;
}

}  // namespace

SharedBuffer::~SharedBuffer() {
  if (base != 0) munmap(reinterpret_cast<void*>(static_cast<uintptr_t>(base)), static_cast<size_t>(size));
  if (fd >= 0) ::close(fd);
}

std::shared_ptr<const SharedBuffer> allocate_shared_buffer(size_t size, void** address) {
  *address = nullptr;
  const long page = sysconf(_SC_PAGESIZE);
  if (size == 0 || page <= 0 || size > (SIZE_MAX >> 1)) return nullptr;
  const size_t bytes = (size + static_cast<size_t>(page) - 1) & ~(static_cast<size_t>(page) - 1);
  // A memfd is not charged at mmap (shmem: no overcommit accounting), so a size beyond the machine's memory would
  // "succeed" and fail only when touched: leave such a size to the plain allocation, which refuses it at once.
  const long pages = sysconf(_SC_PHYS_PAGES);
  if (pages > 0 && bytes / static_cast<size_t>(page) > static_cast<size_t>(pages)) return nullptr;
  Registry& r = registry();
  {
    std::lock_guard<std::mutex> lock(r.mu);
    if (r.by_base.size() >= kMaxSharedBuffers) return nullptr;
  }
  auto b = std::make_shared<SharedBuffer>();
  b->fd = memfd_create("netdirect-buffer", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  if (b->fd < 0) return nullptr;
  if (ftruncate(b->fd, static_cast<off_t>(bytes)) != 0) return nullptr;
  if (fcntl(b->fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) != 0) return nullptr;
  void* map = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, b->fd, 0);
  if (map == MAP_FAILED) return nullptr;
  b->base = reinterpret_cast<uintptr_t>(map);
  b->size = bytes;
  std::lock_guard<std::mutex> lock(r.mu);
  b->id = r.next_id++;
  r.by_base[b->base] = b;
  *address = map;
  return b;
}

void release_shared_buffer(const std::shared_ptr<const SharedBuffer>& b) {
  if (!b) return;
  Registry& r = registry();
  {
    std::lock_guard<std::mutex> lock(r.mu);
    auto it = r.by_base.find(b->base);
    if (it == r.by_base.end() || it->second != b) return;
    r.by_base.erase(it);
  }
  // The mapping goes with the last holder (~SharedBuffer): this allocation, or a registration over it.
}

std::shared_ptr<const SharedBuffer> find_shared_buffer(uint64_t addr, uint64_t length) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  auto it = r.by_base.upper_bound(addr);  // the first allocation above addr; the one before may hold it
  if (it == r.by_base.begin()) return nullptr;
  --it;
  const SharedBuffer& b = *it->second;
  if (!range_inside(b.base, b.size, addr, length)) return nullptr;
  return it->second;
}

#endif  // __linux__

}  // namespace netdirect::soft

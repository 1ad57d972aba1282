// Descriptors over the side channel's Unix sockets (SCM_RIGHTS, unix(7)), and the one test a memfd handed over must
// pass before anyone maps it. Used by the rendezvous (shm/link.cc: rings and doorbells) and by placement
// (shm/place.cc: the memfds of mapped regions). Linux only.
#ifndef NETDIRECT_SOFT_SHM_FDS_H_
#define NETDIRECT_SOFT_SHM_FDS_H_

#include <cstddef>
#include <cstdint>

#ifdef __linux__
#include <sys/types.h>

namespace netdirect::soft::shm {

// At most this many descriptors ride on one message; a receiver keeps this many and closes any more.
constexpr int kMaxFds = 4;

// Sends one message with nfds (0..kMaxFds) descriptors attached. Never blocks: a full socket says no.
bool send_fds(int sock, const void* msg, size_t len, const int* fds, int nfds);

// One message received with the descriptors that came with it. Every descriptor received is in fds (up to
// kMaxFds; any more were closed): the caller takes them or calls close_fds().
struct Received {
  ssize_t bytes = -1;  // recvmsg's result: -1 with errno set (EAGAIN: nothing there), 0: the peer closed
  bool cut = false;    // the bytes or the descriptors did not all fit (MSG_TRUNC, MSG_CTRUNC)
  int fds[kMaxFds] = {-1, -1, -1, -1};
  int nfds = 0;
  // True when exactly `len` bytes and exactly `want` descriptors came, nothing cut.
  bool exactly(size_t len, int want) const { return bytes == static_cast<ssize_t>(len) && !cut && nfds == want; }
  void close_fds();
};
Received recv_fds(int sock, void* msg, size_t len);

// A memfd a peer may map: sealed against shrinking (a mapping beyond its end would fault: SIGBUS) and growing, a
// regular file of exactly `size` bytes, on tmpfs (a hugetlbfs file could fault when huge pages run out).
bool is_mappable_memfd(int fd, uint64_t size);

}  // namespace netdirect::soft::shm

#endif  // __linux__
#endif  // NETDIRECT_SOFT_SHM_FDS_H_

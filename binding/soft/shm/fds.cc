// Descriptors over the side channel's Unix sockets (design: shm/fds.h).
#include "soft/shm/fds.h"

#ifdef __linux__
#include <fcntl.h>
#include <linux/magic.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace netdirect::soft::shm {

bool send_fds(int sock, const void* msg, size_t len, const int* fds, int nfds) {
  if (nfds < 0 || nfds > kMaxFds) return false;
  iovec v{const_cast<void*>(msg), len};
  alignas(cmsghdr) char cbuf[CMSG_SPACE(sizeof(int) * kMaxFds)] = {};
  msghdr mh{};
  mh.msg_iov = &v;
  mh.msg_iovlen = 1;
  if (nfds > 0) {
    mh.msg_control = cbuf;
    mh.msg_controllen = CMSG_SPACE(sizeof(int) * static_cast<size_t>(nfds));
    cmsghdr* c = CMSG_FIRSTHDR(&mh);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int) * static_cast<size_t>(nfds));
    std::memcpy(CMSG_DATA(c), fds, sizeof(int) * static_cast<size_t>(nfds));
  }
  ssize_t n;
  do {
    n = sendmsg(sock, &mh, MSG_NOSIGNAL | MSG_DONTWAIT);
  } while (n < 0 && errno == EINTR);
  return n == static_cast<ssize_t>(len);
}

void Received::close_fds() {
  for (int i = 0; i < nfds; ++i) ::close(fds[i]);
  nfds = 0;
}

Received recv_fds(int sock, void* msg, size_t len) {
  Received r;
  iovec v{msg, len};
  alignas(cmsghdr) char cbuf[CMSG_SPACE(sizeof(int) * kMaxFds)] = {};
  msghdr mh{};
  mh.msg_iov = &v;
  mh.msg_iovlen = 1;
  mh.msg_control = cbuf;
  mh.msg_controllen = sizeof cbuf;
  do {
    r.bytes = recvmsg(sock, &mh, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
  } while (r.bytes < 0 && errno == EINTR);
  if (r.bytes < 0) return r;
  const int saved = errno;
  for (cmsghdr* c = CMSG_FIRSTHDR(&mh); c != nullptr; c = CMSG_NXTHDR(&mh, c)) {
    if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
    const size_t k = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
    for (size_t i = 0; i < k; ++i) {
      int fd;
      std::memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof fd);
      if (r.nfds < kMaxFds) {
        r.fds[r.nfds++] = fd;
      } else {
        ::close(fd);
        r.cut = true;
      }
    }
  }
  r.cut = r.cut || (mh.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) != 0;
  errno = saved;
  return r;
}

bool is_mappable_memfd(int fd, uint64_t size) {
  const int seals = fcntl(fd, F_GET_SEALS);
  if (seals < 0 || (seals & (F_SEAL_SHRINK | F_SEAL_GROW)) != (F_SEAL_SHRINK | F_SEAL_GROW)) return false;
  struct stat st{};
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || static_cast<uint64_t>(st.st_size) != size) return false;
  struct statfs fs{};
  return fstatfs(fd, &fs) == 0 && static_cast<unsigned long>(fs.f_type) == TMPFS_MAGIC;
}

}  // namespace netdirect::soft::shm

#endif  // __linux__

// POSIX implementation of the socket seam (socket.h): the system calls. The platform-neutral half (Address,
// status_from_errno) is socket_address.cc; a Winsock build replaces this file alone (socket_win.cc).
#include "soft/net/socket.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>

namespace netdirect::soft::net {

namespace {

constexpr uint32_t kLenV4 = sizeof(sockaddr_in);   // 16
constexpr uint32_t kLenV6 = sizeof(sockaddr_in6);  // 28

int neg_errno() { return errno != 0 ? -errno : -EIO; }

}  // namespace

// ---- local addresses ------------------------------------------------------------------------------

std::vector<LocalAddress> local_addresses() {
  std::vector<LocalAddress> out;
  ifaddrs* list = nullptr;
  if (::getifaddrs(&list) != 0) return out;
  for (ifaddrs* it = list; it != nullptr; it = it->ifa_next) {
    if (it->ifa_addr == nullptr || (it->ifa_flags & IFF_UP) == 0) continue;
    const int fam = it->ifa_addr->sa_family;
    if (fam != AF_INET && fam != AF_INET6) continue;
    LocalAddress la;
    la.if_index = ::if_nametoindex(it->ifa_name);
    if (la.if_index == 0) continue;
    if (fam == AF_INET) {
      std::memcpy(&la.address.storage, it->ifa_addr, kLenV4);
      la.address.length = kLenV4;
    } else {
      std::memcpy(&la.address.storage, it->ifa_addr, kLenV6);
      la.address.length = kLenV6;
      auto* a6 = reinterpret_cast<sockaddr_in6*>(&la.address.storage);
      // Link-local IPv6 is only usable with its scope: make sure it is there (getifaddrs sets it).
      if (IN6_IS_ADDR_LINKLOCAL(&a6->sin6_addr) && a6->sin6_scope_id == 0) a6->sin6_scope_id = la.if_index;
    }
    la.address.set_port(0);
    out.push_back(la);
  }
  ::freeifaddrs(list);
  return out;
}

// ---- sockets ----------------------------------------------------------------------------------------

Socket tcp_socket(int family) {
  int s = ::socket(family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, IPPROTO_TCP);
  if (s < 0) return kInvalidSocket;
  if (family == AF_INET6) {
    int one = 1;  // an IPv6 socket serves IPv6 only: IPv4 addresses get their own sockets
    ::setsockopt(s, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof one);
  }
  return s;
}

int set_nodelay(Socket s) {
  int one = 1;
  return ::setsockopt(s, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one) == 0 ? 0 : neg_errno();
}

int set_reuseaddr(Socket s) {
  int one = 1;
  return ::setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) == 0 ? 0 : neg_errno();
}

int set_liveness(Socket s, uint32_t timeout_ms) {
  if (timeout_ms == 0) return 0;
  // Idle: the first probe after a third of the timeout, then one every sixth; with TCP_USER_TIMEOUT set, Linux
  // gives up at the first probe tick after timeout_ms without hearing from the peer (tcp(7): TCP_USER_TIMEOUT
  // overrides TCP_KEEPCNT), so an idle dead peer is noticed after timeout_ms to timeout_ms + interval.
  const int idle_s = static_cast<int>(std::max<uint32_t>(1, timeout_ms / 3000));
  const int interval_s = static_cast<int>(std::max<uint32_t>(1, timeout_ms / 6000));
  const int count = 6;  // used only where TCP_USER_TIMEOUT is not honoured for keepalive
  const int one = 1;
  const unsigned user_timeout = timeout_ms;
  if (::setsockopt(s, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof one) != 0 ||
      ::setsockopt(s, IPPROTO_TCP, TCP_KEEPIDLE, &idle_s, sizeof idle_s) != 0 ||
      ::setsockopt(s, IPPROTO_TCP, TCP_KEEPINTVL, &interval_s, sizeof interval_s) != 0 ||
      ::setsockopt(s, IPPROTO_TCP, TCP_KEEPCNT, &count, sizeof count) != 0 ||
      ::setsockopt(s, IPPROTO_TCP, TCP_USER_TIMEOUT, &user_timeout, sizeof user_timeout) != 0) {
    return neg_errno();
  }
  return 0;
}

int bind_to(Socket s, const Address& a) {
  return ::bind(s, a.sa(), a.length) == 0 ? 0 : neg_errno();
}

int listen_on(Socket s, int backlog) { return ::listen(s, backlog) == 0 ? 0 : neg_errno(); }

Socket accept_from(Socket s, Address* peer) {
  sockaddr_storage ss{};
  socklen_t len = sizeof ss;
  int c = ::accept4(s, reinterpret_cast<sockaddr*>(&ss), &len, SOCK_NONBLOCK | SOCK_CLOEXEC);
  if (c < 0) return kInvalidSocket;
  if (peer != nullptr) {
    peer->storage = ss;
    peer->length = ss.ss_family == AF_INET6 ? kLenV6 : kLenV4;
  }
  return c;
}

int connect_to(Socket s, const Address& a) {
  if (::connect(s, a.sa(), a.length) == 0) return 0;
  return errno == EINPROGRESS ? -EINPROGRESS : neg_errno();
}

int connect_result(Socket s) {
  int err = 0;
  socklen_t len = sizeof err;
  if (::getsockopt(s, SOL_SOCKET, SO_ERROR, &err, &len) != 0) return neg_errno();
  return -err;
}

namespace {
int name_of(Socket s, Address* a, bool peer) {
  sockaddr_storage ss{};
  socklen_t len = sizeof ss;
  int r = peer ? ::getpeername(s, reinterpret_cast<sockaddr*>(&ss), &len)
               : ::getsockname(s, reinterpret_cast<sockaddr*>(&ss), &len);
  if (r != 0) return neg_errno();
  a->storage = ss;
  a->length = ss.ss_family == AF_INET6 ? kLenV6 : kLenV4;
  return 0;
}
}  // namespace

int local_address(Socket s, Address* a) { return name_of(s, a, false); }
int peer_address(Socket s, Address* a) { return name_of(s, a, true); }

uint32_t tcp_mss(Socket s) {
  int mss = 0;
  socklen_t len = sizeof mss;
  if (::getsockopt(s, IPPROTO_TCP, TCP_MAXSEG, &mss, &len) != 0 || mss <= 0) return 1460;
  return static_cast<uint32_t>(mss);
}

ptrdiff_t send_iov(Socket s, const iovec* iov, int iovcnt) {
  msghdr msg{};
  msg.msg_iov = const_cast<iovec*>(iov);
  msg.msg_iovlen = static_cast<size_t>(iovcnt);
  for (;;) {
    ssize_t n = ::sendmsg(s, &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n >= 0) return n;
    if (errno == EINTR) continue;
    return errno == EWOULDBLOCK ? -EAGAIN : neg_errno();
  }
}

ptrdiff_t recv_iov(Socket s, const iovec* iov, int iovcnt) {
  for (;;) {
    ssize_t n = ::readv(s, iov, iovcnt);
    if (n >= 0) return n;
    if (errno == EINTR) continue;
    return errno == EWOULDBLOCK ? -EAGAIN : neg_errno();
  }
}

ptrdiff_t recv_bytes(Socket s, void* buf, size_t len) {
  for (;;) {
    ssize_t n = ::recv(s, buf, len, MSG_DONTWAIT);
    if (n >= 0) return n;
    if (errno == EINTR) continue;
    return errno == EWOULDBLOCK ? -EAGAIN : neg_errno();
  }
}

int shutdown_write(Socket s) { return ::shutdown(s, SHUT_WR) == 0 ? 0 : neg_errno(); }

int wait_ready(Socket s, bool write, int timeout_ms) {
  pollfd p{};
  p.fd = s;
  p.events = write ? POLLOUT : POLLIN;
  for (;;) {
    const int r = ::poll(&p, 1, timeout_ms);
    if (r >= 0) return r > 0 ? 1 : 0;
    if (errno != EINTR) return neg_errno();
  }
}

void close_socket(Socket s, bool abortive) {
  if (s == kInvalidSocket) return;
  if (abortive) {
    linger lg{};
    lg.l_onoff = 1;
    lg.l_linger = 0;  // close sends RST
    ::setsockopt(s, SOL_SOCKET, SO_LINGER, &lg, sizeof lg);
  }
  ::close(s);
}

}  // namespace netdirect::soft::net

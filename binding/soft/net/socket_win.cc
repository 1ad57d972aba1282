// Winsock implementation of the socket seam (socket.h), for the Windows builds of the software provider
// (linked into netdirect.node, and netdirect_soft.dll). Same contract as socket_posix.cc: non-blocking TCP
// sockets, 0 / byte counts on success, -errno on failure (Winsock errors mapped to the POSIX errno values
// that mingw-w64 and MSVC both define).
#ifdef _WIN32

#include "soft/net/socket.h"

#include <iphlpapi.h>
#include <mstcpip.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <mutex>

namespace netdirect::soft::net {

namespace {

constexpr uint32_t kLenV4 = sizeof(sockaddr_in);   // 16
constexpr uint32_t kLenV6 = sizeof(sockaddr_in6);  // 28
constexpr int kMaxWsaBufs = 64;

// WSAStartup once per process (never undone: the provider may be used until the process exits).
bool winsock_ready() {
  static std::once_flag once;
  static bool ok = false;
  std::call_once(once, [] {
    WSADATA data;
    ok = ::WSAStartup(MAKEWORD(2, 2), &data) == 0;
  });
  return ok;
}

int errno_from_wsa(int wsa) {
  switch (wsa) {
    case WSAEWOULDBLOCK:
      return EAGAIN;
    case WSAEINPROGRESS:
    case WSAEALREADY:
      return EINPROGRESS;
    case WSAEINTR:
      return EINTR;
    case WSAECONNREFUSED:
      return ECONNREFUSED;
    case WSAETIMEDOUT:
      return ETIMEDOUT;
    case WSAENETUNREACH:
      return ENETUNREACH;
    case WSAENETDOWN:
      return ENETDOWN;
    case WSAEHOSTUNREACH:
    case WSAEHOSTDOWN:
      return EHOSTUNREACH;
    case WSAEADDRINUSE:
      return EADDRINUSE;
    case WSAEADDRNOTAVAIL:
      return EADDRNOTAVAIL;
    case WSAECONNRESET:
    case WSAENETRESET:
      return ECONNRESET;
    case WSAECONNABORTED:
    case WSAESHUTDOWN:
      return ECONNABORTED;
    case WSAENOTCONN:
      return ENOTCONN;
    case WSAENOBUFS:
      return ENOBUFS;
    case WSAEMFILE:
      return EMFILE;
    case WSAEINVAL:
      return EINVAL;
    case WSAEAFNOSUPPORT:
      return EAFNOSUPPORT;
    default:
      return EIO;
  }
}

// -errno for the calling thread's last Winsock error; also stored in errno (callers of tcp_socket /
// accept_from read errno, as on POSIX).
int neg_wsa() {
  int e = errno_from_wsa(::WSAGetLastError());
  errno = e;
  return -e;
}

int to_wsabufs(const iovec* iov, int iovcnt, WSABUF* out) {
  int n = iovcnt < kMaxWsaBufs ? iovcnt : kMaxWsaBufs;  // a partial transfer is allowed by the contract
  for (int i = 0; i < n; ++i) {
    out[i].buf = static_cast<CHAR*>(iov[i].iov_base);
    out[i].len = static_cast<ULONG>(iov[i].iov_len);
  }
  return n;
}

}  // namespace

// ---- local addresses ------------------------------------------------------------------------------

// Unicast addresses of the interfaces that are up (loopback included), adapter id = IPv4/IPv6 interface index.
std::vector<LocalAddress> local_addresses() {
  std::vector<LocalAddress> out;
  winsock_ready();
  ULONG flags = GAA_FLAG_SKIP_ANYCAST | GAA_FLAG_SKIP_MULTICAST | GAA_FLAG_SKIP_DNS_SERVER;
  ULONG size = 16 * 1024;
  std::vector<unsigned char> buf;
  ULONG rc = ERROR_BUFFER_OVERFLOW;
  for (int attempt = 0; attempt < 4 && rc == ERROR_BUFFER_OVERFLOW; ++attempt) {
    buf.resize(size);
    rc = ::GetAdaptersAddresses(AF_UNSPEC, flags, nullptr, reinterpret_cast<IP_ADAPTER_ADDRESSES*>(buf.data()), &size);
  }
  if (rc != NO_ERROR) return out;
  for (auto* ad = reinterpret_cast<IP_ADAPTER_ADDRESSES*>(buf.data()); ad != nullptr; ad = ad->Next) {
    if (ad->OperStatus != IfOperStatusUp) continue;
    for (auto* ua = ad->FirstUnicastAddress; ua != nullptr; ua = ua->Next) {
      const sockaddr* sa = ua->Address.lpSockaddr;
      if (sa == nullptr) continue;
      LocalAddress la;
      if (sa->sa_family == AF_INET) {
        la.if_index = ad->IfIndex;
        std::memcpy(&la.address.storage, sa, kLenV4);
        la.address.length = kLenV4;
      } else if (sa->sa_family == AF_INET6) {
        la.if_index = ad->Ipv6IfIndex;
        std::memcpy(&la.address.storage, sa, kLenV6);
        la.address.length = kLenV6;
        auto* a6 = reinterpret_cast<sockaddr_in6*>(&la.address.storage);
        if (IN6_IS_ADDR_LINKLOCAL(&a6->sin6_addr) && a6->sin6_scope_id == 0) a6->sin6_scope_id = la.if_index;
      } else {
        continue;
      }
      if (la.if_index == 0) continue;
      la.address.set_port(0);
      out.push_back(la);
    }
  }
  return out;
}

// ---- sockets ----------------------------------------------------------------------------------------

Socket tcp_socket(int family) {
  if (!winsock_ready()) {
    errno = ENETDOWN;
    return kInvalidSocket;
  }
  // Not inheritable: the Windows counterpart of close-on-exec.
  SOCKET s = ::WSASocketW(family, SOCK_STREAM, IPPROTO_TCP, nullptr, 0, WSA_FLAG_OVERLAPPED | WSA_FLAG_NO_HANDLE_INHERIT);
  if (s == INVALID_SOCKET) {
    neg_wsa();
    return kInvalidSocket;
  }
  u_long nonblocking = 1;
  if (::ioctlsocket(s, FIONBIO, &nonblocking) != 0) {
    neg_wsa();
    ::closesocket(s);
    return kInvalidSocket;
  }
  if (family == AF_INET6) {
    DWORD one = 1;  // an IPv6 socket serves IPv6 only (Windows' default too; made explicit)
    ::setsockopt(s, IPPROTO_IPV6, IPV6_V6ONLY, reinterpret_cast<const char*>(&one), sizeof one);
  }
  return s;
}

int set_nodelay(Socket s) {
  DWORD one = 1;
  return ::setsockopt(s, IPPROTO_TCP, TCP_NODELAY, reinterpret_cast<const char*>(&one), sizeof one) == 0 ? 0
                                                                                                          : neg_wsa();
}

#ifndef TCP_MAXRT
#define TCP_MAXRT 5  // ws2ipdef.h (Windows SDK); mingw-w64 lacks it: seconds of unacknowledged data before giving up
#endif

int set_liveness(Socket s, uint32_t timeout_ms) {
  if (timeout_ms == 0) return 0;
  // Windows sends a fixed 10 keepalive probes: first after a third of the timeout, then one every sixteenth of it,
  // so an idle dead peer is noticed after about timeout_ms (docs/liveness.md). TCP_MAXRT bounds data in flight.
  tcp_keepalive ka{};
  ka.onoff = 1;
  ka.keepalivetime = std::max<ULONG>(1000, timeout_ms / 3);
  ka.keepaliveinterval = std::max<ULONG>(100, timeout_ms / 16);
  DWORD returned = 0;
  if (::WSAIoctl(s, SIO_KEEPALIVE_VALS, &ka, sizeof ka, nullptr, 0, &returned, nullptr, nullptr) != 0) return neg_wsa();
  const DWORD maxrt_s = std::max<DWORD>(1, (timeout_ms + 999) / 1000);
  if (::setsockopt(s, IPPROTO_TCP, TCP_MAXRT, reinterpret_cast<const char*>(&maxrt_s), sizeof maxrt_s) != 0) {
    return neg_wsa();
  }
  return 0;
}

// Windows' SO_REUSEADDR lets a second socket steal a bound port; SO_EXCLUSIVEADDRUSE is the safe default and
// Windows already allows rebinding a port held by TIME_WAIT connections, which is what POSIX code wants here.
int set_reuseaddr(Socket s) {
  (void)s;
  return 0;
}

int bind_to(Socket s, const Address& a) {
  return ::bind(s, a.sa(), static_cast<int>(a.length)) == 0 ? 0 : neg_wsa();
}

int listen_on(Socket s, int backlog) { return ::listen(s, backlog) == 0 ? 0 : neg_wsa(); }

Socket accept_from(Socket s, Address* peer) {
  sockaddr_storage ss{};
  int len = sizeof ss;
  SOCKET c = ::accept(s, reinterpret_cast<sockaddr*>(&ss), &len);
  if (c == INVALID_SOCKET) {
    neg_wsa();
    return kInvalidSocket;
  }
  // An accepted socket inherits the listener's non-blocking mode; set it anyway (cheap, explicit).
  u_long nonblocking = 1;
  ::ioctlsocket(c, FIONBIO, &nonblocking);
  ::SetHandleInformation(reinterpret_cast<HANDLE>(c), HANDLE_FLAG_INHERIT, 0);
  if (peer != nullptr) {
    peer->storage = ss;
    peer->length = ss.ss_family == AF_INET6 ? kLenV6 : kLenV4;
  }
  return c;
}

int connect_to(Socket s, const Address& a) {
  if (::connect(s, a.sa(), static_cast<int>(a.length)) == 0) return 0;
  int e = ::WSAGetLastError();
  if (e == WSAEWOULDBLOCK || e == WSAEINPROGRESS) return -EINPROGRESS;
  return neg_wsa();
}

int connect_result(Socket s) {
  int err = 0;
  int len = sizeof err;
  if (::getsockopt(s, SOL_SOCKET, SO_ERROR, reinterpret_cast<char*>(&err), &len) != 0) return neg_wsa();
  return err == 0 ? 0 : -errno_from_wsa(err);
}

namespace {
int name_of(Socket s, Address* a, bool peer) {
  sockaddr_storage ss{};
  int len = sizeof ss;
  int r = peer ? ::getpeername(s, reinterpret_cast<sockaddr*>(&ss), &len)
               : ::getsockname(s, reinterpret_cast<sockaddr*>(&ss), &len);
  if (r != 0) return neg_wsa();
  a->storage = ss;
  a->length = ss.ss_family == AF_INET6 ? kLenV6 : kLenV4;
  return 0;
}
}  // namespace

int local_address(Socket s, Address* a) { return name_of(s, a, false); }
int peer_address(Socket s, Address* a) { return name_of(s, a, true); }

// Winsock has no TCP_MAXSEG query on every version (Wine: none); derive the usual Ethernet MSS instead.
uint32_t tcp_mss(Socket s) {
#ifdef TCP_MAXSEG
  DWORD mss = 0;
  int len = sizeof mss;
  if (::getsockopt(s, IPPROTO_TCP, TCP_MAXSEG, reinterpret_cast<char*>(&mss), &len) == 0 && mss > 0 && mss < 65536) {
    return mss;
  }
#else
  (void)s;
#endif
  return 1460;
}

ptrdiff_t send_iov(Socket s, const iovec* iov, int iovcnt) {
  WSABUF bufs[kMaxWsaBufs];
  DWORD sent = 0;
  int n = to_wsabufs(iov, iovcnt, bufs);
  if (::WSASend(s, bufs, static_cast<DWORD>(n), &sent, 0, nullptr, nullptr) == 0) return static_cast<ptrdiff_t>(sent);
  return neg_wsa();
}

ptrdiff_t recv_iov(Socket s, const iovec* iov, int iovcnt) {
  WSABUF bufs[kMaxWsaBufs];
  DWORD got = 0;
  DWORD flags = 0;
  int n = to_wsabufs(iov, iovcnt, bufs);
  if (::WSARecv(s, bufs, static_cast<DWORD>(n), &got, &flags, nullptr, nullptr) == 0) return static_cast<ptrdiff_t>(got);
  int e = ::WSAGetLastError();
  if (e == WSAEDISCON) return 0;  // graceful close on a message-oriented view; TCP reports 0 bytes instead
  return neg_wsa();
}

ptrdiff_t recv_bytes(Socket s, void* buf, size_t len) {
  int cap = len > 0x7fffffff ? 0x7fffffff : static_cast<int>(len);
  int n = ::recv(s, static_cast<char*>(buf), cap, 0);
  if (n >= 0) return n;
  return neg_wsa();
}

int shutdown_write(Socket s) { return ::shutdown(s, SD_SEND) == 0 ? 0 : neg_wsa(); }

int wait_ready(Socket s, bool write, int timeout_ms) {
  WSAPOLLFD p{};
  p.fd = s;
  p.events = write ? POLLOUT : POLLIN;
  const int r = ::WSAPoll(&p, 1, timeout_ms);
  if (r >= 0) return r > 0 ? 1 : 0;
  return neg_wsa();
}

void close_socket(Socket s, bool abortive) {
  if (s == kInvalidSocket) return;
  if (abortive) {
    linger lg{};
    lg.l_onoff = 1;
    lg.l_linger = 0;  // closesocket sends RST
    ::setsockopt(s, SOL_SOCKET, SO_LINGER, reinterpret_cast<const char*>(&lg), sizeof lg);
  }
  ::closesocket(s);
}

}  // namespace netdirect::soft::net

#endif  // _WIN32

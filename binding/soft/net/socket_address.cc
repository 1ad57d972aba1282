// The platform-neutral half of the socket seam (socket.h): Address and its conversions to and from ND's
// sockaddr arguments, and the errno -> ND status map. socket_posix.cc and socket_win.cc hold only what differs
// (system calls, local address enumeration, Winsock error mapping).
#include "soft/net/socket.h"

#ifndef _WIN32
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#endif

#include <cerrno>
#include <cstdio>
#include <cstring>

namespace netdirect::soft::net {

namespace {

constexpr uint32_t kLenV4 = sizeof(sockaddr_in);   // 16
constexpr uint32_t kLenV6 = sizeof(sockaddr_in6);  // 28

}  // namespace

// ---- Address ------------------------------------------------------------------------------------------

uint16_t Address::port() const {
  if (family() == AF_INET) return ntohs(reinterpret_cast<const sockaddr_in*>(&storage)->sin_port);
  if (family() == AF_INET6) return ntohs(reinterpret_cast<const sockaddr_in6*>(&storage)->sin6_port);
  return 0;
}

void Address::set_port(uint16_t p) {
  if (family() == AF_INET) reinterpret_cast<sockaddr_in*>(&storage)->sin_port = htons(p);
  if (family() == AF_INET6) reinterpret_cast<sockaddr_in6*>(&storage)->sin6_port = htons(p);
}

bool Address::is_any() const {
  if (family() == AF_INET) return reinterpret_cast<const sockaddr_in*>(&storage)->sin_addr.s_addr == htonl(INADDR_ANY);
  if (family() == AF_INET6) {
    return IN6_IS_ADDR_UNSPECIFIED(&reinterpret_cast<const sockaddr_in6*>(&storage)->sin6_addr);
  }
  return false;
}

bool Address::same_ip(const Address& o) const {
  if (family() != o.family()) return false;
  if (family() == AF_INET) {
    return reinterpret_cast<const sockaddr_in*>(&storage)->sin_addr.s_addr ==
           reinterpret_cast<const sockaddr_in*>(&o.storage)->sin_addr.s_addr;
  }
  if (family() == AF_INET6) {
    const auto* a = reinterpret_cast<const sockaddr_in6*>(&storage);
    const auto* b = reinterpret_cast<const sockaddr_in6*>(&o.storage);
    if (std::memcmp(&a->sin6_addr, &b->sin6_addr, sizeof a->sin6_addr) != 0) return false;
    // Link-local addresses are only equal on the same link; a missing scope matches any.
    if (IN6_IS_ADDR_LINKLOCAL(&a->sin6_addr) && a->sin6_scope_id != 0 && b->sin6_scope_id != 0) {
      return a->sin6_scope_id == b->sin6_scope_id;
    }
    return true;
  }
  return false;
}

bool Address::is_loopback_v4() const {
  return family() == AF_INET &&
         (ntohl(reinterpret_cast<const sockaddr_in*>(&storage)->sin_addr.s_addr) >> 24) == 127;
}

bool Address::answers_for(const Address& o) const { return same_ip(o) || (is_loopback_v4() && o.is_loopback_v4()); }

std::string Address::to_string() const {
  char ip[INET6_ADDRSTRLEN] = "?";
  char out[INET6_ADDRSTRLEN + 24];
  if (family() == AF_INET) {
    inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(&storage)->sin_addr, ip, sizeof ip);
    std::snprintf(out, sizeof out, "%s:%u", ip, port());
  } else if (family() == AF_INET6) {
    const auto* a6 = reinterpret_cast<const sockaddr_in6*>(&storage);
    inet_ntop(AF_INET6, &a6->sin6_addr, ip, sizeof ip);
    if (a6->sin6_scope_id != 0) {
      std::snprintf(out, sizeof out, "[%s%%%lu]:%u", ip, static_cast<unsigned long>(a6->sin6_scope_id), port());
    } else {
      std::snprintf(out, sizeof out, "[%s]:%u", ip, port());
    }
  } else {
    return "(unset)";
  }
  return out;
}

bool parse_numeric(const std::string& ip, uint16_t port, Address* out) {
  *out = Address{};
  auto* v4 = reinterpret_cast<sockaddr_in*>(&out->storage);
  if (inet_pton(AF_INET, ip.c_str(), &v4->sin_addr) == 1) {
    v4->sin_family = AF_INET;
    v4->sin_port = htons(port);
    out->length = kLenV4;
    return true;
  }
  auto* v6 = reinterpret_cast<sockaddr_in6*>(&out->storage);
  if (inet_pton(AF_INET6, ip.c_str(), &v6->sin6_addr) == 1) {
    v6->sin6_family = AF_INET6;
    v6->sin6_port = htons(port);
    out->length = kLenV6;
    return true;
  }
  *out = Address{};
  return false;
}

HRESULT address_from(const sockaddr* sa, ULONG len, Address* out) {
  if (sa == nullptr || len < sizeof(sa->sa_family) + sizeof(uint16_t)) return ND_INVALID_PARAMETER;
  Address a;
  if (sa->sa_family == AF_INET) {
    if (len < kLenV4) return ND_INVALID_PARAMETER;
    std::memcpy(&a.storage, sa, kLenV4);
    a.length = kLenV4;
  } else if (sa->sa_family == AF_INET6) {
    if (len < kLenV6) return ND_INVALID_PARAMETER;
    std::memcpy(&a.storage, sa, kLenV6);
    a.length = kLenV6;
  } else {
    return ND_INVALID_ADDRESS;
  }
  *out = a;
  return ND_SUCCESS;
}

HRESULT address_to(const Address& a, sockaddr* out, ULONG* len) {
  if (len == nullptr) return ND_INVALID_PARAMETER;
  if (a.length == 0) return ND_CONNECTION_INVALID;
  if (out == nullptr || *len < a.length) {
    *len = a.length;
    return ND_BUFFER_OVERFLOW;
  }
  std::memcpy(out, &a.storage, a.length);
  *len = a.length;
  return ND_SUCCESS;
}

HRESULT status_from_errno(int negative_errno) {
  switch (-negative_errno) {
    case 0:
      return ND_SUCCESS;
    case ECONNREFUSED:
      return ND_CONNECTION_REFUSED;
    case ETIMEDOUT:
      return ND_IO_TIMEOUT;
    case ENETUNREACH:
    case ENETDOWN:
      return ND_NETWORK_UNREACHABLE;
    case EHOSTUNREACH:
#ifdef EHOSTDOWN
    case EHOSTDOWN:
#endif
      return ND_HOST_UNREACHABLE;
    case EADDRINUSE:
      return ND_SHARING_VIOLATION;
    case EADDRNOTAVAIL:
      return ND_INVALID_ADDRESS;
    case ECONNRESET:
    case EPIPE:
    case ECONNABORTED:
      return ND_CONNECTION_ABORTED;
    case ENOMEM:
    case ENOBUFS:
    case EMFILE:
    case ENFILE:
      return ND_INSUFFICIENT_RESOURCES;
    default:
      return ND_UNSUCCESSFUL;
  }
}

}  // namespace netdirect::soft::net

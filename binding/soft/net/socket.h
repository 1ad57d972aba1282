// The socket seam of the software provider: everything it needs from the OS network stack, behind
// a few functions so a Winsock build (provider DLL, Windows) can replace socket_posix.cc alone.
// All sockets are non-blocking TCP. Functions return 0 / a byte count on success and -errno on failure
// (Winsock errors are mapped to the same errno values there).
#ifndef NETDIRECT_SOFT_SOCKET_H_
#define NETDIRECT_SOFT_SOCKET_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "nd/nd2.h"

#ifdef _WIN32
// Winsock has no iovec; the seam's own (socket_win.cc turns it into WSABUFs). Same members as POSIX.
struct iovec {
  void* iov_base;
  size_t iov_len;
};
#else
struct iovec;
#endif

namespace netdirect::soft::net {

#ifdef _WIN32
using Socket = SOCKET;
constexpr Socket kInvalidSocket = INVALID_SOCKET;
#else
using Socket = int;  // SOCKET on Windows
constexpr Socket kInvalidSocket = -1;
#endif

// An IPv4 or IPv6 socket address with its length, convertible to/from the ND sockaddr arguments.
struct Address {
  sockaddr_storage storage{};
  uint32_t length = 0;  // 16 (IPv4) or 28 (IPv6); 0 = unset
  const sockaddr* sa() const { return reinterpret_cast<const sockaddr*>(&storage); }
  sockaddr* sa() { return reinterpret_cast<sockaddr*>(&storage); }
  int family() const { return storage.ss_family; }
  uint16_t port() const;
  void set_port(uint16_t port);
  bool is_any() const;        // 0.0.0.0 or ::
  bool same_ip(const Address& o) const;  // IP equality, port ignored
  bool is_loopback_v4() const;  // in 127.0.0.0/8
  // This local address answers for o's IP: the same IP, or both in 127.0.0.0/8, which is all the host itself
  // (RFC 1122 section 3.2.1.3): Linux and Windows route every address of it to the loopback interface and bind
  // any of them, though the interface lists only 127.0.0.1. Port ignored.
  bool answers_for(const Address& o) const;
  std::string to_string() const;  // "1.2.3.4:5" / "[::1]:5"
};

// A numeric IPv4 or IPv6 address ("10.0.0.1", "::1", no brackets) with a port; false for anything else (no name
// lookup).
bool parse_numeric(const std::string& ip, uint16_t port, Address* out);

// Validates and copies an ND sockaddr argument: ND_INVALID_ADDRESS for an unknown family,
// ND_INVALID_PARAMETER when len is too short for the family.
HRESULT address_from(const sockaddr* sa, ULONG len, Address* out);
// Writes an address to an ND output buffer with the Get*Address size protocol (ND_BUFFER_OVERFLOW +
// required size when *len is too small).
HRESULT address_to(const Address& a, sockaddr* out, ULONG* len);

// The machine's IPv4/IPv6 addresses (loopback included) with their interface index.
struct LocalAddress {
  Address address;
  uint32_t if_index = 0;
};
std::vector<LocalAddress> local_addresses();

Socket tcp_socket(int family);  // non-blocking, close-on-exec; kInvalidSocket and errno on failure
int set_nodelay(Socket s);
int set_reuseaddr(Socket s);
// Dead-peer detection for a connected socket (docs/liveness.md): keepalive probes while the connection is idle and
// a bound on how long sent data may stay unacknowledged (TCP_USER_TIMEOUT; TCP_MAXRT on Windows), both sized so a
// peer that vanished (cable cut, host powered off) fails the connection with ETIMEDOUT after about timeout_ms
// instead of the OS defaults (~15 min with data in flight, never on an idle connection). 0 leaves the OS defaults.
int set_liveness(Socket s, uint32_t timeout_ms);
int bind_to(Socket s, const Address& a);
int listen_on(Socket s, int backlog);
Socket accept_from(Socket s, Address* peer);  // non-blocking result socket; kInvalidSocket + -errno via *err
int connect_to(Socket s, const Address& a);   // 0, or -EINPROGRESS while connecting
int connect_result(Socket s);                 // 0 when connected, -errno when it failed (SO_ERROR)
int local_address(Socket s, Address* a);
int peer_address(Socket s, Address* a);
uint32_t tcp_mss(Socket s);                   // TCP_MAXSEG of a connected socket (1460 when unknown)
// Gathers iov into the stream; returns bytes sent (possibly partial), -EAGAIN when the buffer is full.
ptrdiff_t send_iov(Socket s, const iovec* iov, int iovcnt);
// Scatters from the stream; returns bytes read, 0 at end of stream, -EAGAIN when nothing is there.
ptrdiff_t recv_iov(Socket s, const iovec* iov, int iovcnt);
ptrdiff_t recv_bytes(Socket s, void* buf, size_t len);
int shutdown_write(Socket s);
// Blocks until s is readable (write = false) or writable, or has an error or hang-up to report (the next call on
// it tells which): 1, or 0 when timeout_ms (-1: none) passed first, or -errno. For users that block a thread of
// their own (ndbench's TCP baseline, binding/bench/bench_tcp.cc); the provider waits in its engine instead.
int wait_ready(Socket s, bool write, int timeout_ms);
// Closes; with abortive = true the peer sees a reset (used after protocol errors).
void close_socket(Socket s, bool abortive = false);

// Maps a connect/accept failure errno to the ND status the ND spec names for it.
HRESULT status_from_errno(int negative_errno);

}  // namespace netdirect::soft::net

#endif  // NETDIRECT_SOFT_SOCKET_H_

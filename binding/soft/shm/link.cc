// Same-host transport: the Link, the side-channel Handshake and the listener's Rendezvous (design: link.h,
// docs/shm.md).
#include "soft/shm/link.h"

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <cstdio>
#include <cstring>
#include <new>
#include <string>

#include "soft/env.h"
#include "soft/shm/fds.h"

#ifdef __linux__
#include <fcntl.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>
#endif

namespace netdirect::soft::shm {

bool enabled_from_env() { return env_switch("NETDIRECT_SHM", kDefaultOn); }

uint32_t spin_micros_from_env() {
  std::string v_env;
  const char* v = env_value("NETDIRECT_SHM_SPIN_MICROS", v_env);
  if (v == nullptr || v[0] == '\0') return kDefaultSpinMicros;
  uint64_t n = 0;
  for (const char* c = v; *c != '\0'; ++c) {
    if (*c < '0' || *c > '9' || n > 1000000) return kDefaultSpinMicros;
    n = n * 10 + static_cast<uint64_t>(*c - '0');
  }
  return n > 1000000 ? kDefaultSpinMicros : static_cast<uint32_t>(n);
}

std::string rendezvous_name(const net::Address& a) { return "netdirect-shm/3/" + a.to_string(); }

#ifndef __linux__

bool available() { return false; }
Link::~Link() = default;
ptrdiff_t Link::send_iov(const iovec*, int) { return -EPROTO; }
ptrdiff_t Link::recv_iov(const iovec*, int) { return -EPROTO; }
ptrdiff_t Link::recv(void*, size_t) { return -EPROTO; }
void Link::drain_doorbell() {}
void Link::kick_self() {}
void Link::kick_peer() {}
Handshake::~Handshake() = default;
std::unique_ptr<Handshake> Handshake::offer(net::Socket, uint64_t) { return nullptr; }
std::unique_ptr<Link> Handshake::finish() { return nullptr; }
std::unique_ptr<Link> Handshake::accept() { return nullptr; }
std::shared_ptr<Rendezvous> Rendezvous::open(const std::vector<net::Address>&) { return nullptr; }
Rendezvous::~Rendezvous() = default;
std::unique_ptr<Handshake> Rendezvous::claim(const net::Address&, const net::Address&) { return nullptr; }
void Rendezvous::take_waiting() {}

#else

bool available() { return true; }

namespace {

constexpr char kMagic[8] = {'N', 'D', 'S', 'H', 'M', 'v', '3', 0};
constexpr uint32_t kOffer = 1;
constexpr uint32_t kAnswer = 2;
constexpr size_t kControlArea = 4096;  // both control blocks, one page
constexpr size_t kMaxOffers = 64;      // offers received but not claimed (and unread connections), per listener
constexpr uint64_t kOfferLifeMs = 10000;

struct WireAddress {
  uint16_t family;  // AF_INET / AF_INET6
  uint16_t port;    // host order
  uint8_t ip[16];
};

struct OfferMsg {
  char magic[8];
  uint32_t kind;
  uint32_t reserved;
  uint64_t ring_bytes;
  WireAddress local;  // the initiator's side of the TCP connection
  WireAddress peer;   // the listener's side
};

struct AnswerMsg {
  char magic[8];
  uint32_t kind;
  uint32_t reserved;
};

// [control blocks: one page][place area of direction 0][place area of direction 1][ring 0][ring 1]
size_t layout_bytes(uint64_t ring) { return kControlArea + 2 * kPlaceAreaBytes + 2 * static_cast<size_t>(ring); }
PlaceArea* place_area(void* map, int dir) {
  return reinterpret_cast<PlaceArea*>(static_cast<uint8_t*>(map) + kControlArea + dir * kPlaceAreaBytes);
}
RingControl* control(void* map, int dir) {
  return reinterpret_cast<RingControl*>(static_cast<uint8_t*>(map) + dir * 1024);
}
uint8_t* ring_data(void* map, uint64_t ring, int dir) {
  return static_cast<uint8_t*>(map) + kControlArea + 2 * kPlaceAreaBytes + dir * ring;
}

uint64_t now_ms() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000 + static_cast<uint64_t>(ts.tv_nsec) / 1000000;
}

WireAddress to_wire(const net::Address& a) {
  WireAddress w{};
  w.family = static_cast<uint16_t>(a.family());
  w.port = a.port();
  if (a.family() == AF_INET) {
    std::memcpy(w.ip, &reinterpret_cast<const sockaddr_in*>(a.sa())->sin_addr, 4);
  } else if (a.family() == AF_INET6) {
    std::memcpy(w.ip, &reinterpret_cast<const sockaddr_in6*>(a.sa())->sin6_addr, 16);
  }
  return w;
}

bool same(const WireAddress& a, const WireAddress& b) {
  return a.family == b.family && a.port == b.port && std::memcmp(a.ip, b.ip, sizeof a.ip) == 0;
}

void close_fd(int& fd) {
  if (fd >= 0) ::close(fd);
  fd = -1;
}

bool peer_is_us(int unix_fd, int* pid) {
  ucred cred{};
  socklen_t len = sizeof cred;
  if (getsockopt(unix_fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0 || len != sizeof cred) return false;
  if (cred.uid != geteuid()) return false;
  *pid = cred.pid;
  return true;
}

// An eventfd, as /proc names it: a descriptor of another kind could block a write, or be a file we must not touch.
bool is_eventfd(int fd) {
  char path[64];
  std::snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
  char target[64];
  const ssize_t n = readlink(path, target, sizeof target - 1);
  if (n <= 0) return false;
  target[n] = '\0';
  return std::strcmp(target, "anon_inode:[eventfd]") == 0;
}

// Receives one message of exactly len bytes with exactly nfds descriptors; every descriptor received is either
// returned or closed. 1: received; 0: nothing there yet; -1: anything else (closed, short, wrong descriptors).
int recv_with_fds(int sock, void* msg, size_t len, int* fds, int nfds) {
  Received r = recv_fds(sock, msg, len);
  if (r.bytes < 0) return errno == EAGAIN || errno == EWOULDBLOCK ? 0 : -1;
  if (!r.exactly(len, nfds)) {
    r.close_fds();
    return -1;
  }
  for (int i = 0; i < nfds; ++i) fds[i] = r.fds[i];
  return 1;
}

sockaddr_un abstract_address(const net::Address& a, socklen_t* len) {
  sockaddr_un un{};
  un.sun_family = AF_UNIX;
  const std::string name = rendezvous_name(a);
  const size_t n = std::min(name.size(), sizeof un.sun_path - 1);
  std::memcpy(un.sun_path + 1, name.data(), n);  // sun_path[0] = 0: the abstract namespace
  *len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + n);
  return un;
}

bool on_this_host(const net::Address& local, const net::Address& peer) {
  if (local.same_ip(peer)) return true;  // connecting to one of our own addresses uses it as the source
  if (peer.is_loopback_v4()) return true;
  if (peer.family() == AF_INET6) {
    static const uint8_t loop6[16] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1};
    return std::memcmp(&reinterpret_cast<const sockaddr_in6*>(peer.sa())->sin6_addr, loop6, 16) == 0;
  }
  return false;
}

int new_doorbell() { return eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC); }

void ring_bell(int fd) {
  const uint64_t one = 1;
  ssize_t n;
  do {
    n = ::write(fd, &one, sizeof one);
  } while (n < 0 && errno == EINTR);
  // EAGAIN: the counter is at its maximum, the bell already rings. Nothing else can fail on an eventfd.
}

}  // namespace

// ---- Link ------------------------------------------------------------------------------------------------------

void Link::init_placement(int my_dir) {
  const bool allowed = place_enabled_from_env();
  while (secret_ == 0) {
    if (getrandom(&secret_, sizeof secret_, 0) != static_cast<ssize_t>(sizeof secret_)) {
      secret_ = 0;
      break;
    }
  }
  peer_area_ = place_area(map_, my_dir);
  // Our table lives in the area of the direction we consume; without a secret we never publish one. The side
  // channel stays open for the memfds of mapped regions (place.h RegionMsg), both ways.
  if (allowed && secret_ != 0) table_.init(place_area(map_, 1 - my_dir), &secret_, side_);
  placer_.init(peer_area_, peer_pid_, allowed, side_);
}

Link::~Link() {
  placer_.drop_mappings();
  close_fd(side_);
  if (map_ != nullptr) munmap(map_, map_len_);
  close_fd(my_bell_);
  close_fd(peer_bell_);
}

void Link::kick_peer() { ring_bell(peer_bell_); }
void Link::kick_self() { ring_bell(my_bell_); }

void Link::drain_doorbell() {
  uint64_t v;
  while (::read(my_bell_, &v, sizeof v) < 0 && errno == EINTR) {
  }
}

ptrdiff_t Link::send_iov(const iovec* iov, int iovcnt) {
  size_t n = tx_.writev(iov, iovcnt);
  if (n == 0 && !tx_.corrupt()) {
    bool any = false;
    for (int i = 0; i < iovcnt; ++i) any = any || iov[i].iov_len > 0;
    if (!any) return 0;
    // Full: ask to be kicked, then look once more (ring.h, "Waking").
    if (tx_.arm()) n = tx_.writev(iov, iovcnt);
  }
  if (tx_.corrupt()) return -EPROTO;
  if (n == 0) return -EAGAIN;
  if (tx_.take_consumer_armed()) kick_peer();
  return static_cast<ptrdiff_t>(n);
}

ptrdiff_t Link::recv_iov(const iovec* iov, int iovcnt) {
  const size_t n = rx_.readv(iov, iovcnt);
  if (rx_.corrupt()) return -EPROTO;
  if (n == 0) return -EAGAIN;
  if (rx_.take_producer_waiting()) kick_peer();
  return static_cast<ptrdiff_t>(n);
}

ptrdiff_t Link::recv(void* buf, size_t len) {
  iovec v{buf, len};
  return recv_iov(&v, 1);
}

// ---- Handshake -------------------------------------------------------------------------------------------------

Handshake::~Handshake() {
  close_fd(unix_);
  close_fd(memfd_);
  close_fd(bell_);
  if (map_ != nullptr) munmap(map_, map_len_);
}

std::unique_ptr<Handshake> Handshake::offer(net::Socket tcp, uint64_t ring_bytes) {
  if (!valid_ring_size(ring_bytes)) return nullptr;
  net::Address local, peer;
  if (net::local_address(tcp, &local) != 0 || net::peer_address(tcp, &peer) != 0) return nullptr;
  if (!on_this_host(local, peer)) return nullptr;
  std::unique_ptr<Handshake> h(new (std::nothrow) Handshake());
  if (!h) return nullptr;
  h->ring_bytes_ = ring_bytes;
  // The side channel first: most connections to this host's addresses that reach no listener of ours end here.
  h->unix_ = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (h->unix_ < 0) return nullptr;
  socklen_t alen;
  sockaddr_un un = abstract_address(peer, &alen);
  if (connect(h->unix_, reinterpret_cast<sockaddr*>(&un), alen) != 0) return nullptr;  // none, or its queue full
  if (!peer_is_us(h->unix_, &h->peer_pid_)) return nullptr;  // another user's process holds the name
  // The rings: anonymous memory nobody else can open (no name in /dev/shm or anywhere), sealed at its size.
  h->map_len_ = layout_bytes(ring_bytes);
  h->memfd_ = memfd_create("netdirect-shm", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  if (h->memfd_ < 0) return nullptr;
  if (ftruncate(h->memfd_, static_cast<off_t>(h->map_len_)) != 0) return nullptr;
  if (fcntl(h->memfd_, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) != 0) return nullptr;
  void* map = mmap(nullptr, h->map_len_, PROT_READ | PROT_WRITE, MAP_SHARED, h->memfd_, 0);
  if (map == MAP_FAILED) return nullptr;
  h->map_ = map;
  init_control(control(map, 0));
  init_control(control(map, 1));
  h->bell_ = new_doorbell();
  if (h->bell_ < 0) return nullptr;
  OfferMsg m{};
  std::memcpy(m.magic, kMagic, sizeof m.magic);
  m.kind = kOffer;
  m.ring_bytes = ring_bytes;
  m.local = to_wire(local);
  m.peer = to_wire(peer);
  const int fds[2] = {h->memfd_, h->bell_};
  if (!send_fds(h->unix_, &m, sizeof m, fds, 2)) return nullptr;
  close_fd(h->memfd_);  // the mapping keeps the memory; the responder has its own descriptor
  return h;
}

std::unique_ptr<Link> Handshake::finish() {
  if (unix_ < 0 || map_ == nullptr) return nullptr;
  AnswerMsg a{};
  int peer_bell = -1;
  if (recv_with_fds(unix_, &a, sizeof a, &peer_bell, 1) != 1) return nullptr;  // no answer: TCP
  if (std::memcmp(a.magic, kMagic, sizeof a.magic) != 0 || a.kind != kAnswer || !is_eventfd(peer_bell)) {
    ::close(peer_bell);
    return nullptr;
  }
  std::unique_ptr<Link> l(new (std::nothrow) Link());
  if (!l) {
    ::close(peer_bell);
    return nullptr;
  }
  l->map_ = map_;
  l->map_len_ = map_len_;
  map_ = nullptr;
  l->ring_bytes_ = ring_bytes_;
  l->my_bell_ = bell_;
  bell_ = -1;
  l->peer_bell_ = peer_bell;
  l->peer_pid_ = peer_pid_;
  // Direction 0 carries initiator → responder.
  l->tx_ = RingWriter(control(l->map_, 0), ring_data(l->map_, ring_bytes_, 0), ring_bytes_);
  l->rx_ = RingReader(control(l->map_, 1), ring_data(l->map_, ring_bytes_, 1), ring_bytes_);
  l->side_ = unix_;
  unix_ = -1;
  l->init_placement(0);
  return l;
}

std::unique_ptr<Link> Handshake::accept() {
  if (unix_ < 0 || memfd_ < 0 || bell_ < 0) return nullptr;
  const size_t len = layout_bytes(ring_bytes_);
  if (!is_mappable_memfd(memfd_, len)) return nullptr;
  void* map = mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_SHARED, memfd_, 0);
  if (map == MAP_FAILED) return nullptr;
  std::unique_ptr<Link> l(new (std::nothrow) Link());
  if (!l) {
    munmap(map, len);
    return nullptr;
  }
  l->map_ = map;
  l->map_len_ = len;
  l->ring_bytes_ = ring_bytes_;
  l->peer_bell_ = bell_;
  bell_ = -1;
  l->peer_pid_ = peer_pid_;
  l->my_bell_ = new_doorbell();
  if (l->my_bell_ < 0) return nullptr;
  l->tx_ = RingWriter(control(map, 1), ring_data(map, ring_bytes_, 1), ring_bytes_);
  l->rx_ = RingReader(control(map, 0), ring_data(map, ring_bytes_, 0), ring_bytes_);
  AnswerMsg a{};
  std::memcpy(a.magic, kMagic, sizeof a.magic);
  a.kind = kAnswer;
  if (!send_fds(unix_, &a, sizeof a, &l->my_bell_, 1)) return nullptr;
  l->side_ = unix_;
  unix_ = -1;
  l->init_placement(1);
  close_fd(memfd_);
  return l;
}

// ---- Rendezvous ------------------------------------------------------------------------------------------------

std::shared_ptr<Rendezvous> Rendezvous::open(const std::vector<net::Address>& listening) {
  std::shared_ptr<Rendezvous> r(new (std::nothrow) Rendezvous());
  if (!r) return nullptr;
  for (const net::Address& a : listening) {
    const int s = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (s < 0) continue;
    socklen_t alen;
    sockaddr_un un = abstract_address(a, &alen);
    // EADDRINUSE: someone (another user, perhaps) holds the name: this address serves TCP only.
    if (bind(s, reinterpret_cast<sockaddr*>(&un), alen) != 0 || ::listen(s, static_cast<int>(kMaxOffers)) != 0) {
      ::close(s);
      continue;
    }
    r->sockets_.push_back(s);
  }
  if (r->sockets_.empty()) return nullptr;
  return r;
}

Rendezvous::~Rendezvous() {
  for (int s : sockets_) ::close(s);
  for (auto& u : unread_) ::close(u.first);
}

void Rendezvous::take_waiting() {
  const uint64_t now = now_ms();
  // Accept what is queued: another user's connection is closed at once (it never gets to send anything we read).
  for (int s : sockets_) {
    for (;;) {
      const int c = accept4(s, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
      if (c < 0) break;
      int pid = 0;
      if (!peer_is_us(c, &pid) || unread_.size() >= kMaxOffers) {
        ::close(c);
        continue;
      }
      unread_.emplace_back(c, now);
    }
  }
  // Read each connection's offer; one that sends nothing in time, or anything else than an offer, is dropped.
  for (size_t i = 0; i < unread_.size();) {
    const int c = unread_[i].first;
    OfferMsg m{};
    int fds[2] = {-1, -1};
    const int r = recv_with_fds(c, &m, sizeof m, fds, 2);
    if (r == 0 && now - unread_[i].second < kOfferLifeMs) {
      ++i;
      continue;
    }
    unread_.erase(unread_.begin() + static_cast<ptrdiff_t>(i));
    std::unique_ptr<Handshake> h;
    int pid = 0;
    if (r == 1 && std::memcmp(m.magic, kMagic, sizeof m.magic) == 0 && m.kind == kOffer &&
        valid_ring_size(m.ring_bytes) && is_eventfd(fds[1]) && peer_is_us(c, &pid) && offers_.size() < kMaxOffers) {
      h.reset(new (std::nothrow) Handshake());
    }
    if (!h) {
      if (fds[0] >= 0) ::close(fds[0]);
      if (fds[1] >= 0) ::close(fds[1]);
      ::close(c);
      continue;
    }
    h->unix_ = c;
    h->memfd_ = fds[0];
    h->bell_ = fds[1];
    h->peer_pid_ = pid;
    h->ring_bytes_ = m.ring_bytes;
    static_assert(2 * sizeof(WireAddress) == sizeof h->key_, "the key is the offer's two addresses");
    std::memcpy(h->key_, &m.local, sizeof m.local);
    std::memcpy(h->key_ + sizeof m.local, &m.peer, sizeof m.peer);
    h->created_ms_ = now;
    offers_.push_back(std::move(h));
  }
  // Offers nobody claimed in time (the initiator's MPA Request never came) go.
  for (size_t i = 0; i < offers_.size();) {
    if (now - offers_[i]->created_ms_ >= kOfferLifeMs) {
      offers_.erase(offers_.begin() + static_cast<ptrdiff_t>(i));
    } else {
      ++i;
    }
  }
}

std::unique_ptr<Handshake> Rendezvous::claim(const net::Address& local, const net::Address& peer) {
  std::lock_guard<std::mutex> lock(mu_);
  take_waiting();
  const WireAddress l = to_wire(local), p = to_wire(peer);
  for (size_t i = 0; i < offers_.size(); ++i) {
    WireAddress ol, op;
    std::memcpy(&ol, offers_[i]->key_, sizeof ol);
    std::memcpy(&op, offers_[i]->key_ + sizeof ol, sizeof op);
    // The initiator's local end is our peer, and the other way round.
    if (same(ol, p) && same(op, l)) {
      std::unique_ptr<Handshake> h = std::move(offers_[i]);
      offers_.erase(offers_.begin() + static_cast<ptrdiff_t>(i));
      return h;
    }
  }
  return nullptr;
}

#endif  // __linux__

}  // namespace netdirect::soft::shm

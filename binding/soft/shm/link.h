// Same-host transport of the software provider (docs/shm.md): once MPA over TCP has set a connection up, both ends
// on one host and of one user move its FPDUs through two byte rings in a sealed memfd instead of the TCP stream.
// The TCP connection stays open as the liveness signal (its end is the connection's end, as today) and carries
// nothing else.
//
//  * Link: one established same-host connection — the mapping, the two rings (shm/ring.h), this side's doorbell
//    (an eventfd the engine watches) and the peer's.
//  * Rendezvous: the side channel of a listener — an abstract Unix socket per listening address
//    ("\0netdirect-shm/3/<ip:port>", nothing in the file system), where an initiator of the same uid (SO_PEERCRED)
//    offers rings for one TCP 4-tuple before it sends its MPA Request.
//  * Handshake: one connection's side of the agreement while MPA runs. The initiator offers (memfd + its doorbell,
//    SCM_RIGHTS) right after its TCP connect; the responder claims the offer when the Request arrives and, when the
//    application accepts, answers with its doorbell before its MPA Reply leaves; the initiator reads the answer
//    when the Reply arrives. Either side that finds anything amiss stays on TCP, and so does the other (no answer
//    = TCP). The wire (MPA frames, private data) is byte for byte what it is without this.
// Linux only; elsewhere every entry point says "not available" and connections stay on TCP.
#ifndef NETDIRECT_SOFT_SHM_LINK_H_
#define NETDIRECT_SOFT_SHM_LINK_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "soft/net/socket.h"
#include "soft/shm/place.h"
#include "soft/shm/ring.h"

namespace netdirect::soft::shm {

// Bytes per direction (a power of two; the offer names it and the responder checks it, ring.h valid_ring_size).
constexpr uint64_t kDefaultRingBytes = uint64_t{1} << 20;
// The FPDU size limit on a same-host connection: the largest multiple of 8 whose FPDU's ULPDU Length still fits
// its 16 bits (RFC 5044 §6: ULPDU Length counts the ULPDU only; docs/iwarp.md §1.4).
constexpr uint32_t kShmMss = 65528;

// Is the same-host transport built in (Linux)?
bool available();
// NETDIRECT_SHM: "0" off, "1" on, unset/other = kDefaultOn. Read by an adapter when it opens.
bool enabled_from_env();
constexpr bool kDefaultOn = true;  // on where both ends can (docs/shm.md "Turning it on and off")
// NETDIRECT_SHM_SPIN_MICROS: how long a consumer driving progress from its own loop keeps polling after a message
// while the adapter has a same-host connection (INDSharedMemory::GetBusyPollMicros); a whole number up to 1000000,
// 0 = never. Unset or not a number: kDefaultSpinMicros.
uint32_t spin_micros_from_env();
constexpr uint32_t kDefaultSpinMicros = 50;

class Link {
 public:
  ~Link();
  Link(const Link&) = delete;
  Link& operator=(const Link&) = delete;

  // The stream, as net::send_iov / net::recv_iov: bytes moved, -EAGAIN when the ring is full / empty, -EPROTO when
  // the peer published an index that cannot be (the ring is corrupt: the connection must end).
  ptrdiff_t send_iov(const iovec* iov, int iovcnt);
  ptrdiff_t recv_iov(const iovec* iov, int iovcnt);
  ptrdiff_t recv(void* buf, size_t len);
  // Before the receiving side sleeps on its doorbell: true when bytes (or corruption) arrived meanwhile.
  bool arm_rx() { return rx_.arm(); }
  // The receiving side polls the ring itself: the peer need not kick it.
  void disarm_rx() { rx_.disarm(); }
  bool rx_pending() { return rx_.readable() > 0 || rx_.corrupt(); }
  // The descriptor the engine watches (readable after a kick); drain it before reading the ring.
  int doorbell() const { return my_bell_; }
  void drain_doorbell();
  void kick_self();  // makes our own doorbell readable (the engine takes the ring over again)
  void kick_peer();  // makes the peer's doorbell readable
  uint64_t ring_bytes() const { return ring_bytes_; }
  int peer_pid() const { return peer_pid_; }
  // The whole shared mapping (control blocks and rings): what a hostile peer can scribble on (test/native tests).
  uint8_t* shared_bytes() const { return static_cast<uint8_t*>(map_); }
  size_t shared_size() const { return map_len_; }

  // Placement by the initiator (shm/place.h, docs/shm.md): our table for the peer's Writes into us, and our
  // placer for our Writes into the peer.
  PlaceTable& place_table() { return table_; }
  Placer& placer() { return placer_; }
  uint64_t tx_produced() const { return tx_.produced(); }
  bool peer_asleep() const { return tx_.consumer_asleep(); }
  uint64_t peer_polls() const { return tx_.consumer_polls(); }
  // How much the peer has said to us: its ring bytes and its placed Writes (Placer::worth_it's hint).
  uint64_t peer_sent() const { return rx_.produced_hint() + table_.peer_placed(); }
  void note_rx_poll() { rx_.note_poll(); }
  uint64_t rx_consumed() const { return rx_.consumed(); }
  // The peer's place area (where it is the target): tests look at what it publishes.
  PlaceArea* peer_place_area() const { return peer_area_; }
  // The side-channel connection (the peer's RegionMsgs arrive there): tests look at what waits on it.
  int side_channel() const { return side_; }

 private:
  friend class Handshake;
  Link() = default;

  void* map_ = nullptr;
  size_t map_len_ = 0;
  uint64_t ring_bytes_ = 0;
  int my_bell_ = -1;
  int peer_bell_ = -1;
  int peer_pid_ = 0;
  RingReader rx_;
  RingWriter tx_;
  void init_placement(int my_dir);  // my_dir: the direction this side produces into
  uint64_t secret_ = 0;             // our probe word: only a process that can read our memory learns it
  PlaceTable table_;
  Placer placer_;
  PlaceArea* peer_area_ = nullptr;
  int side_ = -1;  // the side-channel connection, kept for placement's RegionMsgs (place.h)
};

class Rendezvous;

class Handshake {
 public:
  ~Handshake();
  Handshake(const Handshake&) = delete;
  Handshake& operator=(const Handshake&) = delete;

  // Initiator, right after its TCP connect (before the MPA Request): offers rings to the listener at the socket's
  // peer address if it is on this host and answers as our uid. nullptr: no offer (stay on TCP).
  static std::unique_ptr<Handshake> offer(net::Socket tcp, uint64_t ring_bytes = kDefaultRingBytes);
  // Initiator, when the MPA Reply accepted the connection: the responder's answer. nullptr: stay on TCP.
  std::unique_ptr<Link> finish();
  // Responder, when the application accepts (before the MPA Reply is sent): maps the offered rings and answers.
  // nullptr: stay on TCP (the initiator then finds no answer and stays on TCP too).
  std::unique_ptr<Link> accept();

 private:
  friend class Rendezvous;
  Handshake() = default;
  int unix_ = -1;   // the side-channel connection
  int memfd_ = -1;
  int bell_ = -1;   // initiator: our doorbell; responder: the initiator's
  int peer_pid_ = 0;
  uint64_t ring_bytes_ = 0;
  void* map_ = nullptr;  // initiator: its mapping, handed to the Link
  size_t map_len_ = 0;
  uint8_t key_[40] = {};  // the TCP 4-tuple as the offering initiator sees it (link.cc WireAddress x 2)
  uint64_t created_ms_ = 0;
};

// A listener's side channel (responder).
class Rendezvous {
 public:
  // Binds one abstract Unix socket per listening address; nullptr when none could be had (the listener then
  // serves TCP only).
  static std::shared_ptr<Rendezvous> open(const std::vector<net::Address>& listening);
  ~Rendezvous();
  // The offer for this connection (local/peer as the responder's socket sees them), if its initiator made one:
  // takes every offer waiting on the side channel, keeps the others a while (bounded), returns the match.
  std::unique_ptr<Handshake> claim(const net::Address& local, const net::Address& peer);

 private:
  Rendezvous() = default;
  void take_waiting();
  std::mutex mu_;
  std::vector<int> sockets_;
  std::vector<std::unique_ptr<Handshake>> offers_;   // received, not yet claimed
  std::vector<std::pair<int, uint64_t>> unread_;     // accepted, offer not read yet (fd, accepted at)
};

// The abstract socket name of a listening address (tests).
std::string rendezvous_name(const net::Address& a);

}  // namespace netdirect::soft::shm

#endif  // NETDIRECT_SOFT_SHM_LINK_H_

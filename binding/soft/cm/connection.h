// The hand-off between connection management (connector_core.cc, listener_core.cc, cm.cc: TCP + MPA negotiation)
// and the data path (qp/qp.cc, qp_tx.cc, qp_rx.cc). After MPA negotiation the connector attaches
// the connected socket to the QP; from then on the QP owns the socket and reports back through
// ConnectionEvents.
#ifndef NETDIRECT_SOFT_CONNECTION_H_
#define NETDIRECT_SOFT_CONNECTION_H_

#include <memory>

#include "soft/wire/mpa.h"
#include "soft/net/socket.h"
#include "soft/shm/link.h"

namespace netdirect::soft {

// What connection setup hands to a QP once MPA negotiation is done.
struct Connection {
  net::Socket socket = net::kInvalidSocket;  // connected, non-blocking, TCP_NODELAY
  wire::MpaNegotiated mpa;                   // CRC, IRD/ORD (ours), P2P/RTR type
  bool initiator = false;
  net::Address local;
  net::Address peer;
  uint32_t mss = 1460;  // TCP MSS: every FPDU we send is <= mss & ~7 (docs/iwarp.md §1.4)
  // Same host (docs/shm.md): the FPDUs go through these rings, the socket only says whether the peer is there.
  std::shared_ptr<shm::Link> shm;
};

// Events a QP reports to the connector that owns its connection; called on the adapter's engine
// thread, without QP locks held.
class ConnectionEvents {
 public:
  // Responder with P2P: the initiator's RTR arrived, the connection is established (Accept completes).
  virtual void on_rtr_received() = 0;
  // The connection ended: peer close (FIN/RST), a Terminate received or sent, a protocol or socket
  // error. The QP has already failed/flushed its requests; `status` is ND_SUCCESS for an orderly close
  // by the peer, otherwise the error (e.g. ND_REMOTE_ERROR, ND_ACCESS_VIOLATION, ND_CONNECTION_ABORTED).
  virtual void on_connection_closed(HRESULT status) = 0;

 protected:
  ~ConnectionEvents() = default;
};

}  // namespace netdirect::soft

#endif  // NETDIRECT_SOFT_CONNECTION_H_

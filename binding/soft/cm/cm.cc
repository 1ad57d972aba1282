#include "soft/env.h"
#include "soft/cm/cm.h"

#ifndef _WIN32
#include <sys/uio.h>
#endif

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "soft/adapter.h"
#include "soft/wire/crc32c.h"

namespace netdirect::soft::cm {

namespace {

uint16_t clamp_limit(ULONG v) { return static_cast<uint16_t>(std::min<ULONG>(v, limits::kMaxReadLimit)); }

bool read_crc_env() { return env_switch("NETDIRECT_SOFT_CRC", true); }

// NETDIRECT_SOFT_TCP_TIMEOUT_MS: a decimal number of milliseconds (0 = the OS defaults); anything else = the default.
uint32_t read_tcp_timeout_env() {
  std::string v_env;
  const char* v = env_value("NETDIRECT_SOFT_TCP_TIMEOUT_MS", v_env);
  if (v == nullptr || *v == '\0') return kTcpTimeoutMs;
  char* end = nullptr;
  const unsigned long ms = std::strtoul(v, &end, 10);
  if (*end != '\0' || ms > 24ul * 3600 * 1000) return kTcpTimeoutMs;
  return static_cast<uint32_t>(ms);
}

// Options of every connection's socket once TCP is up: no Nagle delay (each FPDU goes out at once) and dead-peer
// detection (docs/liveness.md).
void tune_connected(net::Socket s) {
  net::set_nodelay(s);
  net::set_liveness(s, tcp_timeout_default());
}

}  // namespace

uint32_t tcp_timeout_default() {
  static const uint32_t ms = read_tcp_timeout_env();
  return ms;
}

uint32_t handshake_timeout_from_env() {
  std::string v_env;
  const char* v = env_value("NETDIRECT_HANDSHAKE_TIMEOUT_MS", v_env);
  if (v == nullptr || *v == '\0') return kHandshakeTimeoutMs;
  char* end = nullptr;
  const unsigned long ms = std::strtoul(v, &end, 10);
  if (*end != '\0' || ms == 0 || ms > kMaxHandshakeTimeoutMs) return kHandshakeTimeoutMs;
  return static_cast<uint32_t>(ms);
}

bool crc_default() {
  static const bool on = read_crc_env();
  return on;
}

wire::MpaLocal initiator_settings(ULONG inbound_read_limit, ULONG outbound_read_limit) {
  wire::MpaLocal l;
  l.want_crc = crc_default();
  l.use_v2 = true;
  l.max_ird = static_cast<uint16_t>(limits::kMaxReadLimit);
  l.max_ord = static_cast<uint16_t>(limits::kMaxReadLimit);
  l.ird = clamp_limit(inbound_read_limit);
  l.ord = clamp_limit(outbound_read_limit);
  l.p2p = true;
  l.rtr_types = wire::kRtrWrite | wire::kRtrRead;  // the Request then carries ORD >= 1 (Read RTR slot)
  return l;
}

wire::MpaLocal responder_settings(const wire::MpaFrame& request, ULONG inbound_read_limit,
                                  ULONG outbound_read_limit) {
  wire::MpaLocal l;
  l.want_crc = crc_default();
  l.ird = clamp_limit(inbound_read_limit);
  l.ord = clamp_limit(outbound_read_limit);
  // Capping max_ird at the application's inbound limit keeps mpa_respond from raising our IRD to the
  // peer's ORD: ND limits are min(own, peer's). A Read RTR needs one inbound slot (docs/iwarp.md §1.2).
  l.max_ird = l.ird;
  if (request.v2 && request.params.p2p && (request.params.rtr & (wire::kRtrWrite | wire::kRtrRead)) == wire::kRtrRead &&
      l.max_ird == 0) {
    l.max_ird = 1;
    l.ird = 1;
  }
  l.max_ord = static_cast<uint16_t>(limits::kMaxReadLimit);
  l.rtr_types = wire::kRtrWrite | wire::kRtrRead;
  return l;
}

// ---- MpaSetup ---------------------------------------------------------------------------------------

HRESULT MpaSetup::start_initiator(const wire::MpaLocal& local, const void* private_data, ULONG len) {
  if (len > limits::kMaxPrivateData) return ND_INVALID_BUFFER_SIZE;
  if (len != 0 && private_data == nullptr) return ND_INVALID_PARAMETER;
  initiator_ = true;
  local_ = local;
  request_ = wire::mpa_make_request(local, static_cast<const uint8_t*>(private_data), static_cast<uint16_t>(len));
  queue_frame(request_);
  request_.private_data = nullptr;
  parser_.reset(new wire::MpaParser(wire::MpaFrameKind::kReply));
  state_ = MpaState::kAwaitReply;
  return ND_SUCCESS;
}

void MpaSetup::start_responder() {
  initiator_ = false;
  parser_.reset(new wire::MpaParser(wire::MpaFrameKind::kRequest));
  state_ = MpaState::kAwaitRequest;
}

MpaEvent MpaSetup::fail(HRESULT status, wire::MpaError e) {
  state_ = MpaState::kFailed;
  status_ = status;
  if (e != wire::MpaError::kNone) error_ = e;
  return MpaEvent::kFailed;
}

void MpaSetup::queue_frame(const wire::MpaFrame& f) {
  const size_t at = out_.size();
  out_.resize(at + wire::mpa_frame_size(f));
  const size_t n = wire::mpa_encode(f, out_.data() + at, out_.size() - at);
  out_.resize(at + n);
}

void MpaSetup::queue_terminate(wire::TermCode code, bool crc) {
  wire::TerminateInfo t;
  t.code = code;
  const size_t body = wire::terminate_body_size(t);
  const size_t ulpdu = wire::kDdpUntaggedHdrSize + body;
  wire::DdpHeader h;
  h.opcode = wire::RdmapOpcode::kTerminate;
  h.last = true;
  h.qn = 2;
  h.msn = wire::kMsnFirst;
  h.mo = 0;
  const size_t at = out_.size();
  out_.resize(at + wire::fpdu_size(ulpdu));
  uint8_t* p = out_.data() + at;
  size_t n = wire::encode_fpdu_header(h, static_cast<uint16_t>(ulpdu), p);
  n += wire::encode_terminate_body(t, p + n, out_.size() - at - n);
  const uint32_t state = crc32c_update(kCrc32cInit, p, n);
  n += wire::encode_fpdu_trailer(state, ulpdu, crc, p + n);
  out_.resize(at + n);
}

void MpaSetup::keep_peer_frame(const wire::MpaFrame& f) {
  peer_frame_ = f;
  peer_frame_.private_data = nullptr;
  peer_pd_.assign(f.private_data, f.private_data + f.private_data_len);
  if (f.v2) {
    peer_ird_ = std::min<ULONG>(f.params.ird, limits::kMaxReadLimit);
    peer_ord_ = std::min<ULONG>(f.params.ord, limits::kMaxReadLimit);
  } else {
    peer_ird_ = limits::kMaxReadLimit;
    peer_ord_ = limits::kMaxReadLimit;
  }
}

MpaEvent MpaSetup::on_bytes(const uint8_t* data, size_t len) {
  if (len == 0) return MpaEvent::kNone;
  switch (state_) {
    case MpaState::kAwaitReply:
    case MpaState::kAwaitRequest:
      break;
    case MpaState::kReplyAccepted:
    case MpaState::kRequestHeld:
      // The peer must wait for our Reply / first FPDU (docs/iwarp.md §1.1 "nothing may follow").
      return fail(ND_CONNECTION_ABORTED);
    default:
      return MpaEvent::kNone;
  }
  size_t used = 0;
  const wire::MpaParseStatus ps = parser_->feed(data, len, &used);
  if (ps == wire::MpaParseStatus::kNeedMore) return MpaEvent::kNone;
  if (ps == wire::MpaParseStatus::kError) {
    const wire::MpaDecision d = wire::mpa_parse_failure(
        initiator_ ? wire::MpaFrameKind::kReply : wire::MpaFrameKind::kRequest, parser_->error());
    if (d.action == wire::MpaAction::kTerminate) queue_terminate(d.term, request_.crc);
    return fail(ND_CONNECTION_ABORTED, parser_->error());
  }
  const wire::MpaFrame f = parser_->frame();
  keep_peer_frame(f);
  if (used < len) return fail(ND_CONNECTION_ABORTED);  // bytes behind the frame

  if (initiator_) {
    const wire::MpaDecision d = wire::mpa_check_reply(request_, f, local_, &negotiated_);
    switch (d.action) {
      case wire::MpaAction::kAccept:
        state_ = MpaState::kReplyAccepted;
        return MpaEvent::kReplyAccepted;
      case wire::MpaAction::kRejected:
        state_ = MpaState::kRejected;
        status_ = ND_CONNECTION_REFUSED;
        error_ = d.reason;
        return MpaEvent::kRejected;
      case wire::MpaAction::kTerminate:
        queue_terminate(d.term, request_.crc || f.crc);
        // Terms we cannot meet are a refusal; a malformed Reply is an aborted setup.
        return fail(d.reason == wire::MpaError::kNoMatchingRtr || d.reason == wire::MpaError::kInsufficientIrd
                        ? ND_CONNECTION_REFUSED
                        : ND_CONNECTION_ABORTED,
                    d.reason);
      default:
        return fail(ND_CONNECTION_ABORTED, d.reason);
    }
  }

  // Responder: refuse what no Accept could satisfy before the application sees it.
  wire::MpaFrame reply;
  wire::MpaNegotiated n;
  const wire::MpaDecision d =
      wire::mpa_respond(f, responder_settings(f, limits::kMaxReadLimit, limits::kMaxReadLimit), &reply, &n);
  if (d.action != wire::MpaAction::kAccept) {
    if (d.reply_frame) queue_frame(reply);
    return fail(ND_CONNECTION_REFUSED, d.reason);
  }
  state_ = MpaState::kRequestHeld;
  return MpaEvent::kRequestReceived;
}

MpaEvent MpaSetup::on_closed(HRESULT status) {
  switch (state_) {
    case MpaState::kAwaitReply:
      // No Reply: nobody listens, the listener's backlog is full, or a Rev 0 reject (siw sends no frame).
      if (status == ND_SUCCESS || status == ND_CONNECTION_ABORTED) status = ND_CONNECTION_REFUSED;
      return fail(status);
    case MpaState::kAwaitRequest:
    case MpaState::kReplyAccepted:
    case MpaState::kRequestHeld:
    case MpaState::kAccepted:
      return fail(ND_CONNECTION_ABORTED);
    default:
      return MpaEvent::kNone;
  }
}

MpaEvent MpaSetup::on_timeout() {
  if (state_ == MpaState::kAwaitReply || state_ == MpaState::kAwaitRequest) return fail(ND_IO_TIMEOUT);
  return MpaEvent::kNone;
}

uint32_t MpaSetup::timeout_ms() const {
  if (state_ == MpaState::kAwaitReply) return kReplyTimeoutMs;
  if (state_ == MpaState::kAwaitRequest) return kRequestTimeoutMs;
  return 0;
}

HRESULT MpaSetup::accept(const wire::MpaLocal& local, const void* private_data, ULONG len) {
  if (state_ != MpaState::kRequestHeld) return state_ == MpaState::kFailed ? ND_CONNECTION_ABORTED : ND_CONNECTION_INVALID;
  if (len > limits::kMaxPrivateData) return ND_INVALID_BUFFER_SIZE;
  if (len != 0 && private_data == nullptr) return ND_INVALID_PARAMETER;
  local_ = local;
  wire::MpaFrame reply;
  const wire::MpaDecision d = wire::mpa_respond(peer_frame_, local, &reply, &negotiated_);
  if (d.action != wire::MpaAction::kAccept) {
    if (d.reply_frame) queue_frame(reply);
    fail(ND_CONNECTION_ABORTED, d.reason);
    return ND_CONNECTION_ABORTED;
  }
  reply.private_data = static_cast<const uint8_t*>(private_data);
  reply.private_data_len = static_cast<uint16_t>(len);
  queue_frame(reply);
  state_ = MpaState::kAccepted;
  return ND_SUCCESS;
}

HRESULT MpaSetup::reject(const void* private_data, ULONG len) {
  if (state_ != MpaState::kRequestHeld) return state_ == MpaState::kFailed ? ND_CONNECTION_ABORTED : ND_CONNECTION_INVALID;
  if (len > limits::kMaxPrivateData) return ND_INVALID_BUFFER_SIZE;
  if (len != 0 && private_data == nullptr) return ND_INVALID_PARAMETER;
  const wire::MpaLocal l = responder_settings(peer_frame_, 0, 0);
  const wire::MpaFrame r =
      wire::mpa_make_reject(peer_frame_, l, static_cast<const uint8_t*>(private_data), static_cast<uint16_t>(len));
  if (peer_frame_.rev >= wire::kMpaRev1) queue_frame(r);  // as siw: no reject frame for Rev 0
  state_ = MpaState::kRejected;
  return ND_SUCCESS;
}

void MpaSetup::refuse() { reject(nullptr, 0); }

HRESULT MpaSetup::decline() {
  if (state_ != MpaState::kReplyAccepted) return ND_CONNECTION_INVALID;
  queue_terminate(wire::term_code(wire::LlpErr::kLocalCatastrophic), negotiated_.crc);
  state_ = MpaState::kRejected;
  return ND_SUCCESS;
}

// ---- Channel ----------------------------------------------------------------------------------------

Channel::Channel(Engine& engine, net::Socket s, Owner* owner, uint32_t deadline_ms)
    : engine_(engine), socket_(s), owner_(owner), deadline_ms_(deadline_ms) {}

Channel::~Channel() {
  if (socket_ != net::kInvalidSocket) close(true);
  disarm_timer();
}

void Channel::arm_timer() {
  disarm_timer();
  const uint32_t ms = std::min(setup_.timeout_ms(), deadline_ms_);
  if (ms == 0) return;
  timer_ = engine_.add_timer(ms, [this] {
    timer_ = 0;
    handle(setup_.on_timeout());
  });
}

void Channel::disarm_timer() {
  if (timer_ != 0) engine_.cancel_timer(timer_);
  timer_ = 0;
}

void Channel::update_interest() {
  if (socket_ == net::kInvalidSocket) return;
  uint32_t want = 0;
  if (reading_) want |= Engine::kRead;
  if (connecting_ || setup_.out_size() > 0) want |= Engine::kWrite;
  if (want == 0) {
    // Nothing to wait for (a Reply sent, the QP takes over next): level-triggered RDHUP must not spin.
    if (registered_) engine_.remove(socket_, this);
    registered_ = false;
    interest_ = 0;
    return;
  }
  if (!registered_) {
    registered_ = engine_.add(socket_, this, want);
    interest_ = want;
  } else if (want != interest_) {
    engine_.modify(socket_, this, want);
    interest_ = want;
  }
}

void Channel::start_connect(const net::Address& peer, uint32_t deadline_ms) {
  deadline_ms_ = deadline_ms;
  connecting_ = true;
  // Before connect: TCP_USER_TIMEOUT also bounds the SYN retransmissions (else ~2 min, tcp_syn_retries).
  net::set_liveness(socket_, tcp_timeout_default());
  arm_timer();  // the deadline covers the TCP connect too (a peer that never answers the SYN)
  const int r = net::connect_to(socket_, peer);
  if (r == -EINPROGRESS) {
    update_interest();
    return;
  }
  if (r != 0) {
    connecting_ = false;
    handle(setup_.on_closed(net::status_from_errno(r)));
    return;
  }
  on_tcp_connected();
}

// A connect to a port nobody listens on can reach its own socket: when the kernel picks the destination port as the
// source port (or the application binds it, connect({ localPort })), TCP's simultaneous open joins the socket to
// itself (RFC 9293 section 3.5) and it would read its own MPA Request. Nobody listens there: ND_CONNECTION_REFUSED,
// what the same connect gets from any other source port.
void Channel::on_tcp_connected() {
  connecting_ = false;
  net::Address local, peer;
  if (net::local_address(socket_, &local) == 0 && net::peer_address(socket_, &peer) == 0 && local.same_ip(peer) &&
      local.port() == peer.port()) {
    handle(setup_.on_closed(ND_CONNECTION_REFUSED));
    return;
  }
  tune_connected(socket_);
  reading_ = true;
  if (shm_offer_) shm_hs_ = shm::Handshake::offer(socket_);  // before the Request: the responder looks on it
  if (!send_pending()) return;
  update_interest();
}

void Channel::start_accept() {
  tune_connected(socket_);
  setup_.start_responder();
  reading_ = true;
  arm_timer();
  update_interest();
}

bool Channel::send_pending() {
  // An initiator that declines a same-host connection after the Reply: its Terminate goes where the responder's
  // queue pair reads, the ring (docs/shm.md).
  const bool ring = shm_link_ && setup_.initiator();
  while (setup_.out_size() > 0) {
    iovec iov{const_cast<uint8_t*>(setup_.out_data()), setup_.out_size()};
    const ptrdiff_t n = ring ? shm_link_->send_iov(&iov, 1) : net::send_iov(socket_, &iov, 1);
    if (n == -EAGAIN) return true;
    if (n < 0) {
      close_when_sent_ = false;
      notify_when_sent_ = false;
      handle(setup_.on_closed(net::status_from_errno(static_cast<int>(n))));
      return false;
    }
    setup_.out_consumed(static_cast<size_t>(n));
  }
  if (close_when_sent_) {
    close_when_sent_ = false;
    net::shutdown_write(socket_);
    close(false);
    return false;
  }
  if (notify_when_sent_) {
    notify_when_sent_ = false;
    update_interest();
    report(MpaEvent::kNone);
    return false;
  }
  return true;
}

void Channel::flush() {
  if (socket_ == net::kInvalidSocket) return;
  reading_ = false;  // the peer's next bytes (RTR / first FPDU) belong to the QP
  disarm_timer();
  if (setup_.state() == MpaState::kAccepted) {
    // Same host: our answer is on the side channel before the Reply is on the socket (shm/link.h).
    if (shm_hs_) shm_link_ = shm_hs_->accept();
    shm_hs_.reset();
    notify_when_sent_ = true;
  } else {
    close_when_sent_ = true;  // reject (application, backlog, failed negotiation)
  }
  if (!send_pending()) return;
  update_interest();
}

net::Socket Channel::release_socket() {
  disarm_timer();
  if (registered_ && socket_ != net::kInvalidSocket) engine_.remove(socket_, this);
  registered_ = false;
  const net::Socket s = socket_;
  socket_ = net::kInvalidSocket;
  return s;
}

void Channel::close(bool abortive) {
  const net::Socket s = release_socket();
  net::close_socket(s, abortive);
}

void Channel::report(MpaEvent ev) {
  if (owner_ != nullptr) owner_->on_channel_event(this, ev);  // may destroy this: nothing after it
}

void Channel::handle(MpaEvent ev) {
  switch (ev) {
    case MpaEvent::kNone:
      return;
    case MpaEvent::kReplyAccepted:
    case MpaEvent::kRequestReceived:
      if (ev == MpaEvent::kReplyAccepted && shm_hs_) {
        shm_link_ = shm_hs_->finish();  // the responder answered before it sent the Reply (or not at all: TCP)
        shm_hs_.reset();
      } else if (ev == MpaEvent::kRequestReceived && rendezvous_) {
        net::Address local, peer;
        if (net::local_address(socket_, &local) == 0 && net::peer_address(socket_, &peer) == 0) {
          shm_hs_ = rendezvous_->claim(local, peer);
        }
      }
      disarm_timer();
      update_interest();
      report(ev);
      return;
    case MpaEvent::kRejected:
      close(false);
      report(ev);
      return;
    case MpaEvent::kFailed:
      disarm_timer();
      if (socket_ != net::kInvalidSocket) {
        if (setup_.out_size() > 0) {
          // Best effort: a Terminate or reject frame for the peer, then an orderly close.
          iovec iov{const_cast<uint8_t*>(setup_.out_data()), setup_.out_size()};
          net::send_iov(socket_, &iov, 1);
          net::shutdown_write(socket_);
          close(false);
        } else {
          close(true);
        }
      }
      report(ev);
      return;
  }
}

void Channel::on_io(uint32_t events) {
  if (socket_ == net::kInvalidSocket) return;
  if (connecting_) {
    const int r = net::connect_result(socket_);
    if (r != 0) {
      connecting_ = false;
      handle(setup_.on_closed(net::status_from_errno(r)));
      return;
    }
    if ((events & Engine::kWrite) == 0) return;
    on_tcp_connected();
    return;
  }
  if (events & Engine::kWrite) {
    if (!send_pending()) return;
    update_interest();
  }
  if (!reading_ || (events & Engine::kRead) == 0) return;
  uint8_t buf[1024];
  for (;;) {
    const ptrdiff_t n = net::recv_bytes(socket_, buf, sizeof buf);
    if (n == -EAGAIN) return;
    if (n <= 0) {
      handle(setup_.on_closed(n == 0 ? ND_SUCCESS : net::status_from_errno(static_cast<int>(n))));
      return;
    }
    const MpaEvent ev = setup_.on_bytes(buf, static_cast<size_t>(n));
    if (ev != MpaEvent::kNone) {
      handle(ev);
      return;
    }
  }
}

}  // namespace netdirect::soft::cm

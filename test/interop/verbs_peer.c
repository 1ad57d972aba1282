// verbs_peer: a small rdma_cm + libibverbs program (rdma-core 44) that is the peer of test/interop/nd_peer.mjs
// for the siw interop tier (issue #5, verbs.interop.test.ts). Built on the host (Debian 12, rdma-core 44,
// dynamically linked against librdmacm.so.1 / libibverbs.so.1) and run in the siw-vm guest over siw0.
//
//   verbs_peer server BIND_ADDR PORT SEED SIZE[,SIZE...]   accepts one connection (the netdirect client)
//   verbs_peer client HOST      PORT SEED SIZE[,SIZE...]   connects to a netdirect server
//
// Protocol (the same in nd_peer.mjs). The acceptor registers a buffer of max(SIZE) bytes with
// LOCAL_WRITE|REMOTE_READ|REMOTE_WRITE and puts {addr u64, rkey u32, len u32} (big-endian) in the accept's
// private data. Then, for each round r with size N and s = SEED + 4r:
//   connector: RDMA Write pattern(s) (N bytes) to the acceptor's buffer, then Send pattern(s+1) (N bytes)
//   acceptor:  on that Send: checks its length and bytes, checks the buffer holds pattern(s) (the Write is
//              placed before the Send completes), fills the buffer with pattern(s+2), Sends pattern(s+3)
//   connector: checks that Send, RDMA Reads N bytes of the acceptor's buffer and checks pattern(s+2),
//              then Sends the 4 bytes "DONE" (the acceptor may then reuse its buffer)
// The connector disconnects at the end. Every completion must succeed and every byte must match.
// Each side keeps two max(SIZE) receives posted and re-posts one after every receive completion.
// Output: one line per checked step; "verbs_peer: ok" and exit 0, or "verbs_peer: FAIL ..." and exit 1.
#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <poll.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>

#define TIMEOUT_MS 30000
#define MAX_ROUNDS 64

static void fail(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fputs("verbs_peer: FAIL ", stdout);
  vprintf(fmt, ap);
  fputc('\n', stdout);
  va_end(ap);
  fflush(stdout);
  exit(1);
}

static void say(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vprintf(fmt, ap);
  fputc('\n', stdout);
  va_end(ap);
  fflush(stdout);
}

// The test pattern (nd_peer.mjs has the same): not periodic in 256, so misplaced blocks show.
static uint8_t pat(uint32_t seed, size_t i) {
  return (uint8_t)(i * 7 + (i >> 8) * 13 + (i >> 16) * 101 + (size_t)seed * 59);
}

static void fill(uint8_t *b, size_t n, uint32_t seed) {
  for (size_t i = 0; i < n; i++) b[i] = pat(seed, i);
}

static void check(const char *what, const uint8_t *b, size_t n, uint32_t seed) {
  for (size_t i = 0; i < n; i++) {
    if (b[i] != pat(seed, i)) {
      size_t bad = 0;
      for (size_t j = i; j < n; j++) bad += b[j] != pat(seed, j);
      fail("%s: byte %zu of %zu is 0x%02x, expected 0x%02x (%zu bytes differ)", what, i, n, b[i], pat(seed, i), bad);
    }
  }
}

struct cqw {
  struct ibv_comp_channel *ch;
  struct ibv_cq *cq;
};

struct peer {
  struct rdma_event_channel *ec;
  struct rdma_cm_id *id;  // the connected id
  struct ibv_pd *pd;
  struct cqw scq, rcq;
  struct ibv_qp *qp;
  size_t max;
  uint8_t *mem, *sendbuf, *readbuf, *rbuf[2], *rcopy, done[4];
  struct ibv_mr *mem_mr, *send_mr, *read_mr, *rbuf_mr[2], *done_mr;
  int next_rbuf;  // the receive buffer the next receive completion lands in
};

static struct rdma_cm_event *cm_wait(struct peer *p, enum rdma_cm_event_type want) {
  struct pollfd pfd = {.fd = p->ec->fd, .events = POLLIN};
  int r = poll(&pfd, 1, TIMEOUT_MS);
  if (r <= 0) fail("timeout waiting for %s", rdma_event_str(want));
  struct rdma_cm_event *ev;
  if (rdma_get_cm_event(p->ec, &ev)) fail("rdma_get_cm_event: %s", strerror(errno));
  if (ev->event != want) fail("got %s (status %d), expected %s", rdma_event_str(ev->event), ev->status, rdma_event_str(want));
  return ev;
}

static void cq_make(struct peer *p, struct cqw *w, int depth) {
  w->ch = ibv_create_comp_channel(p->id->verbs);
  if (!w->ch) fail("ibv_create_comp_channel: %s", strerror(errno));
  w->cq = ibv_create_cq(p->id->verbs, depth, NULL, w->ch, 0);
  if (!w->cq) fail("ibv_create_cq: %s", strerror(errno));
}

static void wait_wc(struct cqw *w, enum ibv_wc_opcode op, uint64_t wr_id, struct ibv_wc *wc, const char *what) {
  for (;;) {
    int n = ibv_poll_cq(w->cq, 1, wc);
    if (n < 0) fail("ibv_poll_cq (%s)", what);
    if (n == 0) {
      if (ibv_req_notify_cq(w->cq, 0)) fail("ibv_req_notify_cq");
      n = ibv_poll_cq(w->cq, 1, wc);
      if (n < 0) fail("ibv_poll_cq (%s)", what);
    }
    if (n == 1) break;
    struct pollfd pfd = {.fd = w->ch->fd, .events = POLLIN};
    if (poll(&pfd, 1, TIMEOUT_MS) <= 0) fail("timeout waiting for the completion of %s", what);
    struct ibv_cq *cq;
    void *ctx;
    if (ibv_get_cq_event(w->ch, &cq, &ctx)) fail("ibv_get_cq_event");
    ibv_ack_cq_events(cq, 1);
  }
  if (wc->status != IBV_WC_SUCCESS)
    fail("%s completed with %s (vendor_err 0x%x)", what, ibv_wc_status_str(wc->status), wc->vendor_err);
  if (wc->opcode != op || wc->wr_id != wr_id) fail("%s: completion opcode %d wr_id %llu, expected %d / %llu", what, wc->opcode,
                                                   (unsigned long long)wc->wr_id, op, (unsigned long long)wr_id);
}

static struct ibv_mr *reg(struct peer *p, uint8_t **buf, size_t n, int access) {
  if (posix_memalign((void **)buf, 4096, n ? n : 1)) fail("posix_memalign %zu", n);
  memset(*buf, 0, n);
  struct ibv_mr *mr = ibv_reg_mr(p->pd, *buf, n, access);
  if (!mr) fail("ibv_reg_mr %zu: %s", n, strerror(errno));
  return mr;
}

static void post_recv(struct peer *p, int i) {
  struct ibv_sge sge = {.addr = (uintptr_t)p->rbuf[i], .length = (uint32_t)p->max, .lkey = p->rbuf_mr[i]->lkey};
  struct ibv_recv_wr wr = {.wr_id = 100 + i, .sg_list = &sge, .num_sge = 1}, *bad;
  if (ibv_post_recv(p->qp, &wr, &bad)) fail("ibv_post_recv: %s", strerror(errno));
}

// Waits for the next receive (they complete in order), copies what it holds to p->rcopy and re-posts that
// buffer at once, so two receives stay posted whatever the caller does next: the peer may send its DONE and the
// next round's Send back to back, and a Send that finds no receive posted ends an iWARP connection.
static uint8_t *recv_next(struct peer *p, uint32_t *len, const char *what) {
  int i = p->next_rbuf;
  struct ibv_wc wc;
  wait_wc(&p->rcq, IBV_WC_RECV, 100 + i, &wc, what);
  p->next_rbuf ^= 1;
  *len = wc.byte_len;
  if (wc.byte_len > p->max) fail("%s: %u bytes, more than the %zu posted", what, wc.byte_len, p->max);
  memcpy(p->rcopy, p->rbuf[i], wc.byte_len);
  post_recv(p, i);
  return p->rcopy;
}

static void post_send(struct peer *p, enum ibv_wr_opcode op, uint64_t wr_id, void *addr, uint32_t len, uint32_t lkey,
                      uint64_t raddr, uint32_t rkey) {
  struct ibv_sge sge = {.addr = (uintptr_t)addr, .length = len, .lkey = lkey};
  struct ibv_send_wr wr = {.wr_id = wr_id, .sg_list = &sge, .num_sge = 1, .opcode = op, .send_flags = IBV_SEND_SIGNALED}, *bad;
  if (op == IBV_WR_RDMA_WRITE || op == IBV_WR_RDMA_READ) {
    wr.wr.rdma.remote_addr = raddr;
    wr.wr.rdma.rkey = rkey;
  }
  if (ibv_post_send(p->qp, &wr, &bad)) fail("ibv_post_send opcode %d: %s", op, strerror(errno));
}

static void setup(struct peer *p) {
  p->pd = ibv_alloc_pd(p->id->verbs);
  if (!p->pd) fail("ibv_alloc_pd");
  cq_make(p, &p->scq, 32);
  cq_make(p, &p->rcq, 32);
  struct ibv_qp_init_attr qa = {
      .send_cq = p->scq.cq,
      .recv_cq = p->rcq.cq,
      .cap = {.max_send_wr = 16, .max_recv_wr = 4, .max_send_sge = 1, .max_recv_sge = 1},
      .qp_type = IBV_QPT_RC,
      .sq_sig_all = 0,
  };
  if (rdma_create_qp(p->id, p->pd, &qa)) fail("rdma_create_qp: %s", strerror(errno));
  p->qp = p->id->qp;
  int rw = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_WRITE;
  p->mem_mr = reg(p, &p->mem, p->max, rw);
  p->send_mr = reg(p, &p->sendbuf, p->max, IBV_ACCESS_LOCAL_WRITE);
  p->read_mr = reg(p, &p->readbuf, p->max, IBV_ACCESS_LOCAL_WRITE);
  p->rbuf_mr[0] = reg(p, &p->rbuf[0], p->max, IBV_ACCESS_LOCAL_WRITE);
  p->rbuf_mr[1] = reg(p, &p->rbuf[1], p->max, IBV_ACCESS_LOCAL_WRITE);
  p->rcopy = malloc(p->max ? p->max : 1);
  if (!p->rcopy) fail("malloc %zu", p->max);
  p->done_mr = ibv_reg_mr(p->pd, p->done, sizeof p->done, IBV_ACCESS_LOCAL_WRITE);
  if (!p->done_mr) fail("ibv_reg_mr done");
  memcpy(p->done, "DONE", 4);
  post_recv(p, 0);  // before connect/accept: a Send with no receive posted ends an iWARP connection
  post_recv(p, 1);
}

static uint64_t be64(const uint8_t *b) {
  uint64_t v = 0;
  for (int i = 0; i < 8; i++) v = v << 8 | b[i];
  return v;
}
static uint32_t be32(const uint8_t *b) { return (uint32_t)b[0] << 24 | (uint32_t)b[1] << 16 | (uint32_t)b[2] << 8 | b[3]; }
static void put_be(uint8_t *b, uint64_t v, int n) {
  for (int i = n - 1; i >= 0; i--, v >>= 8) b[i] = (uint8_t)v;
}

static void resolve(const char *host, const char *port, struct sockaddr_storage *ss) {
  struct addrinfo hints = {.ai_family = AF_INET, .ai_socktype = SOCK_STREAM, .ai_flags = AI_NUMERICHOST}, *ai;
  if (getaddrinfo(host, port, &hints, &ai)) fail("bad address %s:%s", host, port);
  memcpy(ss, ai->ai_addr, ai->ai_addrlen);
  freeaddrinfo(ai);
}

static void run_acceptor(struct peer *p, const size_t *sizes, int rounds, uint32_t seed0) {
  for (int r = 0; r < rounds; r++) {
    size_t n = sizes[r];
    uint32_t s = seed0 + 4 * (uint32_t)r;
    char what[96];
    uint32_t len;
    snprintf(what, sizeof what, "round %d size %zu: the peer's Send", r, n);
    uint8_t *b = recv_next(p, &len, what);
    if (len != n) fail("%s has %u bytes, expected %zu", what, len, n);
    check(what, b, n, s + 1);
    say("round %d size %zu: received Send verified", r, n);
    snprintf(what, sizeof what, "round %d size %zu: the peer's RDMA Write into our buffer", r, n);
    check(what, p->mem, n, s);
    say("round %d size %zu: RDMA Write data verified", r, n);
    fill(p->mem, n, s + 2);  // what the peer Reads next
    fill(p->sendbuf, n, s + 3);
    snprintf(what, sizeof what, "round %d size %zu: our Send", r, n);
    post_send(p, IBV_WR_SEND, 1, p->sendbuf, (uint32_t)n, p->send_mr->lkey, 0, 0);
    struct ibv_wc wc;
    wait_wc(&p->scq, IBV_WC_SEND, 1, &wc, what);
    say("round %d size %zu: Send done", r, n);
    snprintf(what, sizeof what, "round %d size %zu: the peer's DONE", r, n);
    b = recv_next(p, &len, what);
    if (len != 4 || memcmp(b, "DONE", 4)) fail("%s: %u bytes, not DONE", what, len);
    say("round %d size %zu: peer Read done", r, n);
    // No clearing here: the peer's next Write may already have been placed (the seed differs per round).
  }
}

static void run_connector(struct peer *p, const size_t *sizes, int rounds, uint32_t seed0, uint64_t raddr, uint32_t rkey,
                          uint32_t rlen) {
  for (int r = 0; r < rounds; r++) {
    size_t n = sizes[r];
    uint32_t s = seed0 + 4 * (uint32_t)r;
    if (n > rlen) fail("the acceptor's buffer (%u bytes) is smaller than %zu", rlen, n);
    char what[96];
    struct ibv_wc wc;
    uint32_t len;
    fill(p->mem, n, s);
    fill(p->sendbuf, n, s + 1);
    post_send(p, IBV_WR_RDMA_WRITE, 2, p->mem, (uint32_t)n, p->mem_mr->lkey, raddr, rkey);
    post_send(p, IBV_WR_SEND, 1, p->sendbuf, (uint32_t)n, p->send_mr->lkey, 0, 0);
    snprintf(what, sizeof what, "round %d size %zu: our RDMA Write", r, n);
    wait_wc(&p->scq, IBV_WC_RDMA_WRITE, 2, &wc, what);
    snprintf(what, sizeof what, "round %d size %zu: our Send", r, n);
    wait_wc(&p->scq, IBV_WC_SEND, 1, &wc, what);
    say("round %d size %zu: RDMA Write and Send done", r, n);
    snprintf(what, sizeof what, "round %d size %zu: the peer's Send", r, n);
    uint8_t *b = recv_next(p, &len, what);
    if (len != n) fail("%s has %u bytes, expected %zu", what, len, n);
    check(what, b, n, s + 3);
    say("round %d size %zu: received Send verified", r, n);
    memset(p->readbuf, 0, n);
    snprintf(what, sizeof what, "round %d size %zu: our RDMA Read", r, n);
    post_send(p, IBV_WR_RDMA_READ, 3, p->readbuf, (uint32_t)n, p->read_mr->lkey, raddr, rkey);
    wait_wc(&p->scq, IBV_WC_RDMA_READ, 3, &wc, what);
    if (wc.byte_len != n) fail("%s: byte_len %u, expected %zu", what, wc.byte_len, n);
    check(what, p->readbuf, n, s + 2);
    say("round %d size %zu: RDMA Read data verified", r, n);
    snprintf(what, sizeof what, "round %d size %zu: our DONE", r, n);
    post_send(p, IBV_WR_SEND, 4, p->done, 4, p->done_mr->lkey, 0, 0);
    wait_wc(&p->scq, IBV_WC_SEND, 4, &wc, what);
  }
}

int main(int argc, char **argv) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  if (argc != 6 || (strcmp(argv[1], "server") && strcmp(argv[1], "client"))) {
    fprintf(stderr, "usage: verbs_peer server|client ADDR PORT SEED SIZE[,SIZE...]\n");
    return 2;
  }
  int server = !strcmp(argv[1], "server");
  uint32_t seed = (uint32_t)strtoul(argv[4], NULL, 0);
  size_t sizes[MAX_ROUNDS];
  int rounds = 0;
  struct peer P = {0}, *p = &P;
  for (char *tok = strtok(argv[5], ","); tok; tok = strtok(NULL, ",")) {
    if (rounds == MAX_ROUNDS) fail("more than %d sizes", MAX_ROUNDS);
    char *end;
    unsigned long v = strtoul(tok, &end, 0);
    if (*end || v == 0 || v > (1u << 30)) fail("bad size %s", tok);
    sizes[rounds++] = v;
    if (v > p->max) p->max = v;
  }
  if (!rounds) fail("no sizes");
  struct sockaddr_storage ss;
  resolve(argv[2], argv[3], &ss);

  p->ec = rdma_create_event_channel();
  if (!p->ec) fail("rdma_create_event_channel: %s", strerror(errno));
  struct rdma_cm_id *cm;
  if (rdma_create_id(p->ec, &cm, NULL, RDMA_PS_TCP)) fail("rdma_create_id: %s", strerror(errno));
  struct rdma_cm_event *ev;
  if (server) {
    if (rdma_bind_addr(cm, (struct sockaddr *)&ss)) fail("rdma_bind_addr: %s", strerror(errno));
    if (rdma_listen(cm, 1)) fail("rdma_listen: %s", strerror(errno));
    say("listening on %s:%s", argv[2], argv[3]);
    ev = cm_wait(p, RDMA_CM_EVENT_CONNECT_REQUEST);
    p->id = ev->id;
    say("connect request: private data %u bytes, responder_resources %u initiator_depth %u", ev->param.conn.private_data_len,
        ev->param.conn.responder_resources, ev->param.conn.initiator_depth);
    rdma_ack_cm_event(ev);
    setup(p);
    uint8_t desc[16];
    put_be(desc, (uintptr_t)p->mem, 8);
    put_be(desc + 8, p->mem_mr->rkey, 4);
    put_be(desc + 12, p->max, 4);
    struct rdma_conn_param cp = {.private_data = desc, .private_data_len = sizeof desc, .responder_resources = 1, .initiator_depth = 1};
    if (rdma_accept(p->id, &cp)) fail("rdma_accept: %s", strerror(errno));
    rdma_ack_cm_event(cm_wait(p, RDMA_CM_EVENT_ESTABLISHED));
    say("established: buffer 0x%llx rkey 0x%08x len %zu", (unsigned long long)(uintptr_t)p->mem, p->mem_mr->rkey, p->max);
    run_acceptor(p, sizes, rounds, seed);
    rdma_ack_cm_event(cm_wait(p, RDMA_CM_EVENT_DISCONNECTED));
    say("disconnected by the peer");
  } else {
    p->id = cm;
    if (rdma_resolve_addr(cm, NULL, (struct sockaddr *)&ss, 5000)) fail("rdma_resolve_addr: %s", strerror(errno));
    rdma_ack_cm_event(cm_wait(p, RDMA_CM_EVENT_ADDR_RESOLVED));
    if (rdma_resolve_route(cm, 5000)) fail("rdma_resolve_route: %s", strerror(errno));
    rdma_ack_cm_event(cm_wait(p, RDMA_CM_EVENT_ROUTE_RESOLVED));
    setup(p);
    struct rdma_conn_param cp = {.responder_resources = 1, .initiator_depth = 1};
    if (rdma_connect(cm, &cp)) fail("rdma_connect: %s", strerror(errno));
    ev = cm_wait(p, RDMA_CM_EVENT_ESTABLISHED);
    if (ev->param.conn.private_data_len < 16 || !ev->param.conn.private_data)
      fail("the accept carried %u bytes of private data, need 16", ev->param.conn.private_data_len);
    const uint8_t *pd = ev->param.conn.private_data;
    uint64_t raddr = be64(pd);
    uint32_t rkey = be32(pd + 8), rlen = be32(pd + 12);
    say("established: peer buffer 0x%llx rkey 0x%08x len %u (private data %u bytes)", (unsigned long long)raddr, rkey, rlen,
        ev->param.conn.private_data_len);
    rdma_ack_cm_event(ev);
    run_connector(p, sizes, rounds, seed, raddr, rkey, rlen);
    if (rdma_disconnect(cm)) fail("rdma_disconnect: %s", strerror(errno));
    rdma_ack_cm_event(cm_wait(p, RDMA_CM_EVENT_DISCONNECTED));
    say("disconnected");
  }
  rdma_destroy_qp(p->id);
  ibv_dereg_mr(p->mem_mr);
  ibv_dereg_mr(p->send_mr);
  ibv_dereg_mr(p->read_mr);
  ibv_dereg_mr(p->rbuf_mr[0]);
  ibv_dereg_mr(p->rbuf_mr[1]);
  free(p->rcopy);
  ibv_dereg_mr(p->done_mr);
  ibv_destroy_cq(p->scq.cq);
  ibv_destroy_cq(p->rcq.cq);
  ibv_destroy_comp_channel(p->scq.ch);
  ibv_destroy_comp_channel(p->rcq.ch);
  ibv_dealloc_pd(p->pd);
  if (server) rdma_destroy_id(p->id);
  rdma_destroy_id(cm);
  rdma_destroy_event_channel(p->ec);
  say("verbs_peer: ok (%d rounds)", rounds);
  return 0;
}

// nd_peer: the netdirect side of verbs.interop.test.ts (issue #5), written against the public API only
// (dist/esm: openAdapter, allocateMemory, listen/connect, write/read/send/receive, encodeRemote/decodeRemote).
// Its peer is test/interop/verbs_peer.c (rdma_cm + libibverbs) on Linux siw in the siw-vm guest; the
// protocol is described at the top of verbs_peer.c and is the same here.
//
//   node nd_peer.mjs server PORT SEED SIZE[,SIZE...]        listens on 0.0.0.0:PORT, accepts one connection
//   node nd_peer.mjs client HOST PORT SEED SIZE[,SIZE...]   connects to HOST:PORT
//
// Output: one line per checked step on stdout, "nd_peer: ok" and exit 0, or "nd_peer: FAIL ..." and exit 1.
// NETDIRECT_SOFT_CRC=0|1 (read by the provider) chooses whether we ask for MPA CRC.
// ND_PEER_PROVIDER (e.g. 'verbs', docs/verbs.md) and ND_PEER_LOCAL (the local address to open the adapter on, and
// the server's listening address) run it over another provider: the verbs provider in the siw-vm guest.
import { decodeRemote, encodeRemote, openAdapter } from '../../dist/esm/index.mjs';

const TIMEOUT_MS = 30_000;
// siw quirk (lib/ping.ts FIRST_SEND_DELAY_MS): a siw responder can lose its first Read when our first message
// arrives right after its MPA Reply; siw's own initiators post only after ESTABLISHED, so pause like them.
const FIRST_SEND_DELAY_MS = 50;

class Failure extends Error {}
const say = (l) => process.stdout.write(l + '\n');

/** The test pattern (verbs_peer.c has the same): not periodic in 256, so misplaced blocks show. */
function pat(seed, i) {
  return (i * 7 + (i >>> 8) * 13 + (i >>> 16) * 101 + seed * 59) & 0xff;
}
function fill(buf, n, seed) {
  for (let i = 0; i < n; i++) buf[i] = pat(seed, i);
}
function check(what, buf, n, seed) {
  for (let i = 0; i < n; i++) {
    if (buf[i] !== pat(seed, i)) {
      let bad = 0;
      for (let j = i; j < n; j++) if (buf[j] !== pat(seed, j)) bad++;
      throw new Failure(`${what}: byte ${i} of ${n} is 0x${buf[i].toString(16)}, expected 0x${pat(seed, i).toString(16)} (${bad} bytes differ)`);
    }
  }
}

function timed(promise, what) {
  let t;
  const timeout = new Promise((_, reject) => {
    t = setTimeout(() => reject(new Failure(`timeout (${TIMEOUT_MS} ms) waiting for ${what}`)), TIMEOUT_MS);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(t));
}

async function request(promise, what) {
  try {
    return await timed(promise, what);
  } catch (err) {
    if (err instanceof Failure) throw err;
    throw new Failure(`${what} failed: ${err?.code ?? ''} ${err?.message ?? err}`);
  }
}

function usage() {
  process.stderr.write('usage: nd_peer.mjs server PORT SEED SIZES | client HOST PORT SEED SIZES\n');
  process.exit(2);
}

const args = process.argv.slice(2);
const role = args[0];
if (role !== 'server' && role !== 'client') usage();
const LOCAL = process.env.ND_PEER_LOCAL;
const PROVIDER = process.env.ND_PEER_PROVIDER;
const [host, port, seed0, sizeList] = role === 'server' ? [LOCAL ?? '0.0.0.0', ...args.slice(1)] : args.slice(1);
if (sizeList === undefined) usage();
const sizes = sizeList.split(',').map(Number);
if (sizes.some((n) => !Number.isInteger(n) || n < 1)) usage();
const max = Math.max(...sizes);

async function main() {
  // The server listens through the loopback adapter on the wildcard, as `netdirect ping -s` does.
  const adapter = await openAdapter(LOCAL ?? (role === 'server' ? '127.0.0.1' : host), PROVIDER ? { provider: PROVIDER } : {});
  const cleanup = [];
  try {
    const cq = adapter.createCompletionQueue({ depth: 64 });
    const qp = adapter.createQueuePair({ receiveCq: cq, receiveDepth: 4, initiatorDepth: 16, maxReceiveSge: 1, maxInitiatorSge: 1 });
    cleanup.push(() => qp.close());
    const remoteAccess = { remoteRead: true, remoteWrite: true };
    const mem = await adapter.allocateMemory(max, remoteAccess); // the buffer the peer Writes and Reads
    const sendBuf = await adapter.allocateMemory(max);
    const readBuf = await adapter.allocateMemory(max);
    const rbuf = [await adapter.allocateMemory(max), await adapter.allocateMemory(max)];
    const done = await adapter.allocateMemory(4);
    done.buffer.set([0x44, 0x4f, 0x4e, 0x45]); // "DONE"
    for (const m of [mem, sendBuf, readBuf, ...rbuf, done]) cleanup.push(() => m.deregister());

    // Two receives always posted (a Send with none posted ends an iWARP connection); they complete in order.
    // A completed receive's bytes are copied out and its buffer re-posted at once: the peer may send its DONE
    // and the next round's Send back to back, before this side has looked at either.
    const posted = [];
    const settled = [];
    const postReceive = (i) => {
      const p = qp.receive(rbuf[i]);
      p.catch((err) => settled.push(`receive: ${err?.code ?? err}`));
      posted.push({ i, p });
    };
    const receiveNext = async (what) => {
      const { i, p } = posted.shift();
      const c = await request(p, what);
      const copy = Buffer.from(rbuf[i].buffer.subarray(0, c.bytes));
      postReceive(i);
      return { buf: copy, bytes: c.bytes };
    };
    postReceive(0);
    postReceive(1);

    let connector;
    let remote;
    if (role === 'server') {
      const listener = await adapter.listen({ host, port: Number(port), backlog: 1 });
      cleanup.push(() => listener.close());
      process.stderr.write(`nd_peer: listening on ${listener.address.host}:${listener.address.port}\n`);
      say(`listening on ${listener.address.host}:${listener.address.port}`);
      connector = await timed(listener.getConnectionRequest(), 'a connection request');
      cleanup.push(() => connector.close());
      const desc = mem.remote(0, max);
      await request(connector.accept(qp, { privateData: encodeRemote(desc) }), 'accept');
      const peer = connector.peerAddress;
      say(`established with ${peer.host}:${peer.port}: buffer 0x${desc.address.toString(16)} token 0x${desc.token.toString(16)} len ${max}, peer read limits ${JSON.stringify(connector.readLimits)}`);
    } else {
      connector = await request(adapter.connect(qp, { host, port: Number(port) }, { inboundReadLimit: 1, outboundReadLimit: 1 }), 'connect');
      cleanup.push(() => connector.close());
      const pd = connector.privateData;
      remote = decodeRemote(pd);
      say(`established: peer buffer 0x${remote.address.toString(16)} rkey 0x${remote.token.toString(16)} len ${remote.length} (private data ${pd.byteLength} bytes), peer read limits ${JSON.stringify(connector.readLimits)}`);
      await new Promise((r) => setTimeout(r, FIRST_SEND_DELAY_MS));
    }

    for (let r = 0; r < sizes.length; r++) {
      const n = sizes[r];
      const s = Number(seed0) + 4 * r;
      const tag = `round ${r} size ${n}`;
      if (role === 'server') {
        const rx = await receiveNext(`${tag}: the peer's Send`);
        if (rx.bytes !== n) throw new Failure(`${tag}: the peer's Send has ${rx.bytes} bytes, expected ${n}`);
        check(`${tag}: the peer's Send`, rx.buf, n, s + 1);
        say(`${tag}: received Send verified`);
        check(`${tag}: the peer's RDMA Write into our buffer`, mem.buffer, n, s);
        say(`${tag}: RDMA Write data verified`);
        fill(mem.buffer, n, s + 2); // what the peer Reads next
        fill(sendBuf.buffer, n, s + 3);
        await request(qp.send(sendBuf.slice(0, n)), `${tag}: our Send`);
        say(`${tag}: Send done`);
        const d = await receiveNext(`${tag}: the peer's DONE`);
        if (d.bytes !== 4 || Buffer.from(d.buf.subarray(0, 4)).toString('latin1') !== 'DONE') throw new Failure(`${tag}: the peer's DONE: ${d.bytes} bytes, not DONE`);
        say(`${tag}: peer Read done`);
      } else {
        if (n > remote.length) throw new Failure(`the acceptor's buffer (${remote.length} bytes) is smaller than ${n}`);
        fill(mem.buffer, n, s);
        fill(sendBuf.buffer, n, s + 1);
        const target = { address: remote.address, token: remote.token, length: n };
        const w = qp.write(mem.slice(0, n), target);
        const sd = qp.send(sendBuf.slice(0, n));
        w.catch(() => {});
        sd.catch(() => {});
        await request(w, `${tag}: our RDMA Write`);
        await request(sd, `${tag}: our Send`);
        say(`${tag}: RDMA Write and Send done`);
        const rx = await receiveNext(`${tag}: the peer's Send`);
        if (rx.bytes !== n) throw new Failure(`${tag}: the peer's Send has ${rx.bytes} bytes, expected ${n}`);
        check(`${tag}: the peer's Send`, rx.buf, n, s + 3);
        say(`${tag}: received Send verified`);
        readBuf.buffer.fill(0, 0, n);
        const c = await request(qp.read(readBuf.slice(0, n), target), `${tag}: our RDMA Read`);
        if (c.bytes !== undefined && c.bytes !== n) throw new Failure(`${tag}: our RDMA Read completed ${c.bytes} bytes, expected ${n}`);
        check(`${tag}: our RDMA Read`, readBuf.buffer, n, s + 2);
        say(`${tag}: RDMA Read data verified`);
        await request(qp.send(done), `${tag}: our DONE`);
      }
    }
    if (role === 'server') {
      await timed(connector.disconnected, 'the peer to disconnect');
      say('disconnected by the peer');
    } else {
      await request(connector.disconnect(), 'disconnect');
      say('disconnected');
    }
    if (settled.length > 0) say(`settled receives: ${settled.join('; ')}`);
    say(`nd_peer: ok (${sizes.length} rounds)`);
    return 0;
  } finally {
    for (const f of cleanup.reverse()) await Promise.resolve().then(f).catch(() => undefined);
    await adapter.close();
  }
}

main().then(
  (code) => process.exit(code),
  (err) => {
    say(`nd_peer: FAIL ${err instanceof Failure ? err.message : err?.stack ?? err}`);
    process.exit(1);
  },
);

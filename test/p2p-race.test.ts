// Many peer-to-peer accepts whose RTR comes right behind the MPA Reply, each followed by a disconnect: the
// provider completes Accept (and Disconnect) on its own threads, so the adapter's poller may complete and free
// the request's record before accept()/disconnect() even returned to the binding. The binding must not read the
// record after issuing it (binding/addon/adapter.h IssueOverlapped); the sanitizer tier (`npm run test:asan`) turns a
// read of the freed record into a failure, which it caught about once in 200-700 connections.
// The initiator is a raw MPA v2 client (RFC 5044, RFC 6581) in a worker thread, so that it answers the Reply while
// the main thread is still inside accept(): it sends the zero-length RDMA Write RTR as soon as the Reply is in.
// NETDIRECT_P2P_RACE_CONNECTIONS sets the count (default 150; the sanitizer tier runs 1500).
import { Worker } from 'node:worker_threads';
import { describe, expect, it } from 'vitest';
import { openAdapter } from '../lib/index';

const CONNECTIONS = Number(process.env.NETDIRECT_P2P_RACE_CONNECTIONS) || 150;

// The worker: for each `go` message, connects, sends an MPA v2 Request (no markers, no CRC; P2P with a zero-length
// RDMA Write RTR), sends the RTR the moment the Reply is complete (with CRC if the Reply asks for it), then closes
// once the responder closes (its Disconnect).
const client = `
const { parentPort } = require('node:worker_threads');
const net = require('node:net');
const table = new Uint32Array(256);
for (let i = 0; i < 256; i++) {
  let c = i;
  for (let k = 0; k < 8; k++) c = c & 1 ? (c >>> 1) ^ 0x82f63b78 : c >>> 1;
  table[i] = c >>> 0;
}
function crc32c(buf) {
  let c = 0xffffffff;
  for (const b of buf) c = table[(c ^ b) & 0xff] ^ (c >>> 8);
  return (c ^ 0xffffffff) >>> 0;
}
function request() {
  const f = Buffer.alloc(24);
  f.write('MPA ID Req Frame', 0, 'latin1');
  f[16] = 0x10; // enhanced connection establishment (RFC 6581)
  f[17] = 2; // revision 2
  f.writeUInt16BE(4, 18); // private data: the v2 IRD/ORD words only
  f.writeUInt16BE(0x8000 | 4, 20); // IRD 4, peer-to-peer
  f.writeUInt16BE(0x8000 | 4, 22); // ORD 4, zero-length RDMA Write RTR
  return f;
}
function rtr(crc) {
  const f = Buffer.alloc(2 + 14 + 4); // MPA length, DDP tagged header, CRC (no pad: 16 is a multiple of 4)
  f.writeUInt16BE(14, 0);
  f[2] = 0xc1; // DDP: tagged, last, version 1
  f[3] = 0x40; // RDMAP: version 1, opcode RDMA Write
  f.writeUInt32BE(1, 4); // STag (a zero-length Write touches no memory)
  if (crc) f.writeUInt32LE(crc32c(f.subarray(0, 16)), 16);
  return f;
}
parentPort.on('message', ({ port }) => {
  const s = net.connect({ host: '127.0.0.1', port, noDelay: true });
  let got = Buffer.alloc(0);
  let sent = false;
  s.on('connect', () => s.write(request()));
  s.on('data', (d) => {
    if (sent) return;
    got = Buffer.concat([got, d]);
    if (got.length < 20 || got.length < 20 + got.readUInt16BE(18)) return;
    sent = true;
    if (got.subarray(0, 16).toString('latin1') !== 'MPA ID Rep Frame' || got[16] & 0x20) {
      s.destroy();
      parentPort.postMessage({ error: 'rejected or not a Reply: ' + got.subarray(0, 24).toString('hex') });
      return;
    }
    s.write(rtr((got[16] & 0x40) !== 0));
  });
  s.on('end', () => s.end());
  s.on('error', () => undefined);
  s.on('close', () => parentPort.postMessage({ closed: true }));
});
`;

describe('peer-to-peer accept with the RTR right behind the MPA Reply', () => {
  it(`accepts and disconnects ${CONNECTIONS} connections`, async () => {
    const adapter = await openAdapter('127.0.0.1');
    const worker = new Worker(client, { eval: true });
    try {
      const cq = adapter.createCompletionQueue({ depth: 64 });
      const listener = await adapter.listen({});
      const { port } = listener.address;
      let accepted = 0;
      for (let i = 0; i < CONNECTIONS; i++) {
        const closed = new Promise<{ error?: string }>((resolve) => worker.once('message', resolve));
        const qp = adapter.createQueuePair({ receiveCq: cq, receiveDepth: 4, initiatorDepth: 4 });
        const requested = listener.getConnectionRequest();
        worker.postMessage({ port });
        const connector = await requested;
        try {
          await connector.accept(qp, { inboundReadLimit: 4, outboundReadLimit: 4 });
          accepted++;
          await connector.disconnect();
        } finally {
          await connector.close();
          await qp.close();
        }
        const m = await closed;
        expect(m.error, `connection ${i}`).toBeUndefined();
      }
      expect(accepted).toBe(CONNECTIONS);
      await listener.close();
    } finally {
      await worker.terminate();
      await adapter.close();
    }
  }, 600_000);
});

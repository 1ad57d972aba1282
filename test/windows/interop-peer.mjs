// One side of the Linux <-> Windows interop check (scripts/wine-interop.js runs it under Linux node and under
// Windows node in Wine). The server registers 64 KiB (remote write + read), fills its upper half with pattern B,
// posts a receive and accepts with its memory's address/token as private data. The client RDMA-Writes pattern
// A into the lower half, RDMA-Reads the upper half back and checks it, then Sends a 64-byte message carrying
// a checksum of A. The server checks the Send and that A landed byte for byte. Prints "OK <role> ..." or exits 1.
//   node interop-peer.mjs serve <port>        node interop-peer.mjs connect <port>
import { openAdapter, encodeRemote, decodeRemote } from 'netdirect';

const [role, portText] = process.argv.slice(2);
const port = Number(portText);
const HALF = 32 * 1024;
const patternA = (i) => (i * 7 + 3) & 0xff;
const patternB = (i) => (i * 13 + 101) & 0xff;
const sum = (buf) => buf.reduce((s, b) => (s * 31 + b) >>> 0, 7);
const fail = (what) => {
  console.log(`FAIL ${role} on ${process.platform}: ${what}`);
  process.exit(1);
};

const adapter = await openAdapter('127.0.0.1');
const cq = adapter.createCompletionQueue();
const qp = adapter.createQueuePair({ receiveCq: cq });

if (role === 'serve') {
  const memory = await adapter.allocateMemory(2 * HALF, { remoteWrite: true, remoteRead: true });
  for (let i = 0; i < HALF; i++) memory.buffer[HALF + i] = patternB(i);
  const inbox = await adapter.allocateMemory(64);
  const received = qp.receive(inbox);
  const listener = await adapter.listen({ host: '127.0.0.1', port });
  console.log(`LISTENING ${listener.address.port}`);
  const connector = await listener.getConnectionRequest();
  await connector.accept(qp, { privateData: encodeRemote(memory.remote()) });
  const from = connector.peerAddress.host;
  const c = await received;
  if (c.bytes !== 64) fail(`send carried ${c.bytes} bytes, expected 64`);
  const msg = Buffer.from(inbox.buffer.subarray(0, 64));
  const want = sum(Array.from({ length: HALF }, (_, i) => patternA(i)));
  if (msg.readUInt32BE(0) !== want) fail('send payload checksum mismatch');
  for (let i = 0; i < HALF; i++) if (memory.buffer[i] !== patternA(i)) fail(`RDMA Write data wrong at byte ${i}`);
  console.log(`OK serve on ${process.platform}: ${HALF} bytes written by the peer verified, send verified (from ${from})`);
  await listener.close();
} else {
  const memory = await adapter.allocateMemory(2 * HALF);
  for (let i = 0; i < HALF; i++) memory.buffer[i] = patternA(i);
  let connector;
  for (let attempt = 0; ; attempt++) {
    try {
      connector = await adapter.connect(qp, { host: '127.0.0.1', port });
      break;
    } catch (e) {
      if (attempt > 100) throw e;
      await new Promise((r) => setTimeout(r, 100));
    }
  }
  const remote = decodeRemote(connector.privateData);
  await qp.write(memory.slice(0, HALF), { address: remote.address, token: remote.token, length: HALF });
  await qp.read(memory.slice(HALF, HALF), { address: remote.address + BigInt(HALF), token: remote.token, length: HALF });
  for (let i = 0; i < HALF; i++) if (memory.buffer[HALF + i] !== patternB(i)) fail(`RDMA Read data wrong at byte ${i}`);
  const out = await adapter.allocateMemory(64);
  Buffer.from(out.buffer.buffer, out.buffer.byteOffset, 64).writeUInt32BE(sum(Array.from({ length: HALF }, (_, i) => patternA(i))), 0);
  await qp.send(out);
  console.log(`OK connect on ${process.platform}: wrote ${HALF}, read back ${HALF} verified, sent 64`);
}
await adapter.close();

// netdirect quick start: an RDMA Write from one process into another's registered memory.
//
//   node examples/quickstart.mjs --serve          # terminal 1: registers memory, waits, prints what lands
//   node examples/quickstart.mjs 127.0.0.1        # terminal 2: writes a message into it
//
// Options: --port <n> (default 18515), --message <text>.
import { openAdapter, encodeRemote, decodeRemote } from 'netdirect';

const args = process.argv.slice(2);
const option = (name, fallback) => {
  const i = args.indexOf(name);
  return i >= 0 ? args.splice(i, 2)[1] : fallback;
};
const port = Number(option('--port', '18515'));
const message = option('--message', `hello from process ${process.pid} via RDMA Write`);
const serve = args.includes('--serve');
const host = serve ? '127.0.0.1' : args[0] ?? '127.0.0.1';

const adapter = await openAdapter(host);
const cq = adapter.createCompletionQueue();
const qp = adapter.createQueuePair({ receiveCq: cq });

if (serve) {
  // Memory the peer may write into, and a receive for the peer's "done" message (a zero-byte Send).
  const memory = await adapter.allocateMemory(4096, { remoteWrite: true });
  const done = qp.receive(null);
  const listener = await adapter.listen({ port });
  console.log(`listening on ${listener.address.host}:${listener.address.port}`);
  const connector = await listener.getConnectionRequest();
  // The peer learns where to write from our accept's private data: address, token, length (16 bytes).
  await connector.accept(qp, { privateData: encodeRemote(memory.remote()) });
  await done;
  const text = Buffer.from(memory.buffer.subarray(0, memory.buffer.indexOf(0))).toString('utf8');
  console.log(`received ${text.length} bytes by RDMA Write from ${connector.peerAddress.host}: ${text}`);
  await listener.close();
} else {
  const memory = await adapter.allocateMemory(4096);
  const length = Buffer.from(memory.buffer.buffer, memory.buffer.byteOffset).write(message, 'utf8');
  const connector = await adapter.connect(qp, { host, port });
  const remote = decodeRemote(connector.privateData);
  await qp.write(memory.slice(0, length), remote); // lands in the server's memory; its CPU is not involved
  await qp.send(null); // "done": Sends complete in order after the Write
  console.log(`wrote ${length} bytes to ${host}:${port} at 0x${remote.address.toString(16)} (token 0x${remote.token.toString(16)})`);
}
await adapter.close();

// netdirect quick start: an RDMA Write from one process into another's registered memory, on one host or two.
//
//   node examples/quickstart.mjs --serve              # host A: registers memory, prints its address, waits
//   node examples/quickstart.mjs <address of A>       # host B (or a second terminal on A): writes a message into it
//
// Options: --port <n> (default 18515), --message <text>, --serve <local address> (default: this host's first
// address other hosts can reach; openAdapter() picks it). The client opens the local adapter that routes to the
// server (openAdapter({ peer })), as rdma_resolve_addr picks a source address.
import { openAdapter, encodeRemote, decodeRemote } from 'netdirect';

const args = process.argv.slice(2);
const option = (name, fallback) => {
  const i = args.indexOf(name);
  return i >= 0 ? args.splice(i, 2)[1] : fallback;
};
const port = Number(option('--port', '18515'));
const message = option('--message', `hello from process ${process.pid} via RDMA Write`);
const serveAt = args.indexOf('--serve');
const serve = serveAt >= 0;
const local = serve && args[serveAt + 1] !== undefined && !args[serveAt + 1].startsWith('-') ? args[serveAt + 1] : undefined;
const host = serve ? undefined : args[0];
if (!serve && host === undefined) {
  console.error('usage: node examples/quickstart.mjs --serve [local address]   |   node examples/quickstart.mjs <server address>');
  process.exit(2);
}

const adapter = serve ? await openAdapter(local ?? {}) : await openAdapter({ peer: host });
const cq = adapter.createCompletionQueue();
const qp = adapter.createQueuePair({ receiveCq: cq });

if (serve) {
  // Memory the peer may write into, and a receive for the peer's "done" message (a zero-byte Send).
  const memory = await adapter.allocateMemory(4096, { remoteWrite: true });
  const done = qp.receive(null);
  const listener = await adapter.listen({ port });
  console.log(`listening on ${listener.address.host}:${listener.address.port} (the client: node examples/quickstart.mjs ${listener.address.host})`);
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

// A ring of N processes on this machine: every rank RDMA-Writes a block into the next rank's memory, then each
// rank checks the block it received from the previous one.
//
//   node examples/ring.mjs              # 4 ranks
//   node examples/ring.mjs --ranks 8 --block 65536
//
// The launcher (this file without --rank) forks the ranks and acts as their rendezvous: each rank listens on a
// free port and reports it; the launcher sends every rank the whole table. Rank r accepts a connection from rank
// r - 1 and connects to rank r + 1 (mod N); each side's private data carries the memory the other may write.
import { fork } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { openAdapter, encodeRemote, decodeRemote } from 'netdirect';

const args = process.argv.slice(2);
const option = (name, fallback) => (args.includes(name) ? Number(args[args.indexOf(name) + 1]) : fallback);
const ranks = option('--ranks', 4);
const block = option('--block', 4096);
const pattern = (rank, i) => (rank * 31 + i) & 0xff;

if (!args.includes('--rank')) {
  const children = Array.from({ length: ranks }, (_, r) =>
    fork(fileURLToPath(import.meta.url), ['--rank', String(r), '--ranks', String(ranks), '--block', String(block)]),
  );
  const ports = await Promise.all(children.map((c) => new Promise((resolve) => c.once('message', resolve))));
  for (const c of children) c.send(ports);
  const codes = await Promise.all(children.map((c) => new Promise((resolve) => c.on('exit', resolve))));
  console.log(codes.every((c) => c === 0) ? `ring of ${ranks} ranks: every block arrived intact` : `ring failed: exit codes ${codes}`);
  process.exitCode = codes.every((c) => c === 0) ? 0 : 1;
} else {
  const rank = option('--rank');
  const [prev, next] = [(rank + ranks - 1) % ranks, (rank + 1) % ranks];
  const adapter = await openAdapter('127.0.0.1');
  const listener = await adapter.listen({ port: 0 });
  process.send(listener.address.port);
  const ports = await new Promise((resolve) => process.once('message', resolve));

  const target = await adapter.allocateMemory(block, { remoteWrite: true }); // rank prev writes here
  const source = await adapter.allocateMemory(block); // what this rank writes into rank next
  for (let i = 0; i < block; i++) source.buffer[i] = pattern(rank, i);

  const fromPrev = adapter.createQueuePair({ receiveCq: adapter.createCompletionQueue() });
  const done = fromPrev.receive(null); // rank prev's zero-byte Send: its Write has landed
  const accepted = listener
    .getConnectionRequest()
    .then((c) => c.accept(fromPrev, { privateData: encodeRemote(target.remote()) }));

  const toNext = adapter.createQueuePair({ receiveCq: adapter.createCompletionQueue() });
  const connector = await adapter.connect(toNext, { host: '127.0.0.1', port: ports[next] });
  await toNext.write(source, decodeRemote(connector.privateData));
  await toNext.send(null);
  await accepted;
  await done;

  const bad = target.buffer.findIndex((b, i) => b !== pattern(prev, i));
  console.log(`rank ${rank}: ${block} bytes from rank ${prev}, ${bad < 0 ? 'all correct' : `wrong from byte ${bad}`}`);
  await adapter.close();
  process.exitCode = bad < 0 ? 0 : 1;
  process.disconnect();
}

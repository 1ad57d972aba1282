#!/usr/bin/env node
// What `{ signal }` costs a request (docs/architecture.md "Aborting a request"): an 8-byte Send ping-pong between
// two adapters on this machine, each round trip's qp.send and qp.receive made without a signal and with one (an
// AbortSignal that never aborts), in alternating blocks on the same connection, so both see the same machine.
// Prints each block's median half round trip and the median over blocks of with/without.
//   node scripts/bench-request-signal.mjs [--iters 2000] [--blocks 10]
import { createRequire } from 'node:module';

const require = createRequire(import.meta.url);
const { openAdapter } = require('../dist/cjs/index.js');
const args = process.argv.slice(2);
const opt = (name, fallback) => (args.includes(name) ? Number(args[args.indexOf(name) + 1]) : fallback);
const iters = opt('--iters', 2000);
const blocks = opt('--blocks', 10);

const a = await openAdapter('127.0.0.1');
const b = await openAdapter('127.0.0.1');
const qa = a.createQueuePair({ receiveCq: a.createCompletionQueue({ depth: 64 }) });
const qb = b.createQueuePair({ receiveCq: b.createCompletionQueue({ depth: 64 }) });
const listener = await b.listen();
const accepting = listener.getConnectionRequest().then((c) => c.accept(qb));
await a.connect(qa, listener.address);
await accepting;
await listener.close();
const ma = await a.allocateMemory(64);
const mb = await b.allocateMemory(64);
const sa = ma.slice(0, 8);
const sb = mb.slice(0, 8);
const ac = new AbortController();

/** Median half round trip (µs) of `n` ping-pongs; `options` is what every send and receive is given. */
async function block(n, options) {
  const times = [];
  // b echoes every message back; one receive is always posted on each side before the peer sends.
  let rb = qb.receive(sb, options);
  let ra = qa.receive(sa, options);
  for (let i = 0; i < n; i++) {
    const t0 = process.hrtime.bigint();
    await qa.send(sa, options);
    await rb;
    rb = qb.receive(sb, options);
    await qb.send(sb, options);
    await ra;
    ra = qa.receive(sa, options);
    times.push(Number(process.hrtime.bigint() - t0) / 2000);
  }
  // Drain the two receives left posted.
  await qa.send(sa);
  await rb;
  await qb.send(sb);
  await ra;
  times.sort((x, y) => x - y);
  return times[times.length >> 1];
}

await block(200, undefined); // warm-up
const ratios = [];
for (let k = 0; k < blocks; k++) {
  const plain = await block(iters, undefined);
  const signalled = await block(iters, { signal: ac.signal });
  ratios.push(signalled / plain);
  console.log(`block ${k + 1}: without signal ${plain.toFixed(2)} µs, with signal ${signalled.toFixed(2)} µs (x${(signalled / plain).toFixed(3)})`);
}
ratios.sort((x, y) => x - y);
console.log(`8 B Send half round trip with { signal } / without, median over ${blocks} blocks of ${iters}: x${ratios[ratios.length >> 1].toFixed(3)} (min x${ratios[0].toFixed(3)}, max x${ratios[ratios.length - 1].toFixed(3)})`);
await a.close();
await b.close();

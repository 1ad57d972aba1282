#!/usr/bin/env node
// An 8-byte ping-pong as a user writes it with the promise API (await send, await receive; the peer echoes), between
// two processes on this machine, beside the same ping-pong over Node's `net` (setNoDelay): alternating blocks, so both
// see the same machine. Prints each block's median half round trip and, at the end, the median over blocks of
// netdirect / net (issue #26: the promise API on the event loop, target <= 0.8x net).
//   node scripts/bench-pingpong.mjs [--iters 2000] [--blocks 8] [--shm on|off] [--completion loop|thread]
import { fork } from 'node:child_process';
import { createRequire } from 'node:module';
import * as net from 'node:net';
import { fileURLToPath } from 'node:url';

const require = createRequire(import.meta.url);
const { openAdapter } = require('../dist/cjs/index.js');
const args = process.argv.slice(2);
const opt = (name, fallback) => (args.includes(name) ? args[args.indexOf(name) + 1] : fallback);
const iters = Number(opt('--iters', 2000));
const blocks = Number(opt('--blocks', 8));
const adapterOptions = { sharedMemory: opt('--shm', 'off') === 'on', completion: opt('--completion', 'loop') };
const median = (xs) => [...xs].sort((x, y) => x - y)[xs.length >> 1];

if (process.argv[2] === '--peer') {
  // The echo side: a listener for netdirect and one for net; echoes every message until the parent disconnects.
  const adapter = await openAdapter('127.0.0.1', JSON.parse(process.argv[3]));
  const qp = adapter.createQueuePair({ receiveCq: adapter.createCompletionQueue({ depth: 64 }) });
  const mr = await adapter.allocateMemory(64);
  const buf = mr.slice(0, 8);
  const listener = await adapter.listen();
  const server = net.createServer((s) => {
    s.setNoDelay(true);
    s.on('data', (d) => s.write(d));
  });
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  process.send({ nd: listener.address, net: server.address().port });
  const request = await listener.getConnectionRequest();
  let received = qp.receive(buf); // posted before the peer can send
  await request.accept(qp);
  await listener.close();
  for (;;) {
    try {
      await received;
    } catch {
      break; // the parent disconnected
    }
    received = qp.receive(buf);
    await qp.send(buf);
  }
  server.close();
  await adapter.close();
  process.exit(0);
}

const child = fork(fileURLToPath(import.meta.url), ['--peer', JSON.stringify(adapterOptions)]);
const ports = await new Promise((resolve) => child.once('message', resolve));
const adapter = await openAdapter('127.0.0.1', adapterOptions);
const qp = adapter.createQueuePair({ receiveCq: adapter.createCompletionQueue({ depth: 64 }) });
const mr = await adapter.allocateMemory(64);
const buf = mr.slice(0, 8);
await adapter.connect(qp, ports.nd);
const socket = net.connect(ports.net, '127.0.0.1');
socket.setNoDelay(true);
await new Promise((resolve) => socket.once('connect', resolve));

async function ndBlock(n) {
  const times = [];
  for (let i = 0; i < n; i++) {
    const t0 = process.hrtime.bigint();
    const received = qp.receive(buf);
    await qp.send(buf);
    await received;
    times.push(Number(process.hrtime.bigint() - t0) / 2000);
  }
  return median(times);
}

async function netBlock(n) {
  const times = [];
  const message = Buffer.alloc(8);
  for (let i = 0; i < n; i++) {
    const t0 = process.hrtime.bigint();
    const echoed = new Promise((resolve) => socket.once('data', resolve));
    socket.write(message);
    await echoed;
    times.push(Number(process.hrtime.bigint() - t0) / 2000);
  }
  return median(times);
}

await ndBlock(500); // warm-up
await netBlock(500);
const ratios = [];
const nds = [];
const nets = [];
for (let k = 0; k < blocks; k++) {
  const first = k % 2 === 0;
  const a = first ? await ndBlock(iters) : await netBlock(iters);
  const b = first ? await netBlock(iters) : await ndBlock(iters);
  const [nd, nt] = first ? [a, b] : [b, a];
  ratios.push(nd / nt);
  nds.push(nd);
  nets.push(nt);
  console.log(`block ${k + 1}: netdirect ${nd.toFixed(2)} µs, net ${nt.toFixed(2)} µs (x${(nd / nt).toFixed(3)})`);
}
console.log(
  `8 B ping-pong half round trip, netdirect (${adapterOptions.completion}, shm ${adapterOptions.sharedMemory ? 'on' : 'off'}) / net, ` +
    `median over ${blocks} blocks of ${iters}: x${median(ratios).toFixed(3)} (${median(nds).toFixed(2)} / ${median(nets).toFixed(2)} µs; transport ${qp.transport})`,
);
socket.destroy();
await adapter.close();
await new Promise((resolve) => child.once('exit', resolve));

#!/usr/bin/env node
'use strict';
// Idle cost of an adapter: two connected queue pairs in one process, nothing posted but one receive each (so a
// request is pending and the process stays alive), for a few seconds. Prints the process's context switches per
// second (voluntary + involuntary, from process.resourceUsage(): every thread's wake-up counts) for each
// completion mode, against an idle Node process with one pending net socket read as the baseline.
//   node scripts/perf/idle.js [seconds] [--json]
const net = require('node:net');
const { once } = require('node:events');
const nd = require('../../dist/cjs/index.js');

const seconds = Number(process.argv.find((a, i) => i >= 2 && /^\d+(\.\d+)?$/.test(a)) ?? 3);
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

function switches() {
  const u = process.resourceUsage();
  return u.voluntaryContextSwitches + u.involuntaryContextSwitches;
}

async function measure(ms) {
  await sleep(200); // settle: connection set-up work is not idle time
  const a = switches();
  await sleep(ms);
  return ((switches() - a) * 1000) / ms;
}

async function netIdle() {
  const server = net.createServer((s) => s.on('data', () => undefined));
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const c = net.connect(server.address().port, '127.0.0.1');
  await once(c, 'connect');
  c.on('data', () => undefined);
  const rate = await measure(seconds * 1000);
  c.destroy();
  server.close();
  return rate;
}

async function ndIdle(completion) {
  const adapter = await nd.openAdapter('127.0.0.1', { completion });
  try {
    const cq = adapter.createCompletionQueue();
    const qa = adapter.createQueuePair({ receiveCq: cq });
    const qb = adapter.createQueuePair({ receiveCq: cq });
    const mem = await adapter.allocateMemory(4096);
    const listener = await adapter.listen({ port: 0 });
    const accepting = listener.getConnectionRequest().then((c) => c.accept(qb));
    await adapter.connect(qa, `127.0.0.1:${listener.address.port}`);
    await accepting;
    const ra = qa.receive(mem.slice(0, 64));
    const rb = qb.receive(mem.slice(64, 64));
    ra.catch(() => undefined);
    rb.catch(() => undefined);
    const rate = await measure(seconds * 1000);
    return { rate, mode: adapter.completion };
  } finally {
    await adapter.close();
  }
}

(async () => {
  const rows = [{ name: 'node net socket, one pending read', rate: await netIdle() }];
  for (const mode of ['loop', 'thread']) {
    const r = await ndIdle(mode);
    rows.push({ name: `netdirect ${r.mode}: 2 connected QPs, a receive pending on each`, rate: r.rate });
  }
  if (process.argv.includes('--json')) {
    console.log(JSON.stringify(rows));
  } else {
    console.log(`context switches per second of the whole process over ${seconds} s idle:`);
    for (const r of rows) console.log(`  ${r.rate.toFixed(1).padStart(8)}  ${r.name}`);
  }
})().catch((e) => {
  console.error(e);
  process.exit(1);
});

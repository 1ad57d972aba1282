// How long a legitimate client takes to connect to a listener of the software provider while an attacker holds
// half-open handshakes on it (issue #28 finding 6; docs/security.md "Half-open handshakes"): `holders` silent TCP
// connections (they never send an MPA Request), from 4 loopback addresses, each reopened 10 ms after the listener
// drops it. The client connects as join() does: on ND_CONNECTION_REFUSED it retries with a growing back-off
// (10 ms doubling to 250 ms) until 15 s have passed.
//   node scripts/bench-halfopen.mjs [--holders 256] [--trials 20]
// Prints one line per trial and the median / worst, with the attempts the client needed and the reopens.
// A repository tool (it imports test/, so it is not in the package: package.json "files").
import { createRequire } from 'node:module';
import { holdHalfOpen } from '../test/halfopen-holders.mjs';

const require = createRequire(import.meta.url);
const { openAdapter } = require('../dist/cjs/index.js');
const args = process.argv.slice(2);
const opt = (name, fallback) => (args.includes(name) ? Number(args[args.indexOf(name) + 1]) : fallback);
const holdersWanted = opt('--holders', 256);
const trials = opt('--trials', 20);

const server = await openAdapter('127.0.0.1');
const client = await openAdapter('127.0.0.1');
const scq = server.createCompletionQueue({ depth: 64 });
const ccq = client.createCompletionQueue({ depth: 64 });
const listener = await server.listen({}); // the default backlog: 256 connections in setup
const { port } = listener.address;

const holders = holdHalfOpen(port, { count: holdersWanted, reopenMs: 10 });
const connected = () => holders.connected();
for (let i = 0; i < 500 && connected() < holdersWanted; i++) await new Promise((r) => setTimeout(r, 10));
await new Promise((r) => setTimeout(r, 300)); // the listener has accepted them: its backlog is full

// The server side: every request is accepted on a fresh queue pair, then disconnected.
void (async () => {
  for (;;) {
    let c;
    try {
      c = await listener.getConnectionRequest();
    } catch {
      return;
    }
    const qp = server.createQueuePair({ receiveCq: scq, receiveDepth: 4, initiatorDepth: 4 });
    c.accept(qp).then(
      () => c.disconnected.then(() => c.disconnect().catch(() => undefined)).finally(() => qp.close().catch(() => undefined)),
      () => qp.close().catch(() => undefined),
    );
  }
})();

const times = [];
for (let t = 0; t < trials; t++) {
  // Every holder connected (a dropped one has come back) and accepted: the backlog is full when the client comes.
  while (connected() < holdersWanted) await new Promise((r) => setTimeout(r, 5));
  await new Promise((r) => setTimeout(r, 50));
  const qp = client.createQueuePair({ receiveCq: ccq, receiveDepth: 4, initiatorDepth: 4 });
  const t0 = performance.now();
  let attempts = 0;
  let delay = 10;
  let ok = false;
  let failure = '';
  while (performance.now() - t0 < 15_000) {
    attempts++;
    try {
      const c = await client.connect(qp, listener.address);
      ok = true;
      await c.disconnect();
      break;
    } catch (err) {
      failure = err.code;
      if (err.code !== 'ND_CONNECTION_REFUSED') break;
      await new Promise((r) => setTimeout(r, delay));
      delay = Math.min(delay * 2, 250);
    }
  }
  const ms = performance.now() - t0;
  await qp.close();
  times.push(ok ? ms : Infinity);
  console.log(`trial ${t + 1}: ${ok ? `connected in ${ms.toFixed(2)} ms` : `gave up after ${ms.toFixed(0)} ms (${failure})`}, ${attempts} attempt(s), ${connected()} holders connected, reopened ${holders.reopened} so far`);
}
times.sort((a, b) => a - b);
const fmt = (v) => (Number.isFinite(v) ? `${v.toFixed(2)} ms` : 'never (15 s)');
console.log(`connect while ${holdersWanted} half-open handshakes are held: median ${fmt(times[Math.floor(times.length / 2)])}, worst ${fmt(times[times.length - 1])} over ${trials} trials (${holders.reopened} holder reopens)`);
holders.stop();
await listener.close();
await client.close();
await server.close();

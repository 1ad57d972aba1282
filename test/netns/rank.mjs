// One rank of the namespace tier (test/job-netns.test.ts): started by MPICH's mpiexec inside a network namespace
// of its own, it joins through PMI-1 (via Hydra's proxy in that namespace), says where it runs, and checks the
// job across the namespaces: a ring of notified RDMA Writes, allreduce (small: recursive doubling; large: ring),
// broadcast and barrier, on data whose right answer every rank can compute. Prints one JSON line.
// NETNS_SCENARIO=die: rank NETNS_VICTIM kills itself while an allreduce is in flight; the others report the error
// they got, hold their connections NETNS_HOLD_MS, then report how long close() took.
import { readlinkSync } from 'node:fs';
import { networkInterfaces } from 'node:os';
import { join } from 'netdirect/job';

const scenario = process.env.NETNS_SCENARIO ?? 'collectives';
// NETNS_LATE_RANK: that rank joins NETNS_LATE_MS late, so the others' listeners wait (in the fence) while the
// attacker of test/netns/attacker.mjs goes at them.
if (process.env.NETNS_LATE_RANK !== undefined && process.env.PMI_RANK === process.env.NETNS_LATE_RANK) {
  await new Promise((r) => setTimeout(r, Number(process.env.NETNS_LATE_MS ?? 0)));
}
const job = await join({ timeoutMs: 30_000 });
const { rank, size } = job;
const addresses = Object.values(networkInterfaces()).flat().filter((a) => a.family === 'IPv4' && !a.internal).map((a) => a.address);
const out = { rank, size, launcher: job.launcher, netns: readlinkSync('/proc/self/ns/net'), addresses, checks: {}, refusedConnects: job.refusedConnects };
const check = (name, ok) => (out.checks[name] = ok);

if (scenario === 'die') {
  const victim = Number(process.env.NETNS_VICTIM ?? size - 1);
  // Hydra tells the surviving processes that one failed with SIGUSR1 (under -disable-auto-cleanup), and Node's
  // default action for SIGUSR1 is to start its inspector on 127.0.0.1:9229: record the signal instead.
  process.on('SIGUSR1', () => (out.sigusr1 = true));
  try {
    await job.barrier();
    for (let i = 0; i < 1000; i++) {
      const pending = job.allreduce(new Float64Array(65536).fill(1), 'sum');
      // The victim dies with its part of the 5th allreduce on the wire: the others are inside it.
      if (rank === victim && i === 4) setImmediate(() => process.kill(process.pid, 'SIGKILL'));
      await pending;
    }
    out.error = null;
  } catch (err) {
    out.error = { name: err.name, code: err.code, peer: err.peer, message: err.message };
  }
  // Survivors keep their connections a while before close(): a rank that has not yet seen the death itself
  // would otherwise see first the connection of a survivor that closed (and name that rank, truthfully).
  await new Promise((r) => setTimeout(r, Number(process.env.NETNS_HOLD_MS ?? 0)));
  const t0 = Date.now();
  await job.close().catch(() => undefined);
  out.closeMs = Date.now() - t0;
  console.log(JSON.stringify(out));
  process.exit(0);
}

const [prev, next] = [(rank + size - 1) % size, (rank + 1) % size];
const pattern = (r, i) => (r * 31 + i) & 0xff;
await job.barrier();
const window = await job.allocateWindow(65536);
await window.put(next, 0, Uint8Array.from({ length: 65536 }, (_, i) => pattern(rank, i)), { notify: true });
await window.waitNotifications(prev, 1);
check('ring: the block from the previous rank', window.buffer.every((b, i) => b === pattern(prev, i)));
for (const n of [1, 1000, 100_000]) {
  const sum = await job.allreduce(Float64Array.from({ length: n }, (_, i) => rank + i), 'sum');
  check(`allreduce sum ${n}`, sum.every((v, i) => v === (size * (size - 1)) / 2 + size * i));
  const max = await job.allreduce(Int32Array.from({ length: n }, (_, i) => (rank * 7 + i) % 11), 'max');
  check(`allreduce max ${n}`, max.every((v, i) => v === Math.max(...Array.from({ length: size }, (_, r) => (r * 7 + i) % 11))));
  const b = rank === size - 1 ? Uint16Array.from({ length: n }, (_, i) => i & 0xffff) : new Uint16Array(n);
  await job.broadcast(b, size - 1);
  check(`broadcast ${n}`, b.every((v, i) => v === (i & 0xffff)));
}
// Barrier: nobody leaves before everybody arrived. The namespaces share one clock: rank r arrives 40*r ms late,
// and the latest arrival must come no later than the earliest departure.
await new Promise((r) => setTimeout(r, 40 * rank));
const arrived = Date.now();
await job.barrier();
const left = Date.now();
const [lastArrival] = await job.allreduce(new Float64Array([arrived]), 'max');
const [firstDeparture] = await job.allreduce(new Float64Array([left]), 'min');
check('barrier: every rank arrived before any left', lastArrival <= firstDeparture);
await window.free();
await job.close();
console.log(JSON.stringify(out));

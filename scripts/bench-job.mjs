#!/usr/bin/env node
// Figures of the job API (netdirect/job): join() + full wire-up, a notified put against a plain one, barrier
// and allreduce. Launches its own ranks through the explicit rendezvous on this machine, or runs as the ranks of
// a real launcher (mpiexec -n N node scripts/bench-job.mjs). Prints a table from rank 0; no test asserts these.
//   node scripts/bench-job.mjs [--ranks 4] [--wireup-ranks 16] [--iters 2000]
// The completion mode and busy-poll window come from NETDIRECT_COMPLETION and NETDIRECT_SPIN_MICROS, e.g.
//   NETDIRECT_COMPLETION=manual mpiexec -n 2 node scripts/bench-job.mjs --iters 20000
import { fork } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import { createRequire } from 'node:module';

const require = createRequire(import.meta.url);
const { join, detectLauncher } = require('../dist/cjs/job/index.js');
const args = process.argv.slice(2);
const opt = (name, fallback) => (args.includes(name) ? Number(args[args.indexOf(name) + 1]) : fallback);
const ranks = opt('--ranks', 4);
const wireupRanks = opt('--wireup-ranks', 16);
const iters = opt('--iters', 2000);

async function launch(size, phase) {
  const port = 20000 + Math.floor(Math.random() * 20000);
  const secret = randomBytes(32).toString('hex'); // the job's: every rank proves it holds it (docs/job.md "Membership")
  const children = Array.from({ length: size }, (_, r) =>
    fork(fileURLToPath(import.meta.url), [...args, '--phase', phase], {
      env: { ...process.env, NETDIRECT_RENDEZVOUS: `127.0.0.1:${port}`, NETDIRECT_RANK: String(r), NETDIRECT_SIZE: String(size), NETDIRECT_JOB_SECRET: secret },
    }),
  );
  const codes = await Promise.all(children.map((c) => new Promise((resolve) => c.on('exit', resolve))));
  if (codes.some((c) => c !== 0)) throw new Error(`a rank failed: exit codes ${codes}`);
}

const us = (ms) => (ms * 1000).toFixed(1);
async function timed(job, n, body) {
  await job.barrier();
  const t0 = performance.now();
  for (let i = 0; i < n; i++) await body(i);
  return (performance.now() - t0) / n;
}

async function rank() {
  const phase = args[args.indexOf('--phase') + 1] ?? 'all';
  const t0 = performance.now();
  const job = await join({ address: '127.0.0.1' });
  const joinMs = performance.now() - t0;
  const worst = await job.allreduce(new Float64Array([joinMs, job.wireUpMs]), 'max');
  const rows = [];
  if (job.rank === 0) rows.push([`join() + full wire-up, ${job.size} ranks (slowest rank)`, `${worst[0].toFixed(0)} ms (connections ${worst[1].toFixed(0)} ms)`]);
  if (phase !== 'wireup') {
    const w = await job.allocateWindow(1 << 20);
    const src = await job.adapter.allocateMemory(8);
    const peer = job.rank === 0 ? 1 : 0;
    const active = job.rank <= 1;
    // Local completion of an 8-byte put, alone and followed by its notify.
    const put = active && job.rank === 0 ? await timed(job, iters, () => w.put(peer, 0, src)) : (await job.barrier(), 0);
    const putNotify = active && job.rank === 0 ? await timed(job, iters, () => w.put(peer, 0, src, { notify: true })) : (await job.barrier(), 0);
    if (job.rank === 1) await w.waitNotifications(0, iters);
    // Ping-pong of notified puts: what a target waiting for data sees (half a round trip). Rank 0 also keeps each
    // round trip's time: on a machine shared with other work the mean carries every preemption of a rank (a time
    // slice, milliseconds), the median and the low percentiles what a round trip costs.
    await job.barrier();
    const trips = new Float64Array(active && job.rank === 0 ? iters : 0);
    const t1 = performance.now();
    if (active) {
      for (let i = 0; i < iters; i++) {
        const ti = job.rank === 0 ? performance.now() : 0;
        if (job.rank === 0) {
          await w.put(1, 0, src, { notify: true });
          await w.waitNotifications(1, 1);
        } else {
          await w.waitNotifications(0, 1);
          await w.put(0, 0, src, { notify: true });
        }
        if (job.rank === 0) trips[i] = performance.now() - ti;
      }
    }
    const pingpong = (performance.now() - t1) / iters / 2;
    const barrier = await timed(job, iters, () => job.barrier());
    const small = new Float64Array(1);
    const allreduce8 = await timed(job, iters, () => job.allreduce(small, 'sum'));
    const big = new Float64Array(1 << 17);
    const allreduce1m = await timed(job, 20, () => job.allreduce(big, 'sum'));
    if (job.rank === 0) {
      rows.push(['put 8 B, local completion (rank 0 -> 1)', `${us(put)} us`]);
      rows.push(['put 8 B + notify, local completion', `${us(putNotify)} us (notify costs ${us(putNotify - put)} us)`]);
      rows.push(['notified put 8 B, ping-pong half round trip', `${us(pingpong)} us`]);
      const sorted = trips.sort();
      const at = (q) => us(sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] / 2);
      rows.push(['  the same, per round trip / 2: p10, median, p99', `${at(0.1)} / ${at(0.5)} / ${at(0.99)} us`]);
      rows.push([`barrier, ${job.size} ranks`, `${us(barrier)} us`]);
      rows.push([`allreduce 8 B sum, ${job.size} ranks`, `${us(allreduce8)} us`]);
      rows.push([`allreduce 1 MiB sum, ${job.size} ranks`, `${us(allreduce1m)} us (${((1 << 20) / allreduce1m / 1e6).toFixed(2)} GB/s)`]);
    }
    await w.free();
  }
  if (job.rank === 0) for (const [k, v] of rows) console.log(`${k.padEnd(52)} ${v}`);
  await job.close();
}

if (args.includes('--phase') || detectLauncher().launcher !== 'singleton') {
  await rank();
} else {
  console.log(`netdirect/job on this machine (${process.platform}, node ${process.version}; launcher: the explicit rendezvous)`);
  await launch(wireupRanks, 'wireup');
  await launch(ranks, 'all');
}

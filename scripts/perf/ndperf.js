#!/usr/bin/env node
'use strict';
// Diagnostic micro-benchmarks of the data path (not ndbench: no baselines, no formats). Two processes, as
// perftest: this one is the client, it forks itself as the server. Prints one JSON line per run with the
// figure, the per-operation context switches of every thread of both processes (thread hops / wake-ups)
// and the adapter's poller counters.
//
//   node scripts/perf/ndperf.js wlat     [--mode manual|thread] [--iters N]   write 8 B + wait for its completion
//   node scripts/perf/ndperf.js lastbyte [--mode manual|thread] [--iters N]   perftest write_lat: each side spins on
//                                                                             its buffer's last byte (manual: post +
//                                                                             poll; thread: promise writes, 20 µs
//                                                                             spins between event-loop turns, as ndbench)
//   node scripts/perf/ndperf.js bw       [--mode manual|thread] [--size N] [--window N] [--secs S]
//                                                                             write bandwidth (manual: post + poll;
//                                                                             thread: promise writes, window N)
//   node scripts/perf/ndperf.js rate     [--window N] [--secs S]              8 B write message rate (post + poll)
// CRC: NETDIRECT_SOFT_CRC=0|1 in the environment (both processes inherit it).
// Syscalls per op: strace -f -c -o /tmp/s.txt node scripts/perf/ndperf.js ...   (divide by "ops" in the JSON).

const { fork } = require('node:child_process');
const fs = require('node:fs');
const path = require('node:path');
const nd = require(path.join(process.env.NDPERF_ROOT || path.join(__dirname, '..', '..'), 'dist', 'cjs', 'index.js'));

function args(argv) {
  const o = { test: argv[0], mode: 'manual', iters: 20000, size: 8, window: 64, secs: 2, serve: false, warm: 2000, spinUs: 0 };
  for (let i = 1; i < argv.length; i++) {
    const a = argv[i];
    const v = () => argv[++i];
    if (a === '--mode') o.mode = v();
    else if (a === '--iters') o.iters = Number(v());
    else if (a === '--size') o.size = Number(v());
    else if (a === '--window') o.window = Number(v());
    else if (a === '--secs') o.secs = Number(v());
    else if (a === '--warm') o.warm = Number(v());
    else if (a === '--serve') o.serve = true;
    else if (a === '--spin-micros') o.spinUs = Number(v());
    else throw new Error(`unknown option ${a}`);
  }
  if (o.test === 'rate') o.mode = 'manual';
  if (o.test === 'rate') o.size = 8;
  return o;
}

// Context switches of every thread of this process: { tid: [voluntary, involuntary, comm] }.
function threadSwitches() {
  const out = {};
  let tasks = [];
  try {
    tasks = fs.readdirSync('/proc/self/task');
  } catch {
    return out;
  }
  for (const t of tasks) {
    try {
      const s = fs.readFileSync(`/proc/self/task/${t}/status`, 'utf8');
      const vol = Number(/voluntary_ctxt_switches:\s+(\d+)/.exec(s)[1]);
      const inv = Number(/nonvoluntary_ctxt_switches:\s+(\d+)/.exec(s)[1]);
      const comm = fs.readFileSync(`/proc/self/task/${t}/comm`, 'utf8').trim();
      out[t] = [vol, inv, comm];
    } catch {
      // thread gone
    }
  }
  return out;
}

function switchDelta(a, b, ops) {
  let vol = 0;
  let inv = 0;
  const per = [];
  for (const t of Object.keys(b)) {
    const x = a[t] ?? [0, 0, b[t][2]];
    const dv = b[t][0] - x[0];
    const di = b[t][1] - x[1];
    vol += dv;
    inv += di;
    if (dv + di > ops * 0.05) per.push(`${b[t][2]}/${t}:${(dv / ops).toFixed(2)}+${(di / ops).toFixed(2)}`);
  }
  return { volPerOp: +(vol / ops).toFixed(3), invPerOp: +(inv / ops).toFixed(3), threads: per };
}

function pct(sorted, p) {
  return sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * p))];
}

async function open(o) {
  const adapter = await nd.openAdapter('127.0.0.1', { completion: o.mode, spinMicros: o.spinUs });
  const cq = adapter.createCompletionQueue({ depth: 4096 });
  const bytes = Math.max(o.size, 64) * 2 + 64;
  const mr = await adapter.allocateMemory(bytes, { remoteWrite: true, remoteRead: true });
  const qp = adapter.createQueuePair({ receiveCq: cq, initiatorDepth: 1024, receiveDepth: 16, maxInitiatorSge: 1, maxReceiveSge: 1 });
  return { adapter, cq, mr, qp };
}

const immediate = () => new Promise((r) => setImmediate(r));

// Thread mode (ndbench's write_lat): spins on b[i] === v for at most 20 µs, then lets the event loop turn.
function spinFor(b, i, v) {
  const until = process.hrtime.bigint() + 20000n;
  for (let k = 0; ; k++) {
    if (b[i] === v) return true;
    if ((k & 63) === 63 && process.hrtime.bigint() >= until) return false;
  }
}

function drain(cq) {
  const cs = cq.poll(256);
  for (const c of cs) if (c.status !== 0) throw new Error(`${c.type} failed: ${nd.ndStatusName(c.status)}`);
  return cs.length;
}

// ---- server -----------------------------------------------------------------------------------------

async function server(o) {
  const s = await open(o);
  const listener = await s.adapter.listen({ host: '127.0.0.1', port: 0 });
  process.send({ port: listener.address.port });
  const c = await listener.getConnectionRequest();
  const peer = nd.decodeRemote(c.privateData);
  await c.accept(s.qp, { privateData: nd.encodeRemote(s.mr.remote()) });
  let before = null;
  let ops = 1;
  process.on('message', async (m) => {
    if (m.cmd === 'mark') {
      before = threadSwitches();
      process.send({ marked: true });
    } else if (m.cmd === 'report') {
      ops = m.ops;
      process.send({ switches: switchDelta(before, threadSwitches(), ops), stats: s.adapter.stats() });
    } else if (m.cmd === 'exit') {
      await s.adapter.close().catch(() => undefined);
      process.exit(0);
    }
  });
  if (o.test === 'lastbyte' && o.mode === 'thread') {
    // Pong with promise writes, not awaited until the window is full (ndbench's server).
    const b = s.mr.buffer;
    const last = o.size - 1;
    const src = s.mr.slice(o.size, o.size);
    const inflight = [];
    let tag = 0;
    for (let i = 0; i < o.iters + o.warm; i++) {
      tag = tag === 255 ? 1 : tag + 1;
      while (!spinFor(b, last, tag)) await immediate();
      b[o.size + last] = tag;
      inflight.push(s.qp.write(src, peer));
      if (inflight.length >= o.window) await inflight.shift();
    }
    await Promise.all(inflight);
  } else if (o.test === 'lastbyte') {
    // Pong: wait for the client's tag in our last byte, write it back into the client's last byte.
    const b = s.mr.buffer;
    const last = o.size - 1;
    const src = s.mr.slice(o.size, o.size);
    let tag = 0;
    let posted = 0;
    const total = o.iters + o.warm;
    for (let i = 0; i < total; i++) {
      tag = tag === 255 ? 1 : tag + 1;
      let spins = 0;
      while (b[last] !== tag) {
        drain(s.cq);
        if ((++spins & 0x3fff) === 0) await new Promise((r) => setImmediate(r)); // lets the IPC 'mark' through
      }
      
      b[o.size + last] = tag;
      const signaled = ++posted % 16 === 0 || i === total - 1;
      s.qp.post('write', src, peer, { silent: !signaled });
      if ((i & 1023) === 0) await new Promise((r) => setImmediate(r)); // let IPC through
    }
    while (s.qp.outstanding.initiator > 0) {
      drain(s.cq);
      await new Promise((r) => setImmediate(r));
    }
  }
}

// ---- client -----------------------------------------------------------------------------------------

async function client(o) {
  const child = fork(__filename, [...process.argv.slice(2), '--serve'], { stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
  const msg = (pred) => new Promise((resolve) => {
    const f = (m) => {
      if (pred(m)) {
        child.off('message', f);
        resolve(m);
      }
    };
    child.on('message', f);
  });
  const { port } = await msg((m) => m.port !== undefined);
  const c = await open(o);
  const conn = await c.adapter.connect(c.qp, { host: '127.0.0.1', port }, { privateData: nd.encodeRemote(c.mr.remote()) });
  const peer = nd.decodeRemote(conn.privateData);
  const src = c.mr.slice(o.size, o.size);
  let result;
  const mark = async () => {
    child.send({ cmd: 'mark' });
    await msg((m) => m.marked);
    return { sw: threadSwitches(), cpu: process.cpuUsage(), stats: c.adapter.stats() };
  };
  const finish = async (m0, ops) => {
    const sw = switchDelta(m0.sw, threadSwitches(), ops);
    const cpu = process.cpuUsage(m0.cpu);
    child.send({ cmd: 'report', ops });
    const r = await msg((m) => m.switches !== undefined);
    const st = c.adapter.stats();
    return {
      ops,
      clientSwitches: sw,
      serverSwitches: r.switches,
      clientCpuUsPerOp: +((cpu.user + cpu.system) / ops).toFixed(2),
      clientBatchesPerOp: +((st.batches - m0.stats.batches) / ops).toFixed(3),
      clientWakeupsPerOp: +((st.wakeups - m0.stats.wakeups) / ops).toFixed(3),
    };
  };

  if (o.test === 'wlat') {
    const lat = new Float64Array(o.iters);
    const one = o.mode === 'manual'
      ? () => {
          c.qp.post('write', src, peer);
          while (drain(c.cq) === 0);
        }
      : () => c.qp.write(src, peer);
    for (let i = 0; i < o.warm; i++) await one();
    const m0 = await mark();
    for (let i = 0; i < o.iters; i++) {
      const t0 = process.hrtime.bigint();
      await one();
      lat[i] = Number(process.hrtime.bigint() - t0) / 1000;
    }
    const f = await finish(m0, o.iters);
    lat.sort();
    result = { median_us: +pct(lat, 0.5).toFixed(2), p99_us: +pct(lat, 0.99).toFixed(2), min_us: +lat[0].toFixed(2), ...f };
  } else if (o.test === 'lastbyte' && o.mode === 'thread') {
    const b = c.mr.buffer;
    const last = o.size - 1;
    const lat = new Float64Array(o.iters);
    let tag = 0;
    let m0;
    for (let i = 0; i < o.iters + o.warm; i++) {
      if (i === o.warm) m0 = await mark();
      tag = tag === 255 ? 1 : tag + 1;
      const t0 = process.hrtime.bigint();
      b[o.size + last] = tag;
      const p = c.qp.write(src, peer);
      while (!spinFor(b, last, tag)) await immediate();
      if (i >= o.warm) lat[i - o.warm] = Number(process.hrtime.bigint() - t0) / 2000; // half round trip
      await p;
    }
    const f = await finish(m0, o.iters);
    lat.sort();
    result = { half_rtt_median_us: +pct(lat, 0.5).toFixed(2), p99_us: +pct(lat, 0.99).toFixed(2), min_us: +lat[0].toFixed(2), ...f };
  } else if (o.test === 'lastbyte') {
    const b = c.mr.buffer;
    const last = o.size - 1;
    const lat = new Float64Array(o.iters);
    let tag = 0;
    let posted = 0;
    let m0;
    for (let i = 0; i < o.iters + o.warm; i++) {
      if (i === o.warm) m0 = await mark();
      tag = tag === 255 ? 1 : tag + 1;
      const t0 = process.hrtime.bigint();
      b[o.size + last] = tag;
      const signaled = ++posted % 16 === 0 || i === o.iters + o.warm - 1;
      c.qp.post('write', src, peer, { silent: !signaled });
      while (b[last] !== tag) drain(c.cq);
      if (i >= o.warm) lat[i - o.warm] = Number(process.hrtime.bigint() - t0) / 2000; // half round trip
    }
    const f = await finish(m0, o.iters);
    while (c.qp.outstanding.initiator > 0) drain(c.cq);
    lat.sort();
    result = { half_rtt_median_us: +pct(lat, 0.5).toFixed(2), p99_us: +pct(lat, 0.99).toFixed(2), min_us: +lat[0].toFixed(2), ...f };
  } else if (o.test === 'bw' && o.mode === 'thread') {
    const W = o.window;
    const run = async (ms) => {
      const end = Date.now() + ms;
      const win = [];
      let n = 0;
      while (Date.now() < end) {
        for (let k = 0; k < 64; k++) {
          win.push(c.qp.write(src, peer));
          if (win.length >= W) {
            await win.shift();
            n++;
          }
        }
      }
      await Promise.all(win);
      return n + win.length;
    };
    await run(300);
    const m0 = await mark();
    const t0 = process.hrtime.bigint();
    const done = await run(o.secs * 1000);
    const secs = Number(process.hrtime.bigint() - t0) / 1e9;
    const f = await finish(m0, done);
    result = { MBps: +((done * o.size) / secs / 1e6).toFixed(1), ...f };
  } else if (o.test === 'bw' || o.test === 'rate') {
    const W = o.window;
    let inflight = 0;
    let done = 0;
    const run = (ms) => {
      const end = Date.now() + ms;
      let n = 0;
      let k = 0;
      while (true) {
        while (inflight < W) {
          c.qp.post('write', src, peer);
          inflight++;
        }
        const got = drain(c.cq);
        inflight -= got;
        n += got;
        if ((++k & 63) === 0 && Date.now() >= end) break;
      }
      return n;
    };
    run(300);
    const m0 = await mark();
    const t0 = process.hrtime.bigint();
    done = run(o.secs * 1000);
    const secs = Number(process.hrtime.bigint() - t0) / 1e9;
    const f = await finish(m0, done);
    while (inflight > 0) inflight -= drain(c.cq);
    result = o.test === 'bw'
      ? { MBps: +((done * o.size) / secs / 1e6).toFixed(1), ...f }
      : { msgPerSec: Math.round(done / secs), ...f };
  }
  child.send({ cmd: 'exit' });
  await c.adapter.close();
  const line = { test: o.test, mode: o.mode, size: o.size, window: o.window, crc: process.env.NETDIRECT_SOFT_CRC ?? 'default', ...result };
  console.log(JSON.stringify(line));
}

const o = args(process.argv.slice(2));
(o.serve ? server(o) : client(o)).catch((err) => {
  console.error(err);
  process.exit(1);
});

#!/usr/bin/env node
// Soak: mixed Writes, Reads and Sends over many queue pairs between two processes for a long time, every byte
// verified, with the processes' memory (RSS) and open descriptors sampled as it runs (issue #13, item 5).
//
//   npm run soak -- --minutes 10              # 10 min (default), 16 QPs, a table every 10 s and a verdict
//   node scripts/soak.js --seconds 20 --sample 2 --qps 4
//
// Options: --minutes M | --seconds S (run time), --qps N (16), --max-size BYTES (262144, largest request),
// --sample S (10, seconds between table rows), --host H (127.0.0.1), --json (one JSON summary line at the end).
// NETDIRECT_COMPLETION and NETDIRECT_SOFT_* reach both processes. Exit code 1 when any byte was corrupted or a
// request failed.
//
// What each QP does, one request after another (all QPs at once):
//   Write: the data (random offset, size and scatter list) goes to the server's write area, then a Read of the
//          same range brings it back and it is compared with what was sent (so Writes and Reads both verified);
//   Read:  a range of the server's read area, filled with known data at start, is read and compared;
//   Send:  a message with a header (sequence, length, seed) and known data; the server checks it and answers with
//          a Send of its own carrying the sequence and the number of bad bytes it found (flow control: one
//          message in flight per QP, two receives posted on the server).
// Known data is a slice of one pseudo-random tape (TAPE_SEED) that both processes build the same way, so filling
// and checking are a copy and a compare, not a loop per byte.
//
// The same file is the two processes (--role server | client), which the network-fault tier also runs, one in each
// network namespace (test/netfault.test.ts). Each prints JSON lines on stdout: {"event":"listening"|"stats"|"done"}.
'use strict';

const { spawn } = require('node:child_process');
const fs = require('node:fs');
const path = require('node:path');
const readline = require('node:readline');

const HEADER = 16; // Send header: magic, sequence, payload length, tape start
const MAGIC = 0x534f414b; // "SOAK"
const ACK = 8; // ack Send: sequence, bad bytes
const TAPE_SEED = 0x2545f491;

// ---- options --------------------------------------------------------------------------------------------------

function parseOptions(argv) {
  const o = { role: 'run', minutes: 10, seconds: null, qps: 16, maxSize: 256 * 1024, sample: 10, host: '127.0.0.1', connect: null, bytes: null, json: false, port: 0 };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    const next = () => {
      if (i + 1 >= argv.length) usage(`${a} needs a value`);
      return argv[++i];
    };
    const num = () => {
      const v = Number(next());
      if (!Number.isFinite(v) || v < 0) usage(`${a} needs a non-negative number`);
      return v;
    };
    if (a === '--role') o.role = next();
    else if (a === '--minutes') o.minutes = num();
    else if (a === '--seconds') o.seconds = num();
    else if (a === '--qps') o.qps = Math.max(1, Math.floor(num()));
    else if (a === '--max-size') o.maxSize = Math.max(64, Math.floor(num()));
    else if (a === '--sample') o.sample = Math.max(0.5, num());
    else if (a === '--host') o.host = next();
    else if (a === '--port') o.port = Math.floor(num());
    else if (a === '--connect') o.connect = next();
    else if (a === '--bytes') o.bytes = num();
    else if (a === '--json') o.json = true;
    else if (a === '--help' || a === '-h') usage();
    else usage(`unknown option ${a}`);
  }
  if (o.seconds === null) o.seconds = o.minutes * 60;
  return o;
}

function usage(problem) {
  if (problem) console.error(`soak: ${problem}`);
  console.error('usage: node scripts/soak.js [--minutes M | --seconds S] [--qps N] [--max-size BYTES] [--sample S] [--host H] [--json]');
  process.exit(problem ? 2 : 0);
}

// ---- known data ---------------------------------------------------------------------------------------------------

/** The tape: `period + maxSize` pseudo-random bytes, so that any slice [start, start + n) with start < period and
 *  n <= maxSize is one contiguous copy. */
function makeTape(maxSize) {
  const period = 1 << 20;
  const tape = Buffer.allocUnsafe(period + maxSize);
  let x = TAPE_SEED;
  for (let i = 0; i < tape.length; i += 4) {
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    tape.writeInt32LE(x | 0, i);
  }
  return { tape, period };
}

/** Copies the tape from `start` into the segments of `buf`, one after another. */
function fillSegs(tape, buf, segs, start) {
  for (const s of segs) {
    tape.copy(buf, s.offset, start, start + s.length);
    start += s.length;
  }
}

/** Bytes of the segments of `buf` that differ from the tape from `start`. */
function badBytes(tape, buf, segs, start) {
  let bad = 0;
  for (const s of segs) {
    const got = buf.subarray(s.offset, s.offset + s.length);
    const want = tape.subarray(start, start + s.length);
    if (!got.equals(want)) for (let i = 0; i < s.length; i++) if (got[i] !== want[i]) bad++;
    start += s.length;
  }
  return bad;
}

/** xorshift32 random numbers, seeded per QP so a run can be repeated. */
function rng(seed) {
  let x = seed | 0 || 1;
  return (n) => {
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    return (x >>> 0) % n;
  };
}

/** Request sizes over several orders of magnitude: a third up to 64 B, a third up to 16 KiB, a third up to maxSize. */
function pickSize(rand, maxSize) {
  const band = rand(3);
  const top = band === 0 ? 64 : band === 1 ? Math.min(16384, maxSize) : maxSize;
  return 1 + rand(top);
}

/** `size` bytes at a random place in [base, base + span) as 1 to 3 segments with 8-byte gaps (a scatter/gather
 *  list); span >= size + 16. */
function pickSegs(rand, size, base, span) {
  const n = size < 3 ? 1 : 1 + rand(3);
  const gaps = (n - 1) * 8;
  let offset = base + rand(span - size - gaps + 1);
  const segs = [];
  for (let k = 0; k < n; k++) {
    const length = Math.floor(size / n) + (k < size % n ? 1 : 0);
    segs.push({ offset, length });
    offset += length + 8;
  }
  return segs;
}

function emit(event) {
  process.stdout.write(`${JSON.stringify(event)}\n`);
}

function failure(op, err) {
  return { op, code: err?.code ?? 'Error', status: err?.status, message: String(err?.message ?? err).split('\n')[0], at: Date.now() };
}

// ---- server -------------------------------------------------------------------------------------------------------

// Per connection: one region of 2 * maxSize (read area filled from the tape at `readStart`, then the write area),
// two receive buffers for Sends and one ack buffer. The client learns the region and readStart from the accept's
// private data.
async function server(o) {
  const { openAdapter, encodeRemote } = require('..');
  const { tape, period } = makeTape(o.maxSize);
  const adapter = await openAdapter(o.host);
  const listener = await adapter.listen({ host: o.host, port: o.port });
  emit({ event: 'listening', host: listener.address.host, port: listener.address.port, pid: process.pid });
  const totals = { completions: 0, sends: 0, bad: 0, failures: [], ends: [] };
  const connections = [];
  for (let q = 0; q < o.qps; q++) {
    const connector = await listener.getConnectionRequest();
    connections.push(serveOne(adapter, connector, q, totals, tape, period, o.maxSize, encodeRemote));
  }
  await listener.close();
  const timer = setInterval(() => emit({ event: 'stats', ...counts(totals), heap: process.memoryUsage().heapTotal }), 1000);
  await Promise.all(connections);
  clearInterval(timer);
  await adapter.close();
  emit({ event: 'done', ...counts(totals), failures: totals.failures, ends: totals.ends });
}

function counts(t) {
  return { completions: t.completions, sends: t.sends, bad: t.bad, failed: t.failures.length };
}

async function serveOne(adapter, connector, q, totals, tape, period, maxSize, encodeRemote) {
  const cq = adapter.createCompletionQueue({ depth: 16 });
  const qp = adapter.createQueuePair({ receiveCq: cq, receiveDepth: 4, initiatorDepth: 4, maxReceiveSge: 1, maxInitiatorSge: 3 });
  const region = await adapter.allocateMemory(2 * maxSize, { remoteRead: true, remoteWrite: true, localWrite: true });
  const readStart = (q * 7919 * 64) % period;
  fillSegs(tape, Buffer.from(region.buffer.buffer, region.buffer.byteOffset, region.buffer.byteLength), [{ offset: 0, length: maxSize }], readStart);
  const slot = HEADER + maxSize;
  const inbox = await adapter.allocateMemory(2 * slot);
  const inboxBuf = Buffer.from(inbox.buffer.buffer, inbox.buffer.byteOffset, inbox.buffer.byteLength);
  const ackMr = await adapter.allocateMemory(ACK);
  const ackBuf = Buffer.from(ackMr.buffer.buffer, ackMr.buffer.byteOffset, ackMr.buffer.byteLength);
  const privateData = Buffer.concat([Buffer.from(encodeRemote(region.remote())), Buffer.from(new Uint32Array([readStart]).buffer)]);

  const receiveInto = (k) => {
    const p = qp.receive(inbox.slice(k * slot, slot)).then((c) => ({ c, k }));
    p.catch(() => undefined); // a receive reposted just before the connection broke: its end is seen by the race
    return p;
  };
  const pending = [receiveInto(0), receiveInto(1)];
  await connector.accept(qp, { privateData });
  let op = 'receive';
  try {
    for (;;) {
      op = 'receive';
      const { c, k } = await Promise.race(pending);
      totals.completions++;
      const msg = inboxBuf.subarray(k * slot, k * slot + c.bytes);
      const seq = msg.length >= HEADER ? msg.readUInt32LE(4) : 0;
      let bad;
      if (msg.length < HEADER || msg.readUInt32LE(0) !== MAGIC || msg.readUInt32LE(8) !== c.bytes - HEADER) {
        bad = Math.max(1, msg.length);
      } else {
        bad = badBytes(tape, msg, [{ offset: HEADER, length: c.bytes - HEADER }], msg.readUInt32LE(12));
      }
      totals.sends++;
      totals.bad += bad;
      pending[k] = receiveInto(k); // repost before the ack: the client sends again only after it
      ackBuf.writeUInt32LE(seq, 0);
      ackBuf.writeUInt32LE(bad, 4);
      op = 'send';
      await qp.send(ackMr);
      totals.completions++;
    }
  } catch (err) {
    // The client's disconnect (at its end, or a broken connection) cancels the posted receives; anything else is a
    // failure. When it ended is kept: the network-fault tier measures how long a cut link takes to notice.
    totals.ends.push({ qp: q, code: err?.code ?? 'Error', at: Date.now() });
    if (err?.code !== 'ND_CANCELED') totals.failures.push({ qp: q, ...failure(op, err) });
  }
  await connector.disconnected;
  await qp.close().catch(() => undefined);
}

// ---- client -------------------------------------------------------------------------------------------------------

async function client(o) {
  const { openAdapter, decodeRemote } = require('..');
  const { tape, period } = makeTape(o.maxSize);
  const [host, port] = splitHostPort(o.connect);
  const adapter = await openAdapter(o.host);
  const totals = { completions: 0, bytes: 0, bad: 0, ops: { write: 0, read: 0, send: 0 }, failures: [] };
  const deadline = Date.now() + o.seconds * 1000;
  const budget = o.bytes;
  const stop = () => Date.now() >= deadline || (budget !== null && totals.bytes >= budget);
  const qps = [];
  emit({ event: 'connecting', at: Date.now() });
  try {
    for (let q = 0; q < o.qps; q++) qps.push(await connectOne(adapter, { host, port }, q, decodeRemote, o.maxSize));
  } catch (err) {
    // Reported like a failed request (the network-fault tier connects over a cut link on purpose).
    await adapter.close();
    emit({ event: 'done', ...clientCounts(totals), failures: [{ qp: qps.length, ...failure('connect', err) }] });
    return;
  }
  emit({ event: 'connected', qps: qps.length, pid: process.pid });
  const timer = setInterval(() => emit({ event: 'stats', ...clientCounts(totals), heap: process.memoryUsage().heapTotal }), 1000);
  await Promise.all(qps.map((c) => lane(c, totals, tape, period, o.maxSize, stop)));
  clearInterval(timer);
  for (const c of qps) await c.connector.disconnect().catch(() => undefined);
  await adapter.close();
  emit({ event: 'done', ...clientCounts(totals), failures: totals.failures });
}

function clientCounts(t) {
  return { completions: t.completions, bytes: t.bytes, bad: t.bad, ops: { ...t.ops }, failed: t.failures.length };
}

function splitHostPort(s) {
  const i = s?.lastIndexOf(':') ?? -1;
  if (i <= 0) usage('--connect needs HOST:PORT');
  return [s.slice(0, i).replace(/^\[|\]$/g, ''), Number(s.slice(i + 1))];
}

async function connectOne(adapter, address, q, decodeRemote, maxSize) {
  const cq = adapter.createCompletionQueue({ depth: 16 });
  const qp = adapter.createQueuePair({ receiveCq: cq, receiveDepth: 4, initiatorDepth: 4, maxReceiveSge: 1, maxInitiatorSge: 3 });
  // Source half then sink half, the message buffer, the ack buffer.
  const local = await adapter.allocateMemory(2 * maxSize + 64);
  const msg = await adapter.allocateMemory(HEADER + maxSize);
  const ack = await adapter.allocateMemory(ACK);
  const connector = await adapter.connect(qp, address);
  const pd = Buffer.from(connector.privateData);
  const remote = decodeRemote(new Uint8Array(pd.subarray(0, pd.length - 4)));
  const readStart = pd.readUInt32LE(pd.length - 4);
  const view = (mr) => Buffer.from(mr.buffer.buffer, mr.buffer.byteOffset, mr.buffer.byteLength);
  return { q, qp, connector, local, localBuf: view(local), msg, msgBuf: view(msg), ack, ackBuf: view(ack), remote, readStart, rand: rng(0x9e3779b9 ^ (q + 1) * 2654435761) };
}

const toLocal = (mr, segs) => segs.map((s) => mr.slice(s.offset, s.length));

async function lane(c, totals, tape, period, maxSize, stop) {
  let seq = 0;
  const half = maxSize + 32; // source half, then sink half, of the local region (room for the scatter gaps)
  while (!stop()) {
    const op = ['write', 'read', 'send'][c.rand(3)];
    const size = pickSize(c.rand, maxSize);
    try {
      if (op === 'write') {
        const start = c.rand(period);
        const src = pickSegs(c.rand, size, 0, half);
        fillSegs(tape, c.localBuf, src, start);
        const offset = maxSize + c.rand(maxSize - size + 1); // the server's write area
        await c.qp.write(toLocal(c.local, src), c.remote, { offset });
        const sink = pickSegs(c.rand, size, half, half);
        for (const s of sink) c.localBuf.fill(0xa5, s.offset, s.offset + s.length);
        await c.qp.read(toLocal(c.local, sink), c.remote, { offset });
        totals.bad += badBytes(tape, c.localBuf, sink, start);
        totals.completions += 2;
        totals.bytes += 2 * size;
      } else if (op === 'read') {
        const offset = c.rand(maxSize - size + 1); // the server's read area
        const sink = pickSegs(c.rand, size, half, half);
        for (const s of sink) c.localBuf.fill(0xa5, s.offset, s.offset + s.length);
        await c.qp.read(toLocal(c.local, sink), c.remote, { offset });
        totals.bad += badBytes(tape, c.localBuf, sink, c.readStart + offset);
        totals.completions++;
        totals.bytes += size;
      } else {
        const start = c.rand(period);
        seq = (seq + 1) >>> 0;
        c.msgBuf.writeUInt32LE(MAGIC, 0);
        c.msgBuf.writeUInt32LE(seq, 4);
        c.msgBuf.writeUInt32LE(size, 8);
        c.msgBuf.writeUInt32LE(start, 12);
        fillSegs(tape, c.msgBuf, [{ offset: HEADER, length: size }], start);
        const acked = c.qp.receive(c.ack);
        acked.catch(() => undefined); // if the Send fails, this fails too: the Send's error is the one reported
        await c.qp.send(c.msg.slice(0, HEADER + size));
        await acked;
        const ackSeq = c.ackBuf.readUInt32LE(0);
        totals.bad += c.ackBuf.readUInt32LE(4) + (ackSeq === seq ? 0 : 1);
        totals.completions += 2;
        totals.bytes += size;
      }
      totals.ops[op]++;
    } catch (err) {
      totals.failures.push({ qp: c.q, ...failure(op, err) });
      return;
    }
  }
}

// ---- the run: both processes, sampled ------------------------------------------------------------------------------

function procSample(pid) {
  try {
    const status = fs.readFileSync(`/proc/${pid}/status`, 'utf8');
    const rss = Number(/VmRSS:\s+(\d+)/.exec(status)?.[1] ?? NaN) * 1024;
    const fds = fs.readdirSync(`/proc/${pid}/fd`).length;
    return { rss, fds };
  } catch {
    return { rss: NaN, fds: NaN };
  }
}

function startRole(role, args) {
  const child = spawn(process.execPath, [__filename, '--role', role, ...args], { stdio: ['ignore', 'pipe', 'inherit'], env: process.env });
  const events = [];
  const waiters = [];
  readline.createInterface({ input: child.stdout }).on('line', (line) => {
    let e;
    try {
      e = JSON.parse(line);
    } catch {
      process.stderr.write(`soak ${role}: ${line}\n`);
      return;
    }
    events.push(e);
    for (const w of waiters.splice(0)) w();
  });
  const exited = new Promise((resolve) => child.on('exit', (code, signal) => resolve({ code, signal })));
  const next = async (name) => {
    for (;;) {
      const e = events.find((x) => x.event === name);
      if (e) return e;
      const done = await Promise.race([new Promise((r) => waiters.push(() => r(false))), exited.then(() => true)]);
      if (done && !events.some((x) => x.event === name)) throw new Error(`soak ${role} exited before '${name}'`);
    }
  };
  const last = (name) => [...events].reverse().find((x) => x.event === name);
  return { child, exited, next, last };
}

const mib = (b) => (b / 1048576).toFixed(1);
const mean = (xs) => xs.reduce((a, b) => a + b, 0) / xs.length;

/** Flat: after warm-up (the first tenth of the samples, at least one), the last third's mean RSS within 10 % (or
 *  8 MiB) of the first third's, and no more open fds at the end than at the start. The same comparison for RSS
 *  outside V8's heap (RSS - heapTotal) tells a leak in native memory from V8 sizing its heap (it grows its young
 *  generation in steps of several MiB under a steady allocation rate, then stays). */
function verdict(rows) {
  const usable = rows.slice(Math.min(Math.max(1, Math.floor(rows.length / 10)), rows.length - 1));
  const third = Math.max(1, Math.floor(usable.length / 3));
  const first = usable.slice(0, third);
  const lastRows = usable.slice(-third);
  const flat = (a, b) => b - a <= Math.max(0.1 * a, 8 * 1048576);
  const out = {};
  for (const who of ['client', 'server']) {
    const r0 = mean(first.map((r) => r[who].rss));
    const r1 = mean(lastRows.map((r) => r[who].rss));
    const n0 = mean(first.map((r) => r[who].rss - r[who].heap));
    const n1 = mean(lastRows.map((r) => r[who].rss - r[who].heap));
    const f0 = Math.max(...first.map((r) => r[who].fds));
    const f1 = Math.max(...lastRows.map((r) => r[who].fds));
    out[who] = {
      rssFirstMiB: Number(mib(r0)),
      rssLastMiB: Number(mib(r1)),
      rssGrowthPct: Number(((100 * (r1 - r0)) / r0).toFixed(1)),
      rssFlat: flat(r0, r1),
      outsideV8FirstMiB: Number(mib(n0)),
      outsideV8LastMiB: Number(mib(n1)),
      outsideV8Flat: flat(n0, n1),
      fdsFirst: f0,
      fdsLast: f1,
      fdsFlat: f1 <= f0,
    };
  }
  return out;
}

async function run(o) {
  const common = ['--qps', String(o.qps), '--max-size', String(o.maxSize)];
  const srv = startRole('server', [...common, '--host', o.host]);
  const listening = await srv.next('listening');
  const cli = startRole('client', [...common, '--host', o.host, '--connect', `${listening.host}:${listening.port}`, '--seconds', String(o.seconds)]);
  await cli.next('connected');
  const t0 = Date.now();
  const rows = [];
  let prev = { t: t0, completions: 0, bytes: 0 };
  // Each value right-aligned under its label.
  const labels = ['t(s)', 'compl/s', 'MiB/s', 'client RSS MiB', '(V8 heap)', 'fds', 'server RSS MiB', '(V8 heap)', 'fds', 'bad bytes', 'failed'];
  const line = (values) => values.map((v, i) => String(v).padStart(labels[i].length + 2)).join('');
  const header = line(labels);
  if (!o.json) console.log(`soak: ${o.qps} QPs, requests of 1 B..${o.maxSize} B, ${o.seconds} s, sampled every ${o.sample} s (client pid ${cli.child.pid}, server pid ${srv.child.pid})\n${header}`);
  const sample = () => {
    const now = Date.now();
    const s = cli.last('stats') ?? { completions: 0, bytes: 0, bad: 0, failed: 0 };
    const ss = srv.last('stats') ?? { completions: 0, bad: 0, failed: 0 };
    const dt = (now - prev.t) / 1000;
    const row = {
      t: (now - t0) / 1000,
      completionsPerSec: Math.round((s.completions + ss.completions - prev.completions) / dt),
      mibPerSec: (s.bytes - prev.bytes) / dt / 1048576,
      client: { ...procSample(cli.child.pid), heap: s.heap ?? NaN },
      server: { ...procSample(srv.child.pid), heap: ss.heap ?? NaN },
      bad: s.bad + ss.bad,
      failed: s.failed + ss.failed,
    };
    prev = { t: now, completions: s.completions + ss.completions, bytes: s.bytes };
    rows.push(row);
    if (!o.json) {
      console.log(
        line([
          row.t.toFixed(0), row.completionsPerSec, row.mibPerSec.toFixed(1),
          mib(row.client.rss), `(${mib(row.client.heap)})`, row.client.fds,
          mib(row.server.rss), `(${mib(row.server.heap)})`, row.server.fds,
          row.bad, row.failed,
        ]),
      );
    }
  };
  const timer = setInterval(sample, o.sample * 1000);
  const clientDone = await cli.next('done').catch((e) => ({ error: String(e) }));
  clearInterval(timer);
  const serverDone = await srv.next('done').catch((e) => ({ error: String(e) }));
  const [ce, se] = await Promise.all([cli.exited, srv.exited]);
  const elapsed = (Date.now() - t0) / 1000;
  const completions = (clientDone.completions ?? 0) + (serverDone.completions ?? 0);
  const summary = {
    seconds: Number(elapsed.toFixed(1)),
    qps: o.qps,
    completions,
    completionsPerSec: Math.round(completions / elapsed),
    mibPerSec: Number(((clientDone.bytes ?? 0) / elapsed / 1048576).toFixed(1)),
    ops: clientDone.ops,
    badBytes: (clientDone.bad ?? 0) + (serverDone.bad ?? 0),
    failures: [...(clientDone.failures ?? []), ...(serverDone.failures ?? [])],
    errors: [clientDone.error, serverDone.error].filter(Boolean),
    exit: { client: ce, server: se },
    flat: rows.length >= 3 ? verdict(rows) : null,
  };
  const ok = summary.badBytes === 0 && summary.failures.length === 0 && summary.errors.length === 0 && ce.code === 0 && se.code === 0;
  if (o.json) {
    console.log(JSON.stringify({ ok, ...summary, rows }));
  } else {
    console.log(`\n${completions} completions in ${summary.seconds} s: ${summary.completionsPerSec}/s, ${summary.mibPerSec} MiB/s of verified payload; ops ${JSON.stringify(summary.ops)}`);
    console.log(`corrupted bytes: ${summary.badBytes}; failed requests: ${summary.failures.length}${summary.failures.length ? ' ' + JSON.stringify(summary.failures.slice(0, 5)) : ''}`);
    if (summary.flat) {
      for (const [who, v] of Object.entries(summary.flat)) {
        console.log(
          `${who}: RSS ${v.rssFlat ? 'flat' : 'GROWING'} (first third ${v.rssFirstMiB} MiB, last third ${v.rssLastMiB} MiB, ${v.rssGrowthPct >= 0 ? '+' : ''}${v.rssGrowthPct} %); ` +
            `outside the V8 heap ${v.outsideV8Flat ? 'flat' : 'GROWING'} (${v.outsideV8FirstMiB} -> ${v.outsideV8LastMiB} MiB); ` +
            `fds ${v.fdsFlat ? 'flat' : 'GROWING'} (${v.fdsFirst} -> ${v.fdsLast})`,
        );
      }
    } else {
      console.log('too few samples for a verdict on RSS and fds (run longer or sample more often)');
    }
    for (const e of summary.errors) console.log(`error: ${e}`);
    console.log(ok ? 'soak: PASS' : 'soak: FAIL');
  }
  process.exitCode = ok ? 0 : 1;
}

async function main() {
  const o = parseOptions(process.argv.slice(2));
  if (o.role === 'server') await server(o);
  else if (o.role === 'client') await client(o);
  else if (o.role === 'run') await run(o);
  else usage(`unknown role ${o.role}`);
}

main().catch((err) => {
  console.error(`soak: ${err?.stack ?? err}`);
  process.exit(1);
});

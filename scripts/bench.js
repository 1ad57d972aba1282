#!/usr/bin/env node
'use strict';
// `npm run bench`: the fixed suite (issues #6 and #11). Every row is one `ndbench ... --loopback --format json` run per
// repetition (a fresh server and client process each time); ratios are taken within each run (netdirect and its
// baselines measured back to back, same sizes and counts), then the medians over the repetitions are printed
// with the target beside each row.
//   node scripts/bench.js [--reps N] [--quick] [--only id,id] [--json out.json]
// --quick: tiny counts, to check that the suite runs (figures meaningless).
// Counts: each timed run lasts roughly a second where the figure is a throughput (1 MiB x 3000, 1,000,000 small
// writes), so that JIT warm-up and scheduling noise are a small part of it.

const { spawnSync } = require('node:child_process');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');

const root = path.resolve(__dirname, '..');
const cli = path.join(root, 'dist', 'cjs', 'bench', 'cli.js');

function arg(name, fallback) {
  const i = process.argv.indexOf(name);
  return i >= 0 ? process.argv[i + 1] : fallback;
}
const quick = process.argv.includes('--quick');
const reps = Number(arg('--reps', quick ? 1 : 5));
const only = arg('--only', '') ? arg('--only', '').split(',') : null;
const jsonOut = arg('--json', undefined);
const q = (full, small) => String(quick ? small : full);

const KiB = 1024;
const MiB = 1024 * 1024;

// kind: which figure of the report is the row's value. target: [comparator, value, against, text, show] where
// against is 'abs' (the figure itself) or a baseline name (the ratio netdirect/baseline of that run); show
// 'lower' prints the ratio inverted, as "N× lower" (the target's own wording), while the check uses the ratio.
const ROWS = [
  // The promise API as a Node program uses it: completions on the event loop (the default where the provider can
  // be driven from it), then the poller thread of earlier releases for comparison.
  { id: 'send-lat', label: 'send_lat 8 B, promises, event loop', args: ['send_lat', '-s', '8', '-n', q(5000, 50), '--completion', 'loop', '--compare', 'tcp,node-net'],
    targets: [['<=', 0.8, 'node-net', '≤ 0.8× Node net'], ['<=', 1.5, 'tcp', '≤ 1.5× blocking TCP']] },
  // Manual mode beside the native loop (ndbench --compare native): what lib/ and Node-API add to a Send round trip.
  { id: 'send-lat-manual', label: 'send_lat 8 B, post()+poll(), --completion manual', args: ['send_lat', '-s', '8', '-n', q(5000, 50), '--completion', 'manual', '--compare', 'tcp,native'], targets: [] },
  { id: 'send-lat-thread', label: 'send_lat 8 B, promises, poller thread', args: ['send_lat', '-s', '8', '-n', q(5000, 50), '--completion', 'thread', '--compare', 'tcp,node-net'], targets: [] },
  { id: 'lat-loop', label: 'write_lat 8 B, promises, event loop', args: ['write_lat', '-s', '8', '-n', q(5000, 50), '--completion', 'loop', '--compare', 'tcp,node-net'],
    targets: [['<=', 0.8, 'node-net', '≤ 0.8× Node net']] },
  { id: 'lat-thread', label: 'write_lat 8 B, promises, poller thread', args: ['write_lat', '-s', '8', '-n', q(5000, 50), '--completion', 'thread', '--compare', 'tcp,node-net'],
    targets: [] },
  { id: 'lat-manual', label: 'write_lat 8 B, --completion manual', args: ['write_lat', '-s', '8', '-n', q(5000, 50), '--completion', 'manual', '--compare', 'tcp,node-net,native'],
    targets: [['<=', 1.3, 'tcp', '≤ 1.3× TCP half-RTT (busy-poll)'], ['<=', 0.4, 'node-net', '≥ 2.5× lower than net', 'lower'], ['<=', 1.1, 'native', '≤ 1.10× the native loop (#26)']] },
  { id: 'bw-4k', label: 'write_bw 4 KiB, CRC off, promises, event loop', args: ['write_bw', '-s', String(4 * KiB), '-n', q(20000, 50), '--crc', 'off', '--completion', 'loop', '--compare', 'tcp,node-net'],
    targets: [['>=', 2.0, 'node-net', '≥ 2× net']] },
  { id: 'bw-4k-thread', label: 'write_bw 4 KiB, CRC off, promises, poller thread', args: ['write_bw', '-s', String(4 * KiB), '-n', q(20000, 50), '--crc', 'off', '--completion', 'thread', '--compare', 'tcp,node-net'], targets: [] },
  { id: 'bw-64k-off', label: 'write_bw 64 KiB, CRC off, promises, event loop', args: ['write_bw', '-s', String(64 * KiB), '-n', q(5000, 50), '--crc', 'off', '--completion', 'loop', '--compare', 'tcp,node-net'],
    targets: [['>=', 0.9, 'tcp', '≥ 0.9× TCP stream']] },
  { id: 'bw-64k-thread', label: 'write_bw 64 KiB, CRC off, promises, poller thread', args: ['write_bw', '-s', String(64 * KiB), '-n', q(5000, 50), '--crc', 'off', '--completion', 'thread', '--compare', 'tcp,node-net'], targets: [] },
  { id: 'bw-1m-off', label: 'write_bw 1 MiB, CRC off, event loop', args: ['write_bw', '-s', String(MiB), '-n', q(3000, 20), '--crc', 'off', '--completion', 'loop', '--compare', 'tcp,node-net'],
    targets: [['>=', 1.0, 'tcp', '≥ 1.0× TCP stream'], ['>=', 1.0, 'node-net', '≥ 1.0× net']] },
  { id: 'bw-64k-on', label: 'write_bw 64 KiB, CRC on', args: ['write_bw', '-s', String(64 * KiB), '-n', q(5000, 50), '--crc', 'on', '--compare', 'tcp'], targets: [] },
  { id: 'bw-1m-on', label: 'write_bw 1 MiB, CRC on', args: ['write_bw', '-s', String(MiB), '-n', q(3000, 20), '--crc', 'on', '--compare', 'tcp'],
    targets: [['>=', 0.85, 'tcp', '≥ 0.85× TCP stream']] },
  { id: 'read-1m', label: 'read_bw 1 MiB', args: ['read_bw', '-s', String(MiB), '-n', q(3000, 20), '--compare', 'tcp'], targets: [] },
  { id: 'msg-rate', label: 'message rate, 8 B writes, post()+poll()', figure: 'MsgRate', args: ['write_bw', '-s', '8', '-n', q(1000000, 200), '--completion', 'manual', '--compare', 'tcp,native', '--heap'],
    targets: [['>=', 2.0, 'abs', '≥ 2 Mpps']], heap: true },
  // The same through qp.batch(): 32 requests per native call (perftest's -l), every 16th signalled (issue #26); the
  // native baseline is a C++ loop posting the same Writes on the same queue pair (ndbench --compare native).
  { id: 'msg-rate-batch', label: 'message rate, 8 B writes, prepare()+postMany(32)+pollInto()', figure: 'MsgRate', args: ['write_bw', '-s', '8', '-n', q(1000000, 200), '--completion', 'manual', '-l', '32', '--compare', 'tcp,native', '--heap'],
    targets: [['>=', 3.0, 'abs', '≥ 3 Mpps'], ['>=', 0.8, 'native', '≥ 0.8× the native loop']], heap: true, heapTarget: ['<=', 0, '0 B heap per message (steady)'] },
  // Same host through shared memory (issue #25, docs/shm.md): the rows above are TCP (runOnce adds --shm off).
  { id: 'shm-lat-manual', label: 'shm: write_lat 8 B, --completion manual', args: ['write_lat', '-s', '8', '-n', q(20000, 50), '--completion', 'manual', '--shm', 'on', '--compare', 'tcp'],
    targets: [['<=', 0.4, 'tcp', '≤ 0.4× busy-poll native TCP']] },
  { id: 'shm-spin-data', label: 'shm: write_lat 8 B, both sides spin on the placed byte', args: ['write_lat', '-s', '8', '-n', q(20000, 50), '--completion', 'manual', '--spin-on-data', '--shm', 'on'],
    targets: [['<=', 1.5, 'shm-lat-manual', '≤ 1.5× the CQ-polling row']] },
  { id: 'shm-send-lat', label: 'shm: send_lat 8 B, promises, event loop', args: ['send_lat', '-s', '8', '-n', q(5000, 50), '--completion', 'loop', '--shm', 'on', '--compare', 'tcp,node-net'],
    targets: [['<=', 0.5, 'node-net', '≤ 0.5× Node net']] },
  { id: 'shm-bw-1m', label: 'shm: write_bw 1 MiB, event loop', args: ['write_bw', '-s', String(MiB), '-n', q(3000, 20), '--completion', 'loop', '--shm', 'on', '--compare', 'tcp'],
    targets: [['>=', 2.5, 'tcp', '≥ 2.5× native TCP stream']] },
  { id: 'shm-msg-rate', label: 'shm: message rate, 8 B writes, post()+poll()', figure: 'MsgRate', args: ['write_bw', '-s', '8', '-n', q(1000000, 200), '--completion', 'manual', '--shm', 'on', '--compare', 'tcp'],
    targets: [['>=', 2.0, 'msg-rate', '≥ 2× the TCP row']] },
  // 2000 calls after 100 untimed ones: V8 is still optimizing lib/'s registerMemory path in most of them, so this median
  // (~4 µs on the build machine) moves with how much JS that path runs, not with what a warm call costs (~1.6 µs:
  // `ndbench reg_mr -s 4096 -n 2000 --warmup 20000`). A +4-6% step here with lib/'s AdapterContext (#27) was that:
  // warm, both builds measured the same.
  { id: 'reg-mr', label: 'registerMemory 4 KiB', args: ['reg_mr', '-s', String(4 * KiB), '-n', q(2000, 20)], targets: [['<=', 5, 'abs', '≤ 5 µs median']] },
  { id: 'qp-1', label: '1 QP writing, 64 KiB (reference for 1,000)', args: ['write_bw', '-s', String(64 * KiB), '-n', q(20000, 100)], targets: [] },
  { id: 'qp-1000', label: '1,000 QPs writing, 64 KiB, aggregate', args: ['write_bw', '-s', String(64 * KiB), '-q', q(1000, 10), '-n', q(20, 10), '-t', '4'],
    targets: [['>=', 0.8, 'qp-1', '≥ 0.8× one QP']], extra: 'rss_per_idle_qp_bytes', extraTarget: ['<=', 65536, '≤ 64 KiB per idle QP'] },
];

function median(values) {
  const a = values.filter((v) => Number.isFinite(v)).sort((x, y) => x - y);
  if (a.length === 0) return NaN;
  const m = a.length >> 1;
  return a.length % 2 ? a[m] : (a[m - 1] + a[m]) / 2;
}

function runOnce(row) {
  const tmp = path.join(os.tmpdir(), `ndbench-suite-${process.pid}-${row.id}.json`);
  // Rows that do not name a transport measure TCP: same-host shared memory is on by default (docs/shm.md).
  const shm = row.args.includes('--shm') ? [] : ['--shm', 'off'];
  const res = spawnSync(process.execPath, [cli, ...row.args, ...shm, '--loopback', '--format', 'json', '--json', tmp, '--no-progress', '--timeout', '60'], {
    cwd: root,
    encoding: 'utf8',
    timeout: 15 * 60 * 1000,
    maxBuffer: 64 * MiB,
  });
  if (res.status !== 0) throw new Error(`${row.label}: ndbench exited ${res.status ?? res.signal}\n${res.stderr}`);
  const report = JSON.parse(fs.readFileSync(tmp, 'utf8'));
  fs.rmSync(tmp, { force: true });
  return report;
}

function figureOf(row, report) {
  const r = report.results[0];
  const s = r.netdirect;
  if (row.figure) return s[row.figure];
  return report.kind === 'latency' ? s.t_typical : s.BW_average;
}

const unitOf = (row, report) => (row.figure === 'MsgRate' ? 'Mpps' : report.kind === 'latency' ? 'µs' : 'MiB/s');
const fmt = (v, d = 2) => (Number.isFinite(v) ? (Math.abs(v) >= 1000 ? v.toFixed(0) : v.toFixed(d)) : 'n/a');
const met = (cmp, v, t) => (!Number.isFinite(v) ? '?' : (cmp === '<=' ? v <= t : v >= t) ? 'yes' : 'NO');

function main() {
  if (!fs.existsSync(cli)) {
    console.error(`bench: ${path.relative(root, cli)} is missing: run \`npm run build\` first`);
    process.exit(1);
  }
  const rows = ROWS.filter((r) => !only || only.includes(r.id));
  const started = new Date();
  console.error(`bench: ${rows.length} rows × ${reps} repetitions; load average ${os.loadavg().map((v) => v.toFixed(2)).join(' ')}`);
  const collected = new Map();
  // Interleave repetitions across rows so that a noisy period hits every row a little, not one row a lot.
  for (let rep = 0; rep < reps; rep++) {
    for (const row of rows) {
      if (process.stderr.isTTY) process.stderr.write(`\rbench: repetition ${rep + 1}/${reps}: ${row.label}\x1b[K`);
      const report = runOnce(row);
      const c = collected.get(row.id) ?? { row, reports: [] };
      c.reports.push(report);
      collected.set(row.id, c);
    }
  }
  if (process.stderr.isTTY) process.stderr.write('\r\x1b[K');
  const table = [];
  for (const { row, reports } of collected.values()) {
    const values = reports.map((r) => figureOf(row, r));
    const unit = unitOf(row, reports[0]);
    const baseline = {};
    const ratio = {};
    for (const b of ['tcp', 'node-net', 'native']) {
      if (!reports[0].options.compare.includes(b)) continue;
      baseline[b] = median(reports.map((r) => {
        const s = r.results[0].baselines[b];
        return row.figure ? s[row.figure] : r.kind === 'latency' ? s.t_typical : s.BW_average;
      }));
      ratio[b] = median(reports.map((r) => r.results[0].ratios[b]));
    }
    const entry = { id: row.id, label: row.label, unit, median: median(values), min: Math.min(...values), max: Math.max(...values), n: values.length, baseline, ratio, checks: [] };
    for (const [cmp, t, against, text, show] of row.targets) {
      let v;
      if (against === 'abs') v = entry.median;
      else if (against === 'tcp' || against === 'node-net' || against === 'native') v = ratio[against];
      else {
        // Another row of this suite, repetition by repetition (runs of the same repetition are adjacent in time).
        const other = collected.get(against);
        v = other ? median(values.map((x, i) => x / figureOf(other.row, other.reports[i] ?? other.reports[0]))) : NaN;
      }
      entry.checks.push({ target: text, value: v, met: met(cmp, v, t), show });
    }
    if (row.extra) {
      const v = median(reports.map((r) => r.extra?.[row.extra]));
      entry.extra = { [row.extra]: v };
      entry.checks.push({ target: row.extraTarget[2], value: v, met: met(row.extraTarget[0], v, row.extraTarget[1]), unit: 'B' });
    }
    if (row.heap) {
      // ndbench --heap: JS heap allocated per completed message (median of the steady-state intervals).
      const v = median(reports.map((r) => r.results[0].netdirect.heap_bytes_per_op));
      entry.heap = v;
      const [cmp, t, text] = row.heapTarget ?? [undefined, undefined, 'JS heap per message'];
      entry.checks.push({ target: text, value: v, met: cmp === undefined ? '' : met(cmp, Math.round(v * 10) / 10, t), unit: 'B' });
    }
    table.push(entry);
  }
  const lines = [];
  lines.push(`netdirect ${require(path.join(root, 'package.json')).version} — npm run bench, ${started.toISOString()}, ${os.cpus().length} CPUs, load ${os.loadavg().map((v) => v.toFixed(2)).join(' ')}`);
  lines.push(`medians over ${reps} repetitions (each a fresh --loopback run); ratios = netdirect / baseline within each run, then the median`);
  lines.push('');
  const head = ['metric', 'netdirect median [min–max]', 'tcp', 'nd/tcp', 'node-net', 'nd/node-net', 'native', 'nd/native', 'target', 'value', 'met'];
  const body = [];
  for (const e of table) {
    const checks = e.checks.length ? e.checks : [{ target: '—', value: NaN, met: '' }];
    checks.forEach((c, i) => {
      body.push([
        i === 0 ? e.label : '',
        i === 0 ? `${fmt(e.median)} ${e.unit} [${fmt(e.min)}–${fmt(e.max)}]` : '',
        i === 0 && e.baseline.tcp !== undefined ? `${fmt(e.baseline.tcp)} ${e.unit}` : '',
        i === 0 && e.ratio.tcp !== undefined ? fmt(e.ratio.tcp) : '',
        i === 0 && e.baseline['node-net'] !== undefined ? `${fmt(e.baseline['node-net'])} ${e.unit}` : '',
        i === 0 && e.ratio['node-net'] !== undefined ? fmt(e.ratio['node-net']) : '',
        i === 0 && e.baseline.native !== undefined ? `${fmt(e.baseline.native)} ${e.unit}` : '',
        i === 0 && e.ratio.native !== undefined ? fmt(e.ratio.native) : '',
        c.target,
        !Number.isFinite(c.value) ? (c.value === undefined ? '' : 'n/a') : c.show === 'lower' ? (c.value <= 1 ? `${fmt(1 / c.value)}× lower` : `${fmt(c.value)}× higher`) : fmt(c.value) + (c.unit ? ` ${c.unit}` : ''),
        c.met,
      ]);
    });
  }
  const widths = head.map((h, i) => Math.max(h.length, ...body.map((r) => r[i].length)));
  const line = (cells) => '| ' + cells.map((c, i) => c.padEnd(widths[i])).join(' | ') + ' |';
  lines.push(line(head));
  lines.push('|' + widths.map((w) => '-'.repeat(w + 2)).join('|') + '|');
  for (const r of body) lines.push(line(r));
  lines.push('');
  lines.push('Units: latency µs (half round trip, median = perftest t_typical); bandwidth MiB/s (2^20 B/s); message rate Mpps.');
  lines.push('Baselines: tcp = native C++ TCP (blocking; busy-polling for --completion manual rows), node-net = Node net; same pattern, sizes and counts;');
  lines.push('native = the same test on the same queue pair posted and polled by a C++ loop through ND v2 (ndbench --compare native).');
  // Idle cost (target: no wake-ups of an idle adapter in event-loop mode): context switches per second of a process
  // with connected QPs and pending receives, beside an idle Node net socket (scripts/perf/idle.js).
  let idle = null;
  if (!only || only.includes('idle')) {
    const res = spawnSync(process.execPath, [path.join(__dirname, 'perf', 'idle.js'), quick ? '1' : '3', '--json'], { cwd: root, encoding: 'utf8', timeout: 60_000 });
    if (res.status !== 0) throw new Error(`idle: exited ${res.status ?? res.signal}\n${res.stderr}`);
    idle = JSON.parse(res.stdout);
    lines.push('');
    lines.push('Idle (context switches per second of the whole process, nothing moving; target: none in event-loop mode):');
    for (const r of idle) lines.push(`  ${r.rate.toFixed(1).padStart(7)}/s  ${r.name}`);
  }
  console.log(lines.join('\n'));
  if (jsonOut) fs.writeFileSync(jsonOut, JSON.stringify({ date: started.toISOString(), reps, rows: table, idle }, null, 2) + '\n');
}

try {
  main();
} catch (err) {
  process.stderr.write(`\nbench: ${err.message}\n`);
  process.exit(1);
}

#!/usr/bin/env node
'use strict';
// Interleaved A/B of ndbench runs: each repetition runs the same `ndbench ... --loopback --format json` from tree
// A, then from tree B (alternating which goes first), and takes netdirect's headline figure and its ratio to each
// baseline of that run. Prints the medians per side. Trees are snapshots (scripts/perf/snapshot.sh) or '.'.
//
//   node scripts/perf/abbench.js <A-root|-> <B-root|.> <reps> -- <ndbench args...>
//   e.g. node scripts/perf/abbench.js /tmp/base . 7 -- write_bw -s 4096 -n 20000 --compare tcp,node-net
// "-" as A runs B only (the spread of one tree).

const { spawnSync } = require('node:child_process');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');

const [aRoot, bRoot, repsArg, sep, ...rest] = process.argv.slice(2);
if (sep !== '--') throw new Error('usage: abbench.js <A-root|-> <B-root|.> <reps> -- <ndbench args>');
const reps = Number(repsArg);
const here = path.resolve(__dirname, '..', '..');
const roots = { A: aRoot === '-' ? null : path.resolve(aRoot), B: bRoot === '.' ? here : path.resolve(bRoot) };

function run(root) {
  const out = path.join(os.tmpdir(), `abbench-${process.pid}.json`);
  const r = spawnSync(process.execPath, [path.join(root, 'dist', 'cjs', 'bench', 'cli.js'), ...rest, '--loopback', '--format', 'json', '--json', out, '--no-progress'], {
    encoding: 'utf8',
    timeout: 300000,
  });
  if (r.status !== 0) return { error: (r.stderr || '').slice(-400) || `exit ${r.status}` };
  const rep = JSON.parse(fs.readFileSync(out, 'utf8'));
  fs.rmSync(out, { force: true });
  const res = rep.results[0];
  const nd = res.netdirect;
  const fig = { value: nd.t_typical ?? nd.BW_average, rate: nd.MsgRate };
  for (const [k, v] of Object.entries(res.ratios ?? {})) fig[`/${k}`] = v;
  return fig;
}

const median = (a) => {
  const s = a.filter(Number.isFinite).sort((x, y) => x - y);
  return s.length ? (s.length % 2 ? s[s.length >> 1] : (s[(s.length >> 1) - 1] + s[s.length >> 1]) / 2) : NaN;
};
const samples = { A: [], B: [] };
for (let i = 0; i < reps; i++) {
  const order = roots.A === null ? ['B'] : i % 2 ? ['B', 'A'] : ['A', 'B'];
  for (const side of order) {
    const f = run(roots[side]);
    samples[side].push(f);
    process.stderr.write(`${side} ${JSON.stringify(f)}\n`);
  }
}
for (const side of ['A', 'B']) {
  const s = samples[side].filter((f) => !f.error);
  if (s.length === 0) continue;
  const keys = Object.keys(s[0]);
  const line = keys.map((k) => {
    const v = s.map((f) => f[k]);
    return `${k} ${median(v).toPrecision(4)} [${Math.min(...v.filter(Number.isFinite)).toPrecision(3)}–${Math.max(...v.filter(Number.isFinite)).toPrecision(3)}]`;
  });
  console.log(`${side} (${roots[side]}, n=${s.length}): ${line.join('  ')}`);
}

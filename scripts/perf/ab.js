#!/usr/bin/env node
'use strict';
// Interleaved A/B of ndperf.js runs: A = a saved tree (NDPERF_ROOT of dist/ + build/Release/netdirect.node),
// B = another such tree or this checkout. Each repetition runs A then B (alternating which goes first), so that load changes on
// this shared machine hit both alike; prints the median [min–max] of the chosen field per side.
//
//   node scripts/perf/ab.js <A-root> <B-root> <reps> <field> -- <ndperf args...>   (B-root '.': this checkout)
//   e.g. node scripts/perf/ab.js /tmp/base /tmp/cur 7 median_us -- wlat --iters 5000
// Env for both sides is inherited (NETDIRECT_SOFT_CRC=0|1 ...). <A-root> "-" runs B only.

const { spawnSync } = require('node:child_process');
const path = require('node:path');

const [aRoot, bRoot, repsArg, field, sep, ...rest] = process.argv.slice(2);
if (sep !== '--') throw new Error('usage: ab.js <A-root> <B-root> <reps> <field> -- <ndperf args>');
const reps = Number(repsArg);
const script = path.join(__dirname, 'ndperf.js');
const B = bRoot === '.' ? path.resolve(__dirname, '..', '..') : bRoot;

function run(root) {
  const r = spawnSync(process.execPath, [script, ...rest], {
    env: { ...process.env, NDPERF_ROOT: root },
    encoding: 'utf8',
    timeout: 120000,
  });
  const line = (r.stdout || '').trim().split('\n').pop();
  try {
    return JSON.parse(line);
  } catch {
    return { error: (r.stderr || '').slice(-400) || `exit ${r.status}` };
  }
}

const med = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length ? s[Math.floor(s.length / 2)] : NaN;
};
const res = { A: [], B: [] };
const extra = { A: [], B: [] };
for (let i = 0; i < reps; i++) {
  const order = aRoot === '-' ? ['B'] : i % 2 ? ['B', 'A'] : ['A', 'B'];
  for (const side of order) {
    const j = run(side === 'A' ? aRoot : B);
    if (j.error) {
      console.error(`${side}: ${j.error}`);
      continue;
    }
    res[side].push(j[field]);
    extra[side].push(j);
  }
}
for (const side of aRoot === '-' ? ['B'] : ['A', 'B']) {
  const v = res[side];
  const sw = extra[side].map((j) => j.clientSwitches.volPerOp + j.clientSwitches.invPerOp + j.serverSwitches.volPerOp + j.serverSwitches.invPerOp);
  const cpu = extra[side].map((j) => j.clientCpuUsPerOp);
  console.log(
    `${side} ${field}: median ${med(v)} [${Math.min(...v)}–${Math.max(...v)}] n=${v.length}; ` +
      `ctx switches/op (both procs) ${med(sw).toFixed(2)}; client CPU us/op ${med(cpu)}; all: ${v.join(' ')}`,
  );
}

#!/usr/bin/env node
// The OSU targets of issue #12 where they are set (docs/ndbench.md, "Targets against MPICH"): ranks in separate
// Linux network namespaces joined by veth pairs and a bridge, launched by MPICH's mpiexec (Hydra) through
// test/netns/nsexec, each row run with `ndbench ... --compare mpi` so that MPICH runs over the same links in the
// same command. Run as root, after `npm run compile`:
//
//   sudo nice -n 10 npm run bench:netns [-- --reps 3] [-- --only osu_barrier] [-- --spin-micros 200]
//
// The topology is test/netns/topology.mjs's, the one test/job-netns.test.ts uses; every namespace and the bridge
// are removed at the end, also after a failure, SIGINT or SIGTERM.
//
// MPICH: Debian's is ch4:ucx; UCX would use shared memory between ranks on one machine whatever their network
// namespaces, so UCX_TLS=tcp,self and UCX_NET_DEVICES=nd0 (each namespace's veth end) put it on TCP over the
// veth links, as netdirect's ranks are. MPICH's own mpiexec, started by ndbench's rank 0 inside the first
// namespace, reaches the other namespaces through a small wrapper (--mpiexec) that gives it the same host file
// and launcher, with its control port on that namespace's address. MPICH's UCX TCP transport hangs in
// MPI_Finalize between namespaces after printing every figure; ndbench ends such a job 10 s after its last figure
// and keeps the figures (docs/ndbench.md). Each MPI run still gets --mpi-timeout (120 s) rather than ndbench's
// 600 s, and a row whose MPI run stalled before its figures says so.
import { spawn } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { fileURLToPath } from 'node:url';
import { findHydra, freeSubnet, hostfileText, hydraArgs, NetnsLab, netnsUnavailable } from '../test/netns/topology.mjs';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const ndbench = path.join(root, 'dist/cjs/bench/cli.js');
const HOSTS = 4;

/**
 * The target rows. Iterations are OSU's defaults except where a row says otherwise; every row warms up for a
 * thousand or more iterations, so that V8 has compiled netdirect's JavaScript before the clock starts (MPI gets
 * the same counts).
 */
const ROWS = [
  { row: 'osu_latency 8 B', ranks: 2, args: ['osu_latency', '-m', '8:8', '-x', '2000'] },
  { row: 'osu_allreduce 8 B, 4 ranks', ranks: 4, args: ['osu_allreduce', '-m', '8:8', '-i', '1000', '-x', '1000'] },
  { row: 'osu_barrier, 4 ranks', ranks: 4, args: ['osu_barrier', '-i', '1000', '-x', '1000'] },
  { row: 'osu_allreduce 1 MiB, 4 ranks', ranks: 4, args: ['osu_allreduce', '-m', '1048576:1048576', '-i', '20', '-x', '5'] },
  { row: 'osu_mbw_mr 4 KiB, 2 pairs', ranks: 4, args: ['osu_mbw_mr', '-m', '4096:4096', '-x', '100'] },
];

/** MPICH (UCX) on TCP over the namespaces' veth links: see the header. */
const MPI_ENV = { UCX_TLS: 'tcp,self', UCX_NET_DEVICES: 'nd0' };

function parseArgs(argv) {
  const o = { reps: 3, only: undefined, timeoutS: 900, mpiTimeoutS: 120, spin: [] };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (a === '--reps') o.reps = Number(argv[++i]);
    else if (a === '--only') o.only = argv[++i];
    else if (a === '--timeout') o.timeoutS = Number(argv[++i]);
    else if (a === '--mpi-timeout') o.mpiTimeoutS = Number(argv[++i]);
    else if (a === '--spin-micros') o.spin = ['--spin-micros', String(argv[++i])];
    else {
      console.error(`bench-netns: unknown option ${a}; usage: bench-netns.mjs [--reps n] [--only <test name>] [--timeout <s per row>] [--mpi-timeout <s per MPI run>] [--spin-micros <us> (netdirect's busy-poll window)]`);
      process.exit(2);
    }
  }
  if (!(o.reps >= 1)) {
    console.error('bench-netns: --reps needs a number >= 1');
    process.exit(2);
  }
  return o;
}

/** The launcher ndbench's rank 0 uses for the MPI run: Hydra over the same namespaces, control port on host 0. */
function writeMpiWrapper(dir, mpiexec, t, hostfile) {
  const wrapper = path.join(dir, 'mpiexec-netns');
  const quoted = [mpiexec, ...hydraArgs(t, hostfile, t.addresses[0])].map((a) => `'${a}'`).join(' ');
  fs.writeFileSync(wrapper, `#!/bin/sh\nexec ${quoted} "$@"\n`, { mode: 0o755 });
  return wrapper;
}

let current; // the mpiexec running now, ended on SIGINT/SIGTERM

/** One row: `mpiexec -n <ranks> ndbench <args> --compare mpi --format json` across the namespaces. */
function runRow(mpiexec, t, hostfile, wrapper, r, o) {
  const args = [...hydraArgs(t, hostfile), '-n', String(r.ranks), process.execPath, ndbench, ...r.args, ...o.spin, '--compare', 'mpi', '--reps', String(o.reps), '--format', 'json', '--mpiexec', wrapper, '--timeout', String(o.mpiTimeoutS)];
  const command = `mpiexec -n ${r.ranks} ndbench ${[...r.args, ...o.spin].join(' ')} --compare mpi --reps ${o.reps}`;
  const started = Date.now();
  const child = spawn(mpiexec, args, { cwd: root, env: { ...process.env, ...MPI_ENV }, stdio: ['ignore', 'pipe', 'pipe'] });
  current = child;
  let stdout = '';
  let stderr = '';
  child.stdout.setEncoding('utf8').on('data', (d) => (stdout += d));
  child.stderr.setEncoding('utf8').on('data', (d) => (stderr += d));
  const timer = setTimeout(() => child.kill('SIGKILL'), o.timeoutS * 1000);
  return new Promise((resolve) =>
    child.on('close', (code, signal) => {
      clearTimeout(timer);
      current = undefined;
      const s = ((Date.now() - started) / 1000).toFixed(0);
      const json = stdout.indexOf('{');
      let report;
      try {
        report = json >= 0 ? JSON.parse(stdout.slice(json)) : undefined;
      } catch {}
      const notes = stderr.split('\n').filter((l) => /ndbench:/.test(l)).join(' | ');
      if (code !== 0 || report === undefined) {
        resolve({ r, command, s, error: `mpiexec ${signal ?? `exit ${code}`}: ${(stderr || stdout).trim().split('\n').slice(-4).join(' | ')}` });
      } else resolve({ r, command, s, report, notes });
    }),
  );
}

function fmt(v, units) {
  if (v === undefined) return 'n/a';
  if (units === 'MB/s') return `${v.toFixed(0)} MB/s`;
  return v >= 1000 ? `${(v / 1000).toFixed(2)} ms` : `${v.toFixed(1)} µs`;
}

function tableLine(x) {
  if (x.error) return `| ${x.r.row} | | failed: ${x.error} | | | \`${x.command}\` |`;
  const res = x.report.results[0];
  const target = x.report.targets?.[0];
  const goal = target ? (target.atMost !== undefined ? `≤ ${target.atMost}×` : `≥ ${target.atLeast}×`) : '';
  const ratio = res.ratio !== undefined ? res.ratio.toFixed(2) : 'n/a';
  const met = target ? (target.met ? 'met' : 'not met') : 'no MPI figure';
  return `| ${x.r.row} | ${goal} | ${fmt(res.netdirect.avg, x.report.units)} | ${fmt(res.mpi?.avg, x.report.units)} | ${ratio} (${met}) | \`${x.command}\` |`;
}

async function main() {
  const o = parseArgs(process.argv.slice(2));
  const tag = `${process.pid % 100000}`;
  const why = netnsUnavailable(tag);
  if (why !== null) {
    console.error(`bench-netns: cannot run here: ${why}`);
    process.exit(1);
  }
  if (!fs.existsSync(ndbench)) {
    console.error(`bench-netns: ${path.relative(root, ndbench)} not found: run npm run compile first`);
    process.exit(1);
  }
  const mpiexec = findHydra();
  const lab = new NetnsLab(tag);
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'netdirect-bench-netns-'));
  const cleanup = () => {
    current?.kill('SIGKILL');
    lab.teardown();
    fs.rmSync(dir, { recursive: true, force: true });
  };
  for (const sig of ['SIGINT', 'SIGTERM']) {
    process.on(sig, () => {
      console.error(`bench-netns: ${sig}: removing the namespaces`);
      cleanup();
      process.exit(130);
    });
  }
  const results = [];
  try {
    const t = lab.bridgedHosts('b', freeSubnet([]), HOSTS);
    const hostfile = path.join(dir, 'hosts');
    fs.writeFileSync(hostfile, hostfileText(t));
    const wrapper = writeMpiWrapper(dir, mpiexec, t, hostfile);
    console.log(`# bench-netns: ${t.describe}; mpiexec ${mpiexec} at ${t.rootAddress}; MPICH with ${Object.entries(MPI_ENV).map(([k, v]) => `${k}=${v}`).join(' ')}; medians of ${o.reps}; load average ${os.loadavg().map((l) => l.toFixed(1)).join(' ')}`);
    for (const r of ROWS.filter((x) => o.only === undefined || x.args[0] === o.only)) {
      const x = await runRow(mpiexec, t, hostfile, wrapper, r, o);
      results.push(x);
      console.log(`# ${r.row}: ${x.s} s${x.report?.mpi ? `; MPI: ${x.report.mpi}` : ''}${x.notes ? `; ${x.notes}` : ''}`);
      console.log(tableLine(x));
    }
  } finally {
    cleanup();
  }
  console.log('\n| row | target | netdirect | MPICH | nd/MPI | command |\n| --- | --- | --- | --- | --- | --- |');
  for (const x of results) console.log(tableLine(x));
  console.log(`# load average at the end: ${os.loadavg().map((l) => l.toFixed(1)).join(' ')}`);
  process.exitCode = results.some((x) => x.error) ? 1 : 0;
}

main().catch((err) => {
  console.error(`bench-netns: ${err?.stack ?? err}`);
  process.exitCode = 1;
});

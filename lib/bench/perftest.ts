// `--compare perftest`: the same test and size run by perftest (Debian's `perftest` package: ib_write_lat,
// ib_write_bw, ib_read_lat, ib_read_bw, ib_send_lat, ib_send_bw) on the same RDMA device, in the same ndbench run.
// ndbench's server starts perftest's server and its client perftest's client, as child processes, one pair per
// size and repetition; both use rdma_cm (-R), which iWARP requires and which resolves the device from the address
// ndbench connects to. The client's table is read back into ndbench's figures (docs/ndbench.md, "--compare
// perftest"). Nothing here is timed by ndbench: the figures are perftest's own.

import { spawn } from 'node:child_process';
import { accessSync, constants, readdirSync, readFileSync } from 'node:fs';
import * as net from 'node:net';
import { networkInterfaces } from 'node:os';
import * as path from 'node:path';
import type { TestName } from './options.js';
import { MIB, type BandwidthStats, type LatencyStats, type Stats } from './stats.js';

/** What one perftest pair runs: ndbench's options for the phase. */
export interface PerftestParams {
  test: TestName;
  size: number;
  iters: number;
  /** Seconds per size (-D); 0: -n iterations. */
  duration: number;
  qps: number;
  txDepth: number;
  /** -I given to ndbench (0: perftest's default). */
  inline: number;
  /** The RDMA device that serves the address (-d), when sysfs tells. */
  device?: string;
  timeoutMs: number;
}

/** perftest's program for an ndbench test: ib_write_lat for write_lat, … (reg_mr has none). */
export function perftestProgram(test: TestName): string | undefined {
  return test === 'reg_mr' ? undefined : `ib_${test}`;
}

/** The program's path on $PATH, or undefined. */
export function findProgram(name: string, env: NodeJS.ProcessEnv = process.env): string | undefined {
  for (const dir of (env.PATH ?? '/usr/bin:/bin').split(path.delimiter)) {
    if (dir === '') continue;
    const f = path.join(dir, name);
    try {
      accessSync(f, constants.X_OK);
      return f;
    } catch {
      // not here
    }
  }
  return undefined;
}

const SYSFS_RDMA = '/sys/class/infiniband';
const NET_SYSFS = '/sys/class/net';

function readText(file: string): string | undefined {
  try {
    return readFileSync(file, 'utf8').trim() || undefined;
  } catch {
    return undefined;
  }
}

/**
 * The network interfaces an RDMA device runs on: rxe names its in `parent`, RoCE ports list theirs in gid_attrs,
 * and an iWARP device's first GID carries its interface's MAC address.
 */
function netdevsOf(device: string, root: string): string[] {
  const out = new Set<string>();
  const parent = readText(path.join(root, device, 'parent'));
  if (parent) out.add(parent);
  const ndevs = path.join(root, device, 'ports', '1', 'gid_attrs', 'ndevs');
  try {
    for (const i of readdirSync(ndevs)) {
      const n = readText(path.join(ndevs, i));
      if (n) out.add(n);
    }
  } catch {
    // InfiniBand ports have none
  }
  if (out.size === 0) {
    // iWARP (siw, and ndevs/0 reads EINVAL): the first GID is the interface's MAC address, zero-padded.
    const gid = readText(path.join(root, device, 'ports', '1', 'gids', '0'))?.replace(/:/g, '');
    const mac = gid?.slice(0, 12);
    if (mac && gid?.slice(12).match(/^0*$/) && !/^0+$/.test(mac)) {
      try {
        for (const nd of readdirSync(NET_SYSFS)) {
          if (readText(path.join(NET_SYSFS, nd, 'address'))?.replace(/:/g, '') === mac) out.add(nd);
        }
      } catch {
        // no /sys/class/net
      }
    }
  }
  return [...out];
}

/** The machine's RDMA devices (sysfs), [] where there is none or no sysfs. */
export function rdmaDevices(root = SYSFS_RDMA): string[] {
  try {
    return readdirSync(root).sort();
  } catch {
    return [];
  }
}

/** The RDMA device whose network interface has `address`, when sysfs and the interfaces tell. */
export function rdmaDeviceFor(address: string, root = SYSFS_RDMA): string | undefined {
  const ifs = networkInterfaces();
  for (const dev of rdmaDevices(root)) {
    for (const nd of netdevsOf(dev, root)) {
      if ((ifs[nd] ?? []).some((a) => a.address === address)) return dev;
    }
  }
  return undefined;
}

/** Whether perftest can run `test` here: the program and an RDMA device; else the reason, for the user. */
export function perftestAvailable(test: TestName, env: NodeJS.ProcessEnv = process.env): { ok: true; program: string } | { ok: false; reason: string } {
  const name = perftestProgram(test);
  if (name === undefined) return { ok: false, reason: 'reg_mr has no perftest counterpart' };
  const program = findProgram(name, env);
  if (program === undefined) {
    return { ok: false, reason: `${name} is not on PATH: install perftest (Debian/Ubuntu: apt-get install perftest; RHEL: dnf install perftest)` };
  }
  if (process.platform !== 'linux') return { ok: false, reason: `perftest runs on Linux RDMA devices; this is ${process.platform}` };
  if (rdmaDevices().length === 0) {
    return {
      ok: false,
      reason:
        `${name} is installed but this machine has no RDMA device (${SYSFS_RDMA} is empty): perftest needs one ` +
        '(a NIC with RDMA, or a software device: modprobe siw; rdma link add siw0 type siw netdev <if>)',
    };
  }
  return { ok: true, program };
}

/** perftest's arguments for one size: the same test, size, count, depth and QPs as ndbench, over rdma_cm. */
export function perftestArgs(role: 'server' | 'client', port: number, p: PerftestParams, serverHost?: string): string[] {
  const args = ['-R', '-F', '-p', String(port), '-s', String(p.size)];
  if (p.device) args.push('-d', p.device);
  if (p.duration > 0) args.push('-D', String(Math.max(1, Math.round(p.duration))));
  else args.push('-n', String(p.iters));
  if (p.test.endsWith('_bw')) {
    args.push('-t', String(p.txDepth));
    if (p.qps > 1) args.push('-q', String(p.qps));
  }
  if (p.inline > 0) args.push('-I', String(p.inline));
  if (role === 'client') args.push(serverHost ?? '127.0.0.1');
  return args;
}

/**
 * ndbench's figures from perftest's table: the first row of numbers after the column header (' #bytes …').
 * Latency: t_min … 99.9% percentile (µs), or t_avg and tps with -D; bandwidth: BW peak and average in perftest's
 * MB/sec, which is 2^20 bytes per second (or Gb/sec with --report_gbits), and MsgRate in Mpps.
 */
export function parsePerftestTable(output: string): Stats {
  const lines = output.split('\n');
  const h = lines.findIndex((l) => /^\s*#bytes\s+#iterations/.test(l));
  if (h < 0) throw new Error(`no result table in perftest's output:\n${tail(output)}`);
  const header = lines[h];
  const row = lines.slice(h + 1).find((l) => /^\s*\d+\s+\d+\s/.test(l));
  if (row === undefined) throw new Error(`perftest printed its table header but no row:\n${tail(output)}`);
  const v = row.trim().split(/\s+/).map(Number);
  if (v.some((x) => !Number.isFinite(x))) throw new Error(`perftest row with a non-number: ${row.trim()}`);
  if (/t_typical/.test(header)) {
    if (v.length < 9) throw new Error(`perftest latency row with ${v.length} columns, expected 9: ${row.trim()}`);
    const [MsgSize, n_iterations, t_min, t_max, t_typical, t_avg, t_stdev, p99, p999] = v;
    return { MsgSize, n_iterations, t_min, t_max, t_typical, t_avg, t_stdev, percentile_99: p99, 'percentile_99.9': p999, tps: t_avg > 0 ? 1e6 / t_avg : 0 } satisfies LatencyStats;
  }
  if (/t_avg/.test(header)) {
    // -D: #bytes #iterations t_avg tps; the average stands in for the median it does not print.
    const [MsgSize, n_iterations, t_avg, tps] = v;
    return { MsgSize, n_iterations, t_min: NaN, t_max: NaN, t_typical: t_avg, t_avg, t_stdev: NaN, percentile_99: NaN, 'percentile_99.9': NaN, tps } satisfies LatencyStats;
  }
  if (/BW average/.test(header)) {
    if (v.length < 5) throw new Error(`perftest bandwidth row with ${v.length} columns, expected 5: ${row.trim()}`);
    const toMiBs = /Gb\/sec/.test(header) ? (x: number) => (x * 1e9) / 8 / MIB : (x: number) => x;
    const [MsgSize, n_iterations, peak, avg, MsgRate] = v;
    return { MsgSize, n_iterations, BW_peak: toMiBs(peak), BW_average: toMiBs(avg), MsgRate } satisfies BandwidthStats;
  }
  throw new Error(`unrecognised perftest table header: ${header.trim()}`);
}

function tail(text: string, n = 15): string {
  return text.trimEnd().split('\n').slice(-n).join('\n');
}

interface Child {
  done: Promise<{ code: number | null; signal: NodeJS.Signals | null; output: string }>;
  kill(): void;
}

function runChild(program: string, args: string[], timeoutMs: number): Child {
  const child = spawn(program, args, { stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  child.stdout.setEncoding('utf8').on('data', (d: string) => (output += d));
  child.stderr.setEncoding('utf8').on('data', (d: string) => (output += d));
  const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
  const done = new Promise<{ code: number | null; signal: NodeJS.Signals | null; output: string }>((resolve) => {
    child.on('error', (err) => {
      output += `\n${err.message}`;
    });
    child.on('close', (code, signal) => {
      clearTimeout(timer);
      resolve({ code, signal, output });
    });
  });
  return {
    done,
    kill: () => {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
    },
  };
}

/** A TCP port free on `host` now (iWARP's rdma_cm listens on a TCP port of the same number). */
async function freePort(host: string): Promise<number> {
  const s = net.createServer();
  await new Promise<void>((resolve, reject) => {
    s.once('error', reject);
    s.listen({ host, port: 0 }, () => resolve());
  });
  const port = (s.address() as net.AddressInfo).port;
  await new Promise<void>((resolve) => s.close(() => resolve()));
  return port;
}

/**
 * Waits until a process listens on rdma_cm port `port` (iproute2's `rdma res show cm_id`: a cm_id in LISTEN
 * state with that source port), for up to `ms`. perftest's server says nothing a pipe would show in time (its
 * stdout is buffered), and a client connecting before the listener exists fails — on RoCE it can leave the
 * retried client hanging. Without the `rdma` tool this waits a fixed second and a half, as perftest users do.
 */
async function waitListening(port: number, ms: number): Promise<void> {
  const rdma = findProgram('rdma');
  if (rdma === undefined) return new Promise((resolve) => setTimeout(resolve, 1500));
  const deadline = Date.now() + ms;
  while (Date.now() < deadline) {
    const r = await runChild(rdma, ['-j', 'res', 'show', 'cm_id'], 10_000).done;
    try {
      const ids = JSON.parse(r.output.trim() || '[]') as Array<{ state?: string; 'src-addr'?: string }>;
      if (ids.some((c) => c.state === 'LISTEN' && c['src-addr']?.endsWith(`:${port}`))) return;
    } catch {
      return new Promise((resolve) => setTimeout(resolve, 1500)); // an rdma tool without JSON output
    }
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

/** The server half: starts perftest's server on a free port; `finished` waits for it (killed after the timeout). */
export async function perftestServer(program: string, host: string, p: PerftestParams): Promise<{ port: number; finished: Promise<void>; args: string[]; kill(): void }> {
  const port = await freePort(host);
  const args = perftestArgs('server', port, p);
  const child = runChild(program, args, p.timeoutMs * 4);
  const finished = child.done.then((r) => {
    if (r.code !== 0) throw new Error(`perftest server (${program} ${args.join(' ')}) exited ${r.code ?? r.signal}:\n${tail(r.output)}`);
  });
  finished.catch(() => undefined);
  await waitListening(port, Math.min(CONNECT_RETRY_MS, p.timeoutMs));
  return { port, finished, args, kill: child.kill };
}

/** How long the client retries a connect that found no listener (perftest's server still starting). */
export const CONNECT_RETRY_MS = 20_000;

/**
 * The client half: runs perftest's client against the server and returns its figures. perftest's server
 * announces nothing machine-readable when it listens (its stdout is a pipe, so buffered), so a client that
 * exits before printing its table header — its connect found no listener yet — is run again, for up to
 * CONNECT_RETRY_MS (or the phase timeout if shorter).
 */
export async function perftestClient(program: string, host: string, port: number, p: PerftestParams): Promise<{ stats: Stats; args: string[]; output: string }> {
  const args = perftestArgs('client', port, p, host);
  const deadline = Date.now() + Math.min(CONNECT_RETRY_MS, p.timeoutMs);
  for (let attempt = 1; ; attempt++) {
    const r = await runChild(program, args, p.timeoutMs * 4).done;
    if (r.code === 0) return { stats: parsePerftestTable(r.output), args, output: r.output };
    if (/#bytes/.test(r.output) || Date.now() > deadline) {
      throw new Error(`perftest client (${program} ${args.join(' ')}) exited ${r.code ?? r.signal} after ${attempt} attempt(s):\n${tail(r.output)}`);
    }
    await new Promise((resolve) => setTimeout(resolve, Math.min(1000, 100 * attempt)));
  }
}

// ndbench's OSU-named tests for jobs of N ranks: `mpiexec -n N ndbench osu_latency|osu_bw|osu_bibw|osu_mbw_mr|
// osu_multi_lat|osu_put_latency|osu_put_bw|osu_get_bw|osu_barrier|osu_bcast|osu_allreduce|osu_alltoall`. Every rank
// joins the job (netdirect/job: the launcher's PMI, the full mesh, windows, collectives), measures the OSU
// Micro-Benchmarks' pattern over it, and rank 0 prints OSU's table. `--compare mpi` runs the same pattern with MPI
// in the same command: rank 0 compiles scripts/osu-mpi.c with mpicc into a temporary directory and starts it with
// mpiexec on as many ranks, between repetitions of the netdirect pass (the other ranks wait in a barrier
// meanwhile, without busy-polling whatever the completion mode: Job._quietly); each row then has netdirect's
// figure, MPI's and their ratio, medians over the repetitions. docs/ndbench.md has the patterns and the options.

import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { networkInterfaces, tmpdir } from 'node:os';
import * as path from 'node:path';
import type { Segment } from '../index.js';
import { detectLauncher, join, type Job } from '../job/index.js';
import { UsageError } from './options.js';
import type { RunIo } from './run.js';
import { median } from './stats.js';

export const OSU_TESTS = [
  'osu_latency',
  'osu_bw',
  'osu_bibw',
  'osu_mbw_mr',
  'osu_multi_lat',
  'osu_put_latency',
  'osu_put_bw',
  'osu_get_bw',
  'osu_barrier',
  'osu_bcast',
  'osu_allreduce',
  'osu_alltoall',
] as const;
export type OsuTest = (typeof OSU_TESTS)[number];

/** OSU's boundary between small and large messages: above it, fewer iterations and warm-ups by default. */
export const OSU_LARGE = 8192;

export interface OsuOptions {
  test: OsuTest;
  sizes: number[];
  iters: number;
  itersLarge: number;
  warmup: number;
  warmupLarge: number;
  /** The bandwidth tests: transfers in flight per iteration (OSU's -W). */
  window: number;
  /** Repetitions of the whole size sweep; each row's figures are medians over them. */
  reps: number;
  compareMpi: boolean;
  format: 'osu' | 'json';
  provider: string;
  completion: 'auto' | 'loop' | 'thread' | 'manual';
  /** The adapter's busy-poll window, µs (JoinOptions.spinMicros); undefined: NETDIRECT_SPIN_MICROS, else 0. */
  spinMicros: number | undefined;
  /** Seconds before the MPI run is given up. */
  timeout: number;
  mpicc: string;
  mpiexec?: string;
}

export const OSU_USAGE = `usage: mpiexec -n <ranks> ndbench <osu test> [options]
  tests: osu_latency osu_bw osu_bibw osu_put_latency osu_put_bw osu_get_bw (2 ranks);  osu_mbw_mr osu_multi_lat
         (an even number: rank r pairs with r + n/2);  osu_barrier osu_bcast osu_allreduce osu_alltoall (2 or more)
  -m, --message-size [min:]max   sizes min … max, doubling (default 1:4194304 for the pairs, 1:1048576 for
                           collectives; osu_allreduce starts at 4 bytes, a float)
  -i, --iterations <n>     timed iterations per size; given, for every size. Default OSU's, up to / above ${OSU_LARGE} bytes:
                           latency tests 10000 / 1000, bandwidth tests 100 / 20, collectives 1000 / 100
  -x, --warmup <n>         untimed iterations before each size; given, for every size. Default OSU's: latency
                           100 / 10, bandwidth 10 / 2, collectives 100 / 10. JavaScript runs its first few
                           thousand round trips before the JIT has compiled them: -x 2000 leaves that out
  -W, --window-size <n>    osu_bw, osu_bibw, osu_mbw_mr, osu_put_bw, osu_get_bw: transfers in flight per iteration
                           (default 64)
  -f, --full               accepted: the collectives always print average, minimum and maximum over the ranks
  --compare mpi            also run the pattern with MPI (scripts/osu-mpi.c built with mpicc at run time, started
                           with mpiexec on as many ranks); each row gains MPI's figure and netdirect/MPI
  --reps <n>               repeat the sweep <n> times, figures are medians (default 1; 3 with --compare mpi)
  --format osu|json        OSU's columns (default) or a JSON report on stdout
  --provider <name|dll>    ND v2 provider (default auto);  --completion auto|loop|thread|manual (default auto)
  --spin-micros <n>        busy-poll for up to <n> µs before sleeping, as MPI libraries do while they wait
                           (AdapterOptions.spinMicros; default $NETDIRECT_SPIN_MICROS, else 0: sleep at once). It costs a core per rank
  --mpicc <path>           MPI compiler (default $MPICC or mpicc);  --mpiexec <path> launcher for the MPI run
                           (default $NDBENCH_MPIEXEC, else mpiexec.hydra under Hydra, else mpiexec)
  --timeout <s>            give up the MPI run after <s> seconds (default 600)`;

/** How each test measures: a ping-pong, a stream of windows, one-sided from rank 0, or a collective. */
const KIND: Record<OsuTest, 'latency' | 'bandwidth' | 'one-sided' | 'collective'> = {
  osu_latency: 'latency',
  osu_multi_lat: 'latency',
  osu_bw: 'bandwidth',
  osu_bibw: 'bandwidth',
  osu_mbw_mr: 'bandwidth',
  osu_put_latency: 'one-sided',
  osu_put_bw: 'one-sided',
  osu_get_bw: 'one-sided',
  osu_barrier: 'collective',
  osu_bcast: 'collective',
  osu_allreduce: 'collective',
  osu_alltoall: 'collective',
};
/**
 * OSU's default iterations and warm-ups (its LAT_*, BW_* and COLL_* counts in osu_util.h), up to and above 8 KiB:
 * the same command line times the same number of round trips as OSU's own programs and scripts/osu-mpi.c.
 */
const COUNTS = {
  latency: { iters: 10_000, itersLarge: 1000, warmup: 100, warmupLarge: 10 },
  bandwidth: { iters: 100, itersLarge: 20, warmup: 10, warmupLarge: 2 },
  collective: { iters: 1000, itersLarge: 100, warmup: 100, warmupLarge: 10 },
} as const;
const countsOf = (t: OsuTest): keyof typeof COUNTS => (KIND[t] === 'collective' ? 'collective' : isBandwidth(t) ? 'bandwidth' : 'latency');

/** The tests between two ranks (exactly 2), and those between pairs (any even number). */
const TWO_RANKS: readonly OsuTest[] = ['osu_latency', 'osu_bw', 'osu_bibw', 'osu_put_latency', 'osu_put_bw', 'osu_get_bw'];
const PAIRS: readonly OsuTest[] = ['osu_mbw_mr', 'osu_multi_lat'];
export const isPairTest = (t: OsuTest): boolean => KIND[t] !== 'collective';
export const isBandwidth = (t: OsuTest): boolean => KIND[t] === 'bandwidth' || t === 'osu_put_bw' || t === 'osu_get_bw';

/** What a job of `ranks` lacks for `test`, or undefined when it fits. */
export function ranksProblem(test: OsuTest, ranks: number): string | undefined {
  if (TWO_RANKS.includes(test)) return ranks === 2 ? undefined : 'exactly 2 ranks';
  if (PAIRS.includes(test)) return ranks >= 2 && ranks % 2 === 0 ? undefined : 'an even number of ranks (pairs: rank r with r + n/2)';
  return ranks >= 2 ? undefined : '2 or more ranks';
}

function intArg(name: string, value: string | undefined, min: number): number {
  if (value === undefined || !/^\d+$/.test(value)) throw new UsageError(`${name} needs a whole number, got ${JSON.stringify(value ?? '')}`);
  const n = Number(value);
  if (n < min) throw new UsageError(`${name} must be at least ${min}, got ${n}`);
  return n;
}

/** OSU's -m: "max", "min:max", ":max" or "min:". */
function sizeRange(value: string | undefined, test: OsuTest): number[] {
  const m = value === undefined ? null : /^(\d*)(:?)(\d*)$/.exec(value);
  if (!m || (m[1] === '' && m[3] === '')) throw new UsageError(`-m takes OSU's [min:]max message sizes in bytes, got ${JSON.stringify(value ?? '')}`);
  const floor = test === 'osu_allreduce' ? 4 : 1;
  const fallbackMax = isPairTest(test) ? 1 << 22 : 1 << 20;
  const min = Math.max(floor, m[2] === ':' && m[1] !== '' ? Number(m[1]) : floor);
  const max = m[2] === ':' ? (m[3] === '' ? fallbackMax : Number(m[3])) : Number(m[1]);
  if (max < min || max > 2 ** 30) throw new UsageError(`-m ${value}: need ${floor} <= min <= max <= ${2 ** 30}`);
  return doubling(min, max);
}

function doubling(min: number, max: number): number[] {
  const out: number[] = [];
  for (let s = min; s <= max; s *= 2) out.push(s);
  return out;
}

export function isOsuTest(name: string | undefined): name is OsuTest {
  return (OSU_TESTS as readonly string[]).includes(name ?? '');
}

/** Parses `ndbench osu_* ...` (argv without node and the script). Returns null for --help. */
export function parseOsuArgs(argv: string[], env: NodeJS.ProcessEnv = process.env): OsuOptions | null {
  const positional: string[] = [];
  const o: Partial<OsuOptions> & { range?: string } = {};
  for (let i = 0; i < argv.length; i++) {
    let a = argv[i];
    let inline: string | undefined;
    const glued = /^-([mixW])(.+)$/.exec(a);
    if (glued) [a, inline] = [`-${glued[1]}`, glued[2]];
    const eq = a.startsWith('--') ? a.indexOf('=') : -1;
    if (eq > 0) [a, inline] = [a.slice(0, eq), a.slice(eq + 1)];
    const value = (): string | undefined => inline ?? argv[++i];
    switch (a) {
      case '-h':
      case '--help':
        return null;
      case '-m':
      case '--message-size':
        o.range = value() ?? '';
        break;
      case '-i':
      case '--iterations':
        o.iters = intArg(a, value(), 1);
        break;
      case '-x':
      case '--warmup':
        o.warmup = intArg(a, value(), 0);
        break;
      case '-W':
      case '--window-size':
        o.window = intArg(a, value(), 1);
        if (o.window > 256) throw new UsageError(`${a} ${o.window}: at most 256 transfers in flight (the job's queue pairs hold that many)`);
        break;
      case '-f':
      case '--full':
        break;
      case '--reps':
        o.reps = intArg(a, value(), 1);
        break;
      case '--compare': {
        const v = value();
        if (v !== 'mpi') throw new UsageError(`--compare for the osu_* tests takes mpi (MPICH's figures in the same run), got ${JSON.stringify(v ?? '')}`);
        o.compareMpi = true;
        break;
      }
      case '--format': {
        const v = value();
        if (v !== 'osu' && v !== 'json') throw new UsageError(`--format for the osu_* tests is osu or json, got ${JSON.stringify(v ?? '')}`);
        o.format = v;
        break;
      }
      case '--provider':
        o.provider = value();
        if (!o.provider) throw new UsageError('--provider needs a value');
        break;
      case '--completion': {
        const v = value();
        if (v !== 'auto' && v !== 'loop' && v !== 'thread' && v !== 'manual') throw new UsageError(`--completion must be auto|loop|thread|manual, got ${JSON.stringify(v ?? '')}`);
        o.completion = v;
        break;
      }
      case '--spin-micros':
        o.spinMicros = intArg(a, value(), 0);
        if (o.spinMicros > 1_000_000) throw new UsageError(`--spin-micros must be at most 1000000, got ${o.spinMicros}`);
        break;
      case '--mpicc':
        o.mpicc = value();
        if (!o.mpicc) throw new UsageError('--mpicc needs a path');
        break;
      case '--mpiexec':
        o.mpiexec = value();
        if (!o.mpiexec) throw new UsageError('--mpiexec needs a path');
        break;
      case '--timeout':
        o.timeout = intArg(a, value(), 1);
        break;
      default:
        if (a.startsWith('-')) throw new UsageError(`unknown option ${a} for the osu_* tests`);
        positional.push(a);
    }
  }
  if (positional.length !== 1 || !isOsuTest(positional[0])) {
    throw new UsageError(`${positional.length === 1 ? `unknown test ${JSON.stringify(positional[0])}` : `one test and no host (the launcher places the ranks), got ${JSON.stringify(positional)}`}: one of ${OSU_TESTS.join(' ')}`);
  }
  const test = positional[0];
  const compareMpi = o.compareMpi ?? false;
  return {
    test,
    sizes: test === 'osu_barrier' ? [0] : sizeRange(o.range ?? `:${isPairTest(test) ? 1 << 22 : 1 << 20}`, test),
    iters: o.iters ?? COUNTS[countsOf(test)].iters,
    itersLarge: o.iters ?? COUNTS[countsOf(test)].itersLarge,
    warmup: o.warmup ?? COUNTS[countsOf(test)].warmup,
    warmupLarge: o.warmup ?? COUNTS[countsOf(test)].warmupLarge,
    window: o.window ?? 64,
    reps: o.reps ?? (compareMpi ? 3 : 1),
    compareMpi,
    format: o.format ?? 'osu',
    provider: o.provider ?? 'auto',
    completion: o.completion ?? 'auto',
    spinMicros: o.spinMicros,
    timeout: o.timeout ?? 600,
    mpicc: o.mpicc ?? env.MPICC ?? 'mpicc',
    mpiexec: o.mpiexec ?? env.NDBENCH_MPIEXEC,
  };
}

const itersOf = (o: OsuOptions, size: number) => (size > OSU_LARGE ? o.itersLarge : o.iters);
const warmupOf = (o: OsuOptions, size: number) => (size > OSU_LARGE ? o.warmupLarge : o.warmup);

/** One size's figure in one repetition: microseconds (MB/s for osu_bw/osu_bibw); avg/min/max over the ranks. */
export interface Figure {
  avg: number;
  min: number;
  max: number;
}

export interface OsuRow {
  size: number;
  iterations: number;
  netdirect: Figure;
  mpi?: Figure;
  /** netdirect / MPI of the average (above 1: netdirect slower for latency, faster for bandwidth). */
  ratio?: number;
  /** Every repetition's figures, in order. */
  reps: { netdirect: Figure[]; mpi: Figure[] };
}

// ---- netdirect's side: the patterns over netdirect/job ----

interface Pass {
  job: Job;
  o: OsuOptions;
}

/** The pair tests' partner: rank r of the first half with r + n/2 (OSU's pairing for osu_mbw_mr, osu_multi_lat). */
function partnerOf(job: Job): { peer: number; first: boolean } {
  const half = job.size / 2;
  return job.rank < half ? { peer: job.rank + half, first: true } : { peer: job.rank - half, first: false };
}

/**
 * osu_latency, osu_multi_lat: a ping-pong of notified puts (an RDMA Write into the peer's window, then on the same
 * queue pair the notification: over shared memory a 1-byte flag Write the peer reads from its memory, else a notify
 * Send; docs/job.md), which is how a job's rank hands another one data; the figure is half the round trip, as OSU's.
 */
async function pingPong({ job, o }: Pass, size: number, src: Segment): Promise<number> {
  const w = await job.allocateWindow(Math.max(size, 1));
  const { peer, first } = partnerOf(job);
  const n = itersOf(o, size);
  const warm = warmupOf(o, size);
  await job.barrier();
  let t0 = 0;
  for (let i = 0; i < n + warm; i++) {
    if (i === warm) t0 = performance.now();
    if (first) {
      const sent = w.put(peer, 0, src, { notify: true });
      await w.waitNotifications(peer, 1);
      await sent;
    } else {
      await w.waitNotifications(peer, 1);
      await w.put(peer, 0, src, { notify: true });
    }
  }
  const us = ((performance.now() - t0) * 1000) / (2 * n);
  await w.free();
  return us;
}

/**
 * osu_bw, osu_bibw, osu_mbw_mr: per iteration a window of puts (the last one notified: it lands after the others,
 * RFC 5040 §5.5), then the receiver's 4-byte notified put as the reply, or (osu_bibw) both ranks at once. This
 * rank's MB/s (0 for a receiver).
 */
async function streaming({ job, o }: Pass, size: number, src: Segment, ack: Segment): Promise<number> {
  const w = await job.allocateWindow(Math.max(size, 4));
  const { peer, first } = partnerOf(job);
  const both = o.test === 'osu_bibw';
  const n = itersOf(o, size);
  const warm = warmupOf(o, size);
  const burst = () => Promise.all(Array.from({ length: o.window }, (_, k) => w.put(peer, 0, src, { notify: k === o.window - 1 })));
  await job.barrier();
  let t0 = 0;
  for (let i = 0; i < n + warm; i++) {
    if (i === warm) t0 = performance.now();
    if (both) {
      await Promise.all([burst(), w.waitNotifications(peer, 1)]);
    } else if (first) {
      await burst();
      await w.waitNotifications(peer, 1);
    } else {
      await w.waitNotifications(peer, 1);
      await w.put(peer, 0, ack, { notify: true });
    }
  }
  const seconds = (performance.now() - t0) / 1000;
  await w.free();
  return first || both ? (size * o.window * n) / seconds / 1e6 : 0;
}

/**
 * osu_put_latency, osu_put_bw, osu_get_bw: rank 0 alone, one-sided. A put counts once it is at the target: each
 * put (or window of puts) is followed by a 1-byte get, whose RDMA Read the target answers only after the Writes
 * before it were placed (RFC 5040 §5.5): what MPI_Win_flush gives the MPI side. Gets complete with their data.
 * Microseconds per put (osu_put_latency), MB/s otherwise.
 */
async function oneSided({ job, o }: Pass, size: number, src: Segment, probe: Segment): Promise<number> {
  const w = await job.allocateWindow(Math.max(size, 1));
  const n = itersOf(o, size);
  const warm = warmupOf(o, size);
  const latency = o.test === 'osu_put_latency';
  const burst = latency ? 1 : o.window;
  const op = o.test === 'osu_get_bw' ? () => w.get(1, 0, src) : () => w.put(1, 0, src);
  await job.barrier();
  let t0 = 0;
  if (job.rank === 0) {
    for (let i = 0; i < n + warm; i++) {
      if (i === warm) t0 = performance.now();
      await Promise.all(Array.from({ length: burst }, op));
      if (o.test !== 'osu_get_bw') await w.get(1, 0, probe);
    }
  }
  const elapsed = performance.now() - t0;
  await w.free(); // a barrier: rank 1 stays until rank 0 is done with its window
  if (job.rank !== 0) return 0;
  return latency ? (elapsed * 1000) / n : (size * burst * n) / (elapsed / 1000) / 1e6;
}

/** The collectives: this rank's average time per call (microseconds), then avg/min/max over the ranks. */
async function collective({ job, o }: Pass, size: number): Promise<Figure> {
  const n = itersOf(o, size);
  const warm = warmupOf(o, size);
  const call = collectiveCall(job, o.test, size);
  await job.barrier();
  let t0 = 0;
  for (let i = 0; i < n + warm; i++) {
    if (i === warm) t0 = performance.now();
    await call();
  }
  const mine = ((performance.now() - t0) * 1000) / n;
  const [sum] = await job.allreduce(new Float64Array([mine]), 'sum');
  const [max, negMin] = await job.allreduce(new Float64Array([mine, -mine]), 'max');
  return { avg: sum / job.size, min: -negMin, max };
}

function collectiveCall(job: Job, test: OsuTest, size: number): () => Promise<unknown> {
  switch (test) {
    case 'osu_barrier':
      return () => job.barrier();
    case 'osu_bcast': {
      const data = new Uint8Array(size);
      return () => job.broadcast(data, 0);
    }
    case 'osu_allreduce': {
      const data = new Float32Array(Math.floor(size / 4)); // zeros: the sum stays finite however many calls
      return () => job.allreduce(data, 'sum');
    }
    default: {
      const send = new Uint8Array(size * job.size);
      const recv = new Uint8Array(size * job.size);
      return () => job.alltoall(send, recv);
    }
  }
}

/** One sweep over the sizes; every rank runs it, rank 0's figures are the result. */
async function netdirectPass(p: Pass): Promise<Figure[]> {
  const { job, o } = p;
  const out: Figure[] = [];
  const kind = KIND[o.test];
  if (kind === 'collective') {
    for (const size of o.sizes) out.push(await collective(p, size));
    return out;
  }
  const max = Math.max(...o.sizes, 4);
  const region = await job.adapter.allocateMemory(max);
  const probe = await job.adapter.allocateMemory(4);
  try {
    for (const size of o.sizes) {
      const src = region.slice(0, size);
      const mine =
        kind === 'latency' ? await pingPong(p, size, src) : kind === 'bandwidth' ? await streaming(p, size, src, probe.slice(0, 4)) : await oneSided(p, size, src, probe.slice(0, 1));
      out.push(await pairFigure(job, o.test, mine));
    }
  } finally {
    await region.deregister();
    await probe.deregister();
  }
  return out;
}

/**
 * A row's figure from every rank's own: latency averaged over the pairs (each pair's two ranks report the same
 * ping-pong, so over all ranks), bandwidth summed over the ranks that send (osu_mbw_mr's aggregate), the
 * one-sided tests rank 0's. min/max: the extremes over the ranks that measured.
 */
async function pairFigure(job: Job, test: OsuTest, mine: number): Promise<Figure> {
  const [sum, count] = await job.allreduce(new Float64Array([mine, mine > 0 ? 1 : 0]), 'sum');
  const [max, negMin] = await job.allreduce(new Float64Array([mine, mine > 0 ? -mine : -Infinity]), 'max');
  const latency = KIND[test] === 'latency' || test === 'osu_put_latency';
  const avg = latency ? sum / Math.max(1, count) : sum;
  return { avg, min: count > 0 ? -negMin : 0, max };
}

// ---- MPI's side: scripts/osu-mpi.c built with mpicc, run with mpiexec ----

/** The C source of the MPI side, found from this module (dist/cjs/bench) up to the package root. */
export function mpiSource(): string | undefined {
  for (let dir = __dirname; path.dirname(dir) !== dir; dir = path.dirname(dir)) {
    const f = path.join(dir, 'scripts', 'osu-mpi.c');
    if (existsSync(f)) return f;
  }
  return undefined;
}

export interface MpiRunner {
  /** "MPICH Version: 4.0.2", from the MPI library (after the first run). */
  library: string;
  run(o: OsuOptions, ranks: number): Promise<Figure[]>;
  dispose(): void;
}

/** Compiles the MPI side, or says why the comparison cannot run (the run goes on without it). */
export function buildMpi(o: OsuOptions, launcher: string, warn: (text: string) => void = () => undefined): MpiRunner | string {
  const source = mpiSource();
  if (source === undefined) return 'scripts/osu-mpi.c is not in this installation of netdirect';
  const dir = mkdtempSync(path.join(tmpdir(), 'ndbench-osu-'));
  const exe = path.join(dir, 'osu-mpi');
  const cc = spawnSync(o.mpicc, ['-O2', '-o', exe, source], { encoding: 'utf8' });
  if (cc.error || cc.status !== 0) {
    rmSync(dir, { recursive: true, force: true });
    if ((cc.error as NodeJS.ErrnoException | undefined)?.code === 'ENOENT') {
      return `${o.mpicc} not found: install an MPI with its compiler wrapper (Debian/Ubuntu: apt-get install mpich) or name it with --mpicc / MPICC`;
    }
    const why = (cc.stderr || String(cc.error)).trim();
    // Debian's mpich installed without its recommends has the mpicc wrapper but not MPI's headers.
    const hint = /mpi\.h/.test(why) ? ' (MPI\'s headers are missing: Debian/Ubuntu: apt-get install libmpich-dev)' : '';
    return `${o.mpicc} could not compile ${source}${hint}: ${why.split('\n').slice(-3).join(' | ')}`;
  }
  const mpiexec = o.mpiexec ?? (launcher === 'hydra' && onPath('mpiexec.hydra') ? 'mpiexec.hydra' : 'mpiexec');
  const runner: MpiRunner = {
    library: '',
    run: async (opts, ranks) => {
      let out;
      try {
        out = await runMpi(mpiexec, exe, opts, ranks, warn);
      } catch (err) {
        // An MPI job that ended before MPI_Init finished (seen with MPICH's UCX on a loaded machine: "init_worker No
        // such device") printed nothing: it is started once more, and the failure said.
        if (!(err instanceof MpiStartFailed)) throw err;
        warn(`the MPI run failed at start-up, starting it once more (${err.message})`);
        out = await runMpi(mpiexec, exe, opts, ranks, warn);
      }
      runner.library ||= out.library;
      return out.figures;
    },
    dispose: () => rmSync(dir, { recursive: true, force: true }),
  };
  return runner;
}

/** The MPI run ended before its rank 0 printed the library line: MPI_Init did not complete. */
class MpiStartFailed extends Error {}

function onPath(command: string): boolean {
  return (process.env.PATH ?? '').split(path.delimiter).some((d) => d !== '' && existsSync(path.join(d, command)));
}

/**
 * The environment for the MPI run: this rank's own launcher variables removed (PMI_FD and the rest belong to this
 * process's connection to its launcher; the MPI ranks get their own from the mpiexec ndbench starts).
 */
export function mpiEnvironment(env: NodeJS.ProcessEnv): NodeJS.ProcessEnv {
  const out: NodeJS.ProcessEnv = {};
  for (const [k, v] of Object.entries(env)) {
    if (/^(PMI_|PMIX_|MPI_LOCAL|MPIR_CVAR_|OMPI_|HYDI_)/.test(k)) continue;
    out[k] = v;
  }
  return out;
}

/** How long an MPI job may take to end once its rank 0 printed every figure ("# done"). */
export const MPI_FINALIZE_GRACE_MS = 10_000;

async function runMpi(mpiexec: string, exe: string, o: OsuOptions, ranks: number, warn: (text: string) => void = () => undefined): Promise<{ library: string; figures: Figure[] }> {
  const min = Math.min(...o.sizes);
  const max = Math.max(...o.sizes);
  const args = ['-n', String(ranks), exe, o.test, String(min), String(max), String(o.iters), String(o.itersLarge), String(o.warmup), String(o.warmupLarge), String(o.window)];
  const child = spawn(mpiexec, args, { env: mpiEnvironment(process.env), stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  // MPICH over UCX's TCP transport was seen to hang in MPI_Finalize after every figure was out: one rank waits in
  // UCX for its endpoints to close while the others already wait in the launcher's barrier, which does not drive
  // UCX. The figures are complete by then, so the job gets a grace period to end and is ended after it, said.
  let finalizeHung = false;
  let grace: NodeJS.Timeout | undefined;
  child.stdout.on('data', (d) => {
    stdout += d;
    if (grace === undefined && /^# done$/m.test(stdout)) {
      grace = setTimeout(() => {
        finalizeHung = true;
        child.kill('SIGINT'); // Hydra's mpiexec ends its proxies and ranks on SIGINT
        setTimeout(() => child.kill('SIGKILL'), 3000).unref();
      }, MPI_FINALIZE_GRACE_MS);
    }
  });
  child.stderr.on('data', (d) => (stderr += d));
  const timer = setTimeout(() => child.kill('SIGKILL'), o.timeout * 1000);
  const code = await new Promise<number | string>((resolve) => {
    child.on('error', (err) => resolve((err as NodeJS.ErrnoException).code === 'ENOENT' ? `${mpiexec} not found (name the launcher with --mpiexec or NDBENCH_MPIEXEC)` : err.message));
    child.on('exit', (c, signal) => resolve(finalizeHung ? 0 : signal ? `killed by ${signal}${signal === 'SIGKILL' ? ` after --timeout ${o.timeout} s` : ''}` : (c ?? 1)));
  });
  clearTimeout(timer);
  clearTimeout(grace);
  if (finalizeHung) warn(`the MPI job printed every figure but had not ended ${MPI_FINALIZE_GRACE_MS / 1000} s later (MPI_Finalize did not return); it was ended and its figures kept`);
  if (code !== 0) {
    const what = `${mpiexec} -n ${ranks} ${path.basename(exe)} ${o.test}: ${typeof code === 'string' ? code : `exit ${code}`}${stderr.trim() ? `: ${stderr.trim().split('\n').slice(-3).join(' | ')}` : ''}`;
    throw typeof code === 'number' && !stdout.startsWith('# ') ? new MpiStartFailed(what) : new Error(what);
  }
  let library = '';
  const bySize = new Map<number, Figure>();
  for (const line of stdout.split('\n')) {
    if (line.startsWith('# ')) library ||= line.slice(2).replace(/\s+/g, ' ').trim();
    const m = /^(\d+) (\S+) (\S+) (\S+) \d+$/.exec(line.trim());
    if (m) bySize.set(Number(m[1]), { avg: Number(m[2]), min: Number(m[3]), max: Number(m[4]) });
  }
  const figures = o.sizes.map((s) => bySize.get(s));
  if (figures.some((f) => f === undefined)) throw new Error(`the MPI run printed no figure for some sizes: ${stdout.trim().split('\n').slice(-3).join(' | ')}`);
  return { library, figures: figures as Figure[] };
}

// ---- the table ----

const col = (s: string) => s.padStart(20);
const f2 = (v: number) => (Number.isFinite(v) ? v.toFixed(2) : 'n/a');

export function osuHeader(o: OsuOptions, ranks: number, info: { provider: string; completion: string; spinMicros: number; launcher: string; mpi?: string; oneHost?: string }): string {
  const titles: Record<OsuTest, string> = {
    osu_latency: 'Latency Test',
    osu_bw: 'Bandwidth Test',
    osu_bibw: 'Bi-Directional Bandwidth Test',
    osu_mbw_mr: 'Multiple Bandwidth / Message Rate Test',
    osu_multi_lat: 'Multi-pair Latency Test',
    osu_put_latency: 'One Sided MPI_Put Latency Test',
    osu_put_bw: 'One Sided MPI_Put Bandwidth Test',
    osu_get_bw: 'One Sided MPI_Get Bandwidth Test',
    osu_barrier: 'Barrier Latency Test',
    osu_bcast: 'Broadcast Latency Test',
    osu_allreduce: 'Allreduce Latency Test',
    osu_alltoall: 'All-to-All Personalized Exchange Latency Test',
  };
  const lines = [
    `# ndbench ${o.test}: OSU ${titles[o.test]} over netdirect/job`,
    `# ${ranks} ranks (launcher ${info.launcher}), provider ${info.provider}, completion ${info.completion}${info.spinMicros > 0 ? `, spin ${info.spinMicros} us` : ''}; ${patternNote(o.test)}`,
  ];
  if (o.compareMpi) lines.push(`# MPI: ${info.mpi ?? 'not run'}; nd/MPI = netdirect's figure over MPI's; median of ${o.reps} repetitions`);
  if (o.compareMpi && info.oneHost !== undefined) lines.push(`# ${info.oneHost}`);
  else if (o.reps > 1) lines.push(`# median of ${o.reps} repetitions`);
  const mpiCols = (unit: string) => (info.mpi !== undefined ? col(`MPI ${unit}`) + col('nd/MPI') : '');
  if (o.test === 'osu_mbw_mr') {
    lines.push(`${'# Size'.padEnd(10)}${col('MB/s')}${col('Messages/s')}${mpiCols('(MB/s)')}`);
  } else if (isPairTest(o.test)) {
    const unit = isBandwidth(o.test) ? '(MB/s)' : '(us)';
    lines.push(`${'# Size'.padEnd(10)}${col(isBandwidth(o.test) ? 'Bandwidth (MB/s)' : 'Latency (us)')}${mpiCols(unit)}`);
  } else {
    const first = o.test === 'osu_barrier' ? '#' : '# Size'.padEnd(10);
    lines.push(`${first}${col('Avg Latency(us)')}${col('Min Latency(us)')}${col('Max Latency(us)')}${col('Iterations')}${mpiCols('Avg(us)')}`);
  }
  return lines.join('\n');
}

function patternNote(test: OsuTest): string {
  switch (KIND[test]) {
    case 'latency':
      return `netdirect: notified puts (RDMA Write + notify: a flag Write on shm, else a Send), half round trip${test === 'osu_multi_lat' ? ', averaged over the pairs (rank r with r + n/2)' : ''}`;
    case 'bandwidth':
      return `netdirect: a window of puts, the last notified${test === 'osu_mbw_mr' ? ', summed over the pairs (rank r sends to r + n/2)' : ''}; MB = 10^6 bytes`;
    case 'one-sided':
      return test === 'osu_get_bw'
        ? 'netdirect: a window of gets (RDMA Reads) from rank 1\'s window; MB = 10^6 bytes'
        : `netdirect: ${test === 'osu_put_latency' ? 'a put' : 'a window of puts'} (RDMA Write) into rank 1's window, then a 1-byte get that returns once they are placed (MPI: MPI_Win_flush)${test === 'osu_put_bw' ? '; MB = 10^6 bytes' : ''}`;
    default:
      return "latency of one call: average, minimum and maximum of the ranks' own averages";
  }
}

export function osuRow(o: OsuOptions, r: OsuRow, withMpi: boolean): string {
  const mpi = withMpi ? col(r.mpi ? f2(r.mpi.avg) : 'n/a') + col(r.ratio !== undefined ? r.ratio.toFixed(2) : 'n/a') : '';
  if (o.test === 'osu_mbw_mr') return `${String(r.size).padEnd(10)}${col(f2(r.netdirect.avg))}${col(f2((r.netdirect.avg * 1e6) / r.size))}${mpi}`;
  if (isPairTest(o.test)) return `${String(r.size).padEnd(10)}${col(f2(r.netdirect.avg))}${mpi}`;
  const first = o.test === 'osu_barrier' ? ' ' : String(r.size).padEnd(10);
  return `${first}${col(f2(r.netdirect.avg))}${col(f2(r.netdirect.min))}${col(f2(r.netdirect.max))}${col(String(r.iterations))}${mpi}`;
}

function medianFigure(list: Figure[]): Figure {
  return { avg: median(list.map((f) => f.avg)), min: median(list.map((f) => f.min)), max: median(list.map((f) => f.max)) };
}

export function rowsOf(o: OsuOptions, nd: Figure[][], mpi: Figure[][]): OsuRow[] {
  return o.sizes.map((size, i) => {
    const netdirect = medianFigure(nd.map((rep) => rep[i]));
    const row: OsuRow = { size, iterations: itersOf(o, size), netdirect, reps: { netdirect: nd.map((rep) => rep[i]), mpi: mpi.map((rep) => rep[i]) } };
    if (mpi.length > 0) {
      row.mpi = medianFigure(mpi.map((rep) => rep[i]));
      row.ratio = netdirect.avg / row.mpi.avg;
    }
    return row;
  });
}

// ---- the ratio targets (docs/ndbench.md): netdirect against MPICH over the same links ----

export interface Target {
  test: OsuTest;
  size: number;
  /** nd/MPI must be at most `atMost` (latency) or at least `atLeast` (bandwidth). */
  atMost?: number;
  atLeast?: number;
}

export const TARGETS: readonly Target[] = [
  { test: 'osu_latency', size: 8, atMost: 1.3 },
  { test: 'osu_allreduce', size: 8, atMost: 1.5 },
  { test: 'osu_barrier', size: 0, atMost: 1.5 },
  { test: 'osu_allreduce', size: 1 << 20, atMost: 1.25 }, // time ≤ 1.25×: bandwidth ≥ 0.8× MPICH's
  { test: 'osu_mbw_mr', size: 4096, atLeast: 1.0 },
];

/** A line per target this table has a ratio for: the target, the ratio measured and whether it was met. */
export function targetLines(o: OsuOptions, rows: OsuRow[]): Array<{ line: string; target: Target; ratio: number; met: boolean }> {
  const out = [];
  for (const target of TARGETS) {
    const row = target.test === o.test ? rows.find((r) => r.size === target.size) : undefined;
    if (row?.ratio === undefined) continue;
    const met = target.atMost !== undefined ? row.ratio <= target.atMost : row.ratio >= (target.atLeast as number);
    const want = target.atMost !== undefined ? `<= ${target.atMost.toFixed(2)}` : `>= ${(target.atLeast as number).toFixed(2)}`;
    const where = o.test === 'osu_barrier' ? '' : ` at ${row.size} B`;
    out.push({ target, ratio: row.ratio, met, line: `# target${where}: nd/MPI ${want}; measured ${row.ratio.toFixed(2)}: ${met ? 'met' : 'not met'}` });
  }
  return out;
}

// ---- the command ----

function rankMessage(test: OsuTest, ranks: number, why: string): string {
  return `${test} needs ${ranksProblem(test, ranks)}, this job has ${ranks}${why}: run it as \`mpiexec -n ${TWO_RANKS.includes(test) ? 2 : 4} ndbench ${test}\``;
}

/**
 * When every rank runs on this host (rank 0 is connected to all of them), the caveat that belongs next to nd/MPI: MPI
 * libraries move messages between ranks of one host through shared memory, so the comparison is against that, not
 * against a network. Names the transport netdirect's connections use (qp.transport where the provider says).
 */
export function oneHostNote(job: Job): string | undefined {
  const local = new Set(['127.0.0.1', '::1']);
  for (const list of Object.values(networkInterfaces())) for (const a of list ?? []) local.add(a.address);
  const transports = new Set<string>();
  for (const c of job._channels) {
    if (c === null) continue;
    const peer = c.qp.connector?.peerAddress.host;
    if (peer === undefined || !local.has(peer.replace(/^::ffff:/, ''))) return undefined;
    transports.add((c.qp as { transport?: string }).transport ?? 'tcp');
  }
  const how = [...transports].join('/') || 'tcp';
  return (
    `all ${job.size} ranks on one host: MPI moves their messages through shared memory; netdirect's connections here use ${how}` +
    (how === 'tcp' ? ' (TCP loopback), so nd/MPI compares a network path against memory copies' : '')
  );
}

export async function runOsu(o: OsuOptions, io: RunIo): Promise<void> {
  // No launcher: a job of one rank, which no OSU test runs. Said before opening anything.
  if (detectLauncher().launcher === 'singleton') throw new Error(rankMessage(o.test, 1, ' (no launcher started this process)'));
  const job = await join({ provider: o.provider === 'auto' ? undefined : o.provider, completion: o.completion, spinMicros: o.spinMicros });
  try {
    if (ranksProblem(o.test, job.size) !== undefined) throw new Error(rankMessage(o.test, job.size, ''));
    let mpi: MpiRunner | undefined;
    if (o.compareMpi && job.rank === 0) {
      const built = buildMpi(o, job.launcher, (text) => io.err(`ndbench: --compare mpi: ${text}\n`));
      if (typeof built === 'string') io.err(`ndbench: --compare mpi: ${built}; the run goes on without the MPI comparison\n`);
      else mpi = built;
    }
    const nd: Figure[][] = [];
    const mpiFigures: Figure[][] = [];
    try {
      for (let rep = 0; rep < o.reps; rep++) {
        nd.push(await netdirectPass({ job, o }));
        // Rank 0 runs MPI's pass while the others wait in the barrier below, without busy-polling.
        if (mpi !== undefined) {
          try {
            mpiFigures.push(await mpi.run(o, job.size));
          } catch (err) {
            io.err(`ndbench: --compare mpi: the MPI run failed (${(err as Error).message}); the run goes on without the MPI comparison\n`);
            mpi.dispose();
            mpi = undefined;
            mpiFigures.length = 0;
          }
        }
        // Not spinning ('manual' mode, --spin-micros): the MPI run has the cores meanwhile (Job._quietly).
        if (o.compareMpi) await job._quietly(() => job.barrier());
      }
    } finally {
      mpi?.dispose();
    }
    if (job.rank !== 0) return;
    const rows = rowsOf(o, nd, mpiFigures);
    const withMpi = mpiFigures.length > 0;
    const info = {
      provider: job.adapter.provider ?? o.provider,
      completion: job.adapter.completion,
      spinMicros: job.adapter.spinMicros,
      launcher: job.launcher,
      mpi: withMpi ? mpi?.library || 'MPI' : undefined,
      oneHost: withMpi ? oneHostNote(job) : undefined,
    };
    if (o.format === 'json') {
      const targets = targetLines(o, rows).map(({ target, ratio, met }) => ({ ...target, ratio, met }));
      io.out(JSON.stringify({ schema: 'ndbench-osu/1', tool: 'ndbench', test: o.test, ranks: job.size, ...info, units: isBandwidth(o.test) ? 'MB/s' : 'us', options: { ...o }, results: rows, targets }, null, 2));
      return;
    }
    io.out(osuHeader(o, job.size, info));
    for (const r of rows) io.out(osuRow(o, r, withMpi));
    for (const t of targetLines(o, rows)) io.out(t.line);
  } finally {
    await job.close();
  }
}

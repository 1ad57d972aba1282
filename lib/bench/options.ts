// ndbench's command line: perftest's test names and options (same options on both sides), plus netdirect's own
// (--provider, --completion, --crc, --compare, --plot, --loopback). Parsing is pure: no addon, no I/O.
// perftest's flags keep perftest's meaning; those with no counterpart over ND v2 / iWARP are either accepted with
// a note saying why they change nothing, or refused with the reason (docs/ndbench.md has the table). OSU's -m, -i,
// -x and -W share letters with perftest's MTU, IB port, GID index and counters: a value only OSU gives (min:max,
// a number for -W) is read as OSU's, and `--format osu` reads all four as OSU's.

import { isIP } from 'node:net';

export const TESTS = ['write_lat', 'write_bw', 'read_lat', 'read_bw', 'send_lat', 'send_bw', 'reg_mr'] as const;
export type TestName = (typeof TESTS)[number];

/** ", did you mean write_bw?" for perftest's names (ib_write_bw), a dash for an underscore or a near miss; else "". */
export function didYouMean(given: string, names: readonly string[] = TESTS): string {
  const plain = given.toLowerCase().replace(/^ib_/, '').replace(/-/g, '_');
  if (names.includes(plain)) return `, did you mean ${plain}?${given.startsWith('ib_') ? ` (perftest's ${given} is ndbench's ${plain})` : ''}`;
  let best = '';
  let bestDistance = 3;
  for (const name of names) {
    const d = editDistance(plain, name);
    if (d < bestDistance) [best, bestDistance] = [name, d];
  }
  return best ? `, did you mean ${best}?` : '';
}

function editDistance(a: string, b: string): number {
  let row = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const next = [i];
    for (let j = 1; j <= b.length; j++) next[j] = Math.min(row[j] + 1, next[j - 1] + 1, row[j - 1] + (a[i - 1] === b[j - 1] ? 0 : 1));
    row = next;
  }
  return row[b.length];
}
export const BASELINES = ['tcp', 'node-net', 'perftest', 'native'] as const;
export type Baseline = (typeof BASELINES)[number];
export type Format = 'perftest' | 'osu' | 'json';

export const DEFAULT_PORT = 18515; // perftest's
export const MAX_ALL_SIZE = 8 * 1024 * 1024; // -a: 2 … 2^23, as perftest

export interface BenchOptions {
  test: TestName;
  /** Client: the server's host. Undefined: this side serves (unless loopback). */
  server?: string;
  port: number;
  sizes: number[];
  /** -s/-a given explicitly (the server adopts the client's sizes otherwise). */
  sizeGiven: boolean;
  iters: number;
  itersGiven: boolean;
  /** -D: seconds per size instead of a fixed iteration count (0: off). */
  duration: number;
  provider: string;
  completion: 'auto' | 'loop' | 'thread' | 'manual';
  crc?: 'on' | 'off';
  /** --shm: same-host shared memory of the software provider (NETDIRECT_SHM for both sides). */
  shm?: 'on' | 'off';
  format: Format;
  json?: string;
  reportGbits: boolean;
  compare: Baseline[];
  /** --compare all: perftest is left out (with a note) where it cannot run, instead of failing the run. */
  compareImplicit: boolean;
  /** --repetitions: each size measured this many times (netdirect and every baseline); rows are the medians. */
  repetitions: number;
  repetitionsGiven: boolean;
  plot?: string;
  loopback: boolean;
  /** -q: queue pairs (connections), perftest's option; > 1 for the many-QP aggregate. */
  qps: number;
  /** -t: initiator queue depth per QP (writes/reads/sends in flight). */
  txDepth: number;
  /** --tcp-mode: native TCP baseline waits blocking or busy-polls; default follows --completion. */
  tcpMode?: 'block' | 'spin';
  /** Poller spin window (AdapterOptions.spinMicros). */
  spinMicros?: number;
  /** --spin-on-data: write_lat in manual mode waits by spinning on the placed byte alone (no cq.poll() in the wait). */
  spinOnData?: boolean;
  /** Local address to bind/listen (server) — default: every address for control, 127.0.0.1-like for ND. */
  bind?: string;
  /** Overall timeout for any wait, seconds. */
  timeout: number;
  /** --timeout was given: the server then waits for its client that long too (else up to 10 minutes). */
  timeoutGiven?: boolean;
  /** Progress line on stderr (default: when stderr is a TTY). */
  progress?: boolean;
  /** Internal: this process is the server child of --loopback (reports its port over IPC). */
  loopbackChild: boolean;
  /** Internal: MPI rank/size from the launcher's environment, when launched by mpiexec. */
  rank?: number;
  /** -b: bidirectional bandwidth (both sides post at once; the figures are the sum of both directions). */
  bidirectional: boolean;
  /** -H: print every latency sample, sorted (perftest's "#, usec" listing). */
  histogram: boolean;
  /** -U: print every latency sample in measurement order (perftest's unsorted listing; -H adds the sorted one). */
  unsorted: boolean;
  /** -N: no peak bandwidth (BW peak printed as 0, as perftest). */
  noPeak: boolean;
  /** -I: inline data size: writes and sends of at most this many bytes go inline (ND_OP_FLAG_INLINE). */
  inline: number;
  /** -r: receives kept posted (send tests). */
  rxDepth?: number;
  /** -Q: every Q-th request is signaled (manual completion; the promise API settles each request). */
  cqModeration?: number;
  /** -l: requests posted per native call (qp.batch(); write_bw/read_bw with --completion manual). */
  postList?: number;
  /** --output=: print only this figure, one line per size (perftest's --output). */
  output?: 'bandwidth' | 'message_rate' | 'latency';
  /** --run_infinitely: repeat the (single) size until interrupted, one row every -D seconds (default 5). */
  runInfinitely: boolean;
  /** --cpu_util: this process's CPU use during each timed phase (% of one core). */
  cpuUtil: boolean;
  /** --heap: a column of the JS heap allocated per completed message (the *_bw tests; always in the JSON report). */
  heap: boolean;
  /** -w / -y: fail (exit 1) when BW average / MsgRate falls below (perftest's verifier limits). */
  limitBw?: number;
  limitMsgRate?: number;
  /** OSU -x / --warmup: untimed iterations before each size (default: warmupOf). */
  warmup?: number;
  /** Accepted perftest flags that change nothing here, each with the reason (printed on stderr, kept in JSON). */
  notes: string[];
}

export class UsageError extends Error {
  override name = 'UsageError';
}

export const USAGE = `usage: ndbench <test> [server-host] [options]     server: no host; client: the server's host (perftest style)
  tests: write_lat write_bw read_lat read_bw send_lat send_bw   (perftest names); reg_mr (registerMemory latency, local)
  -p, --port <n>           control port (default ${DEFAULT_PORT}; the same on both sides)
  -s, --size <bytes>       message size (default 2 for *_lat, 65536 for *_bw)
  -a, --all                sizes 2 … 8 MiB, doubling
  -n, --iters <n>          iterations per size (default 1000; 5000 for write_bw)
  -D, --duration <s>       run each size for <s> seconds instead of -n iterations
  -q, --qps <n>            queue pairs (connections) for *_bw, all writing (default 1)
  -t, --tx-depth <n>       requests in flight per QP for *_bw (default 128)
                           (*_bw: up to 2000 untimed warm-up messages first, baselines too; *_lat: up to 100)
  --provider <name|dll>    ND v2 provider (default auto: the built-in 'soft' provider off Windows)
  -d, --ib-dev <p|address> perftest's device: an ND v2 provider name or DLL (as --provider), or the adapter's
                           local IP address (as --bind); a Linux ibv device name is refused with why
  --completion auto|loop|thread|manual   promise API with completions from the event loop (loop), from the
                           poller thread (thread) or whichever the provider supports (auto, default: loop with
                           the built-in provider on Linux); manual: the JS thread posts and spins on cq.poll()
  --crc on|off             MPA CRC32c of the software provider (sets NETDIRECT_SOFT_CRC for both sides)
  --shm on|off             same-host connections of the software provider through shared memory (sets
                           NETDIRECT_SHM for both sides; docs/shm.md); the report's transport says which was used
  --format perftest|osu|json   output format (default perftest's columns)
  --json <file>            also write the JSON report to <file>
  --report_gbits           bandwidth in Gb/s (10^9 bit/s) instead of MiB/s
  --compare tcp|node-net|perftest|native|all   also run the same pattern over native TCP / Node's net, or
                           perftest's ib_<test> on the same RDMA device (-R; both sides started by ndbench's two
                           sides), or (native: write_lat, read_lat, send_lat, write_bw; --completion manual) a C++ loop on the same
                           queue pair through the same provider, which shows what the JS layers add; repeatable or
                           comma-separated; ratios netdirect/baseline beside each figure (same run); all = every
                           baseline, perftest and native only where they can run
  --repetitions <n>        measure each size <n> times (netdirect and baselines in turn); rows show the median
                           repetition (default 3 with --compare perftest, else 1)
  --tcp-mode block|spin    native TCP baseline waits blocking or busy-polls (default: spin with --completion
                           manual, block with thread)
  --plot <file.svg>        bandwidth and latency against message size, netdirect and baselines
  --loopback               server and client on this machine, both from this one command
  --bind <address>         address to serve on / connect from (default: 127.0.0.1 for --loopback)
  --spin-micros <n>        poller thread busy-poll window before it sleeps (AdapterOptions.spinMicros)
  --spin-on-data           write_lat --completion manual: both sides wait for the peer's Write by spinning on the
                           placed byte alone, as perftest does (no cq.poll() while waiting; the CQ is polled once
                           per moderation batch after the byte arrived): the provider places with its own thread
  --timeout <s>            give up on any wait after <s> seconds (default 60)
  --progress / --no-progress   progress line on stderr (default: when stderr is a terminal)
  -b, --bidirectional      *_bw: both sides post at once; figures are the sum of both directions (perftest -b)
  -H, --report-histogram   *_lat: print every sample, sorted ("#, usec"), before the summary row
  -U, --report-unsorted    *_lat: print every sample in measurement order (with -H as well: both listings)
  -N, --noPeak             do not compute BW peak (printed as 0.00)
  -I, --inline_size <n>    writes/sends of at most <n> bytes go inline (ND_OP_FLAG_INLINE; adapter max applies)
  -r, --rx-depth <n>       receives kept posted for send_* (default 256)
  -Q, --cq-mod <n>         --completion manual: every <n>-th request signaled (default min(16, depth/2))
  -e, --events             completions by notification (--completion auto: loop/thread) instead of polling
  -w, --limit_bw <v>       exit 1 when BW average < <v> (MiB/s, or Gb/s with --report_gbits); -y, --limit_msgrate (Mpps)
  --output bandwidth|message_rate|latency   print only that figure (BW average, MsgRate, t_avg), one line per size
  --run_infinitely         repeat one size until Ctrl-C, a row every -D seconds (default 5)
  --cpu_util               CPU use of this process during each timed phase, % of one core
  --heap                   JS heap allocated per completed message, bytes (V8 heap statistics; the *_bw tests)
  --out_json, --out_json_file=<f>   perftest's names for --json (default file perftest_out.json)
  -m <min:max>             OSU: sizes min … max, doubling;  -W <n> OSU window (= -t);  --warmup <n> untimed iterations
                           with --format osu, -i <n> is OSU's iterations, -x <n> its warm-up, -m <max> its max size
  accepted, no effect here (a note says why): -F, -R, -z, -c RC, -i 1, -x <gid>, -m <mtu>, -u <timeout>, -l <n>, -S <sl>
  refused with the reason: -c UC|UD|XRC|DC|SRD, -i 2 / -O (one port), -W <counters>, -T <tos>, -d <ibv device>
  -h, --help
  -V, --version
glued values work as in perftest: -s4096, --size=4096, -bF
jobs of N ranks:  mpiexec -n <N> ndbench osu_latency|osu_bw|osu_bibw|osu_mbw_mr|osu_multi_lat|osu_put_latency|
                  osu_put_bw|osu_get_bw|osu_barrier|osu_bcast|osu_allreduce|osu_alltoall [--compare mpi]
                  (OSU's tests over netdirect/job; \`ndbench osu_latency --help\` lists their options)
launched by MPI:  mpiexec -n 2 ndbench write_lat [server-host]   (rank 0 serves, on server-host if given; rank 1
                  connects). srun -n 2 too (SLURM_STEP_NUM_TASKS); a plain command inside a Slurm allocation, or a
                  launch of one rank, runs as typed
environment:      NDBENCH_SERVER=<host>  under MPI, the server host when the command names none (default: rank 1
                  connects to 127.0.0.1, for two ranks on one machine)`;

/** 2, 4, … 8 MiB: perftest's -a. */
export function allSizes(max = MAX_ALL_SIZE): number[] {
  const out: number[] = [];
  for (let s = 2; s <= max; s *= 2) out.push(s);
  return out;
}

export function isLatency(test: TestName): boolean {
  return test.endsWith('_lat') || test === 'reg_mr';
}

/**
 * Untimed iterations before each size, of the same pattern, for netdirect and every baseline alike. Latency: up
 * to 100 (perftest warms up too). Bandwidth (write_bw, read_bw): up to BW_WARMUP messages, completed before the
 * clock starts — without them a short run measures the JIT compiling the JS loops and the sockets' buffers
 * growing (4 KiB write_bw with -n 20000 ran ~1.7x slower than its steady state). send_bw: none (its receive
 * credits are counted per phase).
 */
export const BW_WARMUP = 2000;
export function warmupOf(o: { iters: number; duration: number; test: TestName; warmup?: number }): number {
  if (o.warmup !== undefined) return o.warmup;
  if (isLatency(o.test)) return o.duration > 0 ? 100 : Math.min(100, Math.floor(o.iters / 10));
  if (o.test === 'send_bw') return 0;
  return o.duration > 0 ? BW_WARMUP : Math.min(BW_WARMUP, o.iters);
}

function intArg(name: string, value: string | undefined, min: number, max = Number.MAX_SAFE_INTEGER): number {
  if (value === undefined) throw new UsageError(`${name} needs a value`);
  if (!/^\d+$/.test(value)) throw new UsageError(`${name} must be a whole number, got ${JSON.stringify(value)}`);
  const n = Number(value);
  if (n < min || n > max) throw new UsageError(`${name} must be in ${min}..${max}, got ${n}`);
  return n;
}

function numArg(name: string, value: string | undefined, min: number): number {
  if (value === undefined) throw new UsageError(`${name} needs a value`);
  const n = Number(value);
  if (!Number.isFinite(n) || n < min || value.trim() === '') throw new UsageError(`${name} must be a number >= ${min}, got ${JSON.stringify(value)}`);
  return n;
}

function choice<T extends string>(name: string, value: string | undefined, allowed: readonly T[]): T {
  if (value === undefined) throw new UsageError(`${name} needs a value (${allowed.join('|')})`);
  if (!(allowed as readonly string[]).includes(value)) throw new UsageError(`${name} must be one of ${allowed.join('|')}, got ${JSON.stringify(value)}`);
  return value as T;
}

/**
 * MPI launchers' rank and size; undefined when not launched by one. Slurm counts only for a task srun started:
 * its step's size is SLURM_STEP_NUM_TASKS (srun sets it for each task). SLURM_NTASKS and SLURM_PROCID are also
 * set for a plain command inside an allocation (salloc, an sbatch script), so they alone launch nothing.
 * A launch of one rank is no launch for ndbench: the command runs as typed.
 */
export function mpiRank(env: NodeJS.ProcessEnv = process.env): { rank: number; size: number } | undefined {
  const pairs: Array<[string, string]> = [
    ['OMPI_COMM_WORLD_RANK', 'OMPI_COMM_WORLD_SIZE'],
    ['PMI_RANK', 'PMI_SIZE'],
    ['MV2_COMM_WORLD_RANK', 'MV2_COMM_WORLD_SIZE'],
    ['SLURM_PROCID', 'SLURM_STEP_NUM_TASKS'],
  ];
  for (const [r, s] of pairs) {
    if (env[r] === undefined || env[r] === '' || env[s] === undefined || env[s] === '') continue;
    const rank = Number(env[r]);
    const size = Number(env[s]);
    if (!Number.isInteger(rank) || !Number.isInteger(size) || rank < 0 || rank >= size) {
      throw new UsageError(`${r}=${env[r]} ${s}=${env[s]} is not a rank of a launch: unset them to run ndbench as a plain command`);
    }
    return size === 1 ? undefined : { rank, size };
  }
  return undefined;
}

/** Short options that take a value (perftest's and OSU's): the value may be glued (-s4096) or the next word. */
const SHORT_WITH_VALUE = new Set('pnsDqtdxiImrQluwyWcST'.split(''));
/** Short options without a value; several may share one dash (-bF). */
const SHORT_FLAGS = new Set('abehFRzHUNVO'.split(''));

/** getopt's conventions: `-s4096` → `-s 4096`, `-bF` → `-b -F`; long options untouched (--x=v is split later). */
export function expandShort(argv: string[]): string[] {
  const out: string[] = [];
  for (const a of argv) {
    if (!/^-[A-Za-z]./.test(a)) {
      out.push(a);
      continue;
    }
    const letter = a[1];
    if (SHORT_WITH_VALUE.has(letter)) out.push(`-${letter}`, a.slice(2));
    else if ([...a.slice(1)].every((c) => SHORT_FLAGS.has(c))) for (const c of a.slice(1)) out.push(`-${c}`);
    else out.push(a); // reported as unknown below
  }
  return out;
}

const IB_DEVICE = /^(mlx\d|mthca|rxe|siw|irdma|i40iw|bnxt_re|qedr|hfi1|qib|efa|erdma|hns|ocrdma|cxgb\d|vmw_pvrdma|usnic|ionic|mana)/;

/** OSU's -m: "max" or "min:max" (either side may be empty: ":max", "min:"). */
function osuSizes(value: string | undefined): number[] {
  if (value === undefined) throw new UsageError('-m needs a value (OSU: [min:]max message sizes)');
  const m = /^(\d*):?(\d*)$/.exec(value);
  if (!m || (m[1] === '' && m[2] === '')) throw new UsageError(`-m takes OSU's [min:]max sizes in bytes, got ${JSON.stringify(value)}`);
  const colon = value.includes(':');
  const min = colon && m[1] !== '' ? Number(m[1]) : 1;
  const max = colon ? (m[2] === '' ? MAX_ALL_SIZE : Number(m[2])) : Number(m[1]);
  if (min < 1 || max < min || max > 2 ** 31) throw new UsageError(`-m ${value}: need 1 <= min <= max <= ${2 ** 31}`);
  const out: number[] = [];
  for (let s = min; s <= max; s *= 2) out.push(s);
  return out;
}

/** Parses argv (without node and the script). Throws UsageError; returns null for --help. */
export function parseArgs(argv: string[], env: NodeJS.ProcessEnv = process.env): BenchOptions | 'version' | null {
  const positional: string[] = [];
  let size: number | undefined;
  let all = false;
  let iters: number | undefined;
  let rangeSizes: number[] | undefined;
  let events = false;
  const o: Partial<BenchOptions> & { compare: Baseline[]; notes: string[] } = { compare: [], notes: [] };
  let compareAll = false;
  const note = (text: string) => {
    if (!o.notes.includes(text)) o.notes.push(text);
  };
  argv = expandShort(argv);
  const osu = argv.some((a, i) => a === '--format=osu' || (a === '--format' && argv[i + 1] === 'osu'));
  for (let i = 0; i < argv.length; i++) {
    let a = argv[i];
    let inline: string | undefined;
    const eq = a.startsWith('--') ? a.indexOf('=') : -1;
    if (eq > 0) {
      inline = a.slice(eq + 1);
      a = a.slice(0, eq);
    }
    const value = (): string | undefined => (inline !== undefined ? inline : argv[++i]);
    switch (a) {
      case '-h':
      case '--help':
        return null;
      case '-V':
      case '--version':
        return 'version';
      case '-p':
      case '--port':
        o.port = intArg(a, value(), 0, 65535);
        break;
      case '-s':
      case '--size':
        size = intArg(a, value(), 1, 2 ** 31);
        break;
      case '-a':
      case '--all':
        all = true;
        break;
      case '-n':
      case '--iters':
      case '--iterations': // OSU
        iters = intArg(a, value(), 5); // perftest's minimum
        break;
      case '-D':
      case '--duration':
        o.duration = numArg(a, value(), 0.001);
        break;
      case '-q':
      case '--qps':
      case '--qp':
        o.qps = intArg(a, value(), 1, 100_000);
        break;
      case '-t':
      case '--tx-depth':
      case '--window-size': // OSU
        o.txDepth = intArg(a, value(), 1, 1 << 16);
        break;
      case '-W': {
        // OSU: window size (a number); perftest: performance counter names.
        const v = value();
        if (v !== undefined && /^\d+$/.test(v)) o.txDepth = intArg('-W', v, 1, 1 << 16);
        else throw new UsageError(`-W ${v ?? ''}: perftest's -W reports the device's performance counters (sysfs), which an ND v2 adapter does not expose; as OSU's window size, -W takes a number`);
        break;
      }
      case '--provider':
        o.provider = value();
        if (!o.provider) throw new UsageError('--provider needs a value');
        break;
      case '-d':
      case '--ib-dev': {
        // perftest: the verbs device. Here an adapter is a provider plus a local address.
        const v = value();
        if (!v) throw new UsageError(`${a} needs a value: an ND v2 provider name or DLL path, or the adapter's local IP address`);
        if (isIP(v)) o.bind = v;
        else if (IB_DEVICE.test(v))
          throw new UsageError(
            `${a} ${v}: on Linux -d names an ibv device; netdirect opens an ND v2 provider at a local IP address instead: ` +
              `-d <provider> (e.g. soft, or a DLL path; \`netdirect list\` shows them) or -d <local address>`,
          );
        else o.provider = v;
        break;
      }
      case '--completion':
        o.completion = choice(a, value(), ['auto', 'loop', 'thread', 'manual'] as const);
        break;
      case '-e':
      case '--events':
        events = true;
        break;
      case '--crc':
        o.crc = choice(a, value(), ['on', 'off'] as const);
        break;
      case '--shm':
        o.shm = choice(a, value(), ['on', 'off'] as const);
        break;
      case '--format':
        o.format = choice(a, value(), ['perftest', 'osu', 'json'] as const);
        break;
      case '--json':
      case '--out_json_file':
        o.json = value();
        if (!o.json) throw new UsageError(`${a} needs a file name`);
        break;
      case '--out_json':
        o.json ??= 'perftest_out.json';
        break;
      case '--report_gbits':
      case '--report-gbits':
        o.reportGbits = true;
        break;
      case '--compare':
        for (const c of (value() ?? '').split(',')) {
          if (c === 'all') compareAll = true;
          for (const b of c === 'all' ? BASELINES : [choice('--compare', c, [...BASELINES, 'all'] as const) as Baseline]) {
            if (!o.compare.includes(b)) o.compare.push(b);
          }
        }
        break;
      case '--repetitions':
      case '--reps':
        o.repetitions = intArg(a, value(), 1, 1000);
        break;
      case '--tcp-mode':
        o.tcpMode = choice(a, value(), ['block', 'spin'] as const);
        break;
      case '--plot':
        o.plot = value();
        if (!o.plot) throw new UsageError('--plot needs a file name');
        break;
      case '--loopback':
        o.loopback = true;
        break;
      case '--bind':
        o.bind = value();
        if (!o.bind) throw new UsageError('--bind needs an address');
        break;
      case '--spin-micros':
        o.spinMicros = intArg(a, value(), 0, 10_000_000);
        break;
      case '--spin-on-data':
        o.spinOnData = true;
        break;
      case '--timeout':
        o.timeout = numArg(a, value(), 0.1);
        o.timeoutGiven = true;
        break;
      case '--progress':
        o.progress = true;
        break;
      case '--no-progress':
        o.progress = false;
        break;
      case '--loopback-child':
        o.loopbackChild = true;
        break;
      // ---- perftest's flags with a meaning here ----
      case '-b':
      case '--bidirectional':
        o.bidirectional = true;
        break;
      case '-H':
      case '--report-histogram':
        o.histogram = true;
        break;
      case '-U':
      case '--report-unsorted':
        o.unsorted = true;
        break;
      case '-N':
      case '--noPeak':
        o.noPeak = true;
        break;
      case '-I':
      case '--inline_size':
        o.inline = intArg(a, value(), 0, 1 << 20);
        break;
      case '-r':
      case '--rx-depth':
        o.rxDepth = intArg(a, value(), 1, 16384);
        break;
      case '-Q':
      case '--cq-mod':
        o.cqModeration = intArg(a, value(), 1, 1024);
        break;
      case '--output':
        o.output = choice(a, value(), ['bandwidth', 'message_rate', 'latency'] as const);
        break;
      case '--run_infinitely':
        o.runInfinitely = true;
        break;
      case '--cpu_util':
        o.cpuUtil = true;
        break;
      case '--heap':
        o.heap = true;
        break;
      case '-w':
      case '--limit_bw':
        o.limitBw = numArg(a, value(), 0);
        break;
      case '-y':
      case '--limit_msgrate':
        o.limitMsgRate = numArg(a, value(), 0);
        break;
      case '--warmup': // OSU
        o.warmup = intArg(a, value(), 0);
        break;
      // ---- perftest's flags that select what does not exist over ND v2 / iWARP ----
      case '-F':
      case '--CPU-freq':
        break; // ndbench prints no CPU-frequency warning: nothing to silence
      case '-R':
      case '--rdma_cm':
        note('-R: connections always use the ND v2 connector (the rdma_cm counterpart): -R is how ndbench connects anyway');
        break;
      case '-z':
      case '--comm_rdma_cm':
        note('-z: ndbench exchanges its parameters over its own TCP control connection and ND private data; -z changes nothing');
        break;
      case '-c':
      case '--connection': {
        const v = (value() ?? '').toUpperCase();
        if (v !== 'RC') {
          throw new UsageError(
            `${a} ${v || '(none)'}: only RC here — ND v2 queue pairs are reliable and connected, and iWARP (RDMA over TCP) has no UC, UD, XRC, DC or SRD transport`,
          );
        }
        break;
      }
      case '-i':
      case '--ib-port': {
        const v = value();
        if (osu && a === '-i') {
          iters = intArg('-i (OSU iterations)', v, 5);
          break;
        }
        const port = intArg(a, v, 1);
        if (port !== 1) {
          throw new UsageError(
            `${a} ${port}: an ND v2 adapter is one local IP address with one port (perftest's IB port 1); ` +
              `for OSU's iteration count use -n ${port} (or -i with --format osu)`,
          );
        }
        break;
      }
      case '-x':
      case '--gid-index': {
        const v = value();
        if (osu && a === '-x') {
          o.warmup = intArg('-x (OSU warm-up)', v, 0);
          break;
        }
        intArg(a, v, 0, 1 << 16);
        note(`${a} ${v}: iWARP addresses peers by IP address (the ND connector takes host:port); there is no GID table, so the GID index is ignored (OSU's warm-up count: --warmup, or -x with --format osu)`);
        break;
      }
      case '-m':
      case '--mtu': {
        const v = value();
        if (a === '-m' && (osu || (v ?? '').includes(':'))) {
          rangeSizes = osuSizes(v);
          break;
        }
        intArg(a, v, 64, 1 << 16);
        note(`${a} ${v}: iWARP runs over TCP, whose segment size (the path MTU less headers) bounds each DDP segment; there is no IB path MTU to set, so -m is ignored (OSU's size range: -m min:max)`);
        break;
      }
      case '-u':
      case '--qp-timeout':
        intArg(a, value(), 0, 31);
        note(`${a}: ND v2 has no QP retry timeout (IB's 4.096 µs × 2^n); a dead peer is detected by TCP, bounded by NETDIRECT_SOFT_TCP_TIMEOUT_MS for the built-in provider (docs/liveness.md)`);
        break;
      case '-l':
      case '--post_list':
        o.postList = intArg(a, value(), 1, 1 << 16);
        break;
      case '-S':
      case '--sl':
        intArg(a, value(), 0, 15);
        note(`${a}: service levels are InfiniBand's; iWARP traffic is TCP/IP (set DSCP/priority on the network), so -S is ignored`);
        break;
      case '-O':
      case '--dualport':
        throw new UsageError(`${a}: an ND v2 adapter has one port; run two ndbench pairs on two addresses (--bind) instead of dual-port mode`);
      case '-T':
      case '--tos':
        throw new UsageError(`${a}: ndbench cannot set the type of service of an ND v2 connection (the provider owns its TCP socket)`);
      default:
        if (a.startsWith('-') && a !== '-') throw new UsageError(`unknown option ${a}`);
        positional.push(a);
    }
  }
  if (positional.length === 0) throw new UsageError(`which test? one of ${TESTS.join(' ')}`);
  if (positional.length > 2) throw new UsageError(`too many arguments: ${positional.slice(2).join(' ')}`);
  const test = positional[0] as TestName;
  if (!TESTS.includes(test)) throw new UsageError(`unknown test ${JSON.stringify(positional[0])}${didYouMean(positional[0])}: one of ${TESTS.join(' ')}`);
  if ([all, size !== undefined, rangeSizes !== undefined].filter(Boolean).length > 1) throw new UsageError('-a, -s and -m <min:max> are exclusive');
  if (o.loopback && positional[1] !== undefined) throw new UsageError('--loopback takes no server host');
  const lat = isLatency(test);
  const sizes = all ? allSizes() : rangeSizes ?? [size ?? (test === 'reg_mr' ? 4096 : lat ? 2 : 65536)];
  if (o.bidirectional && !/_bw$/.test(test)) throw new UsageError('-b/--bidirectional is for the *_bw tests (perftest offers it there only)');
  if ((o.histogram || o.unsorted) && !lat) throw new UsageError('-H/-U list latency samples: they are for the *_lat tests and reg_mr');
  if (o.output === 'latency' && !lat) throw new UsageError('--output latency is for the *_lat tests; use bandwidth or message_rate');
  if (o.output !== undefined && o.output !== 'latency' && lat) throw new UsageError(`--output ${o.output} is for the *_bw tests; use latency`);
  if ((o.limitBw !== undefined || o.limitMsgRate !== undefined) && lat) throw new UsageError('-w/-y are bandwidth limits: for the *_bw tests');
  if (o.runInfinitely && sizes.length > 1) throw new UsageError('--run_infinitely repeats one size: give -s, not -a or -m');
  if (o.runInfinitely && o.compare.length) throw new UsageError('--run_infinitely runs netdirect only: drop --compare');
  if (o.postList !== undefined && o.postList > 1 && (o.completion !== 'manual' || !/^(write|read)_bw$/.test(test))) {
    note(`-l ${o.postList}: requests are posted in runs (prepared.postMany(), one native call each) by write_bw and read_bw with --completion manual; elsewhere -l changes nothing`);
  }
  if (o.cqModeration !== undefined && o.completion !== 'manual') {
    note(`-Q ${o.cqModeration}: the promise API settles every request, so there is no completion moderation to set; -Q applies with --completion manual`);
  }
  if (events) {
    if (o.completion === 'manual') throw new UsageError('-e (completion events) contradicts --completion manual (polling)');
    o.completion ??= 'auto';
  }
  const qps = o.qps ?? 1;
  if (qps > 1 && !/_bw$/.test(test)) throw new UsageError('-q/--qps > 1 is for the *_bw tests');
  if (o.bidirectional && test === 'send_bw' && o.completion === 'manual') {
    throw new UsageError('send_bw -b needs completions by notification (--completion auto|loop|thread): with manual polling the sending and the receiving loop would take each other\'s completions from the one CQ');
  }
  if (o.bidirectional && o.compare.length) throw new UsageError('-b with --compare: the TCP baselines stream one way, so the ratio would set both directions against one; compare without -b');
  if (o.bidirectional && o.qps !== undefined && o.qps > 1) throw new UsageError('-b with -q > 1 is not supported yet: use one QP per direction (-q 1)');
  if (test === 'reg_mr' && o.compare.includes('perftest') && !compareAll) throw new UsageError('--compare perftest: reg_mr has no perftest counterpart');
  if (o.compare.includes('native')) {
    const why =
      test !== 'write_lat' && test !== 'read_lat' && test !== 'write_bw' && test !== 'send_lat'
        ? `the native baseline runs write_lat, read_lat, send_lat and write_bw, not ${test}`
        : test === 'write_bw' && qps > 1
          ? 'the native baseline drives one queue pair: use -q 1'
          : o.completion !== 'manual'
          ? 'the native baseline polls the completion queue from C++ as perftest does, so it is set beside --completion manual: add --completion manual'
          : undefined;
    if (why !== undefined) {
      if (!compareAll) throw new UsageError(`--compare native: ${why}`);
      o.compare = o.compare.filter((b) => b !== 'native');
      if (test !== 'reg_mr') note(`--compare all: native left out: ${why}`);
    }
  }
  if (o.plot !== undefined && !/\.svg$/i.test(o.plot)) throw new UsageError('--plot writes SVG: give a file name ending in .svg');
  const opts: BenchOptions = {
    test,
    server: positional[1],
    port: o.port ?? DEFAULT_PORT,
    sizes,
    sizeGiven: all || size !== undefined,
    iters: iters ?? (test === 'write_bw' ? 5000 : 1000),
    itersGiven: iters !== undefined,
    duration: o.duration ?? 0,
    provider: o.provider ?? 'auto',
    completion: o.completion ?? 'auto',
    crc: o.crc,
    shm: o.shm,
    format: o.format ?? 'perftest',
    json: o.json,
    reportGbits: o.reportGbits ?? false,
    compare: o.compare,
    compareImplicit: compareAll,
    repetitions: o.repetitions ?? (o.compare.includes('perftest') ? 3 : 1),
    repetitionsGiven: o.repetitions !== undefined,
    plot: o.plot,
    loopback: o.loopback ?? false,
    qps,
    txDepth: o.txDepth ?? 128,
    tcpMode: o.tcpMode,
    spinMicros: o.spinMicros,
    spinOnData: o.spinOnData,
    bind: o.bind,
    timeout: o.timeout ?? 60,
    timeoutGiven: o.timeoutGiven ?? false,
    progress: o.progress,
    loopbackChild: o.loopbackChild ?? false,
    bidirectional: o.bidirectional ?? false,
    histogram: o.histogram ?? false,
    unsorted: o.unsorted ?? false,
    noPeak: o.noPeak ?? false,
    inline: o.inline ?? 0,
    rxDepth: o.rxDepth,
    cqModeration: o.cqModeration,
    postList: o.postList,
    output: o.output,
    runInfinitely: o.runInfinitely ?? false,
    cpuUtil: o.cpuUtil ?? false,
    heap: o.heap ?? false,
    limitBw: o.limitBw,
    limitMsgRate: o.limitMsgRate,
    warmup: o.warmup,
    notes: o.notes,
  };
  if (opts.runInfinitely && opts.duration === 0) opts.duration = 5; // perftest: a report every duration period
  const mpi = opts.loopback || opts.loopbackChild ? undefined : mpiRank(env);
  if (mpi !== undefined) {
    if (mpi.size !== 2) throw new UsageError(`ndbench needs exactly 2 MPI ranks, got ${mpi.size}`);
    opts.rank = mpi.rank;
    // Rank 0 serves; rank 1 connects to the host given (or NDBENCH_SERVER, or this machine). A host given names
    // the server's address: rank 0 serves on it (a host that is not one of rank 0's addresses fails to listen,
    // instead of being ignored).
    const host = positional[1] ?? env.NDBENCH_SERVER;
    if (mpi.rank === 0) {
      opts.server = undefined;
      if (host !== undefined) {
        if (opts.bind !== undefined && opts.bind !== host) throw new UsageError(`rank 0 serves on the server host ${host}, but --bind says ${opts.bind}: give one of them`);
        opts.bind = host;
      }
    } else opts.server = host ?? '127.0.0.1';
  }
  return opts;
}

/** The native TCP baseline's wait mode for these options. */
export function tcpMode(o: Pick<BenchOptions, 'tcpMode' | 'completion'>): 'block' | 'spin' {
  return o.tcpMode ?? (o.completion === 'manual' ? 'spin' : 'block');
}

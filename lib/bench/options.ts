// ndbench's command line: perftest's test names and options (same options on both sides), plus netdirect's own
// (--provider, --completion, --crc, --compare, --plot, --loopback). Parsing is pure: no addon, no I/O.

export const TESTS = ['write_lat', 'write_bw', 'read_lat', 'read_bw', 'send_lat', 'send_bw', 'reg_mr'] as const;
export type TestName = (typeof TESTS)[number];
export const BASELINES = ['tcp', 'node-net'] as const;
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
  format: Format;
  json?: string;
  reportGbits: boolean;
  compare: Baseline[];
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
  /** Local address to bind/listen (server) — default: every address for control, 127.0.0.1-like for ND. */
  bind?: string;
  /** Overall timeout for any wait, seconds. */
  timeout: number;
  /** Progress line on stderr (default: when stderr is a TTY). */
  progress?: boolean;
  /** Internal: this process is the server child of --loopback (reports its port over IPC). */
  loopbackChild: boolean;
  /** Internal: MPI rank/size from the launcher's environment, when launched by mpiexec. */
  rank?: number;
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
  --completion auto|loop|thread|manual   promise API with completions from the event loop (loop), from the
                           poller thread (thread) or whichever the provider supports (auto, default: loop with
                           the built-in provider on Linux); manual: the JS thread posts and spins on cq.poll()
  --crc on|off             MPA CRC32c of the software provider (sets NETDIRECT_SOFT_CRC for both sides)
  --format perftest|osu|json   output format (default perftest's columns)
  --json <file>            also write the JSON report to <file>
  --report_gbits           bandwidth in Gb/s (10^9 bit/s) instead of MiB/s
  --compare tcp|node-net   also run the same pattern over native TCP / Node's net (repeatable or comma-separated);
                           ratios netdirect/baseline printed beside each figure (same run)
  --tcp-mode block|spin    native TCP baseline waits blocking or busy-polls (default: spin with --completion
                           manual, block with thread)
  --plot <file.svg>        bandwidth and latency against message size, netdirect and baselines
  --loopback               server and client on this machine, both from this one command
  --bind <address>         address to serve on / connect from (default: 127.0.0.1 for --loopback)
  --spin-micros <n>        poller thread busy-poll window before it sleeps (AdapterOptions.spinMicros)
  --timeout <s>            give up on any wait after <s> seconds (default 60)
  --progress / --no-progress   progress line on stderr (default: when stderr is a terminal)
  -h, --help
launched by MPI:  mpiexec -n 2 ndbench write_lat [server-host]   (rank 0 serves, on server-host if given; rank 1
                  connects). srun -n 2 too (SLURM_STEP_NUM_TASKS); a plain command inside a Slurm allocation, or a
                  launch of one rank, runs as typed`;

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
export function warmupOf(o: { iters: number; duration: number; test: TestName }): number {
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

/** Parses argv (without node and the script). Throws UsageError; returns null for --help. */
export function parseArgs(argv: string[], env: NodeJS.ProcessEnv = process.env): BenchOptions | 'version' | null {
  const positional: string[] = [];
  let size: number | undefined;
  let all = false;
  let iters: number | undefined;
  const o: Partial<BenchOptions> & { compare: Baseline[] } = { compare: [] };
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
        iters = intArg(a, value(), 5); // perftest's minimum
        break;
      case '-D':
      case '--duration':
        o.duration = numArg(a, value(), 0.001);
        break;
      case '-q':
      case '--qps':
        o.qps = intArg(a, value(), 1, 100_000);
        break;
      case '-t':
      case '--tx-depth':
        o.txDepth = intArg(a, value(), 1, 1 << 16);
        break;
      case '--provider':
        o.provider = value();
        if (!o.provider) throw new UsageError('--provider needs a value');
        break;
      case '--completion':
        o.completion = choice(a, value(), ['auto', 'loop', 'thread', 'manual'] as const);
        break;
      case '--crc':
        o.crc = choice(a, value(), ['on', 'off'] as const);
        break;
      case '--format':
        o.format = choice(a, value(), ['perftest', 'osu', 'json'] as const);
        break;
      case '--json':
        o.json = value();
        if (!o.json) throw new UsageError('--json needs a file name');
        break;
      case '--report_gbits':
      case '--report-gbits':
        o.reportGbits = true;
        break;
      case '--compare':
        for (const c of (value() ?? '').split(',')) {
          const b = choice('--compare', c, BASELINES);
          if (!o.compare.includes(b)) o.compare.push(b);
        }
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
      case '--timeout':
        o.timeout = numArg(a, value(), 0.1);
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
      default:
        if (a.startsWith('-') && a !== '-') throw new UsageError(`unknown option ${a}`);
        positional.push(a);
    }
  }
  if (positional.length === 0) throw new UsageError(`which test? one of ${TESTS.join(' ')}`);
  if (positional.length > 2) throw new UsageError(`too many arguments: ${positional.slice(2).join(' ')}`);
  const test = positional[0] as TestName;
  if (!TESTS.includes(test)) throw new UsageError(`unknown test ${JSON.stringify(positional[0])}: one of ${TESTS.join(' ')}`);
  if (all && size !== undefined) throw new UsageError('-a and -s are exclusive');
  if (o.loopback && positional[1] !== undefined) throw new UsageError('--loopback takes no server host');
  const lat = isLatency(test);
  const sizes = all ? allSizes() : [size ?? (test === 'reg_mr' ? 4096 : lat ? 2 : 65536)];
  const qps = o.qps ?? 1;
  if (qps > 1 && !/_bw$/.test(test)) throw new UsageError('-q/--qps > 1 is for the *_bw tests');
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
    format: o.format ?? 'perftest',
    json: o.json,
    reportGbits: o.reportGbits ?? false,
    compare: o.compare,
    plot: o.plot,
    loopback: o.loopback ?? false,
    qps,
    txDepth: o.txDepth ?? 128,
    tcpMode: o.tcpMode,
    spinMicros: o.spinMicros,
    bind: o.bind,
    timeout: o.timeout ?? 60,
    progress: o.progress,
    loopbackChild: o.loopbackChild ?? false,
  };
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

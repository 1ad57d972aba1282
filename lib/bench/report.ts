// The report of one ndbench run and its three renderings: perftest's exact columns (default), OSU's two
// columns, and JSON with explicit units. Baseline figures (same run) and the ratio netdirect/baseline of the
// same metric are appended as extra columns, right of perftest's, so perftest parsers still read the row.

import { cpus, loadavg } from 'node:os';
import type { Baseline, BenchOptions, TestName } from './options.js';
import { isLatency, warmupOf } from './options.js';
import type { TargetResult } from './targets.js';
import { type BandwidthStats, type LatencyStats, type Stats, LAT_MEASURE_TAIL, headline, isLatencyStats, toGbits } from './stats.js';

/** What each completion mode is, for the header (README "Completions"). */
const COMPLETION_WORDS: Record<string, string> = {
  loop: "loop, the JS thread's event loop",
  thread: 'thread, a poller thread hands batches to the JS thread',
  manual: 'manual, cq.poll() on the JS thread',
  auto: 'auto',
};

export const REPORT_SCHEMA = 'https://netdirect/schemas/ndbench-report-v1';
export const RESULT_LINE = '-'.repeat(87); // perftest's RESULT_LINE

export interface SizeResult {
  size: number;
  netdirect: Stats;
  baselines: Partial<Record<Baseline, Stats>>;
  /** netdirect / baseline of the headline figure (t_typical for latency, BW_average for bandwidth). */
  ratios: Partial<Record<Baseline, number>>;
  /** -H/-U: every latency sample, µs, in measurement order. */
  samples_usec?: number[];
  /** --cpu_util: this process's CPU time during the phase / its wall time, % of one core (client side). */
  cpu_util_percent?: number;
  /** --repetitions > 1: the headline figure of every repetition, netdirect's and each baseline's (the row is the median one). */
  repetitions?: Record<string, number[]>;
}

export interface Endpoint {
  host: string;
  port: number;
  token?: number;
  address?: string;
}

export interface Report {
  schema: string;
  tool: 'ndbench';
  version: string;
  test: TestName;
  verb: string;
  kind: 'latency' | 'bandwidth';
  units: Record<string, string>;
  definitions: Record<string, string>;
  options: {
    sizes: number[];
    iterations: number;
    duration_s: number;
    provider: string;
    completion: 'auto' | 'loop' | 'thread' | 'manual';
    crc: 'on' | 'off' | 'default';
    /** --shm: same-host shared memory asked for ('default': the provider's, or NETDIRECT_SHM). */
    shm: 'on' | 'off' | 'default';
    qps: number;
    tx_depth: number;
    warmup_iterations: number;
    compare: Baseline[];
    repetitions?: number;
    tcp_mode: 'block' | 'spin';
    loopback: boolean;
    bidirectional?: boolean;
    inline_size?: number;
    cq_moderation?: number;
    /** Accepted perftest flags that change nothing here, with the reason. */
    notes?: string[];
  };
  environment: {
    date: string;
    node: string;
    platform: string;
    cpus: number;
    loadavg: number[];
    provider?: string;
    /** The completion mode that ran (options.completion is the one asked for: 'auto' resolves to one of these). */
    completion?: 'loop' | 'thread' | 'manual';
    adapter?: string;
    /** The transport the measured connection used: 'shm' (same host, docs/shm.md), 'tcp', or the provider's word. */
    transport?: string;
    hardwareCrc32c?: boolean;
    crc32c?: string;
  };
  connection?: { local: Endpoint; remote: Endpoint };
  results: SizeResult[];
  /** --compare perftest: the targets table (lib/bench/targets.ts). */
  targets?: TargetResult[];
  /** Extra figures of some runs: memory per idle QP (-q), registerMemory details. */
  extra?: Record<string, number | string>;
}

export const VERBS: Record<TestName, string> = {
  write_lat: 'RDMA_Write',
  write_bw: 'RDMA_Write',
  read_lat: 'RDMA_Read',
  read_bw: 'RDMA_Read',
  send_lat: 'Send',
  send_bw: 'Send',
  reg_mr: 'RegisterMemory',
};

export const BASELINE_LABEL: Record<Baseline, string> = { tcp: 'tcp', 'node-net': 'node-net', perftest: 'perftest', native: 'native' };

export function newReport(o: BenchOptions, version: string, tcpMode: 'block' | 'spin'): Report {
  const lat = isLatency(o.test);
  const halfRtt = o.test === 'write_lat' || o.test === 'send_lat';
  return {
    schema: REPORT_SCHEMA,
    tool: 'ndbench',
    version,
    test: o.test,
    verb: VERBS[o.test],
    kind: lat ? 'latency' : 'bandwidth',
    units: lat
      ? { latency: 'usec (microseconds)', MsgSize: 'bytes' }
      : { bandwidth: 'MiB/s (2^20 bytes per second)', MsgRate: 'Mpps (10^6 messages per second)', MsgSize: 'bytes' },
    definitions: lat
      ? {
          latency:
            o.test === 'reg_mr'
              ? 'time of one adapter.registerMemory() call (await included)'
              : halfRtt
                ? 'half round trip (perftest rtt_factor 2): ping-pong, each side waits for the peer'
                : 'full round trip (perftest: read latency is not halved)',
          t_typical: 'median',
          samples: `sorted; the top ${2} dropped (perftest LAT_MEASURE_TAIL)`,
          tcp: `native C++ TCP ping-pong (${tcpMode === 'spin' ? 'busy-polling non-blocking recv' : 'blocking recv'}), same sizes and iterations${o.test === 'read_lat' ? ', small request then size-byte reply' : ''}`,
          'node-net': "Node's net module ping-pong (setNoDelay), same sizes and iterations",
          perftest: `perftest's ib_${o.test} -R on the same RDMA device, same size and iterations; its own t_typical`,
          native:
            'the same test on the same queue pair, completion queue and memory, posted and polled by a C++ loop through ' +
            "the ND v2 interfaces (binding/bench/bench_nd.cc): the provider's share, without lib/, Node-API or V8",
          ratio: 'netdirect t_typical / baseline t_typical (< 1: netdirect is faster)',
        }
      : {
          BW_average: o.bidirectional
            ? 'sum of both directions (perftest -b): each side\'s bytes moved / time from its first post to its last completion'
            : 'bytes moved / time from the first post to the last completion, at the client',
          BW_peak: o.noPeak ? 'not computed (-N)' : 'best rate over windows of at least tx-depth messages',
          tcp: `native C++ TCP one-way stream of size-byte send()s (${tcpMode === 'spin' ? 'busy-polling' : 'blocking'}), same sizes and count, timed to the receiver's acknowledgement`,
          'node-net': "Node's net module one-way stream of size-byte writes (drain-paced), timed to the receiver's acknowledgement",
          perftest: `perftest's ib_${o.test} -R on the same RDMA device, same size, iterations, tx depth and QPs; its own BW average (MB/sec = MiB/s)`,
          native:
            `the same Writes on the same queue pair, completion queue and memory, posted ${o.postList && o.postList > 1 ? `in groups of ${o.postList} (-l) bracketed by INDPostBatch` : 'one at a time'} and polled by a C++ loop ` +
            "through the ND v2 interfaces (binding/bench/bench_nd.cc), same tx depth and moderation: the provider's share, without lib/, Node-API or V8",
          ratio: 'netdirect BW_average / baseline BW_average (> 1: netdirect is faster)',
        },
    options: {
      sizes: o.sizes,
      iterations: o.iters,
      duration_s: o.duration,
      provider: o.provider,
      completion: o.completion,
      crc: o.crc ?? 'default',
      shm: o.shm ?? 'default',
      qps: o.qps,
      tx_depth: o.txDepth,
      warmup_iterations: warmupOf({ iters: o.iters, duration: o.duration, test: o.test, warmup: o.warmup }),
      compare: o.compare,
      ...(o.repetitions > 1 ? { repetitions: o.repetitions } : {}),
      tcp_mode: tcpMode,
      loopback: o.loopback,
      ...(o.bidirectional ? { bidirectional: true } : {}),
      ...(o.inline ? { inline_size: o.inline } : {}),
      ...(o.cqModeration ? { cq_moderation: o.cqModeration } : {}),
      ...(o.notes?.length ? { notes: o.notes } : {}),
    },
    environment: {
      date: new Date().toISOString(),
      node: process.version,
      platform: `${process.platform}-${process.arch}`,
      cpus: cpus().length,
      loadavg: loadavg().map((v) => Math.round(v * 100) / 100),
    },
    results: [],
  };
}

export function addResult(report: Report, size: number, netdirect: Stats, baselines: Partial<Record<Baseline, Stats>>): SizeResult {
  const ratios: Partial<Record<Baseline, number>> = {};
  for (const [name, s] of Object.entries(baselines) as Array<[Baseline, Stats]>) {
    const b = headline(s);
    ratios[name] = b > 0 ? headline(netdirect) / b : NaN;
  }
  const r: SizeResult = { size, netdirect, baselines, ratios };
  report.results.push(r);
  return r;
}

const f2 = (v: number) => (Number.isFinite(v) ? v.toFixed(2) : 'nan');
const pad = (s: string, w: number) => (s.length >= w ? s + ' ' : s + ' '.repeat(w - s.length));

/** A streaming printer: header(), one row() per size as it completes, footer(). */
export interface Printer {
  header(): string;
  row(r: SizeResult): string;
  footer(): string;
}

export interface PerftestPrintOptions {
  reportGbits: boolean;
  duration: boolean;
  /** -H: the sorted samples (the top LAT_MEASURE_TAIL dropped), before the row. */
  histogram?: boolean;
  /** -U: the samples in measurement order, before the row. */
  unsorted?: boolean;
  /** --cpu_util: a CPU_Util[%] column after perftest's. */
  cpuUtil?: boolean;
  /** --heap: a heap[B/msg] column (bandwidth tests). */
  heap?: boolean;
}

/** perftest's way of shortest-form numbers (%g: six significant digits, no trailing zeros). */
export function g6(v: number): string {
  return Number.isFinite(v) ? String(Number(v.toPrecision(6))) : 'nan';
}

/** perftest's -U / -H listings: "#, usec" then "<i>, <µs>" per sample (-H: sorted, top LAT_MEASURE_TAIL dropped). */
export function sampleListing(samplesUs: number[], how: 'unsorted' | 'sorted'): string {
  let list = samplesUs;
  if (how === 'sorted') {
    list = Float64Array.from(samplesUs).sort() as unknown as number[];
    if (list.length > LAT_MEASURE_TAIL + 1) list = Array.from(list).slice(0, list.length - LAT_MEASURE_TAIL);
  }
  const lines = ['#, usec'];
  for (let i = 0; i < list.length; i++) lines.push(`${i + 1}, ${g6(list[i])}`);
  return lines.join('\n');
}

export function perftestPrinter(report: Report, opts: PerftestPrintOptions): Printer {
  const lat = report.kind === 'latency';
  const bwUnit = opts.reportGbits ? 'Gb/sec' : 'MiB/sec';
  const bw = (v: number) => f2(opts.reportGbits ? toGbits(v) : v);
  const compare = report.options.compare;
  const extraHeader = () =>
    (opts.cpuUtil ? '    CPU_Util[%]' : '') + (opts.heap && !lat ? '   heap[B/msg]' : '') + compare.map((b) => `   ${b}[${lat ? 'usec' : bwUnit}]   nd/${b}`).join('');
  const cpuCell = (r: SizeResult) => (opts.cpuUtil ? `    ${pad(f2(r.cpu_util_percent ?? NaN), 11)}` : '');
  const heapCell = (r: SizeResult) => {
    if (!opts.heap || lat) return '';
    const h = (r.netdirect as BandwidthStats).heap_bytes_per_op;
    return `   ${pad(h === undefined ? 'n/a' : h.toFixed(2), 11)}`;
  };
  const extraRow = (r: SizeResult) =>
    cpuCell(r) +
    heapCell(r) +
    compare
      .map((b) => {
        const s = r.baselines[b];
        const shown = s === undefined ? 'n/a' : lat ? f2(headline(s)) : bw(headline(s));
        return `   ${pad(shown, 10 + b.length)}${pad(Number.isFinite(r.ratios[b] ?? NaN) ? (r.ratios[b] as number).toFixed(2) : 'n/a', 6)}`;
      })
      .join('');
  return {
    header() {
      const e = report.environment;
      const title = `${report.verb} ${lat ? 'Latency' : report.options.bidirectional ? 'Bidirectional BW' : 'BW'} Test`;
      const lines = [
        RESULT_LINE,
        ' '.repeat(Math.max(0, Math.floor((87 - title.length) / 2))) + title,
        ` Dual-port       : OFF\t\tDevice         : ${e.provider ?? report.options.provider} (${e.adapter ?? '?'})`,
        ` Number of qps   : ${report.options.qps}\t\tTransport type : iWARP`,
        ` Connection type : RC\t\tUsing SRQ      : OFF`,
        ` PCIe relax order: OFF`,
        ` ibv_wr* API     : OFF (ND v2; completions: ${COMPLETION_WORDS[e.completion ?? report.options.completion]})`,
        lat ? ` TX depth        : 1` : ` TX depth        : ${report.options.tx_depth}`,
        ` CQ Moderation   : ${report.options.cq_moderation ?? (lat ? 1 : Math.min(16, Math.max(1, report.options.tx_depth >> 1)))}`,
        ` Mtu             : 65536[B]`,
        ` Link type       : Ethernet`,
        ` Max inline data : ${report.options.inline_size ?? 0}[B]`,
        ` rdma_cm QPs\t : ON (the ND v2 connector; -R/-z change nothing)`,
        ` Data ex. method : ND private data (remote memory) + TCP control`,
        ` MPA CRC32c      : ${report.options.crc === 'default' ? 'provider default' : report.options.crc.toUpperCase()}${e.hardwareCrc32c === undefined ? '' : e.hardwareCrc32c ? ` (hardware${e.crc32c ? `: ${e.crc32c}` : ''})` : ' (software)'}`,
        ...(e.transport === undefined ? [] : [` Transport       : ${e.transport}${e.transport === 'shm' ? ' (same host, shared memory; no CRC)' : ''}`]),
      ];
      for (const b of compare) lines.push(` Baseline ${pad(b, 8)}: ${report.definitions[b]}`);
      if (compare.length) lines.push(` Ratio column    : ${report.definitions.ratio}`);
      lines.push(RESULT_LINE);
      const c = report.connection;
      if (c) {
        const ep = (p: Endpoint) => `IP ${p.host} PORT ${p.port}` + (p.token !== undefined ? ` RKey ${'0x' + (p.token >>> 0).toString(16).padStart(8, '0')} VAddr ${p.address}` : '');
        lines.push(` local address: ${ep(c.local)}`, ` remote address: ${ep(c.remote)}`, RESULT_LINE);
      }
      lines.push(columns());
      return lines.join('\n');
    },
    row(r) {
      const listings: string[] = [];
      if (r.samples_usec && opts.unsorted) listings.push(sampleListing(r.samples_usec, 'unsorted'));
      if (r.samples_usec && opts.histogram) listings.push(sampleListing(r.samples_usec, 'sorted'));
      // perftest: after a listing, the result line and the column header again, then the summary row.
      const before = listings.length ? [...listings, RESULT_LINE, columns()].join('\n') + '\n' : '';
      return before + summary(r);
    },
    footer() {
      return RESULT_LINE;
    },
  };
  function columns(): string {
    if (lat && opts.duration) return ' #bytes        #iterations       t_avg[usec]    tps average' + extraHeader();
    if (lat) {
      return (
        ' #bytes #iterations    t_min[usec]    t_max[usec]  t_typical[usec]    t_avg[usec]    t_stdev[usec]   99% percentile[usec]   99.9% percentile[usec] ' +
        extraHeader()
      );
    }
    return ` #bytes     #iterations    BW peak[${bwUnit}]    BW average[${bwUnit}]   MsgRate[Mpps]` + extraHeader();
  }
  function summary(r: SizeResult): string {
    const s = r.netdirect;
    if (isLatencyStats(s)) {
      if (opts.duration) {
        return ` ${pad(String(s.MsgSize), 13)} ${pad(String(s.n_iterations), 17)} ${pad(f2(s.t_avg), 14)} ${pad(f2(s.tps), 10)}` + extraRow(r);
      }
      return (
        ` ${pad(String(s.MsgSize), 6)} ${pad(String(s.n_iterations), 10)}     ${pad(f2(s.t_min), 14)} ${pad(f2(s.t_max), 12)} ${pad(f2(s.t_typical), 18)} ` +
        `${pad(f2(s.t_avg), 14)} ${pad(f2(s.t_stdev), 15)} ${pad(f2(s.percentile_99), 22)} ${pad(f2(s['percentile_99.9']), 23)}` +
        extraRow(r)
      );
    }
    const b = s as BandwidthStats;
    return ` ${pad(String(b.MsgSize), 10)} ${pad(String(b.n_iterations), 14)} ${pad(bw(b.BW_peak), 19)} ${pad(bw(b.BW_average), 22)} ${pad(b.MsgRate.toFixed(6), 13)}` + extraRow(r);
  }
}

/** perftest's --output: only that figure, "%lf" (six decimals), one line per size; no header. */
export function figurePrinter(report: Report, output: 'bandwidth' | 'message_rate' | 'latency', reportGbits: boolean): Printer {
  return {
    header: () => '',
    row(r) {
      const s = r.netdirect;
      if (isLatencyStats(s)) return s.t_avg.toFixed(6);
      if (output === 'message_rate') return s.MsgRate.toFixed(6);
      return (reportGbits ? toGbits(s.BW_average) : s.BW_average).toFixed(6);
    },
    footer: () => '',
  };
}

export function osuPrinter(report: Report): Printer {
  const lat = report.kind === 'latency';
  const compare = report.options.compare;
  const mb = (mibs: number) => (mibs * 1024 * 1024) / 1e6; // OSU: MB = 10^6 bytes
  const col = (s: string) => s.padStart(20);
  return {
    header() {
      const what = lat ? 'Latency' : 'Bandwidth';
      const lines = [
        `# ndbench (OSU format) ${report.verb} ${what} Test v${report.version}`,
        `# netdirect provider ${report.environment.provider ?? report.options.provider}, completion ${report.environment.completion ?? report.options.completion}, ` +
          (report.environment.transport === undefined ? '' : `transport ${report.environment.transport}, `) +
          (lat ? `latency = ${report.definitions.latency}` : 'MB = 10^6 bytes'),
      ];
      for (const b of compare) lines.push(`# ${b}: ${report.definitions[b]}`);
      const unit = lat ? 'Latency (us)' : 'Bandwidth (MB/s)';
      lines.push(`${'# Size'.padEnd(10)}${col(unit)}` + compare.map((b) => col(`${b} ${lat ? '(us)' : '(MB/s)'}`) + col(`nd/${b}`)).join(''));
      return lines.join('\n');
    },
    row(r) {
      const v = (s: Stats) => (isLatencyStats(s) ? s.t_typical : mb(s.BW_average));
      return (
        `${String(r.size).padEnd(10)}${col(f2(v(r.netdirect)))}` +
        compare.map((b) => col(r.baselines[b] ? f2(v(r.baselines[b] as Stats)) : 'n/a') + col(Number.isFinite(r.ratios[b] ?? NaN) ? (r.ratios[b] as number).toFixed(2) : 'n/a')).join('')
      );
    },
    footer() {
      return '';
    },
  };
}

export function formatJson(report: Report): string {
  return JSON.stringify(report, null, 2) + '\n';
}

/** Renders a whole report at once (perftest or osu; json via formatJson). */
export function formatReport(report: Report, format: 'perftest' | 'osu', opts: PerftestPrintOptions): string {
  const p = format === 'osu' ? osuPrinter(report) : perftestPrinter(report, opts);
  const lines = [p.header(), ...report.results.map((r) => p.row(r)), p.footer()].filter((l) => l !== '');
  return lines.join('\n') + '\n';
}

/** A minimal structural check of a parsed JSON report (used by tests and by consumers of --json files). */
export function validateReport(value: unknown): string[] {
  const errors: string[] = [];
  const r = value as Report;
  const need = (cond: boolean, what: string) => {
    if (!cond) errors.push(what);
  };
  need(typeof r === 'object' && r !== null, 'report is an object');
  if (errors.length) return errors;
  need(r.schema === REPORT_SCHEMA, 'schema');
  need(r.tool === 'ndbench', 'tool');
  need(typeof r.version === 'string', 'version');
  need(typeof r.test === 'string', 'test');
  need(r.kind === 'latency' || r.kind === 'bandwidth', 'kind');
  need(typeof r.units === 'object', 'units');
  need(Array.isArray(r.results), 'results');
  const latKeys: Array<keyof LatencyStats> = ['MsgSize', 'n_iterations', 't_min', 't_max', 't_typical', 't_avg', 't_stdev', 'percentile_99', 'percentile_99.9'];
  const bwKeys: Array<keyof BandwidthStats> = ['MsgSize', 'n_iterations', 'BW_peak', 'BW_average', 'MsgRate'];
  for (const [i, res] of (r.results ?? []).entries()) {
    const keys = r.kind === 'latency' ? latKeys : bwKeys;
    need(typeof res.size === 'number', `results[${i}].size`);
    for (const k of keys) need(typeof (res.netdirect as unknown as Record<string, unknown>)?.[k] === 'number', `results[${i}].netdirect.${k}`);
    for (const b of r.options?.compare ?? []) {
      for (const k of keys) need(typeof (res.baselines?.[b] as unknown as Record<string, unknown>)?.[k] === 'number', `results[${i}].baselines.${b}.${k}`);
      need(typeof res.ratios?.[b] === 'number', `results[${i}].ratios.${b}`);
    }
  }
  return errors;
}

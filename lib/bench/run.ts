// ndbench's two roles and the loopback launcher. The client drives: for each size it runs the netdirect phase,
// then each baseline phase, with the server in step over the control channel; it measures, prints and saves,
// and sends each row to the server, which prints the same table (as perftest's server prints its report).
// The server adopts the client's sizes and counts (perftest wants the same options on both sides; a different
// test is refused), serves one client, then exits. With -b both sides post and measure their own stream, and
// the row is the sum of the two directions.

import { fork } from 'node:child_process';
import { existsSync, writeFileSync } from 'node:fs';
import * as path from 'node:path';
import { loadBenchBinding } from '../native.js';
import { Control, listenControl, type Message } from './control.js';
import { baselineClient, baselineServer, patternOf, statsOf, type PhaseParams, type RawResult } from './baselines.js';
import {
  acceptAll,
  bidirectionalPhase,
  clientPhase,
  closeSide,
  connectSide,
  listenSide,
  meter,
  nativeClientPhase,
  nativeServerPhase,
  openSide,
  passiveServer,
  pollsPassive,
  preparePhase,
  regMrLatency,
  serverIsActive,
  serverPhase,
  samplesOf,
  setTicker,
  type NdConfig,
  type NdSide,
} from './nd.js';
import { isLatency, tcpMode, warmupOf, type Baseline, type BenchOptions } from './options.js';
import { perftestAvailable, perftestClient, perftestServer, rdmaDeviceFor, type PerftestParams } from './perftest.js';
import { renderSvg } from './plot.js';
import { evaluateTargets, formatTargets } from './targets.js';
import { RESULT_LINE, addResult, figurePrinter, formatJson, newReport, osuPrinter, perftestPrinter, type Printer, type Report, type SizeResult } from './report.js';
import { headline, isLatencyStats, sumBandwidth, toGbits, type BandwidthStats, type Stats } from './stats.js';

export interface RunIo {
  /** stdout lines (the report). */
  out(text: string): void;
  /** stderr lines (progress, warnings). */
  err(text: string): void;
  /** Is stderr a terminal (progress line)? */
  errIsTTY: boolean;
}

export const defaultIo: RunIo = {
  out: (t) => process.stdout.write(t.endsWith('\n') ? t : t + '\n'),
  err: (t) => process.stderr.write(t),
  errIsTTY: process.stderr.isTTY === true,
};

export function packageVersion(): string {
  for (let dir = __dirname; path.dirname(dir) !== dir; dir = path.dirname(dir)) {
    const f = path.join(dir, 'package.json');
    if (existsSync(f)) {
      // eslint-disable-next-line @typescript-eslint/no-require-imports
      const pkg = require(f);
      if (pkg.name === 'netdirect') return String(pkg.version);
    }
  }
  return '0.0.0';
}

function ndConfig(o: BenchOptions): NdConfig {
  return {
    test: o.test,
    maxSize: Math.max(...o.sizes),
    qps: o.qps,
    txDepth: o.txDepth,
    completion: o.completion,
    provider: o.provider,
    spinMicros: o.spinMicros,
    spinOnData: o.spinOnData,
    timeoutMs: o.timeout * 1000,
    inline: o.inline,
    rxDepth: o.rxDepth,
    cqModeration: o.cqModeration,
    postList: o.postList,
  };
}

/** What the client sends in its hello: everything the server adopts or checks. */
function helloConfig(o: BenchOptions): Record<string, unknown> {
  return {
    test: o.test,
    sizes: o.sizes,
    iters: o.iters,
    duration: o.duration,
    qps: o.qps,
    txDepth: o.txDepth,
    completion: o.completion,
    crc: o.crc ?? null,
    compare: o.compare,
    tcpMode: tcpMode(o),
    bidirectional: o.bidirectional,
    warmup: o.warmup ?? null,
    runInfinitely: o.runInfinitely,
  };
}

/** The progress line appears once a run has lasted this long (short runs stay quiet). */
export const PROGRESS_AFTER_MS = 2000;

const clock = (ms: number) => {
  const t = Math.max(0, Math.round(ms / 1000));
  const h = Math.floor(t / 3600);
  const m = Math.floor((t % 3600) / 60);
  const sec = String(t % 60).padStart(2, '0');
  return h > 0 ? `${h}:${String(m).padStart(2, '0')}:${sec}` : `${m}:${sec}`;
};

/**
 * The progress line on stderr: the size and phase being run, how far that phase is (iterations from the loops'
 * meter, or the clock with -D), the time so far and an estimate of the time left. The estimate weighs each phase
 * by its iterations × (size + 4 KiB) — a per-message cost plus a per-byte one — or equally with -D, scaled by
 * the time the finished part took. It is redrawn from the benchmark loops (nd.ts setTicker), so it moves while
 * the JS thread spins, and from a timer while it waits.
 */
export function progressLine(o: BenchOptions, io: RunIo, nowMs: () => number = Date.now) {
  const on = o.progress ?? io.errIsTTY;
  const phases = (1 + o.compare.length) * o.repetitions;
  const weight = (size: number) => (o.duration > 0 ? 1 : (o.iters + warmupOf(o)) * (size + 4096));
  const total = o.sizes.reduce((sum, size) => sum + weight(size), 0) * phases;
  const started = nowMs();
  let finished = 0;
  let current = { i: 0, size: o.sizes[0], what: '', weight: 0, t0: started, timed: false };
  let shown = false;
  let last = 0;
  let timer: NodeJS.Timeout | undefined;
  const fraction = () => {
    if (o.duration > 0) return Math.min(1, (nowMs() - current.t0) / (o.duration * 1000));
    return current.timed && meter.total > 0 ? Math.min(1, Math.max(0, meter.done / meter.total)) : 0;
  };
  const line = () => {
    const t = nowMs();
    const elapsed = t - started;
    const where = o.runInfinitely ? `${current.size} B` : `${current.size} B (${current.i + 1}/${o.sizes.length})`;
    const f = fraction();
    let text = ` ndbench ${o.test}: ${where} ${current.what} ${Math.floor(f * 100)}%  elapsed ${clock(elapsed)}`;
    if (o.runInfinitely) text += '  (Ctrl-C ends the run)';
    else {
      const done = finished + f * current.weight;
      if (done > 0) text += `  ETA ${clock((elapsed * (total - done)) / done)}`;
    }
    return text;
  };
  const draw = (force: boolean) => {
    const t = nowMs();
    if (!on || t - started < PROGRESS_AFTER_MS || (!force && t - last < 200)) return;
    last = t;
    io.err(`\r\x1b[K${line()}`);
    shown = true;
  };
  return {
    line,
    /** A phase starts (netdirect or a baseline) for size index i. */
    start(i: number, size: number, what: string) {
      current = { i, size, what, weight: weight(size), t0: nowMs(), timed: what === 'netdirect' || what === 'registerMemory' };
      meter.done = 0;
      meter.total = 0;
      if (!on) return;
      setTicker(() => draw(false));
      timer ??= setInterval(() => draw(false), 500).unref();
      draw(true);
    },
    /** The phase started last is over. */
    end() {
      finished += current.weight;
    },
    clear() {
      if (on && shown) io.err('\r\x1b[K');
      shown = false;
    },
    stop() {
      setTicker(undefined);
      if (timer) clearInterval(timer);
      timer = undefined;
      this.clear();
    },
  };
}

function finishReport(o: BenchOptions, report: Report, io: RunIo): void {
  if (o.format === 'json') io.out(formatJson(report).trimEnd());
  if (o.json) writeFileSync(o.json, formatJson(report));
  if (o.plot) writeFileSync(o.plot, renderSvg(report));
}

function printerFor(o: BenchOptions, report: Report): Printer | null {
  if (o.format === 'json') return null;
  if (o.output) return figurePrinter(report, o.output, o.reportGbits);
  if (o.format === 'osu') return osuPrinter(report);
  return perftestPrinter(report, {
    reportGbits: o.reportGbits,
    duration: o.duration > 0 && isLatency(o.test),
    histogram: o.histogram,
    unsorted: o.unsorted,
    cpuUtil: o.cpuUtil,
    heap: o.heap,
  });
}

function print(io: RunIo, text: string): void {
  if (text !== '') io.out(text);
}

/** -w / -y: perftest's verifier limits, checked on every row; the run fails (exit 1) below them. */
function checkLimits(o: BenchOptions, report: Report): void {
  const unit = o.reportGbits ? 'Gb/sec' : 'MiB/sec';
  for (const r of report.results) {
    const s = r.netdirect;
    if (isLatencyStats(s)) continue;
    const bw = o.reportGbits ? toGbits(s.BW_average) : s.BW_average;
    if (o.limitBw !== undefined && bw < o.limitBw) {
      throw new Error(`BW average ${bw.toFixed(2)} ${unit} at ${r.size} B is below the -w limit of ${o.limitBw} ${unit}`);
    }
    if (o.limitMsgRate !== undefined && s.MsgRate < o.limitMsgRate) {
      throw new Error(`MsgRate ${s.MsgRate.toFixed(6)} Mpps at ${r.size} B is below the -y limit of ${o.limitMsgRate} Mpps`);
    }
  }
}

/** The figures of one size as they go into the report: -N, -H/-U samples, --cpu_util. */
function completeRow(o: BenchOptions, row: SizeResult, cpuPercent: number | undefined): SizeResult {
  if (o.noPeak && !isLatencyStats(row.netdirect)) row.netdirect.BW_peak = 0;
  if (o.histogram || o.unsorted) row.samples_usec = samplesOf(row.netdirect);
  if (cpuPercent !== undefined) row.cpu_util_percent = cpuPercent;
  return row;
}

/** Runs `f` and returns its result with this process's CPU time over its wall time, % of one core. */
async function withCpu<T>(f: () => Promise<T>): Promise<[T, number]> {
  const c0 = process.cpuUsage();
  const t0 = process.hrtime.bigint();
  const value = await f();
  const c = process.cpuUsage(c0);
  const wallUs = Number(process.hrtime.bigint() - t0) / 1000;
  return [value, wallUs > 0 ? ((c.user + c.system) / wallUs) * 100 : 0];
}

function describeConnection(report: Report, side: NdSide, local: string): void {
  report.environment.provider = side.adapter.provider;
  report.environment.completion = side.adapter.completion;
  report.environment.adapter = local;
  const transport = side.qps[0]?.transport;
  if (transport !== undefined) report.environment.transport = transport;
  const c0 = side.connectors[0];
  report.connection = {
    local: { host: c0.localAddress.host, port: c0.localAddress.port, token: side.mr.remoteToken, address: '0x' + side.mr.address.toString(16).padStart(16, '0') },
    remote: { host: c0.peerAddress.host, port: c0.peerAddress.port, token: side.remotes[0].token, address: '0x' + side.remotes[0].address.toString(16).padStart(16, '0') },
  };
}

/** reg_mr: local only (no server). */
async function runLocal(o: BenchOptions, io: RunIo): Promise<Report> {
  const report = newReport(o, packageVersion(), tcpMode(o));
  report.options.compare = [];
  const address = o.bind ?? '127.0.0.1';
  report.environment.adapter = address;
  const printer = printerFor(o, report);
  if (printer) print(io, printer.header());
  const progress = progressLine(o, io);
  try {
    for (const [i, size] of o.sizes.entries()) {
      progress.start(i, size, 'registerMemory');
      const [s, cpu] = await withCpu(() => regMrLatency(ndConfig(o), address, { size, iters: o.iters, warmup: warmupOf(o), durationMs: o.duration * 1000 }));
      progress.end();
      progress.clear();
      const r = completeRow(o, addResult(report, size, s, {}), o.cpuUtil ? cpu : undefined);
      if (printer) print(io, printer.row(r));
    }
  } finally {
    progress.stop();
  }
  if (printer) print(io, printer.footer());
  finishReport(o, report, io);
  return report;
}

/** The sizes a client runs: each once, or (--run_infinitely) the one size until SIGINT. */
function* sweep(o: BenchOptions): Generator<[number, number]> {
  if (!o.runInfinitely) {
    yield* o.sizes.entries();
    return;
  }
  let interrupted = false;
  const stop = () => {
    interrupted = true;
  };
  process.once('SIGINT', stop); // a second Ctrl-C kills as usual
  try {
    while (!interrupted) yield [0, o.sizes[0]];
  } finally {
    process.off('SIGINT', stop);
  }
}

/**
 * --compare perftest: perftest's program for the test, checked before anything runs. Where it cannot run, an
 * explicit --compare perftest fails with the reason; --compare all leaves perftest out with a note.
 */
function perftestOrNote(o: BenchOptions, io: RunIo): string | undefined {
  if (!o.compare.includes('perftest')) return undefined;
  const a = perftestAvailable(o.test);
  if (a.ok) return a.program;
  if (!o.compareImplicit) throw new Error(`--compare perftest: ${a.reason}`);
  io.err(`ndbench: note: --compare all: perftest left out: ${a.reason}\n`);
  o.compare = o.compare.filter((b) => b !== 'perftest');
  if (o.repetitions > 1 && !o.repetitionsGiven) o.repetitions = 1;
  return undefined;
}

/** What perftest runs for one size: ndbench's own options, on the device serving `local`. */
function perftestParams(o: BenchOptions, size: number, local: string): PerftestParams {
  return {
    test: o.test,
    size,
    iters: o.iters,
    duration: o.duration,
    qps: o.qps,
    txDepth: o.txDepth,
    inline: o.inline,
    device: rdmaDeviceFor(local),
    timeoutMs: o.timeout * 1000,
  };
}

/** The index of the median repetition by headline figure (the lower middle one for an even count). */
export function medianRun(runs: Stats[]): number {
  const order = runs.map((_, i) => i).sort((a, b) => headline(runs[a]) - headline(runs[b]));
  return order[(order.length - 1) >> 1];
}

/**
 * One baseline phase of one size, in step with the server (which serves the other end): its figures. perftest's
 * are its own client's table; TCP's and Node's come from whichever side measured (the stream's sender: the
 * server for read_bw).
 */
async function clientBaselinePhase(
  ctl: Control,
  b: Baseline,
  p: PhaseParams,
  c: { o: BenchOptions; remoteHost: string; local: string; perftestProgram?: string; report: Report; side: NdSide },
): Promise<Stats> {
  if (b === 'native') {
    // The netdirect phase's own connection, driven from C++: both sides forget the previous phase first.
    preparePhase(c.side, p.test, p.size);
    ctl.send({ op: 'phase', kind: b, size: p.size });
    await ctl.next('ready', p.timeoutMs);
    const stats = nativeClientPhase(c.side, p.test, { size: p.size, iters: p.iters, warmup: p.warmup, durationMs: p.durationMs });
    ctl.send({ op: 'end' });
    await ctl.next('done', p.timeoutMs * 4);
    return stats;
  }
  ctl.send({ op: 'phase', kind: b, size: p.size });
  const r = await ctl.next('ready', p.timeoutMs);
  if (b === 'perftest') {
    const pt = await perftestClient(c.perftestProgram!, c.remoteHost, r.port as number, perftestParams(c.o, p.size, c.local));
    c.report.extra = { ...c.report.extra, perftest_client: `${path.basename(c.perftestProgram!)} ${pt.args.join(' ')}` };
    ctl.send({ op: 'end' });
    await ctl.next('done', p.timeoutMs * 4);
    return pt.stats;
  }
  const theirs = await baselineClient(b, c.remoteHost, r.port as number, p);
  ctl.send({ op: 'end' });
  const bdone = await ctl.next('done', p.timeoutMs * 4);
  const pat = patternOf(p);
  return statsOf(p, !pat.pingpong && !pat.clientSends ? (bdone.result as RawResult) : theirs);
}

/** The client: connects to the server, runs every size and baseline, prints and returns the report. */
export async function runClient(o: BenchOptions, io: RunIo = defaultIo): Promise<Report> {
  if (o.test === 'reg_mr') return runLocal(o, io);
  const perftestProgram = perftestOrNote(o, io);
  const timeoutMs = o.timeout * 1000;
  const host = o.server ?? '127.0.0.1';
  const ctl = await Control.connect(host, o.port, timeoutMs, (m) => io.err(m));
  let side: NdSide | undefined;
  const progress = progressLine(o, io);
  try {
    ctl.send({ op: 'hello', config: helloConfig(o) });
    const hello = await ctl.next('hello', timeoutMs);
    const local = ctl.localAddress;
    const remoteHost = ctl.remoteAddress;
    side = await openSide(ndConfig(o), local);
    await connectSide(side, remoteHost, hello.ndPort as number);
    const report = newReport(o, packageVersion(), tcpMode(o));
    describeConnection(report, side, local);
    try {
      const b = loadBenchBinding();
      report.environment.hardwareCrc32c = b.hardwareCrc32c?.();
      report.environment.crc32c = b.crc32cImplementation?.();
    } catch {
      // Informational only.
    }
    if (side.rssPerQp !== undefined) report.extra = { ...report.extra, rss_per_idle_qp_bytes: Math.round(side.rssPerQp) };
    const device = rdmaDeviceFor(local);
    if (report.definitions.perftest) report.definitions.perftest += ` (${device ?? 'the device rdma_cm picks for ' + local})`;
    const printer = printerFor(o, report);
    if (printer) print(io, printer.header());
    for (const [i, size] of sweep(o)) {
      const args = { size, iters: o.iters, warmup: warmupOf(o), durationMs: o.duration * 1000 };
      // --repetitions: netdirect and each baseline in turn, n times; the row is each one's median repetition.
      const runs: { nd: Stats[]; cpu: number[]; base: Partial<Record<Baseline, Stats[]>> } = { nd: [], cpu: [], base: {} };
      for (let rep = 0; rep < o.repetitions; rep++) {
        progress.start(i, size, 'netdirect');
        preparePhase(side, o.test, size);
        ctl.send({ op: 'phase', kind: 'nd', size, receives: side.postedReceives });
        const ready = await ctl.next('ready', timeoutMs);
        const s = side;
        const [mine, cpu] = await withCpu(() =>
          o.bidirectional ? bidirectionalPhase(s, o.test, args, ready.receives as number) : clientPhase(s, o.test, args, ready.receives as number),
        );
        ctl.send({ op: 'end' });
        const done = await ctl.next('done', timeoutMs * 4);
        // -b: the server measured its own direction; the row adds both (perftest's bidirectional report).
        runs.nd.push(o.bidirectional ? sumBandwidth(mine as BandwidthStats, done.stats as BandwidthStats) : mine);
        runs.cpu.push(cpu);
        progress.end();
        for (const b of o.compare) {
          progress.start(i, size, b);
          const p: PhaseParams = { test: o.test, ...args, spin: tcpMode(o) === 'spin', timeoutMs };
          const stats = await clientBaselinePhase(ctl, b, p, { o, remoteHost, local, perftestProgram, report, side: s });
          (runs.base[b] ??= []).push(stats);
          progress.end();
        }
      }
      const pick = medianRun(runs.nd);
      const baselines: Partial<Record<Baseline, Stats>> = {};
      for (const b of o.compare) baselines[b] = runs.base[b]![medianRun(runs.base[b]!)];
      const ndStats = runs.nd[pick];
      const cpu = runs.cpu[pick];
      progress.clear();
      const row = completeRow(o, addResult(report, size, ndStats, baselines), o.cpuUtil ? cpu : undefined);
      if (o.repetitions > 1) {
        row.repetitions = { netdirect: runs.nd.map(headline) };
        for (const b of o.compare) row.repetitions[b] = runs.base[b]!.map(headline);
      }
      if (o.runInfinitely && report.results.length > 1000) report.results.shift();
      ctl.send({ op: 'row', result: row });
      if (printer) print(io, printer.row(row));
    }
    ctl.send({ op: 'bye' });
    progress.stop();
    if (printer) print(io, printer.footer());
    if (o.compare.includes('perftest')) {
      report.targets = evaluateTargets(report);
      if (printer && !o.output) print(io, formatTargets(report.targets, o.repetitions) + '\n' + RESULT_LINE);
    }
    finishReport(o, report, io);
    checkLimits(o, report);
    return report;
  } catch (err) {
    ctl.send({ op: 'error', message: (err as Error).message });
    throw err;
  } finally {
    progress.stop();
    if (side) await closeSide(side).catch(() => undefined);
    ctl.close();
  }
}

/**
 * The server: serves one client (its whole sweep), then returns. `onListening` gets the control port. It prints
 * the client's table as the rows arrive (perftest's server prints its report too); with -b it measures its own
 * direction and the rows are the sums.
 */
export async function runServer(o: BenchOptions, io: RunIo = defaultIo, onListening?: (port: number) => void): Promise<void> {
  const timeoutMs = o.timeout * 1000;
  const listening = await listenControl(o.bind, o.port);
  if (onListening) onListening(listening.port);
  else io.err(` ndbench ${o.test} server: waiting for a client on port ${listening.port}\n`);
  // A server started by hand waits 10 minutes for its client unless --timeout says how long.
  const ctl = await listening.accept(o.timeoutGiven ? timeoutMs : Math.max(timeoutMs, 600_000)).catch((err) => {
    listening.server.close();
    throw err;
  });
  let side: NdSide | undefined;
  try {
    const hello = await ctl.next('hello', timeoutMs);
    const c = hello.config as ReturnType<typeof helloConfig>;
    if (c.test !== o.test) throw new Error(`the client runs ${String(c.test)}, this server ${o.test}: run the same test on both sides`);
    for (const [key, mine] of [['completion', o.completion], ['crc', o.crc ?? null], ['bidirectional', o.bidirectional]] as const) {
      if (c[key] !== mine) io.err(` ndbench server: warning: the client has ${key} ${String(c[key])}, this side ${String(mine)}\n`);
    }
    const adopted: BenchOptions = {
      ...o,
      sizes: c.sizes as number[],
      iters: c.iters as number,
      duration: c.duration as number,
      qps: c.qps as number,
      txDepth: c.txDepth as number,
      compare: c.compare as Baseline[],
      bidirectional: c.bidirectional === true,
      warmup: typeof c.warmup === 'number' ? c.warmup : undefined,
      runInfinitely: c.runInfinitely === true,
    };
    const local = ctl.localAddress;
    side = await openSide(ndConfig(adopted), local);
    const ndPort = await listenSide(side, local);
    const accepting = acceptAll(side);
    ctl.send({ op: 'hello', ndPort });
    await accepting;
    const report = newReport(adopted, packageVersion(), c.tcpMode as 'block' | 'spin');
    describeConnection(report, side, local);
    const printer = printerFor(adopted, report);
    if (printer) print(io, printer.header());
    const spin = (c.tcpMode as string) === 'spin';
    for (;;) {
      const m: Message = await ctl.next(undefined, Math.max(timeoutMs, 600_000));
      if (m.op === 'bye') break;
      if (m.op === 'row') {
        const row = m.result as SizeResult;
        report.results.push(row);
        if (adopted.runInfinitely && report.results.length > 1000) report.results.shift();
        if (printer) print(io, printer.row(row));
        continue;
      }
      if (m.op !== 'phase') throw new Error(`control channel: unexpected '${m.op}'`);
      const size = m.size as number;
      let end: Promise<Message> | undefined; // the client's 'end', asked for early while a manual passive server polls
      if (m.kind === 'nd') {
        const { receives } = preparePhase(side, o.test, size);
        ctl.send({ op: 'ready', receives });
        let stats: Stats | undefined;
        if (adopted.bidirectional) {
          const args = { size, iters: adopted.iters, warmup: warmupOf(adopted), durationMs: adopted.duration * 1000 };
          stats = await bidirectionalPhase(side, o.test, args, m.receives as number);
        } else if (serverIsActive(o.test)) {
          await serverPhase(side, o.test, size);
        } else if (pollsPassive(side, o.test)) {
          await passiveServer(side, (end = ctl.next('end', Math.max(timeoutMs, 600_000))));
        }
        await (end ?? ctl.next('end', Math.max(timeoutMs, 600_000)));
        ctl.send({ op: 'done', stats });
      } else if (m.kind === 'perftest') {
        await servePerftest(ctl, adopted, size, local, timeoutMs);
      } else if (m.kind === 'native') {
        preparePhase(side, o.test, size);
        ctl.send({ op: 'ready' });
        nativeServerPhase(side, o.test, size);
        // The native loop's passive server is the same as lib/'s (passiveServer): the ratio is the client's alone.
        if (pollsPassive(side, o.test) && !serverIsActive(o.test)) end = ctl.next('end', Math.max(timeoutMs, 600_000));
        if (end !== undefined) await passiveServer(side, end);
        await (end ?? ctl.next('end', Math.max(timeoutMs, 600_000)));
        ctl.send({ op: 'done' });
      } else {
        const p: PhaseParams = {
          test: o.test,
          size,
          iters: adopted.iters,
          warmup: warmupOf(adopted),
          durationMs: adopted.duration * 1000,
          spin,
          timeoutMs,
        };
        const b = await baselineServer(m.kind as Baseline, local, p);
        ctl.send({ op: 'ready', port: b.port });
        const result = await b.result;
        await ctl.next('end', Math.max(timeoutMs, 600_000));
        ctl.send({ op: 'done', result: { iterations: result.iterations, bytes: result.bytes, elapsedNs: result.elapsedNs } });
      }
    }
    if (printer) print(io, printer.footer());
    finishReport(adopted, report, io);
  } catch (err) {
    ctl.send({ op: 'error', message: (err as Error).message });
    throw err;
  } finally {
    if (side) await closeSide(side).catch(() => undefined);
    ctl.close();
  }
}

/** The server half of a perftest phase: perftest's server on this side, until it exits after the client. */
async function servePerftest(ctl: Control, o: BenchOptions, size: number, local: string, timeoutMs: number): Promise<void> {
  const a = perftestAvailable(o.test);
  if (!a.ok) throw new Error(`--compare perftest on the server: ${a.reason}`);
  const srv = await perftestServer(a.program, local, perftestParams(o, size, local));
  try {
    ctl.send({ op: 'ready', port: srv.port });
    await ctl.next('end', Math.max(timeoutMs, 600_000));
    await srv.finished;
    ctl.send({ op: 'done' });
  } finally {
    srv.kill();
  }
}

function cliPath(): string {
  const here = path.join(__dirname, 'cli.js');
  if (existsSync(here)) return here;
  for (let dir = __dirname; path.dirname(dir) !== dir; dir = path.dirname(dir)) {
    const f = path.join(dir, 'dist', 'cjs', 'bench', 'cli.js');
    if (existsSync(f)) return f;
  }
  throw new Error('ndbench --loopback: cannot find dist/cjs/bench/cli.js (run `npm run build:ts`)');
}

/** Server as a child process (same options, ephemeral port), client in this process. */
export async function runLoopback(o: BenchOptions, argv: string[], io: RunIo = defaultIo): Promise<Report> {
  if (o.test === 'reg_mr') return runLocal(o, io);
  const childArgs = argv.filter((a) => a !== '--loopback');
  // The server child writes no files and prints nowhere (its stdout is ignored): drop what names outputs.
  const strip = new Set(['-p', '--port', '--json', '--out_json_file', '--plot', '--format', '--output']);
  const dropFlags = new Set(['--out_json', '--progress']);
  const args: string[] = [];
  for (let i = 0; i < childArgs.length; i++) {
    const a = childArgs[i].split('=')[0];
    if (dropFlags.has(a)) continue;
    if (/^-p\d/.test(a)) continue;
    if (strip.has(a)) {
      if (!childArgs[i].includes('=')) i++;
      continue;
    }
    args.push(childArgs[i]);
  }
  args.push('--loopback-child', '--port', '0', '--bind', o.bind ?? '127.0.0.1', '--no-progress');
  const child = fork(cliPath(), args, { stdio: ['ignore', 'ignore', 'pipe', 'ipc'], env: process.env });
  let childErr = '';
  child.stderr!.setEncoding('utf8').on('data', (d: string) => {
    childErr += d;
    io.err(d.replace(/^(?=.)/gm, ' [server] '));
  });
  const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
  const port = await new Promise<number>((resolve, reject) => {
    child.on('message', (m: { port?: number }) => m.port !== undefined && resolve(m.port));
    exited.then((code) => reject(new Error(`ndbench --loopback: the server exited (${code}) before listening\n${childErr}`)));
  });
  try {
    const report = await runClient({ ...o, server: o.bind ?? '127.0.0.1', port, loopback: true }, io);
    const code = await Promise.race([exited, new Promise<'timeout'>((r) => setTimeout(() => r('timeout'), o.timeout * 1000).unref())]);
    if (code === 'timeout') throw new Error('ndbench --loopback: the server did not exit');
    if (code !== 0) throw new Error(`ndbench --loopback: the server exited with ${code}`);
    return report;
  } finally {
    if (child.exitCode === null && child.signalCode === null) child.kill();
  }
}

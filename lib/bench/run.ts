// ndbench's two roles and the loopback launcher. The client drives: for each size it runs the netdirect phase,
// then each baseline phase, with the server in step over the control channel; it measures, prints and saves.
// The server adopts the client's sizes and counts (perftest wants the same options on both sides; a different
// test is refused), serves one client, then exits.

import { fork } from 'node:child_process';
import { existsSync, writeFileSync } from 'node:fs';
import * as path from 'node:path';
import { Control, listenControl, type Message } from './control.js';
import { baselineClient, baselineServer, patternOf, statsOf, type PhaseParams, type RawResult } from './baselines.js';
import {
  acceptAll,
  clientPhase,
  closeSide,
  connectSide,
  listenSide,
  openSide,
  preparePhase,
  regMrLatency,
  serverIsActive,
  serverPhase,
  type NdConfig,
  type NdSide,
} from './nd.js';
import { isLatency, tcpMode, warmupOf, type Baseline, type BenchOptions } from './options.js';
import { renderSvg } from './plot.js';
import { addResult, formatJson, newReport, osuPrinter, perftestPrinter, type Printer, type Report } from './report.js';
import type { Stats } from './stats.js';

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
    timeoutMs: o.timeout * 1000,
  };
}

/** What the client sends in its hello: everything the server adopts or checks. */
function helloConfig(o: BenchOptions): Record<string, unknown> {
  return { test: o.test, sizes: o.sizes, iters: o.iters, duration: o.duration, qps: o.qps, txDepth: o.txDepth, completion: o.completion, crc: o.crc ?? null, compare: o.compare, tcpMode: tcpMode(o) };
}

function progressLine(o: BenchOptions, io: RunIo) {
  const on = (o.progress ?? io.errIsTTY) && o.sizes.length > 1;
  let shown = false;
  return {
    show(i: number, size: number, what: string) {
      if (!on) return;
      io.err(`\r\x1b[K ndbench ${o.test}: ${size} B (${i + 1}/${o.sizes.length}) ${what}`);
      shown = true;
    },
    clear() {
      if (on && shown) io.err('\r\x1b[K');
      shown = false;
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
  return o.format === 'osu' ? osuPrinter(report) : perftestPrinter(report, { reportGbits: o.reportGbits, duration: o.duration > 0 && isLatency(o.test) });
}

/** reg_mr: local only (no server). */
async function runLocal(o: BenchOptions, io: RunIo): Promise<Report> {
  const report = newReport(o, packageVersion(), tcpMode(o));
  report.options.compare = [];
  const address = o.bind ?? '127.0.0.1';
  report.environment.adapter = address;
  const printer = printerFor(o, report);
  if (printer) io.out(printer.header());
  const progress = progressLine(o, io);
  for (const [i, size] of o.sizes.entries()) {
    progress.show(i, size, 'registerMemory');
    const s = await regMrLatency(ndConfig(o), address, { size, iters: o.iters, warmup: warmupOf(o), durationMs: o.duration * 1000 });
    progress.clear();
    const r = addResult(report, size, s, {});
    if (printer) io.out(printer.row(r));
  }
  if (printer && printer.footer()) io.out(printer.footer());
  finishReport(o, report, io);
  return report;
}

/** The client: connects to the server, runs every size and baseline, prints and returns the report. */
export async function runClient(o: BenchOptions, io: RunIo = defaultIo): Promise<Report> {
  if (o.test === 'reg_mr') return runLocal(o, io);
  const timeoutMs = o.timeout * 1000;
  const host = o.server ?? '127.0.0.1';
  const ctl = await Control.connect(host, o.port, timeoutMs, (m) => io.err(m));
  let side: NdSide | undefined;
  try {
    ctl.send({ op: 'hello', config: helloConfig(o) });
    const hello = await ctl.next('hello', timeoutMs);
    const local = ctl.localAddress;
    const remoteHost = ctl.remoteAddress;
    side = await openSide(ndConfig(o), local);
    await connectSide(side, remoteHost, hello.ndPort as number);
    const report = newReport(o, packageVersion(), tcpMode(o));
    report.environment.provider = side.adapter.provider;
    report.environment.adapter = local;
    try {
      // eslint-disable-next-line @typescript-eslint/no-require-imports
      const b = require('../binding.js').binding;
      report.environment.hardwareCrc32c = b.hardwareCrc32c?.();
      report.environment.crc32c = b.crc32cImplementation?.();
    } catch {
      // Informational only.
    }
    const c0 = side.connectors[0];
    report.connection = {
      local: { host: c0.localAddress.host, port: c0.localAddress.port, token: side.mr.remoteToken, address: '0x' + side.mr.address.toString(16).padStart(16, '0') },
      remote: { host: c0.peerAddress.host, port: c0.peerAddress.port, token: side.remotes[0].token, address: '0x' + side.remotes[0].address.toString(16).padStart(16, '0') },
    };
    if (side.rssPerQp !== undefined) report.extra = { ...report.extra, rss_per_idle_qp_bytes: Math.round(side.rssPerQp) };
    const printer = printerFor(o, report);
    if (printer) io.out(printer.header());
    const progress = progressLine(o, io);
    for (const [i, size] of o.sizes.entries()) {
      const args = { size, iters: o.iters, warmup: warmupOf(o), durationMs: o.duration * 1000 };
      progress.show(i, size, 'netdirect');
      preparePhase(side, o.test, size);
      ctl.send({ op: 'phase', kind: 'nd', size });
      const ready = await ctl.next('ready', timeoutMs);
      const ndStats = await clientPhase(side, o.test, args, ready.receives as number);
      ctl.send({ op: 'end' });
      await ctl.next('done', timeoutMs * 4);
      const baselines: Partial<Record<Baseline, Stats>> = {};
      for (const b of o.compare) {
        progress.show(i, size, b);
        const p: PhaseParams = { test: o.test, ...args, spin: tcpMode(o) === 'spin', timeoutMs };
        ctl.send({ op: 'phase', kind: b, size });
        const r = await ctl.next('ready', timeoutMs);
        const mine = await baselineClient(b, remoteHost, r.port as number, p);
        ctl.send({ op: 'end' });
        const done = await ctl.next('done', timeoutMs * 4);
        // The stream's sender measures: the server for read_bw.
        const pat = patternOf(p);
        const measured = !pat.pingpong && !pat.clientSends ? (done.result as RawResult) : mine;
        baselines[b] = statsOf(p, measured);
      }
      progress.clear();
      const row = addResult(report, size, ndStats, baselines);
      if (printer) io.out(printer.row(row));
    }
    ctl.send({ op: 'bye' });
    if (printer && printer.footer()) io.out(printer.footer());
    finishReport(o, report, io);
    return report;
  } catch (err) {
    ctl.send({ op: 'error', message: (err as Error).message });
    throw err;
  } finally {
    if (side) await closeSide(side).catch(() => undefined);
    ctl.close();
  }
}

/** The server: serves one client (its whole sweep), then returns. `onListening` gets the control port. */
export async function runServer(o: BenchOptions, io: RunIo = defaultIo, onListening?: (port: number) => void): Promise<void> {
  const timeoutMs = o.timeout * 1000;
  const listening = await listenControl(o.bind, o.port);
  if (onListening) onListening(listening.port);
  else io.err(` ndbench ${o.test} server: waiting for a client on port ${listening.port}\n`);
  const ctl = await listening.accept(Math.max(timeoutMs, 600_000));
  let side: NdSide | undefined;
  try {
    const hello = await ctl.next('hello', timeoutMs);
    const c = hello.config as ReturnType<typeof helloConfig>;
    if (c.test !== o.test) throw new Error(`the client runs ${String(c.test)}, this server ${o.test}: run the same test on both sides`);
    for (const [key, mine] of [['completion', o.completion], ['crc', o.crc ?? null]] as const) {
      if (c[key] !== mine) io.err(` ndbench server: warning: the client has ${key} ${String(c[key])}, this side ${String(mine)}\n`);
    }
    const adopted: BenchOptions = {
      ...o,
      sizes: c.sizes as number[],
      iters: c.iters as number,
      duration: c.duration as number,
      qps: c.qps as number,
      txDepth: c.txDepth as number,
    };
    const local = ctl.localAddress;
    side = await openSide(ndConfig(adopted), local);
    const ndPort = await listenSide(side, local);
    const accepting = acceptAll(side);
    ctl.send({ op: 'hello', ndPort });
    await accepting;
    const spin = (c.tcpMode as string) === 'spin';
    for (;;) {
      const m: Message = await ctl.next(undefined, Math.max(timeoutMs, 600_000));
      if (m.op === 'bye') break;
      if (m.op !== 'phase') throw new Error(`control channel: unexpected '${m.op}'`);
      const size = m.size as number;
      if (m.kind === 'nd') {
        const { receives } = preparePhase(side, o.test, size);
        ctl.send({ op: 'ready', receives });
        if (serverIsActive(o.test)) await serverPhase(side, o.test, size);
        await ctl.next('end', Math.max(timeoutMs, 600_000));
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
  } catch (err) {
    ctl.send({ op: 'error', message: (err as Error).message });
    throw err;
  } finally {
    if (side) await closeSide(side).catch(() => undefined);
    ctl.close();
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
  const strip = new Set(['-p', '--port', '--json', '--plot', '--format']);
  const args: string[] = [];
  for (let i = 0; i < childArgs.length; i++) {
    const a = childArgs[i].split('=')[0];
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
    io.err(d.replace(/^/gm, ' [server] '));
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

// The baselines ndbench measures in the same run, with the same pattern, sizes and iteration counts:
//   tcp       plain TCP sockets in native code (binding/bench/bench_tcp.cc, on a libuv worker thread)
//   node-net  Node's net module, in JS on the event loop
// *_lat: ping-pong (read_lat: a 16-byte request, a size-byte reply; reported as a full round trip, as perftest's
// read latency); *_bw: a one-way stream of size-byte writes from the side that sends data in the RDMA test
// (the client, or the server for read_bw), timed by the sender up to the receiver's acknowledgement.

import * as net from 'node:net';
import { once } from 'node:events';
import { loadBenchBinding, type NativeBenchBinding, type NativeTcpBenchParams } from '../native.js';
import type { Baseline, TestName } from './options.js';
import { bandwidthStats, latencyStats, type Stats } from './stats.js';

export interface PhaseParams {
  test: TestName;
  size: number;
  iters: number;
  warmup: number;
  durationMs: number;
  /** Native TCP: busy-poll instead of blocking. */
  spin: boolean;
  timeoutMs: number;
}

export interface RawResult {
  samples?: number[] | Float64Array; // ping-pong round trips, ns
  iterations: number;
  bytes: number;
  elapsedNs: number;
}

const READ_REQUEST = 16;

/** The traffic of a test: ping-pong (latency) or a stream, the request and reply sizes in bytes, who sends. */
export function patternOf(p: PhaseParams): { pingpong: boolean; request: number; reply: number; clientSends: boolean } {
  const lat = p.test.endsWith('_lat');
  if (lat) return { pingpong: true, request: p.test === 'read_lat' ? READ_REQUEST : p.size, reply: p.size, clientSends: true };
  return { pingpong: false, request: p.size, reply: 0, clientSends: p.test !== 'read_bw' };
}

/** Stats from whichever side measured (the ping-pong client; the stream's sender). */
export function statsOf(p: PhaseParams, r: RawResult): Stats {
  if (patternOf(p).pingpong) return latencyStats(p.size, r.samples ?? [], p.test === 'read_lat' ? 1 : 2);
  return bandwidthStats(p.size, r.iterations, r.elapsedNs);
}

// ---- native TCP ------------------------------------------------------------------------------------------

type TcpAddon = Required<Pick<NativeBenchBinding, 'tcpBenchListen' | 'tcpBenchRun' | 'tcpBenchClose'>>;

let tcpAddon: TcpAddon | undefined;

/** The addon's tcpBench* functions (NETDIRECT_BENCH_TCP_ADDON may name a separately built .node). */
export function loadTcpAddon(): TcpAddon {
  if (tcpAddon) return tcpAddon;
  const mod = loadBenchBinding(process.env.NETDIRECT_BENCH_TCP_ADDON);
  if (typeof mod?.tcpBenchRun !== 'function') {
    throw new Error(
      '--compare tcp: this build of the netdirect addon has no tcpBenchRun (binding/bench/bench_tcp.cc is not registered in ' +
        'binding/addon/addon.cc Init: InitBenchTcp(env, exports)); rebuild with `npm run build:native`',
    );
  }
  tcpAddon = mod as TcpAddon;
  return tcpAddon;
}

function tcpParams(p: PhaseParams, role: 'server' | 'client'): NativeTcpBenchParams {
  const pat = patternOf(p);
  return {
    role,
    pattern: pat.pingpong ? 'pingpong' : 'stream',
    sender: pat.pingpong ? false : (role === 'client') === pat.clientSends,
    size: pat.request,
    replySize: pat.reply || pat.request,
    iters: p.iters,
    warmup: p.warmup,
    durationMs: p.durationMs,
    spin: p.spin,
    timeoutMs: p.timeoutMs,
  };
}

// ---- Node net --------------------------------------------------------------------------------------------

function withTimeout<T>(promise: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout;
  return Promise.race([
    promise,
    new Promise<T>((_, reject) => {
      timer = setTimeout(() => reject(new Error(`${what}: timed out after ${ms / 1000} s`)), ms);
    }),
  ]).finally(() => clearTimeout(timer));
}

async function netPingPongClient(s: net.Socket, p: PhaseParams): Promise<RawResult> {
  const pat = patternOf(p);
  const tx = Buffer.alloc(pat.request, 1);
  let got = 0;
  let waiter: (() => void) | null = null;
  s.on('data', (d: Buffer) => {
    got += d.length;
    if (got >= pat.reply && waiter) {
      got -= pat.reply;
      const w = waiter;
      waiter = null;
      w();
    }
  });
  const samples: number[] = [];
  const timed = p.durationMs > 0;
  const start = process.hrtime.bigint();
  const end = start + BigInt(Math.round(p.durationMs * 1e6));
  for (let i = -p.warmup; timed || i < p.iters; i++) {
    const t0 = process.hrtime.bigint();
    const done = new Promise<void>((r) => (waiter = r));
    s.write(tx);
    await done;
    const t1 = process.hrtime.bigint();
    if (i >= 0) samples.push(Number(t1 - t0));
    if (timed && i >= 0 && t1 >= end) break;
  }
  return { samples, iterations: samples.length, bytes: samples.length * (pat.request + pat.reply), elapsedNs: Number(process.hrtime.bigint() - start) };
}

function netPingPongServer(s: net.Socket, p: PhaseParams): Promise<RawResult> {
  const pat = patternOf(p);
  const reply = Buffer.alloc(pat.reply, 2);
  let acc = 0;
  let n = 0;
  return new Promise((resolve, reject) => {
    s.on('data', (d: Buffer) => {
      acc += d.length;
      while (acc >= pat.request) {
        acc -= pat.request;
        n++;
        s.write(reply);
      }
    });
    s.on('end', () => {
      s.end();
      resolve({ iterations: n, bytes: 0, elapsedNs: 0 });
    });
    s.on('error', reject);
  });
}

async function netStreamSender(s: net.Socket, p: PhaseParams): Promise<RawResult> {
  const buf = Buffer.alloc(p.size, 0x5a);
  // The receiver answers 8 bytes after the warm-up (if any), then 8 bytes with the timed total.
  const totalAt = p.warmup > 0 ? 8 : 0;
  let warmDone: () => void = () => undefined;
  const warmAck = new Promise<void>((resolve) => (warmDone = resolve));
  const ack = new Promise<number>((resolve, reject) => {
    const parts: Buffer[] = [];
    s.on('data', (d: Buffer) => {
      parts.push(d);
      const all = Buffer.concat(parts);
      if (all.length >= totalAt) warmDone();
      if (all.length >= totalAt + 8) resolve(Number(all.readBigUInt64LE(totalAt)));
    });
    s.on('error', reject);
    s.on('close', () => reject(new Error('node-net receiver closed without acknowledging')));
  });
  ack.catch(() => undefined);
  if (p.warmup > 0) {
    // Untimed warm-up (as the RDMA side): sent, then acknowledged by the receiver before the clock starts.
    for (let i = 0; i < p.warmup; i++) if (!s.write(buf)) await once(s, 'drain');
    await warmAck;
  }
  const timed = p.durationMs > 0;
  const start = process.hrtime.bigint();
  const end = start + BigInt(Math.round(p.durationMs * 1e6));
  let n = 0;
  for (; timed || n < p.iters; ) {
    n++;
    if (!s.write(buf)) await once(s, 'drain');
    if (timed && (n & 15) === 0 && process.hrtime.bigint() >= end) break;
  }
  s.end();
  const received = await ack;
  const elapsedNs = Number(process.hrtime.bigint() - start);
  if (received !== n * p.size) throw new Error(`node-net: receiver counted ${received} bytes, sender sent ${n * p.size}`);
  return { iterations: n, bytes: received, elapsedNs };
}

function netStreamReceiver(s: net.Socket, p: PhaseParams): Promise<RawResult> {
  let total = 0;
  let warm = p.warmup * p.size;
  return new Promise((resolve, reject) => {
    s.on('data', (d: Buffer) => {
      if (warm > 0) {
        const w = Math.min(warm, d.length);
        warm -= w;
        total += d.length - w;
        if (warm === 0) s.write(Buffer.alloc(8));
        return;
      }
      total += d.length;
    });
    s.on('end', () => {
      const b = Buffer.alloc(8);
      b.writeBigUInt64LE(BigInt(total));
      s.end(b);
      resolve({ iterations: 0, bytes: total, elapsedNs: 0 });
    });
    s.on('error', reject);
  });
}

async function netRun(s: net.Socket, p: PhaseParams, role: 'server' | 'client'): Promise<RawResult> {
  s.setNoDelay(true);
  const pat = patternOf(p);
  if (pat.pingpong) return role === 'client' ? netPingPongClient(s, p) : netPingPongServer(s, p);
  return (role === 'client') === pat.clientSends ? netStreamSender(s, p) : netStreamReceiver(s, p);
}

// ---- both, as phases of the control protocol --------------------------------------------------------------

/** Server side of a baseline phase: listens, returns the port and a promise of its (possibly empty) result. */
export async function baselineServer(kind: Baseline, host: string, p: PhaseParams): Promise<{ port: number; result: Promise<RawResult> }> {
  if (kind === 'tcp') {
    const addon = loadTcpAddon();
    const l = addon.tcpBenchListen(host, 0);
    return { port: l.port, result: addon.tcpBenchRun({ ...tcpParams(p, 'server'), fd: l.fd }) };
  }
  const server = net.createServer();
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen({ host, port: 0 }, () => resolve());
  });
  const port = (server.address() as net.AddressInfo).port;
  const result = withTimeout(
    (async () => {
      const [socket] = (await once(server, 'connection')) as [net.Socket];
      server.close();
      return netRun(socket, p, 'server');
    })(),
    p.timeoutMs,
    'node-net server',
  );
  result.catch(() => server.close());
  return { port, result };
}

/** Client side of a baseline phase. */
export async function baselineClient(kind: Baseline, host: string, port: number, p: PhaseParams): Promise<RawResult> {
  if (kind === 'tcp') return loadTcpAddon().tcpBenchRun({ ...tcpParams(p, 'client'), host, port });
  const socket = net.connect({ host, port });
  await withTimeout(once(socket, 'connect'), p.timeoutMs, 'node-net connect');
  try {
    return await withTimeout(netRun(socket, p, 'client'), p.timeoutMs * 4, 'node-net client');
  } finally {
    socket.destroy();
  }
}

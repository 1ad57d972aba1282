// The RDMA side of ndbench: connection setup (remote memory descriptors in ND private data, both ways) and one
// timed phase per test and size. Memory layout of each side's single registered region:
//   [0, max)          receive area: the peer writes here (write_*), receives land here (send_*), reads land here
//   [max, 2·max)      send area: the source of writes and sends, what the peer reads (read_*)
//   ctrl (64 B)       CREDIT (u32, written by the peer), CREDIT_SRC, STOP (u8, written by the peer), STOP_SRC
// Completion modes: 'manual' — the JS thread spins on memory and cq.poll(), requests posted with qp.post()
// (completions moderated: every K-th signaled); 'loop' / 'thread' (and 'auto', whichever the provider offers) —
// the promise API, completions from the event loop or from the poller thread, and the JS thread yields to the
// event loop (setImmediate) while it waits, as a Node program would.

import type { Adapter, CompletionQueue, Connector, Listener, MemoryRegion, QueuePair, RawCompletion, RemoteMemory } from '../index.js';
import { loadBenchBinding, type NativeBenchBinding, type NativeNdBenchParams } from '../native.js';
import type { TestName } from './options.js';
import { HeapMeter, Marks, bandwidthStats, latencyStats, peakFromMarks, type Stats } from './stats.js';
import { formatBytes } from '../validate.js';

type Nd = typeof import('../index.js');
// Loaded on first use, so that option parsing, formats and --help work without the addon.
// eslint-disable-next-line @typescript-eslint/no-require-imports
const nd = (): Nd => require('../index.js') as Nd;

const CREDIT = 0;
const CREDIT_SRC = 8;
const STOP = 16;
const STOP_SRC = 24;
const CTRL_BYTES = 64;

export interface NdConfig {
  test: TestName;
  maxSize: number;
  qps: number;
  txDepth: number;
  completion: 'auto' | 'loop' | 'thread' | 'manual';
  provider: string;
  spinMicros?: number;
  /** Manual write_lat: wait on the placed byte alone (options.ts --spin-on-data). */
  spinOnData?: boolean;
  timeoutMs: number;
  /** -I: writes and sends of at most this many bytes go inline (0: none). */
  inline?: number;
  /** -r: receives kept posted (send tests). */
  rxDepth?: number;
  /** -Q: every K-th request signaled in manual mode. */
  cqModeration?: number;
  /** -l: requests per qp.batch() post (write_bw/read_bw, manual completion); 1: qp.post() each. */
  postList?: number;
}

/**
 * How far the running phase is (for ndbench's progress line): `done` of `total` timed iterations (total 0: a
 * timed -D run, whose progress is the clock's). The loops update it; `ticker` is called now and then from the
 * loops themselves, so that a progress line moves even while the JS thread spins (--completion manual).
 */
export const meter = { done: 0, total: 0 };
let ticker: (() => void) | undefined;
export function setTicker(f: (() => void) | undefined): void {
  ticker = f;
}

/** Latency samples (ns, measurement order) and their divisor, kept for -H/-U beside the stats they made. */
const kept = new WeakMap<Stats, { ns: number[]; divisor: number }>();
function latencyResult(size: number, samples: number[], divisor: number): Stats {
  const s = latencyStats(size, samples, divisor);
  kept.set(s, { ns: samples, divisor });
  return s;
}
/** Every sample of a latency phase in µs, in measurement order (half round trips where the stats halve). */
export function samplesOf(s: Stats): number[] | undefined {
  const k = kept.get(s);
  return k?.ns.map((v) => v / k.divisor / 1000);
}

/**
 * Promises of in-flight requests (promise API), oldest first; a rejection surfaces when awaited. No handler is added
 * and shift() is not async: a request's promise that fails is marked handled by lib/ (requests.ts settleFailed), so
 * the loops pay for the request's own promise and the caller's await, as a program of the user's would, and no
 * promise of the harness's besides.
 */
class Window {
  private items: Array<Promise<unknown>> = [];
  private head = 0;
  get size(): number {
    return this.items.length - this.head;
  }
  push(p: Promise<unknown>): void {
    this.items.push(p);
  }
  shift(): Promise<unknown> {
    const p = this.items[this.head++];
    if (this.head > 4096) {
      this.items = this.items.slice(this.head);
      this.head = 0;
    }
    return p;
  }
  async drain(): Promise<void> {
    while (this.size > 0) await this.shift();
  }
}

export interface NdSide {
  adapter: Adapter;
  cq: CompletionQueue;
  qps: QueuePair[];
  connectors: Connector[];
  remotes: RemoteMemory[];
  mr: MemoryRegion;
  listener?: Listener;
  cfg: NdConfig;
  manual: boolean;
  /** How long to watch memory before yielding to the event loop (spinFor). */
  spinNs: bigint;
  sendOff: number;
  ctrlOff: number;
  initiatorDepth: number;
  receiveDepth: number;
  /** Requests in flight per QP in the *_bw tests. */
  window: number;
  /** Every K-th request is signaled (manual mode); the rest are silent. */
  moderation: number;
  /** Receives kept posted on QP 0 (send tests). */
  receives: number;
  postedReceives: number;
  receiveWindow: Window;
  /** The receives' memory (send tests), sliced once: a program reposting its receives keeps one slice. */
  receiveLocal?: ReturnType<MemoryRegion['slice']>;
  rssPerQp?: number;
  /** -I: the QPs' inline data size; requests of at most this many bytes are posted inline. */
  inline: number;
}

/** Request options for a message of `size` bytes: inline when -I allows it. */
function inl(side: NdSide, size: number): boolean | undefined {
  return side.inline > 0 && size <= side.inline ? true : undefined;
}

const immediate = () => new Promise<void>((r) => setImmediate(r));

/**
 * Thread mode: how long the JS thread watches memory synchronously before it lets the event loop turn (the
 * provider's own thread places a peer's Write meanwhile). Loop mode: 0 — the provider progresses when the event
 * loop turns, so the JS thread looks once per turn.
 */
export const SPIN_BEFORE_YIELD_NS = BigInt(Number(process.env.NDBENCH_SPIN_NS ?? 20_000));

/** Spins on `b[i] !== v` for at most `ns`; true once b[i] === v (or stop is set). */
function spinFor(b: Uint8Array, i: number, v: number, stop: number, ns: bigint): boolean {
  if (ns === 0n) return b[i] === v || (stop >= 0 && b[stop] !== 0);
  const until = process.hrtime.bigint() + ns;
  for (let k = 0; ; k++) {
    if (b[i] === v || (stop >= 0 && b[stop] !== 0)) return true;
    if ((k & 63) === 63 && process.hrtime.bigint() >= until) return false;
  }
}
const now = () => process.hrtime.bigint();

class Stall {
  private spins = 0;
  private ticks = 0;
  private since = Date.now();
  // Progress since the clock was last read: progress() runs per message and reads no clock (a clock read per
  // completion was 2% of the write_bw 4 KiB client's time); check() reads it every 4096 spins and restarts the
  // stall clock there when something moved.
  private moved = false;
  constructor(private readonly ms: number, private readonly what: string) {}
  progress(): void {
    this.spins = 0;
    if ((++this.ticks & 255) === 0) ticker?.();
    this.moved = true;
  }
  check(): void {
    if ((++this.spins & 0xfff) !== 0) return;
    ticker?.();
    const now = Date.now();
    if (this.moved) {
      this.moved = false;
      this.since = now;
    } else if (now - this.since > this.ms) {
      throw new Error(`${this.what}: no progress for ${this.ms / 1000} s (is the peer alive?)`);
    }
  }
}

function checked(cs: RawCompletion[]): RawCompletion[] {
  for (const c of cs) {
    if (c.status !== 0) throw new Error(`${c.type} completed with ${nd().ndStatusName(c.status)} (0x${(c.status >>> 0).toString(16)})`);
  }
  return cs;
}

/** Opens the adapter, a CQ and the region. QPs come with listenSide()/connectSide(). */
export async function openSide(cfg: NdConfig, localAddress: string): Promise<NdSide> {
  const adapter = await nd().openAdapter(localAddress, { provider: cfg.provider, completion: cfg.completion, spinMicros: cfg.spinMicros });
  try {
    const info = adapter.info;
    if (cfg.maxSize > info.maxTransferLength) {
      throw new Error(
        `messages of ${cfg.maxSize} bytes exceed the adapter's maxTransferLength of ${formatBytes(info.maxTransferLength)} ` +
          `(${info.maxTransferLength} bytes), the largest one request moves: use -s ${info.maxTransferLength} or less`,
      );
    }
    const inline = cfg.inline ?? 0;
    if (inline > info.maxInlineDataSize) {
      throw new Error(`-I ${inline}: the adapter's maxInlineDataSize is ${info.maxInlineDataSize} bytes: use -I ${info.maxInlineDataSize} or less`);
    }
    const many = cfg.qps > 1;
    const initiatorDepth = Math.max(2, Math.min(info.maxInitiatorQueueDepth, many ? Math.max(4, Math.min(cfg.txDepth + 4, Math.floor(16384 / cfg.qps))) : cfg.txDepth + 4));
    const receiveDepth = Math.max(1, Math.min(info.maxReceiveQueueDepth, many ? 2 : Math.max(512, cfg.rxDepth ?? 0)));
    const cqDepth = Math.max(16, Math.min(info.maxCompletionQueueDepth, cfg.qps * (initiatorDepth + receiveDepth) + 64));
    const cq = adapter.createCompletionQueue({ depth: cqDepth });
    const sendOff = cfg.maxSize;
    const ctrlOff = Math.ceil((2 * cfg.maxSize) / 64) * 64;
    const mr = await adapter.allocateMemory(ctrlOff + CTRL_BYTES, { remoteWrite: true, remoteRead: true });
    const window = Math.max(1, Math.min(cfg.txDepth, initiatorDepth - 2));
    return {
      adapter,
      cq,
      qps: [],
      connectors: [],
      remotes: [],
      mr,
      cfg,
      manual: cfg.completion === 'manual',
      spinNs: adapter.completion === 'loop' ? 0n : SPIN_BEFORE_YIELD_NS,
      sendOff,
      ctrlOff,
      initiatorDepth,
      receiveDepth,
      window,
      moderation: cfg.cqModeration ?? Math.max(1, Math.min(16, window >> 1)),
      receives: Math.min(receiveDepth, cfg.rxDepth ?? 256),
      postedReceives: 0,
      receiveWindow: new Window(),
      inline,
    };
  } catch (err) {
    await adapter.close();
    throw err;
  }
}

function createQp(side: NdSide): QueuePair {
  const qp = side.adapter.createQueuePair({
    receiveCq: side.cq,
    initiatorDepth: side.initiatorDepth,
    receiveDepth: side.receiveDepth,
    maxInitiatorSge: 1,
    maxReceiveSge: 1,
    ...(side.inline > 0 ? { inlineDataSize: side.inline } : {}),
  });
  side.qps.push(qp);
  return qp;
}

function rss(): number {
  return process.memoryUsage.rss();
}

/** Server: listens for the client's QPs on an ephemeral port; acceptAll() takes `cfg.qps` of them. */
export async function listenSide(side: NdSide, host: string): Promise<number> {
  side.listener = await side.adapter.listen({ host, port: 0 });
  return side.listener.address.port;
}

export async function acceptAll(side: NdSide): Promise<void> {
  const { encodeRemote, decodeRemote } = nd();
  const mine = encodeRemote(side.mr.remote());
  for (let i = 0; i < side.cfg.qps; i++) {
    const c = await side.listener!.getConnectionRequest();
    const qp = createQp(side);
    side.remotes.push(decodeRemote(c.privateData));
    await c.accept(qp, { privateData: mine });
    side.connectors.push(c);
  }
  await side.listener!.close();
  side.listener = undefined;
}

/** Client: connects `cfg.qps` QPs; measures the RSS growth per (idle, connected) QP when there are many. */
export async function connectSide(side: NdSide, host: string, port: number): Promise<void> {
  const { encodeRemote, decodeRemote } = nd();
  const mine = encodeRemote(side.mr.remote());
  const before = rss();
  for (let i = 0; i < side.cfg.qps; i++) {
    const qp = createQp(side);
    const c = await side.adapter.connect(qp, { host, port }, { privateData: mine });
    side.remotes.push(decodeRemote(c.privateData));
    side.connectors.push(c);
  }
  if (side.cfg.qps > 1) side.rssPerQp = (rss() - before) / side.cfg.qps;
}

export async function closeSide(side: NdSide): Promise<void> {
  await side.adapter.close();
}

// ---- receives kept posted on QP 0 (send tests) ------------------------------------------------------------

const RECEIVE_POST = { context: -1 } as const;

function topUpReceives(side: NdSide): void {
  const qp = side.qps[0];
  const local = (side.receiveLocal ??= side.mr.slice(0, side.cfg.maxSize));
  while (side.postedReceives < side.receives) {
    if (side.manual) qp.post('receive', local, undefined, RECEIVE_POST);
    else side.receiveWindow.push(qp.receive(local));
    side.postedReceives++;
  }
}

/** Manual mode: one receive completed (counted by the caller's poll loop). */
function receiveTaken(side: NdSide): void {
  side.postedReceives--;
}

// ---- phases -----------------------------------------------------------------------------------------------

export interface PhaseArgs {
  size: number;
  iters: number;
  warmup: number;
  durationMs: number;
}

/** Both sides, before 'ready': forget what the previous phase left in the watched bytes. */
export function preparePhase(side: NdSide, test: TestName, size: number): { receives: number } {
  const b = side.mr.buffer;
  b[size - 1] = 0;
  b[side.sendOff + size - 1] = 0;
  b.fill(0, side.ctrlOff, side.ctrlOff + CTRL_BYTES);
  if (test === 'send_lat' || test === 'send_bw') topUpReceives(side);
  return { receives: side.postedReceives };
}

function nextTag(t: number): number {
  return t === 255 ? 1 : t + 1;
}

/** The client's timed part of one phase. `peerReceives`: receives the server has posted (send_bw credits). */
export async function clientPhase(side: NdSide, test: TestName, a: PhaseArgs, peerReceives: number): Promise<Stats> {
  switch (test) {
    case 'write_lat':
      return writeLatClient(side, a);
    case 'send_lat':
      return sendLatClient(side, a);
    case 'read_lat':
      return readLatClient(side, a);
    case 'write_bw':
    case 'read_bw':
      // Warm-up: the same loop, every request completed before the timed one starts.
      if (a.warmup > 0) await bwClient(side, test, { ...a, iters: a.warmup, durationMs: 0, warmup: 0 }, false);
      return bwClient(side, test, a);
    case 'send_bw':
      return sendBwClient(side, a, peerReceives);
    default:
      throw new Error(`${test} has no RDMA phase`);
  }
}

/** The server's part of an active phase (write_lat, send_lat, send_bw): runs until the client's stop. */
export async function serverPhase(side: NdSide, test: TestName, size: number): Promise<void> {
  if (test === 'write_lat') return writeLatServer(side, size);
  if (test === 'send_lat') return sendLatServer(side, size);
  if (test === 'send_bw') return sendBwServer(side);
}

/**
 * Manual mode, the server of read_lat (a passive phase: the client's Reads are answered with no request of the
 * server's): the JS thread polls its CQ until `end` settles, as a manual-mode program does, so the provider answers
 * each Read inline on that spinning thread instead of on an engine thread that sleeps and is woken per Read (and was
 * woken on the client's core, beside the client's spinning thread). `read_lat -s 8 --completion manual`: 35.8 → 17.4
 * µs at load 9, 22.5 → 12.3 µs at load 15. Every 1024 polls the event loop turns once, so the control channel's
 * message arrives.
 *
 * Not for write_bw/read_bw: with the server spinning too, batched 8 B Writes went 1.23 → 1.34 Mpps on a quiet machine
 * and 0.86 → 1.47 at load 4-9, but 0.68 → 0.18 at load 11-15 (medians of 8 interleaved pairs): a stream needs the
 * server's CPU all along, and two spinners among other runnable threads stall each other whenever either is
 * preempted, while a sleeping engine thread runs as soon as it is woken.
 */
export function pollsPassive(side: NdSide, test: TestName): boolean {
  return side.manual && test === 'read_lat';
}

export async function passiveServer(side: NdSide, end: Promise<unknown>): Promise<void> {
  let over = false;
  end.then(
    () => (over = true),
    () => (over = true),
  );
  const cq = side.cq;
  while (!over) {
    for (let i = 0; i < 1024; i++) {
      const cs = cq.poll(256);
      if (cs.length !== 0) for (const c of checked(cs)) if (c.type === 'receive') receiveTaken(side);
    }
    await immediate();
  }
}

// ---- --compare native: the same phase driven by a C++ loop (binding/bench/bench_nd.cc) ------------------------------

type NativeBench = Required<Pick<NativeBenchBinding, 'ndBenchRun'>>;

function nativeBench(): NativeBench {
  const b = loadBenchBinding();
  if (typeof b?.ndBenchRun !== 'function') {
    throw new Error('--compare native: this build of the netdirect addon has no ndBenchRun (binding/bench/bench_nd.cc); rebuild with `npm run build:native`');
  }
  return b as NativeBench;
}

/** What the C++ loop needs: the first QP's native objects and the offsets of this file's layout. */
function nativeParams(
  side: NdSide,
  role: 'client' | 'server',
  test: TestName,
  size: number,
  timeoutMs: number,
): Omit<NativeNdBenchParams, 'iters' | 'warmup' | 'durationMs'> {
  const remote = side.remotes[0];
  return {
    role,
    test,
    qp: side.qps[0]._native,
    cq: side.cq._native,
    region: side.mr._native,
    size,
    sendOffset: side.sendOff,
    stop: side.ctrlOff + STOP,
    stopSource: side.ctrlOff + STOP_SRC,
    drainSource: side.ctrlOff + CREDIT_SRC,
    remoteAddress: remote.address,
    remoteToken: remote.token,
    moderation: side.moderation,
    inline: inl(side, size) === true,
    timeoutMs,
  };
}

/**
 * The client's native phase (write_lat, read_lat, write_bw; manual mode): the same statistics as the JS loop's.
 * write_bw keeps the JS loop's window and signals every K-th Write as it does (bwClient); with -l it posts in groups
 * of that many as the JS loop's batches, each bracketed for the provider (INDPostBatch) and its last signaled.
 */
export function nativeClientPhase(side: NdSide, test: TestName, a: PhaseArgs): Stats {
  const W = side.window;
  const r = nativeBench().ndBenchRun({
    ...nativeParams(side, 'client', test, a.size, side.cfg.timeoutMs),
    iters: a.durationMs > 0 ? 0 : a.iters,
    warmup: a.warmup,
    durationMs: a.durationMs,
    ...(test === 'write_bw'
      ? { window: W, moderation: Math.max(1, Math.min(side.moderation, W >> 1 || 1)), postList: side.cfg.postList ?? 1 }
      : {}),
    ...(test === 'send_lat' ? { receives: side.postedReceives } : {}),
  });
  if (test === 'send_lat') takeHandedBack(side);
  if (test === 'write_bw') return bandwidthStats(a.size, r!.messages as number, r!.elapsedNs as number);
  return latencyResult(a.size, Array.from(r!.samples), test === 'read_lat' ? 1 : 2);
}

/** The server's native phase: write_lat answers until the client's stop; read_lat's and write_bw's server is passive. */
export function nativeServerPhase(side: NdSide, test: TestName, size: number): void {
  if (test !== 'write_lat' && test !== 'send_lat') return;
  nativeBench().ndBenchRun({
    ...nativeParams(side, 'server', test, size, side.cfg.timeoutMs * 4),
    iters: 0,
    warmup: 0,
    durationMs: 0,
    ...(test === 'send_lat' ? { receives: side.postedReceives } : {}),
  });
  if (test === 'send_lat') takeHandedBack(side);
}

/**
 * send_lat after the native loop: the results of lib/'s receives it used were handed back for the CQ's next poll();
 * they are counted here, before the next phase's loop could take one for its own message.
 */
function takeHandedBack(side: NdSide): void {
  for (;;) {
    const cs = checked(side.cq.poll(256));
    if (cs.length === 0) return;
    for (const c of cs) if (c.type === 'receive') receiveTaken(side);
  }
}

export function serverIsActive(test: TestName): boolean {
  return test === 'write_lat' || test === 'send_lat' || test === 'send_bw';
}

interface Loop {
  timed: boolean;
  end: bigint;
  total: number;
}
function loopOf(a: PhaseArgs): Loop {
  return { timed: a.durationMs > 0, end: now() + BigInt(Math.round(a.durationMs * 1e6)), total: a.iters };
}

function startMeter(L: Loop, qps = 1): void {
  meter.done = 0;
  meter.total = L.timed ? 0 : L.total * qps;
}

/** Writes the stop byte into the peer's ctrl area and waits for that write (and every silent one before it). */
async function sendStop(side: NdSide): Promise<void> {
  const b = side.mr.buffer;
  b[side.ctrlOff + STOP_SRC] = 1;
  const local = side.mr.slice(side.ctrlOff + STOP_SRC, 1);
  const qp = side.qps[0];
  if (!side.manual) {
    await qp.write(local, side.remotes[0], { offset: side.ctrlOff + STOP });
    return;
  }
  qp.post('write', local, side.remotes[0], { offset: side.ctrlOff + STOP, context: 'stop' });
  const stall = new Stall(side.cfg.timeoutMs, 'stop write');
  for (;;) {
    for (const c of checked(side.cq.poll(256))) if (c.context === 'stop') return;
    stall.check();
  }
}

async function writeLatClient(side: NdSide, a: PhaseArgs): Promise<Stats> {
  const { size } = a;
  const b = side.mr.buffer;
  const last = size - 1;
  const sendLast = side.sendOff + last;
  const local = side.mr.slice(side.sendOff, size);
  const remote = side.remotes[0];
  const qp = side.qps[0];
  const cq = side.cq;
  const K = side.moderation;
  const L = loopOf(a);
  const samples: number[] = [];
  const stall = new Stall(side.cfg.timeoutMs, 'write_lat');
  const inline = inl(side, size);
  const wopts = inline ? { inline } : undefined;
  startMeter(L);
  let t = 0;
  let unsignaled = 0;
  for (let i = -a.warmup; L.timed || i < L.total; i++) {
    t = nextTag(t);
    b[sendLast] = t;
    if (side.manual) {
      const t0 = now();
      const signaled = ++unsignaled >= K;
      if (signaled) unsignaled = 0;
      qp.post('write', local, remote, { silent: !signaled, inline });
      if (side.cfg.spinOnData) {
        while (b[last] !== t) stall.check();
      } else {
        while (b[last] !== t) {
          checked(cq.poll());
          stall.check();
        }
      }
      const t1 = now();
      // Half a batch after the signaled Write: its completion is there, so this poll finds it and runs no progress.
      if (side.cfg.spinOnData && unsignaled === K >> 1) checked(cq.poll());
      if (i >= 0) samples.push(Number(t1 - t0));
      meter.done = i + 1;
      if (L.timed && i >= 0 && t1 >= L.end) break;
    } else {
      const t0 = now();
      const p = qp.write(local, remote, wopts);
      p.catch(() => undefined);
      while (!spinFor(b, last, t, -1, side.spinNs)) {
        await immediate();
        stall.check();
      }
      const t1 = now();
      await p;
      if (i >= 0) samples.push(Number(t1 - t0));
      meter.done = i + 1;
      if (L.timed && i >= 0 && t1 >= L.end) break;
    }
    stall.progress();
  }
  await sendStop(side);
  return latencyResult(size, samples, 2);
}

async function writeLatServer(side: NdSide, size: number): Promise<void> {
  const b = side.mr.buffer;
  const last = size - 1;
  const sendLast = side.sendOff + last;
  const stop = side.ctrlOff + STOP;
  const local = side.mr.slice(side.sendOff, size);
  const remote = side.remotes[0];
  const qp = side.qps[0];
  const cq = side.cq;
  const K = side.moderation;
  const inflight = new Window();
  const stall = new Stall(side.cfg.timeoutMs * 4, 'write_lat server');
  const inline = inl(side, size);
  const wopts = inline ? { inline } : undefined;
  let t = 1;
  let unsignaled = 0;
  for (;;) {
    if (side.manual) {
      while (b[last] !== t) {
        if (b[stop] !== 0) return drainManual(side);
        if (!side.cfg.spinOnData) checked(cq.poll());
        stall.check();
      }
      b[sendLast] = t;
      const signaled = ++unsignaled >= K;
      if (signaled) unsignaled = 0;
      // Half a batch after the signaled Write: its completion is there, so this poll finds it and runs no progress.
      if (side.cfg.spinOnData && unsignaled === K >> 1) checked(cq.poll());
      qp.post('write', local, remote, { silent: !signaled, inline });
    } else {
      while (b[last] !== t) {
        if (spinFor(b, last, t, stop, side.spinNs) && b[last] === t) break;
        if (b[stop] !== 0) return inflight.drain();
        await immediate();
        stall.check();
      }
      b[sendLast] = t;
      inflight.push(qp.write(local, remote, wopts));
      if (inflight.size >= side.window) await inflight.shift();
    }
    stall.progress();
    t = nextTag(t);
  }
}

/** Manual mode, end of a phase: a signaled no-op-sized write would be overkill; polling until idle suffices. */
async function drainManual(side: NdSide): Promise<void> {
  // Silent writes retire with the next signaled completion of their QP; post one zero-byte write so that
  // none stays counted against the queue depth in the next phase.
  const qp = side.qps[0];
  qp.post('write', null, side.remotes[0], { offset: side.ctrlOff + CREDIT_SRC, context: 'drain' });
  const stall = new Stall(side.cfg.timeoutMs, 'drain');
  for (;;) {
    for (const c of checked(side.cq.poll(256))) {
      if (c.type === 'receive') receiveTaken(side);
      if (c.context === 'drain') return;
    }
    stall.check();
  }
}

async function readLatClient(side: NdSide, a: PhaseArgs): Promise<Stats> {
  const { size } = a;
  const local = side.mr.slice(0, size);
  const remote = side.remotes[0];
  const qp = side.qps[0];
  const cq = side.cq;
  const L = loopOf(a);
  const samples: number[] = [];
  const stall = new Stall(side.cfg.timeoutMs, 'read_lat');
  startMeter(L);
  const opts = { offset: side.sendOff };
  for (let i = -a.warmup; L.timed || i < L.total; i++) {
    const t0 = now();
    if (side.manual) {
      qp.post('read', local, remote, { offset: side.sendOff });
      for (let got = 0; got === 0; ) {
        got = checked(cq.poll()).length;
        stall.check();
      }
    } else {
      await qp.read(local, remote, opts);
    }
    const t1 = now();
    stall.progress();
    if (i >= 0) samples.push(Number(t1 - t0));
    meter.done = i + 1;
    if (L.timed && i >= 0 && t1 >= L.end) break;
  }
  return latencyResult(size, samples, 1);
}

async function sendLatClient(side: NdSide, a: PhaseArgs): Promise<Stats> {
  const { size } = a;
  const local = side.mr.slice(side.sendOff, size);
  const qp = side.qps[0];
  const cq = side.cq;
  const K = side.moderation;
  const L = loopOf(a);
  const samples: number[] = [];
  const stall = new Stall(side.cfg.timeoutMs, 'send_lat');
  const inline = inl(side, size);
  const sopts = inline ? { inline } : undefined;
  startMeter(L);
  let unsignaled = 0;
  for (let i = -a.warmup; L.timed || i < L.total; i++) {
    const t0 = now();
    if (side.manual) {
      const signaled = ++unsignaled >= K;
      if (signaled) unsignaled = 0;
      qp.post('send', local, undefined, { silent: !signaled, inline });
      for (let got = false; !got; ) {
        for (const c of checked(cq.poll())) {
          if (c.type === 'receive') {
            got = true;
            receiveTaken(side);
          }
        }
        stall.check();
      }
      topUpReceives(side);
    } else {
      const p = qp.send(local, sopts);
      await side.receiveWindow.shift();
      side.postedReceives--;
      await p;
      topUpReceives(side);
    }
    const t1 = now();
    stall.progress();
    if (i >= 0) samples.push(Number(t1 - t0));
    meter.done = i + 1;
    if (L.timed && i >= 0 && t1 >= L.end) break;
  }
  await sendZero(side);
  return latencyResult(size, samples, 2);
}

/** The zero-byte Send that ends a send test, waited for (with every silent request before it). */
async function sendZero(side: NdSide): Promise<void> {
  const qp = side.qps[0];
  if (!side.manual) {
    await qp.send(null);
    return;
  }
  qp.post('send', null, undefined, { context: 'stop' });
  const stall = new Stall(side.cfg.timeoutMs, 'stop send');
  for (;;) {
    for (const c of checked(side.cq.poll(256))) {
      if (c.type === 'receive') receiveTaken(side);
      if (c.context === 'stop') return;
    }
    stall.check();
  }
}

async function sendLatServer(side: NdSide, size: number): Promise<void> {
  const local = side.mr.slice(side.sendOff, size);
  const qp = side.qps[0];
  const cq = side.cq;
  const K = side.moderation;
  const stall = new Stall(side.cfg.timeoutMs * 4, 'send_lat server');
  const inflight = new Window();
  const inline = inl(side, size);
  const sopts = inline ? { inline } : undefined;
  let unsignaled = 0;
  for (;;) {
    if (side.manual) {
      let stopped = false;
      let got = 0;
      for (const c of checked(cq.poll())) {
        if (c.type !== 'receive') continue;
        receiveTaken(side);
        if (c.bytes === 0) stopped = true;
        else got++;
      }
      for (; got > 0; got--) {
        const signaled = ++unsignaled >= K;
        if (signaled) unsignaled = 0;
        qp.post('send', local, undefined, { silent: !signaled, inline });
        stall.progress();
      }
      topUpReceives(side);
      if (stopped) return drainManual(side);
      stall.check();
    } else {
      const c = (await side.receiveWindow.shift()) as { bytes: number };
      side.postedReceives--;
      topUpReceives(side);
      if (c.bytes === 0) return inflight.drain();
      inflight.push(qp.send(local, sopts));
      if (inflight.size >= side.window) await inflight.shift();
    }
  }
}

/** send_bw receiver: reposts each receive and returns credits (receives reposted) by RDMA Write. */
async function sendBwServer(side: NdSide): Promise<void> {
  const qp = side.qps[0];
  const cq = side.cq;
  const dv = new DataView(side.mr.buffer.buffer, side.mr.buffer.byteOffset, side.mr.buffer.byteLength);
  const creditLocal = side.mr.slice(side.ctrlOff + CREDIT_SRC, 4);
  const creditAt = { offset: side.ctrlOff + CREDIT };
  const every = Math.max(1, side.receives >> 2);
  const stall = new Stall(side.cfg.timeoutMs * 4, 'send_bw server');
  const inflight = new Window();
  let reposted = 0;
  let reported = 0;
  const report = () => {
    dv.setUint32(side.ctrlOff + CREDIT_SRC, reposted, true);
    if (side.manual) qp.post('write', creditLocal, side.remotes[0], { ...creditAt, silent: true });
    else inflight.push(qp.write(creditLocal, side.remotes[0], creditAt));
    reported = reposted;
  };
  for (;;) {
    let stopped = false;
    if (side.manual) {
      for (const c of checked(cq.poll(256))) {
        if (c.type !== 'receive') continue;
        receiveTaken(side);
        if (c.bytes === 0) stopped = true;
        reposted++;
        stall.progress();
      }
      topUpReceives(side);
      stall.check();
    } else {
      const c = (await side.receiveWindow.shift()) as { bytes: number };
      side.postedReceives--;
      topUpReceives(side);
      if (c.bytes === 0) stopped = true;
      reposted++;
      if (inflight.size >= side.window) await inflight.shift();
    }
    if (stopped) return side.manual ? drainManual(side) : inflight.drain();
    if (reposted - reported >= every) report();
  }
}

async function sendBwClient(side: NdSide, a: PhaseArgs, peerReceives: number): Promise<Stats> {
  const { size } = a;
  const local = side.mr.slice(side.sendOff, size);
  const qp = side.qps[0];
  const cq = side.cq;
  const dv = new DataView(side.mr.buffer.buffer, side.mr.buffer.byteOffset, side.mr.buffer.byteLength);
  const credit = () => {
    // Read until stable: the provider may be placing the 4 bytes while we read.
    for (;;) {
      const x = dv.getUint32(side.ctrlOff + CREDIT, true);
      if (dv.getUint32(side.ctrlOff + CREDIT, true) === x) return x;
    }
  };
  const W = side.window;
  const K = side.moderation;
  const L = loopOf(a);
  const marks: Array<[number, number]> = [];
  const stall = new Stall(side.cfg.timeoutMs, 'send_bw');
  const inflight = new Window();
  const inline = inl(side, size);
  const sopts = inline ? { inline } : undefined;
  startMeter(L);
  let total = L.timed ? Infinity : L.total;
  let posted = 0;
  let done = 0;
  let unsignaled = 0;
  const t0 = now();
  while (done < total) {
    while (posted < total && posted - done < W && posted < peerReceives + credit()) {
      let last = posted + 1 === total;
      if (L.timed && !last && (posted & 15) === 15 && now() >= L.end) last = true;
      if (last) total = posted + 1;
      if (side.manual) {
        const count = ++unsignaled;
        const signaled = count >= K || last;
        qp.post('send', local, undefined, { silent: !signaled, context: count, inline });
        if (signaled) unsignaled = 0;
      } else {
        inflight.push(qp.send(local, sopts));
      }
      posted++;
    }
    if (side.manual) {
      const cs = checked(cq.poll(256));
      for (const c of cs) if (c.type === 'send') done += c.context as number;
      meter.done = done;
      if (cs.length) {
        marks.push([Number(now() - t0), done]);
        stall.progress();
      }
    } else if (inflight.size > 0 && (inflight.size >= W || posted >= total || posted >= peerReceives + credit())) {
      await inflight.shift();
      meter.done = ++done;
      if ((done & 15) === 0) marks.push([Number(now() - t0), done]);
      stall.progress();
    } else {
      await immediate();
    }
    stall.check();
  }
  const elapsed = Number(now() - t0);
  await sendZero(side);
  return bandwidthStats(size, done, elapsed, peakFromMarks(size, marks, W));
}

/** `metered`: false for the warm-up, which the progress line does not count. */
async function bwClient(side: NdSide, test: 'write_bw' | 'read_bw', a: PhaseArgs, metered = true): Promise<Stats> {
  const { size } = a;
  const read = test === 'read_bw';
  const op = read ? 'read' : 'write';
  const local = read ? side.mr.slice(0, size) : side.mr.slice(side.sendOff, size);
  const offset = read ? side.sendOff : 0;
  const n = side.qps.length;
  let W = side.window;
  if (read) for (const c of side.connectors) W = Math.max(1, Math.min(W, c.readLimits.outbound || W));
  const K = Math.max(1, Math.min(side.moderation, W >> 1 || 1));
  const L = loopOf(a);
  const perQp = L.timed ? Infinity : L.total;
  const posted = new Array<number>(n).fill(0);
  const done = new Array<number>(n).fill(0);
  const unsignaled = new Array<number>(n).fill(0);
  const windows = side.manual ? [] : side.qps.map(() => new Window());
  // perftest -l: the free slots of the window are posted in runs of up to postList, one native call each, every
  // K-th signalled: prepared.postMany() of one prepared request per QP (validated once per run), completions taken
  // as numbers. Request i of a run has context q * 65536 + i + 1: a signalled one completes (i % K) + 1 requests.
  const postList = side.manual ? side.cfg.postList ?? 1 : 1;
  const batched = postList > 1;
  const runs = batched ? side.qps.map((_, q) => ({ signalEvery: K, context: q * 65536 + 1 })) : null;
  // A mark per W / 4 messages or more (peaks are taken over windows of W): the loop's own allocations stay out of
  // the heap column.
  const marks = new Marks(Math.max(1, (W * n) >> 2));
  const stall = new Stall(side.cfg.timeoutMs, test);
  const inline = read ? undefined : inl(side, size);
  const wopts = { offset, inline };
  const prepared = batched ? side.qps.map((qp, q) => qp.prepare(op, local, side.remotes[q], read ? { offset } : { offset, inline })) : null;
  const arrays = batched ? new (nd().CompletionArrays)(256) : null;
  const heap = new HeapMeter();
  if (metered) startMeter(L, n);
  const meterOn = metered ? 1 : 0;
  const qps = side.qps;
  const remotes = side.remotes;
  let limit = perQp;
  let doneAll = 0;
  let finishing = false;
  const t0 = now();
  for (;;) {
    let busy = false;
    for (let q = 0; q < n; q++) {
      if (prepared !== null) {
        const p = prepared[q];
        const run = (runs as Array<{ signalEvery: number; context: number }>)[q];
        while (posted[q] < limit && posted[q] - done[q] < W) {
          busy = true;
          const count = Math.min(postList, limit - posted[q], W - (posted[q] - done[q]));
          p.postMany(count, run);
          posted[q] += count;
        }
        continue;
      }
      while (posted[q] < limit && posted[q] - done[q] < W) {
        busy = true;
        if (side.manual) {
          const last = posted[q] + 1 === limit;
          const count = ++unsignaled[q];
          const signaled = count >= K || last;
          if (signaled) unsignaled[q] = 0;
          qps[q].post(op, local, remotes[q], { offset, silent: !signaled, context: q * 64 + count, inline });
        } else {
          windows[q].push(read ? qps[q].read(local, remotes[q], { offset }) : qps[q].write(local, remotes[q], wopts));
        }
        posted[q]++;
      }
    }
    if (L.timed && !finishing && now() >= L.end) {
      // Stop posting; every QP finishes what it posted. Manual mode: a last signaled request settles silent ones.
      finishing = true;
      limit = 0;
      for (let q = 0; q < n; q++) {
        if (side.manual && unsignaled[q] > 0) {
          qps[q].post(op, local, remotes[q], { offset, context: q * 64 + unsignaled[q] + 1 });
          posted[q]++;
          unsignaled[q] = 0;
        }
      }
    }
    if (arrays !== null) {
      const got = side.cq.pollInto(arrays);
      for (let i = 0; i < got; i++) {
        if (arrays.status[i] !== 0) throw new Error(`${op} completed with ${nd().ndStatusName(arrays.status[i])} (0x${arrays.status[i].toString(16)})`);
        const ctx = arrays.context[i];
        const k = (((ctx & 0xffff) - 1) % K) + 1;
        done[ctx >>> 16] += k;
        doneAll += k;
      }
      if (got > 0) {
        marks.push(doneAll);
        if (meterOn) meter.done = doneAll;
        stall.progress();
        heap.sample(doneAll);
      }
    } else if (side.manual) {
      const cs = checked(side.cq.poll(256));
      for (const c of cs) {
        const ctx = c.context as number;
        const k = ctx & 63;
        done[ctx >> 6] += k;
        doneAll += k;
      }
      if (cs.length) {
        marks.push(doneAll);
        if (meterOn) meter.done = doneAll;
        stall.progress();
        heap.sample(doneAll);
      }
    } else {
      let progressed = false;
      for (let q = 0; q < n; q++) {
        if (windows[q].size > 0 && (windows[q].size >= W || posted[q] >= limit || finishing)) {
          await windows[q].shift();
          done[q]++;
          doneAll++;
          progressed = true;
        }
      }
      if (progressed) {
        if (meterOn) meter.done = doneAll;
        if ((doneAll & 15) === 0) marks.push(doneAll);
        stall.progress();
        heap.sample(doneAll);
      } else if (!busy) {
        await immediate();
      }
    }
    let all = true;
    for (let q = 0; q < n; q++) if (done[q] < posted[q] || (!finishing && posted[q] < limit)) all = false;
    if (all) break;
    stall.check();
  }
  const elapsed = Number(now() - t0);
  // Aggregate over QPs: messages of `size` bytes moved in total.
  const stats = bandwidthStats(size, doneAll, elapsed, peakFromMarks(size, marks.list(), W * n));
  const perOp = heap.perOp();
  if (perOp !== undefined) stats.heap_bytes_per_op = perOp;
  return stats;
}

// ---- registerMemory latency (local, no peer) --------------------------------------------------------------

export async function regMrLatency(cfg: NdConfig, localAddress: string, a: PhaseArgs): Promise<Stats> {
  const adapter = await nd().openAdapter(localAddress, { provider: cfg.provider, completion: cfg.completion, spinMicros: cfg.spinMicros });
  try {
    const samples: number[] = [];
    const L = loopOf(a);
    startMeter(L);
    for (let i = -a.warmup; L.timed || i < L.total; i++) {
      const buf = new Uint8Array(a.size);
      const t0 = now();
      const mr = await adapter.registerMemory(buf, { remoteWrite: true, remoteRead: true });
      const t1 = now();
      await mr.deregister();
      if (i >= 0) samples.push(Number(t1 - t0));
      meter.done = i + 1;
      if ((i & 255) === 0) ticker?.();
      if (L.timed && i >= 0 && t1 >= L.end) break;
    }
    return latencyResult(a.size, samples, 1);
  } finally {
    await adapter.close();
  }
}


// ---- -b: bidirectional bandwidth ----------------------------------------------------------------------------

/**
 * Both sides run this at once (perftest -b): each posts its own stream to the other and measures it; the report
 * adds the two directions. send_bw also receives the peer's stream (receives reposted, credits returned), which
 * needs the promise API: with --completion manual two loops would take each other's completions from the one CQ.
 */
export async function bidirectionalPhase(side: NdSide, test: TestName, a: PhaseArgs, peerReceives: number): Promise<Stats> {
  if (test === 'write_bw' || test === 'read_bw') return clientPhase(side, test, a, peerReceives);
  if (test !== 'send_bw') throw new Error(`-b is for the *_bw tests, not ${test}`);
  if (side.manual) throw new Error('send_bw -b needs completions by notification (--completion auto|loop|thread), not manual polling');
  const [mine] = await Promise.all([sendBwClient(side, a, peerReceives), sendBwServer(side)]);
  return mine;
}

// join(): a job of N ranks. Learns rank and size from the launcher (lib/job/detect.ts), publishes this rank's
// listener through the launcher's key-value space, connects to every peer (lower ranks accept from higher
// ones; the connect's private data carries the rank), and offers windows (collective memory, put/get by rank,
// notification) and collectives over the connections. docs/job.md has the design and the protocols.

import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import { networkInterfaces } from 'node:os';
import { CompletionArrays, NdError, openAdapter, type NdErrorCode, type Adapter, type CompletionOption, type Connector, type Local, type MemoryRegion } from '../index.js';
import type { Bootstrap, LauncherName } from './bootstrap.js';
import { MAX_JOB_SIZE, Singleton } from './bootstrap.js';
import { Channel, SPACE_USER, type Message } from './channel.js';
import * as coll from './collectives.js';
import { detectLauncher, LAUNCHERS } from './detect.js';
import { authError, bootstrapError, bounded, checkWaitOptions, limitOf, mismatchError, peerError, raceLimit, strictUint, timeoutError, abortError, waitLimit, ERR_ND_JOB_BOOTSTRAP, type JobError, type Limit, type WaitOptions } from './errors.js';
import { Pmi1 } from './pmi1.js';
import { Pmi2 } from './pmi2.js';
import { checkSecret, makeJobSecret, RendezvousClient } from './rendezvous.js';
import { notesBytes, Window, type WindowOptions } from './window.js';
import { decodeSignature, describe, elementTypeOf, encodeSignature, sameSignature, typedFrom, type Kind } from './signature.js';

/** How many of this rank's recent collective calls keep their signature, to check messages that arrive late. */
const SIGNATURES_KEPT = 512;
/** 'manual' completion mode: how often the job polls its CQs while no call of the program's waits (Job._idle). */
const IDLE_POLL_MS = 10;
/** The longest the jobs' progress loop polls without letting the event loop run (ManualDriver). */
const SPIN_SLICE_MS = 1;
/** A gap this long between two polls of the progress loop is taken for a preemption: no spinning for SHUT_MS (ManualDriver.shutUntil). */
const PREEMPTED_MS = 0.2;
const SHUT_MS = 100;
/** What one round of the progress loop did for a job (Job._driveRound). */
const ROUND_STOP = 0;
const ROUND_IDLE = 1;
const ROUND_MOVED = 2;
/** How long the progress loop polls without stopping before peers asked for notify Sends go back to flags (Job._pollingSteadily). */
const WAKE_OFF_AFTER_MS = 20;

export interface JoinOptions {
  /** Which launcher to speak to (default: detected from the environment, see detectLauncher()). */
  launcher?: LauncherName;
  /** host:port of the rendezvous (launchers 'rendezvous', 'openmpi', 'msmpi'); default NETDIRECT_RENDEZVOUS. */
  rendezvous?: string;
  /** This rank and the job's size, for the 'rendezvous' launcher (default NETDIRECT_RANK / NETDIRECT_SIZE). */
  rank?: number;
  size?: number;
  /** The local address to open the adapter on and publish to peers (default NETDIRECT_ADDRESS, else see docs). */
  address?: string;
  provider?: string;
  completion?: CompletionOption;
  /**
   * The adapter's busy-poll window in microseconds (AdapterOptions.spinMicros; default 0): after a put, a send or
   * a delivered completion the rank keeps polling for this long before it lets the process sleep, as MPI
   * libraries do while they wait. It costs a core while it spins; worth it when every rank has a core.
   */
  spinMicros?: number;
  /**
   * Give up joining after this many milliseconds (default 60 000): it bounds every read from the launcher or the
   * rendezvous, every fence and every connection to a peer; it is also close()'s default bound.
   */
  timeoutMs?: number;
  /** Aborts join() (ERR_ND_ABORTED) wherever it waits. */
  signal?: AbortSignal;
  /**
   * The job's secret for the rendezvous launchers ('rendezvous', 'openmpi', 'msmpi'; default
   * NETDIRECT_JOB_SECRET): every rank proves it holds it before it is let in (docs/job.md "Membership"). Under
   * Hydra and Slurm rank 0 makes one and hands it over through the launcher's key-value space.
   */
  secret?: string;
  /** Connections being set up at once (default 8). */
  concurrency?: number;
  /** The environment to detect from (default process.env). */
  env?: NodeJS.ProcessEnv;
}

const MAGIC = 0x4e444a42; // "NDJB"
/** Connect private data: magic, rank, the initiator's nonce, the proof (HMAC-SHA256 truncated, RFC 2104 §5). */
const NONCE_BYTES = 16;
const PROOF_BYTES = 16;
const CONNECT_DATA = 8 + NONCE_BYTES + PROOF_BYTES; // 40, within every provider's maxCallerData (56 on IB)
const ACCEPT_DATA = 4 + PROOF_BYTES;

const DEBUG = !!process.env.NETDIRECT_JOB_DEBUG;
function debug(rank: number, what: string): void {
  if (DEBUG) process.stderr.write(`[job rank ${rank}] ${what}\n`);
}

/** The address to publish when none is given: NETDIRECT_ADDRESS, else the first non-internal IPv4, else loopback. */
export function defaultAddress(env: NodeJS.ProcessEnv): string {
  if (env.NETDIRECT_ADDRESS) return env.NETDIRECT_ADDRESS;
  for (const list of Object.values(networkInterfaces())) {
    for (const a of list ?? []) if (a.family === 'IPv4' && !a.internal) return a.address;
  }
  return '127.0.0.1';
}

/** HMAC-SHA256 of the words under the job's secret, the first PROOF_BYTES bytes. */
function qpProof(secret: string, ...words: Array<string | number>): Buffer {
  return createHmac('sha256', secret).update(['netdirect-job', ...words].join(' ')).digest().subarray(0, PROOF_BYTES);
}

function intFrom(value: unknown, name: string, launcher: string, max: number): number {
  const n = strictUint(value, max);
  if (n === null) throw bootstrapError(launcher, 'join', `${name} must be a whole number 0..${max} (decimal digits only), got ${JSON.stringify(value)}`);
  return n;
}

async function bootstrapFor(launcher: LauncherName, o: JoinOptions, env: NodeJS.ProcessEnv, limit: Limit): Promise<Bootstrap> {
  switch (launcher) {
    case 'hydra':
      return Pmi1.connect(env, limit);
    case 'pmi2':
      return Pmi2.connect(env, limit);
    case 'singleton':
      return new Singleton();
    default: {
      const [rankVar, sizeVar] =
        launcher === 'openmpi' ? ['OMPI_COMM_WORLD_RANK', 'OMPI_COMM_WORLD_SIZE'] : launcher === 'msmpi' ? ['PMI_RANK', 'PMI_SIZE'] : ['NETDIRECT_RANK', 'NETDIRECT_SIZE'];
      const rank = intFrom(o.rank ?? env[rankVar], launcher === 'rendezvous' ? 'rank (or NETDIRECT_RANK)' : rankVar, launcher, MAX_JOB_SIZE - 1);
      const size = intFrom(o.size ?? env[sizeVar], launcher === 'rendezvous' ? 'size (or NETDIRECT_SIZE)' : sizeVar, launcher, MAX_JOB_SIZE);
      if (size < 1 || rank >= size) throw bootstrapError(launcher, 'join', `rank ${rank} is not in a job of ${size}`);
      const where = o.rendezvous ?? env.NETDIRECT_RENDEZVOUS;
      if (!where) {
        throw bootstrapError(launcher, 'join', `${launcher} gives rank and size but no way to reach the others: set NETDIRECT_RENDEZVOUS=host:port (rank 0 hosts it) or pass { rendezvous }`);
      }
      const secret = checkSecret(o.secret ?? env.NETDIRECT_JOB_SECRET, o.secret !== undefined ? 'options.secret' : 'NETDIRECT_JOB_SECRET', 'join');
      return RendezvousClient.connect(launcher, where, rank, size, secret, limit);
    }
  }
}

/** Joins the job this process is a rank of. Collective: every rank calls it. */
export async function join(options: JoinOptions = {}): Promise<Job> {
  if (typeof options !== 'object' || options === null) throw new NdError('ERR_ND_INVALID_ARGUMENT', 0, 'join', 'join: options must be an object');
  const env = options.env ?? process.env;
  const timeoutMs = options.timeoutMs ?? 60_000;
  checkWaitOptions('join', timeoutMs, options.signal);
  if (options.signal?.aborted) throw abortError('join', options.signal);
  const limit = limitOf(timeoutMs, options.signal);
  let launcher: LauncherName;
  let because: string[];
  if (options.launcher !== undefined) {
    if (!LAUNCHERS.includes(options.launcher)) throw new NdError('ERR_ND_INVALID_ARGUMENT', 0, 'join', `join: launcher must be one of ${LAUNCHERS.join('|')}, got ${JSON.stringify(options.launcher)}`);
    launcher = options.launcher;
    because = ['options.launcher'];
  } else if (options.rendezvous !== undefined) {
    launcher = 'rendezvous';
    because = ['options.rendezvous'];
  } else {
    ({ launcher, because } = detectLauncher(env));
  }
  const boot = await bootstrapFor(launcher, options, env, limit);
  const job = new Job(boot, because, timeoutMs);
  try {
    await job._wireUp(options, env, limit);
  } catch (err) {
    await job._teardown(false);
    throw err;
  }
  job._finalizeAtExit();
  return job;
}

/**
 * Jobs joined and not closed, finalized when the process ends (MPI finalizes at exit too: mpi4py calls
 * MPI_Finalize from atexit). An idle job does not keep the event loop alive (Job._hold), so a program that
 * forgets close() reaches 'beforeExit', where close() runs: the same barrier and goodbye as when the program calls
 * it. A process that ends by process.exit() or an uncaught exception gets only 'exit', where nothing asynchronous
 * runs: each peer is sent an exit message (posted synchronously, ahead of the connection's end), and fails at once
 * with ERR_ND_JOB_PEER naming this rank rather than waiting for it.
 */
const unclosed = new Set<Job>();
let exitHooked = false;

function hookExit(): void {
  if (exitHooked) return;
  exitHooked = true;
  process.on('beforeExit', () => {
    for (const job of unclosed) {
      debug(job.rank, 'beforeExit: the program ended without job.close(); closing');
      void job.close().catch(() => undefined);
    }
  });
  process.on('exit', (code) => {
    for (const job of unclosed) job._exiting(code);
  });
}

/** What a collective call is, for its signature (lib/job/signature.ts). */
type Call = { kind: Kind; data?: coll.NumericArray; count?: number; op?: coll.ReduceOp; root?: number };

const RETRY_CODES = new Set(['ND_CONNECTION_REFUSED', 'ND_IO_TIMEOUT', 'ND_TIMEOUT', 'ND_HOST_UNREACHABLE', 'ND_NETWORK_UNREACHABLE']);

/**
 * The jobs' own progress loop ('manual' completion mode, and 'loop' mode with a busy-poll window: Job._spinsItself),
 * one for every job of the process (a test may run several ranks in one process: a loop per job would hold the
 * thread for its slice while another job's call waited). While a call of a job's program waits (Job._hold) the loop
 * polls the job's CQs (Job._driveRound), then polls again once the
 * JavaScript the poll set off has run: a poll that settles a request queues its promise's reactions as microtasks,
 * and the next poll is queued by process.nextTick from a microtask queued after them, so it runs once the
 * microtask queue is empty (Node runs the next-tick queue after each drain of the microtasks), i.e. once the
 * program's continuation has posted its next message. No event-loop turn (epoll_wait, the timers, the check phase)
 * lies between a completion and the program's next post. After SPIN_SLICE_MS of this the loop hands the thread
 * back to the event loop (setImmediate), so timers, sockets and other callbacks still run, then goes on.
 */
/**
 * A settled promise: `settled.then(f)` queues f as a microtask. (queueMicrotask makes an AsyncResource and a bound
 * function per call: the progress loop queues one per poll.)
 */
const settled = Promise.resolve();

class ManualDriver {
  private readonly jobs = new Set<Job>();
  private running = false;
  private sliceEnd = 0;

  add(job: Job): void {
    this.jobs.add(job);
    if (this.running) return;
    this.running = true;
    this.sliceEnd = performance.now() + SPIN_SLICE_MS;
    settled.then(this.next);
  }

  private readonly round = (): void => {
    this.sliceEnd = performance.now() + SPIN_SLICE_MS;
    this.last = 0; // the event loop's turn in between is not a preemption
    this.step();
  };

  /**
   * Until when the loop does not spin (performance.now()): it was preempted between two of its polls for longer than
   * PREEMPTED_MS (or the program's JavaScript between them took that long), so the machine likely has more runnable
   * threads than cores, and a rank that spins keeps the rank it waits for off a core (4 ranks on 2 cores). Meanwhile
   * 'loop'-mode jobs leave delivery to the event loop and 'manual'-mode jobs are polled once per event-loop turn.
   * The event loop's own busy-poll window shuts so too (docs/shm.md, "Busy window in loop mode").
   */
  shutUntil = 0;
  private last = 0;

  private readonly step = (): void => {
    const now = performance.now();
    if (now - this.last > PREEMPTED_MS && this.last !== 0) this.shutUntil = now + SHUT_MS;
    this.last = now;
    for (const job of this.jobs) if (job._driveRound(now) === ROUND_STOP) this.jobs.delete(job);
    if (this.jobs.size === 0) {
      this.running = false;
      this.last = 0;
      return;
    }
    // An empty round does not yield the core (sched_yield), as the event loop's busy-poll window does: tried, with 2
    // ranks on the 2-core VM at load ~5 the median round trip of the notified-put ping-pong went 11.0-11.6 µs
    // without to 14.4-15.9 µs with, p99 49-691 µs to 742-1817 µs (2 interleaved runs per mode, manual and loop).
    if (now < this.sliceEnd && now >= this.shutUntil) settled.then(this.next);
    else setImmediate(this.round); // preempted lately: one poll per event-loop turn, as before the spin
  };

  private readonly next = (): void => {
    process.nextTick(this.step);
  };
}
const manualDriver = new ManualDriver();

export class Job implements AsyncDisposable {
  readonly rank: number;
  readonly size: number;
  /** The launcher that started this process ('hydra', 'pmi2', 'openmpi', 'msmpi', 'rendezvous', 'singleton'). */
  readonly launcher: LauncherName;
  /** What decided the launcher: the environment variables or the option. */
  readonly detectedFrom: readonly string[];
  readonly jobId: string;
  /** The adapter the job's connections and windows live on. */
  adapter!: Adapter;
  /** Milliseconds join() spent connecting to the peers. */
  wireUpMs = 0;
  /** Connection requests refused during join() because they could not prove they belong to the job. */
  refusedConnects = 0;
  private readonly _timeoutMs: number;
  /** @internal */ readonly _boot: Bootstrap;
  /** @internal */ readonly _channels: Array<Channel | null> = [];
  private _seq = 0;
  private _windowSeq = 0;
  /** @internal */ readonly _windows = new Map<number, Window>();
  /** @internal The same windows in an array: the progress loop's round walks it without making an iterator. */
  readonly _windowList: Window[] = [];
  private readonly _early = new Map<number, number[]>();
  private _windowsMade = 0;
  private _failure: JobError | null = null;
  /** The signatures of this rank's last collective calls, by tag (see _arrived). */
  private readonly _sigs = new Map<number, { operation: string; bytes: Uint8Array }>();
  /** Messages this rank sent itself (send/recv). */
  private readonly _self = new SelfBox();
  /** Calls of the program's in flight (see _hold). */
  private _busy = 0;
  /** Whether the adapter keeps the process alive (_keep; an adapter does when it opens), and a check of it is queued. */
  private _kept = true;
  private _unkeepQueued = false;
  /** 'manual' completion mode: whether the job's progress loop runs (see _drive), and what it polls into. */
  private _driving = false;
  private _idleTimer: NodeJS.Timeout | null = null;
  private _polled: CompletionArrays | null = null;
  /** Calls running under _quietly(): the progress loop leaves the job alone meanwhile. */
  private _quiet = 0;
  /** When the progress loop last saw a message arrive or a send complete (performance.now(); see _driveRound). */
  private _lastProgress = 0;
  /** When the progress loop last started driving this job (see _pollingSteadily). */
  private _driveStarted = 0;
  private _closing: Promise<void> | null = null;
  private _closed = false;
  private readonly _failWaiters = new Set<(err: JobError) => void>();
  /** Scratch regions of the zero-copy allreduce not in use by a call (see _rdma). */
  private readonly _scratch: MemoryRegion[] = [];
  /** Collectives this rank gave up on whose posted requests have not all settled yet (close() waits for them). */
  private readonly _abandoned = new Set<Promise<void>>();

  /** @internal Use join(). */
  constructor(boot: Bootstrap, because: string[], timeoutMs = 60_000) {
    this._boot = boot;
    this._timeoutMs = timeoutMs;
    this.rank = boot.rank;
    this.size = boot.size;
    this.launcher = boot.launcher;
    this.detectedFrom = Object.freeze([...because]);
    this.jobId = boot.jobId;
  }

  /** The failure that broke the job (a peer died or a connection broke), or null. */
  get failure(): JobError | null {
    return this._failure;
  }

  /** @internal */
  async _wireUp(o: JoinOptions, env: NodeJS.ProcessEnv, limit: Limit): Promise<void> {
    const started = Date.now();
    const address = o.address ?? defaultAddress(env);
    this.adapter = await openAdapter(address, { provider: o.provider, completion: o.completion, spinMicros: o.spinMicros });
    const listener = await this.adapter.listen({ port: 0 });
    try {
      for (let p = 0; p < this.size; p++) this._channels.push(p === this.rank ? null : new Channel(this.adapter, p));
      await Promise.all(this._channels.map((c) => c?.prepare()));
      for (const c of this._channels) {
        if (c === null) continue;
        c.onFail = (err) => this._fail(err);
        c.onNotify = (windowId, count) => {
          this._notify(windowId, c.peer, count);
          // A notify Send while this rank's progress loop polls its flags (loop mode with a busy-poll window, which
          // asked for Sends when the window closed): flags will do again.
          if (c.wakeAsked && this._pollingSteadily()) c.wake(false);
        };
        c.onPoke = () => {
          for (const w of this._windowList) w._take(c.peer);
        };
        this._hookChecks(c);
      }
      // The secret the connections prove membership with: the rendezvous launchers' own (NETDIRECT_JOB_SECRET);
      // under a PMI launcher one rank 0 makes and puts in the key-value space, which only the job's processes
      // read (docs/job.md "Membership" says what that does and does not keep out).
      let secret = this._boot.secret;
      if (secret === undefined && this.rank === 0 && this.size > 1) {
        secret = makeJobSecret();
        await this._boot.put('nd-secret', secret, limit);
      }
      // This listener's nonce: a connect's proof names it, so a proof is good for this job's wire-up only.
      const nonce = randomBytes(NONCE_BYTES).toString('hex');
      const { host, port } = listener.address;
      await this._boot.put(`nd-addr-${this.rank}`, `${host.includes(':') ? `[${host}]` : host}:${port}/${nonce}`, limit);
      await this._boot.fence(limit);
      if (secret === undefined && this.size > 1) {
        const got = await this._boot.get('nd-secret', 0, limit);
        if (!/^[0-9a-f]{64}$/.test(got)) throw bootstrapError(this.launcher, 'join', `the key-value space's nd-secret is not the 64 hex characters rank 0 puts`);
        secret = got;
      }
      const accepting = this._acceptFromHigher(listener, secret ?? '', nonce, limit);
      accepting.catch(() => undefined);
      const peers = Array.from({ length: this.rank }, (_, p) => p);
      // The launcher answers one request at a time: read every address first, then connect in parallel.
      const where: Array<{ at: string; nonce: string }> = [];
      for (const p of peers) {
        const v = await this._boot.get(`nd-addr-${p}`, p, limit);
        const m = /^(.{1,300}:[0-9]{1,5})\/([0-9a-f]{32})$/.exec(v);
        if (m === null) throw bootstrapError(this.launcher, 'join', `rank ${p}'s nd-addr-${p} is not host:port/nonce: ${JSON.stringify(v.slice(0, 80))}`);
        where[p] = { at: m[1], nonce: m[2] };
      }
      const concurrency = Math.max(1, o.concurrency ?? 8);
      const connecting = Promise.all(
        Array.from({ length: Math.min(concurrency, peers.length) }, async () => {
          for (let p = peers.shift(); p !== undefined; p = peers.shift()) await this._connectTo(p, where[p].at, where[p].nonce, secret!, limit);
        }),
      );
      await Promise.all([accepting, connecting]);
    } finally {
      await listener.close();
    }
    this.wireUpMs = Date.now() - started;
  }

  /** A signal that aborts at `limit`'s deadline or when its signal does. */
  private static _signalFor(limit: Limit): AbortSignal {
    const timer = AbortSignal.timeout(Math.max(1, limit.deadline - Date.now()));
    return limit.signal ? AbortSignal.any([limit.signal, timer]) : timer;
  }

  private async _connectTo(peer: number, where: string, nonceL: string, secret: string, limit: Limit): Promise<void> {
    const qp = this._channels[peer]!.qp;
    const nonceI = randomBytes(NONCE_BYTES);
    const data = new Uint8Array(CONNECT_DATA);
    const view = new DataView(data.buffer);
    view.setUint32(0, MAGIC);
    view.setUint32(4, this.rank);
    data.set(nonceI, 8);
    data.set(qpProof(secret, 'connect', this.jobId, nonceL, nonceI.toString('hex'), this.rank, peer), 8 + NONCE_BYTES);
    let delay = 10;
    for (;;) {
      let connector: Connector;
      try {
        connector = await this.adapter.connect(qp, where, { privateData: data, signal: Job._signalFor(limit) });
      } catch (err) {
        const code = (err as NdError).code;
        if (limit.signal?.aborted) throw abortError('join', limit.signal);
        if (code === 'ERR_ND_ABORTED' || Date.now() >= limit.deadline) throw timeoutError('join', `rank ${peer} at ${where} was not connected to`, limit);
        if (!RETRY_CODES.has(code) || Date.now() + delay > limit.deadline) throw peerError(peer, 'join', `could not be connected to at ${where}`, err);
        await bounded(new Promise((r) => setTimeout(r, delay)), limit, 'join', `rank ${peer} at ${where} was not connected to`);
        delay = Math.min(delay * 2, 250);
        continue;
      }
      // The acceptor proves it too: what answered at the published address holds the job's secret.
      const pd = connector.privateData;
      const ok = pd.byteLength === ACCEPT_DATA && new DataView(pd.buffer, pd.byteOffset, pd.byteLength).getUint32(0) === MAGIC &&
        timingSafeEqual(Buffer.from(pd.buffer, pd.byteOffset + 4, PROOF_BYTES), qpProof(secret, 'accept', this.jobId, nonceL, nonceI.toString('hex'), peer, this.rank));
      if (!ok) {
        await connector.disconnect().catch(() => undefined);
        throw authError('join', `rank ${peer}'s address ${where} was answered by a process that could not prove it belongs to this job`, peer);
      }
      return;
    }
  }

  private async _acceptFromHigher(listener: import('../index.js').Listener, secret: string, nonceL: string, limit: Limit): Promise<void> {
    let waiting = this.size - 1 - this.rank;
    if (waiting === 0) return;
    const signal = Job._signalFor(limit);
    while (waiting > 0) {
      let c: Connector;
      try {
        c = await listener.getConnectionRequest({ signal });
      } catch (err) {
        const missing = this._channels.findIndex((ch, p) => p > this.rank && ch !== null && ch.qp.connector === null);
        if (limit.signal?.aborted) throw abortError('join', limit.signal);
        const e = timeoutError('join', `rank ${missing} never connected (${this.refusedConnects} connection requests refused for want of proof)`, limit);
        (e as JobError).peer = missing;
        throw e;
      }
      const pd = c.privateData;
      const view = new DataView(pd.buffer, pd.byteOffset, pd.byteLength);
      let peer = -1;
      if (pd.byteLength === CONNECT_DATA && view.getUint32(0) === MAGIC) {
        const claimed = view.getUint32(4);
        const nonceI = Buffer.from(pd.buffer, pd.byteOffset + 8, NONCE_BYTES).toString('hex');
        const got = Buffer.from(pd.buffer, pd.byteOffset + 8 + NONCE_BYTES, PROOF_BYTES);
        if (claimed > this.rank && claimed < this.size && timingSafeEqual(got, qpProof(secret, 'connect', this.jobId, nonceL, nonceI, claimed, this.rank))) {
          peer = claimed;
          const reply = new Uint8Array(ACCEPT_DATA);
          new DataView(reply.buffer).setUint32(0, MAGIC);
          reply.set(qpProof(secret, 'accept', this.jobId, nonceL, nonceI, this.rank, peer), 4);
          const ch = this._channels[peer];
          if (ch && ch.qp.connector === null) {
            await c.accept(ch.qp, { privateData: reply, signal });
            waiting--;
            continue;
          }
        }
      }
      // A stranger, a wrong proof, or a rank already connected: refused (its connect fails ND_CONNECTION_REFUSED).
      this.refusedConnects++;
      debug(this.rank, `refused a connection request claiming rank ${pd.byteLength >= 8 ? view.getUint32(4) : '?'}: no proof of membership`);
      c.reject();
      await c.close();
    }
  }

  /**
   * A notify for window `id` from `peer`. A peer may finish allocateWindow() and put before this rank has: a
   * notify for a window not made yet waits here until it is.
   */
  private _notify(id: number, peer: number, count: number): void {
    const w = this._windows.get(id);
    if (w !== undefined) return w._notified(peer, count);
    if (id <= this._windowsMade) return; // made and freed since
    const early = this._early.get(id) ?? new Array<number>(this.size).fill(0);
    early[peer] += count;
    this._early.set(id, early);
  }

  /**
   * @internal A window's waiter waits for notified puts from `peer`. Over shared memory they come as flags
   * (lib/job/window.ts) that nothing announces: if this rank will not read them while it waits (thread mode, loop
   * mode outside a busy-poll window), it asks `peer` to poke it after each (docs/job.md "Waking").
   */
  _waitingFor(peer: number): void {
    const c = this._channels[peer];
    if (c && !c.wakeAsked && c.sameHost && !this._readsFlags()) c.wake(true);
  }

  /** Asks `peer` (same host) to poke after each notified put: this rank stopped reading its flags (_driveRound). */
  private readonly _wakeMe = (peer: number): void => {
    const c = this._channels[peer];
    if (c && c.sameHost) c.wake(true);
  };

  /**
   * Whether the progress loop has polled for WAKE_OFF_AFTER_MS without stopping: then peers asked for notify Sends
   * may go back to flags. Not sooner: on a machine with more runnable threads than cores the loop stops after
   * every preemption (ManualDriver.shutUntil), and each switch and back costs messages and, for a flag written
   * before the peer heard of the switch, the wait for its poke.
   */
  private _pollingSteadily(): boolean {
    return this._driving && this._quiet === 0 && performance.now() - this._driveStarted >= WAKE_OFF_AFTER_MS;
  }

  /** Whether this rank reads its windows' flags while a call waits: the progress loop runs (or will, _hold). */
  private _readsFlags(): boolean {
    if (this.adapter.completion === 'manual') return true;
    return this._quiet === 0 && (this._driving || this._spinsItself());
  }

  /** The agreement check's and the exit message's hooks on a channel (see _arrived, _mismatch). */
  private _hookChecks(c: Channel): void {
    c.onSignature = (tag, sig) => this._arrived(c.peer, tag, sig);
    c.onAbort = (text) => this._fail(abortNoteError(text, c.peer));
    c.onExit = (text) => this._fail(peerError(c.peer, 'job', text.replace(/^rank \d+ /, '')));
  }

  /**
   * A collective message from `peer` for call `tag` arrived: if this rank made that call (or has made it: the
   * signatures of the last SIGNATURES_KEPT calls are kept, since a message can arrive after the call finished
   * here, e.g. from a rank that thought it was the root), both signatures must be equal. A call this rank has
   * not made yet is checked when it starts (_collective).
   */
  private _arrived(peer: number, tag: number, sig: Uint8Array): boolean {
    const mine = this._sigs.get(tag);
    if (mine === undefined || sameSignature(mine.bytes, sig)) return true;
    this._mismatch(mine.operation, peer, mine.bytes, sig);
    return false;
  }

  /**
   * The ranks disagree: this rank tells every peer (an abort message carrying the text, ahead of anything queued)
   * and fails the job, so that every rank fails with ERR_ND_JOB_MISMATCH and none waits for a message that will
   * not come.
   */
  private _mismatch(operation: string, peer: number, mine: Uint8Array, theirs: Uint8Array): JobError {
    const me = describe(decodeSignature(mine));
    const them = describe(decodeSignature(theirs));
    const [first, second] = this.rank < peer ? [`rank ${this.rank} called ${me}`, `rank ${peer} called ${them}`] : [`rank ${peer} called ${them}`, `rank ${this.rank} called ${me}`];
    this._fail(mismatchError(operation, `${operation}: ranks disagree: ${first}, ${second}`, peer));
    return this._failure!;
  }

  /** @internal Registers this job for finalization at process exit (see `unclosed`). */
  _finalizeAtExit(): void {
    hookExit();
    unclosed.add(this);
    if (this._busy === 0) this._keep(false);
    this._idle();
  }

  /**
   * @internal Keeps the process alive while `p` is pending: the job's receives are always posted, so the adapter
   * keeps the event loop alive only while the program waits for something of the job's (see `unclosed`).
   */
  _hold<T>(p: Promise<T>): Promise<T> {
    if (this._busy++ === 0 && !this._kept) this._keep(true);
    if (!this._driving && this._quiet === 0 && this.adapter !== undefined && this._spinsItself()) this._drive();
    else if (this._quiet > 0) this._idleTimer?.ref(); // a quiet wait keeps the process alive (_idle)
    p.then(this._release, this._release);
    return p;
  }

  /** A call that _hold kept the process alive for settled (one function for all calls: nothing made per call). */
  private readonly _release = (): void => {
    if (--this._busy === 0 && !this._unkeepQueued) {
      this._unkeepQueued = true;
      settled.then(this._unkeep);
    }
  };

  /**
   * The last call settled: the adapter stops keeping the process alive, unless the program made its next call in
   * the meantime (the continuation of the call that settled runs first). A program that calls the job in a loop so
   * pays no native call per call.
   */
  private readonly _unkeep = (): void => {
    this._unkeepQueued = false;
    if (this._busy === 0 && this._kept && unclosed.has(this)) this._keep(false);
  };

  /** Sets whether the adapter's pending requests keep the event loop alive (Adapter._keepAlive), remembered. */
  private _keep(on: boolean): void {
    if (this.adapter === undefined) return;
    this._kept = on;
    this.adapter._keepAlive(on);
  }

  /**
   * 'manual' completion mode: only cq.poll() takes completions off a CQ, and the program polls none of the job's
   * (they are the job's own, one per channel). So while a call of the program's waits (_busy > 0: a collective,
   * send, recv, a window's put/get/waitNotifications, close()'s barrier) the job polls them itself, as an MPI
   * library's progress engine polls inside MPI_Wait: every channel's CQ once per event-loop turn (setImmediate, so
   * timers, sockets and the calls' own continuations still run between rounds), until no call waits. This is a busy
   * loop, a core while a call waits. Between calls an unref'd timer polls them every IDLE_POLL_MS (_idle), so a
   * peer's messages (credits, notifications, a failure: job.failed) are still taken in without keeping the process
   * alive. docs/job.md "Completion modes".
   */
  private _drive(): void {
    this._driving = true;
    if (this._idleTimer !== null) clearTimeout(this._idleTimer);
    this._idleTimer = null;
    this._lastProgress = this._driveStarted = performance.now();
    manualDriver.add(this);
  }

  /**
   * Whether the job drives its own CQs while a call waits (ManualDriver): in 'manual' mode nothing else takes their
   * completions; in 'loop' mode with a busy-poll window (spinMicros) the job polls them on the JS thread instead of
   * waiting for the event loop's turns (cq.pollInto() on an empty CQ there drives the provider once first), for as long
   * as the window lasts after the last message, and the event loop delivers after that.
   */
  private _spinsItself(): boolean {
    const mode = this.adapter.completion;
    return mode === 'manual' || (mode === 'loop' && this.adapter.spinMicros > 0 && performance.now() >= manualDriver.shutUntil);
  }

  /**
   * @internal One round of the progress loop (ManualDriver): ROUND_STOP once it stops driving this job, else
   * ROUND_MOVED when a message arrived or a send completed, ROUND_IDLE when nothing did.
   */
  _driveRound(now: number): number {
    if (this._busy === 0 || this._quiet > 0) {
      this._driving = false;
      this._idle();
      return ROUND_STOP;
    }
    let flagged = false;
    const windows = this._windowList;
    for (let i = 0; i < windows.length; i++) if (windows[i]._takeWaited()) flagged = true;
    if (flagged && this.adapter.completion !== 'manual' && this._pollingSteadily()) {
      // Flags came while this rank polls them: peers asked for Sends need not (they are asked again when it stops).
      for (const c of this._channels) if (c?.wakeAsked) c.wake(false);
    }
    if (this._pollAll() || flagged) {
      this._lastProgress = now;
      return ROUND_MOVED;
    }
    if (this.adapter.completion !== 'manual' && (now - this._lastProgress > this.adapter.spinMicros / 1000 || now < manualDriver.shutUntil)) {
      this._driving = false; // the busy-poll window passed with nothing: the event loop delivers from here
      // ... and nothing reads the windows' flags: the peers waited for poke from now on (_waitingFor).
      for (const w of this._windows.values()) w._waitedPeers(this._wakeMe);
      return ROUND_STOP;
    }
    return ROUND_IDLE;
  }

  /**
   * @internal Runs a call of the job's without busy-polling while it waits: in 'manual' mode the job polls its CQs
   * every IDLE_POLL_MS instead (_idle), in 'loop' mode the event loop delivers. For a wait whose end is far off and
   * whose core another program needs meanwhile: ndbench's ranks other than 0 wait so while rank 0 runs the MPI
   * side of --compare mpi (lib/bench/osu.ts), which would otherwise share the cores with ranks that spin.
   */
  async _quietly<T>(call: () => Promise<T>): Promise<T> {
    this._quiet++;
    try {
      return await call();
    } finally {
      if (--this._quiet === 0 && this._busy > 0 && !this._driving && this._spinsItself()) this._drive();
    }
  }

  /** Manual mode between calls: polls the job's CQs every IDLE_POLL_MS until a call starts (_drive) or the job closes. */
  private _idle(): void {
    if (this._closed || this._driving || this._idleTimer !== null || this.adapter?.completion !== 'manual') return;
    this._idleTimer = setTimeout(() => {
      this._idleTimer = null;
      if (this._closed || this._driving) return;
      this._pollAll();
      for (const w of this._windows.values()) w._takeAll();
      this._idle();
    }, IDLE_POLL_MS);
    // Between calls it does not keep the process alive. Under a call that waits without busy-polling (_quietly) it
    // does: in manual mode the adapter's pending requests do not hold the event loop, and without this timer a
    // process whose only work is that wait reached 'beforeExit' in the middle of it (ndbench --compare mpi
    // --completion manual: rank 1 closed the job while rank 0 ran MPI, and Hydra killed both ranks 60 s later).
    if (this._busy === 0) this._idleTimer.unref();
  }

  /** Polls every channel's CQ; whether a message arrived or a send completed on one of them. */
  private _pollAll(): boolean {
    this._polled ??= new CompletionArrays(64);
    const out = this._polled;
    let moved = false;
    for (const c of this._channels) {
      if (c === null) continue;
      const before = c.progress;
      try {
        // Settles the promise-API requests it dequeues; the job posts no other kind on its queue pairs.
        while (c.cq.pollInto(out) === out.capacity);
      } catch {
        // closed (close() tears the channels down while the barrier's last promises settle): nothing to drive
      }
      if (c.progress !== before) moved = true;
    }
    return moved;
  }


  /** @internal The process is exiting (process 'exit') without close(): tells every peer, synchronously. */
  _exiting(code: number): void {
    unclosed.delete(this);
    if (this._failure === null) for (const c of this._channels) c?.sendControl('exit', `rank ${this.rank} exited (code ${code}) without calling job.close()`);
    // Nothing asynchronous runs after 'exit': in event-loop completion mode an empty cq.poll() drives the
    // provider once (binding/addon/completion_queue.cc), which transmits what was just posted — the exit message, or
    // the abort message a failed job posted in the same turn as the program's process.exit().
    for (const c of this._channels) {
      try {
        c?.cq.poll(1);
      } catch {
        // closed: nothing to drive
      }
    }
  }

  /**
   * @internal Breaks the job: every pending operation on every peer settles with `err`. Every peer is told first
   * (an abort message with the error, ahead of anything queued), also when this rank only heard of it from
   * another: a rank that then closes disconnects after that message on the same queue pair, so no peer sees a
   * connection drop before it has heard why, and every rank fails with the same error naming the same rank
   * (queue pairs are not ordered among themselves).
   */
  _fail(err: JobError): void {
    if (this._failure !== null) return;
    this._failure = err;
    const note = JSON.stringify({ code: err.code, status: err.status, operation: err.operation, message: err.message, peer: err.peer });
    for (const c of this._channels) c?.sendControl('abort', note);
    for (const c of this._channels) c?.abort(err);
    this._self.abort(err);
    // Flags that landed before the failure count, as notify Sends taken before it do (lib/job/window.ts).
    for (const w of this._windows.values()) w._takeAll();
    for (const w of this._windows.values()) w._abort(err);
    for (const f of this._failWaiters) f(err);
  }

  /** @internal */
  _check(operation: string): void {
    if (this._closed && operation !== 'close') throw new NdError('ERR_ND_CLOSED', 0, operation, `${operation}: the job is closed`);
    if (this._failure) throw this._failure;
  }

  /** @internal The channel to `peer`, checked. */
  _channel(peer: number, operation: string): Channel {
    this._check(operation);
    if (!Number.isInteger(peer) || peer < 0 || peer >= this.size) {
      throw new NdError('ERR_ND_OUT_OF_RANGE', 0, operation, `${operation}: rank must be 0..${this.size - 1}, got ${String(peer)}`);
    }
    const c = this._channels[peer];
    if (c === null) throw new NdError('ERR_ND_INVALID_ARGUMENT', 0, operation, `${operation}: rank ${peer} is this rank`);
    return c;
  }

  /** `waiting` counts, by rank, the receives of the call still waiting for that rank (for the timeout's message). */
  private _transport(operation: string, sig: Uint8Array, waiting: Map<number, number>): coll.Transport {
    this._check(operation);
    return {
      rank: this.rank,
      size: this.size,
      // Never throw synchronously: a collective holds several of these promises at once (Promise.all).
      send: async (p, tag, d) => this._channel(p, operation).send(tag, d, sig),
      recv: async (p, tag) => {
        const ch = this._channel(p, operation);
        waiting.set(p, (waiting.get(p) ?? 0) + 1);
        try {
          return (await ch.recv(tag)).bytes;
        } finally {
          const n = waiting.get(p)! - 1;
          if (n === 0) waiting.delete(p);
          else waiting.set(p, n);
        }
      },
      rdma: this._rdma(operation),
    };
  }

  /**
   * Registration, scratch regions and RDMA Writes for the zero-copy large allreduce and broadcast (collectives.ts). Scratch
   * regions are the job's, kept for the next call (a pool: calls in flight at once each get their own), and
   * deregistered at close.
   */
  private _rdma(operation: string): coll.RdmaOps {
    const scratch = async (bytes: number): Promise<MemoryRegion> => {
      const i = this._scratch.findIndex((r) => r.length >= bytes);
      if (i >= 0) return this._scratch.splice(i, 1)[0];
      return this.adapter.allocateMemory(bytes, { remoteWrite: true });
    };
    return {
      register: async (bytes) => {
        try {
          return { region: await this.adapter.registerMemory(bytes, { remoteWrite: true }), staged: false };
        } catch (err) {
          // Memory registerMemory() refuses by its kind (a misuse error, not a provider status): stage it.
          if (!(err instanceof NdError) || err.isStatus) throw err;
          return { region: await scratch(bytes.byteLength), staged: true };
        }
      },
      scratch: (bytes) => scratch(bytes),
      release: (region) => {
        if (this._closed) void region.deregister().catch(() => undefined);
        else this._scratch.push(region);
      },
      // Writes longer than the adapter takes at once go as several, in order, all posted before this returns.
      write: async (p, local, remote, offset) => {
        const qp = this._channel(p, operation).qp;
        const most = Math.max(1, Number(this.adapter.info.maxTransferLength));
        const posted: Array<Promise<unknown>> = [];
        for (let at = 0; at < local.length || posted.length === 0; at += most) {
          posted.push(qp.write(local.region.slice(local.offset + at, Math.min(most, local.length - at)), remote, { offset: offset + at }));
        }
        await Promise.all(posted);
      },
    };
  }

  /**
   * Runs a collective; a failure anywhere in the job settles it with the job's error. `call` is what this rank
   * called (its signature goes on every message of the call and is checked against the peers': _arrived).
   *
   * `wait` bounds it (docs/job.md "Giving up on a collective"). A collective cannot be withdrawn from one rank
   * alone: its peers have sent, or wait for, messages of this call's tag, and the next call takes the next tag.
   * So a rank that gives up fails the job (ERR_ND_JOB_ABANDONED, as MPI's fault-tolerance proposal revokes a
   * communicator): every peer is told and fails with that error, and every later call throws it. The call itself
   * rejects with ERR_ND_JOB_TIMEOUT or ERR_ND_ABORTED at once; what it had posted settles behind it (its receives
   * at once, its Sends and Writes when the provider completes or flushes them) and close() waits for that. A
   * signal already aborted when the call is made refuses it before it takes a tag: nothing started, the job goes on.
   */
  private _collective(call: Call, run: (t: coll.Transport, tag: number) => Promise<void>, wait?: CollectiveOptions): Promise<void> {
    return this._hold(this._runCollective(call, run, wait));
  }

  private async _runCollective(call: Call, run: (t: coll.Transport, tag: number) => Promise<void>, wait?: CollectiveOptions): Promise<void> {
    const operation = call.kind;
    const limit = waitLimit(wait, operation);
    if (limit?.signal?.aborted) throw abortError(operation, limit.signal);
    const sig = encodeSignature({ kind: call.kind, type: call.data ? elementTypeOf(call.data) : '', op: call.op ?? '', root: call.root ?? -1, count: call.count ?? call.data?.length ?? 0 });
    const waiting = new Map<number, number>();
    const t = this._transport(operation, sig, waiting);
    const tag = (++this._seq & 0x7fffffff) >>> 0;
    this._sigs.set(tag, { operation, bytes: sig });
    if (this._sigs.size > SIGNATURES_KEPT) this._sigs.delete(this._sigs.keys().next().value!);
    // Messages of this call that came before it started: checked now.
    for (const c of this._channels) {
      const theirs = c?.waitingSignature(tag);
      if (c && theirs && !sameSignature(sig, theirs)) throw this._mismatch(operation, c.peer, sig, theirs);
    }
    const work = run(t, tag);
    let gaveUp: Error | undefined;
    try {
      await (limit === undefined ? work : raceLimit(work, limit, (why) => (gaveUp = this._abandon(operation, why, limit, waiting, work))));
    } catch (err) {
      throw err === gaveUp ? err : (this._failure ?? err);
    }
  }

  /**
   * This rank gives up on a collective (`why`: its limit's deadline passed or its signal aborted): fails the job
   * with ERR_ND_JOB_ABANDONED (every peer is told) and returns the error the call rejects with. When the job has
   * already failed, its failure is what the call rejects with.
   */
  private _abandon(operation: string, why: 'timeout' | 'abort', limit: Limit, waiting: Map<number, number>, work: Promise<void>): Error {
    if (this._failure !== null) return this._failure;
    const ranks = [...waiting.keys()].sort((a, b) => a - b);
    const on = ranks.length === 0 ? 'its posted requests' : `rank${ranks.length > 1 ? 's' : ''} ${ranks.join(', ')}`;
    const how = why === 'timeout' ? `after timeoutMs ${limit.timeoutMs} ms` : 'when its signal aborted';
    const failure: JobError = new NdError(
      'ERR_ND_JOB_ABANDONED',
      0,
      operation,
      `${operation}: rank ${this.rank} gave up on this call ${how}, waiting for ${on}; a collective given up on one rank cannot be resumed, so the job is failed on every rank: close() it`,
    );
    failure.peer = this.rank;
    this._fail(failure);
    const settled = work.then(
      () => undefined,
      () => undefined,
    );
    this._abandoned.add(settled);
    void settled.then(() => this._abandoned.delete(settled));
    const tail = `; the job is failed (job.failure: ERR_ND_JOB_ABANDONED): a collective given up on one rank cannot be resumed`;
    const what = ranks.length === 0 ? 'its posted requests did not complete' : `${on} did not answer`;
    return why === 'timeout'
      ? new NdError('ERR_ND_JOB_TIMEOUT', 0, operation, `${operation}: ${what} within timeoutMs ${limit.timeoutMs} ms${tail}`, { cause: failure })
      : new NdError('ERR_ND_ABORTED', 0, operation, `${operation}: aborted${tail}`, { cause: limit.signal!.reason });
  }

  /**
   * Waits until every rank called barrier() (dissemination). Every collective takes `{ timeoutMs, signal }` last:
   * giving up on one fails the job on every rank (ERR_ND_JOB_ABANDONED; docs/job.md "Giving up on a collective").
   */
  barrier(options?: CollectiveOptions): Promise<void> {
    return this._collective({ kind: 'barrier' }, (t, tag) => coll.barrier(t, tag), options);
  }

  /** Broadcasts `data` from `root` into `data` on every rank (in place); resolves with it. */
  async broadcast<T extends coll.NumericArray>(data: T, root = 0, options?: CollectiveOptions): Promise<T> {
    checkTyped(data, 'broadcast');
    this._checkRoot(root, 'broadcast');
    await this._collective({ kind: 'broadcast', data, root }, (t, tag) => coll.broadcast(t, tag, data, root), options);
    return data;
  }

  /** Combines `data` element-wise over every rank (sum, prod, min, max; band, bor, bxor on integers), in place; resolves with it. */
  async allreduce<T extends coll.NumericArray>(data: T, op: coll.ReduceOp = 'sum', options?: CollectiveOptions): Promise<T> {
    checkTyped(data, 'allreduce');
    checkOp(data, op, 'allreduce');
    await this._collective({ kind: 'allreduce', data, op }, (t, tag) => coll.allreduce(t, tag, data, op), options);
    return data;
  }

  // Point to point (MPI 4.1 §3): messages from one rank with one tag are received in the order they were sent;
  // the user's tags are a space of their own, apart from the collectives'. A rank may send to itself.

  /**
   * Sends `data` to rank `dest` with `options.tag` (default 0); resolves once the data has been sent. Like
   * MPI_Send: `data` must not change until then. The receiver gets a typed array of the same element type.
   */
  async send(data: coll.NumericArray, dest: number, options: { tag?: number } = {}): Promise<void> {
    checkTyped(data, 'send');
    const tag = userTag(options?.tag, 'tag', 'send');
    const sig = encodeSignature({ kind: 'send', type: elementTypeOf(data), op: '', root: -1, count: data.length });
    const ch = this._peer(dest, 'send');
    if (ch === null) return this._self.put(tag, { bytes: coll.bytesOf(data).slice(), sig });
    try {
      await this._hold(ch.send(tag, coll.bytesOf(data), sig, SPACE_USER));
    } catch (err) {
      throw this._failure ?? err;
    }
  }

  /**
   * The next message from rank `source` with `options.tag` (default 0). Without `into`: a new typed array of the
   * sender's element type and length. With `into` (the sender's element type): the data is copied into it and
   * the part received, `into.subarray(0, count)`, comes back; a message larger than `into` is consumed and
   * refused with ERR_ND_OUT_OF_RANGE, one of another element type with ERR_ND_JOB_MISMATCH.
   */
  recv<T extends coll.NumericArray>(source: number, options: RecvOptions & { into: T }): Promise<T>;
  recv(source: number, options?: RecvOptions & { into?: undefined }): Promise<coll.NumericArray>;
  async recv(source: number, options: RecvOptions & { into?: coll.NumericArray } = {}): Promise<coll.NumericArray> {
    const tag = userTag(options?.tag, 'tag', 'recv');
    const into = options?.into;
    if (into !== undefined) checkTyped(into, 'recv');
    const limit = waitLimit(options, 'recv');
    const ch = this._peer(source, 'recv');
    let m: Message;
    try {
      m = await this._hold(ch === null ? this._self.take(tag, limit) : ch.recv(tag, SPACE_USER, limit));
    } catch (err) {
      throw this._failure ?? err;
    }
    return unpack(m, source, tag, into);
  }

  /**
   * send(data, dest) and recv(source) at once (MPI_Sendrecv): the step of a ring or a shift, which cannot
   * deadlock however the ranks pair up. Resolves with what recv() resolves with.
   */
  sendrecv<T extends coll.NumericArray>(data: coll.NumericArray, dest: number, source: number, options: SendrecvOptions & { into: T }): Promise<T>;
  sendrecv(data: coll.NumericArray, dest: number, source: number, options?: SendrecvOptions & { into?: undefined }): Promise<coll.NumericArray>;
  async sendrecv(data: coll.NumericArray, dest: number, source: number, options: SendrecvOptions & { into?: coll.NumericArray } = {}): Promise<coll.NumericArray> {
    checkTyped(data, 'sendrecv');
    const sendTag = userTag(options?.sendTag, 'sendTag', 'sendrecv');
    const recvTag = userTag(options?.recvTag, 'recvTag', 'sendrecv');
    this._peer(dest, 'sendrecv');
    this._peer(source, 'sendrecv');
    const wait = { timeoutMs: options?.timeoutMs, signal: options?.signal };
    const [, got] = await Promise.all([this.send(data, dest, { tag: sendTag }), this.recv(source, { tag: recvTag, into: options?.into as coll.NumericArray, ...wait })]);
    return got;
  }

  /** The channel to `peer`, or null for this rank itself; checked. */
  private _peer(peer: number, operation: string): Channel | null {
    this._check(operation);
    if (peer === this.rank) return null;
    return this._channel(peer, operation);
  }

  /**
   * Every rank's `data` (the same length everywhere), rank r's at block r of a new array on the root; null on the
   * other ranks. Binomial tree (collectives.ts).
   */
  async gather<T extends coll.NumericArray>(data: T, root = 0, options?: CollectiveOptions): Promise<T | null> {
    checkTyped(data, 'gather');
    this._checkRoot(root, 'gather');
    let out: Uint8Array | null = null;
    await this._collective({ kind: 'gather', data, root }, async (t, tag) => {
      out = await coll.gather(t, tag, coll.bytesOf(data), root);
    }, options);
    return out === null ? null : (typedFrom(elementTypeOf(data), out) as T);
  }

  /** Every rank's `data` (the same length everywhere), rank r's at block r of a new array, on every rank. */
  async allgather<T extends coll.NumericArray>(data: T, options?: CollectiveOptions): Promise<T> {
    checkTyped(data, 'allgather');
    const B = data.byteLength;
    const all = new Uint8Array(B * this.size);
    all.set(coll.bytesOf(data), B * this.rank);
    await this._collective({ kind: 'allgather', data }, (t, tag) => coll.allgather(t, tag, all, B), options);
    return typedFrom(elementTypeOf(data), all) as T;
  }

  /**
   * Combines `data` element-wise over every rank into `data` on the root (which it resolves with); the other
   * ranks' `data` is left as it was, and they resolve with null. Operations as allreduce().
   */
  async reduce<T extends coll.NumericArray>(data: T, op: coll.ReduceOp = 'sum', root = 0, options?: CollectiveOptions): Promise<T | null> {
    checkTyped(data, 'reduce');
    checkOp(data, op, 'reduce');
    this._checkRoot(root, 'reduce');
    await this._collective({ kind: 'reduce', data, op, root }, (t, tag) => coll.reduce(t, tag, data, op, root), options);
    return this.rank === root ? data : null;
  }

  /**
   * Block r of the root's `send` (size equal blocks of recv.length) into `recv` on rank r; resolves with `recv`.
   * `send` is read on the root only (null elsewhere is fine); it has recv's element type.
   */
  async scatter<T extends coll.NumericArray>(send: T | null, recv: T, root = 0, options?: CollectiveOptions): Promise<T> {
    checkTyped(recv, 'scatter');
    this._checkRoot(root, 'scatter');
    if (this.rank === root) {
      checkTyped(send, 'scatter');
      if (elementTypeOf(send!) !== elementTypeOf(recv) || send!.length !== recv.length * this.size) {
        throw new NdError('ERR_ND_OUT_OF_RANGE', 0, 'scatter', `scatter: the root's send must be a ${elementTypeOf(recv)} of ${recv.length * this.size} (recv's length times the job size ${this.size}), got a ${elementTypeOf(send!)} of ${send!.length}`);
      }
    }
    const recvBytes = coll.bytesOf(recv);
    await this._collective({ kind: 'scatter', data: recv, root }, (t, tag) => coll.scatter(t, tag, this.rank === root ? coll.bytesOf(send!) : null, recvBytes, root), options);
    return recv;
  }

  /**
   * Block r of `data` (size equal blocks) combined element-wise over every rank, as a new array on rank r
   * (MPI_Reduce_scatter_block); `data` is left as it was. Operations as allreduce().
   */
  async reduceScatter<T extends coll.NumericArray>(data: T, op: coll.ReduceOp = 'sum', options?: CollectiveOptions): Promise<T> {
    checkTyped(data, 'reduceScatter');
    checkOp(data, op, 'reduceScatter');
    if (data.length % this.size !== 0) {
      throw new NdError('ERR_ND_OUT_OF_RANGE', 0, 'reduceScatter', `reduceScatter: data's length must be a multiple of the job size ${this.size} (one block per rank), got ${data.length}`);
    }
    const out = typedFrom(elementTypeOf(data), new Uint8Array(data.byteLength / this.size)) as T;
    await this._collective({ kind: 'reduceScatter', data, op }, (t, tag) => coll.reduceScatter(t, tag, data, out, op), options);
    return out;
  }

  /** Block i of `send` goes to rank i; block j of `recv` comes from rank j (blocks: length / size). */
  async alltoall<T extends coll.NumericArray>(send: T, recv: T, options?: CollectiveOptions): Promise<T> {
    checkTyped(send, 'alltoall');
    checkTyped(recv, 'alltoall');
    if (send.byteLength !== recv.byteLength || send.length % this.size !== 0) {
      throw new NdError('ERR_ND_OUT_OF_RANGE', 0, 'alltoall', `alltoall: send and recv must have the same length, a multiple of the job size ${this.size} (got ${send.length} and ${recv.length})`);
    }
    await this._collective({ kind: 'alltoall', data: send }, (t, tag) => coll.alltoall(t, tag, coll.bytesOf(send), coll.bytesOf(recv)), options);
    return recv;
  }

  /**
   * Allocates and registers `bytes` on every rank and exchanges what the others need to reach them, in one
   * collective call (like MPI_Win_allocate). Every rank must call it with its own size (sizes may differ).
   */
  allocateWindow(bytes: number, options: WindowOptions & CollectiveOptions = {}): Promise<Window> {
    return this._hold(this._allocateWindow(bytes, options));
  }

  private async _allocateWindow(bytes: number, options: WindowOptions & CollectiveOptions): Promise<Window> {
    this._check('allocateWindow');
    if (typeof options !== 'object' || options === null) throw new NdError('ERR_ND_INVALID_ARGUMENT', 0, 'allocateWindow', 'allocateWindow: options must be an object');
    const wait = { timeoutMs: options.timeoutMs, signal: options.signal };
    waitLimit(wait, 'allocateWindow'); // checked before anything is allocated
    if (!Number.isSafeInteger(bytes) || bytes < 1) throw new NdError('ERR_ND_OUT_OF_RANGE', 0, 'allocateWindow', `allocateWindow: bytes must be a positive integer, got ${String(bytes)}`);
    const region = await this.adapter.allocateMemory(bytes, { remoteWrite: options.remoteWrite ?? true, remoteRead: options.remoteRead ?? true });
    const id = ++this._windowSeq;
    let notes: MemoryRegion;
    try {
      // Its notification area (lib/job/window.ts): peers on this host write flags into it, this rank its 1 and acks.
      notes = await this.adapter.allocateMemory(notesBytes(this.size), { remoteWrite: true });
    } catch (err) {
      await region.deregister().catch(() => undefined);
      throw err;
    }
    const mine = Window._describe(region, bytes, notes);
    const all = new Uint8Array(32 * this.size);
    try {
      await this._collective({ kind: 'allocateWindow' }, async (t, tag) => {
        all.set(mine, 32 * this.rank);
        await allgatherBytes(t, tag, all, 32);
      }, wait);
    } catch (err) {
      await region.deregister().catch(() => undefined);
      await notes.deregister().catch(() => undefined);
      throw err;
    }
    const w = new Window(this, id, region, all, notes);
    this._windows.set(id, w);
    this._windowList.push(w);
    this._windowsMade = id;
    this._early.get(id)?.forEach((n, peer) => n > 0 && w._notified(peer, n));
    this._early.delete(id);
    return w;
  }

  private _checkRoot(root: number, operation: string): void {
    if (!Number.isInteger(root) || root < 0 || root >= this.size) throw new NdError('ERR_ND_OUT_OF_RANGE', 0, operation, `${operation}: root must be 0..${this.size - 1}, got ${String(root)}`);
  }

  /** Resolves with the job's failure when one happens (never resolves otherwise). */
  get failed(): Promise<JobError> {
    if (this._failure) return Promise.resolve(this._failure);
    return new Promise((resolve) => this._failWaiters.add(resolve));
  }

  /**
   * Leaves the job: a barrier with the others (skipped when the job failed), then closes the connections and
   * the adapter and tells the launcher (PMI finalize). Idempotent. Bounded: when the other ranks do not reach
   * close() within `timeoutMs` (default: join's) or `signal` aborts, everything is closed all the same, without
   * the launcher's goodbye, and close() rejects with ERR_ND_JOB_TIMEOUT (ERR_ND_ABORTED).
   */
  close(options: { timeoutMs?: number; signal?: AbortSignal } = {}): Promise<void> {
    if (this._closing) return this._closing;
    const timeoutMs = options?.timeoutMs ?? this._timeoutMs;
    try {
      checkWaitOptions('close', timeoutMs, options?.signal);
    } catch (err) {
      return Promise.reject(err);
    }
    return (this._closing = this._teardown(true, limitOf(timeoutMs, options?.signal)));
  }

  /** @internal */
  async _teardown(graceful: boolean, limit: Limit = limitOf(this._timeoutMs)): Promise<void> {
    unclosed.delete(this);
    this._keep(true); // what close() waits for keeps the process alive
    // From here a peer's going is expected: the ranks that leave the final barrier first disconnect while others
    // still wait in it (for messages from other ranks), and that must not break the job for those.
    for (const c of this._channels) if (c) c.closing = true;
    this._closed = true;
    let late: JobError | null = null;
    if (graceful && this._failure === null && this._channels.length > 0) {
      try {
        await bounded(this._collective({ kind: 'close' }, (t, tag) => coll.barrier(t, tag)), limit, 'close', 'the other ranks did not reach close()');
      } catch (err) {
        if (err instanceof NdError && (err.code === 'ERR_ND_JOB_TIMEOUT' || err.code === 'ERR_ND_ABORTED')) late = err;
      }
    }
    debug(this.rank, 'closing: barrier done');
    const orderly = graceful && this._failure === null && late === null;
    for (const w of this._windows.values()) w._abort(new NdError('ERR_ND_CLOSED', 0, 'window', 'window: the job is closed'));
    await Promise.all(this._scratch.splice(0).map((r) => r.deregister().catch(() => undefined)));
    // One side disconnects each connection: the higher rank (which connected). The lower one waits for it to
    // go (bounded), so the two ends never tear one connection down at the same time.
    await Promise.all(this._channels.map(async (c) => {
      if (!c) return;
      const connector = c.qp.connector;
      for (let i = 0; i < 100 && c.qp.outstanding.initiator > 0; i++) await new Promise((r) => setTimeout(r, 10));
      if (connector && c.peer > this.rank && orderly) {
        let timer: NodeJS.Timeout | undefined;
        await Promise.race([connector.disconnected, new Promise((r) => (timer = setTimeout(r, Math.max(0, Math.min(2000, limit.deadline - Date.now())))))]);
        clearTimeout(timer);
      }
      await connector?.disconnect().catch(() => undefined);
      debug(this.rank, `disconnected ${c.peer}`);
      await c.qp.close().catch(() => undefined);
      debug(this.rank, `qp closed ${c.peer}`);
    }));
    // Collectives given up on: what they posted is flushed with the queue pairs; their registrations go now.
    await Promise.all(this._abandoned);
    await this.adapter?.close().catch(() => undefined);
    debug(this.rank, 'closing: adapter closed');
    if (orderly) {
      await bounded(this._boot.finalize(limit), limit, 'close', 'the launcher did not acknowledge finalize', () => this._boot.destroy()).catch((err) => {
        debug(this.rank, `finalize failed: ${err}`);
        this._boot.destroy();
      });
    } else this._boot.destroy();
    debug(this.rank, 'finalized');
    if (late) throw late;
  }

  async [Symbol.asyncDispose](): Promise<void> {
    await this.close();
  }
}

/** Every rank contributes `block` bytes at block*rank of `all`; afterwards all holds every rank's (ring). */
async function allgatherBytes(t: coll.Transport, tag: number, all: Uint8Array, block: number): Promise<void> {
  const { rank, size } = t;
  const part = (i: number) => all.subarray(i * block, (i + 1) * block);
  for (let k = 0; k < size - 1; k++) {
    const out = (rank - k + size) % size;
    const inn = (rank - k - 1 + size) % size;
    const [, got] = await Promise.all([t.send((rank + 1) % size, tag, part(out)), t.recv((rank - 1 + size) % size, tag)]);
    part(inn).set(got);
  }
}

/** The error an abort message carries (see Job._fail); `from` sent it. */
function abortNoteError(text: string, from: number): JobError {
  let e: { code?: unknown; status?: unknown; operation?: unknown; message?: unknown; peer?: unknown } = {};
  try {
    e = JSON.parse(text);
  } catch {
    // not JSON: the text alone
  }
  const message = typeof e.message === 'string' ? e.message : `job: rank ${from} failed: ${text.slice(0, 200)}`;
  const code = typeof e.code === 'string' && /^(ND_|ERR_ND_)[A-Z0-9_]+$/.test(e.code) ? e.code : 'ERR_ND_JOB_PEER';
  const err: JobError = new NdError(code as NdErrorCode, typeof e.status === 'number' ? e.status >>> 0 : 0, typeof e.operation === 'string' ? e.operation : 'job', message);
  err.peer = Number.isInteger(e.peer) && (e.peer as number) >= 0 ? (e.peer as number) : from;
  return err;
}

/** A user tag: 0 when not given, else an integer 0..2^31-1 (MPI_TAG_UB is at least 32767, MPI 4.1 §9.1.2). */
function userTag(tag: unknown, name: string, operation: string): number {
  if (tag === undefined) return 0;
  if (typeof tag !== 'number' || !Number.isInteger(tag) || tag < 0 || tag > 0x7fffffff) {
    throw new NdError('ERR_ND_OUT_OF_RANGE', 0, operation, `${operation}: ${name} must be an integer 0..2147483647, got ${typeof tag === 'number' ? tag : JSON.stringify(tag) ?? typeof tag}`);
  }
  return tag;
}

/** A received message as recv() returns it (see recv()). */
function unpack(m: Message, source: number, tag: number, into: coll.NumericArray | undefined): coll.NumericArray {
  const s = decodeSignature(m.sig);
  if (s === null || s.kind !== 'send') throw peerError(source, 'recv', `sent a message this rank cannot read (tag ${tag}): a different netdirect version?`);
  if (into === undefined) return typedFrom(s.type, m.bytes);
  if (s.type !== elementTypeOf(into)) {
    throw mismatchError('recv', `recv: rank ${source} sent a ${s.type} of ${s.count} (tag ${tag}), into is a ${elementTypeOf(into)}: receive into a ${s.type}, or without into`, source);
  }
  if (m.bytes.byteLength > into.byteLength) {
    throw new NdError('ERR_ND_OUT_OF_RANGE', 0, 'recv', `recv: the message from rank ${source} (tag ${tag}) was larger than into: ${s.type} of ${s.count}, into holds ${into.length}; the message was consumed`);
  }
  coll.bytesOf(into).set(m.bytes);
  return into.subarray(0, s.count) as coll.NumericArray;
}

/** Messages a rank sends to itself, by tag, in order (the Channel's boxes without the wire). */
class SelfBox {
  private readonly boxes = new Map<number, { ready: Message[]; waiters: Array<{ resolve: (m: Message) => void; reject: (e: Error) => void }> }>();
  private failure: Error | null = null;

  put(tag: number, m: Message): void {
    const b = this.boxes.get(tag);
    const w = b?.waiters.shift();
    if (w) return w.resolve(m);
    if (b) b.ready.push(m);
    else this.boxes.set(tag, { ready: [m], waiters: [] });
  }

  take(tag: number, limit?: Limit): Promise<Message> {
    if (this.failure) return Promise.reject(this.failure);
    let b = this.boxes.get(tag);
    const m = b?.ready.shift();
    if (m !== undefined) return Promise.resolve(m);
    if (b === undefined) this.boxes.set(tag, (b = { ready: [], waiters: [] }));
    const box = b;
    let waiter!: { resolve: (m: Message) => void; reject: (e: Error) => void };
    const got = new Promise<Message>((resolve, reject) => box.waiters.push((waiter = { resolve, reject })));
    return bounded(got, limit, 'recv', `no message from this rank with tag ${tag} came`, () => {
      const i = box.waiters.indexOf(waiter);
      if (i >= 0) box.waiters.splice(i, 1);
    });
  }

  abort(err: Error): void {
    this.failure ??= err;
    for (const b of this.boxes.values()) for (const w of b.waiters.splice(0)) w.reject(err);
  }
}

/** recv()'s options: giving up (timeoutMs, signal) leaves the job going (see recv()). */
export interface RecvOptions extends WaitOptions {
  tag?: number;
}
export interface SendrecvOptions extends WaitOptions {
  sendTag?: number;
  recvTag?: number;
}
/**
 * A collective's { timeoutMs, signal }. Giving up on a collective fails the job on every rank
 * (ERR_ND_JOB_ABANDONED, see Job._collective); a signal already aborted when the call is made only refuses the
 * call (ERR_ND_ABORTED), which then never started, and the job goes on.
 */
export type CollectiveOptions = WaitOptions;

function checkOp(data: coll.NumericArray, op: unknown, operation: string): void {
  if (!coll.REDUCE_OPS.includes(op as coll.ReduceOp)) throw new NdError('ERR_ND_INVALID_ARGUMENT', 0, operation, `${operation}: op must be one of ${coll.REDUCE_OPS.join('|')}, got ${JSON.stringify(op)}`);
  if (coll.BITWISE_OPS.includes(op as coll.ReduceOp) && (data instanceof Float32Array || data instanceof Float64Array)) {
    throw new NdError('ERR_ND_INVALID_ARGUMENT', 0, operation, `${operation}: '${String(op)}' is bitwise, for integer arrays only; ${elementTypeOf(data)} holds floating-point numbers`);
  }
}

function checkTyped(a: unknown, operation: string): void {
  if (!ArrayBuffer.isView(a) || a instanceof DataView) {
    throw new NdError('ERR_ND_INVALID_ARGUMENT', 0, operation, `${operation}: data must be a typed array (Float64Array, Int32Array, ...), got ${a === null ? 'null' : typeof a}`);
  }
}

export { ERR_ND_JOB_BOOTSTRAP };
export type { Local, MemoryRegion };

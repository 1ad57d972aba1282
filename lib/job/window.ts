// A window: memory allocated and registered on every rank by one collective call, reachable by rank and
// offset. put() is an RDMA Write, get() an RDMA Read, both on the queue pair to that rank.
//
// Notification: put(rank, offset, data, { notify: true }) counts the put at the target once its data is there.
// waitNotifications(from, n) resolves once n such puts from rank `from` have landed (and consumes them). Two ways,
// chosen per put (docs/job.md "Windows and notification"):
// - Over a connection through shared memory (qp.transport 'shm'): a flag. Every window has beside it a small
//   notification area per rank (FLAGS one-byte flags per peer, then an acknowledgement byte per peer). The put
//   RDMA-Writes its data, then a 1 (the channel's constant byte) into the next flag of this rank's ring of flags
//   in the target's area: the shared-memory transport places Writes in order (the initiator's stores, the last byte released; or the
//   target's receive stream, in order), so a flag that reads 1 means the data is in place. The target finds flags
//   by reading its own memory (its progress loop, waitNotifications), clears each and counts it; every FLAGS/2
//   flags it writes back how far it got (a byte, in the sender's area), and the sender writes a flag only where
//   the target has cleared the one before (else it takes the other way).
// - Otherwise (TCP, another provider, the flags all in use, or a target that does not poll its flags while it
//   waits and asked for Sends: lib/job/channel.ts wake): after the Write and on the same queue pair, a
//   small Send that counts it (lib/job/channel.ts, type "notify"). RDMAP orders them for the target (RFC 5040
//   §5.5, Ordering and Completions): a Send is delivered at the Data Sink only once every message sent before it
//   on the same stream has been placed, so when the count reaches the target the data is in its memory.
// Each put is counted by exactly one of the two, so none is lost or counted twice.

import { MemoryRegion, NdError, type Local, type PreparedRequest, type RemoteMemory, type Segment } from '../index.js';
import { whenAborted } from '../errors.js';
import type { Channel } from './channel.js';
import type { Job } from './job.js';
import { abortError, checkWaitOptions, limitOf, timeoutError, type JobError, type WaitOptions } from './errors.js';

export interface WindowOptions {
  /** Let other ranks put into this rank's window (default true). */
  remoteWrite?: boolean;
  /** Let other ranks get from it (default true). */
  remoteRead?: boolean;
}

export interface PutOptions {
  /** Tell the target once the data has landed (see waitNotifications). */
  notify?: boolean;
}

type Data = Local | ArrayBufferView;

/** A waitNotifications() that waits: its promise's functions, and its timer and signal listener if it has them. */
interface Waiter {
  need: number;
  resolve: () => void;
  reject: (e: Error) => void;
  timer: NodeJS.Timeout | undefined;
  forget: (() => void) | undefined;
}

/** Settles a waiter (with `err`: rejects), its timer and signal listener let go. */
function settle(w: Waiter, err?: Error): void {
  if (w.timer !== undefined) clearTimeout(w.timer);
  w.forget?.();
  if (err === undefined) w.resolve();
  else w.reject(err);
}

/** Flags per sending peer in a rank's notification area (a ring: flag k counts that peer's put k mod FLAGS). */
export const FLAGS = 64;
const HALF = FLAGS / 2;
/** Bytes of a notification area for a job of `size` ranks: the flags, an ack byte per peer, ack scratch per peer. */
export const notesBytes = (size: number): number => size * (FLAGS + 2);
const ignore = (): void => undefined;
const NO_OPTIONS = Object.freeze({});

export class Window implements AsyncDisposable {
  readonly id: number;
  /** This rank's part of the window (registered memory). */
  readonly region: MemoryRegion;
  private readonly remotes: RemoteMemory[] = [];
  private readonly counts: number[];
  private readonly waiters: Waiter[][];
  private failure: Error | null = null;
  private freeing: Promise<void> | null = null;
  /** This rank's notification area (see the top of this file) and its bytes. */
  private readonly notes: MemoryRegion;
  private readonly flags: Uint8Array;
  /** Every rank's notification area. */
  private readonly noteRemotes: RemoteMemory[] = [];
  /** Offsets in an area: the ack bytes (by the acknowledging rank), the ack scratch (by peer). */
  private readonly ackAt: number;
  private readonly scratchAt: number;
  /** Flags taken from each peer (receiving side) and written to each peer (sending side). */
  private readonly taken: number[];
  private readonly flagged: number[];
  /** Per peer, made on first use: the flag Write (prepared: only the offset changes) and the ack Write's source. */
  private readonly flagWrites: Array<PreparedRequest | null>;
  private readonly ackSources: Array<Segment | null>;
  /** Peers with a waiter (their flags are read by every round of the job's progress loop). */
  private waiting = 0;

  /** @internal Use job.allocateWindow(). */
  constructor(
    private readonly job: Job,
    id: number,
    region: MemoryRegion,
    table: Uint8Array,
    notes: MemoryRegion,
  ) {
    this.id = id;
    this.region = region;
    this.notes = notes;
    this.flags = notes.buffer;
    const size = job.size;
    this.ackAt = size * FLAGS;
    this.scratchAt = this.ackAt + size;
    const view = new DataView(table.buffer, table.byteOffset, table.byteLength);
    for (let r = 0; r < size; r++) {
      this.remotes.push({ address: view.getBigUint64(32 * r), token: view.getUint32(32 * r + 8), length: view.getUint32(32 * r + 12) });
      this.noteRemotes.push({ address: view.getBigUint64(32 * r + 16), token: view.getUint32(32 * r + 24), length: view.getUint32(32 * r + 28) });
    }
    this.counts = new Array(size).fill(0);
    this.waiters = Array.from({ length: size }, () => []);
    this.taken = new Array(size).fill(0);
    this.flagged = new Array(size).fill(0);
    this.flagWrites = new Array(size).fill(null);
    this.ackSources = new Array(size).fill(null);
  }

  /** @internal What allocateWindow() puts in the table for this rank: its part and its notification area. */
  static _describe(region: MemoryRegion, bytes: number, notes: MemoryRegion): Uint8Array {
    const mine = new Uint8Array(32);
    const v = new DataView(mine.buffer);
    v.setBigUint64(0, region.address);
    v.setUint32(8, region.remoteToken);
    v.setUint32(12, bytes >>> 0);
    v.setBigUint64(16, notes.address);
    v.setUint32(24, notes.remoteToken);
    v.setUint32(28, notes.length);
    return mine;
  }

  /** This rank's bytes of the window. */
  get buffer(): Uint8Array {
    return this.region.buffer;
  }

  /** The size of rank `rank`'s part. */
  length(rank: number): number {
    return this.remote(rank, 'length').length;
  }

  private remote(rank: number, operation: string): RemoteMemory {
    if (this.failure) throw this.failure;
    if (this.freeing) throw new NdError('ERR_ND_CLOSED', 0, operation, `${operation}: the window is freed`);
    const r = this.remotes[rank];
    if (!Number.isInteger(rank) || r === undefined) throw new NdError('ERR_ND_OUT_OF_RANGE', 0, operation, `${operation}: rank must be 0..${this.job.size - 1}, got ${String(rank)}`);
    return r;
  }

  private checkRange(rank: number, offset: number, length: number, operation: string): RemoteMemory {
    const r = this.remote(rank, operation);
    if (!Number.isSafeInteger(offset) || offset < 0 || offset + length > r.length) {
      throw new NdError('ERR_ND_OUT_OF_RANGE', 0, operation, `${operation}: [${offset}, ${offset + length}) is outside rank ${rank}'s ${r.length}-byte window`);
    }
    return r;
  }

  /**
   * RDMA-Writes `data` (a registered region/segment, or any typed array, staged through a registered copy) into
   * rank `rank`'s window at `offset`. Resolves when the Write completed at this side.
   */
  async put(rank: number, offset: number, data: Data, options: PutOptions = {}): Promise<void> {
    const op = 'put';
    checkData(data, op);
    if (ArrayBuffer.isView(data)) {
      const bytes = new Uint8Array(data.buffer, data.byteOffset, data.byteLength);
      this.checkRange(rank, offset, bytes.byteLength, op);
      if (rank === this.job.rank) return this.putSelf(offset, bytes, options);
      const staging = await this.job.adapter.allocateMemory(Math.max(1, bytes.byteLength));
      staging.buffer.set(bytes);
      try {
        return await this.put(rank, offset, staging.slice(0, bytes.byteLength), options);
      } finally {
        await staging.deregister();
      }
    }
    const length = localLength(data);
    const r = this.checkRange(rank, offset, length, op);
    if (rank === this.job.rank) return this.putSelf(offset, localBytes(data), options);
    const ch = this.job._channel(rank, op);
    try {
      const written = ch.qp.write(data, r, offset === 0 ? undefined : { offset });
      if (options.notify && ch.sameHost && !ch.pokes && this.flag(rank, ch)) {
        await written;
      } else if (options.notify) {
        // Both are posted before either is awaited (the notify Send follows the Write on the queue pair); the
        // notify's rejection is handled inside the channel, so awaiting one after the other loses no failure.
        const told = ch.notify(this.id, 1);
        await written;
        await told;
      } else {
        await written;
      }
    } catch (err) {
      throw this.job.failure ?? rankError(rank, op, err);
    }
  }

  /**
   * Same host: writes the next flag of this rank's ring in `rank`'s notification area, after the data Write just
   * posted; false when that flag may still be uncleared there (the notify Send counts this put instead).
   */
  private flag(rank: number, ch: Channel): boolean {
    const n = this.flagged[rank];
    // How far `rank` has cleared our flags: its ack byte counts halves of the ring, modulo 256.
    const half = Math.floor(n / HALF);
    const cleared = (half - ((half - this.flags[this.ackAt + rank]) & 255)) * HALF;
    if (n - cleared >= FLAGS) return false;
    const me = this.job.rank;
    const at = me * FLAGS + (n % FLAGS);
    let w = this.flagWrites[rank];
    if (w === null) w = this.flagWrites[rank] = ch.qp.prepare('write', ch.one, this.noteRemotes[rank], { silent: true });
    try {
      w.post(at, 1);
    } catch (err) {
      if (!(err instanceof NdError) || err.code !== 'ND_NO_MORE_ENTRIES') throw err;
      // Requests wait for a slot of the queue pair: the flag waits behind the data Write, in order.
      ch.qp.write(ch.one, this.noteRemotes[rank], { offset: at }).catch(ignore);
    }
    this.flagged[rank] = n + 1;
    return true;
  }

  /**
   * @internal Takes the flags `from` wrote (same host, see flag()), clears them and counts them; every half ring
   * tells `from` how far it got. Returns how many it took.
   */
  _take(from: number): number {
    const flags = this.flags;
    const base = from * FLAGS;
    let c = this.taken[from];
    const start = c;
    while (Atomics.load(flags, base + (c % FLAGS)) === 1) {
      flags[base + (c % FLAGS)] = 0;
      c++;
    }
    if (c === start) return 0;
    this.taken[from] = c;
    if (Math.floor(c / HALF) !== Math.floor(start / HALF)) this.ack(from, c);
    this._notified(from, c - start);
    return c - start;
  }

  /** Tells `from` how many of its flags this rank cleared (in halves of the ring, modulo 256; see flag()). */
  private ack(from: number, taken: number): void {
    const ch = this.job._channels[from];
    if (!ch || ch.failed || this.failure || this.freeing) return;
    let src = this.ackSources[from];
    if (src === null) src = this.ackSources[from] = this.notes.slice(this.scratchAt + from, 1);
    this.flags[this.scratchAt + from] = Math.floor(taken / HALF) & 255;
    // Inline: the byte is copied when posted, so the next ack may change the scratch at once.
    ch.qp.write(src, this.noteRemotes[from], { offset: this.ackAt + this.job.rank, inline: true }).catch(ignore);
  }

  /** @internal Takes the flags of every peer with a waiter (the progress loop's round); whether any came. */
  _takeWaited(): boolean {
    if (this.waiting === 0) return false;
    let moved = false;
    for (let p = 0; p < this.waiters.length; p++) if (this.waiters[p].length > 0 && this._take(p) > 0) moved = true;
    return moved;
  }

  /** @internal Takes every peer's flags; the peers that had some. */
  _takeAll(): void {
    for (let p = 0; p < this.waiters.length; p++) if (p !== this.job.rank) this._take(p);
  }

  /** @internal Calls `f` with every peer a waiter of this window waits for. */
  _waitedPeers(f: (peer: number) => void): void {
    if (this.waiting === 0) return;
    for (let p = 0; p < this.waiters.length; p++) if (this.waiters[p].length > 0) f(p);
  }

  private putSelf(offset: number, bytes: Uint8Array, options: PutOptions): void {
    this.region.buffer.set(bytes, offset);
    if (options.notify) this._notified(this.job.rank, 1);
  }

  /** RDMA-Reads `length(data)` bytes of rank `rank`'s window at `offset` into `data`. */
  async get(rank: number, offset: number, data: Data): Promise<void> {
    const op = 'get';
    checkData(data, op);
    if (ArrayBuffer.isView(data)) {
      const bytes = new Uint8Array(data.buffer, data.byteOffset, data.byteLength);
      this.checkRange(rank, offset, bytes.byteLength, op);
      if (rank === this.job.rank) {
        bytes.set(this.region.buffer.subarray(offset, offset + bytes.byteLength));
        return;
      }
      const staging = await this.job.adapter.allocateMemory(Math.max(1, bytes.byteLength));
      try {
        await this.get(rank, offset, staging.slice(0, bytes.byteLength));
        bytes.set(staging.buffer.subarray(0, bytes.byteLength));
      } finally {
        await staging.deregister();
      }
      return;
    }
    const length = localLength(data);
    const r = this.checkRange(rank, offset, length, op);
    if (rank === this.job.rank) {
      localBytes(data).set(this.region.buffer.subarray(offset, offset + length));
      return;
    }
    const ch = this.job._channel(rank, op);
    try {
      await ch.qp.read(data, r, { offset });
    } catch (err) {
      throw this.job.failure ?? rankError(rank, op, err);
    }
  }

  /**
   * Resolves once `count` (a non-negative safe integer; 0 resolves at once) notifying puts from rank `from` have
   * landed in this rank's window, and consumes them. Bounded by `timeoutMs` (ERR_ND_JOB_TIMEOUT) and `signal`
   * (ERR_ND_ABORTED); a waiter that ends so consumes nothing. Never throws: every failure, bad arguments and a
   * failed or closed job included, is a rejection.
   */
  waitNotifications(from: number, count = 1, options: { timeoutMs?: number; signal?: AbortSignal } = NO_OPTIONS): Promise<void> {
    const op = 'waitNotifications';
    try {
      this.remote(from, op);
      if (!Number.isSafeInteger(count) || count < 0) throw new NdError('ERR_ND_OUT_OF_RANGE', 0, op, `${op}: count must be a non-negative safe integer, got ${String(count)}`);
      if (typeof options !== 'object' || options === null) throw new NdError('ERR_ND_INVALID_ARGUMENT', 0, op, `${op}: options must be an object`);
      const { timeoutMs, signal } = options;
      checkWaitOptions(op, timeoutMs, signal, 0);
      if (this.failure) throw this.failure;
      if (this.counts[from] < count && from !== this.job.rank) this._take(from);
      if (this.counts[from] >= count) {
        this.counts[from] -= count;
        return Promise.resolve();
      }
      if (signal?.aborted) throw abortError(op, signal);
      if (timeoutMs === 0) throw timeoutError(op, `${count} notifications from rank ${from} did not arrive`, limitOf(0));
      let waiter!: Waiter;
      const p = new Promise<void>((resolve, reject) => (waiter = { need: count, resolve, reject, timer: undefined, forget: undefined }));
      const list = this.waiters[from];
      if (timeoutMs !== undefined || signal) {
        const give = (err: Error) => {
          const i = list.indexOf(waiter);
          if (i >= 0) {
            list.splice(i, 1);
            if (list.length === 0) this.waiting--;
          }
          settle(waiter, err);
          // The waiter before which others queued is gone: those behind it may be satisfied now.
          this._notified(from, 0);
        };
        if (timeoutMs !== undefined) waiter.timer = setTimeout(() => give(timeoutError(op, `${count} notifications from rank ${from} did not arrive`, limitOf(timeoutMs))), timeoutMs);
        if (signal) waiter.forget = whenAborted(signal, () => give(abortError(op, signal))); // one listener per signal (lib/errors.ts)
      }
      if (list.push(waiter) === 1) this.waiting++;
      if (from !== this.job.rank) this.job._waitingFor(from);
      return p;
    } catch (err) {
      return Promise.reject(err);
    }
  }

  /** Notifying puts from `from` that landed and nobody waited for yet. */
  notifications(from: number): number {
    if (this.counts[from] === undefined) return 0;
    if (from !== this.job.rank && this.failure === null && this.freeing === null) this._take(from);
    return this.counts[from];
  }

  /** @internal */
  _notified(from: number, count: number): void {
    this.counts[from] += count;
    const list = this.waiters[from];
    while (list.length > 0 && this.counts[from] >= list[0].need) {
      const w = list.shift()!;
      this.counts[from] -= w.need;
      if (list.length === 0) this.waiting--;
      settle(w);
    }
  }

  /** @internal */
  _abort(err: Error): void {
    this.failure ??= err;
    this.waiting = 0;
    for (const list of this.waiters) for (const w of list.splice(0)) settle(w, err);
  }

  /**
   * Collective: waits for every rank (barrier), then deregisters this rank's part. Idempotent. `{ timeoutMs,
   * signal }` bound the barrier as for every collective (giving up fails the job); the part is deregistered
   * either way.
   */
  free(options?: WaitOptions): Promise<void> {
    return (this.freeing ??= (async () => {
      try {
        if (this.job.failure === null) await this.job.barrier(options);
      } finally {
        this._abort(new NdError('ERR_ND_CLOSED', 0, 'window', 'window: freed'));
        this.job._windows.delete(this.id);
        const list = this.job._windowList;
        if (list.includes(this)) list.splice(list.indexOf(this), 1);
        await this.region.deregister().catch(() => undefined);
        await this.notes.deregister().catch(() => undefined);
      }
    })());
  }

  async [Symbol.asyncDispose](): Promise<void> {
    await this.free();
  }
}

function rankError(rank: number, operation: string, err: unknown): JobError {
  if (err instanceof NdError && !err.isStatus) return err;
  const e: JobError = new NdError(
    err instanceof NdError ? err.code : 'ERR_ND_JOB_PEER',
    err instanceof NdError ? err.status : 0,
    operation,
    `${operation} to rank ${rank} failed: ${(err as Error).message}`,
    { cause: err },
  );
  e.peer = rank;
  return e;
}

const isSegment = (d: unknown): boolean =>
  typeof d === 'object' && d !== null && (d as { region?: unknown }).region instanceof MemoryRegion && typeof (d as { offset?: unknown }).offset === 'number';

/** put()/get() data: a typed array, a region, a segment or a list of regions and segments; else an error named for the call. */
function checkData(data: unknown, operation: string): void {
  if (data === null || ArrayBuffer.isView(data) || data instanceof MemoryRegion || isSegment(data)) return;
  if (Array.isArray(data) && data.length > 0 && data.every((d) => d instanceof MemoryRegion || isSegment(d))) return;
  const numbers = Array.isArray(data) && data.length > 0 && data.every((d) => typeof d === 'number' || typeof d === 'bigint');
  throw new NdError(
    'ERR_ND_INVALID_ARGUMENT',
    0,
    operation,
    `${operation}: data must be a typed array (Float64Array, Uint8Array, a Buffer...), a MemoryRegion or a Segment (or an array of ` +
      `regions and segments), got ${Array.isArray(data) ? `an array of ${data.length}` : data === null ? 'null' : typeof data}` +
      (numbers ? `: wrap the numbers in a typed array, e.g. Float64Array.from([${data.slice(0, 3).join(', ')}${data.length > 3 ? ', ...' : ''}])` : ''),
  );
}

function localLength(data: Local): number {
  if (data === null) return 0;
  if (data instanceof MemoryRegion) return data.length;
  if (Array.isArray(data)) return data.reduce((n, d) => n + localLength(d), 0);
  return data.length;
}

function localBytes(data: Local): Uint8Array {
  if (data === null) return new Uint8Array(0);
  if (data instanceof MemoryRegion) return data.buffer;
  if (Array.isArray(data)) return Buffer.concat(data.map(localBytes));
  return data.region.buffer.subarray(data.offset, data.offset + data.length);
}

// The calls that wait keep the process alive while they wait (an idle job does not: Job._hold in lib/job/job.ts).
for (const name of ['put', 'get', 'waitNotifications'] as const) {
  const call = Window.prototype[name] as (this: Window, ...args: unknown[]) => Promise<void>;
  Object.defineProperty(Window.prototype, name, {
    value: function (this: Window, ...args: unknown[]): Promise<void> {
      return (this as unknown as { job: Job }).job._hold(call.apply(this, args));
    },
    writable: true,
    configurable: true,
  });
}

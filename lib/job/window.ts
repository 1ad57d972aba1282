// A window: memory allocated and registered on every rank by one collective call, reachable by rank and
// offset. put() is an RDMA Write, get() an RDMA Read, both on the queue pair to that rank.
//
// Notification: put(rank, offset, data, { notify: true }) posts, after the Write and on the same queue pair, a
// small Send that counts it (lib/job/channel.ts, type "notify"). RDMAP orders them for the target (RFC 5040
// §5.5, Ordering and Completions): a Send is delivered at the Data Sink only once every message sent before it
// on the same stream has been placed, so when the count reaches the target the data is in its memory.
// waitNotifications(from, n) resolves once n such puts from rank `from` have landed (and consumes them).

import { MemoryRegion, NdError, type Local, type RemoteMemory } from '../index.js';
import { whenAborted } from '../errors.js';
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

export class Window implements AsyncDisposable {
  readonly id: number;
  /** This rank's part of the window (registered memory). */
  readonly region: MemoryRegion;
  private readonly remotes: RemoteMemory[] = [];
  private readonly counts: number[];
  private readonly waiters: Array<Array<{ need: number; resolve: () => void; reject: (e: Error) => void }>>;
  private failure: Error | null = null;
  private freeing: Promise<void> | null = null;

  /** @internal Use job.allocateWindow(). */
  constructor(
    private readonly job: Job,
    id: number,
    region: MemoryRegion,
    table: Uint8Array,
  ) {
    this.id = id;
    this.region = region;
    const view = new DataView(table.buffer, table.byteOffset, table.byteLength);
    for (let r = 0; r < job.size; r++) {
      this.remotes.push({ address: view.getBigUint64(16 * r), token: view.getUint32(16 * r + 8), length: view.getUint32(16 * r + 12) });
    }
    this.counts = new Array(job.size).fill(0);
    this.waiters = Array.from({ length: job.size }, () => []);
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
      if (options.notify) {
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
  waitNotifications(from: number, count = 1, options: { timeoutMs?: number; signal?: AbortSignal } = {}): Promise<void> {
    const op = 'waitNotifications';
    try {
      this.remote(from, op);
      if (!Number.isSafeInteger(count) || count < 0) throw new NdError('ERR_ND_OUT_OF_RANGE', 0, op, `${op}: count must be a non-negative safe integer, got ${String(count)}`);
      if (typeof options !== 'object' || options === null) throw new NdError('ERR_ND_INVALID_ARGUMENT', 0, op, `${op}: options must be an object`);
      const { timeoutMs, signal } = options;
      checkWaitOptions(op, timeoutMs, signal, 0);
      if (this.failure) throw this.failure;
      if (this.counts[from] >= count) {
        this.counts[from] -= count;
        return Promise.resolve();
      }
      if (signal?.aborted) throw abortError(op, signal);
      if (timeoutMs === 0) throw timeoutError(op, `${count} notifications from rank ${from} did not arrive`, limitOf(0));
      return new Promise((resolve, reject) => {
        let timer: NodeJS.Timeout | undefined;
        let forget: (() => void) | undefined;
        const list = this.waiters[from];
        const cleanup = () => {
          clearTimeout(timer);
          forget?.();
        };
        const waiter = {
          need: count,
          resolve: () => {
            cleanup();
            resolve();
          },
          reject: (e: Error) => {
            cleanup();
            reject(e);
          },
        };
        const give = (err: Error) => {
          const i = list.indexOf(waiter);
          if (i >= 0) list.splice(i, 1);
          waiter.reject(err);
          // The waiter before which others queued is gone: those behind it may be satisfied now.
          this._notified(from, 0);
        };
        if (timeoutMs !== undefined) timer = setTimeout(() => give(timeoutError(op, `${count} notifications from rank ${from} did not arrive`, limitOf(timeoutMs))), timeoutMs);
        if (signal) forget = whenAborted(signal, () => give(abortError(op, signal))); // one listener per signal (lib/errors.ts)
        list.push(waiter);
      });
    } catch (err) {
      return Promise.reject(err);
    }
  }

  /** Notifying puts from `from` that landed and nobody waited for yet. */
  notifications(from: number): number {
    return this.counts[from] ?? 0;
  }

  /** @internal */
  _notified(from: number, count: number): void {
    this.counts[from] += count;
    const list = this.waiters[from];
    while (list.length > 0 && this.counts[from] >= list[0].need) {
      const w = list.shift()!;
      this.counts[from] -= w.need;
      w.resolve();
    }
  }

  /** @internal */
  _abort(err: Error): void {
    this.failure ??= err;
    for (const list of this.waiters) for (const w of list.splice(0)) w.reject(err);
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
        await this.region.deregister().catch(() => undefined);
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

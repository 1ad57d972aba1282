// CompletionQueue (IND2CompletionQueue). Completions of promise-API requests settle their promises; those of
// qp.post() requests become RawCompletion objects that cq.poll() returns. With completion 'thread' the poller
// thread takes completions off the CQ and raw ones wait here until poll(); with 'manual' only poll() dequeues.

import { markAsUntransferable } from 'node:worker_threads';
import { ERR_ND_CLOSED, ERR_ND_INVALID_ARGUMENT, ERR_ND_OUT_OF_RANGE, misuse } from './errors.js';
import type { NativeCompletionQueue } from './native.js';
import type { AdapterContext } from './context.js';
import type { QueuePair } from './queue-pair.js';
import { RECORD_WORDS, REQUEST_TYPES, type RequestType } from './records.js';
import { checkIndex, describe } from './validate.js';

/** Records the addon's poll() writes into at first; poll(max) for more grows the array (_grow) up to KEPT_RECORDS. */
const POLL_RECORDS = 256;
/** The largest records array a CQ keeps: a poll(max) for more calls the addon again while the array comes back full. */
const KEPT_RECORDS = 4096;

/**
 * What poll() returns when nothing completed: one shared empty array, not a new one per call. Not frozen: a frozen
 * array has an elements kind of its own, and a caller's `for (const c of cq.poll())` that meets both it and poll()'s
 * other arrays goes polymorphic, where V8 allocates an iterator result per element (measured: 56 more bytes of heap
 * per message in ndbench's post()+poll() loop). A caller that added to it keeps what it added: the next empty poll
 * returns a new array (nothing()).
 */
let empty: RawCompletion[] = [];
const nothing = (): RawCompletion[] => (empty.length === 0 ? empty : (empty = []));

/** A completion of a request posted with qp.post(). */
export interface RawCompletion {
  /** The request type ('send', 'receive', 'read', 'write', ...). */
  type: RequestType;
  /** 0 (ND_SUCCESS) or the ND status it failed with (ndStatusName() names it). */
  status: number;
  /** Bytes moved: received for a receive, the request's length for the others. */
  bytes: number;
  /** The `context` given to qp.post(). */
  context: unknown;
  /** The queue pair the request was posted on (null if it is gone). */
  qp: QueuePair | null;
}

/** What a promise-API request resolves with. */
export interface Completion {
  /** The request type ('send', 'receive', 'read', 'write', 'bind', 'invalidate'). */
  type: RequestType;
  /** Always 0 (ND_SUCCESS): a failed request rejects instead. */
  status: number;
  /** Bytes moved: received for a receive, the request's length for the others. */
  bytes: number;
}

/** What srq.receive() resolves with: which of the queue pairs sharing the SRQ the message arrived on. */
export interface SrqCompletion extends Completion {
  /** The queue pair the message arrived on (null if it was closed before the completion was read). */
  qp: QueuePair | null;
}

/**
 * Completions as numbers, filled by cq.pollInto(): slot i of each array describes the i-th completion the last
 * call returned. Allocated once by the caller and reused, so that polling allocates nothing per completion (in
 * 'manual' mode, where pollInto() itself takes every completion off the CQ).
 *
 * @example
 * ```ts
 * import { CompletionArrays, openAdapter } from 'netdirect';
 * const adapter = await openAdapter('127.0.0.1', { completion: 'manual' });
 * const cq = adapter.createCompletionQueue();
 * const done = new CompletionArrays(64);
 * const n = cq.pollInto(done); // 0 here: nothing was posted
 * for (let i = 0; i < n; i++) if (done.status[i] !== 0) console.log(`request ${done.context[i]} failed`);
 * await adapter.close();
 * ```
 */
export class CompletionArrays {
  /** Completions one pollInto() call may return. */
  readonly capacity: number;
  /** The request's `context` (qp.post() or a batch) as an unsigned 32-bit number; 0 when it was not a number. */
  readonly context: Uint32Array;
  /** 0 (ND_SUCCESS) or the ND status the request failed with. */
  readonly status: Uint32Array;
  /** Bytes moved: received for a receive, the request's length for the others. */
  readonly bytes: Uint32Array;
  /** The request type, ND2_REQUEST_TYPE: 0 receive, 1 send, 4 read, 5 write (records.ts K_*). */
  readonly type: Uint8Array;
  /** @internal The records pollInto() reads from the addon (RECORD_WORDS per completion). */
  readonly _records: Uint32Array;
  /** @internal Completions written by the current call. */
  _count = 0;

  /**
   * @param capacity - completions per call, 1..65536.
   * @throws {@link NdError} ERR_ND_INVALID_ARGUMENT when it is not an integer; ERR_ND_OUT_OF_RANGE outside 1..65536.
   */
  constructor(capacity: number) {
    checkIndex(capacity, 'capacity', 'CompletionArrays');
    if (capacity < 1 || capacity > 65536) throw misuse(ERR_ND_OUT_OF_RANGE, 'CompletionArrays', `capacity must be 1..65536, got ${capacity}`);
    this.capacity = capacity;
    this.context = new Uint32Array(capacity);
    this.status = new Uint32Array(capacity);
    this.bytes = new Uint32Array(capacity);
    this.type = new Uint8Array(capacity);
    this._records = new Uint32Array(capacity * RECORD_WORDS);
  }

  /** @internal Appends one completion (the caller checked there is room). */
  _put(context: unknown, status: number, bytes: number, kind: number): void {
    const i = this._count++;
    this.context[i] = typeof context === 'number' ? context >>> 0 : 0;
    this.status[i] = status;
    this.bytes[i] = bytes;
    this.type[i] = kind;
  }
}

/**
 * A completion queue (IND2CompletionQueue): where the requests of the queue pairs created with it complete.
 * Promise-API requests (qp.send(), qp.write(), ...) settle by themselves in the 'loop' and 'thread' completion
 * modes; requests posted with qp.post() come back from {@link CompletionQueue.poll | poll()}, as do all
 * completions in 'manual' mode. Closing it closes the queue pairs that use it.
 *
 * @example
 * ```ts
 * import { openAdapter } from 'netdirect';
 * const adapter = await openAdapter('127.0.0.1', { completion: 'manual' });
 * const cq = adapter.createCompletionQueue({ depth: 256 });
 * for (const c of cq.poll(32)) console.log(c.type, c.status, c.bytes, c.context);
 * await adapter.close();
 * ```
 */
export class CompletionQueue implements AsyncDisposable {
  /** @internal */ readonly _ctx: AdapterContext;
  /** @internal */ readonly _native: NativeCompletionQueue;
  /** @internal Raw completions the poller thread took off the CQ, waiting for poll(). */
  readonly _ready: RawCompletion[] = [];
  /** @internal Queue pairs (and through them SRQ receives) that complete into this CQ. */
  readonly _users = new Set<QueuePair>();
  /** @internal The id the addon's K_CQ_ERROR record names it by. */
  readonly _id: number;
  /** @internal Set once the CQ failed (overrun, device removed): every request completing into it fails so. */
  _failure: { status: number; why: string } | null = null;
  private _depth: number;
  private _state: 'open' | 'closing' | 'closed' = 'open';
  // poll()'s records, written by the addon (registered with records(), its buffer never detached): one array per
  // CQ instead of one per poll that found something.
  private _records!: Uint32Array;
  private _closing: Promise<void> | null = null;

  /** @internal Use adapter.createCompletionQueue(). */
  constructor(ctx: AdapterContext, native: NativeCompletionQueue, depth: number, id: number) {
    this._ctx = ctx;
    this._id = id;
    this._native = native;
    this._depth = depth;
    this._grow(POLL_RECORDS);
  }

  /** Entries the queue holds (1..adapter.info.maxCompletionQueueDepth); changed by resize(). */
  get depth(): number {
    return this._depth;
  }

  /** @internal */
  get _open(): boolean {
    return this._state === 'open';
  }

  /**
   * Returns up to `max` completions of qp.post() requests and settles the promise-API requests it dequeues on
   * the way (those are not returned: their promises carry them). Never blocks: an empty array when nothing
   * completed (one shared array, so that a loop polling an idle CQ allocates nothing; a caller that adds to it keeps
   * its own, as the next empty poll returns another). In the 'loop' completion mode an empty CQ also drives the
   * provider once.
   *
   * @param max - the most raw completions to return (an integer ≥ 0, default 64; 0 returns [] at once).
   * @returns the raw completions, oldest first (in the order the CQ produced them, in every completion mode: those
   *   delivered and not yet polled, then those the poller thread took and has not delivered yet, then the CQ's); a
   *   failed request has a non-zero `status` (an ND status:
   *   {@link ndStatusName} names it) instead of throwing.
   * @throws {@link NdError} ERR_ND_CLOSED when the queue is closed; ERR_ND_INVALID_ARGUMENT when `max` is not an
   *   integer, ERR_ND_OUT_OF_RANGE when it is negative.
   */
  poll(max = 64): RawCompletion[] {
    const op = 'poll';
    if (this._state === 'closed') throw misuse(ERR_ND_CLOSED, op, 'completion queue is closed');
    checkIndex(max, 'max', op);
    if (max === 0) return nothing();
    const ready = this._ready;
    if (ready.length > max) return ready.splice(0, max);
    let want = max - ready.length;
    if (want > this._records.length / RECORD_WORDS && this._records.length < KEPT_RECORDS * RECORD_WORDS) {
      this._grow(Math.min(want, KEPT_RECORDS));
    }
    const records = this._records;
    const capacity = records.length / RECORD_WORDS;
    let n = this._native.poll(Math.min(want, capacity));
    if (n === 0) return ready.length === 0 ? nothing() : ready.splice(0, ready.length);
    // Those delivered earlier first; an array only when something completed (a spinning loop polls mostly nothing).
    const out = ready.length === 0 ? [] : ready.splice(0, ready.length);
    for (;;) {
      this._ctx.completeRecords(records, out, n);
      want -= n;
      // A poll for more than the array holds: the addon again, as long as the array came back full.
      if (n < capacity || want === 0) break;
      n = this._native.poll(Math.min(want, capacity));
      if (n === 0) break;
    }
    return out.length === 0 ? nothing() : out;
  }

  /**
   * poll() without objects: writes up to `max` completions of qp.post() and batch requests into `out` (slot 0 on)
   * and returns how many; settles the promise-API requests it dequeues on the way, as poll() does. Nothing is
   * allocated per completion where pollInto() takes completions off the CQ itself ('manual' mode; in 'thread' and
   * 'loop' mode the ones the addon already delivered come first, as poll() returns them). Made for loops that poll
   * continuously: in 'manual' mode the calling thread stays the provider's polling thread between calls (the
   * built-in provider reads the connections there and hands them back to its own thread about a millisecond after
   * the last call).
   *
   * @param out - the arrays to fill (new CompletionArrays(capacity), reused between calls).
   * @param max - the most completions to return, 0..out.capacity (default out.capacity).
   * @returns the number of completions written; slots from that index on hold earlier calls' values.
   * @throws {@link NdError} ERR_ND_CLOSED when the queue is closed; ERR_ND_INVALID_ARGUMENT when `out` is not a
   *   CompletionArrays or `max` not an integer; ERR_ND_OUT_OF_RANGE when `max` exceeds out.capacity.
   */
  pollInto(out: CompletionArrays, max?: number): number {
    const op = 'poll';
    if (this._state === 'closed') throw misuse(ERR_ND_CLOSED, op, 'completion queue is closed');
    if (!(out instanceof CompletionArrays)) throw misuse(ERR_ND_INVALID_ARGUMENT, op, `out must be a CompletionArrays, got ${describe(out)}`);
    let limit = out.capacity;
    if (max !== undefined) {
      checkIndex(max, 'max', op);
      if (max > out.capacity) {
        throw misuse(ERR_ND_OUT_OF_RANGE, op, `max ${max} exceeds the capacity of the arrays (${out.capacity}): make them larger, or ask for fewer`);
      }
      limit = max;
    }
    out._count = 0;
    if (limit === 0) return 0;
    const ready = this._ready;
    if (ready.length > 0) {
      const n = Math.min(ready.length, limit);
      for (let i = 0; i < n; i++) {
        const rc = ready[i];
        out._put(rc.context, rc.status, rc.bytes, REQUEST_TYPES.indexOf(rc.type));
      }
      ready.splice(0, n);
      if (out._count === limit) return limit;
    }
    const n = this._native.pollInto(out._records, limit - out._count);
    if (n !== 0) this._ctx.completeRecords(out._records, out, n);
    return out._count;
  }

  /** @internal Dequeues everything into the ready list (manual mode teardown). */
  _drain(): void {
    if (this._state === 'closed') return;
    for (;;) {
      const n = this._native.poll(this._records.length / RECORD_WORDS);
      if (n === 0) return;
      this._ctx.completeRecords(this._records, this._ready, n);
    }
  }

  /** Replaces poll()'s records array with one of `capacity` records, registered with the addon. */
  private _grow(capacity: number): void {
    const records = new Uint32Array(capacity * RECORD_WORDS);
    markAsUntransferable(records.buffer);
    this._native.records(records);
    this._records = records;
  }

  /**
   * Changes how many entries the queue holds (IND2CompletionQueue::Resize).
   *
   * @param depth - the new depth in entries, 1..adapter.info.maxCompletionQueueDepth; not below the completions
   *   the queue holds now.
   * @throws {@link NdError} ERR_ND_CLOSED when the queue is closed or closing; ERR_ND_INVALID_ARGUMENT when `depth`
   *   is not an integer, ERR_ND_OUT_OF_RANGE when it is outside 1..maxCompletionQueueDepth; the provider's status
   *   when it refuses (the built-in provider: ND_BUFFER_OVERFLOW for a depth below the completions the queue
   *   holds, ND_NO_MEMORY); a provider whose adapter.info.adapterFlags.cqResize is false may refuse any size.
   */
  async resize(depth: number): Promise<void> {
    const op = 'resize';
    if (this._state !== 'open') throw misuse(ERR_ND_CLOSED, op, 'completion queue is closed');
    checkIndex(depth, 'depth', op);
    const max = this._ctx.info.maxCompletionQueueDepth;
    if (depth === 0 || depth > max) throw misuse(ERR_ND_OUT_OF_RANGE, op, `depth must be 1..${max}, got ${depth}`);
    this._native.resize(depth);
    this._depth = depth;
  }

  /**
   * Closes the queue pairs that complete into this CQ (their requests are flushed with ND_CANCELED), then the
   * CQ. Idempotent: every call returns the same promise, which never rejects.
   */
  close(): Promise<void> {
    return (this._closing ??= this._close());
  }

  private async _close(): Promise<void> {
    this._state = 'closing';
    await Promise.allSettled([...this._users].map((qp) => qp.close()));
    this._native.close();
    this._state = 'closed';
    this._ctx.forget(this);
  }

  /** close(), for `await using cq = adapter.createCompletionQueue()`. */
  async [Symbol.asyncDispose](): Promise<void> {
    await this.close();
  }
}

// SharedReceiveQueue (IND2SharedReceiveQueue): receives shared by the queue pairs created with it. Their
// completions arrive on the receive CQ of the queue pair that consumed them. Receives beyond the depth wait in
// order in a bounded FIFO (maxQueued) and are posted as completions free slots; close() rejects the waiting
// ones with ND_CANCELED. As for queue pairs (lib/queue-pair.ts), the promise of a receive that was accepted is
// marked handled, so one that fails before it is awaited never becomes an unhandled rejection.

import { ERR_ND_CLOSED, ND_CANCELED, NdError, asNdError, callerStack, misuse } from './errors.js';
import { pin, requestError, requestPromise, settleFailed, unpin } from './requests.js';
import { SlotQueue, Waiting, abortable, abortedBeforePost, maxQueuedOf, neverPosted, requestSignal, type SlotOwner } from './waiting.js';
import type { NativeSharedReceiveQueue } from './native.js';
import type { AdapterContext } from './context.js';
import type { CompletionArrays, RawCompletion, SrqCompletion } from './completion-queue.js';
import type { QueuePair } from './queue-pair.js';
import type { PendingRequest, RequestOwner } from './requests.js';
import { K_RECEIVE, REQUEST_TYPES } from './records.js';
import { writeSges, type Local, type SgeList } from './memory-region.js';
import { checkOptions } from './validate.js';

export interface SharedReceiveQueueOptions {
  /** Receives posted at once, 1..adapter.info.maxSharedReceiveQueueDepth (default 256, or that maximum). */
  depth?: number;
  /** SGEs per receive, 1..min(adapter.info.maxReceiveSge, 256) (default 4). */
  maxSge?: number;
  /** Posted receives below which the provider signals the SRQ, 0..depth (default 0: never). */
  notifyThreshold?: number;
  /** Receives that may wait while the SRQ is full (default 4096, DEFAULT_MAX_QUEUED); 0: none wait. */
  maxQueued?: number;
}

/** The keys createSharedReceiveQueue() accepts. */
export const SHARED_RECEIVE_QUEUE_KEYS = ['depth', 'maxSge', 'notifyThreshold', 'maxQueued'] as const;

const SG: SgeList = { nSge: 0, bytes: 0, pins: null };
const SRQ_RECEIVE_KEYS: ReadonlySet<string> = new Set(['signal']);

/**
 * A shared receive queue (IND2SharedReceiveQueue): one pool of receives for many queue pairs (those created
 * with `srq` in their options). A message consumes the oldest posted receive whichever queue pair it arrives
 * on, and completes on that queue pair's receive CQ.
 *
 * @example
 * ```ts
 * import { openAdapter } from 'netdirect';
 * const adapter = await openAdapter('127.0.0.1');
 * const srq = adapter.createSharedReceiveQueue({ depth: 64 });
 * const cq = adapter.createCompletionQueue();
 * const a = adapter.createQueuePair({ receiveCq: cq, srq });
 * const b = adapter.createQueuePair({ receiveCq: cq, srq });
 * const slots = await adapter.allocateMemory(64 * 1024);
 * const received = Array.from({ length: 64 }, (_, i) => srq.receive(slots.slice(i * 1024, 1024)));
 * console.log(a.srq === srq, b.srq === srq, srq.outstanding, received.length); // ... connect a and b
 * // const { qp, bytes } = await received[0]; // qp: a or b, whichever the message arrived on
 * await adapter.close(); // the receives never used settle with ND_CANCELED
 * await Promise.allSettled(received);
 * ```
 */
export class SharedReceiveQueue implements AsyncDisposable, RequestOwner, SlotOwner {
  /** Receives that may be posted at once. */
  readonly depth: number;
  /** SGEs a receive may have. */
  readonly maxSge: number;
  /** Receives that may wait while the SRQ is full (SharedReceiveQueueOptions.maxQueued). */
  readonly maxQueued: number;
  /** @internal */ readonly _ctx: AdapterContext;
  /** @internal */ readonly _native: NativeSharedReceiveQueue;
  /** @internal */ readonly _users = new Set<QueuePair>();
  // Receives outstanding, and those waiting for a slot, oldest first.
  private readonly _slots: SlotQueue;
  private _state: 'open' | 'closing' | 'closed' = 'open';
  private _closing: Promise<void> | null = null;

  /** @internal Use adapter.createSharedReceiveQueue(). */
  constructor(ctx: AdapterContext, native: NativeSharedReceiveQueue, depth: number, maxSge: number, maxQueued: number) {
    this._ctx = ctx;
    this._native = native;
    this.depth = depth;
    this.maxSge = maxSge;
    this.maxQueued = maxQueued;
    this._slots = new SlotQueue('shared receive', depth, maxQueued);
  }

  /** @internal */
  static _maxQueued(value: unknown, operation: string): number {
    return maxQueuedOf(value, operation);
  }

  /** @internal */
  get _open(): boolean {
    return this._state === 'open';
  }
  /** Receives posted and not yet completed (waiting ones not included: see `queued`). */
  get outstanding(): number {
    return this._slots.outstanding;
  }

  /** Receives waiting for a slot of the full SRQ. */
  get queued(): number {
    return this._slots.queued;
  }

  /**
   * Posts a receive any of the SRQ's queue pairs may consume. Beyond the depth it waits in order (up to
   * maxQueued); one that fails before it is awaited rejects only when awaited.
   *
   * @param local - where a message lands: a region, a segment, a list of them (at most maxSge) or null for
   *   zero-byte messages only; regions need `localWrite` access.
   * @param options - signal: ERR_ND_ABORTED at once; a receive still waiting for a slot is withdrawn, a posted one
   *   stays posted and still takes a message, which the error's `completion` gives (qp.receive()'s RequestSignalOption).
   * @returns the completion (`bytes`: the message's length; `qp`: the queue pair it arrived on).
   * @throws {@link NdError} ERR_ND_CLOSED when the SRQ, its adapter or a region of `local` is closed;
   *   ERR_ND_INVALID_ARGUMENT, ERR_ND_WRONG_ADAPTER, ERR_ND_OUT_OF_RANGE, ERR_ND_DETACHED, ERR_ND_TOO_MANY_SGES
   *   for a wrong `local` (as qp.receive()); ND_NO_MORE_ENTRIES when the SRQ is full and maxQueued receives
   *   already wait; ND_ACCESS_VIOLATION when a local SGE fails the provider's check; ND_CANCELED when the SRQ
   *   is closed before a message used it; ND_BUFFER_OVERFLOW when the message is larger than `local`.
   */
  receive(local: Local, options?: { signal?: AbortSignal }): Promise<SrqCompletion> {
    const op = 'receive';
    let promise: Promise<SrqCompletion>;
    let signal: AbortSignal | undefined;
    let waiting: Waiting | null = null;
    try {
      if (options !== undefined) {
        checkOptions(options, op, SRQ_RECEIVE_KEYS);
        signal = requestSignal(options.signal, op);
        if (signal?.aborted) throw abortedBeforePost(op, signal);
      }
      this._checkPostable(op);
      // Completions arrive through onBatch or cq.poll(), never inside the native call: settled later.
      if (this._slots.mustWait()) promise = requestPromise<SrqCompletion>((waiting = this._enqueue(local, op)));
      else promise = requestPromise<SrqCompletion>(this._post(local, op));
    } catch (err) {
      return Promise.reject(callerStack(asNdError(err, op)));
    }
    if (signal === undefined) return promise;
    return abortable(promise, signal, op, () => waiting !== null && this._slots.withdraw(waiting, this));
  }

  private _checkPostable(op: string): void {
    if (this._state !== 'open') throw misuse(ERR_ND_CLOSED, op, 'shared receive queue is closed');
    this._ctx.checkOpen(op);
  }

  private _post(local: Local, op: string): PendingRequest {
    this._checkPostable(op);
    this._slots.checkSlot(op);
    const a = this._ctx;
    const sg = writeSges(a, a.scratch, local, this.maxSge, op, SG);
    const e = a.requests.acquire(K_RECEIVE, op, this);
    e.bytes = sg.bytes;
    const pins = sg.pins;
    try {
      this._native.receive(e.id, sg.nSge);
    } catch (err) {
      a.requests.release(e);
      throw err;
    }
    e.pins = pins;
    pin(pins);
    this._slots.outstanding++;
    return e;
  }

  private _enqueue(local: Local, op: string): Waiting {
    this._slots.checkRoom(op);
    const w = new Waiting(K_RECEIVE, op, Array.isArray(local) ? local.slice() : local, undefined, undefined, 0);
    const a = this._ctx;
    const sg = writeSges(a, a.scratch, w.local, this.maxSge, op, SG);
    w.pins = sg.pins;
    w.bytes = sg.bytes;
    pin(w.pins);
    this._slots.push(w);
    return w;
  }

  /**
   * @internal RequestOwner: a receive completed (on the queue pair `qpId` names) or is settled at teardown. Its
   * slot goes to the oldest waiting receive.
   */
  complete(e: PendingRequest, status: number, bytes: number, kind: number, qpId: number, _out: RawCompletion[] | CompletionArrays | null): void {
    this._slots.outstanding--;
    const type = REQUEST_TYPES[kind] ?? REQUEST_TYPES[e.kind];
    if (status === 0) e.resolve?.({ type, status: 0, bytes, qp: this._ctx.queuePair(qpId) });
    else settleFailed(e, requestError(e, status, type));
    unpin(e.pins); // after the settlement, as a queue pair's (a region's deregister() settles after it)
    e.pins = null;
    this._ctx.requests.release(e);
    this._slots.pump(this);
  }

  /** @internal SlotOwner: posts a receive that waited for a slot. */
  postWaiting(w: Waiting): void {
    w.attach(this._post(w.local, w.operation));
  }

  /** @internal SlotOwner: a waiting receive that can no longer be posted. */
  failWaiting(w: Waiting, err: NdError): void {
    settleFailed(w, err);
  }

  /**
   * Closes the queue pairs that use it, then releases it; receives still posted or waiting settle with
   * ND_CANCELED. Idempotent: every call returns the same promise.
   */
  close(): Promise<void> {
    return (this._closing ??= this._close());
  }

  private async _close(): Promise<void> {
    this._state = 'closing';
    for (const w of this._slots.drain()) {
      settleFailed(w, neverPosted(w.operation, w.bytes, 'shared receive', 'the shared receive queue was closed'));
      unpin(w.pins);
    }
    await Promise.allSettled([...this._users].map((qp) => qp.close()));
    this._native.close();
    this._state = 'closed';
    // ND has no SRQ flush: once released, the provider no longer touches the receive buffers.
    this._ctx.settleOwned(this, ND_CANCELED);
    this._ctx.forget(this);
  }

  /** close(), for `await using srq = adapter.createSharedReceiveQueue()`. */
  async [Symbol.asyncDispose](): Promise<void> {
    await this.close();
  }
}

// Queues of posted requests with a depth (a queue pair's receive and initiator queues, a shared receive queue):
// SlotQueue counts what is outstanding, keeps requests that find the queue full (or others waiting) in a bounded
// FIFO and posts them, oldest first, as completions free slots (docs/architecture.md, "Posting beyond a queue's
// depth"). Also the FIFO entry, the maxQueued option and the errors of a request that waits too long or is never
// posted. A leaf module beside requests.ts, so queue-pair.ts and shared-receive-queue.ts share it without
// importing each other for it (test/import-cycles.test.ts).

import { ERR_ND_ABORTED, ERR_ND_INVALID_ARGUMENT, ERR_ND_OUT_OF_RANGE, ND_CANCELED, ND_NO_MORE_ENTRIES, NdError, asNdError, misuse, statusError, whenAborted } from './errors.js';
import type { CompletionQueue } from './completion-queue.js';
import type { Local, RemoteMemory } from './memory-region.js';
import type { QueuePair } from './queue-pair.js';
import { REQUEST_TYPES } from './records.js';
import { Fifo, ignore, settleFailed, unpin, type PendingRequest, type Pins, type Settler } from './requests.js';
import { checkIndex, describe } from './validate.js';

/** Default QueuePairOptions.maxQueued and SharedReceiveQueueOptions.maxQueued. */
export const DEFAULT_MAX_QUEUED = 4096;

/** A request refused because its full queue already has maxQueued requests waiting. */
export function tooManyWaiting(operation: string, queue: string, outstanding: number, depth: number, waiting: number, maxQueued: number): NdError {
  const why =
    maxQueued === 0
      ? 'and maxQueued is 0 (no request waits): await some requests before posting more, or allow waiting with maxQueued'
      : `and ${waiting} more requests wait for a slot (maxQueued ${maxQueued}): await some requests before posting more, or raise maxQueued or the depth`;
  return new NdError(
    'ND_NO_MORE_ENTRIES',
    ND_NO_MORE_ENTRIES,
    operation,
    `${operation} failed: ND_NO_MORE_ENTRIES (0x8000001A): the ${queue} queue is full (${outstanding} outstanding of depth ${depth}) ${why}`,
  );
}

/** The error of a waiting request that is not posted any more (its queue pair was flushed, closed or failed). */
export function neverPosted(operation: string, bytes: number, queue: string, why: string): NdError {
  return statusError(ND_CANCELED, operation, `${bytes} bytes, never posted: it was waiting for a slot of the full ${queue} queue when ${why}`);
}

/**
 * A request waiting for a slot of a full queue. It holds its regions pinned (deregister() waits for it) and is
 * validated again when it is posted. `start` (bind, invalidate) posts it; otherwise kind/local/remote do.
 */
export class Waiting implements Settler {
  resolve: ((value: any) => void) | null = null;
  reject: ((reason: unknown) => void) | null = null;
  promise: Promise<unknown> | null = null;
  raw = false;
  context: unknown = undefined;
  pins: Pins = null;
  bytes = 0;
  start: (() => void) | null = null;
  constructor(
    readonly kind: number,
    readonly operation: string,
    readonly local: Local,
    readonly remote: RemoteMemory | undefined,
    readonly offset: number | undefined,
    readonly flags: number,
  ) {}

  /** Hands the waiting request's settlement over to the pending entry it was posted as. */
  attach(e: PendingRequest): void {
    e.resolve = this.resolve;
    e.reject = this.reject;
    e.promise = this.promise;
    e.raw = this.raw;
    e.context = this.context;
  }

  /** Settles it without posting: a raw one completes into `cq` (poll() returns it), a promise one rejects. */
  fail(err: NdError, cq: CompletionQueue, qp: QueuePair | null): void {
    if (this.raw) {
      const type = REQUEST_TYPES[this.kind];
      cq._ready.push({ type, status: err.status === 0 ? ND_CANCELED : err.status, bytes: 0, context: this.context, qp });
    } else {
      settleFailed(this, err);
    }
  }
}

/** QueuePairOptions.maxQueued / SharedReceiveQueueOptions.maxQueued: a count, default DEFAULT_MAX_QUEUED. */
export function maxQueuedOf(value: unknown, operation: string): number {
  if (value === undefined) return DEFAULT_MAX_QUEUED;
  const n = checkIndex(value, 'maxQueued', operation);
  if (n > 0x7fffffff) throw misuse(ERR_ND_OUT_OF_RANGE, operation, `maxQueued must be 0..2147483647, got ${n}`);
  return n;
}

/** Who posts a SlotQueue's waiting requests (its queue pair or shared receive queue). */
export interface SlotOwner {
  /** @internal Posts `w` (it takes its slot of `queue`); throws NdError when it can no longer be posted. */
  postWaiting(w: Waiting, queue: SlotQueue): void;
  /** @internal Settles `w` without posting it: `err` says why. */
  failWaiting(w: Waiting, err: NdError, queue: SlotQueue): void;
}

/**
 * One queue with a depth: the requests outstanding on it, and the requests that wait, in order, for a slot. Nothing
 * overtakes a waiting request, so the order of the queue is the order the program issued its requests (RFC 5040
 * §5 processes a send queue in order).
 */
export class SlotQueue {
  /** Requests posted on the queue and not completed yet. */
  outstanding = 0;
  private readonly waiting = new Fifo<Waiting>();

  /**
   * @param queue - its name in errors: 'receive', 'initiator', 'shared receive'.
   * @param depth - requests that may be outstanding at once.
   * @param maxQueued - requests that may wait while it is full.
   */
  constructor(
    readonly queue: string,
    readonly depth: number,
    readonly maxQueued: number,
  ) {}

  /** Requests waiting for a slot. */
  get queued(): number {
    return this.waiting.length;
  }

  /** True when a request must wait: the queue is full, or others already wait (no overtaking). */
  mustWait(): boolean {
    return this.waiting.length > 0 || this.outstanding >= this.depth;
  }

  /** Throws ND_NO_MORE_ENTRIES when every slot is taken (ND would refuse the post). */
  checkSlot(operation: string): void {
    if (this.outstanding >= this.depth) {
      throw new NdError(
        'ND_NO_MORE_ENTRIES',
        ND_NO_MORE_ENTRIES,
        operation,
        `${operation} failed: ND_NO_MORE_ENTRIES (0x8000001A): the ${this.queue} queue is full (${this.outstanding} outstanding of depth ${this.depth})`,
      );
    }
  }

  /** Throws ND_NO_MORE_ENTRIES when maxQueued requests already wait. */
  checkRoom(operation: string): void {
    if (this.waiting.length >= this.maxQueued) {
      throw tooManyWaiting(operation, this.queue, this.outstanding, this.depth, this.waiting.length, this.maxQueued);
    }
  }

  /** Queues `w` behind the waiting ones (checkRoom() first). */
  push(w: Waiting): void {
    this.waiting.push(w);
  }

  /** Posts waiting requests, oldest first, while the queue has free slots; one that cannot be posted is failed. */
  pump(owner: SlotOwner): void {
    while (this.waiting.length > 0 && this.outstanding < this.depth) {
      const w = this.waiting.shift()!;
      unpin(w.pins);
      try {
        owner.postWaiting(w, this);
      } catch (err) {
        owner.failWaiting(w, asNdError(err, w.operation), this);
      }
    }
  }

  /**
   * Withdraws `w` if it still waits (its regions unpinned; the requests behind it keep their order and may now
   * be posted): true. False when it was posted already (or settled).
   */
  withdraw(w: Waiting, owner: SlotOwner): boolean {
    if (!this.waiting.remove(w)) return false;
    unpin(w.pins);
    this.pump(owner);
    return true;
  }

  /**
   * Removes every waiting request, oldest first, for the caller to fail and then unpin (in that order: a region's
   * deregister() settles after the rejections of the requests that held it).
   */
  drain(): Waiting[] {
    if (this.waiting.length === 0) return [];
    return this.waiting.drain();
  }
}

/**
 * The ERR_ND_ABORTED of a request whose signal aborted after it was posted: ND has no call that withdraws one
 * posted request (IND2QueuePair::Flush ends them all), so it stays posted and `completion` settles with its own
 * completion when the provider delivers it (or ND_CANCELED when the queue pair is flushed or closed). A receive so
 * abandoned still takes the next message: `completion` gives it. Its memory stays pinned until then.
 */
export interface AbortedRequestError extends NdError {
  readonly completion?: Promise<unknown>;
}

/** A request's `signal` option: undefined or an AbortSignal. */
export function requestSignal(value: unknown, operation: string): AbortSignal | undefined {
  if (value !== undefined && !(value instanceof AbortSignal)) {
    throw misuse(ERR_ND_INVALID_ARGUMENT, operation, `signal must be an AbortSignal, got ${describe(value)}`);
  }
  return value;
}

/** The error of a request whose signal was aborted before it was made: nothing was posted. */
export function abortedBeforePost(operation: string, signal: AbortSignal): NdError {
  return new NdError(ERR_ND_ABORTED, 0, operation, `${operation}: aborted before it was posted (its signal was already aborted): nothing was posted`, {
    cause: signal.reason,
  });
}

/**
 * The promise of a request made with `{ signal }` (docs/architecture.md, "Aborting a request"): `settled`'s
 * outcome, unless the signal aborts first. Then it rejects with ERR_ND_ABORTED at once, and `withdraw()` says what
 * became of the request: true, it was still waiting for a slot and is withdrawn (nothing was posted); false, it is
 * posted and stays so, its memory pinned, its completion delivered once, to the error's `completion` and never to
 * this promise.
 */
export function abortable<T>(settled: Promise<T>, signal: AbortSignal, operation: string, withdraw: () => boolean): Promise<T> {
  const out: Promise<T> = new Promise<T>((resolve, reject) => {
    const forget = whenAborted(signal, () => {
      if (withdraw()) {
        reject(new NdError(ERR_ND_ABORTED, 0, operation, `${operation}: aborted while it waited for a slot of its full queue: withdrawn, nothing was posted`, { cause: signal.reason }));
        return;
      }
      settled.catch(ignore);
      const err = new NdError(
        ERR_ND_ABORTED,
        0,
        operation,
        `${operation}: aborted; the request stays posted (ND cannot withdraw one posted request): its memory stays pinned ` +
          'until it completes or the queue pair is flushed (qp.flush(), close()), and error.completion settles with its completion then',
        { cause: signal.reason },
      );
      Object.defineProperty(err, 'completion', { value: settled, enumerable: false });
      reject(err);
    });
    settled.then(
      (v) => {
        forget();
        resolve(v);
      },
      (e) => {
        forget();
        // Failed after it was accepted: as the request's own promise (requests.ts settleFailed), this one is
        // marked handled, so it rejects whenever it is awaited and never as an unhandled rejection.
        out.catch(ignore);
        reject(e);
      },
    );
  });
  return out;
}

// The per-adapter table of pending requests. Every overlapped ND call and every posted request gets a small
// reusable id (u32 > 0) that the addon hands back in its completion record; the entry holds what settles it
// (resolve/reject or the raw-post context), the operation name and the memory regions the request pins until
// its completion (success, error or flush).

import type { CompletionArrays, RawCompletion } from './completion-queue.js';
import type { MemoryRegion } from './memory-region.js';
import { ND_ACCESS_VIOLATION, ND_BUFFER_OVERFLOW, ND_CANCELED, ND_REMOTE_ERROR, NdError, callerStack, hex32, statusError } from './errors.js';

/** Something whose in-flight requests must settle before it can be released natively. */
export class InFlight {
  private count = 0;
  private waiters: Array<() => void> | null = null;

  get inFlight(): number {
    return this.count;
  }

  begin(): void {
    this.count++;
  }

  /** `n` of them began at once. */
  beginMany(n: number): void {
    this.count += n;
  }

  end(): void {
    this.endMany(1);
  }

  /** `n` of them settled at once. */
  endMany(n: number): void {
    this.count -= n;
    if (this.count === 0 && this.waiters) {
      const waiters = this.waiters;
      this.waiters = null;
      for (const w of waiters) w();
    }
  }

  /** Resolves once nothing is in flight (immediately if nothing is). */
  idle(): Promise<void> {
    if (this.count === 0) return Promise.resolve();
    return new Promise((resolve) => (this.waiters ??= []).push(resolve));
  }
}

/**
 * Who settles a request when its completion record arrives: the queue pair or shared receive queue it was posted
 * on, or the adapter's overlapped-call owner. One call per completion, whoever the owner is.
 */
export interface RequestOwner {
  /**
   * @internal Settles `e` from its record (status, bytes, kind and the queue pair it names; status ND_CANCELED
   * and qpId 0 at teardown), releases its entry and does what the freed slot allows. Raw completions go to `out`,
   * or to their CQ's ready list when it is null.
   */
  complete(e: PendingRequest, status: number, bytes: number, kind: number, qpId: number, out: RawCompletion[] | CompletionArrays | null): void;
}

/** A first-in first-out queue with O(1) shift (requests waiting for a free slot of a full queue). */
export class Fifo<T> {
  private items: Array<T | undefined> = [];
  private head = 0;

  get length(): number {
    return this.items.length - this.head;
  }

  push(item: T): void {
    this.items.push(item);
  }

  shift(): T | undefined {
    if (this.head >= this.items.length) return undefined;
    const item = this.items[this.head];
    this.items[this.head++] = undefined;
    if (this.head === this.items.length) {
      this.items.length = 0;
      this.head = 0;
    } else if (this.head >= 1024 && this.head * 2 >= this.items.length) {
      this.items = this.items.slice(this.head);
      this.head = 0;
    }
    return item;
  }

  /** Removes `item` (the first of it), keeping the others' order; false when it is not queued. */
  remove(item: T): boolean {
    const i = this.items.indexOf(item, this.head);
    if (i < 0) return false;
    this.items.splice(i, 1);
    if (this.head === this.items.length) {
      this.items.length = 0;
      this.head = 0;
    }
    return true;
  }

  /** Removes and returns every item, oldest first. */
  drain(): T[] {
    const out = this.items.slice(this.head) as T[];
    this.items = [];
    this.head = 0;
    return out;
  }
}

/**
 * A queue pair's silent requests (ND_OP_FLAG_SILENT_SUCCESS), in posting order, without a request table entry each
 * (issue #26): silent request k (1, 2, ... in posting order) is posted with the low 32 bits of k as its id, the addon
 * marks its ND context and its completion record silent (binding/delivery/records.h kRecordSilent), and the record of
 * one that fails or is flushed names the queue pair and k. Initiator requests complete in order (RFC 5040 §5), so a
 * completion of the queue pair retires every silent request posted before it as a success; a silent request that
 * completes (a failure, a flush) retires the ones before it the same way and then itself.
 *
 * What is kept per request is its context and kind, in ring slots that are overwritten, never cleared (so up to a
 * ring of old contexts stay reachable until then), and a pin of each region it uses (a count: region.inFlight and
 * deregister() see silent requests as any other). Runs of consecutive requests with the same pins (the same region,
 * or the same prepared request's) are one span, unpinned with one call per span as they are retired. Once the ring
 * is allocated (at the first silent post: its size is the queue's depth, which bounds the silent requests
 * outstanding), nothing here allocates.
 */
export class SilentRequests {
  /** Silent requests posted so far: the number of the last one. */
  posted = 0;
  /** Silent requests retired so far: 1..retired completed (silently or not). */
  retired = 0;
  private contexts: unknown[] = [];
  private kinds: Uint8Array = new Uint8Array(0);
  private mask = -1;
  private spanPins: Pins[] = [];
  private spanFirst: number[] = [];
  private spanLast: number[] = [];
  private spanHead = 0;
  private spanTail = 0;

  /** @param depth - the initiator queue's depth: the most silent requests outstanding at once. */
  constructor(private readonly depth: number) {}

  /** Silent requests outstanding (posted and not retired). */
  get size(): number {
    return this.posted - this.retired;
  }

  /** The number the next silent request is posted with. */
  get next(): number {
    return this.posted + 1;
  }

  /** Records that silent request `posted + 1` was posted, with its context, kind and the regions it pins. */
  add(context: unknown, kind: number, pins: Pins): void {
    if (this.mask < 0) this.allocate();
    const mask = this.mask;
    const k = ++this.posted;
    this.contexts[k & mask] = context;
    this.kinds[k & mask] = kind;
    if (pins === null) return;
    pin(pins);
    this.addSpan(pins, k, k);
  }

  /**
   * add() of `count` silent requests posted one after the other with the same kind and pins: the i-th (from 0) with
   * context `context + i` when `context` is a number, else `context` itself (PreparedRequest.postMany()).
   */
  addRun(context: unknown, count: number, kind: number, pins: Pins): void {
    if (count <= 0) return;
    if (this.mask < 0) this.allocate();
    const mask = this.mask;
    const first = this.posted + 1;
    const contexts = this.contexts;
    const kinds = this.kinds;
    if (typeof context === 'number') {
      for (let i = 0; i < count; i++) {
        contexts[(first + i) & mask] = context + i;
        kinds[(first + i) & mask] = kind;
      }
    } else {
      for (let i = 0; i < count; i++) {
        contexts[(first + i) & mask] = context;
        kinds[(first + i) & mask] = kind;
      }
    }
    const last = first + count - 1;
    this.posted = last;
    if (pins === null) return;
    pinMany(pins, count);
    this.addSpan(pins, first, last);
  }

  /** Requests first..last (just posted, pinned) hold `pins`: extends the last span when it ends at first - 1 with them. */
  private addSpan(pins: Pins, first: number, last: number): void {
    const mask = this.mask;
    const t = this.spanTail;
    if (t !== this.spanHead && this.spanPins[(t - 1) & mask] === pins && this.spanLast[(t - 1) & mask] === first - 1) {
      this.spanLast[(t - 1) & mask] = last;
      return;
    }
    this.spanPins[t & mask] = pins;
    this.spanFirst[t & mask] = first;
    this.spanLast[t & mask] = last;
    this.spanTail = t + 1;
  }

  /** The number of the outstanding silent request whose record carries `low` (its low 32 bits), or 0 if none. */
  numberOf(low: number): number {
    const first = this.retired + 1;
    const k = first + ((low - (first >>> 0)) >>> 0);
    return k <= this.posted ? k : 0;
  }

  /** The context silent request `k` (outstanding) was posted with. */
  contextOf(k: number): unknown {
    return this.contexts[k & this.mask];
  }

  /** The record kind (records.ts K_*) of silent request `k` (outstanding). */
  kindOf(k: number): number {
    return this.kinds[k & this.mask];
  }

  /** Retires the silent requests up to number `k` (they completed) and lets go of their regions; returns how many. */
  retire(k: number): number {
    const before = this.retired;
    const n = k - before;
    if (n <= 0) return 0;
    this.retired = k;
    const mask = this.mask;
    while (this.spanHead !== this.spanTail) {
      const i = this.spanHead & mask;
      const first = Math.max(this.spanFirst[i], before + 1);
      const last = this.spanLast[i];
      if (first > k) break;
      if (last > k) {
        // Partly retired: the rest stays pinned.
        unpinMany(this.spanPins[i], k - first + 1);
        break;
      }
      unpinMany(this.spanPins[i], last - first + 1);
      this.spanPins[i] = null;
      this.spanHead++;
    }
    return n;
  }

  /** A ring of the smallest power of two not below the depth (spans are never more than the requests). */
  private allocate(): void {
    let size = 1;
    while (size < this.depth) size *= 2;
    this.contexts = new Array<unknown>(size).fill(undefined);
    this.kinds = new Uint8Array(size);
    this.spanPins = new Array<Pins>(size).fill(null);
    this.spanFirst = new Array<number>(size).fill(0);
    this.spanLast = new Array<number>(size).fill(0);
    this.mask = size - 1;
  }
}

/** For `promise.catch(ignore)`: marks a promise handled without changing what it settles with. */
export function ignore(): void {}

/**
 * The promise a request method returned, for its async wrapper to mark handled when the request fails (bind and
 * invalidate, which are async functions). Marked then, not at creation: V8 follows an async stack trace (the
 * user's "at async fn" frames, errors.ts callerStack) only through a promise with exactly one reaction, the
 * caller's await, so a handler added up front would cut those frames from every error.
 */
export interface Returned {
  promise: Promise<unknown> | null;
}

/**
 * What settles a promise request (a pending entry, or a request waiting for a slot): the promise the request
 * method returned and its resolve function (requestPromise), or for bind and invalidate, whose async wrappers
 * give failures their stacks, a resolve and a reject of their own (promise null).
 */
export interface Settler {
  resolve: ((value: any) => void) | null;
  reject: ((reason: unknown) => void) | null;
  promise: Promise<unknown> | null;
}

// new Promise(captureResolve) hands its resolve function over without a closure per request.
let captured: ((value: any) => void) | null = null;
function captureResolve(resolve: (value: any) => void): void {
  captured = resolve;
}

/**
 * The one promise of a promise request (qp.send/receive/read/write, srq.receive): made and recorded in `s`, which
 * settles it (settleFailed on failure). No async wrapper: a request that succeeds costs this promise and nothing
 * else.
 */
export function requestPromise<T>(s: Settler): Promise<T> {
  const promise = new Promise<T>(captureResolve);
  s.resolve = captured;
  s.reject = null;
  s.promise = promise;
  captured = null;
  return promise;
}

/**
 * Fails what `s` settles with `err`. A request promise (requestPromise) is resolved with the promise of
 * rethrowAwaited, which rejects from inside an async function once the request's promise has adopted it: the
 * error's stack then ends with the frames of the code that awaits the request ("at async userFn", errors.ts
 * callerStack; V8 follows the adoption and the caller's await), and the returned promise is marked handled, so a
 * request that fails before anybody awaits it (a receive posted ahead whose peer died) rejects when it is awaited
 * later instead of ending the process as an unhandled rejection.
 */
export function settleFailed(s: Settler, err: NdError): void {
  const returned = s.promise;
  if (returned === null) {
    s.reject?.(err);
    return;
  }
  const resolve = s.resolve as (value: unknown) => void;
  let fail: ((reason: unknown) => void) | null = null;
  const failed = new Promise<never>((_, reject) => (fail = reject));
  // Adopted first (its PromiseResolveThenableJob is queued before the rejection's), so that rethrowAwaited's
  // promise has the returned promise as its one reaction when the stack is taken.
  resolve(rethrowAwaited(failed, returned));
  (fail as unknown as (reason: unknown) => void)(err);
}

async function rethrowAwaited(failed: Promise<never>, returned: Promise<unknown>): Promise<never> {
  try {
    return await failed;
  } catch (err) {
    const error = callerStack(err as Error);
    returned.catch(ignore);
    throw error;
  }
}

export type Pins = MemoryRegion | MemoryRegion[] | null;

export class PendingRequest implements Settler {
  id = 0;
  /** Record kind (records.ts K_*): 0..5 posted requests, 16.. overlapped calls. */
  kind = 0;
  operation = '';
  owner: RequestOwner | null = null;
  resolve: ((value: any) => void) | null = null;
  reject: ((reason: unknown) => void) | null = null;
  /** A promise request's promise (requestPromise), or null. */
  promise: Promise<unknown> | null = null;
  pins: Pins = null;
  /** Posted through qp.post(): completion goes to cq.poll() with this context, no Promise. */
  raw = false;
  context: unknown = undefined;
  /**
   * An initiator request of a queue pair: the number of the last silent request posted before it (SilentRequests),
   * which its completion retires.
   */
  silentUpTo = 0;
  /** Bytes the request covers locally (message context, and Completion.bytes of non-receives). */
  bytes = 0;
  /** Read/Write: the remote memory's address and the offset into it (added only for an error message). */
  remoteAddress: bigint | undefined = undefined;
  remoteOffset = 0;
  remoteToken = 0;
  /** Per-kind extra value (e.g. the token a bind returned). */
  extra = 0;
  /** Context for an error message (a function when formatting it would cost the success path). */
  detail: string | (() => string) | undefined = undefined;
  /** Set when the CQ it would complete into failed: why, for the error message (lib/adapter.ts AdapterCore.cqFailed). */
  cqFailure: string | undefined = undefined;
  /** An overlapped call's counter of its connector or listener (AdapterContext.overlapped), ended at completion. */
  inflight: InFlight | null = null;

  reset(): void {
    this.kind = 0;
    this.operation = '';
    this.owner = null;
    this.resolve = null;
    this.reject = null;
    this.promise = null;
    this.pins = null;
    this.raw = false;
    this.context = undefined;
    this.silentUpTo = 0;
    this.bytes = 0;
    this.remoteAddress = undefined;
    this.remoteOffset = 0;
    this.remoteToken = 0;
    this.extra = 0;
    this.detail = undefined;
    this.cqFailure = undefined;
    this.inflight = null;
  }
}

/** Pins the regions a request touches (refcount on each MemoryRegion). */
export function pin(pins: Pins): void {
  if (pins === null) return;
  if (Array.isArray(pins)) for (const r of pins) r._pin();
  else pins._pin();
}

export function unpin(pins: Pins): void {
  if (pins === null) return;
  if (Array.isArray(pins)) for (const r of pins) r._unpin();
  else pins._unpin();
}

/** pin() of `n` requests with the same pins. */
export function pinMany(pins: Pins, n: number): void {
  if (pins === null) return;
  if (Array.isArray(pins)) for (const r of pins) r._pinMany(n);
  else pins._pinMany(n);
}

/** unpin() of `n` requests with the same pins. */
export function unpinMany(pins: Pins, n: number): void {
  if (pins === null) return;
  if (Array.isArray(pins)) for (const r of pins) r._unpinMany(n);
  else pins._unpinMany(n);
}

export class RequestTable {
  private readonly entries: Array<PendingRequest | undefined> = [undefined];
  // Stacks with their own length: an array's length is never lowered, as lowering it lets V8 shrink the storage
  // that the next pushes would allocate again (the posting path allocates nothing once these have grown).
  private readonly freeIds: number[] = [];
  private freeCount = 0;
  private readonly spare: Array<PendingRequest | null> = [];
  private spareCount = 0;
  private live = 0;

  get size(): number {
    return this.live;
  }

  /** A fresh entry with an id that no pending request uses, for `owner`'s request of `kind` (`operation` names it). */
  acquire(kind: number, operation: string, owner: RequestOwner | null): PendingRequest {
    let entry: PendingRequest;
    if (this.spareCount > 0) {
      entry = this.spare[--this.spareCount] as PendingRequest;
      this.spare[this.spareCount] = null;
    } else {
      entry = new PendingRequest();
    }
    let id: number;
    if (this.freeCount > 0) {
      id = this.freeIds[--this.freeCount];
    } else {
      id = this.entries.length;
      if (id > 0xffffffff) throw new RangeError('request table exhausted');
      this.entries.push(undefined);
    }
    entry.id = id;
    entry.kind = kind;
    entry.operation = operation;
    entry.owner = owner;
    this.entries[id] = entry;
    this.live++;
    return entry;
  }

  get(id: number): PendingRequest | undefined {
    return this.entries[id];
  }

  /** Frees the id for reuse and recycles the entry. The caller has copied what it still needs from it. */
  release(entry: PendingRequest): void {
    const id = entry.id;
    if (id === 0 || this.entries[id] !== entry) return;
    this.entries[id] = undefined;
    if (this.freeCount === this.freeIds.length) this.freeIds.push(id);
    else this.freeIds[this.freeCount] = id;
    this.freeCount++;
    this.live--;
    entry.id = 0;
    entry.reset();
    if (this.spareCount < 1024) {
      if (this.spareCount === this.spare.length) this.spare.push(entry);
      else this.spare[this.spareCount] = entry;
      this.spareCount++;
    }
  }

  /** Every pending entry (a snapshot), for teardown. */
  pending(): PendingRequest[] {
    const out: PendingRequest[] = [];
    for (const e of this.entries) if (e) out.push(e);
    return out;
  }
}

/** The error a posted request (send, receive, read, write, bind, invalidate) fails with: its status and what it was. */
export function requestError(e: PendingRequest, status: number, type: string, brokenBy: string | null = null): NdError {
  let context: string;
  if (e.remoteAddress !== undefined) {
    context = `${e.bytes} bytes ${type === 'read' ? 'from' : 'to'} remote 0x${(e.remoteAddress + BigInt(e.remoteOffset)).toString(16)} token ${hex32(e.remoteToken)}`;
  } else if (type === 'receive') {
    context = `receive of up to ${e.bytes} bytes`;
  } else {
    context = `${e.bytes} bytes`;
  }
  if (e.cqFailure !== undefined) context += ` (${e.cqFailure})`;
  else if (status === ND_CANCELED && brokenBy !== null) {
    context +=
      ` (flushed: an earlier request of this queue pair failed, ${brokenBy}, and a queue pair stops at its first error ` +
      '(the connection ends with an RDMAP Terminate, RFC 5040 §7): fix that request, then connect a new queue pair)';
  } else if (status === ND_CANCELED) context += ' (flushed: the queue pair was flushed, closed or disconnected)';
  else if (status === ND_ACCESS_VIOLATION && e.remoteAddress !== undefined) {
    context +=
      ` (the peer refused the ${type === 'read' ? 'Read' : 'Write'}: its token is unknown there or no longer valid (deregistered, a window ` +
      `unbound or invalidated), the range lies outside its region, or the region lacks ${type === 'read' ? 'remoteRead' : 'remoteWrite'} ` +
      `(the peer registers it with { ${type === 'read' ? 'remoteRead' : 'remoteWrite'}: true }))`;
  } else if (status === ND_BUFFER_OVERFLOW && type === 'receive') {
    context += ` (the message that arrived was larger than this receive: post receives as large as the largest message the peer sends)`;
  }
  else if (status === ND_REMOTE_ERROR && type === 'send') {
    context +=
      ' (the peer refused it: a Send needs a receive posted at the peer, qp.receive() or srq.receive(), at least as large as the message; ' +
      'check that the peer posts its receives before this side sends)';
  }
  return statusError(status, e.operation, context);
}

// QueuePair (IND2QueuePair). Each request pins the regions it touches until its completion; the QP counts
// outstanding requests per queue (receive, initiator). A request beyond a queue's depth waits, in order, in a
// bounded JS FIFO of that queue (maxQueued) and is posted when a completion frees a slot: nothing overtakes a
// waiting request, so the RDMA ordering of a queue (RFC 5040 §5: requests of a send queue are processed in
// order) is what the caller asked for. A failed completion (the queue pair is then in error and the provider
// flushes what follows), flush(), a disconnect and close() reject the waiting requests with ND_CANCELED, as the
// posted ones get. close() flushes and waits until every request of the QP has settled.
//
// Promises and unhandled rejections: the promise of a request that was posted (or queued) is marked handled when
// the request fails (requests.ts settleFailed), so one that fails (flushed, peer gone) before anybody awaits it
// never becomes an 'unhandledRejection' that ends the process; the error is delivered to whoever awaits it later.
// A request never awaited fails silently: close() and qp.outstanding are the way to account for such requests.
// Misuse found before anything is posted (a wrong argument, a closed QP, ND_NO_MORE_ENTRIES past maxQueued)
// rejects an unmarked promise as usual: a bug to see.

import {
  ERR_ND_CLOSED,
  ERR_ND_INVALID_ARGUMENT,
  ERR_ND_OUT_OF_RANGE,
  ERR_ND_WRONG_ADAPTER,
  ND_CANCELED,
  ND_NO_MORE_ENTRIES,
  NdError,
  ndStatusName,
  asNdError,
  callerStack,
  misuse,
  statusError,
} from './errors.js';
import type { NativeQueuePair } from './native.js';
import type { AdapterContext } from './context.js';
import { CompletionArrays, CompletionQueue, type Completion, type RawCompletion } from './completion-queue.js';
import { InFlight, SilentRequests, ignore, pin, requestError, requestPromise, settleFailed, unpin, type PendingRequest, type Pins, type RequestOwner, type Returned } from './requests.js';
import { K_BIND, K_INVALIDATE, K_READ, K_RECEIVE, K_SEND, K_WRITE, REQUEST_TYPES } from './records.js';
import { SCRATCH_SGES, checkBoolean, checkIndex, checkOptions, describe, formatBytes } from './validate.js';
import {
  MemoryRegion,
  checkRemote,
  writeSges,
  type Local,
  type RemoteMemory,
  type Segment,
  type SgeList,
} from './memory-region.js';
import { MemoryWindow } from './memory-window.js';
import { SharedReceiveQueue } from './shared-receive-queue.js';
import { SlotQueue, Waiting, abortable, abortedBeforePost, maxQueuedOf, neverPosted, requestSignal, type SlotOwner } from './waiting.js';
import { DESC_WORDS, PostBatch, checkBatchOptions, type BatchOptions } from './batch.js';
import { PreparedRequest, checkPrepareOp, type PostManyOptions, type PrepareOptions } from './prepared.js';

export { DEFAULT_MAX_QUEUED } from './waiting.js';
import type { Connector } from './connector.js';

export interface QueuePairOptions {
  /** Where receives complete (a CQ of the same adapter). */
  receiveCq: CompletionQueue;
  /** Where sends, Reads, Writes, binds and invalidates complete. Defaults to receiveCq. */
  initiatorCq?: CompletionQueue;
  /** Receives posted at once, 1..adapter.info.maxReceiveQueueDepth (default 128, or that maximum if lower). */
  receiveDepth?: number;
  /** Initiator requests in flight at once, 1..adapter.info.maxInitiatorQueueDepth (default 128, or that maximum). */
  initiatorDepth?: number;
  /** SGEs per receive, 1..min(adapter.info.maxReceiveSge, 256) (default 4). */
  maxReceiveSge?: number;
  /**
   * SGEs per send or Write (and Read, up to adapter.info.maxReadSge), 1..min(adapter.info.maxInitiatorSge, 256)
   * (default 4).
   */
  maxInitiatorSge?: number;
  /** Bytes a request with `inline` may carry, 0..adapter.info.maxInlineDataSize (default 256, or that maximum). */
  inlineDataSize?: number;
  /** Receive through this shared receive queue instead of the QP's own (qp.receive() is then refused). */
  srq?: SharedReceiveQueue;
  /**
   * Requests that may wait in each of the QP's queues (receive, initiator) while it is full (default
   * DEFAULT_MAX_QUEUED, 4096). They are posted in order as completions free slots; past this many, a request
   * rejects with ND_NO_MORE_ENTRIES. 0: no waiting, a request beyond the depth rejects at once.
   */
  maxQueued?: number;
}


/** The keys each options object accepts (strict option checking: validate.ts checkOptions). */
export const QUEUE_PAIR_KEYS = [
  'receiveCq',
  'initiatorCq',
  'receiveDepth',
  'initiatorDepth',
  'maxReceiveSge',
  'maxInitiatorSge',
  'inlineDataSize',
  'srq',
  'maxQueued',
] as const;
// Sets, not arrays: every request checks its options' keys against one (a hash look-up per key, not a scan).
const SEND_KEYS: ReadonlySet<string> = new Set(['solicited', 'inline', 'fence', 'signal']);
const WRITE_KEYS: ReadonlySet<string> = new Set(['offset', 'inline', 'fence', 'signal']);
const READ_KEYS: ReadonlySet<string> = new Set(['offset', 'fence', 'signal']);
const RECEIVE_KEYS: ReadonlySet<string> = new Set(['signal']);
const POST_KEYS: ReadonlySet<string> = new Set(['offset', 'context', 'silent', 'inline', 'solicited', 'fence']);
const PREPARE_KEYS: ReadonlySet<string> = new Set(['offset', 'silent', 'inline', 'solicited', 'fence']);
const POST_MANY_KEYS: ReadonlySet<string> = new Set(['offset', 'stride', 'length', 'context', 'signalEvery']);
const BIND_ACCESS_KEYS = ['read', 'write'] as const;

/**
 * `signal` of a promise request (send, receive, write, read): when it aborts, the promise rejects with
 * ERR_ND_ABORTED at once. A request still waiting for a slot is withdrawn; a posted one stays posted (ND cannot
 * withdraw one request), its memory pinned, and its completion goes to the error's `completion` (docs/architecture.md,
 * "Aborting a request").
 */
export interface RequestSignalOption {
  signal?: AbortSignal;
}
/** Options of qp.receive(). */
export type ReceiveOptions = RequestSignalOption;

/** Options of qp.send(). */
export interface SendOptions extends RequestSignalOption {
  /** Ask for a solicited event at the peer (ND_OP_FLAG_SEND_AND_SOLICIT_EVENT). */
  solicited?: boolean;
  /** Copy the data into the request at post time (ND_OP_FLAG_INLINE): at most qp.inlineDataSize bytes. */
  inline?: boolean;
  /** Start only after earlier Reads of this queue pair completed (ND_OP_FLAG_READ_FENCE). */
  fence?: boolean;
}
/** Options of qp.write(). */
export interface WriteOptions extends RequestSignalOption {
  /** Byte offset into the remote memory (default 0). */
  offset?: number;
  /** Copy the data into the request at post time (ND_OP_FLAG_INLINE): at most qp.inlineDataSize bytes. */
  inline?: boolean;
  /** Start only after earlier Reads of this queue pair completed (ND_OP_FLAG_READ_FENCE). */
  fence?: boolean;
}
/** Options of qp.read(). */
export interface ReadOptions extends RequestSignalOption {
  /** Byte offset into the remote memory (default 0). */
  offset?: number;
  /** Start only after earlier Reads of this queue pair completed (ND_OP_FLAG_READ_FENCE). */
  fence?: boolean;
}
/** Options of qp.post(): those of the request type, plus `context` and `silent`. */
export interface PostOptions {
  /** Byte offset into the remote memory of a Read or Write (default 0). */
  offset?: number;
  /** Any value; returned as the completion's `context` by cq.poll(). */
  context?: unknown;
  /** No completion on success (ND_OP_FLAG_SILENT_SUCCESS); a failure still completes. Never waits for a slot. */
  silent?: boolean;
  /** Copy the data into the request at post time (send and write; at most qp.inlineDataSize bytes). */
  inline?: boolean;
  /** Ask for a solicited event at the peer (send). */
  solicited?: boolean;
  /** Start only after earlier Reads of this queue pair completed. */
  fence?: boolean;
}

export const ND_OP_FLAG_SILENT_SUCCESS = 0x1;
export const ND_OP_FLAG_READ_FENCE = 0x2;
export const ND_OP_FLAG_SEND_AND_SOLICIT_EVENT = 0x4;
export const ND_OP_FLAG_ALLOW_READ = 0x8;
export const ND_OP_FLAG_ALLOW_WRITE = 0x10;
export const ND_OP_FLAG_INLINE = 0x20;

const POST_KINDS: Record<string, number> = { send: K_SEND, receive: K_RECEIVE, read: K_READ, write: K_WRITE };
// Offsets and lengths are at most 2^53 - 1, so only a remote address above this can make a range wrap 2^64: the
// common path compares once and does no BigInt arithmetic (each BigInt operation allocates).
const WRAP_RISK = 0x10000000000000000n - 0x20000000000000n;
const TOP = 0x10000000000000000n;

// Reused between posts: the data path allocates nothing for a single-region request.
const SG: SgeList = { nSge: 0, bytes: 0, pins: null };

/** The ND_OP_FLAG_* bits of a request's options; unknown keys and non-boolean flags are refused. */
function flagsOf(options: PostOptions | SendOptions | WriteOptions | ReadOptions | undefined, operation: string, keys: ReadonlySet<string>): number {
  if (options === undefined) return 0;
  checkOptions(options, operation, keys);
  const o = options as PostOptions;
  let flags = 0;
  if (o.silent !== undefined && checkBoolean(o.silent, 'silent', operation, false)) flags |= ND_OP_FLAG_SILENT_SUCCESS;
  if (o.fence !== undefined && checkBoolean(o.fence, 'fence', operation, false)) flags |= ND_OP_FLAG_READ_FENCE;
  if (o.solicited !== undefined && checkBoolean(o.solicited, 'solicited', operation, false)) flags |= ND_OP_FLAG_SEND_AND_SOLICIT_EVENT;
  if (o.inline !== undefined && checkBoolean(o.inline, 'inline', operation, false)) flags |= ND_OP_FLAG_INLINE;
  return flags;
}

function silentCannotWait(operation: string, outstanding: number, depth: number): NdError {
  return new NdError(
    'ND_NO_MORE_ENTRIES',
    ND_NO_MORE_ENTRIES,
    operation,
    `${operation} failed: ND_NO_MORE_ENTRIES (0x8000001A): the initiator queue is full (${outstanding} outstanding of depth ${depth}) ` +
      'and a silent request does not wait for a slot (silent requests free theirs only when a later request completes): ' +
      'post it when the queue has room, or without silent',
  );
}

/**
 * A queue pair (IND2QueuePair): the endpoint of a connection that sends, receives, Reads and Writes. Made by
 * adapter.createQueuePair() and connected by adapter.connect() or a Connector. Each request returns a promise;
 * beyond a queue's depth requests wait in order (up to maxQueued). A request's promise that fails before it
 * is awaited does not become an unhandled rejection: the error is delivered when it is awaited.
 *
 * @example
 * ```ts
 * import { openAdapter, decodeRemote } from 'netdirect';
 * const adapter = await openAdapter('127.0.0.1');
 * const qp = adapter.createQueuePair({ receiveCq: adapter.createCompletionQueue(), initiatorDepth: 64 });
 * const source = await adapter.allocateMemory(1 << 20);
 * const connector = await adapter.connect(qp, '127.0.0.1:5000'); // a server that offers its memory in private data
 * const remote = decodeRemote(connector.privateData);
 * const chunk = 64 * 1024;
 * // 16 Writes in flight at once; more than initiatorDepth would wait in order
 * const write = (i: number) => qp.write(source.slice(i * chunk, chunk), remote, { offset: i * chunk });
 * const writes = Array.from({ length: 16 }, (_, i) => write(i));
 * await Promise.all(writes);
 * await qp.send(null); // "done": a zero-byte Send, after the Writes
 * await adapter.close();
 * ```
 */
export class QueuePair implements AsyncDisposable, RequestOwner, SlotOwner {
  /** Where receives complete. */
  readonly receiveCq: CompletionQueue;
  /** Where initiator requests (send, Read, Write, bind, invalidate) complete. */
  readonly initiatorCq: CompletionQueue;
  /** The shared receive queue this QP receives through, or null. */
  readonly srq: SharedReceiveQueue | null;
  /** Receives that may be posted at once (QueuePairOptions.receiveDepth as granted). */
  readonly receiveDepth: number;
  /** Initiator requests that may be in flight at once (QueuePairOptions.initiatorDepth as granted). */
  readonly initiatorDepth: number;
  /** SGEs a receive may have. */
  readonly maxReceiveSge: number;
  /** SGEs a send or Write may have. */
  readonly maxInitiatorSge: number;
  /** SGEs a Read may have (≤ maxInitiatorSge and adapter.info.maxReadSge). */
  readonly maxReadSge: number;
  /** Bytes a request with `inline` may carry. */
  readonly inlineDataSize: number;
  /** Requests that may wait in each queue while it is full (QueuePairOptions.maxQueued). */
  readonly maxQueued: number;
  /** @internal */ readonly _ctx: AdapterContext;
  /** @internal */ readonly _id: number;
  /** @internal */ readonly _native: NativeQueuePair;
  /** @internal */ _connector: Connector | null = null;
  private _state: 'open' | 'closing' | 'closed' = 'open';
  // The receive and initiator queues: outstanding requests, and those waiting for a slot, oldest first.
  private readonly _rq: SlotQueue;
  private readonly _iq: SlotQueue;
  // Requests with a table entry (every one but the silent ones); close() waits for them.
  private readonly _inflight = new InFlight();
  // Silent requests: no table entry; retired by the next completion of this QP (requests.ts SilentRequests).
  private readonly _silent: SilentRequests;
  // prepared.postMany()'s scratch (_postRun): descriptors (grown to the deeper queue's depth on first use), the SGE
  // triples every request of a run names, and its signalled requests' entries and indices (never truncated).
  private _runDesc = new Float64Array(0);
  private readonly _runSges: Float64Array;
  private readonly _runEntries: Array<PendingRequest | null> = [];
  private readonly _runAt: number[] = [];
  /** What broke the queue pair (its first failed request that was not a flush), for the flushed ones after it. */
  private _brokenBy: string | null = null;
  private _closing: Promise<void> | null = null;

  /** @internal Use adapter.createQueuePair(). */
  constructor(ctx: AdapterContext, id: number, options: QueuePairOptions) {
    const op = 'createQueuePair';
    const info = ctx.info;
    checkOptions(options, op, QUEUE_PAIR_KEYS);
    const receiveCq = options.receiveCq;
    const initiatorCq = options.initiatorCq ?? receiveCq;
    for (const [name, cq] of [['receiveCq', receiveCq], ['initiatorCq', initiatorCq]] as const) {
      if (!(cq instanceof CompletionQueue)) throw misuse(ERR_ND_INVALID_ARGUMENT, op, `${name} must be a CompletionQueue, got ${describe(cq)}`);
      if (cq._ctx !== ctx) throw misuse(ERR_ND_WRONG_ADAPTER, op, `${name} belongs to another adapter`);
      if (!cq._open) throw misuse(ERR_ND_CLOSED, op, `${name} is closed`);
    }
    const srq = options.srq ?? null;
    if (srq !== null) {
      if (!(srq instanceof SharedReceiveQueue)) throw misuse(ERR_ND_INVALID_ARGUMENT, op, `srq must be a SharedReceiveQueue, got ${describe(srq)}`);
      if (srq._ctx !== ctx) throw misuse(ERR_ND_WRONG_ADAPTER, op, 'srq belongs to another adapter');
      if (!srq._open) throw misuse(ERR_ND_CLOSED, op, 'srq is closed');
    }
    this._ctx = ctx;
    this._id = id;
    this.receiveCq = receiveCq;
    this.initiatorCq = initiatorCq;
    this.srq = srq;
    this.receiveDepth = ctx.count(options.receiveDepth, 'receiveDepth', 128, info.maxReceiveQueueDepth, op);
    this.initiatorDepth = ctx.count(options.initiatorDepth, 'initiatorDepth', 128, info.maxInitiatorQueueDepth, op);
    this.maxReceiveSge = ctx.count(options.maxReceiveSge, 'maxReceiveSge', 4, Math.min(info.maxReceiveSge, SCRATCH_SGES), op);
    this.maxInitiatorSge = ctx.count(options.maxInitiatorSge, 'maxInitiatorSge', 4, Math.min(info.maxInitiatorSge, SCRATCH_SGES), op);
    this.maxReadSge = Math.max(1, Math.min(this.maxInitiatorSge, info.maxReadSge || this.maxInitiatorSge));
    this.inlineDataSize = ctx.count(options.inlineDataSize, 'inlineDataSize', 256, info.maxInlineDataSize, op, true);
    this.maxQueued = maxQueuedOf(options.maxQueued, op);
    this._rq = new SlotQueue('receive', this.receiveDepth, this.maxQueued);
    this._iq = new SlotQueue('initiator', this.initiatorDepth, this.maxQueued);
    this._silent = new SilentRequests(this.initiatorDepth);
    this._runSges = new Float64Array(3 * Math.max(this.maxInitiatorSge, this.maxReceiveSge, this.maxReadSge));
    this._native = ctx.native.createQueuePair(
      receiveCq._native,
      initiatorCq._native,
      srq === null ? null : srq._native,
      id,
      this.receiveDepth,
      this.initiatorDepth,
      this.maxReceiveSge,
      this.maxInitiatorSge,
      this.inlineDataSize,
    );
    receiveCq._users.add(this);
    initiatorCq._users.add(this);
    srq?._users.add(this);
  }

  /**
   * The transport of this QP's connection: 'shm' when both ends are on this host and moved it to shared memory
   * (AdapterOptions.sharedMemory, docs/shm.md), 'tcp' for the built-in provider's iWARP over TCP, the provider's
   * name for another provider; undefined before the QP was connected.
   */
  get transport(): 'tcp' | 'shm' | string | undefined {
    if (this._state !== 'open') return this._transport;
    const t = this._native.transport();
    if (t !== undefined) this._transport = t;
    else if (this._connector !== null && this._ctx.native.provider !== 'soft') this._transport = this._ctx.native.provider;
    return this._transport;
  }
  private _transport: string | undefined = undefined;

  /** The connector this QP was connected or accepted with, if any. */
  get connector(): Connector | null {
    return this._connector;
  }
  /** @internal */
  get _open(): boolean {
    return this._state === 'open';
  }
  /** Requests posted on this QP that have not completed yet (waiting ones not included: see `queued`). */
  get outstanding(): { receive: number; initiator: number } {
    return { receive: this._rq.outstanding, initiator: this._iq.outstanding };
  }

  /** Requests waiting for a slot of their full queue (posted in order as completions free slots). */
  get queued(): { receive: number; initiator: number } {
    return { receive: this._rq.queued, initiator: this._iq.queued };
  }

  /**
   * Sends `local` to the peer's next posted receive. Beyond initiatorDepth the request waits in order (up to
   * maxQueued).
   *
   * @param local - the bytes to send: a region (all of it), a segment, a list of them (one SGE each, gathered in
   *   order) or null for a zero-byte message; at most adapter.info.maxTransferLength bytes.
   * @param options - solicited, inline, fence; signal (ERR_ND_ABORTED at once; a posted request stays posted:
   *   see RequestSignalOption).
   * @returns the completion, once the message was delivered (`bytes`: the bytes sent).
   * @throws {@link NdError} ERR_ND_CLOSED when the queue pair, its adapter or a region of `local` is closed or
   *   deregistered; ERR_ND_INVALID_ARGUMENT for a `local` that is not a region, a segment or a list of them, an unknown
   *   option or a non-boolean flag; ERR_ND_WRONG_ADAPTER for a region of another adapter; ERR_ND_OUT_OF_RANGE for a
   *   segment outside its region; ERR_ND_DETACHED for a region whose ArrayBuffer was transferred; ERR_ND_TOO_MANY_SGES
   *   for more entries than maxInitiatorSge. ND_CONNECTION_INVALID when the queue pair is not connected;
   *   ND_NO_MORE_ENTRIES when the queue is full and maxQueued requests already wait; ND_CANCELED when it was flushed
   *   (qp.flush(), close(), a disconnect, or an earlier request of the queue pair failed); ND_REMOTE_ERROR when the
   *   peer refused it (no receive posted there, or one too small for the message); ND_ACCESS_VIOLATION when a local SGE
   *   fails the provider's check; ND_IO_TIMEOUT when the peer stopped answering; ND_BUFFER_OVERFLOW past
   *   maxTransferLength.
   */
  send(local: Local, options?: SendOptions): Promise<Completion> {
    return this._request(K_SEND, 'send', local, undefined, options, SEND_KEYS);
  }

  /**
   * Posts a receive; completion.bytes is the number of bytes received. Receives can be posted ahead and
   * awaited later: one that fails before it is awaited (the peer went away) rejects only when awaited.
   *
   * @param local - where the next message lands: a region, a segment, a list of them (scattered in order) or
   *   null for zero-byte messages only. The region needs `localWrite` access.
   * @param options - signal: ERR_ND_ABORTED at once; a posted receive stays posted and still takes the next
   *   message, which the error's `completion` gives (see RequestSignalOption).
   * @returns the completion (`bytes`: the message's length).
   * @throws {@link NdError} ERR_ND_CLOSED when the queue pair, its adapter or a region of `local` is closed or
   *   deregistered; ERR_ND_INVALID_ARGUMENT for a `local` that is not a region, a segment or a list of them, an unknown
   *   option or a non-boolean flag; ERR_ND_WRONG_ADAPTER for a region of another adapter; ERR_ND_OUT_OF_RANGE for a
   *   segment outside its region; ERR_ND_DETACHED for a region whose ArrayBuffer was transferred; ERR_ND_TOO_MANY_SGES
   *   for more entries than maxReceiveSge; ERR_ND_INVALID_ARGUMENT when the queue pair receives through a shared
   *   receive queue (use srq.receive()). ND_CONNECTION_INVALID when the queue pair is not connected; ND_NO_MORE_ENTRIES
   *   when the queue is full and maxQueued requests already wait; ND_CANCELED when it was flushed (qp.flush(), close(),
   *   a disconnect, or an earlier request of the queue pair failed); ND_ACCESS_VIOLATION when a local SGE fails the
   *   provider's check (at post time); ND_BUFFER_OVERFLOW when the message is larger than `local`.
   */
  receive(local: Local, options?: ReceiveOptions): Promise<Completion> {
    return this._request(K_RECEIVE, 'receive', local, undefined, options, RECEIVE_KEYS);
  }

  /**
   * RDMA Write of `local` to remote.address + options.offset. Waits in order beyond initiatorDepth (up to
   * maxQueued). The peer sees no completion: follow with a send() to tell it the data is there.
   *
   * @param local - the bytes to write: a region, a segment, a list of them or null; at most
   *   adapter.info.maxTransferLength bytes.
   * @param remote - the peer's memory (decodeRemote() of what it sent); needs remoteWrite access there.
   * @param options - offset (bytes into `remote`), inline, fence; signal (see RequestSignalOption).
   * @returns the completion (`bytes`: the bytes written).
   * @throws {@link NdError} ERR_ND_CLOSED when the queue pair, its adapter or a region of `local` is closed or
   *   deregistered; ERR_ND_INVALID_ARGUMENT for a `local` that is not a region, a segment or a list of them, an unknown
   *   option or a non-boolean flag; ERR_ND_WRONG_ADAPTER for a region of another adapter; ERR_ND_OUT_OF_RANGE for a
   *   segment outside its region; ERR_ND_DETACHED for a region whose ArrayBuffer was transferred; ERR_ND_TOO_MANY_SGES
   *   for more entries than maxInitiatorSge; ERR_ND_INVALID_ARGUMENT for a `remote` that is not a RemoteMemory;
   *   ERR_ND_OUT_OF_RANGE when the bytes at `offset` do not fit `remote.length`. ND_CONNECTION_INVALID when the queue
   *   pair is not connected; ND_NO_MORE_ENTRIES when the queue is full and maxQueued requests already wait; ND_CANCELED
   *   when it was flushed (qp.flush(), close(), a disconnect, or an earlier request of the queue pair failed);
   *   ND_ACCESS_VIOLATION when the peer's region or window does not allow the Write (token, bounds, rights) or a local
   *   SGE fails its check; ND_IO_TIMEOUT when the peer stopped answering; ND_BUFFER_OVERFLOW past maxTransferLength.
   */
  write(local: Local, remote: RemoteMemory, options?: WriteOptions): Promise<Completion> {
    return this._request(K_WRITE, 'write', local, remote, options, WRITE_KEYS);
  }

  /**
   * RDMA Read from remote.address + options.offset into `local`. Waits in order beyond initiatorDepth; Reads
   * beyond the connection's outbound read limit (ORD) are held by the provider, in order, not refused.
   *
   * @param local - where the bytes land: a region, a segment or a list of them (regions with `readSink` and
   *   `localWrite` access); at most adapter.info.maxTransferLength bytes.
   * @param remote - the peer's memory; needs remoteRead access there.
   * @param options - offset (bytes into `remote`), fence; signal (see RequestSignalOption).
   * @returns the completion (`bytes`: the bytes read).
   * @throws {@link NdError} ERR_ND_CLOSED when the queue pair, its adapter or a region of `local` is closed or
   *   deregistered; ERR_ND_INVALID_ARGUMENT for a `local` that is not a region, a segment or a list of them, an unknown
   *   option or a non-boolean flag; ERR_ND_WRONG_ADAPTER for a region of another adapter; ERR_ND_OUT_OF_RANGE for a
   *   segment outside its region; ERR_ND_DETACHED for a region whose ArrayBuffer was transferred; ERR_ND_TOO_MANY_SGES
   *   for more entries than maxReadSge; ERR_ND_INVALID_ARGUMENT for a `remote` that is not a RemoteMemory;
   *   ERR_ND_OUT_OF_RANGE when the bytes at `offset` do not fit `remote.length`. ND_CONNECTION_INVALID when the queue
   *   pair is not connected; ND_NO_MORE_ENTRIES when the queue is full and maxQueued requests already wait; ND_CANCELED
   *   when it was flushed (qp.flush(), close(), a disconnect, or an earlier request of the queue pair failed);
   *   ND_ACCESS_VIOLATION when the peer's memory does not allow the Read or the local sink fails its check;
   *   ND_REMOTE_ERROR when the peer's response breaks the protocol; ND_IO_TIMEOUT when the peer does not answer within
   *   the response deadline (docs/nd2.md §3.6).
   */
  read(local: Local, remote: RemoteMemory, options?: ReadOptions): Promise<Completion> {
    return this._request(K_READ, 'read', local, remote, options, READ_KEYS);
  }

  /**
   * The low-level fast path: posts without a Promise; the completion (with `context`) comes back from
   * cq.poll(). `silent` requests produce no completion on success (errors still do). Beyond the depth the
   * request waits in order like the promise ones; one that is cancelled while waiting completes with
   * ND_CANCELED through cq.poll(). A silent request never waits (it throws ND_NO_MORE_ENTRIES instead): silent
   * requests free their slots only when a later request completes, so waiting ones could wait forever.
   *
   * @param op - the request type.
   * @param local - local memory, as for send()/receive()/read()/write().
   * @param remote - the peer's memory, for 'read' and 'write' only.
   * @param options - context (returned by cq.poll()), silent, and the options of the request type.
   * @throws {@link NdError} synchronously, for what send()/receive()/read()/write() reject with before posting: the
   *   misuse codes, ND_CONNECTION_INVALID, ND_NO_MORE_ENTRIES. Completion failures (ND_CANCELED, ND_ACCESS_VIOLATION,
   *   ...) arrive as the `status` of the raw completion.
   */
  post(op: 'send' | 'receive' | 'read' | 'write', local: Local, remote?: RemoteMemory, options?: PostOptions): void {
    const kind = POST_KINDS[op as string];
    if (kind === undefined || typeof op !== 'string') {
      throw misuse(ERR_ND_INVALID_ARGUMENT, 'post', `op must be 'send', 'receive', 'read' or 'write', got ${describe(op)}`);
    }
    const flags = flagsOf(options, op, POST_KEYS);
    if (kind === K_RECEIVE && (flags & ND_OP_FLAG_SILENT_SUCCESS) !== 0) {
      throw misuse(ERR_ND_INVALID_ARGUMENT, op, 'receives cannot be silent');
    }
    if (this._mustWait(kind)) {
      if ((flags & ND_OP_FLAG_SILENT_SUCCESS) !== 0) throw silentCannotWait(op, this._iq.outstanding, this.initiatorDepth);
      const w = this._enqueue(kind, op, local, remote, options?.offset, flags);
      w.raw = true;
      w.context = options?.context;
      return;
    }
    if ((flags & ND_OP_FLAG_SILENT_SUCCESS) !== 0) {
      this._postSilent(kind, op, local, remote, options?.offset, flags, options?.context);
      return;
    }
    const e = this._post(kind, op, local, remote, options?.offset, flags);
    e.raw = true;
    e.context = options?.context;
  }

  /**
   * A reusable batch of requests of this queue pair, posted together with one native call (batch.post()), with a
   * completion for every request or only every `signalEvery`th. Completions come from cq.poll() as for post().
   *
   * @param options - capacity (requests, default 64), signalEvery (default 1).
   * @throws {@link NdError} ERR_ND_INVALID_ARGUMENT for an unknown option or a count that is not an integer;
   *   ERR_ND_OUT_OF_RANGE for a capacity outside 1..65536 or a signalEvery of 0.
   */
  batch(options?: BatchOptions): PostBatch {
    return new PostBatch(this, checkBatchOptions(options), Math.max(this.maxInitiatorSge, this.maxReceiveSge));
  }

  /**
   * A request validated once and posted by handle (prepared.post(offset, length, context)): its local memory, remote
   * memory and flags are fixed here; each post passes only the remote offset, the length and a context, allocates
   * nothing, and completes through cq.poll() / cq.pollInto() as qp.post() does. batch.add(prepared, ...) puts one
   * into a PostBatch. The handle does not pin its regions (each post does, until its completion).
   *
   * @param op - the request type.
   * @param local - local memory, as for send()/receive()/read()/write().
   * @param remote - the peer's memory, for 'read' and 'write' only.
   * @param options - offset (the default remote offset of each post), silent, inline, solicited, fence.
   * @throws {@link NdError} what qp.post() throws for the same request before posting (misuse codes, ERR_ND_CLOSED);
   *   ERR_ND_INVALID_ARGUMENT for a silent receive.
   */
  prepare(op: 'send' | 'receive' | 'read' | 'write', local: Local, remote?: RemoteMemory, options?: PrepareOptions): PreparedRequest {
    checkPrepareOp(op);
    const kind = POST_KINDS[op];
    const flags = flagsOf(options, op, PREPARE_KEYS);
    if (kind === K_RECEIVE && (flags & ND_OP_FLAG_SILENT_SUCCESS) !== 0) {
      throw misuse(ERR_ND_INVALID_ARGUMENT, op, 'receives cannot be silent');
    }
    const maxSge = kind === K_RECEIVE ? this.maxReceiveSge : kind === K_READ ? this.maxReadSge : this.maxInitiatorSge;
    const triples = new Float64Array(maxSge * 3);
    const offset = options?.offset;
    const p = this._prepare(kind, op, local, remote, offset, triples, 0);
    let remoteLength = 0;
    if (p.address !== undefined) {
      remoteLength = (remote as RemoteMemory).length;
      // Every post's range lies inside the remote memory: it must not wrap 2^64 as a whole.
      if (p.address > WRAP_RISK && p.address + BigInt(remoteLength) > TOP) {
        throw misuse(ERR_ND_OUT_OF_RANGE, op, 'the remote range wraps around 2^64');
      }
    }
    return new PreparedRequest(this, op, kind, flags, triples.slice(0, p.nSge * 3), p.nSge, p.bytes, p.pins, p.address, remoteLength, p.token, p.offset);
  }

  /** @internal PreparedRequest.post(): posts it with the scratch array and the single-request native call. */
  _postPrepared(p: PreparedRequest, offset: number | undefined, length: number | undefined, context: unknown): void {
    const kind = p._kind;
    const op = p.operation;
    try {
      this._checkPostable(op);
      if (p._qp !== this) throw misuse(ERR_ND_INVALID_ARGUMENT, op, 'the prepared request belongs to another queue pair');
      checkPins(p._pins, op);
      const queue = kind === K_RECEIVE ? this._rq : this._iq;
      if (queue.queued > 0 || queue.outstanding >= queue.depth) throw preparedCannotWait(queue, op);
    } catch (err) {
      throw callerStack(asNdError(err, op));
    }
    const nSge = p._fill(this._ctx.scratch, 0, offset, length, op);
    const bytes = length ?? p.bytes;
    if ((p._flags & ND_OP_FLAG_SILENT_SUCCESS) !== 0) {
      // No table entry: the silent request's number is its id (SilentRequests).
      const s = this._silent;
      try {
        this._native.post(kind | (p._flags << 8), s.next >>> 0, nSge, p._address ?? 0n, p._postOffset, p._token);
      } catch (err) {
        throw callerStack(this._postError(asNdError(err, op), bytes));
      }
      s.add(context, kind, p._pins);
      this._iq.outstanding++;
      return;
    }
    const a = this._ctx;
    const e = a.requests.acquire(kind, op, this);
    e.raw = true;
    e.context = context;
    e.bytes = bytes;
    e.remoteAddress = p._address;
    e.remoteOffset = p._postOffset;
    e.remoteToken = p._token;
    e.silentUpTo = this._silent.posted;
    try {
      this._native.post(kind | (p._flags << 8), e.id, nSge, p._address ?? 0n, p._postOffset, p._token);
    } catch (err) {
      a.requests.release(e);
      throw callerStack(this._postError(asNdError(err, op), bytes));
    }
    e.pins = p._pins;
    pin(p._pins);
    if (kind === K_RECEIVE) this._rq.outstanding++;
    else this._iq.outstanding++;
    this._inflight.begin();
  }

  /**
   * @internal PreparedRequest.postMany(): `count` posts of `p` with one native call, checked once for the run. The
   * requests are those `count` batch.add(p, ...) calls would make, numbered, pinned and accounted in the same order
   * (_postBatch), with the descriptors written into the queue pair's own scratch and every one of them naming the
   * same SGE triples.
   */
  _postRun(p: PreparedRequest, count: number, options: PostManyOptions | undefined): number {
    const op = p.operation;
    const kind = p._kind;
    const queue = kind === K_RECEIVE ? this._rq : this._iq;
    const sges = this._runSges;
    let every: number;
    let context: unknown;
    let nSge: number;
    let bytes: number;
    let stride = 0;
    try {
      this._checkPostable(op);
      if (p._qp !== this) throw misuse(ERR_ND_INVALID_ARGUMENT, op, 'the prepared request belongs to another queue pair');
      checkPins(p._pins, op);
      checkIndex(count, 'count', op);
      if (count < 1) throw misuse(ERR_ND_OUT_OF_RANGE, op, `count must be at least 1, got ${count}`);
      if (options !== undefined) checkOptions(options, op, POST_MANY_KEYS);
      every = options?.signalEvery === undefined ? count : checkIndex(options.signalEvery, 'signalEvery', op);
      if (every < 1) throw misuse(ERR_ND_OUT_OF_RANGE, op, `signalEvery must be at least 1, got ${every}`);
      if (options?.stride !== undefined) stride = checkIndex(options.stride, 'stride', op);
      context = options?.context;
      if (typeof context === 'number' && !(Number.isInteger(context) && context >= 0 && context + count - 1 <= 0xffffffff)) {
        throw misuse(ERR_ND_OUT_OF_RANGE, op, `a numeric context must be an integer with context + count - 1 in 0..2^32-1, got ${context} for ${count} requests`);
      }
      // A run never waits, as a batch: its silent requests could not, and waiting would split it.
      checkBatchFits(queue, count, op);
      nSge = p._fill(sges, 0, options?.offset, options?.length, op);
      bytes = options?.length ?? p.bytes;
      if (stride !== 0) {
        if (kind !== K_READ && kind !== K_WRITE) throw misuse(ERR_ND_INVALID_ARGUMENT, op, `a prepared ${op} takes no stride, got ${stride}`);
        const last = p._postOffset + (count - 1) * stride;
        if (last > p._remoteLength - bytes) {
          throw misuse(ERR_ND_OUT_OF_RANGE, op, `request ${count - 1} of the run (${bytes} bytes at offset ${last}) does not fit the remote's ${p._remoteLength} bytes`);
        }
      }
    } catch (err) {
      throw callerStack(asNdError(err, op));
    }
    let d = this._runDesc;
    if (d.length < count * DESC_WORDS) d = this._runDesc = new Float64Array(Math.max(this.initiatorDepth, this.receiveDepth) * DESC_WORDS);
    const requests = this._ctx.requests;
    const silent = this._silent;
    const entries = this._runEntries;
    const at_ = this._runAt;
    const silentAll = kind === K_RECEIVE ? false : (p._flags & ND_OP_FLAG_SILENT_SUCCESS) !== 0;
    const signalledWord = kind | (p._flags << 8);
    const silentWord = kind | ((p._flags | ND_OP_FLAG_SILENT_SUCCESS) << 8);
    const numeric = typeof context === 'number';
    const low = p._addressLow;
    const high = p._addressHigh;
    const token = p._token;
    // Silent requests get no table entry: their ids are the numbers they will have among the queue pair's silent
    // requests, recorded once posted; a signalled one's entry notes the last silent number before it (_postBatch).
    let next = silent.posted;
    let signalled = 0;
    let off = p._postOffset;
    for (let i = 0; i < count; i++, off += stride) {
      const at = i * DESC_WORDS;
      d[at + 2] = nSge;
      d[at + 3] = 0;
      d[at + 4] = low;
      d[at + 5] = high;
      d[at + 6] = off;
      d[at + 7] = token;
      if (silentAll || (kind !== K_RECEIVE && (i + 1) % every !== 0 && i + 1 !== count)) {
        d[at] = silentWord;
        d[at + 1] = ++next >>> 0;
        continue;
      }
      const e = requests.acquire(kind, op, this);
      e.raw = true;
      e.context = numeric ? (context as number) + i : context;
      e.bytes = bytes;
      e.remoteAddress = p._address;
      e.remoteOffset = off;
      e.remoteToken = token;
      e.silentUpTo = next;
      d[at] = signalledWord;
      d[at + 1] = e.id;
      entries[signalled] = e;
      at_[signalled] = i;
      signalled++;
    }
    let posted: number;
    try {
      posted = this._native.postMany(d, sges, count);
    } catch (err) {
      for (let j = 0; j < signalled; j++) {
        requests.release(entries[j] as PendingRequest);
        entries[j] = null;
      }
      throw callerStack(asNdError(err, op));
    }
    // In posting order: the silent ones between two signalled ones as one run of the ring.
    const pins = p._pins;
    let from = 0;
    for (let j = 0; j < signalled; j++) {
      const i = at_[j];
      const e = entries[j] as PendingRequest;
      entries[j] = null;
      if (i >= posted) {
        requests.release(e);
        continue;
      }
      if (i > from) {
        silent.addRun(numeric ? (context as number) + from : context, i - from, kind, pins);
        this._iq.outstanding += i - from;
      }
      this._began(e, pins, queue);
      from = i + 1;
    }
    if (posted > from) {
      silent.addRun(numeric ? (context as number) + from : context, posted - from, kind, pins);
      this._iq.outstanding += posted - from;
    }
    if (posted < count) {
      // The refused request's status is in its id word (QueuePair::PostMany).
      const status = d[posted * DESC_WORDS + 1] >>> 0;
      throw callerStack(
        this._postError(
          statusError(status, op,
            `request ${posted} of the run of ${count} (${bytes} bytes) was refused: the ${posted} before it were posted ` +
              `(their completions come from cq.poll()), it and the ${count - posted - 1} after it were not`),
          bytes,
        ),
      );
    }
    return count;
  }

  /** @internal PostBatch.add(): a prepared request of this queue pair into the batch. */
  _batchAddPrepared(b: PostBatch, p: PreparedRequest, offset: number | undefined, length: number | undefined, context: unknown): void {
    if (!(p instanceof PreparedRequest)) throw misuse(ERR_ND_INVALID_ARGUMENT, 'add', `expected a PreparedRequest (qp.prepare()), got ${describe(p)}`);
    const op = p.operation;
    this._checkPostable(op);
    if (p._qp !== this) throw misuse(ERR_ND_INVALID_ARGUMENT, op, 'the prepared request belongs to another queue pair than the batch');
    checkPins(p._pins, op);
    const i = b._count;
    if (i >= b.capacity) throw misuse(ERR_ND_OUT_OF_RANGE, op, `the batch is full (capacity ${b.capacity}): post() it first`);
    const first = b._sgeCount;
    const nSge = p._fill(b._sges, first, offset, length, op);
    const d = b._desc;
    const at = i * DESC_WORDS;
    d[at] = p._kind | (p._flags << 8);
    d[at + 1] = 0;
    d[at + 2] = nSge;
    d[at + 3] = first;
    d[at + 4] = p._addressLow;
    d[at + 5] = p._addressHigh;
    d[at + 6] = p._postOffset;
    d[at + 7] = p._token;
    b._pins[i] = p._pins;
    b._context[i] = context;
    b._bytes[i] = length ?? p.bytes;
    b._remote[i] = p._address;
    b._sgeCount = first + nSge;
    b._count = i + 1;
    if (p._kind === K_RECEIVE) b._receive++;
    else b._initiator++;
  }

  /** @internal PostBatch.send/write/read/receive: validates a request and adds it to the batch. */
  _batchAdd(b: PostBatch, kind: number, operation: string, local: Local, remote: RemoteMemory | undefined, options: PostOptions | undefined): void {
    const flags = flagsOf(options, operation, POST_KEYS);
    if (kind === K_RECEIVE && (flags & ND_OP_FLAG_SILENT_SUCCESS) !== 0) {
      throw misuse(ERR_ND_INVALID_ARGUMENT, operation, 'receives cannot be silent');
    }
    const i = b._count;
    if (i >= b.capacity) throw misuse(ERR_ND_OUT_OF_RANGE, operation, `the batch is full (capacity ${b.capacity}): post() it first`);
    const first = b._sgeCount;
    const p = this._prepare(kind, operation, local, remote, options?.offset, b._sges, first);
    const d = b._desc;
    const at = i * DESC_WORDS;
    d[at] = kind | (flags << 8);
    d[at + 1] = 0;
    d[at + 2] = p.nSge;
    d[at + 3] = first;
    if (p.address !== undefined) {
      b._split(p.address);
      d[at + 4] = b._addressLow;
      d[at + 5] = b._addressHigh;
    } else {
      d[at + 4] = 0;
      d[at + 5] = 0;
    }
    d[at + 6] = p.offset;
    d[at + 7] = p.token;
    b._pins[i] = p.pins;
    b._context[i] = options?.context;
    b._bytes[i] = p.bytes;
    b._remote[i] = p.address;
    b._sgeCount = first + p.nSge;
    b._count = i + 1;
    if (kind === K_RECEIVE) b._receive++;
    else b._initiator++;
  }

  /** @internal PostBatch.post(): every request of the batch with one native call, then empties it. */
  _postBatch(b: PostBatch): number {
    const op = 'post';
    const n = b._count;
    if (n === 0) return 0;
    try {
      this._checkPostable(op);
      // A batch never waits: its silent requests could not (see post()), and waiting would split it.
      checkBatchFits(this._iq, b._initiator, op);
      checkBatchFits(this._rq, b._receive, op);
      // A region may have been deregistered since its request was added.
      // Once per run of requests with the same pins (a prepared request's, one region's).
      let checked: Pins | undefined;
      for (let i = 0; i < n; i++) {
        const pins = b._pins[i];
        if (pins !== checked) checkPins((checked = pins), op);
      }
    } catch (err) {
      b.clear();
      throw callerStack(asNdError(err, op));
    }
    const requests = this._ctx.requests;
    const silent = this._silent;
    const d = b._desc;
    const entries = b._entries;
    const every = b.signalEvery;
    // Silent requests get no table entry: their ids are the numbers they will have among the queue pair's silent
    // requests (SilentRequests), recorded once they are posted; a signalled one's entry notes the last silent number
    // before it, which its completion retires.
    let next = silent.posted;
    let initiator = 0;
    for (let i = 0; i < n; i++) {
      const at = i * DESC_WORDS;
      const kind = d[at] & 0xff;
      let flags = d[at] >>> 8;
      if (kind !== K_RECEIVE) {
        initiator++;
        if (every > 1 && initiator % every !== 0 && initiator !== b._initiator) flags |= ND_OP_FLAG_SILENT_SUCCESS;
      }
      d[at] = kind | (flags << 8);
      if ((flags & ND_OP_FLAG_SILENT_SUCCESS) !== 0) {
        d[at + 1] = ++next >>> 0;
        entries[i] = null;
        continue;
      }
      const e = requests.acquire(kind, REQUEST_TYPES[kind], this);
      e.raw = true;
      e.context = b._context[i];
      e.bytes = b._bytes[i];
      e.remoteAddress = b._remote[i];
      e.remoteOffset = d[at + 6];
      e.remoteToken = d[at + 7];
      e.silentUpTo = next;
      d[at + 1] = e.id;
      entries[i] = e;
    }
    let posted: number;
    try {
      posted = this._native.postMany(d, b._sges, n);
    } catch (err) {
      for (let i = 0; i < n; i++) if (entries[i] !== null) requests.release(entries[i] as PendingRequest);
      entries.fill(null, 0, n);
      b.clear();
      throw callerStack(asNdError(err, op));
    }
    for (let i = 0; i < posted; i++) {
      const e = entries[i];
      if (e === null) {
        silent.add(b._context[i], d[i * DESC_WORDS] & 0xff, b._pins[i]);
        this._iq.outstanding++;
        continue;
      }
      this._began(e, b._pins[i], e.kind === K_RECEIVE ? this._rq : this._iq);
    }
    let error: NdError | null = null;
    if (posted < n) {
      // The refused request's status is in its id word (QueuePair::PostMany).
      const at = posted * DESC_WORDS;
      const status = d[at + 1] >>> 0;
      const bytes = b._bytes[posted];
      error = this._postError(
        statusError(status, REQUEST_TYPES[d[at] & 0xff],
          `request ${posted} of the batch of ${n} (${bytes} bytes) was refused: the ${posted} before it were posted ` +
            `(their completions come from cq.poll()), it and the ${n - posted - 1} after it were not`),
        bytes,
      );
      for (let i = posted; i < n; i++) if (entries[i] !== null) requests.release(entries[i] as PendingRequest);
    }
    entries.fill(null, 0, n);
    b.clear();
    if (error !== null) throw callerStack(error);
    return n;
  }

  /**
   * Binds `window` to a region or segment; resolves with what the peer needs to access it. An initiator request:
   * waits in order behind the others.
   *
   * @param window - a memory window of this adapter (adapter.createMemoryWindow()).
   * @param region - the memory the window exposes: a whole region or a segment of one.
   * @param access - `read` and/or `write` (at least one) for the peer.
   * @returns `{ address, token, length }` for the peer; the token is window.remoteToken.
   * @throws {@link NdError} ERR_ND_CLOSED when the queue pair, the window or the region is closed;
   *   ERR_ND_INVALID_ARGUMENT for a wrong window, region or access (an unknown key, neither read nor write);
   *   ERR_ND_WRONG_ADAPTER for a window or region of another adapter; ERR_ND_OUT_OF_RANGE for a segment outside its
   *   region. ND_CONNECTION_INVALID when the queue pair is not connected; ND_NO_MORE_ENTRIES when the queue is full and
   *   maxQueued requests already wait; ND_CANCELED when it was flushed (qp.flush(), close(), a disconnect, or an
   *   earlier request of the queue pair failed).
   */
  bind(window: MemoryWindow, region: MemoryRegion | Segment, access: { read?: boolean; write?: boolean }): Promise<RemoteMemory> {
    const returned: Returned = { promise: null };
    const p = this._bind(window, region, access, returned);
    returned.promise = p;
    return p;
  }

  private async _bind(
    window: MemoryWindow,
    region: MemoryRegion | Segment,
    access: { read?: boolean; write?: boolean },
    returned: Returned,
  ): Promise<RemoteMemory> {
    const op = 'bind';
    try {
      this._checkPostable(op);
      checkWindow(window, this._ctx, op);
      let mr: unknown = region;
      let offset = 0;
      let length: number;
      if (region instanceof MemoryRegion) {
        length = region.length;
      } else if (typeof region === 'object' && region !== null && 'region' in region) {
        mr = region.region;
        offset = checkIndex(region.offset, 'segment.offset', op);
        length = checkIndex(region.length, 'segment.length', op);
      } else {
        throw misuse(ERR_ND_INVALID_ARGUMENT, op, `region must be a MemoryRegion or a Segment, got ${describe(region)}`);
      }
      if (!(mr instanceof MemoryRegion)) throw misuse(ERR_ND_INVALID_ARGUMENT, op, `region must be a MemoryRegion, got ${describe(mr)}`);
      if (mr._ctx !== this._ctx) throw misuse(ERR_ND_WRONG_ADAPTER, op, 'the memory region was registered on another adapter');
      mr._checkUsable(op);
      if (offset > mr.length || length > mr.length - offset) {
        throw misuse(ERR_ND_OUT_OF_RANGE, op, `segment [${offset}, ${offset + length}) is outside the ${mr.length}-byte region`);
      }
      checkOptions(access, op, BIND_ACCESS_KEYS, 'access');
      const read = checkBoolean(access.read, 'access.read', op, false);
      const write = checkBoolean(access.write, 'access.write', op, false);
      const flags = (read ? ND_OP_FLAG_ALLOW_READ : 0) | (write ? ND_OP_FLAG_ALLOW_WRITE : 0);
      if (flags === 0) throw misuse(ERR_ND_INVALID_ARGUMENT, op, 'access must allow read and/or write');
      const region_ = mr;
      // Completions arrive through onBatch or cq.poll(), never inside the native call: settled later.
      return await this._initiate<RemoteMemory>(op, (resolve, reject) => {
        this._checkPostable(op);
        checkWindow(window, this._ctx, op);
        region_._checkUsable(op);
        const a = this._ctx;
        const e = a.requests.acquire(K_BIND, op, this);
        const address = region_.address + BigInt(offset);
        e.silentUpTo = this._silent.posted;
        e.pins = region_;
        window._inflight.begin();
        try {
          e.extra = this._native.bind(e.id, region_._native, window._native, offset, length, flags) >>> 0;
        } catch (err) {
          window._inflight.end();
          a.requests.release(e);
          throw err;
        }
        pin(region_);
        this._iq.outstanding++;
        this._inflight.begin();
        e.resolve = () => {
          window._inflight.end();
          window._bound = true;
          resolve({ address, token: window.remoteToken, length });
        };
        e.reject = (err) => {
          window._inflight.end();
          reject(err);
        };
      });
    } catch (err) {
      const error = callerStack(asNdError(err, op));
      returned.promise?.catch(ignore);
      throw error;
    }
  }

  /**
   * Invalidates a bound memory window: later remote access through its token fails. An initiator request: waits
   * in order behind the others.
   *
   * @param window - a window bound through this queue pair.
   * @returns the completion.
   * @throws {@link NdError} ERR_ND_CLOSED when the queue pair or the window is closed; ERR_ND_INVALID_ARGUMENT when
   *   `window` is not a MemoryWindow; ERR_ND_WRONG_ADAPTER for one of another adapter. ND_CONNECTION_INVALID when the
   *   queue pair is not connected; ND_NO_MORE_ENTRIES when the queue is full and maxQueued requests already wait;
   *   ND_CANCELED when it was flushed (qp.flush(), close(), a disconnect, or an earlier request of the queue pair
   *   failed).
   */
  invalidate(window: MemoryWindow): Promise<Completion> {
    const returned: Returned = { promise: null };
    const p = this._invalidate(window, returned);
    returned.promise = p;
    return p;
  }

  private async _invalidate(window: MemoryWindow, returned: Returned): Promise<Completion> {
    const op = 'invalidate';
    try {
      this._checkPostable(op);
      checkWindow(window, this._ctx, op);
      return await this._initiate<Completion>(op, (resolve, reject) => {
        this._checkPostable(op);
        checkWindow(window, this._ctx, op);
        const a = this._ctx;
        const e = a.requests.acquire(K_INVALIDATE, op, this);
        e.silentUpTo = this._silent.posted;
        window._inflight.begin();
        try {
          this._native.invalidate(e.id, window._native, 0);
        } catch (err) {
          window._inflight.end();
          a.requests.release(e);
          throw err;
        }
        this._iq.outstanding++;
        this._inflight.begin();
        e.resolve = (c: Completion) => {
          window._inflight.end();
          window._bound = false;
          resolve(c);
        };
        e.reject = (err) => {
          window._inflight.end();
          reject(err);
        };
      });
    } catch (err) {
      const error = callerStack(asNdError(err, op));
      returned.promise?.catch(ignore);
      throw error;
    }
  }

  /**
   * Posts an initiator request that `start` makes (bind, invalidate) now if the initiator queue has a free slot
   * and nothing waits, else queues it behind the waiting ones.
   */
  private _initiate<T>(operation: string, start: (resolve: (value: T) => void, reject: (reason: unknown) => void) => void): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      if (!this._mustWait(K_BIND)) {
        start(resolve, reject);
        return;
      }
      const w = this._enqueue(K_BIND, operation, null, undefined, undefined, 0);
      w.resolve = resolve;
      w.reject = reject;
      w.start = () => start(resolve, reject);
    });
  }

  /**
   * Cancels every outstanding request of this QP: they complete with ND_CANCELED, and so do the requests still
   * waiting for a slot (they are never posted). The connection cannot carry requests afterwards.
   *
   * @throws {@link NdError} ERR_ND_CLOSED when the queue pair is closed.
   */
  flush(): void {
    if (this._state === 'closed') throw misuse(ERR_ND_CLOSED, 'flush', 'queue pair is closed');
    this._cancelWaiting('the queue pair was flushed');
    this._native.flush();
  }

  /**
   * Disconnects the QP's connection if any, flushes, waits until every request posted on it has settled
   * (ND_CANCELED for the flushed ones; their regions are unpinned), then releases the QP. Idempotent: every
   * call returns the same promise, which never rejects.
   */
  close(): Promise<void> {
    return (this._closing ??= this._close());
  }

  private async _close(): Promise<void> {
    this._state = 'closing';
    this._cancelWaiting('the queue pair was closed');
    const connector = this._connector;
    if (connector !== null) await connector.disconnect().catch(() => undefined);
    try {
      this._native.flush();
    } catch {
      // Already unusable: the completions that remain are settled below.
    }
    if (this._ctx.completion === 'manual') {
      // Nobody else dequeues in manual mode: drain the CQs until this QP's requests have settled.
      while (this._inflight.inFlight > 0) {
        this.receiveCq._drain();
        if (this.initiatorCq !== this.receiveCq) this.initiatorCq._drain();
        if (this._inflight.inFlight > 0) await new Promise<void>((resolve) => setImmediate(resolve));
      }
    } else {
      await this._inflight.idle();
    }
    this._native.close();
    this._state = 'closed';
    // Silent requests that never got a completion: the provider no longer touches their memory.
    this._settleSilent(ND_CANCELED);
    this._ctx.settleOwned(this, ND_CANCELED);
    this.receiveCq._users.delete(this);
    this.initiatorCq._users.delete(this);
    this.srq?._users.delete(this);
    if (connector !== null && connector._qp === this) connector._qp = null;
    this._connector = null;
    this._ctx.forget(this);
  }

  /** close(), for `await using qp = adapter.createQueuePair(...)`. */
  async [Symbol.asyncDispose](): Promise<void> {
    await this.close();
  }

  /**
   * @internal RequestOwner: a request of this QP completed (or is settled at teardown). Frees its slot, settles it,
   * then gives the slot to the oldest waiting request; a failure puts the queue pair in the error state (the
   * provider flushes whatever follows), so the waiting requests are cancelled instead of posted.
   */
  complete(e: PendingRequest, status: number, bytes: number, kind: number, _qpId: number, out: RawCompletion[] | CompletionArrays | null): void {
    if (e.kind === K_RECEIVE) {
      this._rq.outstanding--;
    } else {
      this._iq.outstanding--;
      // Initiator requests complete in order: every silent request posted before it has succeeded.
      if (e.silentUpTo > this._silent.retired) this._iq.outstanding -= this._silent.retire(e.silentUpTo);
    }
    const done = kind === K_RECEIVE || status !== 0 ? bytes : e.bytes;
    if (e.raw) {
      this._deliver(e.context, status, done, REQUEST_TYPES[kind] === undefined ? e.kind : kind, out);
    } else if (status === 0) {
      e.resolve?.({ type: REQUEST_TYPES[kind] ?? REQUEST_TYPES[e.kind], status: 0, bytes: done });
    } else {
      // The first failure that was not a flush is what broke the queue pair: every flushed request after it says so.
      if (this._brokenBy === null && status !== ND_CANCELED) this._brokenBy = `${e.operation} ${ndStatusName(status)}`;
      settleFailed(e, requestError(e, status, REQUEST_TYPES[kind] ?? REQUEST_TYPES[e.kind], this._brokenBy));
    }
    // Settled first, then its regions and the close() waiting for it are let go: what waits for those (a
    // region's deregister(), close()) settles after the request's own promise.
    this._inflight.end();
    unpin(e.pins);
    e.pins = null;
    this._ctx.requests.release(e);
    this._freed(status);
  }

  /**
   * @internal A silent request of this QP completed (a failure or a flush; a provider may report a success too): the
   * record names it by the low 32 bits of its number (SilentRequests). The silent requests before it succeeded.
   * Returns false when no outstanding silent request has that number (a record of one already settled).
   */
  _completeSilent(low: number, status: number, bytes: number, kind: number, out: RawCompletion[] | CompletionArrays | null): boolean {
    const s = this._silent;
    const k = s.numberOf(low);
    if (k === 0) return false;
    this._iq.outstanding -= s.retire(k - 1);
    const context = s.contextOf(k);
    this._iq.outstanding -= s.retire(k);
    this._deliver(context, status, bytes, REQUEST_TYPES[kind] === undefined ? s.kindOf(k) : kind, out);
    this._freed(status);
    return true;
  }

  /**
   * @internal The silent requests that have not completed complete now with `status`, oldest first, to their CQ's
   * list (teardown: the provider no longer touches their memory; a failed CQ: nothing will complete through it).
   */
  _settleSilent(status: number): void {
    const s = this._silent;
    while (s.size > 0) {
      const k = s.retired + 1;
      const context = s.contextOf(k);
      const kind = s.kindOf(k);
      this._iq.outstanding -= s.retire(k);
      this._deliver(context, status, 0, kind, null);
    }
  }

  /** A raw completion (qp.post(), a batch, a prepared request) to `out`, or to its CQ's ready list when null. */
  private _deliver(context: unknown, status: number, bytes: number, kind: number, out: RawCompletion[] | CompletionArrays | null): void {
    if (out instanceof CompletionArrays) {
      out._put(context, status, bytes, kind);
      return;
    }
    const rc: RawCompletion = { type: REQUEST_TYPES[kind], status, bytes, context, qp: this };
    if (out !== null) out.push(rc);
    else (kind === K_RECEIVE ? this.receiveCq : this.initiatorCq)._ready.push(rc);
  }

  /**
   * A completion freed a slot: the oldest waiting request takes it; after a failure (the queue pair is in error and
   * the provider flushes whatever follows) the waiting requests are cancelled instead of posted.
   */
  private _freed(status: number): void {
    if (this._iq.queued === 0 && this._rq.queued === 0) return;
    if (status !== 0) {
      const failed = this._cqFailure;
      if (failed !== null) {
        // Its CQ failed (lib/adapter.ts AdapterCore.cqFailed): the waiting requests fail as any later one would.
        this._failWaiting((w) => statusError(failed.status, w.operation, failed.why));
        return;
      }
      const name = ndStatusName(status);
      this._cancelWaiting(
        name === 'ND_CANCELED'
          ? 'the queue pair was flushed (disconnected, or the connection failed)'
          : `an earlier request of the queue pair failed with ${name} (the queue pair is in error)`,
      );
      return;
    }
    this._iq.pump(this);
    this._rq.pump(this);
  }

  /** @internal SlotOwner: posts a request that waited for a slot. */
  postWaiting(w: Waiting): void {
    if (w.start !== null) w.start();
    else w.attach(this._post(w.kind, w.operation, w.local, w.remote, w.offset, w.flags));
  }

  /** @internal SlotOwner: a waiting request that can no longer be posted. */
  failWaiting(w: Waiting, err: NdError, queue: SlotQueue): void {
    w.fail(err, queue === this._rq ? this.receiveCq : this.initiatorCq, this);
  }

  /** True when a request of `kind` must wait: its queue is full, or others already wait (no overtaking). */
  private _mustWait(kind: number): boolean {
    return (kind === K_RECEIVE ? this._rq : this._iq).mustWait();
  }

  /** Validates a request and queues it behind the waiting ones; throws past maxQueued. */
  private _enqueue(kind: number, operation: string, local: Local, remote: RemoteMemory | undefined, offset: number | undefined, flags: number): Waiting {
    const receive = kind === K_RECEIVE;
    const queue = receive ? this._rq : this._iq;
    queue.checkRoom(operation);
    if (!receive && this._iq.outstanding === this._silent.size) {
      // Silent requests free their slots only when a later request of the queue completes: with nothing else
      // posted, a waiting request would wait forever.
      throw new NdError(
        'ND_NO_MORE_ENTRIES',
        ND_NO_MORE_ENTRIES,
        operation,
        `${operation} failed: ND_NO_MORE_ENTRIES (0x8000001A): the initiator queue is full of silent requests ` +
          `(${this._iq.outstanding} of depth ${this.initiatorDepth}), which free their slots only when a later request completes: ` +
          'post a request without silent before the queue fills, so that its completion retires them',
      );
    }
    // The caller may change its array of segments after the call: keep the list as it was.
    const w = new Waiting(kind, operation, Array.isArray(local) ? local.slice() : local, remote, offset, flags);
    if (kind !== K_BIND) {
      const sg = this._prepare(kind, operation, w.local, remote, offset);
      w.pins = sg.pins;
      w.bytes = sg.bytes;
      pin(w.pins);
    } else {
      this._checkPostable(operation);
    }
    queue.push(w);
    return w;
  }

  /** Rejects every waiting request with ND_CANCELED (raw ones complete with it through cq.poll()). */
  private _cancelWaiting(why: string): void {
    this._failWaiting((w, queue) => neverPosted(w.operation, w.bytes, queue, why));
  }

  /** Rejects every waiting request with the error `errorOf` makes for it (raw ones complete through cq.poll()). */
  private _failWaiting(errorOf: (w: Waiting, queue: string) => NdError): void {
    for (const [queue, cq] of [
      [this._iq, this.initiatorCq],
      [this._rq, this.receiveCq],
    ] as const) {
      for (const w of queue.drain()) {
        w.fail(errorOf(w, queue.queue), cq, this);
        unpin(w.pins);
      }
    }
  }

  private _checkPostable(operation: string): void {
    if (this._state !== 'open') throw misuse(ERR_ND_CLOSED, operation, `queue pair is ${this._state}`);
    if (this._ctx.state !== 'open') throw misuse(ERR_ND_CLOSED, operation, `adapter ${this._ctx.address} is ${this._ctx.state}`);
    const failed = this._cqFailure;
    if (failed !== null) throw statusError(failed.status, operation, failed.why);
  }

  /** The failure of a CQ this queue pair completes into (lib/adapter.ts AdapterCore.cqFailed), or null. */
  private get _cqFailure(): { status: number; why: string } | null {
    return this.receiveCq._failure ?? this.initiatorCq._failure;
  }

  /**
   * A promise request: posted now, or queued behind the waiting ones. Misuse rejects the returned promise
   * unmarked (with the caller's frames); the promise of a request that was accepted is marked handled when it
   * fails, so its failure reaches whoever awaits it, and never becomes an unhandled rejection if that is later.
   */
  private _request(
    kind: number,
    operation: string,
    local: Local,
    remote: RemoteMemory | undefined,
    options: SendOptions | WriteOptions | ReadOptions | ReceiveOptions | undefined,
    keys: ReadonlySet<string>,
  ): Promise<Completion> {
    let promise: Promise<Completion>;
    let signal: AbortSignal | undefined;
    let waiting: Waiting | null = null;
    try {
      const flags = options === undefined ? 0 : flagsOf(options, operation, keys);
      if (options !== undefined) {
        signal = requestSignal(options.signal, operation);
        if (signal?.aborted) throw abortedBeforePost(operation, signal);
      }
      const offset = (options as WriteOptions | undefined)?.offset;
      // Posted before the promise exists: nothing can settle the request in between (completions arrive through
      // onBatch or cq.poll(), never inside the native call).
      if (this._mustWait(kind)) promise = requestPromise<Completion>((waiting = this._enqueue(kind, operation, local, remote, offset, flags)));
      else promise = requestPromise<Completion>(this._post(kind, operation, local, remote, offset, flags));
    } catch (err) {
      return Promise.reject(callerStack(asNdError(err, operation)));
    }
    if (signal === undefined) return promise;
    const queue = kind === K_RECEIVE ? this._rq : this._iq;
    return abortable(promise, signal, operation, () => waiting !== null && queue.withdraw(waiting, this));
  }

  /** Validates, writes the SGEs, posts natively and pins. Throws NdError; returns the pending entry. */
  private _post(kind: number, operation: string, local: Local, remote: RemoteMemory | undefined, offset: number | undefined, flags: number): PendingRequest {
    const queue = kind === K_RECEIVE ? this._rq : this._iq;
    queue.checkSlot(operation);
    const sg = this._prepare(kind, operation, local, remote, offset);
    const a = this._ctx;
    const e = a.requests.acquire(kind, operation, this);
    e.bytes = sg.bytes;
    e.remoteAddress = sg.address;
    e.remoteOffset = sg.offset;
    e.remoteToken = sg.token;
    if (kind !== K_RECEIVE) e.silentUpTo = this._silent.posted;
    const pins = sg.pins;
    try {
      this._native.post(kind | (flags << 8), e.id, sg.nSge, sg.address ?? 0n, sg.offset, sg.token);
    } catch (err) {
      a.requests.release(e);
      throw this._postError(asNdError(err, operation), sg.bytes);
    }
    this._began(e, pins, queue);
    return e;
  }

  /** Request `e` was posted natively: it holds `pins` and a slot of `queue`, and counts in flight until it completes. */
  private _began(e: PendingRequest, pins: Pins, queue: { outstanding: number }): void {
    e.pins = pins;
    pin(pins);
    queue.outstanding++;
    this._inflight.begin();
  }

  /** A silent request (qp.post() with `silent`): validated and posted like _post(), with no table entry. */
  private _postSilent(kind: number, operation: string, local: Local, remote: RemoteMemory | undefined, offset: number | undefined, flags: number, context: unknown): void {
    this._iq.checkSlot(operation);
    const sg = this._prepare(kind, operation, local, remote, offset);
    const s = this._silent;
    try {
      this._native.post(kind | (flags << 8), s.next >>> 0, sg.nSge, sg.address ?? 0n, sg.offset, sg.token);
    } catch (err) {
      throw this._postError(asNdError(err, operation), sg.bytes);
    }
    s.add(context, kind, sg.pins);
    this._iq.outstanding++;
  }

  /** A post the provider refused, with what it means and what to do for the causes a user can fix. */
  private _postError(err: NdError, bytes: number): NdError {
    let hint: string;
    if (err.code === 'ND_CONNECTION_INVALID') {
      const c = this._connector;
      hint =
        c === null
          ? 'the queue pair is not connected: connect it first (adapter.connect(qp, remote), or connector.connect() then completeConnect(), or connector.accept(qp) on the passive side)'
          : `the queue pair's connection is ${c.state}: requests can be posted only while it is established`;
    } else if (err.code === 'ND_BUFFER_OVERFLOW' && bytes > this._ctx.info.maxTransferLength) {
      const max = this._ctx.info.maxTransferLength;
      hint = `${bytes} bytes exceed the adapter's maxTransferLength of ${formatBytes(max)} (${max} bytes): split the transfer into requests of at most that size`;
    } else {
      return err;
    }
    return new NdError(err.code, err.status, err.operation, `${err.message}: ${hint}`, { cause: err });
  }

  /**
   * Validates a request and writes its SGEs into the adapter's scratch array; the result (reused between calls,
   * read it before the next one) has the SGE count, bytes, pins and the checked remote range.
   */
  private _prepare(
    kind: number,
    operation: string,
    local: Local,
    remote: RemoteMemory | undefined,
    offset: number | undefined,
    scratch: Float64Array = this._ctx.scratch,
    base = 0,
  ): Prepared {
    this._checkPostable(operation);
    const a = this._ctx;
    let maxSge: number;
    if (kind === K_RECEIVE) {
      if (this.srq !== null) throw misuse(ERR_ND_INVALID_ARGUMENT, operation, 'this queue pair receives through its shared receive queue: use srq.receive()');
      maxSge = this.maxReceiveSge;
    } else {
      maxSge = kind === K_READ ? this.maxReadSge : this.maxInitiatorSge;
    }
    const sg = writeSges(a, scratch, local, maxSge, operation, SG, base);
    const out = PREPARED;
    out.nSge = sg.nSge;
    out.bytes = sg.bytes;
    out.pins = sg.pins;
    out.address = undefined;
    out.offset = 0;
    out.token = 0;
    if (kind === K_READ || kind === K_WRITE) {
      const r = checkRemote(remote, operation);
      const off = offset === undefined ? 0 : checkIndex(offset, 'offset', operation);
      if (off > r.length || sg.bytes > r.length - off) {
        throw misuse(ERR_ND_OUT_OF_RANGE, operation, `${sg.bytes} bytes at offset ${off} do not fit the remote's ${r.length} bytes`);
      }
      if (r.address > WRAP_RISK && r.address + BigInt(off + sg.bytes) > TOP) {
        throw misuse(ERR_ND_OUT_OF_RANGE, operation, 'the remote range wraps around 2^64');
      }
      out.address = r.address;
      out.offset = off;
      out.token = r.token >>> 0;
    } else if (remote !== undefined && remote !== null) {
      throw misuse(ERR_ND_INVALID_ARGUMENT, operation, `${operation} takes no remote memory`);
    }
    return out;
  }
}


/** Throws ND_NO_MORE_ENTRIES unless `count` requests of a batch fit the free slots of `queue` with nothing waiting. */
function checkBatchFits(queue: SlotQueue, count: number, operation: string): void {
  if (count === 0 || (queue.queued === 0 && queue.outstanding + count <= queue.depth)) return;
  throw new NdError(
    'ND_NO_MORE_ENTRIES',
    ND_NO_MORE_ENTRIES,
    operation,
    `${operation} failed: ND_NO_MORE_ENTRIES (0x8000001A): the batch has ${count} ${queue.queue} requests and the ${queue.queue} queue has ` +
      `${Math.max(0, queue.depth - queue.outstanding)} free slots of depth ${queue.depth}` +
      (queue.queued > 0 ? ` with ${queue.queued} requests waiting` : '') +
      ': a batch is posted whole; poll completions first, or post smaller batches',
  );
}

/** ND_NO_MORE_ENTRIES for a prepared request posted while its queue is full or requests wait for a slot. */
function preparedCannotWait(queue: SlotQueue, operation: string): NdError {
  return new NdError(
    'ND_NO_MORE_ENTRIES',
    ND_NO_MORE_ENTRIES,
    operation,
    `${operation} failed: ND_NO_MORE_ENTRIES (0x8000001A): the ${queue.queue} queue has no free slot ` +
      `(${queue.outstanding} outstanding of depth ${queue.depth}` +
      (queue.queued > 0 ? `, ${queue.queued} requests waiting` : '') +
      ') and a prepared request does not wait for one: poll completions first',
  );
}

/** Throws ERR_ND_CLOSED when a region a batched request uses was deregistered after it was added. */
function checkPins(pins: Pins, operation: string): void {
  if (pins === null) return;
  if (Array.isArray(pins)) for (const r of pins) r._checkUsable(operation);
  else pins._checkUsable(operation);
}

/** A validated request (QueuePair._prepare), reused between posts. */
interface Prepared {
  nSge: number;
  bytes: number;
  pins: Pins;
  address: bigint | undefined;
  offset: number;
  token: number;
}
const PREPARED: Prepared = { nSge: 0, bytes: 0, pins: null, address: undefined, offset: 0, token: 0 };



function checkWindow(window: unknown, ctx: AdapterContext, operation: string): asserts window is MemoryWindow {
  if (!(window instanceof MemoryWindow)) throw misuse(ERR_ND_INVALID_ARGUMENT, operation, `window must be a MemoryWindow, got ${describe(window)}`);
  if (window._ctx !== ctx) throw misuse(ERR_ND_WRONG_ADAPTER, operation, 'the memory window belongs to another adapter');
  if (!window._open) throw misuse(ERR_ND_CLOSED, operation, 'the memory window is closed');
}

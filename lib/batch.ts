// PostBatch: requests of one queue pair collected, validated as they are added, and posted with one native call
// (qp.batch(), issue #26 item 1), as ibv_wr_start/ibv_wr_complete post a chain of work requests. With
// `signalEvery` N, every request but each Nth and the batch's last is posted with ND_OP_FLAG_SILENT_SUCCESS
// (docs/nd2.md): a successful batch completes with one completion per N requests, a failed request still
// completes with its status. Completions come back from cq.poll() with each request's `context`, like qp.post().
// A batch is reused: post() and clear() empty it; it keeps nothing of a request but numbers in typed arrays, the
// regions to pin and the context.

import { ERR_ND_INVALID_ARGUMENT, ERR_ND_OUT_OF_RANGE, misuse } from './errors.js';
import type { Local, RemoteMemory } from './memory-region.js';
import type { PostOptions, QueuePair } from './queue-pair.js';
import type { PreparedRequest } from './prepared.js';
import { K_READ, K_RECEIVE, K_SEND, K_WRITE } from './records.js';
import type { PendingRequest, Pins } from './requests.js';
import { checkIndex, checkOptions, describe } from './validate.js';

/** Options of qp.batch(). */
export interface BatchOptions {
  /** Requests the batch holds, 1..65536 (default 64). */
  capacity?: number;
  /**
   * Ask for a completion of every Nth initiator request only (default 1: every request completes). The others are
   * posted silent (ND_OP_FLAG_SILENT_SUCCESS): no completion on success, their queue slots are freed by the next
   * completion; the batch's last initiator request always completes. Receives always complete.
   */
  signalEvery?: number;
}

/** @internal Numbers per request in PostBatch._desc: [opFlags, id, nSge, firstSge, addressLow, addressHigh, offset, token]. */
export const DESC_WORDS = 8;

const BATCH_KEYS = ['capacity', 'signalEvery'] as const;
const MAX_CAPACITY = 65536;

/**
 * Requests of one queue pair posted together with one native call: build it once with qp.batch(), add requests
 * (each validated as it is added), post(), and reuse it. Completions come from cq.poll() as for qp.post().
 *
 * @example
 * ```ts
 * import { openAdapter } from 'netdirect';
 * const adapter = await openAdapter('127.0.0.1', { completion: 'manual' });
 * const cq = adapter.createCompletionQueue();
 * const qp = adapter.createQueuePair({ receiveCq: cq, initiatorDepth: 256 });
 * const source = await adapter.allocateMemory(64 * 8);
 * const batch = qp.batch({ capacity: 64, signalEvery: 16 });
 * // ... once qp is connected and `remote` came from the peer:
 * // for (let i = 0; i < 64; i++) batch.write(source.slice(i * 8, 8), remote, { offset: i * 8, context: i });
 * // batch.post();                  // one native call; 4 completions (contexts 15, 31, 47, 63) when all succeed
 * // for (const c of cq.poll()) ... // a failed request completes with its status and context
 * console.log(batch.capacity, batch.length);
 * await adapter.close();
 * ```
 */
export class PostBatch {
  /** Requests the batch holds. */
  readonly capacity: number;
  /** A completion for every this many initiator requests (BatchOptions.signalEvery). */
  readonly signalEvery: number;
  /** @internal */ readonly _qp: QueuePair;
  /** @internal One DESC_WORDS record per request; its id is written at post time. */
  readonly _desc: Float64Array;
  /** @internal SGE triples [regionId, offset, length] of every request, in order. */
  readonly _sges: Float64Array;
  /** @internal */ readonly _pins: Pins[];
  /** @internal */ readonly _context: unknown[];
  /** @internal The request-table entries of the batch being posted (QueuePair._postBatch). */
  readonly _entries: Array<PendingRequest | null>;
  /** @internal Local bytes of each request. */
  readonly _bytes: Float64Array;
  /** @internal Remote address of each Read/Write (for an error message), undefined for the others. */
  readonly _remote: Array<bigint | undefined>;
  /** @internal Requests in the batch. */
  _count = 0;
  /** @internal SGE triples used. */
  _sgeCount = 0;
  /** @internal Initiator requests (send, Read, Write) among them. */
  _initiator = 0;
  /** @internal Receives among them. */
  _receive = 0;
  // The last remote address split into 32-bit halves: reused while the address is the same (splitting a bigint
  // allocates; comparing two does not).
  private _lastAddress = -1n;
  private _low = 0;
  private _high = 0;

  /** @internal Use qp.batch(). */
  constructor(qp: QueuePair, options: BatchOptions | undefined, maxSge: number) {
    const op = 'batch';
    if (options !== undefined) checkOptions(options, op, BATCH_KEYS);
    const capacity = options?.capacity === undefined ? 64 : checkIndex(options.capacity, 'capacity', op);
    if (capacity < 1 || capacity > MAX_CAPACITY) throw misuse(ERR_ND_OUT_OF_RANGE, op, `capacity must be 1..${MAX_CAPACITY}, got ${capacity}`);
    const every = options?.signalEvery === undefined ? 1 : checkIndex(options.signalEvery, 'signalEvery', op);
    if (every < 1) throw misuse(ERR_ND_OUT_OF_RANGE, op, `signalEvery must be at least 1, got ${every}`);
    this._qp = qp;
    this.capacity = capacity;
    this.signalEvery = every;
    this._desc = new Float64Array(capacity * DESC_WORDS);
    this._sges = new Float64Array(capacity * maxSge * 3);
    this._pins = new Array<Pins>(capacity).fill(null);
    this._context = new Array<unknown>(capacity).fill(undefined);
    this._entries = new Array<PendingRequest | null>(capacity).fill(null);
    this._bytes = new Float64Array(capacity);
    this._remote = new Array<bigint | undefined>(capacity).fill(undefined);
  }

  /** Requests added since the last post() or clear(). */
  get length(): number {
    return this._count;
  }

  /** Adds a Send (see qp.send()); options as qp.post(). */
  send(local: Local, options?: PostOptions): this {
    this._qp._batchAdd(this, K_SEND, 'send', local, undefined, options);
    return this;
  }

  /** Adds an RDMA Write (see qp.write()); options as qp.post(). */
  write(local: Local, remote: RemoteMemory, options?: PostOptions): this {
    this._qp._batchAdd(this, K_WRITE, 'write', local, remote, options);
    return this;
  }

  /** Adds an RDMA Read (see qp.read()); options as qp.post(). */
  read(local: Local, remote: RemoteMemory, options?: PostOptions): this {
    this._qp._batchAdd(this, K_READ, 'read', local, remote, options);
    return this;
  }

  /** Adds a receive (see qp.receive()); options: context. */
  receive(local: Local, options?: PostOptions): this {
    this._qp._batchAdd(this, K_RECEIVE, 'receive', local, undefined, options);
    return this;
  }

  /**
   * Adds a prepared request (qp.prepare()) of the batch's queue pair, checked by its handle: only the offset and
   * length are checked here (see PreparedRequest.post()).
   *
   * @param prepared - a request of this batch's queue pair.
   * @param offset - byte offset into the remote memory (Read and Write; default the prepared one).
   * @param length - bytes to move, at most prepared.bytes (default all).
   * @param context - returned as the completion's `context`.
   */
  add(prepared: PreparedRequest, offset?: number, length?: number, context?: unknown): this {
    this._qp._batchAddPrepared(this, prepared, offset, length, context);
    return this;
  }

  /**
   * Posts every request of the batch with one native call, in the order they were added, and empties it. The
   * batch is posted whole or not at all when it does not fit: it never waits for slots.
   *
   * @returns the number of requests posted.
   * @throws {@link NdError} ERR_ND_CLOSED when the queue pair, its adapter or a region of a request is closed or
   *   deregistered; ND_NO_MORE_ENTRIES when the free slots of a queue are fewer than its requests in the batch (or
   *   requests wait for slots); ND_CONNECTION_INVALID when the queue pair is not connected. When the provider refuses
   *   request k, the k before it were posted (their completions come from cq.poll()) and it and the rest were not:
   *   the error says which.
   */
  post(): number {
    return this._qp._postBatch(this);
  }

  /** Empties the batch without posting. */
  clear(): void {
    const n = this._count;
    for (let i = 0; i < n; i++) {
      this._pins[i] = null;
      this._context[i] = undefined;
      this._remote[i] = undefined;
    }
    this._count = 0;
    this._sgeCount = 0;
    this._initiator = 0;
    this._receive = 0;
  }

  /** @internal Splits a validated 64-bit remote address into the halves the descriptor holds. */
  _split(address: bigint): void {
    if (address !== this._lastAddress) {
      this._low = Number(address & 0xffffffffn);
      this._high = Number(address >> 32n);
      this._lastAddress = address;
    }
  }
  /** @internal */ get _addressLow(): number {
    return this._low;
  }
  /** @internal */ get _addressHigh(): number {
    return this._high;
  }
}

/** @internal qp.batch()'s argument check, before the queue pair's own. */
export function checkBatchOptions(options: unknown): BatchOptions | undefined {
  if (options === undefined) return undefined;
  if (typeof options !== 'object' || options === null) {
    throw misuse(ERR_ND_INVALID_ARGUMENT, 'batch', `options must be an object like { capacity: 64 }, got ${describe(options)}`);
  }
  return options as BatchOptions;
}

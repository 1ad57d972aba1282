// PreparedRequest: a request of one queue pair whose local memory, remote memory and flags are validated once
// (qp.prepare(), issue #26 item 3), then posted any number of times with only what varies per post: the offset into
// the remote memory, the length, and the context cq.poll() returns. perftest posts the same way, reusing one
// ibv_send_wr and changing only its address per post.
//
// Lifetime: the handle does not pin its regions; each post pins them until that request completes, as qp.post()
// does, so region.deregister() waits for the posted requests and then goes ahead. A post after one of its regions
// was deregistered, or after the queue pair or adapter closed, throws ERR_ND_CLOSED (the native post checks the
// region again: binding/addon/adapter.cc BuildSgesFrom).

import { ERR_ND_INVALID_ARGUMENT, ERR_ND_OUT_OF_RANGE, misuse } from './errors.js';
import type { QueuePair } from './queue-pair.js';
import { K_READ, K_WRITE } from './records.js';
import type { Pins } from './requests.js';
import { describe } from './validate.js';

/** Options of qp.prepare(): the request type's flags, fixed for every post. */
export interface PrepareOptions {
  /** Default byte offset into the remote memory of a Read or Write (post(offset) overrides it). */
  offset?: number;
  /** No completion on success (ND_OP_FLAG_SILENT_SUCCESS); a failure still completes. */
  silent?: boolean;
  /** Copy the data into the request at post time (send and write; at most qp.inlineDataSize bytes). */
  inline?: boolean;
  /** Ask for a solicited event at the peer (send). */
  solicited?: boolean;
  /** Start only after earlier Reads of this queue pair completed. */
  fence?: boolean;
}

/** Options of prepared.postMany(): what varies across the run's requests. */
export interface PostManyOptions {
  /** Remote byte offset of the first request (Read and Write; default the offset given to prepare()). */
  offset?: number;
  /** Bytes between the remote offsets of consecutive requests (Read and Write; default 0: all at `offset`). */
  stride?: number;
  /** Bytes each request moves, at most `bytes` (default all). */
  length?: number;
  /**
   * A number: request i of the run (from 0) completes with context `context + i` (an unsigned 32-bit range for
   * cq.pollInto()). Anything else: every request's context. Default undefined, as post() without one.
   */
  context?: unknown;
  /**
   * A completion for every Nth request and the run's last (default: the run's length, so only the last completes
   * on success); the others are posted silent. A failed request completes whatever it was posted as. Not for a
   * prepared receive (receives always complete) or a prepared silent request (all stay silent).
   */
  signalEvery?: number;
}

/**
 * A request validated once by qp.prepare() and posted by handle: post() takes only the remote offset, the length
 * and a context, and allocates nothing. Completions come from cq.poll() / cq.pollInto() as for qp.post(). A
 * prepared request never waits for a slot: beyond the queue's depth post() throws ND_NO_MORE_ENTRIES.
 *
 * @example
 * ```ts
 * import { openAdapter, CompletionArrays } from 'netdirect';
 * const adapter = await openAdapter('127.0.0.1', { completion: 'manual' });
 * const cq = adapter.createCompletionQueue();
 * const qp = adapter.createQueuePair({ receiveCq: cq, initiatorDepth: 256 });
 * const source = await adapter.allocateMemory(4096);
 * const done = new CompletionArrays(128);
 * // ... once qp is connected and `remote` came from the peer:
 * // const write = qp.prepare('write', source.slice(0, 8), remote);
 * // for (let i = 0; i < 128; i++) write.post(i * 8, 8, i);   // 8 bytes to remote offset i * 8, context i
 * // const n = cq.pollInto(done);                             // done.context[0..n) are the posted i
 * console.log(source.length, done.capacity);
 * await adapter.close();
 * ```
 */
export class PreparedRequest {
  /** 'send', 'receive', 'read' or 'write'. */
  readonly operation: 'send' | 'receive' | 'read' | 'write';
  /** Local bytes of the prepared memory: the most a post may move. */
  readonly bytes: number;
  /** @internal */ readonly _qp: QueuePair;
  /** @internal Record kind (records.ts K_*). */
  readonly _kind: number;
  /** @internal ND_OP_FLAG_* bits. */
  readonly _flags: number;
  /** @internal SGE triples [regionId, offset, length] of the prepared memory. */
  readonly _triples: Float64Array;
  /** @internal */ readonly _nSge: number;
  /** @internal The regions a post pins. */
  readonly _pins: Pins;
  /** @internal Read/Write: the remote memory, else undefined / 0. */
  readonly _address: bigint | undefined;
  /** @internal */ readonly _addressLow: number;
  /** @internal */ readonly _addressHigh: number;
  /** @internal */ readonly _remoteLength: number;
  /** @internal */ readonly _token: number;
  /** @internal */ readonly _offset: number;
  /** @internal Set by _fill: the remote offset of the post being built. */
  _postOffset = 0;

  /** @internal Use qp.prepare(). */
  constructor(
    qp: QueuePair,
    operation: 'send' | 'receive' | 'read' | 'write',
    kind: number,
    flags: number,
    triples: Float64Array,
    nSge: number,
    bytes: number,
    pins: Pins,
    address: bigint | undefined,
    remoteLength: number,
    token: number,
    offset: number,
  ) {
    this._qp = qp;
    this.operation = operation;
    this._kind = kind;
    this._flags = flags;
    this._triples = triples;
    this._nSge = nSge;
    this.bytes = bytes;
    this._pins = pins;
    this._address = address;
    this._addressLow = address === undefined ? 0 : Number(address & 0xffffffffn);
    this._addressHigh = address === undefined ? 0 : Number(address >> 32n);
    this._remoteLength = remoteLength;
    this._token = token;
    this._offset = offset;
  }

  /**
   * Posts the request once more. Allocates nothing when `context` is a number (or undefined).
   *
   * @param offset - byte offset into the remote memory (Read and Write; default the offset given to prepare()).
   *   Sends and receives take none (0 or undefined).
   * @param length - bytes to move, at most `bytes` (default all of them): the prepared memory is cut at that length.
   * @param context - returned as the completion's `context` by cq.poll() (cq.pollInto() takes numbers only).
   * @throws {@link NdError} ERR_ND_CLOSED when the queue pair, its adapter or a prepared region is closed or
   *   deregistered; ERR_ND_INVALID_ARGUMENT for an offset or length that is not an integer, or an offset for a send or
   *   receive; ERR_ND_OUT_OF_RANGE for a length beyond `bytes` or a range beyond the remote memory; ND_NO_MORE_ENTRIES
   *   when the queue is full (or requests wait for a slot); ND_CONNECTION_INVALID when the queue pair is not connected.
   */
  post(offset?: number, length?: number, context?: unknown): void {
    this._qp._postPrepared(this, offset, length, context);
  }

  /**
   * Posts the request `count` times with one native call, validated once for the whole run: as `count`
   * batch.add() calls of this request in a batch with `signalEvery` then batch.post(), with request i (from 0)
   * at remote offset `offset + i * stride`. By default only the run's last request completes on success ("write
   * these chunks, then tell me once"); a failed one completes with its status and context, as in a batch.
   *
   * @example
   * ```ts
   * // 64 chunks of 4 KiB to consecutive remote offsets, one completion (context 63) when all landed:
   * // qp.prepare('write', source.slice(0, 4096), remote).postMany(64, { stride: 4096, context: 0 });
   * ```
   *
   * @param count - requests to post, 1 up to the queue's free slots.
   * @returns `count`.
   * @throws {@link NdError} what post() throws (checked once, for the first and the last request's range);
   *   ERR_ND_INVALID_ARGUMENT for a count, stride or signalEvery that is not an integer, an unknown option, or a
   *   stride for a send or receive; ERR_ND_OUT_OF_RANGE for a count or signalEvery below 1, or a context range beyond
   *   32 bits; ND_NO_MORE_ENTRIES when the queue has fewer free slots than `count` (nothing is posted). When the
   *   provider refuses request k, the k before it were posted and it and the rest were not: the error says which.
   */
  postMany(count: number, options?: PostManyOptions): number {
    return this._qp._postRun(this, count, options);
  }

  /**
   * @internal Checks `offset` and `length` and writes the SGE triples of a post of `length` bytes into `out` at
   * triple `base`; returns the SGE count and leaves the offset in _postOffset.
   */
  _fill(out: Float64Array, base: number, offset: number | undefined, length: number | undefined, operation: string): number {
    let off = this._offset;
    if (offset !== undefined) {
      if (typeof offset !== 'number' || !Number.isInteger(offset) || offset < 0) {
        throw misuse(ERR_ND_INVALID_ARGUMENT, operation, `offset must be a non-negative integer, got ${describe(offset)}`);
      }
      off = offset;
    }
    let len = this.bytes;
    if (length !== undefined) {
      if (typeof length !== 'number' || !Number.isInteger(length) || length < 0) {
        throw misuse(ERR_ND_INVALID_ARGUMENT, operation, `length must be a non-negative integer, got ${describe(length)}`);
      }
      if (length > this.bytes) throw misuse(ERR_ND_OUT_OF_RANGE, operation, `length ${length} exceeds the ${this.bytes} prepared bytes`);
      len = length;
    }
    if (this._kind === K_READ || this._kind === K_WRITE) {
      if (off > this._remoteLength || len > this._remoteLength - off) {
        throw misuse(ERR_ND_OUT_OF_RANGE, operation, `${len} bytes at offset ${off} do not fit the remote's ${this._remoteLength} bytes`);
      }
    } else if (off !== 0) {
      throw misuse(ERR_ND_INVALID_ARGUMENT, operation, `a prepared ${this.operation} takes no remote offset, got ${off}`);
    }
    this._postOffset = off;
    const t = this._triples;
    let at = base * 3;
    if (len === this.bytes) {
      const n = this._nSge * 3;
      for (let i = 0; i < n; i++) out[at + i] = t[i];
      return this._nSge;
    }
    // Cut at `len` bytes: whole SGEs, then part of one.
    let left = len;
    let n = 0;
    for (let i = 0; left > 0; i += 3) {
      const take = Math.min(t[i + 2], left);
      out[at] = t[i];
      out[at + 1] = t[i + 1];
      out[at + 2] = take;
      at += 3;
      left -= take;
      n++;
    }
    return n;
  }
}

/** @internal qp.prepare()'s check of `op`. */
export function checkPrepareOp(op: unknown): asserts op is 'send' | 'receive' | 'read' | 'write' {
  if (op !== 'send' && op !== 'receive' && op !== 'read' && op !== 'write') {
    throw misuse(ERR_ND_INVALID_ARGUMENT, 'prepare', `op must be 'send', 'receive', 'read' or 'write', got ${describe(op)}`);
  }
}

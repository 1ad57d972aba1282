// QueuePair (IND2QueuePair). Each request pins the regions it touches until its completion; the QP counts
// outstanding requests per queue so that posting beyond a depth fails deterministically with
// ND_NO_MORE_ENTRIES, and close() flushes and waits until every request of the QP has settled.

import {
  ERR_ND_CLOSED,
  ERR_ND_INVALID_ARGUMENT,
  ERR_ND_OUT_OF_RANGE,
  ERR_ND_WRONG_ADAPTER,
  ND_CANCELED,
  ND_NO_MORE_ENTRIES,
  NdError,
  asNdError,
  callerStack,
  misuse,
} from './errors.js';
import type { NativeQueuePair } from './native.js';
import type { Adapter } from './adapter.js';
import { CompletionQueue, type Completion } from './completion-queue.js';
import { InFlight, pin, unpin, type PendingRequest, type RequestOwner } from './requests.js';
import { K_BIND, K_INVALIDATE, K_READ, K_RECEIVE, K_SEND, K_WRITE } from './records.js';
import { SCRATCH_SGES, checkIndex, describe } from './validate.js';
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
import type { Connector } from './connector.js';

export interface QueuePairOptions {
  receiveCq: CompletionQueue;
  /** Defaults to receiveCq. */
  initiatorCq?: CompletionQueue;
  receiveDepth?: number;
  initiatorDepth?: number;
  maxReceiveSge?: number;
  maxInitiatorSge?: number;
  inlineDataSize?: number;
  srq?: SharedReceiveQueue;
}

export interface SendOptions {
  solicited?: boolean;
  inline?: boolean;
  fence?: boolean;
}
export interface WriteOptions {
  offset?: number;
  inline?: boolean;
  fence?: boolean;
}
export interface ReadOptions {
  offset?: number;
  fence?: boolean;
}
export interface PostOptions {
  offset?: number;
  context?: unknown;
  silent?: boolean;
  inline?: boolean;
  solicited?: boolean;
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

function flagsOf(options: PostOptions | SendOptions | WriteOptions | ReadOptions | undefined, operation: string): number {
  if (options === undefined) return 0;
  if (typeof options !== 'object' || options === null) {
    throw misuse(ERR_ND_INVALID_ARGUMENT, operation, `options must be an object, got ${describe(options)}`);
  }
  const o = options as PostOptions;
  let flags = 0;
  if (o.silent) flags |= ND_OP_FLAG_SILENT_SUCCESS;
  if (o.fence) flags |= ND_OP_FLAG_READ_FENCE;
  if (o.solicited) flags |= ND_OP_FLAG_SEND_AND_SOLICIT_EVENT;
  if (o.inline) flags |= ND_OP_FLAG_INLINE;
  return flags;
}

function noMoreEntries(operation: string, queue: string, outstanding: number, depth: number): NdError {
  return new NdError(
    'ND_NO_MORE_ENTRIES',
    ND_NO_MORE_ENTRIES,
    operation,
    `${operation} failed: ND_NO_MORE_ENTRIES (0x8000001A): the ${queue} queue is full (${outstanding} outstanding of depth ${depth})`,
  );
}

export class QueuePair implements AsyncDisposable, RequestOwner {
  readonly receiveCq: CompletionQueue;
  readonly initiatorCq: CompletionQueue;
  readonly srq: SharedReceiveQueue | null;
  readonly receiveDepth: number;
  readonly initiatorDepth: number;
  readonly maxReceiveSge: number;
  readonly maxInitiatorSge: number;
  readonly maxReadSge: number;
  readonly inlineDataSize: number;
  /** @internal */ readonly _adapter: Adapter;
  /** @internal */ readonly _id: number;
  /** @internal */ readonly _native: NativeQueuePair;
  /** @internal */ _connector: Connector | null = null;
  private _state: 'open' | 'closing' | 'closed' = 'open';
  private _receiveOutstanding = 0;
  private _initiatorOutstanding = 0;
  // Non-silent requests; close() waits for them. Silent ones are retired by the next completion of this QP.
  private readonly _inflight = new InFlight();
  private _silent: PendingRequest[] = [];
  private _silentHead = 0;
  private _seq = 0;
  private _closing: Promise<void> | null = null;

  /** @internal Use adapter.createQueuePair(). */
  constructor(adapter: Adapter, id: number, options: QueuePairOptions) {
    const op = 'createQueuePair';
    const info = adapter.info;
    const receiveCq = options.receiveCq;
    const initiatorCq = options.initiatorCq ?? receiveCq;
    for (const [name, cq] of [['receiveCq', receiveCq], ['initiatorCq', initiatorCq]] as const) {
      if (!(cq instanceof CompletionQueue)) throw misuse(ERR_ND_INVALID_ARGUMENT, op, `${name} must be a CompletionQueue, got ${describe(cq)}`);
      if (cq._adapter !== adapter) throw misuse(ERR_ND_WRONG_ADAPTER, op, `${name} belongs to another adapter`);
      if (!cq._open) throw misuse(ERR_ND_CLOSED, op, `${name} is closed`);
    }
    const srq = options.srq ?? null;
    if (srq !== null) {
      if (!(srq instanceof SharedReceiveQueue)) throw misuse(ERR_ND_INVALID_ARGUMENT, op, `srq must be a SharedReceiveQueue, got ${describe(srq)}`);
      if (srq._adapter !== adapter) throw misuse(ERR_ND_WRONG_ADAPTER, op, 'srq belongs to another adapter');
      if (!srq._open) throw misuse(ERR_ND_CLOSED, op, 'srq is closed');
    }
    this._adapter = adapter;
    this._id = id;
    this.receiveCq = receiveCq;
    this.initiatorCq = initiatorCq;
    this.srq = srq;
    this.receiveDepth = adapter._count(options.receiveDepth, 'receiveDepth', 128, info.maxReceiveQueueDepth, op);
    this.initiatorDepth = adapter._count(options.initiatorDepth, 'initiatorDepth', 128, info.maxInitiatorQueueDepth, op);
    this.maxReceiveSge = adapter._count(options.maxReceiveSge, 'maxReceiveSge', 4, Math.min(info.maxReceiveSge, SCRATCH_SGES), op);
    this.maxInitiatorSge = adapter._count(options.maxInitiatorSge, 'maxInitiatorSge', 4, Math.min(info.maxInitiatorSge, SCRATCH_SGES), op);
    this.maxReadSge = Math.max(1, Math.min(this.maxInitiatorSge, info.maxReadSge || this.maxInitiatorSge));
    this.inlineDataSize = adapter._count(options.inlineDataSize, 'inlineDataSize', 256, info.maxInlineDataSize, op, true);
    this._native = adapter._native.createQueuePair(
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

  /** The connector this QP was connected or accepted with, if any. */
  get connector(): Connector | null {
    return this._connector;
  }
  /** @internal */
  get _open(): boolean {
    return this._state === 'open';
  }
  /** Requests posted on this QP that have not completed yet. */
  get outstanding(): { receive: number; initiator: number } {
    return { receive: this._receiveOutstanding, initiator: this._initiatorOutstanding };
  }

  send(local: Local, options?: SendOptions): Promise<Completion> {
    return this._request(K_SEND, 'send', local, undefined, options);
  }

  /** Posts a receive; completion.bytes is the number of bytes received. */
  receive(local: Local): Promise<Completion> {
    return this._request(K_RECEIVE, 'receive', local, undefined, undefined);
  }

  /** RDMA Write of `local` to remote.address + options.offset. */
  write(local: Local, remote: RemoteMemory, options?: WriteOptions): Promise<Completion> {
    return this._request(K_WRITE, 'write', local, remote, options);
  }

  /** RDMA Read from remote.address + options.offset into `local`. */
  read(local: Local, remote: RemoteMemory, options?: ReadOptions): Promise<Completion> {
    return this._request(K_READ, 'read', local, remote, options);
  }

  /**
   * The low-level fast path: posts without a Promise; the completion (with `context`) comes back from
   * cq.poll(). `silent` requests produce no completion on success (errors still do).
   */
  post(op: 'send' | 'receive' | 'read' | 'write', local: Local, remote?: RemoteMemory, options?: PostOptions): void {
    const kind = POST_KINDS[op as string];
    if (kind === undefined || typeof op !== 'string') {
      throw misuse(ERR_ND_INVALID_ARGUMENT, 'post', `op must be 'send', 'receive', 'read' or 'write', got ${describe(op)}`);
    }
    const flags = flagsOf(options, op);
    if (kind === K_RECEIVE && (flags & ND_OP_FLAG_SILENT_SUCCESS) !== 0) {
      throw misuse(ERR_ND_INVALID_ARGUMENT, op, 'receives cannot be silent');
    }
    const e = this._post(kind, op, local, remote, options?.offset, flags);
    e.raw = true;
    e.context = options?.context;
  }

  /** Binds `window` to a region or segment; resolves with what the peer needs to access it. */
  async bind(window: MemoryWindow, region: MemoryRegion | Segment, access: { read?: boolean; write?: boolean }): Promise<RemoteMemory> {
    const op = 'bind';
    try {
      this._checkPostable(op);
      checkWindow(window, this._adapter, op);
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
      if (mr._adapter !== this._adapter) throw misuse(ERR_ND_WRONG_ADAPTER, op, 'the memory region was registered on another adapter');
      mr._checkUsable(op);
      if (offset > mr.length || length > mr.length - offset) {
        throw misuse(ERR_ND_OUT_OF_RANGE, op, `segment [${offset}, ${offset + length}) is outside the ${mr.length}-byte region`);
      }
      if (typeof access !== 'object' || access === null) {
        throw misuse(ERR_ND_INVALID_ARGUMENT, op, `access must be { read?: boolean, write?: boolean }, got ${describe(access)}`);
      }
      const flags = (access.read ? ND_OP_FLAG_ALLOW_READ : 0) | (access.write ? ND_OP_FLAG_ALLOW_WRITE : 0);
      if (flags === 0) throw misuse(ERR_ND_INVALID_ARGUMENT, op, 'access must allow read and/or write');
      if (this._initiatorOutstanding >= this.initiatorDepth) throw noMoreEntries(op, 'initiator', this._initiatorOutstanding, this.initiatorDepth);
      const a = this._adapter;
      const e = a._requests.acquire();
      const region_ = mr;
      const address = mr.address + BigInt(offset);
      e.kind = K_BIND;
      e.operation = op;
      e.owner = this;
      e.seq = ++this._seq;
      e.pins = region_;
      window._inflight.begin();
      try {
        e.extra = this._native.bind(e.id, region_._native, window._native, offset, length, flags) >>> 0;
      } catch (err) {
        window._inflight.end();
        a._requests.release(e);
        throw err;
      }
      pin(region_);
      this._initiatorOutstanding++;
      this._inflight.begin();
      // Completions arrive through onBatch or cq.poll(), never inside the native call: settled later.
      return await new Promise<RemoteMemory>((resolve, reject) => {
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
      throw callerStack(asNdError(err, op));
    }
  }

  /** Invalidates a bound memory window: later remote access through its token fails. */
  async invalidate(window: MemoryWindow): Promise<Completion> {
    const op = 'invalidate';
    try {
      this._checkPostable(op);
      checkWindow(window, this._adapter, op);
      if (this._initiatorOutstanding >= this.initiatorDepth) throw noMoreEntries(op, 'initiator', this._initiatorOutstanding, this.initiatorDepth);
      const a = this._adapter;
      const e = a._requests.acquire();
      e.kind = K_INVALIDATE;
      e.operation = op;
      e.owner = this;
      e.seq = ++this._seq;
      window._inflight.begin();
      try {
        this._native.invalidate(e.id, window._native, 0);
      } catch (err) {
        window._inflight.end();
        a._requests.release(e);
        throw err;
      }
      this._initiatorOutstanding++;
      this._inflight.begin();
      return await new Promise<Completion>((resolve, reject) => {
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
      throw callerStack(asNdError(err, op));
    }
  }

  /** Cancels every outstanding request of this QP: they complete with ND_CANCELED. */
  flush(): void {
    if (this._state === 'closed') throw misuse(ERR_ND_CLOSED, 'flush', 'queue pair is closed');
    this._native.flush();
  }

  /**
   * Disconnects the QP's connection if any, flushes, waits until every request posted on it has settled
   * (ND_CANCELED for the flushed ones; their regions are unpinned), then releases the QP. Idempotent.
   */
  close(): Promise<void> {
    return (this._closing ??= this._close());
  }

  private async _close(): Promise<void> {
    this._state = 'closing';
    const connector = this._connector;
    if (connector !== null) await connector.disconnect().catch(() => undefined);
    try {
      this._native.flush();
    } catch {
      // Already unusable: the completions that remain are settled below.
    }
    if (this._adapter.completion === 'manual') {
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
    this._adapter._settleOwned(this, ND_CANCELED);
    this.receiveCq._users.delete(this);
    this.initiatorCq._users.delete(this);
    this.srq?._users.delete(this);
    if (connector !== null && connector._qp === this) connector._qp = null;
    this._connector = null;
    this._adapter._forget(this);
  }

  async [Symbol.asyncDispose](): Promise<void> {
    await this.close();
  }

  /** @internal RequestOwner: a completion record of this QP arrived. */
  requestDone(e: PendingRequest): void {
    if (e.kind === K_RECEIVE) {
      this._receiveOutstanding--;
    } else {
      this._initiatorOutstanding--;
      if (this._silentHead < this._silent.length) this._retireSilent(e);
    }
    if (!e.silent) this._inflight.end();
  }

  /** Initiator requests complete in order: every silent request posted before `e` has succeeded. */
  private _retireSilent(e: PendingRequest): void {
    const requests = this._adapter._requests;
    const list = this._silent;
    while (this._silentHead < list.length) {
      const s = list[this._silentHead];
      if (s === e) {
        this._silentHead++;
        break;
      }
      if (s.seq > e.seq) break;
      this._silentHead++;
      this._initiatorOutstanding--;
      unpin(s.pins);
      requests.release(s);
    }
    if (this._silentHead === list.length) {
      list.length = 0;
      this._silentHead = 0;
    } else if (this._silentHead > 1024) {
      this._silent = list.slice(this._silentHead);
      this._silentHead = 0;
    }
  }

  private _checkPostable(operation: string): void {
    if (this._state !== 'open') throw misuse(ERR_ND_CLOSED, operation, `queue pair is ${this._state}`);
    if (this._adapter._state !== 'open') throw misuse(ERR_ND_CLOSED, operation, `adapter ${this._adapter.address} is ${this._adapter._state}`);
  }

  private async _request(
    kind: number,
    operation: string,
    local: Local,
    remote: RemoteMemory | undefined,
    options: SendOptions | WriteOptions | ReadOptions | undefined,
  ): Promise<Completion> {
    try {
      // Posted before the promise exists: a misuse error is thrown with the caller's frames on the stack, and
      // nothing can settle the request in between (completions arrive through onBatch or cq.poll()).
      const e = this._post(kind, operation, local, remote, (options as WriteOptions | undefined)?.offset, flagsOf(options, operation));
      return await new Promise<Completion>((resolve, reject) => {
        e.resolve = resolve;
        e.reject = reject;
      });
    } catch (err) {
      throw callerStack(asNdError(err, operation));
    }
  }

  /** Validates, writes the SGEs, posts natively and pins. Throws NdError; returns the pending entry. */
  private _post(kind: number, operation: string, local: Local, remote: RemoteMemory | undefined, offset: number | undefined, flags: number): PendingRequest {
    this._checkPostable(operation);
    const a = this._adapter;
    let maxSge: number;
    if (kind === K_RECEIVE) {
      if (this.srq !== null) throw misuse(ERR_ND_INVALID_ARGUMENT, operation, 'this queue pair receives through its shared receive queue: use srq.receive()');
      if (this._receiveOutstanding >= this.receiveDepth) throw noMoreEntries(operation, 'receive', this._receiveOutstanding, this.receiveDepth);
      maxSge = this.maxReceiveSge;
    } else {
      if (this._initiatorOutstanding >= this.initiatorDepth) throw noMoreEntries(operation, 'initiator', this._initiatorOutstanding, this.initiatorDepth);
      maxSge = kind === K_READ ? this.maxReadSge : this.maxInitiatorSge;
    }
    const sg = writeSges(a, a._scratch, local, maxSge, operation, SG);
    let token = 0;
    let address: bigint | undefined;
    let off = 0;
    if (kind === K_READ || kind === K_WRITE) {
      const r = checkRemote(remote, operation);
      off = offset === undefined ? 0 : checkIndex(offset, 'offset', operation);
      if (off > r.length || sg.bytes > r.length - off) {
        throw misuse(ERR_ND_OUT_OF_RANGE, operation, `${sg.bytes} bytes at offset ${off} do not fit the remote's ${r.length} bytes`);
      }
      address = r.address;
      if (address > WRAP_RISK && address + BigInt(off + sg.bytes) > TOP) {
        throw misuse(ERR_ND_OUT_OF_RANGE, operation, 'the remote range wraps around 2^64');
      }
      token = r.token >>> 0;
    } else if (remote !== undefined && remote !== null) {
      throw misuse(ERR_ND_INVALID_ARGUMENT, operation, `${operation} takes no remote memory`);
    }
    const e = a._requests.acquire();
    e.kind = kind;
    e.operation = operation;
    e.owner = this;
    e.bytes = sg.bytes;
    e.remoteAddress = address;
    e.remoteOffset = off;
    e.remoteToken = token;
    e.seq = ++this._seq;
    e.silent = (flags & ND_OP_FLAG_SILENT_SUCCESS) !== 0;
    const pins = sg.pins;
    try {
      this._native.post(kind | (flags << 8), e.id, sg.nSge, address ?? 0n, off, token);
    } catch (err) {
      a._requests.release(e);
      throw asNdError(err, operation);
    }
    e.pins = pins;
    pin(pins);
    if (kind === K_RECEIVE) this._receiveOutstanding++;
    else this._initiatorOutstanding++;
    if (e.silent) this._silent.push(e);
    else this._inflight.begin();
    return e;
  }
}

function checkWindow(window: unknown, adapter: Adapter, operation: string): asserts window is MemoryWindow {
  if (!(window instanceof MemoryWindow)) throw misuse(ERR_ND_INVALID_ARGUMENT, operation, `window must be a MemoryWindow, got ${describe(window)}`);
  if (window._adapter !== adapter) throw misuse(ERR_ND_WRONG_ADAPTER, operation, 'the memory window belongs to another adapter');
  if (!window._open) throw misuse(ERR_ND_CLOSED, operation, 'the memory window is closed');
}

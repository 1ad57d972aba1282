// SharedReceiveQueue (IND2SharedReceiveQueue): receives shared by the queue pairs created with it. Their
// completions arrive on the receive CQ of the queue pair that consumed them.

import { ERR_ND_CLOSED, ND_CANCELED, NdError, ND_NO_MORE_ENTRIES, asNdError, callerStack, misuse } from './errors.js';
import type { NativeSharedReceiveQueue } from './native.js';
import type { Adapter } from './adapter.js';
import type { Completion } from './completion-queue.js';
import type { QueuePair } from './queue-pair.js';
import { InFlight, pin, type PendingRequest, type RequestOwner } from './requests.js';
import { K_RECEIVE } from './records.js';
import { writeSges, type Local, type SgeList } from './memory-region.js';

export interface SharedReceiveQueueOptions {
  depth?: number;
  maxSge?: number;
  notifyThreshold?: number;
}

const SG: SgeList = { nSge: 0, bytes: 0, pins: null };

export class SharedReceiveQueue implements AsyncDisposable, RequestOwner {
  readonly depth: number;
  readonly maxSge: number;
  /** @internal */ readonly _adapter: Adapter;
  /** @internal */ readonly _native: NativeSharedReceiveQueue;
  /** @internal */ readonly _users = new Set<QueuePair>();
  private readonly _inflight = new InFlight();
  private _state: 'open' | 'closing' | 'closed' = 'open';
  private _closing: Promise<void> | null = null;

  /** @internal Use adapter.createSharedReceiveQueue(). */
  constructor(adapter: Adapter, native: NativeSharedReceiveQueue, depth: number, maxSge: number) {
    this._adapter = adapter;
    this._native = native;
    this.depth = depth;
    this.maxSge = maxSge;
  }

  /** @internal */
  get _open(): boolean {
    return this._state === 'open';
  }
  /** Receives posted and not yet completed. */
  get outstanding(): number {
    return this._inflight.inFlight;
  }

  async receive(local: Local): Promise<Completion> {
    const op = 'receive';
    try {
      if (this._state !== 'open') throw misuse(ERR_ND_CLOSED, op, 'shared receive queue is closed');
      const a = this._adapter;
      a._checkOpen(op);
      const n = this._inflight.inFlight;
      if (n >= this.depth) {
        throw new NdError('ND_NO_MORE_ENTRIES', ND_NO_MORE_ENTRIES, op,
          `${op} failed: ND_NO_MORE_ENTRIES (0x8000001A): the shared receive queue is full (${n} outstanding of depth ${this.depth})`);
      }
      const sg = writeSges(a, a._scratch, local, this.maxSge, op, SG);
      const e = a._requests.acquire();
      e.kind = K_RECEIVE;
      e.operation = op;
      e.owner = this;
      e.bytes = sg.bytes;
      const pins = sg.pins;
      try {
        this._native.receive(e.id, sg.nSge);
      } catch (err) {
        a._requests.release(e);
        throw err;
      }
      e.pins = pins;
      pin(pins);
      this._inflight.begin();
      // Completions arrive through onBatch or cq.poll(), never inside the native call: settled later.
      return await new Promise<Completion>((resolve, reject) => {
        e.resolve = resolve;
        e.reject = reject;
      });
    } catch (err) {
      throw callerStack(asNdError(err, op));
    }
  }

  /** @internal */
  requestDone(_e: PendingRequest): void {
    this._inflight.end();
  }

  /** Closes the queue pairs that use it, then releases it; receives still posted settle with ND_CANCELED. */
  close(): Promise<void> {
    return (this._closing ??= this._close());
  }

  private async _close(): Promise<void> {
    this._state = 'closing';
    await Promise.allSettled([...this._users].map((qp) => qp.close()));
    this._native.close();
    this._state = 'closed';
    // ND has no SRQ flush: once released, the provider no longer touches the receive buffers.
    this._adapter._settleOwned(this, ND_CANCELED);
    this._adapter._forget(this);
  }

  async [Symbol.asyncDispose](): Promise<void> {
    await this.close();
  }
}

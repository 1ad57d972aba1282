// The adapter as its children see it. A queue pair, completion queue, memory region or window, shared receive
// queue, connector or listener gets this narrow view of the adapter that made it, never the Adapter object:
// better-sqlite3 hands its statements and backups a small per-addon `State` in the same way instead of the
// Database itself. What is not here (the child sets, close order, options of the public methods) belongs to
// lib/adapter.ts alone. Type-only imports: a leaf module (test/import-cycles.test.ts).

import type { Adapter, AdapterInfo, CompletionMode } from './adapter.js';
import type { CompletionArrays, RawCompletion } from './completion-queue.js';
import type { Connector } from './connector.js';
import type { NativeAdapter, NativeMemoryRegion } from './native.js';
import type { QueuePair } from './queue-pair.js';
import type { InFlight, RequestOwner, RequestTable } from './requests.js';

/** An adapter's life: open, closing (closing its children), closed. */
export type AdapterState = 'open' | 'closing' | 'closed';

export interface AdapterContext {
  /** The public adapter; only to tell apart objects of two adapters (ERR_ND_WRONG_ADAPTER), never to reach in. */
  readonly adapter: Adapter;
  readonly native: NativeAdapter;
  readonly info: AdapterInfo;
  /** The local address the adapter serves. */
  readonly address: string;
  readonly completion: CompletionMode;
  readonly state: AdapterState;
  /** The SGE triples [regionId, offset, length] a post reads (NativeAdapterConstructor's scratch). */
  readonly scratch: Float64Array;
  /** Pending requests by id: what the completion records name. */
  readonly requests: RequestTable;

  /** Throws ERR_ND_CLOSED unless the adapter is open. */
  checkOpen(operation: string): void;
  /** Validates an optional positive count against an adapter maximum (`fallback` when undefined). */
  count(value: unknown, name: string, fallback: number, max: number, operation: string, allowZero?: boolean): number;
  /**
   * Starts an overlapped ND call with a fresh request id; resolves with the ND success status once it completed.
   * `inflight` (a connector's, a listener's) counts it until then.
   */
  overlapped(
    kind: number,
    operation: string,
    inflight: InFlight | null,
    start: (id: number) => number,
    detail?: string | (() => string),
  ): Promise<number>;
  /** The first `count` records cq.poll() dequeued (default all): raw ones are appended to `out`, promise ones settled. */
  completeRecords(records: Uint32Array, out: RawCompletion[] | CompletionArrays, count?: number): void;
  /** Settles every pending request of `owner` with `status` (its native object was released). */
  settleOwned(owner: RequestOwner, status: number): void;
  /** The queue pair a completion record names (its QueuePairContext), or null once it is gone. */
  queuePair(qpId: number): QueuePair | null;
  /** A child is gone: the adapter stops tracking it. */
  forget(child: object): void;
  /** A connector a listener handed out: the adapter tracks (and closes) it from now on. */
  adopt(connector: Connector): void;
  /** A region's deregistration completed: keep its native object for the next registration, or release it. */
  recycleRegion(native: NativeMemoryRegion): void;
}

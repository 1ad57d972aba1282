// Adapter: an opened ND v2 adapter (IND2Adapter) and the parent of every other object. Its AdapterCore is what
// the children get (lib/context.ts AdapterContext): the pending request table, and the dispatch of the addon's
// completion records, each to the one owner that settles it (requests.ts RequestOwner). Children hold that
// context; the adapter tracks its children and closes them first.

import { readFileSync } from 'node:fs';
import { markAsUntransferable } from 'node:worker_threads';
import {
  ERR_ND_CLOSED,
  ERR_ND_INVALID_ARGUMENT,
  ERR_ND_OUT_OF_RANGE,
  ND_BUFFER_OVERFLOW,
  ND_CANCELED,
  ND_CONNECTION_ABORTED,
  ND_CONNECTION_REFUSED,
  ND_IO_TIMEOUT,
  ND_INSUFFICIENT_RESOURCES,
  ND_PENDING,
  ND_REMOTE_ERROR,
  NdError,
  asNdError,
  callerStack,
  hex32,
  misuse,
  statusError,
} from './errors.js';
import type { NativeAdapter, NativeAdapterInfo, NativeAdapterStats, NativeBinding, NativeMemoryRegion } from './native.js';
import { InFlight, RequestTable, unpin, type PendingRequest, type RequestOwner } from './requests.js';
import type { AdapterContext, AdapterState } from './context.js';
import { K_ACCEPT, K_CONNECT, K_CQ_ERROR, K_RECEIVE, K_REGISTER, K_SILENT, RECORD_WORDS } from './records.js';
import { MAX_VIEW_LENGTH, SCRATCH_SGES, bufferRange, checkIndex, checkOptions, describe, formatBytes } from './validate.js';
import { CompletionQueue, type CompletionArrays, type RawCompletion } from './completion-queue.js';
import { QueuePair, type QueuePairOptions } from './queue-pair.js';
import { MemoryRegion, accessFlags, mappedBuffers, type Access } from './memory-region.js';
import { MemoryWindow } from './memory-window.js';
import { SHARED_RECEIVE_QUEUE_KEYS, SharedReceiveQueue, type SharedReceiveQueueOptions } from './shared-receive-queue.js';
import { Connector, parseEndpoint, type ConnectOptions } from './connector.js';
import { Listener, type ListenOptions } from './listener.js';

export interface AdapterOptions {
  /** 'auto' (default): system ND v2 providers on Windows; on Linux the verbs provider when an RDMA device serves the (non-loopback) address, else 'soft'; 'soft'; 'verbs'; a provider name; a DLL path. */
  provider?: string;
  /**
   * Who delivers completions and drives the provider (default 'auto', or the NETDIRECT_COMPLETION environment
   * variable when the option is absent):
   * - 'loop': the JS thread's event loop watches the provider and settles requests itself, with no thread hop —
   *   the way Node's own sockets work. Needs a provider that can be driven from the loop (the built-in one on
   *   Linux). On Windows, any provider, asked for explicitly: CQ notifications complete on libuv's completion port
   *   (docs/windows-event-loop.md; refused with the reason outside the libuv versions checked). A JS thread that blocks (a synchronous spin on memory) also stalls the adapter's progress: yield to
   *   the loop, or call cq.poll(), which drives the provider when the CQ is empty.
   * - 'thread': a poller thread waits for completions and hands them to the JS thread in batches; the provider
   *   progresses on its own thread. Works with every provider.
   * - 'manual': only cq.poll() dequeues completions (promises settle inside poll()); for busy-polling loops.
   * - 'auto': 'loop' where the provider offers it, else 'thread' (on Windows: 'thread'). `adapter.completion` tells
   *   which was chosen.
   */
  completion?: CompletionOption;
  /**
   * Busy-poll window before waiting, in microseconds (default 0: never spin). 'thread': the poller thread spins
   * this long before it sleeps, and a provider that supports it (the built-in one does) makes progress on the
   * poller thread itself, so a message wakes no provider thread. 'loop': after a post or a delivered completion
   * the event loop keeps polling the provider without blocking for this long while requests are pending (other
   * callbacks, timers and I/O still run between polls), so an answer that comes back within the window is found
   * without a wake-up. Either way it costs a core while it spins. 'manual' polls only in cq.poll().
   */
  spinMicros?: number;
  /**
   * Same-host connections through shared memory (docs/shm.md): when both ends of a connection are processes of this
   * user on one machine, the built-in provider moves its data through shared memory instead of TCP, with the same
   * semantics (`qp.transport` says which). Default: the NETDIRECT_SHM environment variable ('1' on, '0' off), else
   * the provider's default (on: a connection uses shared memory when both ends allow it and can). Applies to connections this adapter sets up afterwards, as
   * initiator (connect) or responder (a listener's listen). Other providers ignore it.
   */
  sharedMemory?: boolean;
}

/** How an adapter's completions are delivered (AdapterOptions.completion). */
export type CompletionMode = 'loop' | 'thread' | 'manual';
/** AdapterOptions.completion: a CompletionMode, or 'auto' for 'loop' where the provider offers it, else 'thread'. */
export type CompletionOption = CompletionMode | 'auto';
/** The addon's CompletionMode values (binding/addon/adapter.h). */
const NATIVE_MODES: Record<CompletionOption, number> = { thread: 0, manual: 1, loop: 2, auto: 3 };

/** ND2_ADAPTER_INFO.AdapterFlags, raw and decoded. */
export interface AdapterFlags {
  /** The raw AdapterFlags (unsigned 32 bits). */
  value: number;
  /** ND_ADAPTER_FLAG_IN_ORDER_DMA_SUPPORTED: data lands in order. */
  inOrderDma: boolean;
  /** ND_ADAPTER_FLAG_CQ_INTERRUPT_MODERATION_SUPPORTED. */
  cqInterruptModeration: boolean;
  /** ND_ADAPTER_FLAG_MULTI_ENGINE_SUPPORTED. */
  multiEngine: boolean;
  /** ND_ADAPTER_FLAG_CQ_RESIZE_SUPPORTED: cq.resize() works. */
  cqResize: boolean;
  /** ND_ADAPTER_FLAG_LOOPBACK_CONNECTIONS_SUPPORTED: connections to the adapter's own address work. */
  loopbackConnections: boolean;
}

/** Every ND2_ADAPTER_INFO field, camelCase; adapterFlags decoded. */
export type AdapterInfo = Omit<NativeAdapterInfo, 'adapterFlags'> & { readonly adapterFlags: AdapterFlags };

/** adapter.stats(): counters of the completion path. */
export interface AdapterStats extends NativeAdapterStats {
  /** Requests the TypeScript side is waiting on (promises, raw posts, overlapped calls). */
  requests: number;
}

export const ND_ADAPTER_FLAG_IN_ORDER_DMA_SUPPORTED = 0x1;
export const ND_ADAPTER_FLAG_CQ_INTERRUPT_MODERATION_SUPPORTED = 0x4;
export const ND_ADAPTER_FLAG_MULTI_ENGINE_SUPPORTED = 0x8;
export const ND_ADAPTER_FLAG_CQ_RESIZE_SUPPORTED = 0x100;
export const ND_ADAPTER_FLAG_LOOPBACK_CONNECTIONS_SUPPORTED = 0x10000;

/**
 * Decodes ND2_ADAPTER_INFO.AdapterFlags (adapter.info.adapterFlags is already decoded).
 *
 * @param value - the flags as a 32-bit number.
 * @returns the flags by name, and the raw `value`.
 */
export function decodeAdapterFlags(value: number): AdapterFlags {
  return {
    value: value >>> 0,
    inOrderDma: (value & ND_ADAPTER_FLAG_IN_ORDER_DMA_SUPPORTED) !== 0,
    cqInterruptModeration: (value & ND_ADAPTER_FLAG_CQ_INTERRUPT_MODERATION_SUPPORTED) !== 0,
    multiEngine: (value & ND_ADAPTER_FLAG_MULTI_ENGINE_SUPPORTED) !== 0,
    cqResize: (value & ND_ADAPTER_FLAG_CQ_RESIZE_SUPPORTED) !== 0,
    loopbackConnections: (value & ND_ADAPTER_FLAG_LOOPBACK_CONNECTIONS_SUPPORTED) !== 0,
  };
}

export type { RequestType } from './records.js';

/** The keys each options object accepts (strict option checking: validate.ts checkOptions). */
const COMPLETION_QUEUE_KEYS = ['depth'] as const;
const LISTEN_KEYS = ['host', 'port', 'backlog'] as const;

/** A region's length against the adapter's maxRegistrationSize and the longest Uint8Array (region.buffer). */
function checkRegionLength(length: number, maxRegistrationSize: number, operation: string): void {
  if (length > maxRegistrationSize) {
    throw misuse(ERR_ND_OUT_OF_RANGE, operation,
      `${length} bytes exceed the adapter's maxRegistrationSize of ${formatBytes(maxRegistrationSize)}: use several smaller regions`);
  }
  if (length > MAX_VIEW_LENGTH) {
    throw misuse(ERR_ND_OUT_OF_RANGE, operation,
      `${length} bytes exceed ${formatBytes(MAX_VIEW_LENGTH)}, the longest Uint8Array this JavaScript engine makes (region.buffer views the whole region): use several smaller regions`);
  }
}

/** @internal This process's soft RLIMIT_MEMLOCK in bytes from /proc/self/limits text; Infinity for unlimited; undefined if not found. */
export function memlockLimit(limits: string): number | undefined {
  const m = /^Max locked memory\s+(\S+)/m.exec(limits);
  if (m === null) return undefined;
  return m[1] === 'unlimited' ? Infinity : Number.isFinite(Number(m[1])) ? Number(m[1]) : undefined;
}

function readProcLimits(): string {
  try {
    return process.platform === 'linux' ? readFileSync('/proc/self/limits', 'utf8') : '';
  } catch {
    return '';
  }
}

/**
 * @internal A registration the verbs provider refused with ND_NO_MEMORY: an RDMA device pins registered pages and the kernel
 * counts them against RLIMIT_MEMLOCK (siw even for root; other drivers unless the process has CAP_IPC_LOCK), the
 * usual cause on Linux. The error says so with the limit in force; any other error is returned as it is.
 */
export function withMemlockHint(err: unknown, provider: string, bytes: number, limits?: string): unknown {
  if (!(err instanceof NdError) || err.code !== 'ND_NO_MEMORY' || provider !== 'verbs') return err;
  const limit = memlockLimit(limits ?? readProcLimits()); // read only for the failure it explains
  if (limit === Infinity) return err;
  const what = limit === undefined ? "this process's locked-memory limit" : `this process's locked-memory limit (soft RLIMIT_MEMLOCK ${formatBytes(limit)})`;
  const hint =
    `the RDMA device pins registered memory, and ${bytes} bytes more may exceed ${what}: ` +
    'raise it (`ulimit -l unlimited` in the shell that starts node; LimitMEMLOCK=infinity for a systemd service; ' +
    'memlock in /etc/security/limits.conf for logins), or register less at a time';
  return new NdError(err.code, err.status, err.operation, `${err.message}: ${hint}`, { cause: err });
}

/** What an overlapped call's failure most likely means, for the statuses whose bare name leaves a user guessing. */
function overlappedHint(kind: number, status: number): string | undefined {
  if (kind === K_CONNECT && status === ND_IO_TIMEOUT) {
    return (
      'no MPA Reply came in time: if the peer accepted the TCP connection, it did not answer the MPA handshake ' +
      '(RFC 5044 §7) and is probably not an iWARP/netdirect endpoint (check the host and port); ' +
      'otherwise the host did not answer at all'
    );
  }
  if (kind === K_CONNECT && status === ND_INSUFFICIENT_RESOURCES) return CONNECT_RESOURCES_HINT;
  if (kind === K_ACCEPT && status === ND_CONNECTION_REFUSED) {
    return 'the initiator declined the connection after its connect() succeeded: it called reject() or closed its connector instead of completeConnect()';
  }
  if (kind === K_ACCEPT && status === ND_CONNECTION_ABORTED) {
    return 'the initiator went away before completing the connection (its TCP connection closed or broke: process ended, network lost)';
  }
  return undefined;
}

/** ND_INSUFFICIENT_RESOURCES from a Connect or from creating a connector. */
const CONNECT_RESOURCES_HINT =
  'the provider is out of connection resources; with the built-in provider this means too many connects in ' +
  'progress on this adapter (64 run at once and 192 more wait; no connector is made until one ends, docs/nd2.md "Connect flood"): ' +
  'let some finish first, or connect fewer at a time';

function withConnectResourcesHint(err: unknown): unknown {
  if (!(err instanceof NdError) || err.code !== 'ND_INSUFFICIENT_RESOURCES') return err;
  return new NdError(err.code, err.status, err.operation, `${err.message}: ${CONNECT_RESOURCES_HINT}`, { cause: err });
}

function withHint(detail: string | undefined, hint: string | undefined): string | undefined {
  if (hint === undefined) return detail;
  return detail === undefined ? hint : `${detail}: ${hint}`;
}

/** Statuses a bind to an address:port that another listener holds fails with. */
const IN_USE_CODES: ReadonlySet<string> = new Set(['ND_SHARING_VIOLATION', 'ND_ADDRESS_ALREADY_EXISTS', 'STATUS_ADDRESS_ALREADY_ASSOCIATED']);

/** Deregistered native regions kept for reuse: creating one costs more than a whole registration. */
const SPARE_REGIONS = 16;

/**
 * The adapter's state and completion dispatch: what its children get (AdapterContext), and the adapter's own
 * bookkeeping of them. Every completion record goes to the one owner that settles it: the queue pair or shared
 * receive queue of a posted request, this core for an overlapped call.
 */
class AdapterCore implements AdapterContext, RequestOwner {
  readonly native: NativeAdapter;
  readonly scratch = new Float64Array(3 * SCRATCH_SGES);
  readonly requests = new RequestTable();
  readonly info: AdapterInfo;
  readonly completion: CompletionMode;
  state: AdapterState = 'open';
  readonly qps = new Map<number, QueuePair>();
  readonly cqs = new Set<CompletionQueue>();
  readonly regions = new Set<MemoryRegion>();
  readonly spareRegions: NativeMemoryRegion[] = [];
  readonly windows = new Set<MemoryWindow>();
  readonly srqs = new Set<SharedReceiveQueue>();
  readonly connectors = new Set<Connector>();
  readonly listeners = new Set<Listener>();
  private unknownRecords = 0;

  constructor(
    readonly adapter: Adapter,
    binding: NativeBinding,
    readonly address: string,
    provider: string,
    completion: CompletionOption,
    spinMicros: number,
  ) {
    // The addon keeps a pointer to the scratch bytes: they must never be detached.
    markAsUntransferable(this.scratch.buffer);
    // The callback only reaches this adapter through a closure the addon holds while it is open.
    this.native = new binding.Adapter(provider, address, NATIVE_MODES[completion], spinMicros, this.scratch, (records, words) =>
      this.onBatch(records, words),
    );
    this.completion = this.native.completion;
    const raw = this.native.info;
    this.info = Object.freeze({ ...raw, adapterFlags: decodeAdapterFlags(raw.adapterFlags) });
  }

  checkOpen(operation: string): void {
    if (this.state !== 'open') throw misuse(ERR_ND_CLOSED, operation, `adapter ${this.address} is ${this.state}`);
  }

  count(value: unknown, name: string, fallback: number, max: number, operation: string, allowZero = false): number {
    if (value === undefined) return Math.min(fallback, max);
    checkIndex(value, name, operation);
    const n = value as number;
    if ((n === 0 && !allowZero) || n > max) {
      throw misuse(ERR_ND_OUT_OF_RANGE, operation, `${name} must be ${allowZero ? 0 : 1}..${max} on this adapter, got ${n}`);
    }
    return n;
  }

  queuePair(qpId: number): QueuePair | null {
    return this.qps.get(qpId) ?? null;
  }

  forget(child: object): void {
    this.cqs.delete(child as CompletionQueue);
    this.regions.delete(child as MemoryRegion);
    this.windows.delete(child as MemoryWindow);
    this.srqs.delete(child as SharedReceiveQueue);
    this.connectors.delete(child as Connector);
    this.listeners.delete(child as Listener);
    if (child instanceof QueuePair) {
      if (this.qps.get(child._id) === child) this.qps.delete(child._id);
    }
  }

  /** ND lets an MR object register again: the deregistered MemoryRegion never touches `native` again. */
  recycleRegion(native: NativeMemoryRegion): void {
    if (this.state === 'open' && this.spareRegions.length < SPARE_REGIONS) {
      native.reset();
      this.spareRegions.push(native);
    } else {
      native.close();
    }
  }

  adopt(connector: Connector): void {
    this.connectors.add(connector);
  }

  /**
   * Resolves with the ND success status once the call completed (synchronously with ND_SUCCESS, or later through
   * onBatch after ND_PENDING). The caller's catch block gives a failure its stack (callerStack).
   */
  overlapped(
    kind: number,
    operation: string,
    inflight: InFlight | null,
    start: (id: number) => number,
    detail?: string | (() => string),
  ): Promise<number> {
    return new Promise<number>((resolve, reject) => {
      const e = this.requests.acquire(kind, operation, this);
      e.resolve = resolve;
      e.reject = reject;
      e.detail = detail;
      e.inflight = inflight;
      inflight?.begin();
      let status: number;
      try {
        status = start(e.id) >>> 0;
      } catch (err) {
        inflight?.end();
        this.requests.release(e);
        reject(asNdError(err, operation));
        return;
      }
      if (status === ND_PENDING) return;
      // Done synchronously: no record will follow.
      this.dispatch(e.id, status, 0, kind, 0, null);
    });
  }

  /** RequestOwner of overlapped calls: resolves with the success status, or rejects with what it means. */
  complete(e: PendingRequest, status: number, _bytes: number, kind: number, _qpId: number, _out: RawCompletion[] | CompletionArrays | null): void {
    e.inflight?.end();
    unpin(e.pins);
    e.pins = null;
    if (status < 0x80000000 && status !== ND_PENDING) {
      e.resolve?.(status);
    } else {
      const detail = typeof e.detail === 'function' ? e.detail() : e.detail;
      e.reject?.(statusError(status, e.operation, withHint(detail, overlappedHint(kind, status))));
    }
    this.requests.release(e);
  }

  /**
   * Completion records from the poller thread (or from overlapped completions in manual mode); in loop mode the
   * first `words` words of an array the addon reuses for the next batch: read here, never kept.
   */
  onBatch(records: Uint32Array, words = records.length): void {
    const n = words - (words % RECORD_WORDS);
    for (let i = 0; i < n; i += RECORD_WORDS) {
      try {
        this.dispatch(records[i], records[i + 1], records[i + 2], records[i + 3], records[i + 4], null);
      } catch (err) {
        process.emitWarning(`netdirect: completion of request ${records[i]} failed: ${String(err)}`, 'NetdirectWarning');
      }
    }
  }

  completeRecords(records: Uint32Array, out: RawCompletion[] | CompletionArrays, count?: number): void {
    const n = count === undefined ? records.length - (records.length % RECORD_WORDS) : count * RECORD_WORDS;
    for (let i = 0; i < n; i += RECORD_WORDS) {
      this.dispatch(records[i], records[i + 1], records[i + 2], records[i + 3], records[i + 4], out);
    }
  }

  /** Hands request `id`'s completion to its owner. Raw completions go to `out`, or to their CQ's queue when null. */
  dispatch(id: number, status: number, bytes: number, kind: number, qpId: number, out: RawCompletion[] | CompletionArrays | null): void {
    if (kind === K_CQ_ERROR) {
      this.cqFailed(id, status >>> 0);
      return;
    }
    if ((kind & K_SILENT) !== 0) {
      // A silent request: no table entry, its queue pair knows it by number (lib/requests.ts SilentRequests).
      const qp = this.qps.get(qpId);
      if (qp === undefined || !qp._completeSilent(id, status >>> 0, bytes, kind & 0xff, out)) this.unknownRecords++;
      return;
    }
    const e = this.requests.get(id);
    if (e === undefined || e.owner === null) {
      this.unknownRecords++;
      return;
    }
    e.owner.complete(e, status >>> 0, bytes, kind, qpId, out);
  }

  /**
   * A CQ failed (the poller's K_CQ_ERROR record): nothing completes through it any more, not even the flush of its
   * queue pairs (an overrun CQ takes no further entry), so every request that would complete into it fails now
   * with the CQ's status, and so does every later one (QueuePair._checkPostable).
   */
  private cqFailed(id: number, status: number): void {
    let cq: CompletionQueue | undefined;
    for (const c of this.cqs) if (c._id === id) cq = c;
    if (cq === undefined || cq._failure !== null) return;
    const why =
      status === ND_BUFFER_OVERFLOW
        ? `completion queue overrun: more completions arrived than its depth of ${cq.depth} holds, so the CQ and ` +
          'the queue pairs that use it are unusable; size a CQ for every request that can be in flight on the queue ' +
          'pairs that complete into it: their receive depths if it is their receiveCq, their initiator depths if it is their initiatorCq'
        : 'the completion queue failed (the provider reported an error on it), so the CQ and the queue pairs that use it are unusable';
    cq._failure = { status, why };
    // Silent requests first: a request completing below retires the silent ones before it as successes.
    for (const qp of cq._users) if (qp.initiatorCq === cq) qp._settleSilent(status);
    const users: ReadonlySet<unknown> = cq._users;
    for (const e of this.requests.pending()) {
      // Requests of the queue pairs that complete into it (not their SRQ's receives: the SRQ owns those).
      if (!users.has(e.owner)) continue;
      const qp = e.owner as unknown as QueuePair;
      if ((e.kind === K_RECEIVE ? qp.receiveCq : qp.initiatorCq) !== cq) continue;
      e.cqFailure = why;
      this.dispatch(e.id, status, 0, e.kind, 0, null);
    }
  }

  settleOwned(owner: RequestOwner, status: number): void {
    for (const e of this.requests.pending()) if (e.owner === owner) this.dispatch(e.id, status, 0, e.kind, 0, null);
  }

  /** After close: nothing should be left; if the provider lost a completion, its promise still settles. */
  settleAll(): void {
    for (const e of this.requests.pending()) this.dispatch(e.id, ND_CANCELED, 0, e.kind, 0, null);
  }
}

/**
 * An opened ND v2 adapter (IND2Adapter), from openAdapter(): the parent of every other object. It creates
 * completion queues, queue pairs, memory regions and windows, shared receive queues, connectors and listeners,
 * and close() closes them all. `info` has the adapter's limits (depths, SGEs, sizes) that options are checked
 * against.
 *
 * @example
 * ```ts
 * import { openAdapter } from 'netdirect';
 * const adapter = await openAdapter('127.0.0.1');
 * const listener = await adapter.listen({ port: 0 }); // listener.address: { host: '127.0.0.1', port: <ephemeral> }
 * const qp = adapter.createQueuePair({ receiveCq: adapter.createCompletionQueue({ depth: 256 }) });
 * const region = await adapter.allocateMemory(4096, { remoteWrite: true });
 * console.log(listener.address, qp.initiatorDepth, region.length, adapter.info.maxInitiatorQueueDepth);
 * await adapter.close(); // closes the listener, the queue pair and the region too
 * ```
 */
export class Adapter implements AsyncDisposable {
  /** The local IP address the adapter serves (a name given to openAdapter() resolved). */
  readonly address: string;
  /** The provider's name ('soft' for the built-in one). */
  readonly provider: string;
  /** ND2_ADAPTER_INFO: the adapter's limits (depths, SGEs, maxTransferLength and maxRegistrationSize in bytes, ...). */
  readonly info: AdapterInfo;
  /** The completion mode in use ('auto' resolved). */
  readonly completion: CompletionMode;
  /** The busy-poll window in use, in microseconds (AdapterOptions.spinMicros, else NETDIRECT_SPIN_MICROS; 0: none). */
  readonly spinMicros: number;
  /** @internal What the children get (lib/context.ts); tests read its request table through it (test/hang-report.ts). */
  readonly _ctx: AdapterCore;
  /** @internal */ readonly _native: NativeAdapter;
  private _nextQpId = 1;
  private _nextCqId = 1;
  private _closing: Promise<void> | null = null;

  /** @internal Use openAdapter(). */
  constructor(binding: NativeBinding, address: string, provider: string, completion: CompletionOption, spinMicros: number) {
    this.address = address;
    this._ctx = new AdapterCore(this, binding, address, provider, completion, spinMicros);
    this._native = this._ctx.native;
    this.completion = this._ctx.completion;
    this.spinMicros = spinMicros;
    this.provider = this._native.provider;
    this.info = this._ctx.info;
  }

  /** Whether same-host connections set up from now on use shared memory (AdapterOptions.sharedMemory). */
  get sharedMemory(): boolean {
    return this._ctx.state === 'open' && this._native.sharedMemory();
  }

  /** True until close() was called. */
  get open(): boolean {
    return this._ctx.state === 'open';
  }

  /**
   * Local addresses this adapter serves (IND2Adapter::QueryAddressList).
   *
   * @throws {@link NdError} ERR_ND_CLOSED when the adapter is closed or closing; the provider's status.
   */
  queryAddressList(): string[] {
    this._ctx.checkOpen('queryAddressList');
    return this._native.queryAddressList();
  }

  /**
   * Counters of the completion path: batches (JS-thread crossings), completions, wakeups, pending, spinRounds
   * (event-loop rounds inside a busy-poll window).
   *
   * @throws {@link NdError} ERR_ND_CLOSED when the adapter is closed or closing.
   */
  stats(): AdapterStats {
    this._ctx.checkOpen('stats');
    return { ...this._native.stats(), requests: this._ctx.requests.size };
  }

  /**
   * @internal Whether pending requests keep the event loop alive (default true). netdirect/job turns it off
   * while the job has nothing in flight for the program, so that a program that ends without job.close() still
   * reaches 'beforeExit' (lib/job/job.ts). A closed adapter ignores it.
   */
  _keepAlive(on: boolean): void {
    if (this._ctx.state === 'open') this._native.keepAlive(on);
  }

  /**
   * Creates a completion queue.
   *
   * @param options - depth: entries, 1..info.maxCompletionQueueDepth (default 1024, or that maximum if lower);
   *   make it at least the requests that can be in flight on the queue pairs that use it.
   * @throws {@link NdError} ERR_ND_CLOSED when the adapter is closed; ERR_ND_INVALID_ARGUMENT for an unknown option
   *   or a depth that is not an integer; ERR_ND_OUT_OF_RANGE for a depth outside 1..maxCompletionQueueDepth; the
   *   provider's status (ND_INSUFFICIENT_RESOURCES, ...) when it cannot create one.
   */
  createCompletionQueue(options: { depth?: number } = {}): CompletionQueue {
    const op = 'createCompletionQueue';
    this._ctx.checkOpen(op);
    checkOptions(options, op, COMPLETION_QUEUE_KEYS);
    const depth = this._ctx.count(options.depth, 'depth', 1024, this.info.maxCompletionQueueDepth, op);
    const id = this._nextCqId;
    this._nextCqId = this._nextCqId >= 0xffffffff ? 1 : this._nextCqId + 1;
    const cq = new CompletionQueue(this._ctx, this._native.createCompletionQueue(depth, id), depth, id);
    this._ctx.cqs.add(cq);
    return cq;
  }

  /**
   * Creates a queue pair; connect it with connect() or a Connector.
   *
   * @param options - receiveCq (required), initiatorCq, depths and SGE counts within `info`'s limits (see
   *   QueuePairOptions), inlineDataSize (bytes), srq, maxQueued.
   * @throws {@link NdError} ERR_ND_CLOSED when the adapter, a CQ or the SRQ is closed; ERR_ND_INVALID_ARGUMENT for
   *   a missing or wrong CQ or SRQ, an unknown option or a count that is not an integer; ERR_ND_WRONG_ADAPTER
   *   for a CQ or SRQ of another adapter; ERR_ND_OUT_OF_RANGE for a depth, SGE count or inlineDataSize beyond the
   *   adapter's maximum (or 0); the provider's status when it cannot create one.
   */
  createQueuePair(options: QueuePairOptions): QueuePair {
    const op = 'createQueuePair';
    this._ctx.checkOpen(op);
    if (typeof options !== 'object' || options === null) {
      throw misuse(ERR_ND_INVALID_ARGUMENT, op, `options must be an object with at least receiveCq, got ${describe(options)}`);
    }
    const qpId = this._nextQpId;
    this._nextQpId = this._nextQpId >= 0xffffffff ? 1 : this._nextQpId + 1;
    const qp = new QueuePair(this._ctx, qpId, options);
    this._ctx.qps.set(qpId, qp);
    return qp;
  }

  /**
   * Registers a buffer (ND_MR_FLAG_* from `access`). The region holds the ArrayBuffer until deregistered and
   * marks it untransferable. Views must not be slices of Node's shared Buffer pool.
   *
   * @param buffer - an ArrayBuffer or a view of one: 1..info.maxRegistrationSize bytes (and at most
   *   buffer.constants.MAX_LENGTH); a Buffer only if it covers its whole ArrayBuffer.
   * @param access - what the adapter and peers may do (default: local write and Read sink, no remote access).
   * @returns the registered region.
   * @throws {@link NdError} ERR_ND_CLOSED when the adapter is closed or closes during registration;
   *   ERR_ND_INVALID_ARGUMENT for a buffer of another kind (SharedArrayBuffer, resizable ArrayBuffer, a part of a
   *   pooled Buffer), zero bytes or a wrong `access`; ERR_ND_DETACHED for a transferred ArrayBuffer;
   *   ERR_ND_OUT_OF_RANGE beyond maxRegistrationSize; the provider's status (ND_INSUFFICIENT_RESOURCES,
   *   ND_NO_MEMORY, ...) when registration fails.
   */
  async registerMemory(buffer: ArrayBuffer | ArrayBufferView, access?: Access): Promise<MemoryRegion> {
    const op = 'registerMemory';
    try {
      this._ctx.checkOpen(op);
      const { arrayBuffer, byteOffset, byteLength } = bufferRange(buffer, op);
      const flags = accessFlags(access, op);
      const max = this.info.maxRegistrationSize;
      checkRegionLength(byteLength, Number(max), op);
      const native = this._ctx.spareRegions.pop() ?? this._native.createMemoryRegion();
      const mr = new MemoryRegion(this._ctx, native, arrayBuffer, byteOffset, byteLength, flags);
      this._ctx.regions.add(mr);
      try {
        await this._ctx.overlapped(K_REGISTER, op, null, (id) => native.register(id, arrayBuffer, byteOffset, byteLength, flags),
          () => `${byteLength} bytes, flags ${hex32(flags)}`);
      } catch (err) {
        this._ctx.regions.delete(mr);
        mr._abandon();
        throw withMemlockHint(err, this.provider, byteLength);
      }
      mr._registered();
      if (this._ctx.state !== 'open') {
        // close() started while registering: it did not see a registered region, so release it here.
        await mr.deregister();
        throw misuse(ERR_ND_CLOSED, op, `adapter ${this.address} closed during registration`);
      }
      return mr;
    } catch (err) {
      throw callerStack(asNdError(err, op));
    }
  }

  /**
   * Allocates a dedicated zero-filled buffer of `length` bytes and registers it. On Linux with the built-in
   * provider the buffer is shared memory (a memfd mapping) that a same-host peer's provider can map: its RDMA Writes
   * into the region then land with a store, not a system call (docs/shm.md "Mapped regions"). With shared memory off
   * for the adapter (AdapterOptions.sharedMemory false, NETDIRECT_SHM=0) it is plain memory.
   *
   * @param length - bytes, 1..info.maxRegistrationSize (and at most buffer.constants.MAX_LENGTH).
   * @param access - as for registerMemory().
   * @returns the registered region; region.buffer views the new memory.
   * @throws {@link NdError} ERR_ND_INVALID_ARGUMENT when `length` is not an integer; ERR_ND_OUT_OF_RANGE for 0, a
   *   negative length, one beyond maxRegistrationSize or one the engine cannot allocate; ERR_ND_CLOSED when the
   *   adapter is closed; otherwise as registerMemory().
   */
  async allocateMemory(length: number, access?: Access): Promise<MemoryRegion> {
    const op = 'allocateMemory';
    checkIndex(length, 'length', op);
    if (length === 0) throw misuse(ERR_ND_OUT_OF_RANGE, op, 'length must be at least 1');
    this._ctx.checkOpen(op);
    checkRegionLength(length, Number(this.info.maxRegistrationSize), op);
    // Memory a same-host peer can map where the provider has it (a memfd mapping: Writes from a peer on this host
    // then land with a store, docs/shm.md "Mapped regions"); a plain ArrayBuffer otherwise. The region holds the
    // buffer, so its memory is never released while registered.
    let buffer: ArrayBuffer | undefined;
    try {
      buffer = this._native.allocateShared(length);
      if (buffer !== undefined) mappedBuffers.add(buffer);
      else buffer = new ArrayBuffer(length); // RangeError when memory is short
    } catch {
      throw misuse(ERR_ND_OUT_OF_RANGE, op, `cannot allocate ${length} bytes (${formatBytes(length)}): memory is short; allocate less`);
    }
    return this.registerMemory(buffer, access);
  }

  /**
   * Creates a memory window, for qp.bind().
   *
   * @throws {@link NdError} ERR_ND_CLOSED when the adapter is closed; ND_NOT_SUPPORTED when the adapter has no
   *   memory windows (info.maxWindowSize 0: e.g. Linux siw through the verbs provider); the provider's status
   *   when it cannot create one.
   */
  createMemoryWindow(): MemoryWindow {
    const op = 'createMemoryWindow';
    this._ctx.checkOpen(op);
    if (Number(this.info.maxWindowSize) === 0) {
      throw new NdError('ND_NOT_SUPPORTED', 0xc00000bb, op, `${op}: adapter ${this.address} has no memory windows (the device reports none: info.maxWindowSize 0)`);
    }
    const mw = new MemoryWindow(this._ctx, this._native.createMemoryWindow());
    this._ctx.windows.add(mw);
    return mw;
  }

  /**
   * Creates a shared receive queue, for QueuePairOptions.srq.
   *
   * @param options - depth (1..info.maxSharedReceiveQueueDepth), maxSge, notifyThreshold, maxQueued.
   * @throws {@link NdError} ERR_ND_CLOSED when the adapter is closed; ND_NOT_SUPPORTED when the adapter has no
   *   shared receive queues (info.maxSharedReceiveQueueDepth 0); ERR_ND_INVALID_ARGUMENT for an unknown option or
   *   a count that is not an integer; ERR_ND_OUT_OF_RANGE beyond the adapter's limits; the provider's status.
   */
  createSharedReceiveQueue(options: SharedReceiveQueueOptions = {}): SharedReceiveQueue {
    const op = 'createSharedReceiveQueue';
    this._ctx.checkOpen(op);
    checkOptions(options, op, SHARED_RECEIVE_QUEUE_KEYS);
    if (this.info.maxSharedReceiveQueueDepth === 0) {
      throw new NdError('ND_NOT_SUPPORTED', 0xc00000bb, op, `${op}: adapter ${this.address} has no shared receive queues`);
    }
    const depth = this._ctx.count(options.depth, 'depth', 256, this.info.maxSharedReceiveQueueDepth, op);
    const maxSge = this._ctx.count(options.maxSge, 'maxSge', 4, Math.min(this.info.maxReceiveSge, SCRATCH_SGES), op);
    const threshold = this._ctx.count(options.notifyThreshold, 'notifyThreshold', 0, depth, op, true);
    const maxQueued = SharedReceiveQueue._maxQueued(options.maxQueued, op);
    const srq = new SharedReceiveQueue(this._ctx, this._native.createSharedReceiveQueue(depth, maxSge, threshold), depth, maxSge, maxQueued);
    this._ctx.srqs.add(srq);
    return srq;
  }

  /**
   * Creates a connector, for the steps of an active connection (connect(), completeConnect()); adapter.connect()
   * does all of them.
   *
   * @throws {@link NdError} ERR_ND_CLOSED when the adapter is closed; the provider's status.
   */
  createConnector(): Connector {
    const op = 'createConnector';
    this._ctx.checkOpen(op);
    let native;
    try {
      native = this._native.createConnector();
    } catch (err) {
      throw withConnectResourcesHint(err);
    }
    const c = new Connector(this._ctx, native);
    this._ctx.connectors.add(c);
    return c;
  }

  /**
   * createConnector() + connector.connect() + connector.completeConnect(): connects `qp` to a listening peer. On
   * failure the connector is closed.
   *
   * @param qp - an unconnected queue pair of this adapter.
   * @param remote - 'host:port', '[v6]:port' or `{ host, port }` (port 1..65535).
   * @param options - privateData (bytes for the peer, at most info.maxCallerData), read limits (inboundReadLimit,
   *   outboundReadLimit, within info's limits), signal; see ConnectOptions.
   * @returns the connector; connector.privateData holds the peer's accept data.
   * @throws {@link NdError} ERR_ND_CLOSED when the adapter or `qp` is closed; ERR_ND_INVALID_ARGUMENT (or
   *   ERR_ND_INVALID_ADDRESS from the addon) for a malformed address or option; ND_CONNECTION_REFUSED when the
   *   peer rejects or nobody listens; ND_IO_TIMEOUT when the peer does not answer the MPA handshake (not an iWARP
   *   endpoint) or at all; ND_INVALID_ADDRESS for 0.0.0.0 or port 0; ND_HOST_UNREACHABLE /
   *   ND_NETWORK_UNREACHABLE; ND_CONNECTION_ABORTED when the peer goes away during the handshake;
   *   ERR_ND_ABORTED when `signal` aborts.
   */
  async connect(qp: QueuePair, remote: string | { host: string; port: number }, options: ConnectOptions = {}): Promise<Connector> {
    const op = 'connect';
    let connector: Connector | undefined;
    try {
      this._ctx.checkOpen(op);
      connector = this.createConnector();
      await connector.connect(qp, remote, options);
      await connector._completeConnect(options.signal);
      return connector;
    } catch (err) {
      if (connector) await connector.close().catch(() => undefined);
      throw callerStack(asNdError(err, op));
    }
  }

  /**
   * Listens on host (default: this adapter's address) and port (default: ephemeral).
   *
   * @param options - host (an address this adapter serves), port (0..65535; 0 or absent: ephemeral), backlog
   *   (pending connection requests, 0: the provider's default).
   * @returns the listener; listener.address tells the port.
   * @throws {@link NdError} ERR_ND_CLOSED when the adapter is closed; ERR_ND_INVALID_ARGUMENT for an unknown option
   *   or a value that is not an integer; ERR_ND_OUT_OF_RANGE for a port above 65535 or a negative number;
   *   ND_SHARING_VIOLATION / ND_ADDRESS_ALREADY_EXISTS / STATUS_ADDRESS_ALREADY_ASSOCIATED when the address is in
   *   use; ND_INVALID_ADDRESS when the adapter does not serve `host`.
   */
  async listen(options: ListenOptions = {}): Promise<Listener> {
    const op = 'listen';
    try {
      this._ctx.checkOpen(op);
      checkOptions(options, op, LISTEN_KEYS);
      const host = options.host === undefined ? this.address : (await parseEndpoint({ host: options.host, port: 0 }, op)).host;
      const port = options.port === undefined ? 0 : checkIndex(options.port, 'port', op);
      if (port > 65535) throw misuse(ERR_ND_OUT_OF_RANGE, op, `port must be 0..65535, got ${port}`);
      const backlog = options.backlog === undefined ? 0 : checkIndex(options.backlog, 'backlog', op);
      const native = this._native.createListener();
      try {
        native.bind(host, port);
        native.listen(backlog);
      } catch (err) {
        native.close();
        throw this._listenError(err, host, port);
      }
      const listener = new Listener(this._ctx, native);
      this._ctx.listeners.add(listener);
      return listener;
    } catch (err) {
      throw callerStack(asNdError(err, op));
    }
  }

  /** A listen failure that names the address and says what to do, for the causes a user can fix. */
  private _listenError(err: unknown, host: string, port: number): unknown {
    if (!(err instanceof NdError)) return err;
    const where = host.includes(':') ? `[${host}]:${port}` : `${host}:${port}`;
    let text: string;
    if (IN_USE_CODES.has(err.code)) {
      text =
        `address ${where} is already in use (${err.code}): another listener, in this or another process, has it; ` +
        'close that listener, pick another port, or pass port 0 (or no port) for an ephemeral one';
    } else if (err.code === 'ND_INVALID_ADDRESS') {
      let served: string;
      try {
        served = this._native.queryAddressList().join(', ') || 'no address';
      } catch {
        served = 'addresses it cannot list';
      }
      text =
        `address ${host} is not served by this adapter (ND_INVALID_ADDRESS): it serves ${served}; ` +
        'listen on one of those, or open the adapter of that address (listAddresses() lists every address a provider serves)';
    } else {
      return err;
    }
    return new NdError(err.code, err.status, 'listen', `listen: ${text}`, { cause: err });
  }

  /**
   * Closes every child first — connectors (disconnect), queue pairs (flush, wait for their requests), shared
   * receive queues, memory windows, memory regions (deregister), completion queues, listeners — then the
   * native adapter. Idempotent: every call returns the same promise, which never rejects. Requests still
   * pending settle with ND_CANCELED.
   */
  close(): Promise<void> {
    return (this._closing ??= this._close());
  }

  private async _close(): Promise<void> {
    this._ctx.state = 'closing';
    const closeAll = async (items: Iterable<{ close(): Promise<void> } | MemoryRegion>) => {
      await Promise.allSettled([...items].map((item) => (item instanceof MemoryRegion ? item.deregister() : item.close())));
    };
    await closeAll(this._ctx.connectors);
    await closeAll(this._ctx.qps.values());
    // Before the regions: receives still posted on an SRQ pin regions until the SRQ is released.
    await closeAll(this._ctx.srqs);
    await closeAll(this._ctx.windows);
    await closeAll(this._ctx.regions);
    for (const native of this._ctx.spareRegions.splice(0)) native.close();
    await closeAll(this._ctx.cqs);
    await closeAll(this._ctx.listeners);
    this._native.close();
    this._ctx.state = 'closed';
    // Nothing should be left; if the provider lost a completion, its promise still settles (the provider is gone).
    this._ctx.settleAll();
  }

  /** close(), for `await using adapter = await openAdapter(...)`. */
  async [Symbol.asyncDispose](): Promise<void> {
    await this.close();
  }
}

// The contract between lib/ (TypeScript) and the addon (binding/addon/, binding/delivery/, binding/bench/). Everything the addon exports is
// declared here; lib/ never touches the addon except through these types. Validation, defaults and buffer
// lifetime live in TypeScript: the native side trusts its caller but still refuses foreign or closed objects
// with an NdError instead of crashing.
//
// Asynchrony. Every overlapped ND call (register, deregister, connect, completeConnect, accept, disconnect,
// notifyDisconnect, getConnectionRequest) and every posted request (send, receive, read, write, bind,
// invalidate) carries a request id chosen by lib/ (a positive u32, unique among the adapter's pending
// requests). Overlapped calls return the ND status synchronously: ND_SUCCESS (0) means done, nothing will
// follow; ND_PENDING (0x103) means exactly one completion record with that id will arrive later; failures
// throw an NdError. Posted requests return nothing (immediate failures throw) and complete through the CQ.
//
// Completion records are delivered in batches as a Uint32Array of RECORD_WORDS words per record,
//   [id, status, bytes, kind, qpId]
// with layout and kinds declared in records.ts (binding/delivery/records.h on the C++ side; binding.recordKinds lets a
// test compare the two). kind: 0..5 = ND2_REQUEST_TYPE for CQ completions; 16.. overlapped completions (qpId 0).
// With completion 'loop' the JS thread's event loop runs the provider's progress and the poller and calls
// onBatch from libuv (binding/delivery/event_loop.h). With 'thread' the adapter's poller thread (a libuv thread) drains
// the CQs and calls the adapter's onBatch callback once per batch on the JS thread. With 'manual', CQ completions are only
// returned by cq.poll(); overlapped completions still arrive through onBatch.

/** Builds the error the addon throws; lib/ hands its NdError factory to the addon once (setErrorFactory). */
export type ErrorFactory = (code: string, status: number, operation: string, message: string) => Error;

export interface NativeProviderInfo {
  name: string; // 'soft' for the built-in provider
  kind: 'builtin' | 'system';
  path?: string; // provider DLL path (Windows)
  guid?: string; // catalog provider id (Windows) or the built-in provider's GUID
  ndVersion: number; // 0x20000 for ND v2
}

/** Every ND2_ADAPTER_INFO field, camelCase, as numbers (SIZE_T fields may exceed 2^53: then bigint). */
/** ND2_ADAPTER_INFO (the public form is AdapterInfo, adapter.info). */
export interface NativeAdapterInfo {
  /** ND_VERSION_2 (0x20000). */
  infoVersion: number;
  /** PCI vendor id (0 for the built-in provider). */
  vendorId: number;
  /** PCI device id. */
  deviceId: number;
  /** The provider's id of the adapter. */
  adapterId: bigint;
  /** The largest memory region, in bytes (registerMemory(), allocateMemory()). */
  maxRegistrationSize: number | bigint;
  /** The largest memory window, in bytes (qp.bind()). */
  maxWindowSize: number | bigint;
  /** SGEs per send or Write, at most (QueuePairOptions.maxInitiatorSge). */
  maxInitiatorSge: number;
  /** SGEs per receive, at most (QueuePairOptions.maxReceiveSge, SharedReceiveQueueOptions.maxSge). */
  maxReceiveSge: number;
  /** SGEs per Read, at most. */
  maxReadSge: number;
  /** The largest request (send, Read, Write), in bytes. */
  maxTransferLength: number;
  /** The most bytes an `inline` request carries (QueuePairOptions.inlineDataSize). */
  maxInlineDataSize: number;
  /** Reads a connection serves at once, at most (ConnectOptions.inboundReadLimit, IRD). */
  maxInboundReadLimit: number;
  /** Reads a connection issues at once, at most (ConnectOptions.outboundReadLimit, ORD). */
  maxOutboundReadLimit: number;
  /** Receives a queue pair posts at once, at most (QueuePairOptions.receiveDepth). */
  maxReceiveQueueDepth: number;
  /** Initiator requests a queue pair has in flight, at most (QueuePairOptions.initiatorDepth). */
  maxInitiatorQueueDepth: number;
  /** Entries of a shared receive queue, at most; 0: no shared receive queues. */
  maxSharedReceiveQueueDepth: number;
  /** Entries of a completion queue, at most (createCompletionQueue({ depth })). */
  maxCompletionQueueDepth: number;
  /** Bytes below which `inline` pays off (the provider's hint). */
  inlineRequestThreshold: number;
  /** Bytes above which a request counts as large (the provider's hint). */
  largeRequestThreshold: number;
  /** Private data bytes a connect() carries, at most. */
  maxCallerData: number;
  /** Private data bytes an accept() or reject() carries, at most. */
  maxCalleeData: number;
  /** ND_ADAPTER_FLAG_* bits (decoded in AdapterInfo.adapterFlags). */
  adapterFlags: number;
}

export interface NativeAddress {
  host: string; // numeric IPv4 or IPv6 text (no brackets)
  port: number;
}

export interface NativeAdapterStats {
  /** Completion batches handed to the JS thread (JS-thread crossings). */
  batches: number;
  /** Completion records delivered in those batches. */
  completions: number;
  /** Times the poller thread woke from a blocking wait. */
  wakeups: number;
  /** Requests the adapter is waiting on (it keeps the event loop alive while > 0). */
  pending: number;
  /** Event-loop rounds run inside a busy-poll window (AdapterOptions.spinMicros, 'loop' mode); 0 otherwise. */
  spinRounds: number;
}

export interface NativeAdapter {
  readonly info: NativeAdapterInfo;
  readonly provider: string; // provider name actually used ('soft', or the system provider's name)
  readonly completion: 'loop' | 'thread' | 'manual'; // the mode in use (mode 3 'auto' resolved)
  /** Local addresses this adapter serves (IND2Adapter::QueryAddressList). */
  queryAddressList(): string[];
  /** `id` names the CQ in the record that reports its failure (records.ts K_CQ_ERROR). */
  createCompletionQueue(depth: number, id: number): NativeCompletionQueue;
  /**
   * IND2Adapter::CreateQueuePair (srq null) or CreateQueuePairWithSrq. qpId (u32 > 0, chosen by lib/) is the
   * QueuePairContext; it comes back in every completion record of this QP.
   */
  createQueuePair(
    receiveCq: NativeCompletionQueue,
    initiatorCq: NativeCompletionQueue,
    srq: NativeSharedReceiveQueue | null,
    qpId: number,
    receiveDepth: number,
    initiatorDepth: number,
    maxReceiveSge: number,
    maxInitiatorSge: number,
    inlineDataSize: number,
  ): NativeQueuePair;
  createMemoryRegion(): NativeMemoryRegion;
  createMemoryWindow(): NativeMemoryWindow;
  createSharedReceiveQueue(depth: number, maxSge: number, notifyThreshold: number): NativeSharedReceiveQueue;
  createConnector(): NativeConnector;
  createListener(): NativeListener;
  stats(): NativeAdapterStats;
  /** false: pending requests stop keeping the event loop alive (default true); netdirect/job's idle standing receives. */
  keepAlive(on: boolean): void;
  /** INDSharedMemory (docs/shm.md): a boolean turns same-host shared memory on/off for later connections; returns whether it is on (false: the provider has none). */
  sharedMemory(enable?: boolean): boolean;
  /** Memory a same-host peer can map (INDSharedBuffers), or undefined where there is none. */
  allocateShared(length: number): ArrayBuffer | undefined;
  /**
   * Stops the poller thread and releases the IND2Adapter. lib/ closes every child first; children still
   * open are released here too (children first) so nothing leaks. Idempotent.
   */
  close(): void;
}

export interface NativeCompletionQueue {
  readonly depth: number;
  /** Dequeues up to max completions (IND2CompletionQueue::GetResults) into the records() array; returns their count. */
  poll(max: number): number;
  /** The Uint32Array poll() writes its records into (RECORD_WORDS each) from now on; its buffer must never be detached. */
  records(records: Uint32Array): void;
  /** As poll(), but writes the records into `records` (at most its length / RECORD_WORDS) and returns their count. */
  pollInto(records: Uint32Array, max: number): number;
  resize(depth: number): void;
  /** CancelOverlappedRequests + Release. Idempotent. */
  close(): void;
}

export interface NativeMemoryRegion {
  /**
   * Once registered: [id, localToken, remoteToken, address]. id is the adapter-unique handle SGE lists name
   * (u32 > 0, fixed for the region's life), address that of the registered buffer's first byte.
   */
  registration(): [number, number, number, bigint];
  /**
   * IND2MemoryRegion::Register over [byteOffset, byteOffset + byteLength) of buffer, with ND_MR_FLAG_* flags.
   * The addon keeps a strong reference to the ArrayBuffer until close() or reset(). A region whose
   * deregistration completed may register again (ND allows it; lib/ reuses regions that way).
   */
  register(id: number, buffer: ArrayBuffer, byteOffset: number, byteLength: number, flags: number): number;
  deregister(id: number): number;
  /** Once deregistration completed: drops the reference to the ArrayBuffer (the region can register again). */
  reset(): void;
  /** Release. Must only be called once deregistration completed (or registration never happened). */
  close(): void;
}

export interface NativeMemoryWindow {
  readonly remoteToken: number; // valid once a bind was posted
  close(): void;
}

export interface NativeSharedReceiveQueue {
  /** Posts a receive; the SGEs are the first nSge triples of the adapter's scratch array. */
  receive(id: number, nSge: number): void;
  close(): void;
}

export interface NativeQueuePair {
  /**
   * Posts a request whose SGEs are the first nSge triples [memoryRegionId, offset, length] of the adapter's
   * scratch Float64Array. opFlags = op | flags << 8, op: K_SEND | K_RECEIVE | K_READ | K_WRITE (records.ts),
   * flags: ND_OP_FLAG_* (packed: six arguments are passed without an allocation). For read/write the remote
   * address is remoteAddress + remoteOffset (lib/ checked that it does not wrap; 0n and 0 for send/receive)
   * and remoteToken is the peer's token.
   * Immediate failures (ND_NO_MORE_ENTRIES, ND_CONNECTION_INVALID, ND_DATA_OVERRUN, ...) throw NdError.
   */
  post(opFlags: number, id: number, nSge: number, remoteAddress: bigint, remoteOffset: number, remoteToken: number): void;
  /**
   * Posts `count` requests with one call, in order. Request i is the 8 numbers at descriptors[8i..8i+7]:
   * [opFlags (as post()), id, nSge, firstSge, remoteAddress low 32 bits, high 32 bits, remoteOffset, remoteToken];
   * its SGEs are the nSge triples [memoryRegionId, offset, length] of `sges` from triple firstSge on. Every
   * request's SGEs are checked before the first is posted (misuse throws NdError, nothing posted). Returns how
   * many were posted: `count`, or k when the provider refused request k (its status is then written over its id,
   * descriptors[8k + 1]); the requests after k are not posted. A request with ND_OP_FLAG_SILENT_SUCCESS has no
   * request table entry: its id is its number among the queue pair's silent requests (lib/requests.ts
   * SilentRequests), and so it is for post().
   */
  postMany(descriptors: Float64Array, sges: Float64Array, count: number): number;
  /** IND2QueuePair::Bind of window to [offset, offset+length) of region; returns the window's remote token. */
  bind(id: number, region: NativeMemoryRegion, window: NativeMemoryWindow, offset: number, length: number, flags: number): number;
  invalidate(id: number, window: NativeMemoryWindow, flags: number): void;
  flush(): void;
  /** INDTransport (docs/shm.md): 'shm' or 'tcp' once connected; undefined before, or from a provider without it. */
  transport(): string | undefined;
  close(): void;
}

export interface NativeConnector {
  bind(host: string, port: number): void;
  connect(
    id: number,
    qp: NativeQueuePair,
    host: string,
    port: number,
    inboundReadLimit: number,
    outboundReadLimit: number,
    privateData: Uint8Array | null,
  ): number;
  completeConnect(id: number): number;
  accept(id: number, qp: NativeQueuePair, inboundReadLimit: number, outboundReadLimit: number, privateData: Uint8Array | null): number;
  reject(privateData: Uint8Array | null): void;
  /** The peer's limits, crossed (IND2Connector::GetReadLimits): [inbound, outbound]. */
  getReadLimits(): [number, number];
  getPrivateData(): Uint8Array;
  getLocalAddress(): NativeAddress;
  getPeerAddress(): NativeAddress;
  notifyDisconnect(id: number): number;
  disconnect(id: number): number;
  /** CancelOverlappedRequests: pending requests complete with ND_CANCELED. */
  cancel(): void;
  close(): void;
}

export interface NativeListener {
  bind(host: string, port: number): void;
  listen(backlog: number): void;
  getLocalAddress(): NativeAddress;
  /** Completes when a request arrives; connector then represents it (use accept/reject on it). */
  getConnectionRequest(id: number, connector: NativeConnector): number;
  cancel(): void;
  close(): void;
}

export interface NativeAdapterConstructor {
  /**
   * Opens the adapter that serves `address` (NdOpenAdapter semantics) from `provider` ('soft', 'auto', a
   * provider name from listProviders(), or a DLL path). mode 0 = 'thread', 1 = 'manual', 2 = 'loop' (fails
   * with ND_NOT_SUPPORTED where the provider cannot be driven from the event loop), 3 = 'auto'. scratch is the
   * Float64Array (3 * maxSge entries at least) that post()/receive() read SGE triples from.
   */
  new (
    provider: string,
    address: string,
    mode: number,
    spinMicros: number,
    scratch: Float64Array,
    onBatch: (records: Uint32Array, words?: number) => void,
  ): NativeAdapter;
}

export interface NativeBinding {
  readonly version: string;
  /** ND status name table (ND_* and the few NTSTATUS values providers use), value -> name. */
  readonly statusNames: Record<number, string>;
  /** Record kinds by name (binding/delivery/records.h): must equal records.ts RECORD_KINDS. */
  readonly recordKinds: Readonly<Record<string, number>>;
  /** Words per completion record (binding/delivery/records.h kRecordWords): must equal records.ts RECORD_WORDS. */
  readonly recordWords: number;
  /** Or'ed into the kind of a silent request's record (binding/delivery/records.h kRecordSilent). */
  readonly recordSilent: number;
  setErrorFactory(factory: ErrorFactory): void;
  listProviders(): NativeProviderInfo[];
  /** The providers compiled into the addon ('soft', and 'verbs' where rdma-core's headers were at build time). */
  readonly builtProviders: readonly string[];
  /** Registers the software provider's DLL (netdirect_soft.dll) in the Winsock catalog as an ND v2 provider; what was done. */
  catalogInstall(dllPath: string): string;
  /** Removes it from the catalog; what was done. */
  catalogUninstall(): string;
  /** Addresses served by a provider (NdQueryAddressList for one provider). */
  listAddresses(provider: string): string[];
  /** True when the software provider's CRC32c uses the CPU's crc32 instruction. */
  hardwareCrc32c(): boolean;
  /** Which CRC32c implementation the software provider runs: 'avx512-vpclmulqdq', 'pclmulqdq', 'sse4.2' or 'table'. */
  crc32cImplementation(): string;
  readonly Adapter: NativeAdapterConstructor;
}

// ---- ndbench's native loops (binding/bench/), for lib/bench/ alone -------------------------------------------

/** ndBenchRun's parameters (binding/bench/bench_nd.cc): the C++ loop drives these objects of one adapter. */
export interface NativeNdBenchParams {
  role: 'client' | 'server';
  test: string;
  qp: NativeQueuePair;
  cq: NativeCompletionQueue;
  region: NativeMemoryRegion;
  size: number;
  sendOffset: number;
  stop: number;
  stopSource: number;
  drainSource: number;
  remoteAddress: bigint | number;
  remoteToken: number;
  moderation: number;
  inline: boolean;
  timeoutMs: number;
  iters: number;
  warmup: number;
  durationMs: number;
  /** write_bw: Writes in flight at once. */
  window?: number;
  /** write_bw: Writes per group bracketed by INDPostBatch, each group's last signaled (ndbench -l; default 1). */
  postList?: number;
  /** send_lat: receives lib/ has posted on the queue pair (the loop uses them first and hands their results back). */
  receives?: number;
}

/** tcpBenchRun's parameters (binding/bench/bench_tcp.cc): a server passes the fd of tcpBenchListen, a client host and port. */
export interface NativeTcpBenchParams {
  role: 'client' | 'server';
  pattern: 'pingpong' | 'stream';
  sender: boolean;
  size: number;
  replySize: number;
  iters: number;
  warmup: number;
  durationMs: number;
  spin: boolean;
  timeoutMs: number;
  fd?: number;
  host?: string;
  port?: number;
}

export interface NativeTcpBenchResult {
  /** Ping-pong round trips, ns. */
  samples: Float64Array;
  iterations: number;
  bytes: number;
  elapsedNs: number;
}

/** The bench functions of the addon; optional, so that a build without them is reported, not crashed on. */
export interface NativeBenchBinding {
  /** Runs the phase on the JS thread; the client gets its round trips (ns), the server undefined. */
  /** write_bw's client also returns the messages completed and the time they took. */
  ndBenchRun?(params: NativeNdBenchParams): { samples: Float64Array; messages?: number; elapsedNs?: number } | undefined;
  tcpBenchListen?(host: string, port: number): { fd: number; port: number };
  tcpBenchRun?(params: NativeTcpBenchParams): Promise<NativeTcpBenchResult>;
  tcpBenchClose?(fd: number): void;
}

/**
 * The addon for lib/bench/, loaded on first use rather than at import (ndbench parses its options and prints its
 * help without it), or, for bench_tcp.cc built alone as its own addon (NETDIRECT_BENCH_TCP_STANDALONE), the module
 * `override` names (NETDIRECT_BENCH_TCP_ADDON).
 */
export function loadBenchBinding(override?: string): NativeBenchBinding & Partial<NativeBinding> {
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  return (override ? require(override) : require('./binding.js').binding) as NativeBenchBinding & Partial<NativeBinding>;
}

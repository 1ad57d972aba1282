// MemoryRegion: a registered buffer. The region owns the buffer's lifetime: it holds the ArrayBuffer strongly
// until deregistration has completed (the peer may write into it at any time until then), marks it
// untransferable, checks it for detachment before each use, and counts the in-flight requests that pin it so
// deregister() can wait for them.

import { markAsUntransferable } from 'node:worker_threads';
import {
  ERR_ND_CLOSED,
  ERR_ND_DETACHED,
  ERR_ND_INVALID_ARGUMENT,
  ERR_ND_OUT_OF_RANGE,
  ERR_ND_TOO_MANY_SGES,
  ERR_ND_WRONG_ADAPTER,
  callerStack,
  misuse,
} from './errors.js';
import type { NativeMemoryRegion } from './native.js';
import { InFlight, type Pins } from './requests.js';
import { K_DEREGISTER } from './records.js';
import { checkBoolean, checkIndex, checkOptions, describe, isDetached } from './validate.js';
import type { AdapterContext } from './context.js';

/** For plain memory passed where registered memory belongs: how to register it. */
function unregisteredHint(value: unknown): string {
  if (!ArrayBuffer.isView(value) && !(value instanceof ArrayBuffer) && !(typeof SharedArrayBuffer !== 'undefined' && value instanceof SharedArrayBuffer)) return '';
  return (
    ': memory is posted only once registered with the adapter: const region = await adapter.registerMemory(buffer) ' +
    '(or adapter.allocateMemory(n)), then pass region or region.slice(offset, length)'
  );
}

/** What registerMemory() may grant. Default: { localWrite: true, readSink: true }; no remote access. */
export interface Access {
  /** The adapter may write into the region: receives and Read sinks (ND_MR_FLAG_ALLOW_LOCAL_WRITE; default true). */
  localWrite?: boolean;
  /** Peers may RDMA Read the region (ND_MR_FLAG_ALLOW_REMOTE_READ; default false). */
  remoteRead?: boolean;
  /** Peers may RDMA Write the region (ND_MR_FLAG_ALLOW_REMOTE_WRITE, which includes local write; default false). */
  remoteWrite?: boolean;
  /** The region may be the local sink of a qp.read() (ND_MR_FLAG_RDMA_READ_SINK; default true). */
  readSink?: boolean;
}

/** A local scatter/gather entry: `length` bytes at `offset` of `region`. */
export interface Segment {
  /** The registered region the bytes belong to. */
  region: MemoryRegion;
  /** Byte offset in the region. */
  offset: number;
  /** Bytes; offset + length ≤ region.length. */
  length: number;
}

/** What a peer needs to Read or Write a region (or a bound memory window). */
export interface RemoteMemory {
  /** The peer's address of the first byte (64 bits). */
  address: bigint;
  /** The peer's remote token (32 bits: region.remoteToken or a bound window's). */
  token: number;
  /** Bytes accessible from `address`. */
  length: number;
}

/** Local memory of a request: a region (all of it), a segment, a list of them (one SGE each), or null (zero bytes). */
export type Local = MemoryRegion | Segment | Array<MemoryRegion | Segment> | null;

export const ND_MR_FLAG_ALLOW_LOCAL_WRITE = 0x1;
export const ND_MR_FLAG_ALLOW_REMOTE_READ = 0x2;
export const ND_MR_FLAG_ALLOW_REMOTE_WRITE = 0x5;
export const ND_MR_FLAG_RDMA_READ_SINK = 0x8;

/** ArrayBuffers over the provider's mapped memory (adapter.allocateMemory): see the constructor. */
export const mappedBuffers = new WeakSet<ArrayBuffer>();

const ACCESS_KEYS = ['localWrite', 'remoteRead', 'remoteWrite', 'readSink'] as const;

export function accessFlags(access: Access | undefined, operation: string): number {
  if (access === undefined) return ND_MR_FLAG_ALLOW_LOCAL_WRITE | ND_MR_FLAG_RDMA_READ_SINK;
  if (access === null || typeof access !== 'object') {
    throw misuse(ERR_ND_INVALID_ARGUMENT, operation, `access must be an object like { remoteWrite: true }, got ${describe(access)}`);
  }
  checkOptions(access, operation, ACCESS_KEYS, 'access');
  let flags = 0;
  if (checkBoolean(access.localWrite, 'access.localWrite', operation, true)) flags |= ND_MR_FLAG_ALLOW_LOCAL_WRITE;
  if (checkBoolean(access.remoteRead, 'access.remoteRead', operation, false)) flags |= ND_MR_FLAG_ALLOW_REMOTE_READ;
  if (checkBoolean(access.remoteWrite, 'access.remoteWrite', operation, false)) flags |= ND_MR_FLAG_ALLOW_REMOTE_WRITE;
  if (checkBoolean(access.readSink, 'access.readSink', operation, true)) flags |= ND_MR_FLAG_RDMA_READ_SINK;
  return flags;
}

type RegionState = 'registering' | 'registered' | 'deregistering' | 'deregistered';

/**
 * A registered buffer (IND2MemoryRegion): local memory requests can use, and (with remote access) memory a peer
 * can Read or Write. The region holds the ArrayBuffer until deregistered and marks it untransferable;
 * `buffer` views the same bytes the adapter and the peer touch. Made by adapter.registerMemory() and
 * adapter.allocateMemory(); adapter.close() deregisters what is left.
 *
 * @example
 * ```ts
 * import { openAdapter, encodeRemote } from 'netdirect';
 * const adapter = await openAdapter('127.0.0.1');
 * const region = await adapter.allocateMemory(8192, { remoteWrite: true });
 * region.buffer.set([1, 2, 3]);
 * const head = region.slice(0, 3); // a Segment: local memory of a request
 * const offer = encodeRemote(region.remote(4096)); // 16 bytes that let a peer write the upper 4 KiB
 * console.log(head.length, offer.byteLength);
 * await region.deregister();
 * await adapter.close();
 * ```
 */
export class MemoryRegion implements AsyncDisposable {
  /** View of the registered memory: the same bytes the peer reads and writes. */
  readonly buffer: Uint8Array;
  /** Bytes registered (≤ adapter.info.maxRegistrationSize). */
  readonly length: number;
  /** Access the region was registered with. */
  readonly access: Readonly<Required<Access>>;
  /** @internal */ readonly _ctx: AdapterContext;
  /** @internal */ readonly _native: NativeMemoryRegion;
  /** @internal The native region id SGEs name (read once registered, not per post). */
  _id = 0;
  /** @internal */ _state: RegionState = 'registering';
  // Held strongly until deregistration completes: the provider (and the peer) may touch it until then.
  private _arrayBuffer: ArrayBuffer | null;
  private readonly _byteOffset: number;
  private readonly _abLength: number;
  private readonly _pins = new InFlight();
  private _address = 0n;
  private _localToken = 0;
  private _remoteToken = 0;
  private _deregistering: Promise<void> | null = null;

  /** @internal Use adapter.registerMemory() / adapter.allocateMemory(). */
  constructor(ctx: AdapterContext, native: NativeMemoryRegion, arrayBuffer: ArrayBuffer, byteOffset: number, byteLength: number, flags: number) {
    this._ctx = ctx;
    this._native = native;
    this._arrayBuffer = arrayBuffer;
    this._byteOffset = byteOffset;
    this._abLength = arrayBuffer.byteLength;
    this.length = byteLength;
    this.buffer = new Uint8Array(arrayBuffer, byteOffset, byteLength);
    this.access = Object.freeze({
      localWrite: (flags & ND_MR_FLAG_ALLOW_LOCAL_WRITE) !== 0,
      remoteRead: (flags & ND_MR_FLAG_ALLOW_REMOTE_READ) !== 0,
      remoteWrite: (flags & ND_MR_FLAG_ALLOW_REMOTE_WRITE) === ND_MR_FLAG_ALLOW_REMOTE_WRITE,
      readSink: (flags & ND_MR_FLAG_RDMA_READ_SINK) !== 0,
    });
    // A transfer would free or move memory the provider writes into. Not for the provider's own mapped memory
    // (adapter.allocateMemory on Linux): Node 24 and later abort at exit ("v8::FromJust Maybe value is Nothing")
    // when an external ArrayBuffer is marked, because its cleanup hook detaches it without the key the mark sets.
    // That memory needs no mark: each registration over it keeps the mapping (binding/soft/memory/shared_buffer.h),
    // so a transfer only moves the handle, and this region then reports ERR_ND_DETACHED.
    if (!mappedBuffers.has(arrayBuffer)) markAsUntransferable(arrayBuffer);
  }

  /** The address peers use as remoteAddress (the registered buffer's first byte). */
  get address(): bigint {
    return this._address;
  }
  /** The token (32 bits) of local SGEs naming this region (IND2MemoryRegion::GetLocalToken). */
  get localToken(): number {
    return this._localToken;
  }
  /** The token (32 bits) peers Read or Write this region with; see remote() for the whole description. */
  get remoteToken(): number {
    return this._remoteToken;
  }
  /** True until deregister() was called. */
  get registered(): boolean {
    return this._state === 'registered';
  }
  /** Requests in flight that use this region. */
  get inFlight(): number {
    return this._pins.inFlight;
  }

  /** @internal */ get _offsetInArrayBuffer(): number {
    return this._byteOffset;
  }

  /** @internal Called once Register completed. */
  _registered(): void {
    const [id, localToken, remoteToken, address] = this._native.registration();
    this._id = id;
    this._address = address;
    this._localToken = localToken >>> 0;
    this._remoteToken = remoteToken >>> 0;
    this._state = 'registered';
  }

  /** @internal */ _pin(): void {
    this._pins.begin();
  }
  /** @internal */ _unpin(): void {
    this._pins.end();
  }
  /** @internal */ _pinMany(n: number): void {
    this._pins.beginMany(n);
  }
  /** @internal */ _unpinMany(n: number): void {
    this._pins.endMany(n);
  }

  /** @internal Throws unless the region can be used by a new request. */
  _checkUsable(operation: string): void {
    if (this._state !== 'registered') {
      throw misuse(ERR_ND_CLOSED, operation, `memory region (${this.length} bytes) is ${this._state === 'registering' ? 'not registered yet' : this._state}`);
    }
    if (this._arrayBuffer === null || isDetached(this._arrayBuffer, this._abLength)) {
      throw misuse(ERR_ND_DETACHED, operation, `the ArrayBuffer of this memory region (${this.length} bytes) was detached`);
    }
  }

  /**
   * A local SGE: `length` bytes at `offset`, for the `local` argument of a request.
   *
   * @param offset - byte offset in the region, 0..length (default 0).
   * @param length - bytes (default: the rest of the region from `offset`).
   * @returns the segment `{ region, offset, length }`.
   * @throws {@link NdError} ERR_ND_INVALID_ARGUMENT when `offset` or `length` is not an integer;
   *   ERR_ND_OUT_OF_RANGE when either is negative or the segment ends beyond the region.
   */
  slice(offset = 0, length?: number): Segment {
    const op = 'slice';
    checkIndex(offset, 'offset', op);
    const len = length === undefined ? this.length - offset : checkIndex(length, 'length', op);
    if (offset > this.length || len > this.length - offset) {
      throw misuse(ERR_ND_OUT_OF_RANGE, op, `segment [${offset}, ${offset + len}) is outside the ${this.length}-byte region`);
    }
    return { region: this, offset, length: len };
  }

  /**
   * What a peer needs to Read or Write `length` bytes at `offset` of this region (send it with encodeRemote(), in
   * private data or a message). The peer's access is limited by `access` (remoteRead, remoteWrite).
   *
   * @param offset - byte offset in the region, 0..length (default 0).
   * @param length - bytes (default: the rest of the region from `offset`).
   * @returns `{ address, token, length }`.
   * @throws {@link NdError} ERR_ND_INVALID_ARGUMENT when `offset` or `length` is not an integer;
   *   ERR_ND_OUT_OF_RANGE when either is negative or the range ends beyond the region; ERR_ND_CLOSED when the
   *   region is deregistered or deregistering.
   */
  remote(offset = 0, length?: number): RemoteMemory {
    const op = 'remote';
    checkIndex(offset, 'offset', op);
    const len = length === undefined ? this.length - offset : checkIndex(length, 'length', op);
    if (offset > this.length || len > this.length - offset) {
      throw misuse(ERR_ND_OUT_OF_RANGE, op, `range [${offset}, ${offset + len}) is outside the ${this.length}-byte region`);
    }
    if (this._state !== 'registered') throw misuse(ERR_ND_CLOSED, op, `memory region is ${this._state}`);
    return { address: this._address + BigInt(offset), token: this._remoteToken, length: len };
  }

  /**
   * Deregisters the region once no request that uses it is in flight, then releases it. Idempotent: every
   * call returns the same promise. New requests that use the region fail with ERR_ND_CLOSED from the first call.
   *
   * @throws {@link NdError} the provider's status when it refuses to deregister (ND_DEVICE_BUSY while a memory
   *   window is bound to the region): the region stays registered and usable, and a later call retries.
   */
  deregister(): Promise<void> {
    return (this._deregistering ??= this._deregister());
  }

  private async _deregister(): Promise<void> {
    const wasRegistered = this._state === 'registered';
    this._state = 'deregistering';
    await this._pins.idle();
    try {
      if (wasRegistered) {
        await this._ctx.overlapped(K_DEREGISTER, 'deregister', null, (id) => this._native.deregister(id),
          `region of ${this.length} bytes at 0x${this._address.toString(16)}`);
      }
    } catch (err) {
      // Still registered (e.g. ND_DEVICE_BUSY while a memory window is bound): usable again, can retry.
      this._state = 'registered';
      this._deregistering = null;
      throw callerStack(err as Error);
    }
    this._state = 'deregistered';
    this._arrayBuffer = null;
    this._ctx.forget(this);
    this._ctx.recycleRegion(this._native);
  }

  /** @internal Adapter teardown after a failed registration. */
  _abandon(): void {
    this._state = 'deregistered';
    this._arrayBuffer = null;
    this._native.close();
  }

  /** deregister(), for `await using region = await adapter.allocateMemory(n)`. */
  async [Symbol.asyncDispose](): Promise<void> {
    await this.deregister();
  }
}

export function isSegment(value: unknown): value is Segment {
  return typeof value === 'object' && value !== null && 'region' in value && (value as Segment).region instanceof MemoryRegion;
}

/** Result of writeSges(), reused between calls (the data path allocates nothing for one region). */
export interface SgeList {
  nSge: number;
  bytes: number;
  pins: Pins;
}

function addSge(
  scratch: Float64Array,
  n: number,
  ctx: AdapterContext,
  region: unknown,
  offset: number,
  length: number,
  maxSge: number,
  operation: string,
  base: number,
): void {
  if (!(region instanceof MemoryRegion)) {
    throw misuse(ERR_ND_INVALID_ARGUMENT, operation, `local memory must be a MemoryRegion, a Segment, an array of them or null; got ${describe(region)}${unregisteredHint(region)}`);
  }
  if (region._ctx !== ctx) throw misuse(ERR_ND_WRONG_ADAPTER, operation, 'the memory region was registered on another adapter');
  region._checkUsable(operation);
  if (offset > region.length || length > region.length - offset) {
    throw misuse(ERR_ND_OUT_OF_RANGE, operation, `segment [${offset}, ${offset + length}) is outside the ${region.length}-byte region`);
  }
  if (length === 0) return; // validated, but no SGE: ND needs none for zero bytes
  if (n >= maxSge) throw misuse(ERR_ND_TOO_MANY_SGES, operation, `more than ${maxSge} scatter/gather entries (the queue's limit)`);
  const i = 3 * (base + n);
  if (i + 3 > scratch.length) throw misuse(ERR_ND_TOO_MANY_SGES, operation, `more scatter/gather entries than the batch holds (${scratch.length / 3})`);
  scratch[i] = region._id;
  scratch[i + 1] = offset;
  scratch[i + 2] = length;
}

/**
 * Validates `local` and writes its SGE triples [regionId, offset, length] into `scratch` (the adapter's, or a
 * batch's from triple `base` on). Zero-length segments are skipped. Nothing is pinned here: the caller pins
 * `out.pins` once the post is accepted.
 */
export function writeSges(ctx: AdapterContext, scratch: Float64Array, local: unknown, maxSge: number, operation: string, out: SgeList, base = 0): SgeList {
  out.nSge = 0;
  out.bytes = 0;
  out.pins = null;
  if (local === null || local === undefined) return out;
  if (local instanceof MemoryRegion) {
    addSge(scratch, 0, ctx, local, 0, local.length, maxSge, operation, base);
    if (local.length === 0) return out;
    out.nSge = 1;
    out.bytes = local.length;
    out.pins = local;
    return out;
  }
  if (Array.isArray(local)) {
    const pins: MemoryRegion[] = [];
    let n = 0;
    for (const item of local) {
      let region: unknown;
      let offset: number;
      let length: number;
      if (item instanceof MemoryRegion) {
        region = item;
        offset = 0;
        length = item.length;
      } else if (typeof item === 'object' && item !== null && 'region' in item) {
        region = item.region;
        offset = checkIndex(item.offset, 'segment.offset', operation);
        length = checkIndex(item.length, 'segment.length', operation);
      } else {
        throw misuse(ERR_ND_INVALID_ARGUMENT, operation, `each local entry must be a MemoryRegion or a Segment, got ${describe(item)}`);
      }
      // Zero-byte segments are still validated (a closed or foreign region is a mistake) but add no SGE.
      addSge(scratch, n, ctx, region, offset, length, maxSge, operation, base);
      if (length === 0) continue;
      pins.push(region as MemoryRegion);
      out.bytes += length;
      n++;
    }
    out.nSge = n;
    out.pins = pins.length === 0 ? null : pins.length === 1 ? pins[0] : pins;
    return out;
  }
  if (typeof local === 'object' && 'region' in local) {
    const seg = local as Segment;
    const offset = checkIndex(seg.offset, 'segment.offset', operation);
    const length = checkIndex(seg.length, 'segment.length', operation);
    addSge(scratch, 0, ctx, seg.region, offset, length, maxSge, operation, base);
    if (length === 0) return out;
    out.nSge = 1;
    out.bytes = length;
    out.pins = seg.region;
    return out;
  }
  throw misuse(ERR_ND_INVALID_ARGUMENT, operation, `local memory must be a MemoryRegion, a Segment, an array of them or null; got ${describe(local)}${unregisteredHint(local)}`);
}

/** Checks a RemoteMemory given by the caller. */
export function checkRemote(remote: unknown, operation: string): RemoteMemory {
  if (typeof remote !== 'object' || remote === null) {
    throw misuse(ERR_ND_INVALID_ARGUMENT, operation, `remote must be a RemoteMemory { address, token, length }, got ${describe(remote)}`);
  }
  const r = remote as RemoteMemory;
  if (typeof r.address !== 'bigint' || r.address < 0n || r.address > 0xffffffffffffffffn) {
    throw misuse(ERR_ND_INVALID_ARGUMENT, operation, `remote.address must be a bigint in [0, 2^64), got ${describe(r.address)}`);
  }
  if (typeof r.token !== 'number' || !Number.isInteger(r.token) || r.token < -0x80000000 || r.token > 0xffffffff) {
    throw misuse(ERR_ND_INVALID_ARGUMENT, operation, `remote.token must be a 32-bit integer, got ${describe(r.token)}`);
  }
  checkIndex(r.length, 'remote.length', operation);
  return r;
}

/**
 * RemoteMemory as 16 bytes, for private data or a Send: address u64, token u32, length u32, all big-endian.
 *
 * @param r - the remote memory (region.remote(), or what qp.bind() resolved with).
 * @returns 16 new bytes.
 * @throws {@link NdError} ERR_ND_INVALID_ARGUMENT when `r` is not a RemoteMemory (address a bigint of 64 bits,
 *   token a 32-bit integer, length an integer); ERR_ND_OUT_OF_RANGE when `r.length` exceeds 32 bits.
 */
export function encodeRemote(r: RemoteMemory): Uint8Array {
  const op = 'encodeRemote';
  checkRemote(r, op);
  if (r.length > 0xffffffff) throw misuse(ERR_ND_OUT_OF_RANGE, op, `remote.length ${r.length} does not fit in 32 bits`);
  const bytes = new Uint8Array(16);
  const view = new DataView(bytes.buffer);
  view.setBigUint64(0, r.address, false);
  view.setUint32(8, r.token >>> 0, false);
  view.setUint32(12, r.length, false);
  return bytes;
}

/**
 * The inverse of encodeRemote(); reads the first 16 bytes (private data may be padded).
 *
 * @param bytes - at least 16 bytes, as encodeRemote() wrote them (connector.privateData, a received message).
 * @returns the remote memory they describe.
 * @throws {@link NdError} ERR_ND_INVALID_ARGUMENT when `bytes` is not a Uint8Array; ERR_ND_OUT_OF_RANGE when it
 *   has fewer than 16 bytes.
 */
export function decodeRemote(bytes: Uint8Array): RemoteMemory {
  const op = 'decodeRemote';
  if (!(bytes instanceof Uint8Array)) throw misuse(ERR_ND_INVALID_ARGUMENT, op, `expected a Uint8Array, got ${describe(bytes)}`);
  if (bytes.byteLength < 16) throw misuse(ERR_ND_OUT_OF_RANGE, op, `need 16 bytes, got ${bytes.byteLength}`);
  const view = new DataView(bytes.buffer, bytes.byteOffset, 16);
  return { address: view.getBigUint64(0, false), token: view.getUint32(8, false), length: view.getUint32(12, false) };
}

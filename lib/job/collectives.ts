// Collectives over point-to-point messages, with the algorithms MPI libraries use (docs/job.md):
//   barrier    dissemination: ceil(log2 n) rounds, round k sends to rank+2^k and hears from rank-2^k
//   broadcast  binomial tree (small); scatter from the root + ring allgather (large: van de Geijn)
//   allreduce  recursive doubling, non-powers of two folded in first (small); ring reduce-scatter + ring
//              allgather (large: each rank sends 2(n-1)/n of the data, whatever n)
//   alltoall   pairwise exchange: n-1 steps, step i sends to rank+i and hears from rank-i
//   gather, scatter, reduce  binomial trees (reduce: ring reduce-scatter + gather when large)
//   allgather  recursive doubling / Bruck (small), ring (large); reduceScatter  recursive halving / ring
// Every call of a collective takes a fresh tag, the same on every rank as long as every rank calls the same
// collectives in the same order (MPI's rule too).

import type { MemoryRegion, RemoteMemory, Segment } from '../index.js';

export interface Transport {
  readonly rank: number;
  readonly size: number;
  send(peer: number, tag: number, data: Uint8Array): Promise<void>;
  recv(peer: number, tag: number): Promise<Uint8Array>;
  /** RDMA, for the zero-copy large allreduce (ringAllreduceRdma); a transport without it uses the messages. */
  rdma?: RdmaOps;
}

/** What the zero-copy path needs of the job: memory registration and an RDMA Write on the queue pair to a peer. */
export interface RdmaOps {
  /**
   * The caller's bytes registered for the call (remote write: the peers' Writes land in them). Memory that cannot
   * be registered (a SharedArrayBuffer's, a resizable ArrayBuffer's, part of a pooled Buffer) comes back as a
   * scratch copy instead (`staged`): the same protocol on the wire whatever each rank passed.
   */
  register(bytes: Uint8Array): Promise<{ region: MemoryRegion; staged: boolean }>;
  /** A remote-writable region of at least `bytes`, the job's, for this call only; give it back with release(). */
  scratch(bytes: number): Promise<MemoryRegion>;
  release(region: MemoryRegion): void;
  /** Posts an RDMA Write at once (before any Send posted after this call on the same queue pair). */
  write(peer: number, local: Segment, remote: RemoteMemory, offset: number): Promise<unknown>;
}

export type ReduceOp = 'sum' | 'min' | 'max' | 'prod' | 'band' | 'bor' | 'bxor';
export const REDUCE_OPS: readonly ReduceOp[] = ['sum', 'min', 'max', 'prod', 'band', 'bor', 'bxor'];
/** The bitwise operations (MPI_BAND, MPI_BOR, MPI_BXOR: integer types only, MPI 4.1 §6.9.2). */
export const BITWISE_OPS: readonly ReduceOp[] = ['band', 'bor', 'bxor'];

export type NumericArray =
  | Int8Array
  | Uint8Array
  | Uint8ClampedArray
  | Int16Array
  | Uint16Array
  | Int32Array
  | Uint32Array
  | Float32Array
  | Float64Array
  | BigInt64Array
  | BigUint64Array;

/** Bytes above which the large-message algorithms are used (broadcast, reduceScatter's choice). */
export const SMALL_BYTES = 16 * 1024;

/**
 * Bytes above which allreduce and reduce use the ring (reduce-scatter, then allgather or gather) instead of a
 * tree of whole-array exchanges. The ring sends less (2(n-1)/n of the data per rank against log2(n) times all
 * of it) but takes 2(n-1) steps, each an RDMA Write and a Send that the next rank waits for, against ceil(log2 n)
 * (+2 when n is not a power of two). Below this size the steps cost more than the bytes they save: with 4 ranks
 * on one host the ring took 2-3x as long as recursive doubling at 32 and 64 KiB, the same at 128 KiB, and less
 * from 256 KiB (docs/job.md, "The allreduce switch"). MPICH switches at 2 KiB (MPIR_CVAR_ALLREDUCE_SHORT_MSG_SIZE),
 * where a step costs a few microseconds.
 */
export const RING_BYTES = 128 * 1024;

export function bytesOf(a: ArrayBufferView): Uint8Array {
  return new Uint8Array(a.buffer, a.byteOffset, a.byteLength);
}

/** A view of `bytes` with the element type of `like`. */
function viewLike<T extends NumericArray>(like: T, bytes: Uint8Array): T {
  const Ctor = like.constructor as new (b: ArrayBufferLike, o: number, n: number) => T;
  const aligned = bytes.byteOffset % like.BYTES_PER_ELEMENT === 0 ? bytes : new Uint8Array(bytes);
  return new Ctor(aligned.buffer, aligned.byteOffset, aligned.byteLength / like.BYTES_PER_ELEMENT);
}

/** dst[i] = dst[i] op src[i]. */
export function combine(dst: NumericArray, src: NumericArray, op: ReduceOp): void {
  const d = dst as any;
  const s = src as any;
  const n = dst.length;
  switch (op) {
    case 'sum':
      for (let i = 0; i < n; i++) d[i] += s[i];
      break;
    case 'prod':
      for (let i = 0; i < n; i++) d[i] *= s[i];
      break;
    case 'min':
      for (let i = 0; i < n; i++) if (s[i] < d[i]) d[i] = s[i];
      break;
    case 'max':
      for (let i = 0; i < n; i++) if (s[i] > d[i]) d[i] = s[i];
      break;
    case 'band':
      for (let i = 0; i < n; i++) d[i] &= s[i];
      break;
    case 'bor':
      for (let i = 0; i < n; i++) d[i] |= s[i];
      break;
    case 'bxor':
      for (let i = 0; i < n; i++) d[i] ^= s[i];
      break;
  }
}

const mod = (a: number, n: number) => ((a % n) + n) % n;

/** Element ranges of n near-equal chunks of `count` elements. */
function chunks(count: number, n: number): Array<[number, number]> {
  const out: Array<[number, number]> = [];
  const base = Math.floor(count / n);
  const extra = count % n;
  let at = 0;
  for (let i = 0; i < n; i++) {
    const len = base + (i < extra ? 1 : 0);
    out.push([at, at + len]);
    at += len;
  }
  return out;
}

/** Sends to one peer while receiving from another: the step of every ring and exchange. */
async function exchange(t: Transport, tag: number, to: number, data: Uint8Array, from: number): Promise<Uint8Array> {
  const [, got] = await Promise.all([t.send(to, tag, data), t.recv(from, tag)]);
  return got;
}

export async function barrier(t: Transport, tag: number): Promise<void> {
  const empty = new Uint8Array(0);
  for (let k = 1; k < t.size; k <<= 1) await exchange(t, tag, mod(t.rank + k, t.size), empty, mod(t.rank - k, t.size));
}

export async function broadcast(t: Transport, tag: number, data: NumericArray, root: number): Promise<void> {
  const { size } = t;
  if (size === 1) return;
  const bytes = bytesOf(data);
  if (bytes.byteLength <= SMALL_BYTES || data.length < size) return binomialBroadcast(t, tag, bytes, root);
  if (t.rdma !== undefined) return scatterAllgatherRdma(t, t.rdma, tag, data, root);
  return scatterAllgather(t, tag, data, root);
}

async function binomialBroadcast(t: Transport, tag: number, bytes: Uint8Array, root: number): Promise<void> {
  const { rank, size } = t;
  const vr = mod(rank - root, size);
  let mask = 1;
  while (mask < size) {
    if (vr & mask) {
      const got = await t.recv(mod(vr - mask + root, size), tag);
      bytes.set(got.subarray(0, bytes.byteLength));
      break;
    }
    mask <<= 1;
  }
  const sends: Array<Promise<void>> = [];
  for (mask >>= 1; mask > 0; mask >>= 1) {
    if (vr + mask < size) sends.push(t.send(mod(vr + mask + root, size), tag, bytes));
  }
  await Promise.all(sends);
}

async function scatterAllgather(t: Transport, tag: number, data: NumericArray, root: number): Promise<void> {
  const { rank, size } = t;
  const E = data.BYTES_PER_ELEMENT;
  const parts = chunks(data.length, size);
  const bytes = bytesOf(data);
  const part = (i: number) => bytes.subarray(parts[i][0] * E, parts[i][1] * E);
  if (rank === root) {
    await Promise.all(parts.map((_, i) => (i === root ? Promise.resolve() : t.send(i, tag, part(i)))));
  } else {
    part(rank).set(await t.recv(root, tag));
  }
  await ringAllgather(t, tag, (i) => part(i));
}

/**
 * Runs `body` on the caller's array registered, or on a registered copy of it (copied back after): `work` is the
 * array the algorithm reads and combines, `region` the registered memory under it.
 */
async function onRegistered(rdma: RdmaOps, data: NumericArray, body: (work: NumericArray, region: MemoryRegion) => Promise<void>): Promise<void> {
  const bytes = bytesOf(data);
  const { region, staged } = await rdma.register(bytes);
  try {
    if (!staged) return await body(data, region);
    region.buffer.set(bytes);
    await body(viewLike(data, region.buffer.subarray(0, bytes.byteLength)), region);
    bytes.set(region.buffer.subarray(0, bytes.byteLength));
  } finally {
    if (staged) rdma.release(region);
    else await region.deregister().catch(() => undefined);
  }
}

/** A rank's registered array, for the peers that write into it: address and token. */
function cardOf(region: MemoryRegion): Uint8Array {
  const card = new Uint8Array(12);
  const v = new DataView(card.buffer);
  v.setBigUint64(0, region.address);
  v.setUint32(8, region.remoteToken);
  return card;
}

function remoteOf(card: Uint8Array, length: number): RemoteMemory {
  const v = new DataView(card.buffer, card.byteOffset, card.byteLength);
  return { address: v.getBigUint64(0), token: v.getUint32(8), length };
}

/**
 * Where a ring collective over `data` sends and receives, for the RDMA variants: this rank's neighbours, the
 * element ranges of the size chunks, and chunk i's byte offset and length in the array.
 */
function ringLayout(t: Transport, data: NumericArray) {
  const { rank, size } = t;
  const parts = chunks(data.length, size);
  const E = data.BYTES_PER_ELEMENT;
  return {
    rank,
    size,
    next: mod(rank + 1, size),
    prev: mod(rank - 1, size),
    parts,
    bytes: bytesOf(data),
    at: (i: number) => parts[i][0] * E,
    len: (i: number) => (parts[i][1] - parts[i][0]) * E,
  };
}

/**
 * The large broadcast without copies through the slots (van de Geijn's scatter + ring allgather by RDMA Write):
 * every rank registers the caller's array and sends its card to the rank before it and to the root. The root
 * Writes chunk i straight into rank i's array, then an empty message with the call's tag (delivered after the
 * Write is placed, RFC 5040 §5.5); then each step of the ring allgather Writes the chunk a rank got last into the
 * next rank's array. Every chunk slot of a rank is written once (the root's: again, with the bytes it holds), a
 * rank forwards a chunk only after its message said it landed, and returns only after every message to it
 * arrived.
 */
async function scatterAllgatherRdma(t: Transport, rdma: RdmaOps, tag: number, data: NumericArray, root: number): Promise<void> {
  const { rank, size, next, prev, parts, bytes, at, len } = ringLayout(t, data);
  await onRegistered(rdma, data, async (_work, mine) => {
    const empty = new Uint8Array(0);
    const card = cardOf(mine);
    const toRoot = rank !== root && prev !== root;
    const fromOthers = rank === root ? Array.from({ length: size }, (_, i) => i).filter((i) => i !== root && i !== next) : [];
    const [nextCard, ...others] = await Promise.all([
      t.recv(next, tag),
      ...fromOthers.map((i) => t.recv(i, tag)),
      t.send(prev, tag, card),
      toRoot ? t.send(root, tag, card) : undefined,
    ]);
    const toNext = remoteOf(nextCard as Uint8Array, bytes.byteLength);
    const write = (to: number, c: number, remote: RemoteMemory) => Promise.all([rdma.write(to, mine.slice(at(c), len(c)), remote, at(c)), t.send(to, tag, empty)]);
    if (rank === root) {
      const cards = new Map<number, RemoteMemory>(fromOthers.map((i, k) => [i, remoteOf(others[k] as Uint8Array, bytes.byteLength)]));
      if (next !== root) cards.set(next, toNext);
      await Promise.all([...cards].map(([i, remote]) => write(i, i, remote)));
    } else {
      await t.recv(root, tag); // my chunk has landed
    }
    for (let k = 0; k < size - 1; k++) {
      await Promise.all([write(next, mod(rank - k, size), toNext), t.recv(prev, tag)]);
    }
  });
}

/** Ring allgather: rank r starts with chunk r (or the one `start` names) and ends with all of them. */
async function ringAllgather(t: Transport, tag: number, part: (i: number) => Uint8Array, start = t.rank): Promise<void> {
  const { rank, size } = t;
  const next = mod(rank + 1, size);
  const prev = mod(rank - 1, size);
  for (let k = 0; k < size - 1; k++) {
    const out = mod(start - k, size);
    const inn = mod(start - k - 1, size);
    part(inn).set(await exchange(t, tag, next, part(out), prev));
  }
}

export async function allreduce(t: Transport, tag: number, data: NumericArray, op: ReduceOp): Promise<void> {
  if (t.size === 1) return;
  if (data.byteLength <= RING_BYTES || data.length < t.size) return recursiveDoubling(t, tag, data, op);
  if (t.rdma !== undefined) return ringAllreduceRdma(t, t.rdma, tag, data, op);
  return ringAllreduce(t, tag, data, op);
}

async function recursiveDoubling(t: Transport, tag: number, data: NumericArray, op: ReduceOp): Promise<void> {
  const { rank, size } = t;
  const bytes = bytesOf(data);
  let p2 = 1;
  while (p2 * 2 <= size) p2 *= 2;
  const rem = size - p2;
  // Fold: among the first 2*rem ranks, each even one hands its data to the odd one after it and sits out.
  let vr: number;
  if (rank < 2 * rem) {
    if (rank % 2 === 0) {
      await t.send(rank + 1, tag, bytes);
      bytes.set(await t.recv(rank + 1, tag));
      return;
    }
    combine(data, viewLike(data, await t.recv(rank - 1, tag)), op);
    vr = rank >> 1;
  } else {
    vr = rank - rem;
  }
  const real = (v: number) => (v < rem ? v * 2 + 1 : v + rem);
  for (let mask = 1; mask < p2; mask <<= 1) {
    const partner = real(vr ^ mask);
    const got = await exchange(t, tag, partner, bytes, partner);
    // The lower rank's data first on both sides: every rank combines the same two operands in the same order.
    if (vr & mask) {
      const mine = viewLike(data, new Uint8Array(bytes));
      data.set(viewLike(data, got) as any);
      combine(data, mine, op);
    } else {
      combine(data, viewLike(data, got), op);
    }
  }
  if (rank < 2 * rem) await t.send(rank - 1, tag, bytes);
}

async function ringAllreduce(t: Transport, tag: number, data: NumericArray, op: ReduceOp): Promise<void> {
  const { rank, size } = t;
  const next = mod(rank + 1, size);
  const prev = mod(rank - 1, size);
  const parts = chunks(data.length, size);
  const E = data.BYTES_PER_ELEMENT;
  const bytes = bytesOf(data);
  const part = (i: number) => bytes.subarray(parts[i][0] * E, parts[i][1] * E);
  const typed = (i: number) => data.subarray(parts[i][0], parts[i][1]) as NumericArray;
  // Reduce-scatter: after n-1 steps rank r holds chunk r+1 reduced over every rank.
  for (let k = 0; k < size - 1; k++) {
    const out = mod(rank - k, size);
    const inn = mod(rank - k - 1, size);
    const got = await exchange(t, tag, next, part(out), prev);
    combine(typed(inn), viewLike(data, got), op);
  }
  await ringAllgather(t, tag, part, mod(rank + 1, size));
}

/**
 * The ring allreduce without copies through the channel's slots: every rank registers the caller's array and
 * takes a scratch region, and tells the rank before it where both are. Reduce-scatter step: RDMA-Write my chunk
 * into the next rank's scratch, then an empty message with the call's tag; the previous rank's chunk has landed
 * in my scratch when its message arrives (a Send is delivered only after the Writes posted before it on the
 * same queue pair are placed: RFC 5040 §5.5), and is combined into the array from there. Allgather step: the
 * Write goes straight into the next rank's array. Every step awaits its own Write's local completion, so no rank
 * overwrites a chunk that its neighbour is still sending from (see docs/job.md).
 */
async function ringAllreduceRdma(t: Transport, rdma: RdmaOps, tag: number, data: NumericArray, op: ReduceOp): Promise<void> {
  const { rank, size, next, prev, parts, bytes, at, len } = ringLayout(t, data);
  await onRegistered(rdma, data, async (work, mine) => {
    const typed = (i: number) => work.subarray(parts[i][0], parts[i][1]) as NumericArray;
    const scratch = await rdma.scratch(bytes.byteLength);
    try {
      await ringSteps(typed, mine, scratch);
    } finally {
      rdma.release(scratch);
    }
  });

  async function ringSteps(typed: (i: number) => NumericArray, mine: MemoryRegion, scratch: MemoryRegion): Promise<void> {
    const card = new Uint8Array(24);
    const v = new DataView(card.buffer);
    v.setBigUint64(0, mine.address);
    v.setUint32(8, mine.remoteToken);
    v.setBigUint64(12, scratch.address);
    v.setUint32(20, scratch.remoteToken);
    const theirs = new DataView((await exchange(t, tag, prev, card, next)).slice().buffer);
    const nextData: RemoteMemory = { address: theirs.getBigUint64(0), token: theirs.getUint32(8), length: bytes.byteLength };
    const nextScratch: RemoteMemory = { address: theirs.getBigUint64(12), token: theirs.getUint32(20), length: bytes.byteLength };
    const empty = new Uint8Array(0);
    const step = (out: number, into: RemoteMemory) =>
      Promise.all([rdma.write(next, mine.slice(at(out), len(out)), into, at(out)), t.send(next, tag, empty), t.recv(prev, tag)]);
    for (let k = 0; k < size - 1; k++) {
      const inn = mod(rank - k - 1, size);
      await step(mod(rank - k, size), nextScratch);
      combine(typed(inn), viewLike(data, scratch.buffer.subarray(at(inn), at(inn) + len(inn))), op);
    }
    for (let k = 0; k < size - 1; k++) await step(mod(rank + 1 - k, size), nextData);
  }
}

export async function alltoall(t: Transport, tag: number, send: Uint8Array, recv: Uint8Array): Promise<void> {
  const { rank, size } = t;
  const block = send.byteLength / size;
  const at = (b: Uint8Array, i: number) => b.subarray(i * block, (i + 1) * block);
  at(recv, rank).set(at(send, rank));
  for (let i = 1; i < size; i++) {
    const to = mod(rank + i, size);
    const from = mod(rank - i, size);
    at(recv, from).set(await exchange(t, tag, to, at(send, to), from));
  }
}

/**
 * Every rank's `mine` (the same byte length everywhere), at block r of the result on the root (null elsewhere).
 * Binomial tree, as MPICH's MPIR_Gather_intra_binomial: in ranks relative to the root, rank v receives the blocks
 * of the subtrees under v+1, v+2, v+4... (each already contiguous, in relative order) and sends what it holds to
 * v minus its lowest set bit; ceil(log2 n) rounds.
 */
export async function gather(t: Transport, tag: number, mine: Uint8Array, root: number): Promise<Uint8Array | null> {
  const { rank, size } = t;
  const B = mine.byteLength;
  const vr = mod(rank - root, size);
  const extent = Math.min(vr === 0 ? size : vr & -vr, size - vr); // blocks of v's subtree, v's own included
  const buf = new Uint8Array(extent * B);
  buf.set(mine);
  const children: number[] = [];
  let mask = 1;
  for (; mask < size && (vr & mask) === 0; mask <<= 1) if (vr + mask < size) children.push(mask);
  const got = await Promise.all(children.map((m) => t.recv(mod(vr + m + root, size), tag)));
  children.forEach((m, i) => buf.set(got[i].subarray(0, buf.byteLength - m * B), m * B));
  if (vr !== 0) {
    await t.send(mod(vr - mask + root, size), tag, buf);
    return null;
  }
  // The root holds the blocks in relative order: block v is rank v+root's.
  const out = new Uint8Array(size * B);
  for (let v = 0; v < size; v++) out.set(buf.subarray(v * B, (v + 1) * B), mod(v + root, size) * B);
  return out;
}

/**
 * Every rank's `mine` at block r of `all` on every rank (block r of `all` holds rank r's already). Recursive
 * doubling for a power-of-two number of ranks and small totals (log2 n rounds, doubling the data each time);
 * Bruck's algorithm for other small cases (ceil(log2 n) rounds); the ring for large totals (n-1 steps, each
 * rank sending (n-1)/n of the total, bandwidth-optimal). MPICH chooses the same way (MPIR_Allgather_intra_*).
 */
export async function allgather(t: Transport, tag: number, all: Uint8Array, block: number): Promise<void> {
  const { rank, size } = t;
  if (size === 1) return;
  const part = (i: number, n = 1) => all.subarray(i * block, (i + n) * block);
  if (all.byteLength > LARGE_ALLGATHER_BYTES) return ringAllgather(t, tag, (i) => part(i));
  if ((size & (size - 1)) === 0) {
    for (let mask = 1; mask < size; mask <<= 1) {
      const partner = rank ^ mask;
      const mineAt = rank & ~(mask - 1);
      const theirsAt = partner & ~(mask - 1);
      part(theirsAt, mask).set(await exchange(t, tag, partner, part(mineAt, mask), partner));
    }
    return;
  }
  // Bruck: tmp block i holds rank (rank+i)'s; round k sends the first min(k, n-k) blocks to rank-k.
  const tmp = new Uint8Array(size * block);
  tmp.set(part(rank));
  for (let k = 1; k < size; k <<= 1) {
    const n = Math.min(k, size - k);
    const got = await exchange(t, tag, mod(rank - k, size), tmp.subarray(0, n * block), mod(rank + k, size));
    tmp.set(got.subarray(0, n * block), k * block);
  }
  for (let i = 1; i < size; i++) part(mod(rank + i, size)).set(tmp.subarray(i * block, (i + 1) * block));
}

/** Above this many bytes in all, allgather uses the ring. */
export const LARGE_ALLGATHER_BYTES = 256 * 1024;

/**
 * `data` combined element-wise over every rank, into `data` on the root (other ranks' `data` is left as it was).
 * Small: binomial tree (MPICH's MPIR_Reduce_intra_binomial), ceil(log2 n) rounds. Large: a ring reduce-scatter,
 * then every rank sends its reduced chunk to the root (Rabenseifner's reduce-scatter + gather, MPICH's
 * MPIR_Reduce_intra_reduce_scatter_gather, with the ring for the first half): each rank sends about 2/n of the
 * data per step rather than all of it up a tree.
 */
export async function reduce(t: Transport, tag: number, data: NumericArray, op: ReduceOp, root: number): Promise<void> {
  const { rank, size } = t;
  if (size === 1) return;
  const work = rank === root ? data : (data.slice() as NumericArray);
  if (data.byteLength > RING_BYTES && data.length >= size) {
    const parts = chunks(data.length, size);
    await ringReduceScatter(t, tag, work, op, parts);
    const E = data.BYTES_PER_ELEMENT;
    const bytes = bytesOf(work);
    const part = (i: number) => bytes.subarray(parts[i][0] * E, parts[i][1] * E);
    if (rank !== root) return t.send(root, tag, part(rank));
    const others = Array.from({ length: size }, (_, i) => i).filter((i) => i !== root);
    const got = await Promise.all(others.map((i) => t.recv(i, tag)));
    others.forEach((i, k) => part(i).set(got[k].subarray(0, part(i).byteLength)));
    return;
  }
  const vr = mod(rank - root, size);
  let mask = 1;
  const children: number[] = [];
  for (; mask < size && (vr & mask) === 0; mask <<= 1) if (vr + mask < size) children.push(mask);
  const got = await Promise.all(children.map((m) => t.recv(mod(vr + m + root, size), tag)));
  for (const g of got) combine(work, viewLike(work, g), op);
  if (vr !== 0) await t.send(mod(vr - mask + root, size), tag, bytesOf(work));
}

/**
 * Ring reduce-scatter over `work` cut into `parts` (element ranges): after n-1 steps rank r holds chunk r
 * combined over every rank; each step sends one chunk to the next rank and combines the one from the previous.
 */
async function ringReduceScatter(t: Transport, tag: number, work: NumericArray, op: ReduceOp, parts: Array<[number, number]>): Promise<void> {
  const { rank, size } = t;
  const E = work.BYTES_PER_ELEMENT;
  const bytes = bytesOf(work);
  const part = (i: number) => bytes.subarray(parts[i][0] * E, parts[i][1] * E);
  const typed = (i: number) => work.subarray(parts[i][0], parts[i][1]) as NumericArray;
  const next = mod(rank + 1, size);
  const prev = mod(rank - 1, size);
  for (let k = 0; k < size - 1; k++) {
    const out = mod(rank - k - 1, size);
    const inn = mod(rank - k - 2, size);
    combine(typed(inn), viewLike(work, await exchange(t, tag, next, part(out), prev)), op);
  }
}

/**
 * Block r of `data` (n equal blocks) combined over every rank, into `out` (MPI_Reduce_scatter_block). Recursive
 * halving for a power-of-two number of ranks and small data (MPICH's choice for commutative operations: log2 n
 * rounds, halving the data each time); the ring reduce-scatter otherwise. `data` is not changed.
 */
export async function reduceScatter(t: Transport, tag: number, data: NumericArray, out: NumericArray, op: ReduceOp): Promise<void> {
  const { rank, size } = t;
  const n = out.length;
  const work = data.slice() as NumericArray;
  if (size > 1 && (size & (size - 1)) === 0 && data.byteLength <= SMALL_BYTES * 4) {
    const E = work.BYTES_PER_ELEMENT;
    const bytes = bytesOf(work);
    let lo = 0;
    let hi = size;
    for (let mask = size >> 1; mask >= 1; mask >>= 1) {
      const mid = (lo + hi) >> 1;
      const [keepLo, keepHi, sendLo, sendHi] = rank & mask ? [mid, hi, lo, mid] : [lo, mid, mid, hi];
      const partner = rank ^ mask;
      const got = await exchange(t, tag, partner, bytes.subarray(sendLo * n * E, sendHi * n * E), partner);
      combine(work.subarray(keepLo * n, keepHi * n) as NumericArray, viewLike(work, got), op);
      [lo, hi] = [keepLo, keepHi];
    }
  } else if (size > 1) {
    await ringReduceScatter(t, tag, work, op, Array.from({ length: size }, (_, i) => [i * n, (i + 1) * n] as [number, number]));
  }
  (out as any).set(work.subarray(rank * n, (rank + 1) * n));
}

/**
 * Block r of the root's `send` (n equal blocks) into `recv` on rank r. Binomial tree, as MPICH's
 * MPIR_Scatter_intra_binomial: in ranks relative to the root, rank v receives the blocks of its whole subtree from
 * v minus its lowest set bit and passes each child v+2^k its subtree's share; ceil(log2 n) rounds.
 */
export async function scatter(t: Transport, tag: number, send: Uint8Array | null, recv: Uint8Array, root: number): Promise<void> {
  const { rank, size } = t;
  const B = recv.byteLength;
  const vr = mod(rank - root, size);
  let tmp: Uint8Array;
  let mask = 1;
  while (mask < size && (vr & mask) === 0) mask <<= 1;
  if (vr === 0) {
    // Relative order: block v is for rank v+root.
    tmp = new Uint8Array(size * B);
    for (let v = 0; v < size; v++) tmp.set(send!.subarray(mod(v + root, size) * B, (mod(v + root, size) + 1) * B), v * B);
  } else {
    tmp = await t.recv(mod(vr - mask + root, size), tag);
  }
  const sends: Array<Promise<void>> = [];
  for (mask >>= 1; mask > 0; mask >>= 1) {
    if (vr + mask < size) sends.push(t.send(mod(vr + mask + root, size), tag, tmp.subarray(mask * B, Math.min(2 * mask, size - vr) * B)));
  }
  recv.set(tmp.subarray(0, B));
  await Promise.all(sends);
}

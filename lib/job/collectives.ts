// Collectives over point-to-point messages, with the algorithms MPI libraries use (docs/job.md):
//   barrier    dissemination: ceil(log2 n) rounds, round k sends to rank+2^k and hears from rank-2^k
//   broadcast  binomial tree (small); scatter from the root + ring allgather (large: van de Geijn)
//   allreduce  recursive doubling, non-powers of two folded in first (small); ring reduce-scatter + ring
//              allgather (large: each rank sends 2(n-1)/n of the data, whatever n)
//   alltoall   pairwise exchange: n-1 steps, step i sends to rank+i and hears from rank-i
// Every call of a collective takes a fresh tag, the same on every rank as long as every rank calls the same
// collectives in the same order (MPI's rule too).

export interface Transport {
  readonly rank: number;
  readonly size: number;
  send(peer: number, tag: number, data: Uint8Array): Promise<void>;
  recv(peer: number, tag: number): Promise<Uint8Array>;
}

export type ReduceOp = 'sum' | 'min' | 'max' | 'prod';
export const REDUCE_OPS: readonly ReduceOp[] = ['sum', 'min', 'max', 'prod'];

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

/** Bytes above which the large-message algorithms are used. */
export const SMALL_BYTES = 16 * 1024;

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
  if (data.byteLength <= SMALL_BYTES || data.length < t.size) return recursiveDoubling(t, tag, data, op);
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

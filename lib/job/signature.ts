// A call's signature: what a rank called, stamped on every data message it sends for the call (16 bytes of the
// channel header, lib/job/channel.ts), so that the receiver can tell whether both ranks called the same thing.
// MPI requires the ranks to agree on a collective's count, type signature, operation and root (MPI 4.1 §6.1,
// "the type signature ... must be equal"), and leaves the outcome of disagreeing undefined; here the receiver
// compares, and the job fails with ERR_ND_JOB_MISMATCH naming both calls (lib/job/job.ts, _mismatch).
//   u8 kind  u8 element type  u8 operation  u8 0  i32 root (-1: none)  f64 count (elements; exact below 2^53)

import type { NumericArray, ReduceOp } from './collectives.js';

export const KINDS = ['', 'barrier', 'broadcast', 'allreduce', 'alltoall', 'allocateWindow', 'close', 'gather', 'allgather', 'reduce', 'scatter', 'reduceScatter', 'send'] as const;
export type Kind = Exclude<(typeof KINDS)[number], ''>;

export const ELEMENT_TYPES = ['', 'Int8Array', 'Uint8Array', 'Uint8ClampedArray', 'Int16Array', 'Uint16Array', 'Int32Array', 'Uint32Array', 'Float32Array', 'Float64Array', 'BigInt64Array', 'BigUint64Array'] as const;

export const OPS: readonly ReduceOp[] = ['sum', 'prod', 'min', 'max', 'band', 'bor', 'bxor'];

const CTORS: Record<string, new (buffer: ArrayBufferLike, byteOffset: number, length: number) => NumericArray> = {
  Int8Array,
  Uint8Array,
  Uint8ClampedArray,
  Int16Array,
  Uint16Array,
  Int32Array,
  Uint32Array,
  Float32Array,
  Float64Array,
  BigInt64Array,
  BigUint64Array,
};

/** The element type's name of a typed array (its standard constructor's, also for a Buffer: Uint8Array). */
export function elementTypeOf(a: NumericArray): string {
  for (const name of ELEMENT_TYPES) if (name !== '' && a instanceof CTORS[name]) return name;
  return a.constructor.name;
}

export interface Signature {
  kind: Kind;
  /** The element type's name ('' for calls without data). */
  type: string;
  op: ReduceOp | '';
  /** The root (-1 for calls without one). */
  root: number;
  count: number;
}

export function encodeSignature(s: Signature): Uint8Array {
  const out = new Uint8Array(16);
  const v = new DataView(out.buffer);
  v.setUint8(0, KINDS.indexOf(s.kind));
  v.setUint8(1, Math.max(0, ELEMENT_TYPES.indexOf(s.type as (typeof ELEMENT_TYPES)[number])));
  v.setUint8(2, s.op === '' ? 0 : OPS.indexOf(s.op) + 1);
  v.setInt32(4, s.root, true);
  v.setFloat64(8, s.count, true);
  return out;
}

/** The signature in a header; null when it is not one (an unknown kind, type or operation). */
export function decodeSignature(b: Uint8Array): Signature | null {
  const v = new DataView(b.buffer, b.byteOffset, 16);
  const kind = KINDS[v.getUint8(0)];
  const type = ELEMENT_TYPES[v.getUint8(1)];
  const opIndex = v.getUint8(2);
  if (kind === undefined || kind === '' || type === undefined || opIndex > OPS.length) return null;
  return { kind, type, op: opIndex === 0 ? '' : OPS[opIndex - 1], root: v.getInt32(4, true), count: v.getFloat64(8, true) };
}

export function sameSignature(a: Uint8Array, b: Uint8Array): boolean {
  for (let i = 0; i < 16; i++) if (a[i] !== b[i]) return false;
  return true;
}

/** The call as the user wrote it: allreduce(Float64Array of 2, 'sum'), broadcast(Uint8Array of 65536, root 1). */
export function describe(s: Signature | null): string {
  if (s === null) return 'something this version does not know (a different netdirect version?)';
  const data = `${s.type} of ${s.count}`;
  const op = `'${s.op}'`;
  const root = `root ${s.root}`;
  switch (s.kind) {
    case 'barrier':
    case 'close':
    case 'allocateWindow':
      return `${s.kind}()`;
    case 'allreduce':
    case 'reduceScatter':
      return `${s.kind}(${data}, ${op})`;
    case 'reduce':
      return `reduce(${data}, ${op}, ${root})`;
    case 'broadcast':
    case 'gather':
      return `${s.kind}(${data}, ${root})`;
    case 'scatter':
      return `scatter(${s.type} of ${s.count} per rank, ${root})`;
    case 'alltoall':
    case 'allgather':
    case 'send':
      return `${s.kind}(${data})`;
  }
}

/** A typed array of the named element type over `bytes` (copied when they are not aligned for it). */
export function typedFrom(type: string, bytes: Uint8Array): NumericArray {
  const Ctor = CTORS[type] ?? Uint8Array;
  const E = (Ctor as unknown as { BYTES_PER_ELEMENT: number }).BYTES_PER_ELEMENT;
  const aligned = bytes.byteOffset % E === 0 ? bytes : new Uint8Array(bytes);
  return new Ctor(aligned.buffer, aligned.byteOffset, Math.floor(aligned.byteLength / E));
}

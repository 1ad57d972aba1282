// Argument checks shared by the class modules (and their message helper). A leaf module: it imports only
// errors.ts, which imports nothing from lib/, so the class modules can all use it without importing each other
// for it (test/import-cycles.test.ts keeps lib/ free of runtime import cycles).

import { constants as bufferConstants } from 'node:buffer';
import { ERR_ND_DETACHED, ERR_ND_INVALID_ARGUMENT, ERR_ND_OUT_OF_RANGE, misuse } from './errors.js';

/** SGE triples the adapter's scratch array holds; queue pairs are limited to this many SGEs per request. */
export const SCRATCH_SGES = 256;

/**
 * The longest Uint8Array this JavaScript engine makes (buffer.constants.MAX_LENGTH: 4 GiB in Node 20): the
 * largest region, since region.buffer is a Uint8Array over all of it.
 */
export const MAX_VIEW_LENGTH: number = bufferConstants.MAX_LENGTH;

/** A byte count for a message: "1 GiB", "4 KiB", "1.5 MiB", "100 bytes". */
export function formatBytes(n: number): string {
  const units = ['bytes', 'KiB', 'MiB', 'GiB', 'TiB', 'PiB'];
  let value = n;
  let unit = 0;
  while (value >= 1024 && unit < units.length - 1) {
    value /= 1024;
    unit++;
  }
  if (unit === 0) return `${n} bytes`;
  return `${Number.isInteger(value) ? value : value.toFixed(1)} ${units[unit]}`;
}

export function describe(value: unknown): string {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'an array';
  if (typeof value === 'object') return (value as object).constructor?.name ?? 'an object';
  if (typeof value === 'string') return JSON.stringify(value.length > 40 ? value.slice(0, 40) + '…' : value);
  return `${typeof value} ${String(value)}`;
}

export function isDetached(ab: ArrayBuffer, expectedLength: number): boolean {
  const detached = (ab as { detached?: boolean }).detached;
  return detached === true || ab.byteLength !== expectedLength;
}

/**
 * Is `ab` detached (transferred)? ArrayBuffer.prototype.detached where the engine has it (Node 22); before, a
 * detached buffer is the zero-length one a typed array cannot be built on.
 */
export function isDetachedBuffer(ab: ArrayBuffer): boolean {
  const detached = (ab as { detached?: boolean }).detached;
  if (detached !== undefined) return detached;
  if (ab.byteLength !== 0) return false;
  try {
    new Uint8Array(ab);
    return false;
  } catch {
    return true;
  }
}

/** Checks a buffer given to registerMemory() and returns the ArrayBuffer range to register. */
export function bufferRange(
  buffer: ArrayBuffer | ArrayBufferView,
  operation: string,
): { arrayBuffer: ArrayBuffer; byteOffset: number; byteLength: number } {
  let arrayBuffer: ArrayBuffer;
  let byteOffset = 0;
  let byteLength: number;
  if (buffer instanceof ArrayBuffer) {
    arrayBuffer = buffer;
    byteLength = buffer.byteLength;
  } else if (ArrayBuffer.isView(buffer)) {
    const backing = buffer.buffer;
    if (!(backing instanceof ArrayBuffer)) {
      throw misuse(
        ERR_ND_INVALID_ARGUMENT,
        operation,
        'a view of a SharedArrayBuffer cannot be registered: use a dedicated ArrayBuffer (new Uint8Array(n)) or allocateMemory(n)',
      );
    }
    if (Buffer.isBuffer(buffer) && buffer.byteLength !== backing.byteLength && !isDetachedBuffer(backing)) {
      // Buffer.from()/allocUnsafe() slices share Node's 8 KiB pool: registering one would expose and pin
      // unrelated neighbours to the peer. A Buffer that is part of a larger ArrayBuffer may be one of them.
      throw misuse(ERR_ND_INVALID_ARGUMENT, operation, partialBufferMessage(buffer, backing));
    }
    arrayBuffer = backing;
    byteOffset = buffer.byteOffset;
    byteLength = buffer.byteLength;
  } else if (typeof SharedArrayBuffer !== 'undefined' && (buffer as unknown) instanceof SharedArrayBuffer) {
    throw misuse(ERR_ND_INVALID_ARGUMENT, operation, 'a SharedArrayBuffer cannot be registered: use a dedicated ArrayBuffer or allocateMemory(n)');
  } else {
    throw misuse(ERR_ND_INVALID_ARGUMENT, operation, `buffer must be an ArrayBuffer or an ArrayBufferView, got ${describe(buffer)}`);
  }
  if (isDetachedBuffer(arrayBuffer)) {
    throw misuse(
      ERR_ND_DETACHED,
      operation,
      'the ArrayBuffer is detached: it was transferred (postMessage/structuredClone with transfer, ArrayBuffer.prototype.transfer) and has no memory any more; register the buffer it was transferred to, or a new one',
    );
  }
  if ((arrayBuffer as { resizable?: boolean }).resizable === true) {
    throw misuse(ERR_ND_INVALID_ARGUMENT, operation, 'a resizable ArrayBuffer cannot be registered: its memory may move when it grows');
  }
  if (byteLength === 0) {
    throw misuse(ERR_ND_INVALID_ARGUMENT, operation, 'cannot register zero bytes (ND refuses zero-length regions): register at least 1 byte');
  }
  return { arrayBuffer, byteOffset, byteLength };
}

/** Why a Buffer that covers only part of its ArrayBuffer is refused, and what to register instead. */
function partialBufferMessage(buffer: Buffer, backing: ArrayBuffer): string {
  const what = `this Buffer (${buffer.byteLength} bytes at offset ${buffer.byteOffset}) is a view of part of a ${backing.byteLength}-byte ArrayBuffer`;
  // The pool's ArrayBuffer is Buffer.poolSize bytes up to Node 24, 64 more since Node 26 (alignment): ask the pool itself.
  if (backing.byteLength === Buffer.poolSize || backing.byteLength === Buffer.allocUnsafe(1).buffer.byteLength) {
    return (
      `${what}, Node's shared Buffer pool (Buffer.from, Buffer.allocUnsafe and Buffer.concat use it for small buffers): ` +
      'registering it would expose and pin unrelated data to the peer; register a dedicated buffer instead: ' +
      'Buffer.alloc(n), new Uint8Array(n) or adapter.allocateMemory(n)'
    );
  }
  return (
    `${what} (from subarray()/slice()); a Buffer is registered only whole, as it may share memory with unrelated data: ` +
    `register the whole buffer and use region.slice(${buffer.byteOffset}, ${buffer.byteLength}) for this part, ` +
    'or pass a Uint8Array view (new Uint8Array(buf.buffer, offset, length)) if the rest of the ArrayBuffer is yours'
  );
}

export function checkIndex(value: unknown, name: string, operation: string): number {
  if (typeof value !== 'number' || !Number.isInteger(value)) {
    throw misuse(ERR_ND_INVALID_ARGUMENT, operation, `${name} must be an integer, got ${describe(value)}`);
  }
  if (value < 0) throw misuse(ERR_ND_OUT_OF_RANGE, operation, `${name} must not be negative, got ${value}`);
  return value;
}

/**
 * Checks that `options` is an object whose enumerable keys are all in `known`; an unknown key (a typo such as
 * `remotewrite`) is refused with the closest known name, instead of being ignored and silently changing what
 * the call does. `name` is how the message calls the object ('options', 'access', ...).
 */
export function checkOptions(options: unknown, operation: string, known?: readonly string[] | ReadonlySet<string>, name = 'options'): void {
  if (typeof options !== 'object' || options === null || Array.isArray(options)) {
    throw misuse(ERR_ND_INVALID_ARGUMENT, operation, `${name} must be an object, got ${describe(options)}`);
  }
  if (known === undefined) return;
  if (known instanceof Set) {
    // The request paths' sets (lib/queue-pair.ts): a hash look-up per key.
    for (const key in options) {
      if (!known.has(key)) throw unknownOption(key, operation, [...known], name);
    }
    return;
  }
  const list = known as readonly string[];
  for (const key in options) {
    if (!list.includes(key)) throw unknownOption(key, operation, list, name);
  }
}

function unknownOption(key: string, operation: string, known: readonly string[], name: string): Error {
  const near = closest(key, known);
  const hint = near === undefined ? `known ${name}: ${known.join(', ')}` : `did you mean '${near}'?`;
  const what = name === 'options' ? 'option' : `${name} option`;
  return misuse(ERR_ND_INVALID_ARGUMENT, operation, `unknown ${what} '${key}' (${hint})`);
}

/** The known name nearest to `key` (case-insensitive edit distance at most 1/3 of its length, at least 2), if any. */
export function closest(key: string, known: readonly string[]): string | undefined {
  const k = key.toLowerCase();
  let best: string | undefined;
  let bestDistance = Math.max(2, Math.floor(key.length / 3)) + 1;
  for (const candidate of known) {
    const d = editDistance(k, candidate.toLowerCase());
    if (d < bestDistance) {
      best = candidate;
      bestDistance = d;
    }
  }
  return best;
}

function editDistance(a: string, b: string): number {
  let previous = Array.from({ length: b.length + 1 }, (_, i) => i);
  for (let i = 1; i <= a.length; i++) {
    const row = [i];
    for (let j = 1; j <= b.length; j++) {
      row[j] = Math.min(previous[j] + 1, row[j - 1] + 1, previous[j - 1] + (a[i - 1] === b[j - 1] ? 0 : 1));
    }
    previous = row;
  }
  return previous[b.length];
}

/** An optional boolean option: undefined gives `fallback`; anything but true/false is refused ("yes" is not true). */
export function checkBoolean(value: unknown, name: string, operation: string, fallback: boolean): boolean {
  if (value === undefined) return fallback;
  if (typeof value !== 'boolean') throw misuse(ERR_ND_INVALID_ARGUMENT, operation, `${name} must be true or false, got ${describe(value)}`);
  return value;
}

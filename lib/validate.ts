// Argument checks shared by the class modules (and their message helper). A leaf module: it imports only
// errors.ts, which imports nothing from lib/, so the class modules can all use it without importing each other
// for it (test/import-cycles.test.ts keeps lib/ free of runtime import cycles).

import { ERR_ND_DETACHED, ERR_ND_INVALID_ARGUMENT, ERR_ND_OUT_OF_RANGE, misuse } from './errors.js';

/** SGE triples the adapter's scratch array holds; queue pairs are limited to this many SGEs per request. */
export const SCRATCH_SGES = 256;

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
    if (Buffer.isBuffer(buffer) && buffer.byteLength !== backing.byteLength) {
      // Buffer.from()/allocUnsafe() slices share Node's 8 KiB pool: registering one would expose and pin
      // unrelated neighbours to the peer.
      throw misuse(
        ERR_ND_INVALID_ARGUMENT,
        operation,
        `this Buffer (${buffer.byteLength} bytes) is a slice of a ${backing.byteLength}-byte shared pool; ` +
          'register a dedicated buffer instead: Buffer.alloc(n), new Uint8Array(n) or adapter.allocateMemory(n)',
      );
    }
    arrayBuffer = backing;
    byteOffset = buffer.byteOffset;
    byteLength = buffer.byteLength;
  } else if (typeof SharedArrayBuffer !== 'undefined' && (buffer as unknown) instanceof SharedArrayBuffer) {
    throw misuse(ERR_ND_INVALID_ARGUMENT, operation, 'a SharedArrayBuffer cannot be registered: use a dedicated ArrayBuffer or allocateMemory(n)');
  } else {
    throw misuse(ERR_ND_INVALID_ARGUMENT, operation, `buffer must be an ArrayBuffer or an ArrayBufferView, got ${describe(buffer)}`);
  }
  if ((arrayBuffer as { detached?: boolean }).detached === true) {
    throw misuse(ERR_ND_DETACHED, operation, 'the ArrayBuffer is detached (it was transferred)');
  }
  if ((arrayBuffer as { resizable?: boolean }).resizable === true) {
    throw misuse(ERR_ND_INVALID_ARGUMENT, operation, 'a resizable ArrayBuffer cannot be registered: its memory may move when it grows');
  }
  if (byteLength === 0) {
    throw misuse(
      arrayBuffer.byteLength === 0 && !(buffer instanceof ArrayBuffer) ? ERR_ND_DETACHED : ERR_ND_INVALID_ARGUMENT,
      operation,
      'cannot register zero bytes (ND refuses zero-length regions); a detached buffer also has length 0',
    );
  }
  return { arrayBuffer, byteOffset, byteLength };
}

export function checkIndex(value: unknown, name: string, operation: string): number {
  if (typeof value !== 'number' || !Number.isInteger(value)) {
    throw misuse(ERR_ND_INVALID_ARGUMENT, operation, `${name} must be an integer, got ${describe(value)}`);
  }
  if (value < 0) throw misuse(ERR_ND_OUT_OF_RANGE, operation, `${name} must not be negative, got ${value}`);
  return value;
}

export function checkOptions(options: unknown, operation: string): void {
  if (typeof options !== 'object' || options === null) {
    throw misuse(ERR_ND_INVALID_ARGUMENT, operation, `options must be an object, got ${describe(options)}`);
  }
}

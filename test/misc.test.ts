// Pure TypeScript parts: no addon, no provider.
import { describe, expect, it } from 'vitest';
import {
  ERR_ND_INVALID_ARGUMENT,
  ERR_ND_OUT_OF_RANGE,
  NdError,
  callerStack,
  errorFactory,
  ndStatusName,
  ndStatusValue,
  statusError,
} from '../lib/errors';
import { decodeRemote, encodeRemote } from '../lib/memory-region';
import { bufferRange } from '../lib/validate';
import { parseAddress } from '../lib/connector';
import { RequestTable } from '../lib/requests';
import { decodeAdapterFlags } from '../lib/adapter';

function codeOf(fn: () => unknown): string | undefined {
  try {
    fn();
  } catch (err) {
    expect(err).toBeInstanceOf(NdError);
    return (err as NdError).code;
  }
  return undefined;
}

describe('encodeRemote / decodeRemote', () => {
  it('uses 16 big-endian bytes: address u64, token u32, length u32', () => {
    const bytes = encodeRemote({ address: 0x0102030405060708n, token: 0x090a0b0c, length: 0x0d0e0f10 });
    expect([...bytes]).toEqual([1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16]);
    expect(decodeRemote(bytes)).toEqual({ address: 0x0102030405060708n, token: 0x090a0b0c, length: 0x0d0e0f10 });
  });

  it('round-trips extreme values and reads past padding', () => {
    const r = { address: 0xffffffffffffffffn, token: 0xffffffff, length: 0xffffffff };
    const padded = new Uint8Array(40);
    padded.set(encodeRemote(r), 0);
    expect(decodeRemote(padded)).toEqual(r);
    expect(decodeRemote(padded.subarray(0, 16))).toEqual(r);
    // A view at an offset of a larger buffer.
    const big = new Uint8Array(64);
    big.set(encodeRemote({ address: 5n, token: 6, length: 7 }), 33);
    expect(decodeRemote(big.subarray(33))).toEqual({ address: 5n, token: 6, length: 7 });
  });

  it('refuses bad input with ERR_ND_* codes', () => {
    expect(codeOf(() => decodeRemote(new Uint8Array(15)))).toBe(ERR_ND_OUT_OF_RANGE);
    expect(codeOf(() => decodeRemote('x' as never))).toBe(ERR_ND_INVALID_ARGUMENT);
    expect(codeOf(() => encodeRemote({ address: 1 as never, token: 1, length: 1 }))).toBe(ERR_ND_INVALID_ARGUMENT);
    expect(codeOf(() => encodeRemote({ address: -1n, token: 1, length: 1 }))).toBe(ERR_ND_INVALID_ARGUMENT);
    expect(codeOf(() => encodeRemote({ address: 1n, token: 1, length: 2 ** 32 }))).toBe(ERR_ND_OUT_OF_RANGE);
  });
});

describe('parseAddress', () => {
  it('parses host:port, [v6]:port and objects', () => {
    expect(parseAddress('127.0.0.1:4791')).toEqual({ host: '127.0.0.1', port: 4791 });
    expect(parseAddress('[::1]:80')).toEqual({ host: '::1', port: 80 });
    expect(parseAddress('[fe80::1%eth0]:7')).toEqual({ host: 'fe80::1%eth0', port: 7 });
    expect(parseAddress('localhost:1')).toEqual({ host: 'localhost', port: 1 });
    expect(parseAddress({ host: '10.0.0.1', port: 0 })).toEqual({ host: '10.0.0.1', port: 0 });
    expect(parseAddress({ host: '[::1]', port: 9 })).toEqual({ host: '::1', port: 9 });
  });

  it('refuses malformed addresses', () => {
    expect(codeOf(() => parseAddress('::1:80'))).toBe(ERR_ND_INVALID_ARGUMENT);
    expect(codeOf(() => parseAddress('127.0.0.1'))).toBe(ERR_ND_INVALID_ARGUMENT);
    expect(codeOf(() => parseAddress('127.0.0.1:65536'))).toBe(ERR_ND_OUT_OF_RANGE);
    expect(codeOf(() => parseAddress({ host: 'a', port: -1 }))).toBe(ERR_ND_OUT_OF_RANGE);
    expect(codeOf(() => parseAddress({ host: 'a', port: 1.5 }))).toBe(ERR_ND_OUT_OF_RANGE);
    expect(codeOf(() => parseAddress({ host: '', port: 1 }))).toBe(ERR_ND_INVALID_ARGUMENT);
    expect(codeOf(() => parseAddress(42 as never))).toBe(ERR_ND_INVALID_ARGUMENT);
  });
});

describe('NdError and status names', () => {
  it('names ND statuses, signed or unsigned', () => {
    expect(ndStatusName(0)).toBe('ND_SUCCESS');
    expect(ndStatusName(0xc0000005)).toBe('ND_ACCESS_VIOLATION');
    expect(ndStatusName(0xc0000005 | 0)).toBe('ND_ACCESS_VIOLATION');
    expect(ndStatusName(0xc0000120)).toBe('ND_CANCELED');
    expect(ndStatusName(0x8000001a)).toBe('ND_NO_MORE_ENTRIES');
    expect(ndStatusName(0xc000020c)).toBe('STATUS_CONNECTION_DISCONNECTED');
    expect(ndStatusName(0xc0001234)).toBe('0xC0001234');
    expect(ndStatusValue('ND_REMOTE_ERROR')).toBe(0xc000013d);
  });

  it('carries code, unsigned status, operation and context', () => {
    const err = statusError(0xc0000005 | 0, 'write', '4096 bytes to remote 0x1000 token 0x00000007');
    expect(err).toBeInstanceOf(NdError);
    expect(err).toBeInstanceOf(Error);
    expect(err.code).toBe('ND_ACCESS_VIOLATION');
    expect(err.status).toBe(0xc0000005);
    expect(err.operation).toBe('write');
    expect(err.message).toMatch(/write failed: ND_ACCESS_VIOLATION \(0xC0000005\): 4096 bytes to remote 0x1000/);
    expect(err.isStatus).toBe(true);
  });

  it('the addon factory builds NdErrors', () => {
    const err = errorFactory('ND_INVALID_PARAMETER', 0xc000000d, 'createQueuePair', 'bad depth') as NdError;
    expect(err).toBeInstanceOf(NdError);
    expect([err.code, err.status, err.operation, err.message]).toEqual(['ND_INVALID_PARAMETER', 0xc000000d, 'createQueuePair', 'bad depth']);
    expect((errorFactory('', 0xc0000005, 'x', 'y') as NdError).code).toBe('ND_ACCESS_VIOLATION');
    const misuse = errorFactory('ERR_ND_WRONG_ADAPTER', 0, 'post', 'foreign') as NdError;
    expect([misuse.code, misuse.status, misuse.isStatus]).toEqual(['ERR_ND_WRONG_ADAPTER', 0, false]);
  });

  it('gives an error settled after an await the stack of the code that awaited it', async () => {
    async function apiMethod(): Promise<void> {
      try {
        await new Promise((_, reject) => setImmediate(() => reject(statusError(0xc0000120, 'receive'))));
      } catch (err) {
        throw callerStack(err as Error);
      }
    }
    async function startedHere(): Promise<void> {
      await apiMethod();
    }
    const err = await startedHere().then(() => undefined, (e: Error) => e);
    expect(err?.stack).toContain('NdError: receive failed: ND_CANCELED');
    expect(err?.stack).toContain('startedHere');
  });
});

describe('registration buffer checks', () => {
  it('accepts dedicated buffers and views of them', () => {
    const ab = new ArrayBuffer(64);
    expect(bufferRange(ab, 'registerMemory')).toEqual({ arrayBuffer: ab, byteOffset: 0, byteLength: 64 });
    expect(bufferRange(new Uint8Array(ab, 8, 16), 'registerMemory')).toMatchObject({ byteOffset: 8, byteLength: 16 });
    expect(bufferRange(Buffer.alloc(100), 'registerMemory').byteLength).toBe(100);
  });

  it('refuses pool slices, shared, resizable, detached and empty buffers', () => {
    const pooled = Buffer.from('pooled');
    expect(pooled.buffer.byteLength).toBeGreaterThan(pooled.byteLength);
    expect(codeOf(() => bufferRange(pooled, 'registerMemory'))).toBe(ERR_ND_INVALID_ARGUMENT);
    expect(codeOf(() => bufferRange(new SharedArrayBuffer(8) as never, 'registerMemory'))).toBe(ERR_ND_INVALID_ARGUMENT);
    expect(codeOf(() => bufferRange(new Uint8Array(new SharedArrayBuffer(8)), 'registerMemory'))).toBe(ERR_ND_INVALID_ARGUMENT);
    const resizable = new (ArrayBuffer as any)(8, { maxByteLength: 16 }) as ArrayBuffer;
    expect(codeOf(() => bufferRange(resizable, 'registerMemory'))).toBe(ERR_ND_INVALID_ARGUMENT);
    const detached = new ArrayBuffer(8);
    structuredClone(detached, { transfer: [detached] });
    expect(codeOf(() => bufferRange(detached, "registerMemory"))).toMatch(/^ERR_ND_/);
    expect(codeOf(() => bufferRange(new ArrayBuffer(0), 'registerMemory'))).toBe(ERR_ND_INVALID_ARGUMENT);
    expect(codeOf(() => bufferRange('abc' as never, 'registerMemory'))).toBe(ERR_ND_INVALID_ARGUMENT);
  });
});

describe('RequestTable', () => {
  it('hands out small reusable ids > 0', () => {
    const t = new RequestTable();
    const a = t.acquire(0, 'test', null);
    const b = t.acquire(0, 'test', null);
    expect([a.id, b.id]).toEqual([1, 2]);
    const bId = b.id;
    t.release(b);
    expect(t.get(bId)).toBeUndefined();
    const c = t.acquire(0, 'test', null);
    expect(c.id).toBe(bId);
    expect(t.size).toBe(2);
    expect(t.pending().map((e) => e.id).sort()).toEqual([1, 2]);
  });
});

describe('adapter flags', () => {
  it('decodes ND_ADAPTER_FLAG_* bits', () => {
    expect(decodeAdapterFlags(0x10105)).toEqual({
      value: 0x10105,
      inOrderDma: true,
      cqInterruptModeration: true,
      multiEngine: false,
      cqResize: true,
      loopbackConnections: true,
    });
  });
});

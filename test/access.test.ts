// Remote access is checked on every request: each violation fails the initiator's request with
// ND_ACCESS_VIOLATION, flushes the target's pending receives with ND_CANCELED, tears the connection down, and
// leaves both processes healthy (the next case connects again).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Adapter, CompletionQueue, Connector, MemoryRegion, QueuePair, RemoteMemory } from '../lib/index';
import { Peer, connectToPeer, ndError, skipWhereDeviceCannot, openLocal, startPeer } from './helpers';

let peer: Peer;
let adapter: Adapter;
let cq: CompletionQueue;
let address: { host: string; port: number };
let src: MemoryRegion;

beforeAll(async () => {
  peer = await startPeer();
  await peer.call('open');
  address = await peer.call('listen');
  await peer.call('register', { name: 'rx', size: 4096 });
  ({ adapter, cq } = await openLocal());
  src = await adapter.allocateMemory(64 * 1024);
});

afterAll(async () => {
  await adapter?.close();
  const exit = await peer?.stop();
  expect(exit?.signal ?? null).toBeNull();
});

/** A fresh connection; the peer has a receive ('guard') pending on it. */
async function connect(): Promise<{ qp: QueuePair; connector: Connector }> {
  return connectToPeer(adapter, cq, peer, address, [{ tag: 'guard', segs: [{ name: 'rx', offset: 0, length: 64 }] }]);
}

async function register(name: string, size: number, access: object): Promise<RemoteMemory> {
  return (await peer.call('register', { name, size, access })).remote;
}

/** The target flushed its receive, the connection is gone on this side too, and both processes still work. */
async function expectTornDown(qp: QueuePair, connector: Connector): Promise<void> {
  expect(await peer.call('wait', { tag: 'guard' })).toMatchObject({ ok: false, code: 'ND_CANCELED', status: 0xc0000120 });
  const after = await ndError(qp.send(src.slice(0, 8)));
  expect(after.code).toMatch(/^ND_(CANCELED|CONNECTION_INVALID|CONNECTION_ABORTED)$/);
  await connector.disconnected;
  expect(await peer.call('ping')).toMatchObject({ pong: true });
  await connector.close();
  await qp.close();
  expect(qp.outstanding).toEqual({ receive: 0, initiator: 0 });
  expect(src.inFlight).toBe(0);
}

async function expectViolation(request: Promise<unknown>, operation: string): Promise<void> {
  const err = await ndError(request);
  expect(err.code, err.message).toBe('ND_ACCESS_VIOLATION');
  expect(err.status).toBe(0xc0000005);
  expect(err.operation).toBe(operation);
  expect(err.message).toMatch(/remote 0x[0-9a-f]+ token 0x[0-9A-F]{8}/);
}

describe('remote access violations', () => {
  it('Write to a region registered without remoteWrite', async (ctx) => {
    await skipWhereDeviceCannot(ctx, 'remote-errors-at-initiator');
    const remote = await register('readonly', 4096, { remoteRead: true });
    const { qp, connector } = await connect();
    await expectViolation(qp.write(src.slice(0, 100), remote), 'write');
    await expectTornDown(qp, connector);
  });

  it('the failure, settled by a completion, points at the code that awaited the request', async (ctx) => {
    await skipWhereDeviceCannot(ctx, 'remote-errors-at-initiator');
    const remote = await register('readonly-stack', 4096, { remoteRead: true });
    const { qp, connector } = await connect();
    async function writesToReadOnlyMemory(): Promise<unknown> {
      return await qp.write(src.slice(0, 100), remote);
    }
    const err = await ndError(writesToReadOnlyMemory());
    expect(err.code).toBe('ND_ACCESS_VIOLATION');
    expect(err.stack).toContain('writesToReadOnlyMemory');
    await expectTornDown(qp, connector);
  });

  it('Read from a region registered without remoteRead', async (ctx) => {
    await skipWhereDeviceCannot(ctx, 'remote-errors-at-initiator');
    const remote = await register('writeonly', 4096, { remoteWrite: true });
    const { qp, connector } = await connect();
    await expectViolation(qp.read(src.slice(0, 100), remote), 'read');
    await expectTornDown(qp, connector);
  });

  it('Write one byte past the end of the region', async (ctx) => {
    await skipWhereDeviceCannot(ctx, 'remote-errors-at-initiator');
    const remote = await register('rw', 4096, { remoteRead: true, remoteWrite: true });
    const { qp, connector } = await connect();
    // The real descriptor is checked locally (ERR_ND_OUT_OF_RANGE); a forged one reaches the peer's checks.
    expect((await ndError(qp.write(src.slice(0, 4097), remote))).code).toBe('ERR_ND_OUT_OF_RANGE');
    await expectViolation(qp.write(src.slice(0, 4097), { ...remote, length: 4097 }), 'write');
    await expectTornDown(qp, connector);
  });

  it('Read one byte past the end of the region', async (ctx) => {
    await skipWhereDeviceCannot(ctx, 'remote-errors-at-initiator');
    const remote = await register('rw', 4096, { remoteRead: true, remoteWrite: true });
    const { qp, connector } = await connect();
    await expectViolation(qp.read(src.slice(0, 1), { ...remote, address: remote.address + 4096n, length: 1 }), 'read');
    await expectTornDown(qp, connector);
  });

  it('a wrong (forged) token', async (ctx) => {
    await skipWhereDeviceCannot(ctx, 'remote-errors-at-initiator');
    const remote = await register('rw', 4096, { remoteRead: true, remoteWrite: true });
    const { qp, connector } = await connect();
    await expectViolation(qp.write(src.slice(0, 16), { ...remote, token: (remote.token ^ 0x5a5a5a5a) >>> 0 }), 'write');
    await expectTornDown(qp, connector);
  });

  it('a token after deregister', async (ctx) => {
    await skipWhereDeviceCannot(ctx, 'remote-errors-at-initiator');
    const remote = await register('gone', 4096, { remoteRead: true, remoteWrite: true });
    await peer.call('deregister', { name: 'gone' });
    const { qp, connector } = await connect();
    await expectViolation(qp.write(src.slice(0, 16), remote), 'write');
    await expectTornDown(qp, connector);
  });

  it('a memory window: access within the bind works, after invalidate it fails', async (ctx) => {
    await skipWhereDeviceCannot(ctx, 'memory-windows', 'remote-errors-at-initiator');
    await register('windowed', 8192, {});
    const { qp, connector } = await connect();
    const window: RemoteMemory = await peer.call('bindWindow', { name: 'windowed', offset: 64, length: 1024, read: true, write: true });
    expect(window.length).toBe(1024);
    src.buffer.fill(0x42, 0, 100);
    await qp.write(src.slice(0, 100), window, { offset: 10 });
    await peer.call('fill', { name: 'windowed', segs: [], seed: 0 });
    const c = await qp.read(src.slice(200, 100), window, { offset: 10 });
    expect(c.status).toBe(0);
    expect(src.buffer.subarray(200, 300).every((b) => b === 0x42)).toBe(true);
    await peer.call('invalidateWindow');
    await expectViolation(qp.write(src.slice(0, 100), window), 'write');
    await expectTornDown(qp, connector);
  });

  it('a memory window grants only its range', async (ctx) => {
    await skipWhereDeviceCannot(ctx, 'memory-windows', 'remote-errors-at-initiator');
    await register('windowed', 8192, {});
    const { qp, connector } = await connect();
    const window: RemoteMemory = await peer.call('bindWindow', { name: 'windowed', offset: 64, length: 1024, read: true, write: false });
    expect((await qp.read(src.slice(0, 1024), window)).status).toBe(0);
    await expectViolation(qp.write(src.slice(0, 16), window), 'write');
    await expectTornDown(qp, connector);
  });
});

// Buffer lifetime: registered buffers survive GC, cannot be transferred away, and deregistration waits for the
// requests that use them.
import { spawnSync } from 'node:child_process';
import * as path from 'node:path';
import { Worker } from 'node:worker_threads';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Adapter, CompletionQueue, MemoryRegion, QueuePair, RemoteMemory } from '../lib/index';
import { MiB, Peer, connectToPeer, fixtures, isSettled, ndError, openLocal, root, startPeer } from './helpers';
// @ts-expect-error plain ESM helper shared with the peer process
import { checkSegments, fillSegments } from './fixtures/pattern.mjs';

describe('garbage collection', () => {
  it('keeps registered buffers alive with no JS reference left, and lets them go after deregistration', () => {
    const r = spawnSync(process.execPath, ['--expose-gc', path.join(fixtures, 'gc.mjs')], { cwd: root, encoding: 'utf8', timeout: 60_000 });
    expect(r.status, r.stderr).toBe(0);
    const result = JSON.parse(r.stdout.trim().split('\n').pop()!);
    expect(result).toEqual({ aliveWhileRegistered: true, dataIntact: true, bytesInBuffer: true, releasedAfterDeregister: true });
  });
});

describe('transfer of a registered ArrayBuffer', () => {
  it('does not detach it: the transfer fails (Node >= 21) or copies (Node 20); the region stays intact', async () => {
    const { adapter, cq } = await openLocal();
    try {
      const ab = new ArrayBuffer(4096);
      const mr = await adapter.registerMemory(ab);
      mr.buffer.fill(0x5c);
      const worker = new Worker('require("node:worker_threads").parentPort.on("message", (m) => { require("node:worker_threads").parentPort.postMessage(m.byteLength); })', { eval: true });
      let threw: unknown;
      try {
        worker.postMessage(ab, [ab]);
      } catch (err) {
        threw = err;
      }
      const major = Number(process.versions.node.split('.')[0]);
      if (major >= 21) {
        expect(threw).toBeInstanceOf(Error);
        expect((threw as Error).name).toBe('DataCloneError');
      } else {
        expect(threw).toBeUndefined();
        expect(await new Promise((r) => worker.once('message', r))).toBe(4096); // the worker got a copy
      }
      await worker.terminate();
      expect(() => structuredClone(ab, { transfer: [ab] })).not.toThrow(TypeError);
      expect(ab.byteLength).toBe(4096);
      expect(mr.buffer.byteLength).toBe(4096);
      expect(mr.buffer.every((b) => b === 0x5c)).toBe(true);
      // Still usable: a receive is accepted (and flushed by close) rather than refused as ERR_ND_DETACHED.
      const qp = adapter.createQueuePair({ receiveCq: cq });
      const pending = qp.receive(mr);
      pending.catch(() => {}); // handled now: close() rejects it before ndError() looks
      await qp.close();
      expect((await ndError(pending)).code).toBe('ND_CANCELED');
    } finally {
      await adapter.close();
    }
  });
});

describe('deregister while requests are in flight', () => {
  let peer: Peer;
  let adapter: Adapter;
  let cq: CompletionQueue;
  let qp: QueuePair;
  let remote: RemoteMemory;

  beforeAll(async () => {
    peer = await startPeer();
    await peer.call('open');
    const address = await peer.call('listen');
    remote = (await peer.call('register', { name: 'target', size: 8 * MiB, access: { remoteWrite: true } })).remote;
    ({ adapter, cq } = await openLocal());
    ({ qp } = await connectToPeer(adapter, cq, peer, address));
  });

  afterAll(async () => {
    await adapter?.close();
    await peer?.stop();
  });

  it('waits for the Writes that use the region, refuses new ones, and is idempotent', async () => {
    const mr: MemoryRegion = await adapter.allocateMemory(8 * MiB);
    fillSegments(mr.buffer, [{ offset: 0, length: 8 * MiB }], 4242);
    const order: string[] = [];
    const writes = [0, 1, 2].map((i) => qp.write(mr, remote).then((c) => (order.push(`write${i}`), c)));
    expect(mr.inFlight).toBe(3);
    const deregistering = mr.deregister();
    expect(mr.deregister()).toBe(deregistering);
    deregistering.then(() => order.push('deregister'));
    expect((await ndError(qp.write(mr, remote))).code).toBe('ERR_ND_CLOSED');
    expect(mr.registered).toBe(false);
    if (order.length < 3) expect(await isSettled(deregistering)).toBe(false);
    await Promise.all(writes);
    await deregistering;
    expect(order).toEqual(['write0', 'write1', 'write2', 'deregister']);
    expect(mr.inFlight).toBe(0);
    expect(await peer.call('check', { name: 'target', segs: [{ offset: 0, length: 8 * MiB }], seed: 4242 })).toBe(-1);
    expect(checkSegments(mr.buffer, [{ offset: 0, length: 8 * MiB }], 4242)).toBe(-1);
  });

  it('a region registered after one was deregistered (the native region is reused) moves its own bytes', async () => {
    const segs = [{ offset: 0, length: 64 * 1024 }];
    const first = await adapter.allocateMemory(64 * 1024);
    fillSegments(first.buffer, segs, 7);
    await qp.write(first, remote);
    await first.deregister();
    const second = await adapter.allocateMemory(64 * 1024);
    fillSegments(second.buffer, segs, 8);
    await qp.write(second, remote);
    expect(await peer.call('check', { name: 'target', segs, seed: 8 })).toBe(-1);
    expect((await ndError(qp.write(first, remote))).code).toBe('ERR_ND_CLOSED');
    expect(second.registered).toBe(true);
    await second.deregister();
  });
});

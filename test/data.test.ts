// Two processes, real data: Write, Read and Send/Receive of 0 B … 8 MiB at odd offsets with 1–4 SGEs, verified
// byte for byte (by the peer for what it received, locally for Reads); many outstanding requests; ordering.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Adapter, CompletionQueue, MemoryRegion, QueuePair, RemoteMemory, Segment } from '../lib/index';
import { MiB, Peer, connectToPeer, openLocal, startPeer } from './helpers';
// @ts-expect-error plain ESM helper shared with the peer process
import { checkSegments, fillSegments, layout, layoutSpan } from './fixtures/pattern.mjs';

type Seg = { offset: number; length: number };
const SIZES = [0, 1, 4095, 4096, 65537, MiB, 8 * MiB];
const SPAN = layoutSpan(8 * MiB, 4, 7) + 64;
const REMOTE_OFFSET = 7;
const SENTINEL = 0xee;

let peer: Peer;
let adapter: Adapter;
let cq: CompletionQueue;
let qp: QueuePair;
let src: MemoryRegion;
let target: RemoteMemory;
let seed = 1;

function segments(region: MemoryRegion, segs: Seg[]): Segment[] {
  return segs.map((s) => region.slice(s.offset, s.length));
}

/** Every byte of region outside segs (within the span the layout covers) still holds SENTINEL. */
function gapsIntact(region: MemoryRegion, segs: Seg[]): boolean {
  const end = segs.length ? segs[segs.length - 1].offset + segs[segs.length - 1].length : 0;
  let cursor = 0;
  for (const s of [...segs, { offset: end + 5, length: 0 }]) {
    for (let i = cursor; i < s.offset; i++) if (region.buffer[i] !== SENTINEL) return false;
    cursor = s.offset + s.length;
  }
  return true;
}

beforeAll(async () => {
  peer = await startPeer();
  await peer.call('open');
  const address = await peer.call('listen');
  ({ adapter, cq } = await openLocal());
  target = (await peer.call('register', { name: 'target', size: SPAN, access: { remoteRead: true, remoteWrite: true } })).remote;
  await peer.call('register', { name: 'rx', size: SPAN });
  await peer.call('register', { name: 'many', size: 256 * 8192 });
  src = await adapter.allocateMemory(SPAN);
  ({ qp } = await connectToPeer(adapter, cq, peer, address));
});

afterAll(async () => {
  await adapter?.close();
  const exit = await peer?.stop();
  expect(exit?.signal ?? null).toBeNull();
});

describe('RDMA Write: the peer sees every byte', () => {
  for (const size of SIZES) {
    it(`${size} bytes, 1-4 SGEs, odd offsets`, async () => {
      for (let n = 1; n <= 4; n++) {
        const s = seed++;
        const segs: Seg[] = layout(size, n, 3);
        fillSegments(src.buffer, segs, s);
        // Stale data must not pass: fill the target with other bytes, and a guard after it.
        await peer.call('fill', { name: 'target', segs: [{ offset: REMOTE_OFFSET, length: size }], seed: s + 100_000 });
        await peer.call('fill', { name: 'target', segs: [{ offset: REMOTE_OFFSET + size, length: 16 }], seed: 7 });
        const local = size === 0 && n === 1 ? null : segments(src, segs);
        const c = await qp.write(local, target, { offset: REMOTE_OFFSET });
        expect(c).toEqual({ type: 'write', status: 0, bytes: size });
        expect(await peer.call('check', { name: 'target', segs: [{ offset: REMOTE_OFFSET, length: size }], seed: s })).toBe(-1);
        expect(await peer.call('check', { name: 'target', segs: [{ offset: REMOTE_OFFSET + size, length: 16 }], seed: 7 })).toBe(-1);
      }
    });
  }
});

describe('RDMA Read: every byte of the peer lands locally', () => {
  for (const size of SIZES) {
    it(`${size} bytes, 1-4 SGEs, odd offsets`, async () => {
      for (let n = 1; n <= Math.min(4, qp.maxReadSge); n++) {
        const s = seed++;
        const segs: Seg[] = layout(size, n, 3);
        await peer.call('fill', { name: 'target', segs: [{ offset: REMOTE_OFFSET, length: size }], seed: s });
        src.buffer.fill(SENTINEL, 0, layoutSpan(size, n, 3));
        const c = await qp.read(segments(src, segs), target, { offset: REMOTE_OFFSET });
        expect(c).toEqual({ type: 'read', status: 0, bytes: size });
        expect(checkSegments(src.buffer, segs, s)).toBe(-1);
        expect(gapsIntact(src, segs)).toBe(true);
      }
    });
  }
});

describe('Send/Receive: the peer receives every byte into its scattered receive', () => {
  for (const size of SIZES) {
    it(`${size} bytes, 1-4 SGEs on both sides, odd offsets`, async () => {
      for (let n = 1; n <= 4; n++) {
        const s = seed++;
        const sendSegs: Seg[] = layout(size, n, 3);
        const recvSegs: Seg[] = layout(size, n, 5);
        fillSegments(src.buffer, sendSegs, s);
        await peer.call('fill', { name: 'rx', segs: recvSegs, seed: s + 100_000 });
        const tag = `recv-${size}-${n}`;
        await peer.call('receive', { tag, segs: recvSegs.map((g) => ({ name: 'rx', ...g })) });
        const c = await qp.send(size === 0 ? null : segments(src, sendSegs));
        expect(c).toEqual({ type: 'send', status: 0, bytes: size });
        const r = await peer.call('wait', { tag });
        expect(r).toMatchObject({ ok: true, type: 'receive', bytes: size });
        expect(await peer.call('check', { name: 'rx', segs: recvSegs, seed: s })).toBe(-1);
      }
    });
  }
});

describe('many outstanding requests', () => {
  it('200 Writes posted at once all land', async () => {
    const count = 200;
    const size = 4099;
    const base = seed;
    seed += count;
    const posts = [];
    for (let i = 0; i < count; i++) {
      const segs = [{ offset: i * 8192 + 1, length: size }];
      fillSegments(src.buffer, segs, base + i);
      posts.push(qp.write(src.slice(segs[0].offset, size), target, { offset: i * 8192 + 3 }));
    }
    expect(qp.outstanding.initiator).toBe(count);
    const done = await Promise.all(posts);
    expect(done.every((c) => c.status === 0 && c.bytes === size)).toBe(true);
    for (let i = 0; i < count; i++) {
      expect(await peer.call('check', { name: 'target', segs: [{ offset: i * 8192 + 3, length: size }], seed: base + i })).toBe(-1);
    }
  });

  it('200 Sends at once match 200 receives in order', async () => {
    const count = 200;
    const size = 1000;
    const base = seed;
    seed += count;
    for (let i = 0; i < count; i++) {
      await peer.call('receive', { tag: `many-${i}`, segs: [{ name: 'many', offset: i * 8192 + 1, length: 4096 }] });
    }
    const posts = [];
    for (let i = 0; i < count; i++) {
      const segs = [{ offset: i * 8192 + 1, length: size }];
      fillSegments(src.buffer, segs, base + i);
      posts.push(qp.send(src.slice(segs[0].offset, size)));
    }
    await Promise.all(posts);
    for (let i = 0; i < count; i++) {
      expect(await peer.call('wait', { tag: `many-${i}` })).toMatchObject({ ok: true, bytes: size });
      expect(await peer.call('check', { name: 'many', segs: [{ offset: i * 8192 + 1, length: size }], seed: base + i })).toBe(-1);
    }
  });

  it('Reads up to the outbound read limit at once', async () => {
    const count = Math.max(1, Math.min(32, adapter.info.maxOutboundReadLimit));
    const size = 10_001;
    const base = seed;
    seed += count;
    for (let i = 0; i < count; i++) {
      await peer.call('fill', { name: 'target', segs: [{ offset: i * 16384 + 9, length: size }], seed: base + i });
    }
    const posts = [];
    for (let i = 0; i < count; i++) posts.push(qp.read(src.slice(i * 16384 + 11, size), target, { offset: i * 16384 + 9 }));
    await Promise.all(posts);
    for (let i = 0; i < count; i++) expect(checkSegments(src.buffer, [{ offset: i * 16384 + 11, length: size }], base + i)).toBe(-1);
  });
});

describe('ordering', () => {
  it('a burst of Writes then a Send: every Write is visible when the receive completes', async () => {
    const writes = 64;
    const base = seed;
    seed += writes;
    await peer.call('receive', { tag: 'order', segs: [{ name: 'rx', offset: 1, length: 64 }] });
    const checks = [];
    const posts = [];
    for (let i = 0; i < writes; i++) {
      const size = 1 + ((i * 7919) % 65536);
      const segs = [{ offset: i * 65540 + 1, length: size }];
      fillSegments(src.buffer, segs, base + i);
      posts.push(qp.write(src.slice(segs[0].offset, size), target, { offset: i * 65540 + 5 }));
      checks.push({ name: 'target', segs: [{ offset: i * 65540 + 5, length: size }], seed: base + i });
    }
    // The peer checks in the continuation of the receive completion, before anything else can happen.
    const verdict = peer.call('waitThenCheck', { tag: 'order', checks });
    posts.push(qp.send(src.slice(0, 8)));
    await Promise.all(posts);
    const r = await verdict;
    expect(r.ok).toBe(true);
    expect(r.mismatches).toEqual(new Array(writes).fill(-1));
  });
});

describe('a JS thread that blocks', () => {
  it('loses nothing: what the peer sends meanwhile waits (provider, TCP), then every byte arrives in order', async () => {
    const N = 48;
    const SIZE = 32 * 1024;
    const rx = await adapter.allocateMemory(N * SIZE);
    const receives = Array.from({ length: N }, (_, i) => qp.receive(rx.slice(i * SIZE, SIZE)));
    for (let i = 0; i < N; i++) await peer.call('fill', { name: 'many', segs: [{ offset: i * SIZE, length: SIZE }], seed: 900 + i });
    // The peer posts its Sends while this thread is busy: in 'loop' mode nothing here drives the provider then.
    const posted = Array.from({ length: N }, (_, i) =>
      peer.call('post', { tag: `blocked${i}`, op: 'send', segs: [{ name: 'many', offset: i * SIZE, length: SIZE }] }),
    );
    const until = Date.now() + 400;
    while (Date.now() < until) {
      // blocked
    }
    await Promise.all(posted);
    const done = await Promise.all(receives);
    expect(done.every((c) => c.status === 0 && c.bytes === SIZE)).toBe(true);
    for (let i = 0; i < N; i++) expect(checkSegments(rx.buffer, [{ offset: i * SIZE, length: SIZE }], 900 + i), `message ${i}`).toBe(-1);
    for (let i = 0; i < N; i++) expect(await peer.call('wait', { tag: `blocked${i}` })).toMatchObject({ ok: true, type: 'send', bytes: SIZE });
    await rx.deregister();
  });
});

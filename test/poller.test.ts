// Completion delivery: the poller thread hands many completions to JS per crossing; in manual mode nothing
// completes until cq.poll(), which settles promise-API requests and returns raw completions of qp.post().
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Adapter, CompletionQueue, MemoryRegion, QueuePair, RawCompletion, RemoteMemory } from '../lib/index';
import { openAdapter } from '../lib/index';
import { Peer, TEST_ADDRESS, connectToPeer, isSettled, ndError, openLocal, startPeer } from './helpers';
// @ts-expect-error plain ESM helper shared with the peer process
import { checkSegments, fillSegments } from './fixtures/pattern.mjs';

let peer: Peer;
let address: { host: string; port: number };
let remote: RemoteMemory;

beforeAll(async () => {
  peer = await startPeer();
  await peer.call('open');
  address = await peer.call('listen');
  remote = (await peer.call('register', { name: 'target', size: 1024 * 1024, access: { remoteWrite: true, remoteRead: true } })).remote;
  await peer.call('register', { name: 'rx', size: 4096 });
});

afterAll(async () => {
  await peer?.stop();
});

const tick = () => new Promise<void>((r) => setImmediate(r));

/** Polls until `done()` (manual mode: polling is how completions arrive). */
async function pollUntil(cq: CompletionQueue, done: () => boolean, out: RawCompletion[] = []): Promise<RawCompletion[]> {
  while (!done()) {
    out.push(...cq.poll(64));
    if (!done()) await tick();
  }
  return out;
}

// 'loop' on Linux drives the provider from the event loop ('auto' picks it); on Windows it is offered when asked
// for (CQ notifications on libuv's completion port, docs/windows-event-loop.md) and 'auto' stays 'thread'.
const LOOP = process.platform !== 'win32';

describe.each(['loop', 'thread'] as const)("completion: '%s'", (mode) => {
  it('is the mode the adapter reports', async () => {
    const { adapter } = await openLocal(mode);
    try {
      expect(adapter.completion).toBe(mode);
    } finally {
      await adapter.close();
    }
  });

  it('delivers many completions per JS-thread crossing', async () => {
    const { adapter, cq } = await openLocal(mode);
    try {
      const { qp } = await connectToPeer(adapter, cq, peer, address);
      const mr = await adapter.allocateMemory(64 * 1024);
      const before = adapter.stats();
      const writes = Array.from({ length: 256 }, (_, i) => qp.write(mr.slice(i * 64, 64), remote, { offset: i * 64 }));
      await Promise.all(writes);
      const after = adapter.stats();
      const completions = after.completions - before.completions;
      const batches = after.batches - before.batches;
      expect(completions).toBeGreaterThanOrEqual(256);
      expect(batches).toBeGreaterThan(0);
      expect(batches, `${completions} completions in ${batches} batches`).toBeLessThan(completions);
      expect(after.requests).toBe(0);
    } finally {
      await adapter.close();
    }
  });

  it('raw completions of qp.post() wait for cq.poll()', async () => {
    const { adapter, cq } = await openLocal(mode);
    try {
      const { qp } = await connectToPeer(adapter, cq, peer, address);
      const mr = await adapter.allocateMemory(4096);
      qp.post('write', mr.slice(0, 100), remote, { context: 7 });
      // A promise request posted after it completes after it (in order); by then the raw one was taken too.
      await qp.write(mr.slice(0, 1), remote);
      const raw = await pollUntil(cq, () => qp.outstanding.initiator === 0);
      const got = raw.length ? raw : cq.poll();
      expect(got).toEqual([{ type: 'write', status: 0, bytes: 100, context: 7, qp }]);
    } finally {
      await adapter.close();
    }
  });
});

describe.runIf(!LOOP)("completion: 'loop' on Windows", () => {
  it("is offered when asked for (libuv's port), and 'auto' stays the poller thread", async () => {
    const loop = await openAdapter('127.0.0.1', { completion: 'loop' });
    try {
      expect(loop.completion).toBe('loop');
    } finally {
      await loop.close();
    }
    const adapter = await openAdapter('127.0.0.1', { completion: 'auto' });
    try {
      expect(adapter.completion).toBe('thread');
    } finally {
      await adapter.close();
    }
  });
});

describe.runIf(LOOP)("completion: 'loop'", () => {
  it("is what 'auto' chooses with the built-in provider on Linux", async () => {
    const adapter = await openAdapter('127.0.0.1', { completion: 'auto', provider: 'soft' });
    try {
      expect(adapter.completion).toBe(process.platform === 'win32' ? 'thread' : 'loop');
    } finally {
      await adapter.close();
    }
  });

  // A Write and a Read posted, then a synchronous loop over cq.poll() that never yields must see both complete.
  // `settledFirst`: start from the continuation of a promise the event loop settled (inside that turn, before its
  // deferred transmit is flushed).
  async function spinPollDrives(pattern: number, settledFirst: boolean): Promise<void> {
    const { adapter, cq } = await openLocal('loop');
    try {
      const { qp } = await connectToPeer(adapter, cq, peer, address);
      const mr = await adapter.allocateMemory(4096);
      if (settledFirst) await qp.write(mr.slice(0, 1), remote);
      fillSegments(mr.buffer, [{ offset: 0, length: 512 }], pattern);
      qp.post('write', mr.slice(0, 512), remote, { context: 'w' });
      qp.post('read', mr.slice(1024, 512), remote, { context: 'r' });
      const got: RawCompletion[] = [];
      const deadline = Date.now() + 10_000;
      while (got.length < 2 && Date.now() < deadline) got.push(...cq.poll(16)); // never yields
      expect(got.map((c) => [c.context, c.status, c.bytes])).toEqual([
        ['w', 0, 512],
        ['r', 0, 512],
      ]);
      expect(checkSegments(mr.buffer, [{ offset: 1024, length: 512 }], pattern)).toBe(-1);
    } finally {
      await adapter.close();
    }
  }

  it('a synchronous loop over cq.poll() drives the provider itself: no yield to the event loop needed', () => spinPollDrives(11, false));

  it('the same loop in a continuation of a completion (inside the event-loop turn that delivered it) drives the provider too', () =>
    spinPollDrives(12, true));

  it('an unknown mode, or one the environment names wrongly, is refused with the choices', async () => {
    expect((await ndError(openAdapter('127.0.0.1', { completion: 'poll' as never }))).message).toMatch(/'auto', 'loop', 'thread', 'manual'/);
    const saved = process.env.NETDIRECT_COMPLETION;
    process.env.NETDIRECT_COMPLETION = 'fast';
    try {
      expect((await ndError(openAdapter('127.0.0.1'))).message).toMatch(/NETDIRECT_COMPLETION must be one of/);
    } finally {
      if (saved === undefined) delete process.env.NETDIRECT_COMPLETION;
      else process.env.NETDIRECT_COMPLETION = saved;
    }
  });
});

describe("completion: 'thread' with a spin window (spinMicros)", () => {
  it('moves data both ways while the poller spins, and after it armed its CQ and slept', async () => {
    const adapter = await openAdapter(TEST_ADDRESS, { completion: 'thread', spinMicros: 200 }); // the peer's device
    const cq = adapter.createCompletionQueue({ depth: 2048 });
    try {
      const { qp } = await connectToPeer(adapter, cq, peer, address);
      const mr = await adapter.allocateMemory(64 * 1024);
      for (let round = 0; round < 3; round++) {
        const seed = 90 + round;
        fillSegments(mr.buffer, [{ offset: 0, length: 8192 }], seed);
        await Promise.all(Array.from({ length: 32 }, (_, i) => qp.write(mr.slice(i * 256, 256), remote, { offset: i * 256 })));
        expect(await peer.call('check', { name: 'target', segs: [{ offset: 0, length: 8192 }], seed })).toBe(-1);
        expect(await qp.read(mr.slice(16384, 8192), remote)).toEqual({ type: 'read', status: 0, bytes: 8192 });
        expect(checkSegments(mr.buffer, [{ offset: 16384, length: 8192 }], seed)).toBe(-1);
        // Longer than the spin window: the poller armed its CQ and sleeps, so the provider's own thread must
        // notice the peer's Send.
        await new Promise((r) => setTimeout(r, 20));
        const receive = qp.receive(mr.slice(32768, 64));
        await peer.call('post', { tag: `send${round}`, op: 'send', segs: [{ name: 'rx', offset: 0, length: 64 }] });
        expect(await receive).toEqual({ type: 'receive', status: 0, bytes: 64 });
        expect(await peer.call('wait', { tag: `send${round}` })).toMatchObject({ ok: true });
      }
    } finally {
      await adapter.close();
    }
  });
});

describe.skipIf(!LOOP)("completion: 'loop' with a spin window (spinMicros)", () => {
  it('ping-pongs Sends with every CQ kept armed, polls inside the window, and sleeps after it', async () => {
    const adapter = await openAdapter(TEST_ADDRESS, { completion: 'loop', spinMicros: 2000 }); // the peer's device
    const cq = adapter.createCompletionQueue({ depth: 2048 });
    try {
      const { qp } = await connectToPeer(adapter, cq, peer, address);
      const mr = await adapter.allocateMemory(64 * 1024);
      const before = adapter.stats();
      // Each round: a Send the peer receives and a Send back; one completion after another on the same CQ (a CQ
      // left unarmed after its first notification would hang here).
      for (let round = 0; round < 50; round++) {
        const receive = qp.receive(mr.slice(32768, 64));
        await peer.call('receive', { tag: `r${round}`, segs: [{ name: 'rx', offset: 0, length: 64 }] });
        await qp.send(mr.slice(0, 64));
        expect(await peer.call('wait', { tag: `r${round}` })).toMatchObject({ ok: true });
        await peer.call('post', { tag: `s${round}`, op: 'send', segs: [{ name: 'rx', offset: 0, length: 64 }] });
        expect(await receive).toEqual({ type: 'receive', status: 0, bytes: 64 });
        expect(await peer.call('wait', { tag: `s${round}` })).toMatchObject({ ok: true });
      }
      const spun = adapter.stats().spinRounds - before.spinRounds;
      expect(spun, 'rounds polled inside the window').toBeGreaterThan(0);
      // A receive stays pending with nothing arriving: the window closes and the loop blocks again.
      const waiting = qp.receive(mr.slice(32768, 64));
      await new Promise((r) => setTimeout(r, 100));
      const idle = adapter.stats().spinRounds;
      await new Promise((r) => setTimeout(r, 200));
      expect(adapter.stats().spinRounds - idle, 'rounds polled 100 ms after the last activity').toBe(0);
      await peer.call('post', { tag: 'last', op: 'send', segs: [{ name: 'rx', offset: 0, length: 64 }] });
      expect(await waiting).toEqual({ type: 'receive', status: 0, bytes: 64 });
    } finally {
      await adapter.close();
    }
  });

  it('without a window it never spins', async () => {
    // Nor the provider's window for same-host connections (docs/shm.md "Waking"; the shm projects turn them on).
    const saved = process.env.NETDIRECT_SHM_SPIN_MICROS;
    process.env.NETDIRECT_SHM_SPIN_MICROS = '0';
    const { adapter, cq } = await openLocal('loop');
    if (saved === undefined) delete process.env.NETDIRECT_SHM_SPIN_MICROS;
    else process.env.NETDIRECT_SHM_SPIN_MICROS = saved;
    try {
      const { qp } = await connectToPeer(adapter, cq, peer, address);
      const mr = await adapter.allocateMemory(4096);
      await Promise.all(Array.from({ length: 16 }, (_, i) => qp.write(mr.slice(i * 64, 64), remote, { offset: i * 64 })));
      expect(adapter.stats().spinRounds).toBe(0);
    } finally {
      await adapter.close();
    }
  });
});

describe("completion: 'manual'", () => {
  let adapter: Adapter;
  let cq: CompletionQueue;
  let qp: QueuePair;
  let mr: MemoryRegion;

  beforeAll(async () => {
    ({ adapter, cq } = await openLocal('manual'));
    ({ qp } = await connectToPeer(adapter, cq, peer, address));
    mr = await adapter.allocateMemory(64 * 1024);
  });

  afterAll(async () => {
    await adapter?.close();
  });

  it('a promise-API Write settles only when cq.poll() dequeues it', async () => {
    fillSegments(mr.buffer, [{ offset: 0, length: 4096 }], 31);
    const before = adapter.stats();
    const write = qp.write(mr.slice(0, 4096), remote, { offset: 8 });
    // The data lands at the peer without anyone polling here (the provider progresses on its own)...
    while ((await peer.call('check', { name: 'target', segs: [{ offset: 8, length: 4096 }], seed: 31 })) !== -1) await tick();
    // ...but the completion is still on the CQ.
    expect(await isSettled(write)).toBe(false);
    expect(adapter.stats().completions).toBe(before.completions); // nothing crossed from a poller thread
    let settled = false;
    write.then(() => (settled = true));
    const raw = await pollUntil(cq, () => settled);
    expect(raw).toEqual([]); // promise-API completions are not returned as raw ones
    expect(await write).toEqual({ type: 'write', status: 0, bytes: 4096 });
  });

  it('qp.post() + cq.poll(): raw completions carry the context; silent ones produce none', async () => {
    qp.post('write', mr.slice(0, 64), remote, { context: 1, silent: true });
    qp.post('write', mr.slice(64, 64), remote, { context: 2, silent: true });
    qp.post('write', mr.slice(128, 64), remote, { context: 3 });
    qp.post('read', mr.slice(1024, 64), remote, { context: { label: 'read' } });
    expect(qp.outstanding.initiator).toBe(4);
    expect(mr.inFlight).toBe(4);
    const raw = await pollUntil(cq, () => qp.outstanding.initiator === 0);
    expect(raw.map((c) => [c.type, c.status, c.bytes, c.context, c.qp === qp])).toEqual([
      ['write', 0, 64, 3, true],
      ['read', 0, 64, { label: 'read' }, true],
    ]);
    expect(mr.inFlight).toBe(0);
  });

  it('receives complete through poll too, and a Send from the peer fills them', async () => {
    const got = qp.receive(mr.slice(2048, 512));
    qp.post('receive', mr.slice(4096, 512), undefined, { context: 'raw-receive' });
    await peer.call('fill', { name: 'rx', segs: [{ offset: 0, length: 300 }], seed: 5 });
    await peer.call('post', { tag: 's1', op: 'send', segs: [{ name: 'rx', offset: 0, length: 300 }] });
    await peer.call('post', { tag: 's2', op: 'send', segs: [{ name: 'rx', offset: 0, length: 20 }] });
    let settled = false;
    got.then(() => (settled = true));
    const raw = await pollUntil(cq, () => settled && qp.outstanding.receive === 0);
    expect(await got).toEqual({ type: 'receive', status: 0, bytes: 300 });
    expect(raw).toEqual([{ type: 'receive', status: 0, bytes: 20, context: 'raw-receive', qp }]);
    expect(await peer.call('wait', { tag: 's1' })).toMatchObject({ ok: true });
  });

  it('closing the adapter with a receive pending settles it (close drains the CQ itself)', async () => {
    const pending = qp.receive(mr.slice(0, 16));
    pending.catch(() => {}); // handled now: close() rejects it before ndError() looks
    await adapter.close();
    expect((await ndError(pending)).code).toBe('ND_CANCELED');
  });
});

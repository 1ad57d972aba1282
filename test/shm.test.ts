// Same host through shared memory (docs/shm.md): which connections use it, the data path over it between two
// processes, and a peer killed (kill -9) mid-transfer on either side, in the run's completion mode (this file is one
// of vitest.config.mts's COMPLETION_SUITES; the 'shm' projects run the other data-moving suites over shm too).
import { spawnSync } from 'node:child_process';
import { readdirSync } from 'node:fs';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { NdError, openAdapter, type Adapter } from '../lib/index';
import { MiB, Peer, TEST_ADDRESS, ndError, openLocal, root } from './helpers';
import { driveManual } from './fixtures/manual-driver.mjs';

const linux = process.platform === 'linux';

async function pair(a: Adapter, b: Adapter) {
  const cqa = a.createCompletionQueue({ depth: 256 });
  const cqb = b.createCompletionQueue({ depth: 256 });
  const listener = await b.listen({ host: TEST_ADDRESS, port: 0 });
  const qpb = b.createQueuePair({ receiveCq: cqb, receiveDepth: 16, initiatorDepth: 16 });
  const mrb = await b.allocateMemory(MiB, { remoteWrite: true, remoteRead: true });
  const rx = qpb.receive(mrb.slice(0, 4096));
  const accepted = listener.getConnectionRequest().then((c) => c.accept(qpb).then(() => c));
  const qpa = a.createQueuePair({ receiveCq: cqa, receiveDepth: 16, initiatorDepth: 16 });
  await a.connect(qpa, listener.address);
  await accepted;
  return { qpa, qpb, mrb, rx, listener };
}

/** Opens an adapter in the run's mode (driven when that is 'manual', as test/helpers.ts openLocal does). */
async function open(options: { sharedMemory?: boolean } = {}): Promise<Adapter> {
  const adapter = await openAdapter(TEST_ADDRESS, options);
  driveManual(adapter);
  return adapter;
}

describe.runIf(linux)('which connections go through shared memory', () => {
  let saved: string | undefined;
  beforeEach(() => {
    saved = process.env.NETDIRECT_SHM;
    delete process.env.NETDIRECT_SHM;
  });
  afterEach(() => {
    if (saved === undefined) delete process.env.NETDIRECT_SHM;
    else process.env.NETDIRECT_SHM = saved;
  });

  const cases: Array<[string, { sharedMemory?: boolean }, { sharedMemory?: boolean }, string | undefined, string]> = [
    ['both ends ask', { sharedMemory: true }, { sharedMemory: true }, undefined, 'shm'],
    ['the initiator does not', { sharedMemory: false }, { sharedMemory: true }, undefined, 'tcp'],
    ['the responder does not', { sharedMemory: true }, { sharedMemory: false }, undefined, 'tcp'],
    ['no option, no NETDIRECT_SHM (the default)', {}, {}, undefined, 'shm'],
    ['NETDIRECT_SHM=1, no option', {}, {}, '1', 'shm'],
    ['NETDIRECT_SHM=0, no option', {}, {}, '0', 'tcp'],
    ['NETDIRECT_SHM=0, the option on both ends', { sharedMemory: true }, { sharedMemory: true }, '0', 'shm'],
  ];
  for (const [name, oa, ob, env, want] of cases) {
    it(`${name}: ${want}, and a Write, a Send and a Read move the same bytes`, async () => {
      if (env !== undefined) process.env.NETDIRECT_SHM = env;
      const a = await open(oa);
      const b = await open(ob);
      try {
        const { qpa, qpb, mrb, rx } = await pair(a, b);
        expect([qpa.transport, qpb.transport]).toEqual([want, want]);
        const mra = await a.allocateMemory(MiB, { remoteWrite: true, remoteRead: true });
        for (let i = 0; i < MiB; i++) mra.buffer[i] = (i * 7 + 3) & 0xff;
        // A Write larger than one FPDU and the ring's free space at once, a Send, a Read back.
        await qpa.write(mra.slice(0, 300_000), mrb.remote(), { offset: 8192 });
        expect(Buffer.compare(mrb.buffer.subarray(8192, 8192 + 300_000), mra.buffer.subarray(0, 300_000))).toBe(0);
        expect(mrb.buffer[8192 + 300_000]).toBe(0);
        await qpa.send(mra.slice(5, 100));
        expect((await rx).bytes).toBe(100);
        expect(Buffer.compare(mrb.buffer.subarray(0, 100), mra.buffer.subarray(5, 105))).toBe(0);
        await qpa.read(mra.slice(MiB / 2, 4096), mrb.remote(), { offset: 8192 });
        expect(Buffer.compare(mra.buffer.subarray(MiB / 2, MiB / 2 + 4096), mra.buffer.subarray(0, 4096))).toBe(0);
        // The target's checks decide what lands, as over TCP: a Write past the region's end fails on the initiator.
        const past = { ...mrb.remote(), address: mrb.remote().address + BigInt(MiB - 8), length: 16 };
        const before = Buffer.from(mrb.buffer.subarray(MiB - 8));
        const err = await ndError(qpa.write(mra.slice(0, 16), past));
        expect(err.code).toBe('ND_ACCESS_VIOLATION');
        expect(Buffer.compare(mrb.buffer.subarray(MiB - 8), before)).toBe(0);
      } finally {
        await a.close();
        await b.close();
      }
    });
  }

  it('sharedMemory must be a boolean', async () => {
    const err = await ndError(openAdapter(TEST_ADDRESS, { sharedMemory: 'yes' as unknown as boolean }));
    expect(err).toBeInstanceOf(NdError);
    expect(err.code).toBe('ERR_ND_INVALID_ARGUMENT');
  });

  it('adapter.sharedMemory reports the setting', async () => {
    const a = await openAdapter(TEST_ADDRESS, { sharedMemory: true });
    const b = await openAdapter(TEST_ADDRESS, { sharedMemory: false });
    expect([a.sharedMemory, b.sharedMemory]).toEqual([true, false]);
    await a.close();
    await b.close();
    expect(a.sharedMemory).toBe(false);
  });
});

describe.runIf(linux)('event loop: the busy window of same-host connections', () => {
  // With a connection on shared memory the provider asks the loop to keep polling a while after each message
  // (INDSharedMemory::GetBusyPollMicros, NETDIRECT_SHM_SPIN_MICROS, default 50 µs; docs/shm.md "Waking").
  const cases: Array<[string, boolean, string | undefined, boolean]> = [
    ['shm, the default window', true, undefined, true],
    ['shm, NETDIRECT_SHM_SPIN_MICROS=0', true, '0', false],
    ['tcp', false, undefined, false],
  ];
  for (const [name, sharedMemory, env, spins] of cases) {
    it(`${name}: ${spins ? 'polls inside the window, then blocks again' : 'never spins'}`, async () => {
      const saved = process.env.NETDIRECT_SHM_SPIN_MICROS;
      if (env === undefined) delete process.env.NETDIRECT_SHM_SPIN_MICROS;
      else process.env.NETDIRECT_SHM_SPIN_MICROS = env;
      let a: Adapter | undefined;
      let b: Adapter | undefined;
      try {
        a = await openAdapter(TEST_ADDRESS, { completion: 'loop', sharedMemory, spinMicros: 0 });
        b = await openAdapter(TEST_ADDRESS, { completion: 'loop', sharedMemory, spinMicros: 0 });
      } finally {
        if (saved === undefined) delete process.env.NETDIRECT_SHM_SPIN_MICROS;
        else process.env.NETDIRECT_SHM_SPIN_MICROS = saved;
      }
      try {
        const { qpa, qpb, mrb, rx } = await pair(a, b);
        expect(qpa.transport).toBe(sharedMemory ? 'shm' : 'tcp');
        const mra = await a.allocateMemory(4096);
        await qpa.send(mra.slice(0, 8));
        expect((await rx).bytes).toBe(8);
        // Sends both ways, each answered: every post and completion opens the window.
        for (let i = 0; i < 50; i++) {
          const got = qpa.receive(mra.slice(64, 64));
          const there = qpb.receive(mrb.slice(64, 64));
          await qpa.send(mra.slice(0, 8));
          await there;
          await qpb.send(mrb.slice(0, 8));
          expect((await got).bytes).toBe(8);
        }
        const spun = a.stats().spinRounds + b.stats().spinRounds;
        if (spins) expect(spun, 'rounds polled inside the window').toBeGreaterThan(0);
        else expect(spun).toBe(0);
        // A receive stays pending with nothing arriving: the window closes and the loop blocks again; then a message
        // still arrives (the doorbell, with the CQ armed again).
        const waiting = qpa.receive(mra.slice(128, 64));
        await new Promise((r) => setTimeout(r, 50));
        const idle = a.stats().spinRounds;
        await new Promise((r) => setTimeout(r, 100));
        expect(a.stats().spinRounds - idle, 'rounds polled 50 ms after the last activity').toBe(0);
        await qpb.send(mrb.slice(0, 16));
        expect((await waiting).bytes).toBe(16);
      } finally {
        await a.close();
        await b.close();
      }
    });
  }
});

/** Entries of /dev/shm: a same-host connection must leave none behind (its rings are a memfd). */
// Entries the MPI libraries of other tests make while they run (test/bench/osu.test.ts's `--compare mpi` runs MPICH
// over UCX, whose shared-memory transport names its segments so): another vitest worker may be running one meanwhile.
const FOREIGN_SHM = /^(ucx_|mpich|sem\.mpich|shm-col-)/;

function devShm(): string[] {
  try {
    return readdirSync('/dev/shm')
      .filter((name) => !FOREIGN_SHM.test(name))
      .sort();
  } catch {
    return [];
  }
}

async function shmPeer(): Promise<Peer> {
  const saved = process.env.NETDIRECT_SHM;
  process.env.NETDIRECT_SHM = '1'; // inherited by the child: its adapter offers and accepts shared memory
  try {
    const p = new Peer();
    await p.ready();
    return p;
  } finally {
    if (saved === undefined) delete process.env.NETDIRECT_SHM;
    else process.env.NETDIRECT_SHM = saved;
  }
}

// allocateMemory on Linux: memory a same-host peer can map (a memfd, docs/shm.md "Mapped regions"), released by the
// buffer's finalizer once the region is deregistered and the buffer collected.
describe.runIf(linux)('allocateMemory', () => {
  it('allocates from a memfd mapping, and the mapping goes once the region is deregistered and collected', () => {
    const code = `
      import { openAdapter } from 'netdirect';
      import { readFileSync } from 'node:fs';
      const maps = () => readFileSync('/proc/self/maps', 'utf8').split('\\n').filter((l) => l.includes('/memfd:netdirect-buffer')).length;
      const a = await openAdapter(${JSON.stringify(TEST_ADDRESS)});
      const before = maps();
      let mr = await a.allocateMemory(3 * 4096 + 1, { remoteWrite: true });
      const out = { before, whileRegistered: maps(), zero: mr.buffer.every((b) => b === 0), length: mr.buffer.byteLength };
      mr.buffer.fill(7);
      await mr.deregister();
      mr = null;
      for (let i = 0; i < 10 && maps() > before; i++) { globalThis.gc(); await new Promise((r) => setTimeout(r, 10)); }
      out.afterCollected = maps();
      await a.close();
      console.log(JSON.stringify(out));`;
    const r = spawnSync(process.execPath, ['--expose-gc', '--input-type=module', '-e', code], { cwd: root, encoding: 'utf8', timeout: 60_000 });
    expect(r.status, r.stderr).toBe(0);
    const out = JSON.parse(r.stdout.trim().split('\n').pop()!);
    expect(out).toEqual({ before: 0, whileRegistered: 1, zero: true, length: 3 * 4096 + 1, afterCollected: 0 });
  });

  it.each([
    ['sharedMemory: false', '{ sharedMemory: false }', undefined],
    ['NETDIRECT_SHM=0', '{}', '0'],
  ])('with shared memory off (%s) allocates plain memory: no memfd is made or held', (_name, options, env) => {
    const code = `
      import { openAdapter } from 'netdirect';
      import { readFileSync } from 'node:fs';
      const maps = () => readFileSync('/proc/self/maps', 'utf8').split('\\n').filter((l) => l.includes('/memfd:netdirect-buffer')).length;
      const a = await openAdapter(${JSON.stringify(TEST_ADDRESS)}, ${options});
      const mr = await a.allocateMemory(4096, { remoteWrite: true });
      mr.buffer.fill(7);
      const out = { sharedMemory: a.sharedMemory, maps: maps(), length: mr.buffer.byteLength, filled: mr.buffer.every((b) => b === 7) };
      await mr.deregister();
      await a.close();
      console.log(JSON.stringify(out));`;
    const r = spawnSync(process.execPath, ['--input-type=module', '-e', code], {
      cwd: root,
      encoding: 'utf8',
      timeout: 60_000,
      env: { ...Object.fromEntries(Object.entries(process.env).filter(([k]) => k !== 'NETDIRECT_SHM')), ...(env === undefined ? {} : { NETDIRECT_SHM: env }) },
    });
    expect(r.status, r.stderr).toBe(0);
    expect(JSON.parse(r.stdout.trim().split('\n').pop()!)).toEqual({ sharedMemory: false, maps: 0, length: 4096, filled: true });
  });
});

describe.runIf(linux)('two processes on one host', () => {
  it('move data through shared memory both ways (qp.transport on both ends)', async () => {
    const before = devShm();
    const peer = await shmPeer();
    const adapter = await openAdapter(TEST_ADDRESS, { sharedMemory: true });
    driveManual(adapter);
    try {
      await peer.call('open');
      const address = await peer.call('listen');
      const target = (await peer.call('register', { name: 'target', size: 4 * MiB, access: { remoteRead: true, remoteWrite: true } })).remote;
      await peer.call('register', { name: 'rx', size: 64 * 1024 });
      const cq = adapter.createCompletionQueue({ depth: 256 });
      const qp = adapter.createQueuePair({ receiveCq: cq, receiveDepth: 64, initiatorDepth: 64 });
      const accepting = peer.call('accept', { receives: [{ tag: 'r', segs: [{ name: 'rx', offset: 0, length: 65536 }] }] });
      await adapter.connect(qp, address);
      await accepting;
      expect(qp.transport).toBe('shm');
      expect(await peer.call('transport')).toBe('shm');
      const mr = await adapter.allocateMemory(4 * MiB, { remoteWrite: true, remoteRead: true });
      const { fillSegments } = await import('./fixtures/pattern.mjs');
      fillSegments(mr.buffer, [{ offset: 0, length: 4 * MiB }], 11);
      // 64 Writes in flight at once: the ring fills and drains many times over.
      await Promise.all(Array.from({ length: 64 }, (_, i) => qp.write(mr.slice(i * 65536, 65536), target, { offset: i * 65536 })));
      expect(await peer.call('check', { name: 'target', segs: [{ offset: 0, length: 4 * MiB }], seed: 11 })).toBe(-1);
      await qp.send(mr.slice(0, 65536));
      const r = await peer.call('waitThenCheck', { tag: 'r', checks: [{ name: 'rx', segs: [{ offset: 0, length: 65536 }], seed: 11 }] });
      expect([r.ok, r.bytes, r.mismatches]).toEqual([true, 65536, [-1]]);
      // The peer writes back into us.
      await peer.call('fill', { name: 'target', segs: [{ offset: 0, length: MiB }], seed: 12 });
      await peer.call('post', { tag: 'w', op: 'write', segs: [{ name: 'target', offset: 0, length: MiB }], remote: mr.remote(), offset: 0 });
      expect((await peer.call('wait', { tag: 'w' })).ok).toBe(true);
      const { checkSegments } = await import('./fixtures/pattern.mjs');
      expect(checkSegments(mr.buffer, [{ offset: 0, length: MiB }], 12)).toBe(-1);
    } finally {
      await adapter.close();
      await peer.stop();
    }
    expect(devShm()).toEqual(before);
  });

  // Placement by the initiator (docs/shm.md): the initiator's provider copies a Write into the target itself, as an
  // RNIC places by DMA, so the Write lands in — and completes against — a target none of whose threads runs.
  it('a Write lands in, and completes against, a target process that is stopped (SIGSTOP)', async () => {
    const peer = await shmPeer();
    const adapter = await openAdapter(TEST_ADDRESS, { sharedMemory: true });
    driveManual(adapter);
    let stopped = false;
    try {
      await peer.call('open', { completion: 'thread' }); // idle, its engine sleeps on its doorbell
      const address = await peer.call('listen');
      const target = (await peer.call('register', { name: 'target', size: 64 * 1024, access: { remoteWrite: true } })).remote;
      const cq = adapter.createCompletionQueue({ depth: 64 });
      const qp = adapter.createQueuePair({ receiveCq: cq, receiveDepth: 4, initiatorDepth: 16 });
      const accepting = peer.call('accept', {});
      await adapter.connect(qp, address);
      await accepting;
      expect(qp.transport).toBe('shm');
      const mr = await adapter.allocateMemory(64 * 1024);
      const { fillSegments } = await import('./fixtures/pattern.mjs');
      fillSegments(mr.buffer, [{ offset: 0, length: 12288 }], 21);
      // Through the ring: the target processes it, sees that we can write into it and publishes its table.
      await qp.write(mr.slice(0, 4096), target, { offset: 0 });
      await new Promise((r) => setTimeout(r, 100)); // its engine goes back to sleep on its doorbell
      peer.child.kill('SIGSTOP');
      stopped = true;
      const landed = Promise.all([
        qp.write(mr.slice(4096, 4096), target, { offset: 4096 }),
        qp.write(mr.slice(8192, 4096), target, { offset: 8192 }),
      ]);
      const outcome = await Promise.race([landed.then(() => 'completed'), new Promise((r) => setTimeout(() => r('still pending'), 5000))]);
      peer.child.kill('SIGCONT');
      stopped = false;
      expect(outcome).toBe('completed');
      expect(await peer.call('check', { name: 'target', segs: [{ offset: 0, length: 12288 }], seed: 21 })).toBe(-1);
      // Past the region's end: not placed, the ring carries it and the target refuses it as over TCP.
      const past = { ...target, address: target.address + BigInt(64 * 1024 - 8), length: 16 };
      expect((await ndError(qp.write(mr.slice(0, 16), past))).code).toBe('ND_ACCESS_VIOLATION');
    } finally {
      if (stopped) peer.child.kill('SIGCONT');
      await adapter.close();
      await peer.stop();
    }
  });

  // Mapped regions (docs/shm.md "Mapped regions"): the peer's allocateMemory region lies in a memfd it hands us once we
  // proved we could write into it anyway; its Writes are then placed with a store into our mapping of that memfd. Every
  // size up to the placement limit (1 MiB), at odd offsets, lands whole while the target is stopped; between groups the
  // target answers (a Write into us), so that each group is a burst that is placed, not a stream (Placer::worth_it).
  it('allocateMemory regions: Writes of every size land in a stopped target (SIGSTOP), intact', async () => {
    const peer = await shmPeer();
    const adapter = await openAdapter(TEST_ADDRESS, { sharedMemory: true });
    driveManual(adapter);
    let stopped = false;
    try {
      await peer.call('open', { completion: 'thread' });
      const address = await peer.call('listen');
      const size = 4 * MiB;
      const target = (await peer.call('register', { name: 'target', size, access: { remoteWrite: true } })).remote;
      await peer.call('register', { name: 'src', size: 4096 });
      const cq = adapter.createCompletionQueue({ depth: 64 });
      const qp = adapter.createQueuePair({ receiveCq: cq, receiveDepth: 4, initiatorDepth: 16 });
      const accepting = peer.call('accept', {});
      await adapter.connect(qp, address);
      await accepting;
      expect(qp.transport).toBe('shm');
      const mr = await adapter.allocateMemory(size, { remoteWrite: true });
      const sizes = [1, 3, 8, 64, 4095, 4096, 4097, 65536, 65537, 262144, MiB - 1, MiB];
      const segs: Array<{ offset: number; length: number }> = [];
      let at = 64;
      for (const length of sizes) {
        segs.push({ offset: at, length });
        at += length + 13;
      }
      const { fillSegments } = await import('./fixtures/pattern.mjs');
      fillSegments(mr.buffer, segs, 31);
      await qp.write(mr.slice(0, 8), target, { offset: 0 }); // through the ring: the target publishes its table
      for (let g = 0; g < segs.length; g += 4) {
        await new Promise((r) => setTimeout(r, 50)); // its engine goes back to sleep on its doorbell
        peer.child.kill('SIGSTOP');
        stopped = true;
        const group = segs.slice(g, g + 4).map(({ offset, length }) => qp.write(mr.slice(offset, length), target, { offset }));
        const outcome = await Promise.race([Promise.all(group).then(() => 'completed'), new Promise((r) => setTimeout(() => r('still pending'), 5000))]);
        peer.child.kill('SIGCONT');
        stopped = false;
        expect(outcome, `sizes ${sizes.slice(g, g + 4).join(', ')}`).toBe('completed');
        await peer.call('post', { tag: `b${g}`, op: 'write', segs: [{ name: 'src', offset: 0, length: 8 }], remote: mr.remote(), offset: size - 8 });
        expect((await peer.call('wait', { tag: `b${g}` })).ok).toBe(true);
      }
      expect(await peer.call('check', { name: 'target', segs, seed: 31 })).toBe(-1);
    } finally {
      if (stopped) peer.child.kill('SIGCONT');
      await adapter.close();
      await peer.stop();
    }
  });

  // kill -9 of either end mid-transfer: the other end's requests all settle, its disconnect notification comes,
  // within bounds; nothing is left in /dev/shm.
  for (const killed of ['target', 'initiator'] as const) {
    it(`a ${killed} killed with SIGKILL mid-transfer: the other end settles everything and sees the disconnect`, async () => {
      const before = devShm();
      const target = await shmPeer();
      const initiator = await shmPeer();
      try {
        await target.call('open');
        const address = await target.call('listen');
        const remote = (await target.call('register', { name: 't', size: 8 * MiB, access: { remoteWrite: true } })).remote;
        await initiator.call('open');
        await initiator.call('register', { name: 's', size: 8 * MiB });
        const accepting = target.call('accept', {});
        await initiator.call('connect', { host: address.host, port: address.port });
        await accepting;
        expect(await initiator.call('transport')).toBe('shm');
        for (let i = 0; i < 64; i++) {
          await initiator.call('post', { tag: `w${i}`, op: 'write', segs: [{ name: 's', offset: (i % 8) * MiB, length: MiB }], remote, offset: (i % 8) * MiB });
        }
        const victim = killed === 'target' ? target : initiator;
        const survivor = killed === 'target' ? initiator : target;
        const t0 = Date.now();
        victim.child.kill('SIGKILL');
        const exit = await victim.exited;
        expect(exit.signal).toBe('SIGKILL');
        if (survivor === initiator) {
          // Every Write settles: done before the kill, or failed (ND_CANCELED, a connection error).
          for (let i = 0; i < 64; i++) {
            const r = await survivor.call('wait', { tag: `w${i}` });
            if (!r.ok) expect(r.code).toMatch(/^ND_/);
          }
        }
        await survivor.call('disconnected'); // connector.disconnected resolved
        expect(Date.now() - t0).toBeLessThan(15_000);
        expect(await survivor.call('ping')).toMatchObject({ pong: true });
      } finally {
        await target.stop();
        await initiator.stop();
      }
      expect(devShm()).toEqual(before);
    });
  }
});

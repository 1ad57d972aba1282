// ndbench's native ND loop (binding/bench/bench_nd.cc, `--compare native`) when things go wrong: it refuses what it
// cannot run with a clear error, fails with the provider's status when a request fails, and gives up on a silent
// peer after its timeout instead of spinning for ever. (The figures it prints: test/bench/cli.test.ts.)
import { afterAll, describe, expect, it } from 'vitest';
import type { Adapter, CompletionQueue, MemoryRegion, QueuePair, RemoteMemory } from '../../lib/index';
import { binding as addon } from '../../lib/binding';
import { ndThrow, openLocal } from '../helpers';

const binding = addon as unknown as { ndBenchRun(p: Record<string, unknown>): { samples: Float64Array } | undefined };

const open: Adapter[] = [];
afterAll(async () => {
  await Promise.all(open.map((a) => a.close()));
});

interface End {
  adapter: Adapter;
  cq: CompletionQueue;
  qp: QueuePair;
  mr: MemoryRegion;
}

/** Two connected queue pairs on adapters in `mode`, each with a 4 KiB region the other may read and write. */
async function pair(mode: 'manual' | 'thread'): Promise<{ server: End; client: End; toServer: RemoteMemory; toClient: RemoteMemory }> {
  const ends: End[] = [];
  for (let i = 0; i < 2; i++) {
    const { adapter, cq } = await openLocal(mode);
    open.push(adapter);
    const qp = adapter.createQueuePair({ receiveCq: cq, initiatorDepth: 16 });
    const mr = await adapter.registerMemory(new Uint8Array(4096), { remoteRead: true, remoteWrite: true });
    ends.push({ adapter, cq, qp, mr });
  }
  const [server, client] = ends;
  const listener = await server.adapter.listen();
  const accepting = (async () => (await listener.getConnectionRequest()).accept(server.qp))();
  await client.adapter.connect(client.qp, listener.address);
  await accepting;
  return { server, client, toServer: server.mr.remote(), toClient: client.mr.remote() };
}

function params(end: End, remote: RemoteMemory, extra: Record<string, unknown>): Record<string, unknown> {
  const internal = (o: unknown) => (o as { _native: unknown })._native;
  return {
    role: 'client',
    test: 'write_lat',
    qp: internal(end.qp),
    cq: internal(end.cq),
    region: internal(end.mr),
    size: 8,
    sendOffset: 1024,
    stop: 2048 + 16,
    stopSource: 2048 + 24,
    drainSource: 2048 + 8,
    remoteAddress: remote.address,
    remoteToken: remote.token,
    iters: 10,
    warmup: 0,
    durationMs: 0,
    moderation: 1,
    inline: false,
    timeoutMs: 5000,
    ...extra,
  };
}

describe('the native ND loop of ndbench', { timeout: 60_000 }, () => {
  it('runs read_lat on a connected pair and returns one sample per iteration', async () => {
    const { client, toServer } = await pair('manual');
    const r = binding.ndBenchRun(params(client, toServer, { test: 'read_lat', iters: 50, warmup: 5 }));
    expect(r!.samples).toHaveLength(50);
    for (const ns of r!.samples) expect(ns).toBeGreaterThan(0);
  });

  it('runs write_bw: a window of Writes, every moderation-th signaled; each byte lands and nothing is left on the CQ', async () => {
    const { client, server, toServer } = await pair('manual');
    client.mr.buffer.fill(0x5c, 1024, 1024 + 64);
    const r = binding.ndBenchRun(params(client, toServer, { test: 'write_bw', size: 64, iters: 1000, warmup: 10, window: 16, moderation: 4 })) as {
      messages: number;
      elapsedNs: number;
    };
    expect(r.messages).toBe(1000);
    expect(r.elapsedNs).toBeGreaterThan(0);
    expect(Array.from(server.mr.buffer.subarray(0, 64))).toEqual(new Array(64).fill(0x5c));
    expect(client.cq.poll(16)).toEqual([]);
    // Its server is passive; window 0 is refused.
    expect(ndThrow(() => binding.ndBenchRun(params(client, toServer, { test: 'write_bw', role: 'server' }))).message).toMatch(/write_bw's server is passive/);
    expect(ndThrow(() => binding.ndBenchRun(params(client, toServer, { test: 'write_bw', window: 0 }))).message).toMatch(/window must be a number/);
  });

  it('runs write_bw in groups (postList, ndbench -l): every Write completes or is retired, counts add up, the CQ is left empty', async () => {
    const { client, server, toServer } = await pair('manual');
    client.mr.buffer.fill(0x3a, 1024, 1024 + 8);
    // 1000 is no multiple of 7, and a group of 32 is cut by the window of 16: partial groups end signaled too.
    for (const postList of [7, 32]) {
      const r = binding.ndBenchRun(params(client, toServer, { test: 'write_bw', size: 8, iters: 1000, warmup: 5, window: 16, moderation: 4, postList })) as {
        messages: number;
      };
      expect(r.messages).toBe(1000);
    }
    expect(Array.from(server.mr.buffer.subarray(0, 8))).toEqual(new Array(8).fill(0x3a));
    expect(client.cq.poll(16)).toEqual([]);
    expect(ndThrow(() => binding.ndBenchRun(params(client, toServer, { test: 'write_bw', window: 16, postList: 0 }))).message).toMatch(/postList must be a number/);
  });

  it('refuses an adapter that is not in manual mode', async () => {
    const loop = await pair('thread'); // 'thread' exists on every platform ('loop' not on Windows)
    const e = ndThrow(() => binding.ndBenchRun(params(loop.client, loop.toServer, {})));
    expect(e.code).toBe('ERR_ND_INVALID_ARGUMENT');
    expect(e.message).toMatch(/the adapter must be in manual mode/);
  });

  it("leaves the application's own completions for its next poll()", async () => {
    const { client, toServer } = await pair('manual');
    client.qp.post('read', client.mr.slice(0, 8), toServer, { context: 'mine' });
    client.qp.post('read', client.mr.slice(8, 8), toServer, { context: 'mine too' });
    const r = binding.ndBenchRun(params(client, toServer, { test: 'read_lat', iters: 20 }));
    expect(r!.samples).toHaveLength(20);
    const got = client.cq.poll(16);
    expect(got.map((c) => [c.context, c.status])).toEqual([
      ['mine', 0],
      ['mine too', 0],
    ]);
    expect(client.cq.poll(16)).toEqual([]);
  });

  it('refuses offsets outside the region', async () => {
    const { client, toServer } = await pair('manual');
    const e = ndThrow(() => binding.ndBenchRun(params(client, toServer, { sendOffset: 4090 })));
    expect(e.code).toBe('ERR_ND_INVALID_ARGUMENT');
    expect(e.message).toMatch(/sendOffset must be a number in \[0, 4088/);
    expect(ndThrow(() => binding.ndBenchRun(params(client, toServer, { size: 8192 }))).code).toBe('ERR_ND_OUT_OF_RANGE');
  });

  it('a request the peer refuses fails the loop with the provider status (an NdError), not a hang', async () => {
    const { client, toServer } = await pair('manual');
    const e = ndThrow(() => binding.ndBenchRun(params(client, { ...toServer, token: (toServer.token ^ 0x5a5a) >>> 0 }, { test: 'read_lat' })));
    expect(e.name).toBe('NdError');
    expect(['ND_ACCESS_VIOLATION', 'ND_REMOTE_ERROR']).toContain(e.code);
    // Whatever of the loop's own the provider still completes is not the application's: poll() returns none of it.
    expect(client.cq.poll(16)).toEqual([]);
  });

  it('a peer that never answers: the loop gives up after its timeout, saying so', async () => {
    const { client, toServer } = await pair('manual');
    const t0 = Date.now();
    expect(() => binding.ndBenchRun(params(client, toServer, { timeoutMs: 300 }))).toThrow(/^native write_lat: no progress for 0\.3 s \(is the peer alive\?\)/);
    expect(Date.now() - t0).toBeLessThan(20_000);
  });
});

// Posting under load (#15): requests beyond a queue's depth wait in order in a bounded JS FIFO and are posted as
// completions free slots; a failure, a disconnect or close() cancels the waiting ones (ND_CANCELED) so nothing
// hangs; a request that fails before anybody awaits it does not end the process as an unhandled rejection.
import { spawnSync } from 'node:child_process';
import * as path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import type { Adapter, CompletionQueue, Connector, NdError, QueuePair, QueuePairOptions } from '../lib/index';
import { formatBytes } from '../lib/validate';
import { fixtures, ndError, openLocal, root, skipWhereDeviceCannot } from './helpers';

interface Pair {
  a: Adapter;
  b: Adapter;
  cqA: CompletionQueue;
  cqB: CompletionQueue;
  qa: QueuePair;
  qb: QueuePair;
  ca: Connector;
  cb: Connector;
}

const open: Adapter[] = [];

afterEach(async () => {
  await Promise.allSettled(open.splice(0).map((x) => x.close()));
});

/**
 * Two local adapters with a connected queue pair each; `beforeAccept` runs on qb before it accepts. Raw posts
 * need an explicit completion mode (test/fixtures/manual-driver.mjs polls driven adapters): `completion`.
 */
async function pair(
  optionsA: Partial<QueuePairOptions> = {},
  optionsB: Partial<QueuePairOptions> = {},
  beforeAccept?: (qb: QueuePair) => void,
  completion?: 'thread',
): Promise<Pair> {
  const { adapter: a, cq: cqA } = await openLocal(completion);
  const { adapter: b, cq: cqB } = await openLocal(completion);
  open.push(a, b);
  const qa = a.createQueuePair({ receiveCq: cqA, ...optionsA });
  const qb = b.createQueuePair({ receiveCq: cqB, ...optionsB });
  const listener = await b.listen();
  const accepting = (async () => {
    const c = await listener.getConnectionRequest();
    beforeAccept?.(qb);
    await c.accept(qb);
    return c;
  })();
  const ca = await a.connect(qa, listener.address);
  const cb = await accepting;
  await listener.close();
  return { a, b, cqA, cqB, qa, qb, ca, cb };
}

function codeOf(r: PromiseSettledResult<unknown>): string {
  return r.status === 'fulfilled' ? 'ok' : (r.reason as NdError).code;
}

describe('requests beyond the depth wait in order', () => {
  it('Promise.all of 1000 writes on an initiator queue of depth 16: every write lands, none fails', async () => {
    const { a, b, qa } = await pair({ initiatorDepth: 16 });
    const chunk = 512;
    const count = 1000;
    const src = await a.allocateMemory(chunk * count);
    const dst = await b.allocateMemory(chunk * count, { remoteWrite: true });
    for (let i = 0; i < src.length; i++) src.buffer[i] = (i * 7 + (i >>> 9)) & 0xff;
    const target = dst.remote();
    const writes = Array.from({ length: count }, (_, i) => qa.write(src.slice(i * chunk, chunk), target, { offset: i * chunk }));
    expect(qa.outstanding.initiator).toBe(16);
    expect(qa.queued.initiator).toBe(count - 16);
    const done = await Promise.all(writes);
    expect(done.every((c) => c.bytes === chunk && c.status === 0)).toBe(true);
    expect(Buffer.compare(dst.buffer, src.buffer)).toBe(0);
    expect(qa.queued.initiator).toBe(0);
    expect(qa.outstanding.initiator).toBe(0);
  });

  it('waiting Sends and waiting receives are posted in order: message i lands in receive i', async () => {
    const n = 64;
    const { a, b, qa, qb } = await pair({ initiatorDepth: 3 }, { receiveDepth: 2 });
    const rx = await b.allocateMemory(8 * n);
    const tx = await a.allocateMemory(8 * n);
    const receives = Array.from({ length: n }, (_, i) => qb.receive(rx.slice(8 * i, 8)));
    expect(qb.queued.receive).toBe(n - 2);
    // The receiver has only 2 receives posted: the sender must not outrun it, so send in rounds of 2.
    const sends: Promise<unknown>[] = [];
    for (let i = 0; i < n; i++) {
      new DataView(tx.buffer.buffer, tx.buffer.byteOffset + 8 * i, 8).setUint32(0, i + 1, true);
      sends.push(qa.send(tx.slice(8 * i, 8)));
      if (i % 2 === 1) await Promise.all([receives[i - 1], receives[i]]);
    }
    await Promise.all(sends);
    const got = (await Promise.all(receives)).map((c, i) => [c.bytes, new DataView(rx.buffer.buffer, rx.buffer.byteOffset + 8 * i, 8).getUint32(0, true)]);
    expect(got).toEqual(Array.from({ length: n }, (_, i) => [8, i + 1]));
  });

  it('a shared receive queue: receives beyond its depth wait and are posted in order', async () => {
    const n = 12;
    let srqB: import('../lib/index').SharedReceiveQueue | undefined;
    const { a, qa } = await pair({}, {}, () => undefined);
    // A second pair whose receiving QP uses an SRQ of depth 2.
    const { adapter: b, cq: cqB } = await openLocal();
    open.push(b);
    srqB = b.createSharedReceiveQueue({ depth: 2 });
    const qb = b.createQueuePair({ receiveCq: cqB, srq: srqB });
    const listener = await b.listen();
    const rx = await b.allocateMemory(8 * n);
    const receives = Array.from({ length: n }, (_, i) => srqB!.receive(rx.slice(8 * i, 8)));
    expect(srqB.outstanding).toBe(2);
    expect(srqB.queued).toBe(n - 2);
    const accepting = (async () => (await listener.getConnectionRequest()).accept(qb))();
    const q2 = a.createQueuePair({ receiveCq: qa.receiveCq });
    await a.connect(q2, listener.address);
    await accepting;
    const tx = await a.allocateMemory(8 * n);
    for (let i = 0; i < n; i++) {
      new DataView(tx.buffer.buffer, tx.buffer.byteOffset + 8 * i, 8).setUint32(0, 100 + i, true);
      await q2.send(tx.slice(8 * i, 8));
      await receives[i];
    }
    const got = Array.from({ length: n }, (_, i) => new DataView(rx.buffer.buffer, rx.buffer.byteOffset + 8 * i, 8).getUint32(0, true));
    expect(got).toEqual(Array.from({ length: n }, (_, i) => 100 + i));
    expect(srqB.queued).toBe(0);
  });
});

describe('messages', () => {
  it('a request beyond maxTransferLength names the limit (not a bare ND_BUFFER_OVERFLOW)', async () => {
    const { a, qa } = await pair({ maxInitiatorSge: 5 });
    const max = a.info.maxTransferLength;
    const size = Math.ceil(max / 4);
    const quarter = await a.allocateMemory(size);
    // max + 1 bytes from one quarter-size region named five times: the limit is checked on the request's length.
    const local = [quarter, quarter, quarter, quarter.slice(0, max - 3 * size), quarter.slice(0, 1)];
    const err = await ndError(qa.write(local, { address: 0x10000n, token: 1, length: 2 * max }));
    expect(err.code).toBe('ND_BUFFER_OVERFLOW');
    expect(err.message).toBe(
      `write failed: ND_BUFFER_OVERFLOW (0x80000005): ${max + 1} bytes exceed the adapter's maxTransferLength of ${formatBytes(max)} (${max} bytes): ` +
        'split the transfer into requests of at most that size',
    );
  });
});

describe('bind and invalidate', () => {
  it('wait in the initiator queue behind writes and complete in issue order', async (ctx) => {
    await skipWhereDeviceCannot(ctx, 'memory-windows');
    const { a, b, qa } = await pair({ initiatorDepth: 1 });
    const src = await a.allocateMemory(4096);
    const dst = await b.allocateMemory(4096, { remoteWrite: true });
    const mr = await a.allocateMemory(4096, { remoteRead: true, remoteWrite: true });
    const window = a.createMemoryWindow();
    const order: string[] = [];
    const requests = [
      qa.write(src, dst.remote()).then(() => order.push('write 1')),
      qa.bind(window, mr, { read: true }).then((remote) => order.push(`bind ${remote.length}`)),
      qa.write(src, dst.remote()).then(() => order.push('write 2')),
      qa.invalidate(window).then(() => order.push('invalidate')),
    ];
    expect(qa.queued.initiator).toBe(3);
    await Promise.all(requests);
    expect(order).toEqual(['write 1', 'bind 4096', 'write 2', 'invalidate']);
  });
});

describe('an empty poll', () => {
  it('returns one shared array, not frozen; a caller that adds to it keeps it, and the next empty poll returns another', async () => {
    const { adapter, cq } = await openLocal();
    open.push(adapter);
    const first = cq.poll();
    expect(first).toEqual([]);
    expect(Object.isFrozen(first)).toBe(false);
    expect(cq.poll(), 'the same array while nobody changed it').toBe(first);
    const mine = { mine: true } as unknown as (typeof first)[number];
    first.push(mine);
    const next = cq.poll(0);
    expect(next).not.toBe(first);
    expect(next).toEqual([]);
    expect(first, 'what the caller added stays').toEqual([mine]);
  });
});

describe('waiting requests never hang', () => {
  it('closing a shared receive queue cancels its waiting receives', async () => {
    const { adapter, cq } = await openLocal();
    open.push(adapter);
    const srq = adapter.createSharedReceiveQueue({ depth: 1 });
    const q = adapter.createQueuePair({ receiveCq: cq, srq });
    const rx = await adapter.allocateMemory(8);
    const receives = [srq.receive(rx), srq.receive(rx), srq.receive(rx)];
    expect(srq.queued).toBe(2);
    await srq.close();
    expect((await Promise.allSettled(receives)).map(codeOf)).toEqual(['ND_CANCELED', 'ND_CANCELED', 'ND_CANCELED']);
    expect(q.connector).toBeNull();
  });

  it('a disconnect cancels posted and waiting receives with ND_CANCELED; the waiting ones say they were never posted', async () => {
    const { a, qa, cb } = await pair({ receiveDepth: 4 });
    const rx = await a.allocateMemory(64);
    const receives = Array.from({ length: 20 }, (_, i) => qa.receive(rx.slice(i, 1)));
    expect(qa.queued.receive).toBe(16);
    await cb.disconnect();
    const results = await Promise.allSettled(receives);
    expect(results.map(codeOf)).toEqual(Array(20).fill('ND_CANCELED'));
    expect((results[19] as PromiseRejectedResult).reason.message).toBe(
      'receive failed: ND_CANCELED (0xC0000120): 1 bytes, never posted: it was waiting for a slot of the full receive queue when ' +
        'the queue pair was flushed (disconnected, or the connection failed)',
    );
    expect(qa.queued.receive).toBe(0);
  });

  it('flush() cancels waiting writes too, and the queue pair takes new ones afterwards', async () => {
    const { a, b, qa } = await pair({ initiatorDepth: 2 });
    const src = await a.allocateMemory(4096);
    const dst = await b.allocateMemory(4096, { remoteWrite: true });
    const writes = Array.from({ length: 10 }, () => qa.write(src, dst.remote()));
    expect(qa.queued.initiator).toBe(8);
    qa.flush();
    expect(qa.queued.initiator).toBe(0);
    const results = await Promise.allSettled(writes);
    // The two posted ones may have completed before the flush reached them; the waiting ones never ran.
    expect(results.slice(2).map(codeOf)).toEqual(Array(8).fill('ND_CANCELED'));
    expect((results[9] as PromiseRejectedResult).reason.message).toMatch(/never posted: .* the queue pair was flushed$/);
  });

  it('a Send the peer has no receive for fails with a hint, and the Sends waiting behind it are cancelled', async (ctx) => {
    await skipWhereDeviceCannot(ctx, 'send-without-receive-fails');
    const { a, qa } = await pair({ initiatorDepth: 1 });
    const tx = await a.allocateMemory(64);
    const sends = Array.from({ length: 5 }, () => qa.send(tx));
    const results = await Promise.allSettled(sends);
    expect(results.map(codeOf)).toEqual(['ND_REMOTE_ERROR', 'ND_CANCELED', 'ND_CANCELED', 'ND_CANCELED', 'ND_CANCELED']);
    expect((results[0] as PromiseRejectedResult).reason.message).toBe(
      'send failed: ND_REMOTE_ERROR (0xC000013D): 64 bytes (the peer refused it: a Send needs a receive posted at the peer, ' +
        'qp.receive() or srq.receive(), at least as large as the message; check that the peer posts its receives before this side sends)',
    );
    expect((results[1] as PromiseRejectedResult).reason.message).toBe(
      'send failed: ND_CANCELED (0xC0000120): 64 bytes, never posted: it was waiting for a slot of the full initiator queue when ' +
        'an earlier request of the queue pair failed with ND_REMOTE_ERROR (the queue pair is in error)',
    );
  });

  it('raw posts wait too; a cancelled one completes with ND_CANCELED through cq.poll()', async () => {
    const { a, qa, cqA, cb } = await pair({ receiveDepth: 1 }, {}, undefined, 'thread');
    const rx = await a.allocateMemory(8);
    qa.post('receive', rx, undefined, { context: 'first' });
    qa.post('receive', rx, undefined, { context: 'second' });
    expect(qa.queued.receive).toBe(1);
    await cb.disconnect();
    const seen: Array<[unknown, number]> = [];
    const deadline = Date.now() + 10_000;
    while (seen.length < 2 && Date.now() < deadline) {
      for (const c of cqA.poll()) seen.push([c.context, c.status]);
      await new Promise((r) => setTimeout(r, 5));
    }
    expect(seen.sort()).toEqual([
      ['first', 0xc0000120],
      ['second', 0xc0000120],
    ]);
  });
});

describe('failures carry the stack of the code that awaits the request', () => {
  it('a posted receive, a receive waiting for a slot and an SRQ receive, failed by a disconnect', async () => {
    const { a, qa, cb } = await pair({ receiveDepth: 1 });
    const rx = await a.allocateMemory(64);
    async function awaitsPostedReceive(): Promise<unknown> {
      return await qa.receive(rx.slice(0, 8));
    }
    async function awaitsWaitingReceive(): Promise<unknown> {
      return await qa.receive(rx.slice(8, 8));
    }
    const posted = awaitsPostedReceive().then(() => null, (e: NdError) => e);
    const waiting = awaitsWaitingReceive().then(() => null, (e: NdError) => e);
    expect(qa.queued.receive).toBe(1);
    await cb.disconnect();
    for (const [err, fn] of [[await posted, 'awaitsPostedReceive'], [await waiting, 'awaitsWaitingReceive']] as const) {
      expect(err?.code).toBe('ND_CANCELED');
      expect(err?.stack).toContain('NdError: receive failed: ND_CANCELED');
      expect(err?.stack).toContain(fn);
    }

    const { adapter, cq } = await openLocal();
    open.push(adapter);
    const srq = adapter.createSharedReceiveQueue({ depth: 1 });
    adapter.createQueuePair({ receiveCq: cq, srq });
    const buf = await adapter.allocateMemory(8);
    async function awaitsSrqReceive(): Promise<unknown> {
      return await srq.receive(buf);
    }
    const srqFailed = awaitsSrqReceive().then(() => null, (e: NdError) => e);
    await srq.close();
    expect((await srqFailed)?.stack).toContain('awaitsSrqReceive');
  });
});

describe('silent requests', () => {
  it('silent requests never wait, and nothing waits behind a queue full of silent ones (nothing would free a slot): both say why', async () => {
    const { a, b, qa } = await pair({ initiatorDepth: 4 }, {}, undefined, 'thread');
    const src = await a.allocateMemory(64);
    const dst = await b.allocateMemory(64, { remoteWrite: true });
    for (let i = 0; i < 4; i++) qa.post('write', src, dst.remote(), { silent: true });
    const thrown = (fn: () => void) => {
      try {
        fn();
      } catch (e) {
        return (e as NdError).message;
      }
      return 'no error';
    };
    expect(thrown(() => qa.post('write', src, dst.remote(), { silent: true }))).toBe(
      'write failed: ND_NO_MORE_ENTRIES (0x8000001A): the initiator queue is full (4 outstanding of depth 4) and a silent request does not ' +
        'wait for a slot (silent requests free theirs only when a later request completes): post it when the queue has room, or without silent',
    );
    expect(thrown(() => qa.post('write', src, dst.remote()))).toBe(
      'write failed: ND_NO_MORE_ENTRIES (0x8000001A): the initiator queue is full of silent requests (4 of depth 4), which free their ' +
        'slots only when a later request completes: post a request without silent before the queue fills, so that its completion retires them',
    );
    // With a signaled request among them, the waiting ones are posted as it completes.
    const { a: a2, b: b2, qa: q2 } = await pair({ initiatorDepth: 4 }, {}, undefined, 'thread');
    const src2 = await a2.allocateMemory(64);
    const dst2 = await b2.allocateMemory(64, { remoteWrite: true });
    for (let i = 0; i < 3; i++) q2.post('write', src2, dst2.remote(), { silent: true });
    const signaled = q2.write(src2, dst2.remote());
    const later = Array.from({ length: 8 }, () => q2.write(src2, dst2.remote()));
    await Promise.all([signaled, ...later]);
    expect(q2.outstanding.initiator).toBe(0);
  });
});

describe('unawaited requests', () => {
  it('a pre-posted receive whose peer dies rejects when awaited later and does not kill the process', () => {
    const r = spawnSync(process.execPath, [path.join(fixtures, 'unawaited.mjs')], { cwd: root, encoding: 'utf8', timeout: 60_000 });
    expect(r.stderr).not.toMatch(/Unhandled|unhandled/);
    expect(r.stdout.trim().split('\n')).toEqual([
      'disconnected',
      'receive: ND_CANCELED',
      'waiting receive: ND_CANCELED',
      'done',
    ]);
    expect(r.status).toBe(0);
  });

  it('misuse still rejects at once (an argument error is a bug to see, not a request to wait for)', async () => {
    const { qa } = await pair();
    const err = await ndError(qa.write(null, null as never));
    expect(err.code).toBe('ERR_ND_INVALID_ARGUMENT');
  });
});

// { signal } on the requests ND cannot withdraw (#29 item 5; docs/architecture.md "Aborting a request"): the
// promise rejects with ERR_ND_ABORTED at once. A request still waiting for a slot of its full queue is withdrawn
// (never posted). A posted one stays posted: its memory stays pinned (deregister() waits for it), and its completion
// comes once, to the error's `completion`, never to the rejected promise or to a later request.
import { afterEach, describe, expect, it } from 'vitest';
import type { Adapter, AbortedRequestError, CompletionQueue, QueuePair, QueuePairOptions, SharedReceiveQueue } from '../lib/index';
import { isSettled, ndError, openLocal } from './helpers';

const open: Adapter[] = [];
afterEach(async () => {
  await Promise.allSettled(open.splice(0).map((x) => x.close()));
});

/** Two local adapters with a connected queue pair each (qa → qb). */
async function pair(optionsB: (b: Adapter) => Partial<QueuePairOptions> = () => ({})): Promise<{ a: Adapter; b: Adapter; qa: QueuePair; qb: QueuePair; cqB: CompletionQueue }> {
  const { adapter: a, cq: cqA } = await openLocal();
  const { adapter: b, cq: cqB } = await openLocal();
  open.push(a, b);
  const qa = a.createQueuePair({ receiveCq: cqA });
  const qb = b.createQueuePair({ receiveCq: cqB, ...optionsB(b) });
  const listener = await b.listen();
  const accepting = listener.getConnectionRequest().then((c) => c.accept(qb));
  await a.connect(qa, listener.address);
  await accepting;
  await listener.close();
  return { a, b, qa, qb, cqB };
}

const text = (bytes: Uint8Array, n: number) => Buffer.from(bytes.subarray(0, n)).toString();

describe('a posted request whose signal aborts', () => {
  it('a receive rejects at once, stays posted and pinned, and its message goes to error.completion only', async () => {
    const { a, b, qa, qb } = await pair();
    const abandoned = await b.allocateMemory(64);
    const next = await b.allocateMemory(64);
    const src = await a.allocateMemory(64);
    const ac = new AbortController();
    const receiving = qb.receive(abandoned, { signal: ac.signal });
    ac.abort(new Error('stop'));
    const err = (await ndError(receiving)) as AbortedRequestError;
    expect(err.code).toBe('ERR_ND_ABORTED');
    expect((err.cause as Error).message).toBe('stop');
    expect(err.message).toMatch(/^receive: aborted; the request stays posted \(ND cannot withdraw one posted request\)/);
    expect(qb.outstanding.receive).toBe(1);
    // Its region cannot go while the receive is posted: deregister() waits for it.
    const freeing = abandoned.deregister();
    expect(await isSettled(freeing)).toBe(false);
    // The next message still lands in the abandoned receive (ND delivers to posted receives in order) and is
    // given to error.completion; the receive posted after gets the message after it, not the same one again.
    const later = qb.receive(next);
    src.buffer.set(Buffer.from('first'));
    await qa.send(src.slice(0, 5));
    src.buffer.set(Buffer.from('second'));
    await qa.send(src.slice(0, 6));
    const late = await err.completion!;
    expect(late).toMatchObject({ bytes: 5 });
    expect((await later).bytes).toBe(6);
    expect(text(abandoned.buffer, 5)).toBe('first');
    expect(text(next.buffer, 6)).toBe('second');
    await freeing; // released once its request completed
    expect(qb.outstanding.receive).toBe(0);
  });

  it('flushing the queue pair settles error.completion with ND_CANCELED and frees the memory', async () => {
    const { b, qb } = await pair();
    const region = await b.allocateMemory(64);
    const ac = new AbortController();
    const receiving = qb.receive(region, { signal: ac.signal });
    ac.abort();
    const err = (await ndError(receiving)) as AbortedRequestError;
    const freeing = region.deregister();
    expect(await isSettled(freeing)).toBe(false);
    await qb.flush();
    expect((await ndError(err.completion!)).code).toBe('ND_CANCELED');
    await freeing;
  });

  it('a Write rejects at once; the data is written all the same and error.completion says so', async () => {
    const { a, b, qa } = await pair();
    const src = await a.allocateMemory(256 * 1024);
    const dst = await b.allocateMemory(256 * 1024, { remoteWrite: true });
    src.buffer.fill(0x5a);
    const ac = new AbortController();
    const writing = qa.write(src, dst.remote(), { signal: ac.signal });
    ac.abort();
    const err = (await ndError(writing)) as AbortedRequestError;
    expect(err.code).toBe('ERR_ND_ABORTED');
    expect(await err.completion).toMatchObject({ bytes: 256 * 1024 });
    expect(dst.buffer.every((x) => x === 0x5a)).toBe(true);
  });
});

describe('a request still waiting for a slot whose signal aborts', () => {
  it('is withdrawn: never posted, its memory free at once, the requests behind it keep their order', async () => {
    const { a, b, qa, qb } = await pair(() => ({ receiveDepth: 1 }));
    const r1 = await b.allocateMemory(64);
    const r2 = await b.allocateMemory(64);
    const r3 = await b.allocateMemory(64);
    const src = await a.allocateMemory(64);
    const first = qb.receive(r1);
    const ac = new AbortController();
    const withdrawn = qb.receive(r2, { signal: ac.signal });
    const third = qb.receive(r3);
    expect(qb.queued.receive).toBe(2);
    ac.abort();
    const err = (await ndError(withdrawn)) as AbortedRequestError;
    expect(err.message).toBe('receive: aborted while it waited for a slot of its full queue: withdrawn, nothing was posted');
    expect(err.completion).toBeUndefined();
    expect(qb.queued.receive).toBe(1);
    await r2.deregister(); // nothing holds it
    src.buffer.set(Buffer.from('one'));
    await qa.send(src.slice(0, 3));
    expect((await first).bytes).toBe(3);
    // The slot first freed went to third (the receive behind the withdrawn one), not to r2.
    expect(qb.outstanding.receive).toBe(1);
    expect(qb.queued.receive).toBe(0);
    src.buffer.set(Buffer.from('two'));
    await qa.send(src.slice(0, 3));
    expect((await third).bytes).toBe(3);
    expect([text(r1.buffer, 3), text(r3.buffer, 3)]).toEqual(['one', 'two']);
  });

  it('a shared receive queue: a waiting receive is withdrawn, a posted one gives its message to error.completion', async () => {
    let srq!: SharedReceiveQueue;
    const { a, b, qa } = await pair((b) => ({ srq: (srq = b.createSharedReceiveQueue({ depth: 1 })) }));
    const r1 = await b.allocateMemory(64);
    const r2 = await b.allocateMemory(64);
    const src = await a.allocateMemory(64);
    const ac1 = new AbortController();
    const ac2 = new AbortController();
    const posted = srq.receive(r1, { signal: ac1.signal });
    const waiting = srq.receive(r2, { signal: ac2.signal });
    expect(srq.queued).toBe(1);
    ac2.abort();
    const withdrawn = (await ndError(waiting)) as AbortedRequestError;
    expect(withdrawn.message).toMatch(/withdrawn, nothing was posted$/);
    expect(srq.queued).toBe(0);
    ac1.abort();
    const err = (await ndError(posted)) as AbortedRequestError;
    expect(err.message).toMatch(/stays posted/);
    src.buffer.set(Buffer.from('hi'));
    await qa.send(src.slice(0, 2));
    expect(await err.completion).toMatchObject({ bytes: 2 });
    expect(text(r1.buffer, 2)).toBe('hi');
  });
});

describe('one signal for many requests', () => {
  it('64 receives posted ahead with one signal: one abort rejects them all, and Node warns of no listener leak', async () => {
    const { b, qb } = await pair();
    const region = await b.allocateMemory(64 * 64);
    const warnings: Error[] = [];
    const onWarning = (w: Error) => warnings.push(w);
    process.on('warning', onWarning);
    try {
      const ac = new AbortController();
      const receives = Array.from({ length: 64 }, (_, i) => qb.receive(region.slice(i * 64, 64), { signal: ac.signal }).catch((e) => e));
      ac.abort();
      const errs = await Promise.all(receives);
      expect(errs.map((e) => e.code)).toEqual(Array(64).fill('ERR_ND_ABORTED'));
      await new Promise((r) => setImmediate(r)); // warnings are emitted on the next tick
      expect(warnings.filter((w) => w.name === 'MaxListenersExceededWarning')).toEqual([]);
      await qb.flush();
      await Promise.all(errs.map((e) => (e as AbortedRequestError).completion!.catch(() => undefined)));
    } finally {
      process.off('warning', onWarning);
    }
  });
});

describe('a signal that cannot be used', () => {
  it('already aborted: nothing is posted; not an AbortSignal: ERR_ND_INVALID_ARGUMENT', async () => {
    const { b, qb } = await pair();
    const region = await b.allocateMemory(64);
    const err = await ndError(qb.receive(region, { signal: AbortSignal.abort('no') }));
    expect(err.code).toBe('ERR_ND_ABORTED');
    expect(err.cause).toBe('no');
    expect(qb.outstanding.receive).toBe(0);
    expect((await ndError(qb.receive(region, { signal: {} as AbortSignal }))).code).toBe('ERR_ND_INVALID_ARGUMENT');
    expect((await ndError(qb.send(region, { signal: 1 as never }))).code).toBe('ERR_ND_INVALID_ARGUMENT');
    expect((await ndError(qb.receive(region, { tag: 1 } as never))).code).toBe('ERR_ND_INVALID_ARGUMENT');
  });
});

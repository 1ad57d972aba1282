// Batched posting (qp.batch(), issue #26 item 1): many requests of a queue pair posted with one native call, with
// a completion per request or per `signalEvery` requests (ND_OP_FLAG_SILENT_SUCCESS). Each case runs in every
// completion mode (asked for explicitly: raw completions come only from cq.poll(), which the test calls itself);
// the variance projects (vitest.config.mts) run the file again against the provider's answers a vendor's may give.
import { afterEach, describe, expect, it } from 'vitest';
import { CompletionArrays, PostBatch, PreparedRequest, type Adapter, type CompletionQueue, type Connector, type QueuePair, type QueuePairOptions, type RawCompletion } from '../lib/index';
import { ndThrow, openLocal } from './helpers';

const MODES = process.platform === 'win32' ? (['thread', 'manual'] as const) : (['loop', 'thread', 'manual'] as const);
type Mode = (typeof MODES)[number];

interface Pair {
  a: Adapter;
  b: Adapter;
  cqA: CompletionQueue;
  qa: QueuePair;
  qb: QueuePair;
  ca: Connector;
}

const open: Adapter[] = [];

afterEach(async () => {
  await Promise.allSettled(open.splice(0).map((x) => x.close()));
});

async function pair(mode: Mode, optionsA: Partial<QueuePairOptions> = {}): Promise<Pair> {
  const { adapter: a, cq: cqA } = await openLocal(mode);
  const { adapter: b, cq: cqB } = await openLocal(mode);
  open.push(a, b);
  const qa = a.createQueuePair({ receiveCq: cqA, ...optionsA });
  const qb = b.createQueuePair({ receiveCq: cqB });
  const listener = await b.listen();
  const accepting = (async () => {
    const c = await listener.getConnectionRequest();
    await c.accept(qb);
    return c;
  })();
  const ca = await a.connect(qa, listener.address);
  await accepting;
  await listener.close();
  // Manual mode: the passive side's promise requests settle only when its CQ is polled (it posts nothing raw).
  if (mode === 'manual') drive(cqB, b);
  return { a, b, cqA, qa, qb, ca };
}

/** Manual mode: polls `cq` (settling its promise requests) until the adapter closes. */
function drive(cq: CompletionQueue, adapter: Adapter): void {
  const tick = (): void => {
    if (!adapter.open) return;
    try {
      cq.poll();
    } catch {
      return;
    }
    setImmediate(tick);
  };
  setImmediate(tick);
}

/**
 * Polls `cq` until `count` raw completions arrived (or 10 s passed); promise requests settle on the way. In every
 * mode they come in the CQ's order (a poll() takes what the poller thread took and has not delivered first).
 */
async function collect(cq: CompletionQueue, count: number, _mode?: Mode): Promise<RawCompletion[]> {
  const out: RawCompletion[] = [];
  const deadline = Date.now() + 10_000;
  while (out.length < count && Date.now() < deadline) {
    out.push(...cq.poll(count - out.length));
    if (out.length < count) await new Promise((r) => setImmediate(r));
  }
  return out;
}

/**
 * A batch of 8 Reads whose 4th names a bad token, with `signalEvery` `every`, polled until the last one reported:
 * request 3 and every later one fail (the peer refuses 3, the queue pair goes to error and the provider flushes what
 * follows), each once, in posting order, and every silent request before 3 is retired.
 */
/**
 * The completions of a batch that failed midway, up to the one with context `last` (numeric contexts in posting
 * order) and whatever follows within 50 ms: each at most once, in posting order in every mode (a poll() takes what
 * the poller thread took and has not delivered first).
 */
async function collectFailed(cq: CompletionQueue, last: number): Promise<RawCompletion[]> {
  const got: RawCompletion[] = [];
  const deadline = Date.now() + 10_000;
  while (!got.some((c) => c.context === last) && Date.now() < deadline) {
    got.push(...cq.poll());
    await new Promise((r) => setImmediate(r));
  }
  await new Promise((r) => setTimeout(r, 50));
  got.push(...cq.poll());
  const contexts = got.map((c) => c.context as number);
  expect(new Set(contexts).size, `no completion twice: ${contexts}`).toBe(contexts.length);
  expect(contexts, 'completions in posting order').toEqual([...contexts].sort((x, y) => x - y));
  return got;
}

async function failMidway(mode: Mode, every: number): Promise<void> {
  const { a, b, cqA, qa } = await pair(mode, { initiatorDepth: 16 });
  const sink = await a.allocateMemory(8 * 8);
  const exposed = await b.allocateMemory(64, { remoteRead: true });
  const good = exposed.remote();
  const bad = { ...good, token: (good.token ^ 0x5a5a5a5a) >>> 0 };
  const batch = qa.batch({ capacity: 8, signalEvery: every });
  for (let i = 0; i < 8; i++) batch.read(sink.slice(i * 8, 8), i === 3 ? bad : good, { context: i });
  batch.post();
  // Request 3 and every later one fail (the peer refuses 3, the queue pair goes to error and the provider flushes
  // what follows); the Reads before it may have completed or been flushed with it, as ND leaves to the provider.
  const got = await collectFailed(cqA, 7);
  const contexts = got.map((c) => c.context as number);
  got.sort((x, y) => (x.context as number) - (y.context as number));
  const status = new Map(got.map((c) => [c.context as number, c.status]));
  for (let i = 3; i < 8; i++) expect(status.get(i), `request ${i}`).toBeDefined();
  // ND_ACCESS_VIOLATION for the refused Read unless the flush reached it first; ND_CANCELED for the flushed ones.
  expect([0xc0000005, 0xc0000120], `request 3: ${status.get(3)?.toString(16)}`).toContain(status.get(3));
  for (let i = 4; i < 8; i++) expect(status.get(i), `request ${i}`).toBe(0xc0000120);
  // Once one failed, every later one (in posting order) failed; a success reported is a signalled request.
  const firstFailure = got.findIndex((c) => c.status !== 0);
  expect(got.slice(firstFailure).every((c) => c.status !== 0)).toBe(true);
  for (const c of got) if (c.status === 0) expect(((c.context as number) + 1) % every, `silent request ${c.context} reported a success`).toBe(0);
  // signalEvery 1: every request reports exactly once (in posting order, checked above).
  if (every === 1) expect([...contexts].sort((x, y) => x - y)).toEqual([0, 1, 2, 3, 4, 5, 6, 7]);
  expect(qa.outstanding.initiator).toBe(0);
  expect(sink.inFlight).toBe(0);
}

describe.each(MODES)('batched posting, %s mode', (mode) => {
  it('64 Writes in one batch with signalEvery 16: every byte lands, 4 completions (the 16th, 32nd, 48th, 64th)', async () => {
    const { a, b, cqA, qa } = await pair(mode, { initiatorDepth: 64 });
    const src = await a.allocateMemory(64 * 8);
    const dst = await b.allocateMemory(64 * 8, { remoteWrite: true });
    for (let i = 0; i < src.length; i++) src.buffer[i] = (i * 13 + 1) & 0xff;
    const remote = dst.remote();
    const batch = qa.batch({ capacity: 64, signalEvery: 16 });
    expect(batch).toBeInstanceOf(PostBatch);
    for (let i = 0; i < 64; i++) batch.write(src.slice(i * 8, 8), remote, { offset: i * 8, context: i });
    expect(batch.length).toBe(64);
    expect(batch.post()).toBe(64);
    expect(batch.length).toBe(0);
    expect(qa.outstanding.initiator).toBe(64);
    const got = await collect(cqA, 4);
    expect(got.map((c) => [c.context, c.type, c.status, c.bytes, c.qp === qa])).toEqual(
      [15, 31, 47, 63].map((i) => [i, 'write', 0, 8, true]),
    );
    // The silent ones were retired by those completions.
    expect(qa.outstanding.initiator).toBe(0);
    expect(src.inFlight).toBe(0);
    expect(cqA.poll()).toEqual([]);
    // Every Write landed where its offset says.
    expect(Buffer.compare(dst.buffer, src.buffer)).toBe(0);
    // The batch is reused: a second round posts again.
    for (let i = 0; i < 16; i++) batch.write(src.slice(i * 8, 8), remote, { offset: i * 8, context: 100 + i });
    expect(batch.post()).toBe(16);
    expect((await collect(cqA, 1)).map((c) => c.context)).toEqual([115]);
    expect(qa.outstanding.initiator).toBe(0);
  });

  it('a batch then a promise request on one queue pair: the peer receives them in the order they were issued', async () => {
    const { a, b, cqA, qa, qb } = await pair(mode, { initiatorDepth: 32 });
    const n = 8;
    const src = await a.allocateMemory(n + 1);
    const rx = await b.allocateMemory((n + 1) * 16);
    for (let i = 0; i <= n; i++) src.buffer[i] = 0x40 + i;
    const receives = Array.from({ length: n + 1 }, (_, i) => qb.receive(rx.slice(i * 16, 16)));
    const batch = qa.batch({ capacity: n });
    for (let i = 0; i < n; i++) batch.send(src.slice(i, 1), { context: i });
    batch.post();
    const last = qa.send(src.slice(n, 1));
    const raw = await collect(cqA, n);
    // Manual mode: the promise's completion is dequeued by a poll too.
    let settled = false;
    last.finally(() => (settled = true)).catch(() => undefined);
    while (!settled) {
      expect(cqA.poll()).toEqual([]);
      await new Promise((r) => setImmediate(r));
    }
    expect((await last).bytes).toBe(1);
    const done = await Promise.all(receives);
    expect(done.map((c) => c.bytes)).toEqual(Array.from({ length: n + 1 }, () => 1));
    expect(Array.from({ length: n + 1 }, (_, i) => rx.buffer[i * 16])).toEqual(Array.from({ length: n + 1 }, (_, i) => 0x40 + i));
    expect(raw.map((c) => [c.context, c.status])).toEqual(Array.from({ length: n }, (_, i) => [i, 0]));
    expect(qa.outstanding.initiator).toBe(0);
  });

  it.each([1, 8])('a batch that fails midway (signalEvery %i): every request that failed completes once with its ND status, in order; nothing lost or duplicated', async (every) => {
    await failMidway(mode, every);
  });
  it('cq.pollInto() fills caller-owned arrays: every completion of a batch once, with its numeric context, status, bytes and type', async () => {
    const { a, b, cqA, qa } = await pair(mode, { initiatorDepth: 32 });
    const src = await a.allocateMemory(32 * 8);
    const dst = await b.allocateMemory(32 * 8, { remoteWrite: true });
    const batch = qa.batch({ capacity: 32 });
    for (let i = 0; i < 32; i++) batch.write(src.slice(i * 8, 8), dst.remote(), { offset: i * 8, context: 1000 + i });
    batch.post();
    // A promise request among them settles on the way and is not written.
    const promised = qa.write(src.slice(0, 8), dst.remote());
    const out = new CompletionArrays(8);
    const seen: Array<[number, number, number, number]> = [];
    const deadline = Date.now() + 10_000;
    while (seen.length < 32 && Date.now() < deadline) {
      const n = cqA.pollInto(out);
      expect(n).toBeLessThanOrEqual(8);
      for (let i = 0; i < n; i++) seen.push([out.context[i], out.status[i], out.bytes[i], out.type[i]]);
      if (n === 0) await new Promise((r) => setImmediate(r));
    }
    seen.sort((x, y) => x[0] - y[0]);
    expect(seen).toEqual(Array.from({ length: 32 }, (_, i) => [1000 + i, 0, 8, 5]));
    let settled = false;
    promised.finally(() => (settled = true)).catch(() => undefined);
    while (!settled) {
      expect(cqA.pollInto(out, 4)).toBe(0);
      await new Promise((r) => setImmediate(r));
    }
    expect((await promised).bytes).toBe(8);
    expect(qa.outstanding.initiator).toBe(0);
    // Arrays too small for what is asked, or not arrays at all, or a closed queue: typed errors.
    expect(ndThrow(() => cqA.pollInto(out, 9)).code).toBe('ERR_ND_OUT_OF_RANGE');
    expect(ndThrow(() => cqA.pollInto({ capacity: 8 } as never)).code).toBe('ERR_ND_INVALID_ARGUMENT');
    expect(ndThrow(() => new CompletionArrays(0)).code).toBe('ERR_ND_OUT_OF_RANGE');
    await cqA.close();
    expect(ndThrow(() => cqA.pollInto(out)).code).toBe('ERR_ND_CLOSED');
  });

  it('misuse gives typed errors: a batch larger than the free slots, a region deregistered before post(), a closed queue pair', async () => {
    const { a, b, qa } = await pair(mode, { initiatorDepth: 4 });
    const src = await a.allocateMemory(64);
    const dst = await b.allocateMemory(64, { remoteWrite: true });
    const remote = dst.remote();
    const batch = qa.batch({ capacity: 8 });
    for (let i = 0; i < 5; i++) batch.write(src.slice(0, 8), remote);
    const full = ndThrow(() => batch.post());
    expect(full.code).toBe('ND_NO_MORE_ENTRIES');
    expect(full.message).toMatch(/the batch has 5 initiator requests and the initiator queue has 4 free slots of depth 4/);
    expect(batch.length).toBe(0);
    expect(qa.outstanding.initiator).toBe(0);
    expect(ndThrow(() => qa.batch({ capacity: 0 })).code).toBe('ERR_ND_OUT_OF_RANGE');
    expect(ndThrow(() => qa.batch({ signalEvery: 0 })).code).toBe('ERR_ND_OUT_OF_RANGE');
    expect(ndThrow(() => qa.batch({ size: 8 } as never)).code).toBe('ERR_ND_INVALID_ARGUMENT');
    const small = qa.batch({ capacity: 1 });
    small.write(src.slice(0, 8), remote);
    expect(ndThrow(() => small.write(src.slice(0, 8), remote)).code).toBe('ERR_ND_OUT_OF_RANGE');
    expect(ndThrow(() => small.write(src.slice(60, 8), remote)).code).toBe('ERR_ND_OUT_OF_RANGE'); // outside the region
    small.clear();
    // A region deregistered between add and post: nothing is posted.
    const temp = await a.allocateMemory(8);
    small.write(temp, remote);
    await temp.deregister();
    expect(ndThrow(() => small.post()).code).toBe('ERR_ND_CLOSED');
    expect(qa.outstanding.initiator).toBe(0);
    // A closed queue pair: adding and posting both refuse.
    small.write(src.slice(0, 8), remote);
    await qa.close();
    expect(ndThrow(() => small.post()).code).toBe('ERR_ND_CLOSED');
    expect(ndThrow(() => small.write(src.slice(0, 8), remote)).code).toBe('ERR_ND_CLOSED');
  });
});

// The race the test above meets now and then in thread mode, made to happen every time: the poller thread takes
// one result per GetResults and holds it undelivered for 100 ms (NETDIRECT_DEBUG_POLLER_STALL_MS, a debugging seam
// of binding/delivery/poller.h), so the test's cq.poll() runs while the poller holds request 3's failure and finds
// the flushed ones after it in the CQ. Were the poll to take those first, request 4's completion would retire
// request 3 (silent) as a success and its failure would arrive for a request already gone.
describe.skipIf(process.platform === 'win32')('batched posting, thread mode, the poller holding what it took', () => {
  afterEach(() => {
    delete process.env.NETDIRECT_DEBUG_POLLER_STALL_MS;
  });

  it.each([1, 8])('a batch that fails midway (signalEvery %i): a poll() never overtakes what the poller took', async (every) => {
    process.env.NETDIRECT_DEBUG_POLLER_STALL_MS = '100';
    await failMidway('thread', every);
  });
});

describe('batched posting on an unconnected queue pair', () => {
  it('the provider refuses the first request: ND_CONNECTION_INVALID, nothing posted', async () => {
    const { adapter, cq } = await openLocal('thread');
    open.push(adapter);
    const qp = adapter.createQueuePair({ receiveCq: cq });
    const src = await adapter.allocateMemory(8);
    const batch = qp.batch();
    batch.send(src).send(src);
    const err = ndThrow(() => batch.post());
    expect(err.code).toBe('ND_CONNECTION_INVALID');
    expect(err.message).toMatch(/request 0 of the batch of 2 \(8 bytes\) was refused: the 0 before it were posted/);
    expect(qp.outstanding.initiator).toBe(0);
    expect(src.inFlight).toBe(0);
  });
});

describe.each(MODES)('prepared requests, %s mode', (mode) => {
  it('a Write prepared once, posted by handle with an offset, a length and a context: every byte lands where the offset says', async () => {
    const { a, b, cqA, qa } = await pair(mode, { initiatorDepth: 32 });
    const src = await a.allocateMemory(64);
    const dst = await b.allocateMemory(32 * 8 + 8, { remoteWrite: true });
    for (let i = 0; i < src.length; i++) src.buffer[i] = (i * 7 + 3) & 0xff;
    const write = qa.prepare('write', src.slice(0, 8), dst.remote());
    expect(write).toBeInstanceOf(PreparedRequest);
    expect([write.operation, write.bytes]).toEqual(['write', 8]);
    for (let i = 0; i < 32; i++) write.post(i * 8, i % 2 === 0 ? 8 : 4, i);
    expect(qa.outstanding.initiator).toBe(32);
    expect(src.inFlight).toBe(32);
    const got = await collect(cqA, 32, mode);
    expect(got.map((c) => [c.context, c.type, c.status, c.bytes])).toEqual(Array.from({ length: 32 }, (_, i) => [i, 'write', 0, i % 2 === 0 ? 8 : 4]));
    expect(qa.outstanding.initiator).toBe(0);
    expect(src.inFlight).toBe(0);
    for (let i = 0; i < 32; i++) {
      const n = i % 2 === 0 ? 8 : 4;
      expect(Buffer.compare(dst.buffer.subarray(i * 8, i * 8 + n), src.buffer.subarray(0, n)), `slot ${i}`).toBe(0);
      if (n === 4) expect(Array.from(dst.buffer.subarray(i * 8 + 4, i * 8 + 8)), `slot ${i} beyond its length`).toEqual([0, 0, 0, 0]);
    }
  });

  it('prepared sends and receives of two SGEs cut at a length, and prepared Writes in a batch with signalEvery', async () => {
    const { a, b, cqA, qa, qb } = await pair(mode, { initiatorDepth: 32 });
    const s1 = await a.allocateMemory(4);
    const s2 = await a.allocateMemory(4);
    s1.buffer.set([1, 2, 3, 4]);
    s2.buffer.set([5, 6, 7, 8]);
    const rx = await b.allocateMemory(16);
    const receives = [qb.receive(rx.slice(0, 8)), qb.receive(rx.slice(8, 8))];
    const send = qa.prepare('send', [s1, s2]);
    expect(send.bytes).toBe(8);
    send.post(undefined, 6, 6);
    send.post(0, undefined, 8);
    const sent = await collect(cqA, 2, mode);
    expect(sent.map((c) => [c.context, c.bytes, c.status])).toEqual([[6, 6, 0], [8, 8, 0]]);
    expect((await Promise.all(receives)).map((c) => c.bytes)).toEqual([6, 8]);
    expect(Array.from(rx.buffer)).toEqual([1, 2, 3, 4, 5, 6, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8]);
    // In a batch: 16 Writes through one handle, a completion per 8.
    const dst = await b.allocateMemory(16 * 4, { remoteWrite: true });
    const write = qa.prepare('write', s1, dst.remote());
    const batch = qa.batch({ capacity: 16, signalEvery: 8 });
    for (let i = 0; i < 16; i++) batch.add(write, i * 4, 4, i);
    expect(batch.post()).toBe(16);
    expect((await collect(cqA, 2, mode)).map((c) => [c.context, c.bytes])).toEqual([[7, 4], [15, 4]]);
    expect(qa.outstanding.initiator).toBe(0);
    expect(Array.from(dst.buffer)).toEqual(Array.from({ length: 64 }, (_, i) => (i % 4) + 1));
  });

  it('misuse gives typed errors: bad offsets and lengths, a full queue, a region deregistered after prepare(), a closed queue pair', async () => {
    const { a, b, cqA, qa } = await pair(mode, { initiatorDepth: 2 });
    const src = await a.allocateMemory(16);
    const dst = await b.allocateMemory(16, { remoteWrite: true });
    const write = qa.prepare('write', src.slice(0, 8), dst.remote());
    expect(ndThrow(() => write.post(9)).code).toBe('ERR_ND_OUT_OF_RANGE'); // 8 bytes at 9 pass the remote's 16
    expect(ndThrow(() => write.post(0, 9)).code).toBe('ERR_ND_OUT_OF_RANGE'); // beyond the prepared 8
    expect(ndThrow(() => write.post(-1)).code).toBe('ERR_ND_INVALID_ARGUMENT');
    expect(ndThrow(() => write.post(0, 1.5)).code).toBe('ERR_ND_INVALID_ARGUMENT');
    expect(ndThrow(() => qa.prepare('send', src, undefined, { offset: 0, context: 1 } as never)).code).toBe('ERR_ND_INVALID_ARGUMENT');
    expect(ndThrow(() => qa.prepare('receive', src, undefined, { silent: true })).code).toBe('ERR_ND_INVALID_ARGUMENT');
    expect(ndThrow(() => qa.prepare('fetch' as never, src)).code).toBe('ERR_ND_INVALID_ARGUMENT');
    expect(ndThrow(() => qa.prepare('write', src.slice(0, 8), { ...dst.remote(), length: 4 })).code).toBe('ERR_ND_OUT_OF_RANGE');
    expect(ndThrow(() => qa.prepare('send', src).post(4)).code).toBe('ERR_ND_INVALID_ARGUMENT'); // a send takes no offset
    expect(ndThrow(() => qa.batch().add({} as never)).code).toBe('ERR_ND_INVALID_ARGUMENT');
    expect(qa.outstanding.initiator).toBe(0);
    // The queue holds 2: the third post is refused, not queued.
    write.post(0, 8, 1);
    write.post(8, 8, 2);
    const full = ndThrow(() => write.post(0, 8, 3));
    expect(full.code).toBe('ND_NO_MORE_ENTRIES');
    expect(full.message).toMatch(/does not wait/);
    expect((await collect(cqA, 2, mode)).map((c) => c.context)).toEqual([1, 2]);
    // A region with a posted prepared request is deregistered only after that request completed; the handle then
    // refuses to post.
    const temp = await a.allocateMemory(8);
    const viaTemp = qa.prepare('write', temp, dst.remote());
    viaTemp.post(0, 8, 'last');
    expect(temp.inFlight).toBe(1);
    let deregistered = false;
    const deregistering = temp.deregister().then(() => (deregistered = true));
    await new Promise((r) => setTimeout(r, 20));
    if (mode === 'manual') expect(deregistered, 'deregister() waits for the posted request').toBe(false);
    expect((await collect(cqA, 1)).map((c) => [c.context, c.status])).toEqual([['last', 0]]);
    await deregistering;
    expect(temp.inFlight).toBe(0);
    expect(ndThrow(() => viaTemp.post()).code).toBe('ERR_ND_CLOSED');
    expect(ndThrow(() => qa.batch().add(viaTemp)).code).toBe('ERR_ND_CLOSED');
    // Another queue pair's batch refuses the handle.
    const other = a.createQueuePair({ receiveCq: cqA });
    expect(ndThrow(() => other.batch().add(write)).code).toBe('ERR_ND_INVALID_ARGUMENT');
    await qa.close();
    expect(ndThrow(() => write.post()).code).toBe('ERR_ND_CLOSED');
  });
});

// Silent requests have no request table entry (lib/requests.ts SilentRequests): the queue pair keeps their contexts
// by number, pins their regions per run, and the addon marks their records (binding/delivery/records.h
// kRecordSilent). The semantics are those of any request: a failure or a flush completes with its status, a region
// they use is deregistered only once they are retired, and nothing is left behind when the queue pair closes.
describe.each(MODES)('silent requests, %s mode', (mode) => {
  const CANCELED = 0xc0000120;
  const ACCESS_VIOLATION = 0xc0000005;

  it('a batch of silent Writes that fails midway, taken with pollInto(): the failed one and every later one complete once, in order', async () => {
    const { a, b, cqA, qa } = await pair(mode, { initiatorDepth: 32 });
    const src = await a.allocateMemory(8);
    const dst = await b.allocateMemory(16 * 8, { remoteWrite: true });
    const good = dst.remote();
    const bad = { ...good, token: (good.token ^ 0x5a5a5a5a) >>> 0 };
    const write = qa.prepare('write', src, good);
    const batch = qa.batch({ capacity: 16, signalEvery: 4 });
    for (let i = 0; i < 16; i++) {
      if (i === 9) batch.write(src, bad, { offset: i * 8, context: 100 + i });
      else batch.add(write, i * 8, 8, 100 + i);
    }
    expect(batch.post()).toBe(16);
    expect(qa.outstanding.initiator).toBe(16);
    expect(src.inFlight).toBe(16);
    const out = new CompletionArrays(4);
    const seen: Array<[number, number]> = [];
    const deadline = Date.now() + 10_000;
    while (!seen.some(([c]) => c === 115) && Date.now() < deadline) {
      const n = cqA.pollInto(out);
      for (let i = 0; i < n; i++) seen.push([out.context[i], out.status[i]]);
      if (n === 0) await new Promise((r) => setImmediate(r));
    }
    const contexts = seen.map(([c]) => c);
    expect(new Set(contexts).size, `no completion twice: ${contexts}`).toBe(contexts.length);
    expect(contexts, 'completions in posting order').toEqual([...contexts].sort((x, y) => x - y));
    const status = new Map(seen);
    // The refused Write (unless the flush reached it first) and every later one, silent or not, complete.
    expect([ACCESS_VIOLATION, CANCELED], `request 9: ${status.get(109)?.toString(16)}`).toContain(status.get(109));
    for (let i = 10; i < 16; i++) expect(status.get(100 + i), `request ${i}`).toBe(CANCELED);
    const firstFailure = seen.findIndex(([, s]) => s !== 0);
    expect(seen.slice(firstFailure).every(([, s]) => s !== 0)).toBe(true);
    for (const [c, s] of seen) if (s === 0) expect((c - 100 + 1) % 4, `silent request ${c - 100} reported a success`).toBe(0);
    expect(qa.outstanding.initiator).toBe(0);
    expect(src.inFlight).toBe(0);
    expect(cqA.pollInto(out)).toBe(0);
  });

  it('silent requests pin their region: inFlight counts each, deregister() waits for the completion that retires them, later posts refuse', async () => {
    const { a, b, cqA, qa } = await pair(mode, { initiatorDepth: 32 });
    const temp = await a.allocateMemory(64);
    const dst = await b.allocateMemory(64, { remoteWrite: true });
    const write = qa.prepare('write', temp.slice(0, 8), dst.remote());
    const batch = qa.batch({ capacity: 8, signalEvery: 8 });
    for (let i = 0; i < 8; i++) batch.add(write, i * 8, 8, i);
    batch.post();
    // A silent qp.post() and a prepared silent one on the same region, then a signalled one that retires them.
    qa.post('write', temp.slice(8, 8), dst.remote(), { silent: true, context: 8 });
    qa.prepare('write', temp.slice(16, 8), dst.remote(), { silent: true }).post(16, 8, 9);
    qa.post('write', temp.slice(24, 8), dst.remote(), { context: 10 });
    expect(temp.inFlight).toBe(11);
    expect(qa.outstanding.initiator).toBe(11);
    let deregistered = false;
    const deregistering = temp.deregister().then(() => (deregistered = true));
    await new Promise((r) => setTimeout(r, 20));
    if (mode === 'manual') {
      expect(deregistered, 'deregister() waits for the silent requests').toBe(false);
      expect(temp.inFlight).toBe(11);
    }
    expect((await collect(cqA, 2)).map((c) => [c.context, c.status])).toEqual([[7, 0], [10, 0]]);
    await deregistering;
    expect(temp.inFlight).toBe(0);
    expect(qa.outstanding.initiator).toBe(0);
    expect(ndThrow(() => write.post()).code).toBe('ERR_ND_CLOSED');
    expect(ndThrow(() => qa.batch().add(write)).code).toBe('ERR_ND_CLOSED');
    expect(ndThrow(() => qa.post('write', temp.slice(0, 8), dst.remote(), { silent: true })).code).toBe('ERR_ND_CLOSED');
    expect(cqA.poll()).toEqual([]);
  });

  it('closing the queue pair with a batch pending: every signalled request completes once, silent ones only with a failure, none stays pinned', async () => {
    const { a, b, cqA, qa } = await pair(mode, { initiatorDepth: 64 });
    const src = await a.allocateMemory(8);
    const dst = await b.allocateMemory(64 * 8, { remoteWrite: true });
    const write = qa.prepare('write', src, dst.remote());
    const batch = qa.batch({ capacity: 32, signalEvery: 8 });
    for (let i = 0; i < 32; i++) batch.add(write, i * 8, 8, i);
    expect(batch.post()).toBe(32);
    // Silent requests after the batch's last signalled one: no completion of the queue pair will retire them.
    const silent = qa.prepare('write', src, dst.remote(), { silent: true });
    for (let i = 32; i < 36; i++) silent.post(i * 8, 8, i);
    expect(qa.outstanding.initiator).toBe(36);
    expect(src.inFlight).toBe(36);
    await qa.close();
    const got = cqA.poll(1000);
    const contexts = got.map((c) => c.context as number);
    expect(new Set(contexts).size, `no completion twice: ${contexts}`).toBe(contexts.length);
    for (const i of [7, 15, 23, 31]) expect(contexts, `signalled request ${i}`).toContain(i);
    for (const c of got) {
      expect(c.qp).toBe(qa);
      if (c.status === 0) expect(((c.context as number) + 1) % 8, `silent request ${c.context} reported a success`).toBe(0);
    }
    // The ones after the last signalled request: cancelled (by the provider's flush or at close), once each.
    for (let i = 32; i < 36; i++) expect(got.find((c) => c.context === i)?.status, `request ${i}`).toBe(CANCELED);
    expect(qa.outstanding.initiator).toBe(0);
    expect(src.inFlight).toBe(0);
    await src.deregister();
    expect(ndThrow(() => batch.add(write)).code).toBe('ERR_ND_CLOSED');
    expect(cqA.poll()).toEqual([]);
  });
});

// prepared.postMany(): a run of one prepared request posted with one native call and checked once for the run. Its
// requests are those the same batch.add() calls would make: numbered and pinned in posting order, silent but for
// every signalEvery-th and the last (by default the last only), each failure completing with its status.
describe.each(MODES)('runs of a prepared request (postMany), %s mode', (mode) => {
  const CANCELED = 0xc0000120;
  const ACCESS_VIOLATION = 0xc0000005;

  it('32 chunks written at a stride and told once; a run with signalEvery between silent and promise requests, in order', async () => {
    const { a, b, cqA, qa, qb } = await pair(mode, { initiatorDepth: 64 });
    const src = await a.allocateMemory(32 * 8);
    for (let i = 0; i < src.length; i++) src.buffer[i] = (i * 13 + 1) & 0xff;
    const dst = await b.allocateMemory(32 * 8 + 8, { remoteWrite: true });
    // The same 8 source bytes to remote offsets 8, 16, ..., 256 (offset 8, stride 8): one completion, the last's.
    const write = qa.prepare('write', src.slice(0, 8), dst.remote(), { offset: 8 });
    expect(write.postMany(32, { stride: 8, context: 100 })).toBe(32);
    expect(qa.outstanding.initiator).toBe(32);
    expect(src.inFlight).toBe(32);
    const told = await collect(cqA, 1);
    expect(told.map((c) => [c.context, c.type, c.status, c.bytes])).toEqual([[131, 'write', 0, 8]]);
    expect(qa.outstanding.initiator).toBe(0);
    expect(src.inFlight).toBe(0);
    expect(Array.from(dst.buffer.subarray(0, 8))).toEqual([0, 0, 0, 0, 0, 0, 0, 0]);
    for (let i = 0; i < 32; i++) expect(Buffer.compare(dst.buffer.subarray(8 + i * 8, 16 + i * 8), src.buffer.subarray(0, 8)), `chunk ${i}`).toBe(0);
    expect(cqA.poll()).toEqual([]);

    // Sends, so that the peer sees the order: a silent post(), a run of 8 with signalEvery 3 (a length cut to 1), a
    // promise send, a run of 2 of a silent prepared request and a signalled one.
    const n = 13;
    const rx = await b.allocateMemory(n * 16);
    const receives = Array.from({ length: n }, (_, i) => qb.receive(rx.slice(i * 16, 16)));
    for (let i = 0; i < n; i++) src.buffer[i] = 0x40 + i;
    qa.post('send', src.slice(0, 1), undefined, { silent: true, context: 'first' });
    const send = qa.prepare('send', src.slice(1, 2));
    expect(send.postMany(8, { signalEvery: 3, length: 1, context: 10 })).toBe(8);
    const promised = qa.send(src.slice(9, 1));
    const quiet = qa.prepare('send', src.slice(10, 1), undefined, { silent: true });
    expect(quiet.postMany(2, { context: 'quiet' })).toBe(2);
    qa.post('send', src.slice(12, 1), undefined, { context: 'last' });
    const raw = await collect(cqA, 4);
    expect(raw.map((c) => [c.context, c.status, c.bytes])).toEqual([[12, 0, 1], [15, 0, 1], [17, 0, 1], ['last', 0, 1]]);
    expect((await promised).bytes).toBe(1);
    const got = await Promise.all(receives);
    expect(got.map((c) => c.bytes)).toEqual(Array.from({ length: n }, () => 1));
    // The peer got the bytes in the order they were posted (the run's sends all carry src[1], cut to 1 byte).
    expect(Array.from({ length: n }, (_, i) => rx.buffer[i * 16])).toEqual([0x40, ...Array.from({ length: 8 }, () => 0x41), 0x49, 0x4a, 0x4a, 0x4c]);
    expect(qa.outstanding.initiator).toBe(0);
    expect(src.inFlight).toBe(0);
  });

  it('a run that fails midway (signalEvery 1 and the default): the failed request and every later one complete once with their ND status, in order', async () => {
    for (const every of [1, undefined]) {
      const { a, b, cqA, qa } = await pair(mode, { initiatorDepth: 16 });
      const sink = await a.allocateMemory(8);
      const exposed = await b.allocateMemory(64, { remoteRead: true });
      // The remote claims 128 bytes, the peer exposes 64: the Reads at offset 64 and beyond (request 4 on) are refused
      // by the peer, the queue pair goes to error and the provider flushes what follows.
      const read = qa.prepare('read', sink, { ...exposed.remote(), length: 128 });
      expect(read.postMany(8, { stride: 16, context: 0, signalEvery: every })).toBe(8);
      expect(sink.inFlight).toBe(8);
      const got = await collectFailed(cqA, 7);
      const contexts = got.map((c) => c.context as number);
      const status = new Map(got.map((c) => [c.context as number, c.status]));
      expect([ACCESS_VIOLATION, CANCELED], `request 4: ${status.get(4)?.toString(16)}`).toContain(status.get(4));
      for (let i = 5; i < 8; i++) expect(status.get(i), `request ${i}`).toBe(CANCELED);
      const firstFailure = got.findIndex((c) => c.status !== 0);
      expect(got.slice(firstFailure).every((c) => c.status !== 0)).toBe(true);
      // Default: only the last is signalled, so no success is reported; signalEvery 1: each request once.
      if (every === undefined) expect(got.every((c) => c.status !== 0)).toBe(true);
      else expect(contexts).toEqual([0, 1, 2, 3, 4, 5, 6, 7]);
      expect(qa.outstanding.initiator).toBe(0);
      expect(sink.inFlight).toBe(0);
      await Promise.allSettled(open.splice(0).map((x) => x.close()));
    }
  });

  it('misuse gives typed errors and posts nothing: bad counts and options, beyond the free slots, a deregistered region, a closed queue pair', async () => {
    const { a, b, cqA, qa } = await pair(mode, { initiatorDepth: 4 });
    const src = await a.allocateMemory(16);
    const dst = await b.allocateMemory(32, { remoteWrite: true });
    const write = qa.prepare('write', src.slice(0, 8), dst.remote());
    const code = (fn: () => unknown): string => ndThrow(fn).code;
    expect(code(() => write.postMany(0))).toBe('ERR_ND_OUT_OF_RANGE');
    expect(code(() => write.postMany(-2))).toBe('ERR_ND_OUT_OF_RANGE');
    expect(code(() => write.postMany(1.5))).toBe('ERR_ND_INVALID_ARGUMENT');
    expect(code(() => write.postMany('2' as never))).toBe('ERR_ND_INVALID_ARGUMENT');
    expect(code(() => write.postMany(2, { every: 2 } as never))).toBe('ERR_ND_INVALID_ARGUMENT');
    expect(code(() => write.postMany(2, null as never))).toBe('ERR_ND_INVALID_ARGUMENT');
    expect(code(() => write.postMany(2, { signalEvery: 0 }))).toBe('ERR_ND_OUT_OF_RANGE');
    expect(code(() => write.postMany(2, { stride: 0.5 }))).toBe('ERR_ND_INVALID_ARGUMENT');
    expect(code(() => write.postMany(2, { length: 9 }))).toBe('ERR_ND_OUT_OF_RANGE');
    expect(code(() => write.postMany(4, { stride: 9 }))).toBe('ERR_ND_OUT_OF_RANGE'); // the 4th, 8 bytes at 27, passes 32 bytes
    expect(code(() => write.postMany(4, { stride: 8, offset: 1 }))).toBe('ERR_ND_OUT_OF_RANGE');
    expect(code(() => write.postMany(2, { context: 0xffffffff }))).toBe('ERR_ND_OUT_OF_RANGE');
    expect(code(() => qa.prepare('send', src).postMany(2, { stride: 4 }))).toBe('ERR_ND_INVALID_ARGUMENT');
    const full = ndThrow(() => write.postMany(5));
    expect(full.code).toBe('ND_NO_MORE_ENTRIES');
    expect(qa.outstanding.initiator).toBe(0);
    expect(src.inFlight).toBe(0);
    // Beyond the free slots (not the depth): 3 in flight, a run of 2 is refused whole.
    write.postMany(3, { stride: 8, context: 1 });
    expect(code(() => write.postMany(2))).toBe('ND_NO_MORE_ENTRIES');
    expect(qa.outstanding.initiator).toBe(3);
    expect((await collect(cqA, 1)).map((c) => [c.context, c.status])).toEqual([[3, 0]]);
    expect(qa.outstanding.initiator).toBe(0);
    // A region deregistered after prepare().
    const temp = await a.allocateMemory(8);
    const viaTemp = qa.prepare('write', temp, dst.remote());
    await temp.deregister();
    expect(code(() => viaTemp.postMany(2))).toBe('ERR_ND_CLOSED');
    // A closed queue pair refuses.
    await qa.close();
    expect(code(() => write.postMany(1))).toBe('ERR_ND_CLOSED');
    expect(src.inFlight).toBe(0);
  });
});

describe('runs of a prepared request on an unconnected queue pair', () => {
  it('the provider refuses the first request: ND_CONNECTION_INVALID, nothing posted, nothing left pinned', async () => {
    const { adapter, cq } = await openLocal('thread');
    open.push(adapter);
    const qp = adapter.createQueuePair({ receiveCq: cq });
    const src = await adapter.allocateMemory(8);
    const err = ndThrow(() => qp.prepare('send', src).postMany(3, { signalEvery: 2 }));
    expect(err.code).toBe('ND_CONNECTION_INVALID');
    expect(err.message).toMatch(/request 0 of the run of 3 \(8 bytes\) was refused: the 0 before it were posted/);
    expect(qp.outstanding.initiator).toBe(0);
    expect(src.inFlight).toBe(0);
  });
});

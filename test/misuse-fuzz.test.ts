// Table-driven misuse sweep: every public method of every class is called with wrong types in every argument
// position, on closed objects, with foreign (other adapter) objects and with out-of-range segments. Each call must
// either succeed (the argument was acceptable) or fail with an NdError whose code is ERR_ND_* or an ND status name
// — never another exception type, never a crash (this file runs in the forks pool: the process must survive).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  NdError,
  openAdapter,
  type Adapter,
  type CompletionQueue,
  type MemoryRegion,
  type MemoryWindow,
  type QueuePair,
  type SharedReceiveQueue,
} from '../lib/index';

const sentinel = new Error('thrown by a hostile getter');
const hostileProxy = new Proxy(
  {},
  {
    get() {
      throw sentinel;
    },
    has() {
      throw sentinel;
    },
    ownKeys() {
      throw sentinel;
    },
  },
);

// Values that are wrong for (almost) every parameter.
function junkValues(): Array<[string, unknown]> {
  return [
    ['undefined', undefined],
    ['null', null],
    ['0', 0],
    ['-1', -1],
    ['1.5', 1.5],
    ['NaN', NaN],
    ['Infinity', Infinity],
    ['2**53', 2 ** 53],
    ['2**32', 2 ** 32],
    ['-0', -0],
    ['empty string', ''],
    ['string', 'x'],
    ['long string', 'y'.repeat(100_000)],
    ['true', true],
    ['symbol', Symbol('junk')],
    ['bigint', 1n],
    ['negative bigint', -1n],
    ['huge bigint', 2n ** 80n],
    ['object', {}],
    ['array', []],
    ['nested arrays', [[[]]]],
    ['function', () => 1],
    ['empty ArrayBuffer', new ArrayBuffer(0)],
    ['Uint8Array', new Uint8Array(4)],
    ['Date', new Date(0)],
    ['hostile proxy', hostileProxy],
    ['getter object', { get region() { throw sentinel; }, offset: 0, length: 1 }],
    ['segment-like with bigint', { region: 1n, offset: 0n, length: 1n }],
    ['remote-like with junk', { address: 'a', token: {}, length: -5 }],
    ['remote-like huge', { address: 2n ** 64n - 1n, token: 2 ** 32, length: 2 ** 40 }],
  ];
}

interface Outcome {
  kind: 'ok' | 'pending' | 'nd' | 'bad';
  detail: string;
}

function classify(e: unknown): Outcome {
  if (e === sentinel) return { kind: 'nd', detail: 'sentinel (the caller’s own exception)' };
  if (e instanceof NdError && typeof e.code === 'string' && /^(ERR_ND_[A-Z_]+|ND_[A-Z0-9_]+|STATUS_[A-Z_]+)$/.test(e.code)) {
    return { kind: 'nd', detail: e.code };
  }
  const name = (e as Error)?.constructor?.name ?? typeof e;
  let msg = '';
  try {
    msg = String((e as Error)?.message ?? e);
  } catch {
    msg = '(unprintable)';
  }
  return { kind: 'bad', detail: `${name}: ${msg}`.slice(0, 300) };
}

// Calls fn; a sync throw or an async rejection is classified. Pending beyond `ms` counts as accepted.
async function attempt(fn: () => unknown, ms = 100): Promise<Outcome> {
  let r: unknown;
  try {
    r = fn();
  } catch (e) {
    return classify(e);
  }
  if (r && typeof (r as Promise<unknown>).then === 'function') {
    const p = r as Promise<unknown>;
    p.catch(() => {}); // settled later (close) — never unhandled
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<Outcome>((res) => {
      timer = setTimeout(() => res({ kind: 'pending', detail: '' }), ms);
    });
    try {
      return await Promise.race([
        p.then(
          () => ({ kind: 'ok', detail: '' }) as Outcome,
          (e) => classify(e),
        ),
        timeout,
      ]);
    } finally {
      clearTimeout(timer);
    }
  }
  return { kind: 'ok', detail: '' };
}

let a: Adapter;
let b: Adapter;
let cqA: CompletionQueue;
let cqB: CompletionQueue;
let qp: QueuePair;
let qpB: QueuePair;
let mrA: MemoryRegion;
let mrB: MemoryRegion;
let mwA: MemoryWindow;
let mwB: MemoryWindow;
let srqA: SharedReceiveQueue;
const bad: string[] = [];

function record(where: string, o: Outcome): void {
  if (o.kind === 'bad') bad.push(`${where}: ${o.detail}`);
}

beforeAll(async () => {
  a = await openAdapter('127.0.0.1');
  b = await openAdapter('127.0.0.1');
  cqA = a.createCompletionQueue();
  cqB = b.createCompletionQueue();
  qp = a.createQueuePair({ receiveCq: cqA, receiveDepth: 64, initiatorDepth: 64, maxReceiveSge: 2, maxInitiatorSge: 2 });
  qpB = b.createQueuePair({ receiveCq: cqB });
  mrA = await a.allocateMemory(4096);
  mrB = await b.allocateMemory(4096);
  mwA = a.createMemoryWindow();
  mwB = b.createMemoryWindow();
  srqA = a.createSharedReceiveQueue();
});

afterAll(async () => {
  await a?.close();
  await b?.close();
});

// Each entry: a method and a factory of valid arguments; position i is replaced by junk in turn.
interface Entry {
  name: string;
  call: (args: unknown[]) => unknown;
  valid: () => unknown[];
}

function table(): Entry[] {
  const remote = () => ({ address: 0x1000n, token: 1, length: 64 });
  return [
    { name: 'openAdapter', call: (x) => (openAdapter as any)(...x), valid: () => ['127.0.0.1', {}] },
    { name: 'Adapter.createCompletionQueue', call: (x) => (a.createCompletionQueue as any)(...x), valid: () => [{ depth: 8 }] },
    { name: 'Adapter.createQueuePair', call: (x) => (a.createQueuePair as any)(...x), valid: () => [{ receiveCq: cqA }] },
    { name: 'Adapter.createQueuePair options.receiveDepth', call: (x) => a.createQueuePair({ receiveCq: cqA, receiveDepth: x[0] as any }), valid: () => [4] },
    { name: 'Adapter.createQueuePair options.maxInitiatorSge', call: (x) => a.createQueuePair({ receiveCq: cqA, maxInitiatorSge: x[0] as any }), valid: () => [1] },
    { name: 'Adapter.createQueuePair options.inlineDataSize', call: (x) => a.createQueuePair({ receiveCq: cqA, inlineDataSize: x[0] as any }), valid: () => [0] },
    { name: 'Adapter.createQueuePair options.srq', call: (x) => a.createQueuePair({ receiveCq: cqA, srq: x[0] as any }), valid: () => [undefined] },
    { name: 'Adapter.registerMemory', call: (x) => (a.registerMemory as any)(...x), valid: () => [new ArrayBuffer(64), 'readwrite'] },
    { name: 'Adapter.allocateMemory', call: (x) => (a.allocateMemory as any)(...x), valid: () => [64] },
    { name: 'Adapter.createSharedReceiveQueue', call: (x) => (a.createSharedReceiveQueue as any)(...x), valid: () => [{}] },
    { name: 'Adapter.connect', call: (x) => (a.connect as any)(...x), valid: () => [a.createQueuePair({ receiveCq: cqA }), '127.0.0.1:1', {}] },
    { name: 'Adapter.listen', call: (x) => (a.listen as any)(...x).then((l: any) => l.close()), valid: () => [{}] },
    { name: 'Adapter.queryAddressList', call: (x) => (a.queryAddressList as any)(...x), valid: () => [] },
    { name: 'Adapter.stats', call: (x) => (a.stats as any)(...x), valid: () => [] },
    { name: 'CompletionQueue.poll', call: (x) => (cqA.poll as any)(...x), valid: () => [4] },
    { name: 'CompletionQueue.resize', call: (x) => (cqA.resize as any)(...x), valid: () => [64] },
    { name: 'QueuePair.send', call: (x) => (qp.send as any)(...x), valid: () => [mrA.slice(0, 8), {}] },
    { name: 'QueuePair.receive', call: (x) => (qp.receive as any)(...x), valid: () => [mrA.slice(0, 8)] },
    { name: 'QueuePair.write', call: (x) => (qp.write as any)(...x), valid: () => [mrA.slice(0, 8), remote(), {}] },
    { name: 'QueuePair.read', call: (x) => (qp.read as any)(...x), valid: () => [mrA.slice(0, 8), remote(), {}] },
    { name: 'QueuePair.post', call: (x) => (qp.post as any)(...x), valid: () => ['send', mrA.slice(0, 8), undefined, {}] },
    { name: 'QueuePair.bind', call: (x) => (qp.bind as any)(...x), valid: () => [a.createMemoryWindow(), mrA, { read: true }] },
    { name: 'QueuePair.invalidate', call: (x) => (qp.invalidate as any)(...x), valid: () => [mwA] },
    { name: 'MemoryRegion.slice', call: (x) => (mrA.slice as any)(...x), valid: () => [0, 8] },
    { name: 'MemoryRegion.remote', call: (x) => (mrA.remote as any)(...x), valid: () => [0, 8] },
    { name: 'SharedReceiveQueue.receive', call: (x) => (srqA.receive as any)(...x), valid: () => [mrA.slice(0, 8)] },
    { name: 'Connector.connect', call: (x) => (a.createConnector().connect as any)(...x), valid: () => [a.createQueuePair({ receiveCq: cqA }), '127.0.0.1:1', {}] },
    { name: 'Connector.accept', call: (x) => (a.createConnector().accept as any)(...x), valid: () => [a.createQueuePair({ receiveCq: cqA }), {}] },
  ];
}

describe('wrong types in every argument position', () => {
  beforeAll(() => {
    bad.length = 0;
  });
  it('gives NdErrors, never other exceptions or a crash', async () => {
    let calls = 0;
    for (const e of table()) {
      const n = Math.max(e.valid().length, 1);
      for (let pos = 0; pos < n; ++pos) {
        for (const [label, junk] of junkValues()) {
          const args = e.valid();
          args[pos] = junk;
          record(`${e.name} arg ${pos} = ${label}`, await attempt(() => e.call(args), 50));
          ++calls;
        }
      }
      // Extra arguments are ignored or refused, never fatal.
      record(`${e.name} extra args`, await attempt(() => e.call([...e.valid(), 1, 'two', {}]), 50));
    }
    expect(calls).toBeGreaterThan(500);
    expect(bad, bad.join('\n')).toEqual([]);
  }, 120_000);
});

describe('foreign objects', () => {
  beforeAll(() => {
    bad.length = 0;
  });
  it('objects of another adapter are refused with ERR_ND_WRONG_ADAPTER (or ERR_ND_INVALID_ARGUMENT)', async () => {
    const remote = { address: 0x1000n, token: 1, length: 64 };
    const cases: Array<[string, () => unknown]> = [
      ['createQueuePair receiveCq', () => a.createQueuePair({ receiveCq: cqB })],
      ['createQueuePair initiatorCq', () => a.createQueuePair({ receiveCq: cqA, initiatorCq: cqB })],
      ['createQueuePair srq', () => a.createQueuePair({ receiveCq: cqA, srq: b.createSharedReceiveQueue() })],
      ['send', () => qp.send(mrB)],
      ['send segment', () => qp.send(mrB.slice(0, 4))],
      ['receive', () => qp.receive(mrB)],
      ['write', () => qp.write(mrB, remote)],
      ['read', () => qp.read(mrB.slice(0, 8), remote)],
      ['post', () => qp.post('write', mrB, remote)],
      ['bind window', () => qp.bind(mwB, mrA, { read: true })],
      ['bind region', () => qp.bind(a.createMemoryWindow(), mrB, { read: true })],
      ['invalidate', () => qp.invalidate(mwB)],
      ['srq receive', () => srqA.receive(mrB)],
      ['connect', () => a.connect(qpB, '127.0.0.1:1')],
      ['connector connect', () => a.createConnector().connect(qpB, '127.0.0.1:1')],
      ['connector accept', () => a.createConnector().accept(qpB)],
      ['a window as a region', () => qp.send(mwA as never)],
      ['a CQ as a region', () => qp.send(cqA as never)],
      ['a QP as a CQ', () => a.createQueuePair({ receiveCq: qp as never })],
    ];
    for (const [name, fn] of cases) {
      const o = await attempt(fn);
      record(`foreign ${name}`, o);
      expect(o.kind, `${name}: ${o.detail}`).toBe('nd');
      expect(o.detail, name).toMatch(/^ERR_ND_(WRONG_ADAPTER|INVALID_ARGUMENT|BUSY)$|^ND_/);
    }
    expect(bad, bad.join('\n')).toEqual([]);
  });
});

describe('out-of-range segments and remotes', () => {
  beforeAll(() => {
    bad.length = 0;
  });
  it('are refused with ERR_ND_OUT_OF_RANGE / ERR_ND_INVALID_ARGUMENT / ERR_ND_TOO_MANY_SGES', async () => {
    const segs: unknown[] = [
      { region: mrA, offset: 4096, length: 1 },
      { region: mrA, offset: 4095, length: 2 },
      { region: mrA, offset: -1, length: 1 },
      { region: mrA, offset: 0, length: -1 },
      { region: mrA, offset: 0, length: 2 ** 32 },
      { region: mrA, offset: 2 ** 53, length: 1 },
      { region: mrA, offset: 0.5, length: 1 },
      { region: mrA, offset: NaN, length: 1 },
      { region: mrA, offset: 0, length: Infinity },
      { region: mrA },
      { region: null, offset: 0, length: 1 },
      [mrA.slice(0, 1), mrA.slice(1, 1), mrA.slice(2, 1)], // maxSge 2
      new Array(1000).fill(mrA.slice(0, 1)),
    ];
    const remotes: unknown[] = [
      { address: 0xfffffffffffff001n, token: 1, length: 8192 },
      { address: -1n, token: 1, length: 8 },
      { address: 2n ** 64n, token: 1, length: 8 },
      { address: 0x1000n, token: -1, length: 8 },
      { address: 0x1000n, token: 2 ** 32, length: 8 },
      { address: 0x1000n, token: 1, length: -8 },
      { address: 0x1000n, token: 1, length: 4 }, // shorter than the local data
    ];
    for (const s of segs) {
      for (const op of ['send', 'receive', 'write', 'read'] as const) {
        const o = await attempt(() =>
          op === 'send' ? qp.send(s as never) : op === 'receive' ? qp.receive(s as never) : (qp as any)[op](s, { address: 0x1000n, token: 1, length: 1 << 20 }),
        );
        record(`segment ${op} ${JSON.stringify(s, (_k, v) => (typeof v === 'bigint' ? `${v}n` : v?.constructor?.name === 'MemoryRegion' ? 'mr' : v))?.slice(0, 80)}`, o);
        expect(o.kind).toBe('nd');
      }
    }
    for (const r of remotes) {
      for (const op of ['write', 'read'] as const) {
        const o = await attempt(() => (qp as any)[op](mrA.slice(0, 8), r));
        record(`remote ${op} ${String((r as any).address)}/${(r as any).token}/${(r as any).length}`, o);
        expect(o.kind).toBe('nd');
      }
    }
    for (const [off, len] of [[-1, 1], [0, 4097], [4096, 1], [1.5, 1], [NaN, 1], [0, -1], [2 ** 53, 0]] as const) {
      for (const m of ['slice', 'remote'] as const) {
        const o = await attempt(() => (mrA as any)[m](off, len));
        record(`${m}(${off}, ${len})`, o);
        expect(o.kind).toBe('nd');
      }
    }
    expect(bad, bad.join('\n')).toEqual([]);
    expect(qp.outstanding.initiator).toBe(0);
    // Only accepted receives (some with no SGE: null / []) and SRQ receives may hold the region.
    expect(mrA.inFlight).toBeLessThanOrEqual(qp.outstanding.receive + srqA.outstanding);
  });
});

describe('closed objects', () => {
  beforeAll(() => {
    bad.length = 0;
  });
  it('every method of a closed object fails with ERR_ND_CLOSED or an ND status; getters never throw', async () => {
    const c = await openAdapter('127.0.0.1');
    const cq = c.createCompletionQueue();
    const q = c.createQueuePair({ receiveCq: cq });
    const mr = await c.allocateMemory(256);
    const mw = c.createMemoryWindow();
    const srq = c.createSharedReceiveQueue();
    const conn = c.createConnector();
    const listener = await c.listen({});
    const pending = q.receive(mr.slice(0, 8)); // must settle when the QP closes
    pending.catch(() => {});
    await q.close();
    await conn.close();
    await listener.close();
    await srq.close();
    await mw.close();
    await mr.deregister();
    await cq.close();
    const settled = await Promise.allSettled([pending]);
    expect(settled[0].status).toBe('rejected');
    await c.close();
    const remote = { address: 0x1000n, token: 1, length: 64 };
    const calls: Array<[string, () => unknown]> = [
      ['qp.send', () => q.send(mr)],
      ['qp.receive', () => q.receive(mr)],
      ['qp.write', () => q.write(mr, remote)],
      ['qp.read', () => q.read(mr, remote)],
      ['qp.post', () => q.post('send', null)],
      ['qp.bind', () => q.bind(mw, mr, { read: true })],
      ['qp.invalidate', () => q.invalidate(mw)],
      ['qp.flush', () => q.flush()],
      ['qp.close again', () => q.close()],
      ['cq.poll', () => cq.poll()],
      ['cq.resize', () => cq.resize(16)],
      ['cq.close again', () => cq.close()],
      ['mr.slice', () => mr.slice(0, 1)],
      ['mr.remote', () => mr.remote()],
      ['mr.deregister again', () => mr.deregister()],
      ['mw.close again', () => mw.close()],
      ['srq.receive', () => srq.receive(mr)],
      ['srq.close again', () => srq.close()],
      ['conn.connect', () => conn.connect(q, '127.0.0.1:1')],
      ['conn.accept', () => conn.accept(q)],
      ['conn.completeConnect', () => conn.completeConnect()],
      ['conn.disconnect', () => conn.disconnect()],
      ['conn.close again', () => conn.close()],
      ['listener.getConnectionRequest', () => listener.getConnectionRequest()],
      ['listener.close again', () => listener.close()],
      ['adapter.createCompletionQueue', () => c.createCompletionQueue()],
      ['adapter.createQueuePair', () => c.createQueuePair({ receiveCq: cq })],
      ['adapter.registerMemory', () => c.registerMemory(new ArrayBuffer(8))],
      ['adapter.allocateMemory', () => c.allocateMemory(8)],
      ['adapter.createMemoryWindow', () => c.createMemoryWindow()],
      ['adapter.createSharedReceiveQueue', () => c.createSharedReceiveQueue()],
      ['adapter.createConnector', () => c.createConnector()],
      ['adapter.connect', () => c.connect(q, '127.0.0.1:1')],
      ['adapter.listen', () => c.listen()],
      ['adapter.queryAddressList', () => c.queryAddressList()],
      ['adapter.stats', () => c.stats()],
      ['adapter.close again', () => c.close()],
      ['a closed QP on a live adapter', () => a.connect(q, '127.0.0.1:1')],
      ['a closed CQ on a live adapter', () => a.createQueuePair({ receiveCq: cq })],
      ['a deregistered region on a live QP', () => qp.send(mr)],
      ['a closed window on a live QP', () => qp.bind(mw, mrA, { read: true })],
    ];
    for (const [name, fn] of calls) {
      const o = await attempt(fn, 500);
      record(`closed ${name}`, o);
      expect(o.kind, `${name}: ${o.detail}`).not.toBe('bad');
      expect(o.kind, `${name}`).not.toBe('pending');
      if (o.kind === 'nd') expect(o.detail, name).toMatch(/^ERR_ND_(CLOSED|WRONG_ADAPTER|BUSY|INVALID_ARGUMENT)$|^ND_/);
    }
    // Getters and properties of closed objects.
    const getters: Array<[string, () => unknown]> = [
      ['qp.outstanding', () => q.outstanding],
      ['qp.connector', () => q.connector],
      ['cq.depth', () => cq.depth],
      ['mr.address', () => mr.address],
      ['mr.localToken', () => mr.localToken],
      ['mr.remoteToken', () => mr.remoteToken],
      ['mr.registered', () => mr.registered],
      ['mr.inFlight', () => mr.inFlight],
      ['mw.remoteToken', () => mw.remoteToken],
      ['mw.bound', () => mw.bound],
      ['srq.outstanding', () => srq.outstanding],
      ['conn.state', () => conn.state],
      ['conn.qp', () => conn.qp],
      ['conn.readLimits', () => conn.readLimits],
      ['conn.localAddress', () => conn.localAddress],
      ['conn.peerAddress', () => conn.peerAddress],
      ['adapter.open', () => c.open],
    ];
    for (const [name, fn] of getters) {
      const o = await attempt(fn);
      record(`closed getter ${name}`, o);
      expect(o.kind, `${name}: ${o.detail}`).not.toBe('bad');
    }
    expect(bad, bad.join('\n')).toEqual([]);
  });
});

describe('state misuse on a live QP', () => {
  beforeAll(() => {
    bad.length = 0;
  });
  it('posts on an unconnected QP give an ND status; close settles everything', async () => {
    const q = a.createQueuePair({ receiveCq: cqA, receiveDepth: 4 });
    const outcomes: Outcome[] = [];
    for (const fn of [
      () => q.send(mrA.slice(0, 4)),
      () => q.write(mrA.slice(0, 4), { address: 0x1000n, token: 1, length: 64 }),
      () => q.read(mrA.slice(0, 4), { address: 0x1000n, token: 1, length: 64 }),
      () => q.invalidate(mwA),
      () => q.bind(a.createMemoryWindow(), mrA, { write: true }),
      () => q.flush(),
      () => q.flush(),
      () => q.receive(mrA.slice(0, 4)),
    ]) {
      const o = await attempt(fn);
      record('unconnected', o);
      outcomes.push(o);
    }
    expect(outcomes.every((o) => o.kind !== 'bad')).toBe(true);
    await q.close();
    await q.close();
    expect(q.outstanding).toEqual({ receive: 0, initiator: 0 });
    expect(bad, bad.join('\n')).toEqual([]);
  });
});

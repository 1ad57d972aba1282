// Misuse never crashes: wrong argument types, closed objects, foreign objects and segments out of range give an
// NdError with an ERR_ND_* code (status 0).
import { createServer, type AddressInfo, type Socket } from 'node:net';
import { constants as bufferConstants } from 'node:buffer';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { NdError, listAddresses, openAdapter, type Adapter, type CompletionQueue, type MemoryRegion, type QueuePair } from '../lib/index';
import { ndError, ndThrow } from './helpers';

let a: Adapter;
let b: Adapter;
let cqA: CompletionQueue;
let cqB: CompletionQueue;
let qp: QueuePair;
let mrA: MemoryRegion;
let mrB: MemoryRegion;
const remote = { address: 0x1000n, token: 1, length: 4096 };

function misuse(err: NdError, code: string): void {
  expect(err.code, err.message).toBe(code);
  expect(err.status).toBe(0);
  expect(err.name).toBe('NdError');
}

beforeAll(async () => {
  a = await openAdapter('127.0.0.1');
  b = await openAdapter('127.0.0.1');
  cqA = a.createCompletionQueue();
  cqB = b.createCompletionQueue();
  qp = a.createQueuePair({ receiveCq: cqA, receiveDepth: 4, initiatorDepth: 4, maxReceiveSge: 2, maxInitiatorSge: 2 });
  mrA = await a.allocateMemory(4096);
  mrB = await b.allocateMemory(4096);
});

afterAll(async () => {
  await a?.close();
  await b?.close();
});

describe('wrong argument types', () => {
  it('openAdapter', async () => {
    misuse(await ndError(openAdapter(42 as never)), 'ERR_ND_INVALID_ARGUMENT');
    misuse(await ndError(openAdapter('127.0.0.1', { completion: 'sometimes' as never })), 'ERR_ND_INVALID_ARGUMENT');
    misuse(await ndError(openAdapter('127.0.0.1', { spinMicros: -1 })), 'ERR_ND_OUT_OF_RANGE');
    misuse(await ndError(openAdapter('127.0.0.1', null as never)), 'ERR_ND_INVALID_ARGUMENT');
  });

  it('NETDIRECT_SPIN_MICROS that is not a whole number, or too large, is refused naming the variable', async () => {
    const saved = process.env.NETDIRECT_SPIN_MICROS;
    try {
      process.env.NETDIRECT_SPIN_MICROS = '50us';
      const bad = await ndError(openAdapter('127.0.0.1'));
      misuse(bad, 'ERR_ND_INVALID_ARGUMENT');
      expect(bad.message).toMatch(/NETDIRECT_SPIN_MICROS must be a whole number of microseconds, got "50us"/);
      process.env.NETDIRECT_SPIN_MICROS = '2000000';
      const big = await ndError(openAdapter('127.0.0.1'));
      misuse(big, 'ERR_ND_OUT_OF_RANGE');
      expect(big.message).toMatch(/NETDIRECT_SPIN_MICROS must be at most 1000000/);
      // The option wins over the variable; the adapter says which window it uses.
      const adapter = await openAdapter('127.0.0.1', { spinMicros: 0 });
      expect(adapter.spinMicros).toBe(0);
      await adapter.close();
      process.env.NETDIRECT_SPIN_MICROS = '40';
      const fromEnv = await openAdapter('127.0.0.1');
      expect(fromEnv.spinMicros).toBe(40);
      await fromEnv.close();
    } finally {
      if (saved === undefined) delete process.env.NETDIRECT_SPIN_MICROS;
      else process.env.NETDIRECT_SPIN_MICROS = saved;
    }
  });

  it('an address no provider serves is an ND error, not a crash', async () => {
    const err = await ndError(openAdapter('192.0.2.77'));
    expect(err.code).toMatch(/^ND_|^STATUS_/);
    expect(err.status).not.toBe(0);
  });

  it('registerMemory', async () => {
    misuse(await ndError(a.registerMemory('buffer' as never)), 'ERR_ND_INVALID_ARGUMENT');
    misuse(await ndError(a.registerMemory(Buffer.from('from the pool'))), 'ERR_ND_INVALID_ARGUMENT');
    misuse(await ndError(a.registerMemory(new SharedArrayBuffer(64) as never)), 'ERR_ND_INVALID_ARGUMENT');
    misuse(await ndError(a.registerMemory(new (ArrayBuffer as any)(64, { maxByteLength: 128 }))), 'ERR_ND_INVALID_ARGUMENT');
    misuse(await ndError(a.registerMemory(new ArrayBuffer(0))), 'ERR_ND_INVALID_ARGUMENT');
    misuse(await ndError(a.registerMemory(new ArrayBuffer(8), 'rw' as never)), 'ERR_ND_INVALID_ARGUMENT');
    misuse(await ndError(a.allocateMemory(-1)), 'ERR_ND_OUT_OF_RANGE');
    misuse(await ndError(a.allocateMemory(1.5)), 'ERR_ND_INVALID_ARGUMENT');
  });

  it('createQueuePair and createCompletionQueue', () => {
    misuse(ndThrow(() => a.createQueuePair(undefined as never)), 'ERR_ND_INVALID_ARGUMENT');
    misuse(ndThrow(() => a.createQueuePair({} as never)), 'ERR_ND_INVALID_ARGUMENT');
    misuse(ndThrow(() => a.createQueuePair({ receiveCq: mrA as never })), 'ERR_ND_INVALID_ARGUMENT');
    misuse(ndThrow(() => a.createQueuePair({ receiveCq: cqA, receiveDepth: 0 })), 'ERR_ND_OUT_OF_RANGE');
    misuse(ndThrow(() => a.createQueuePair({ receiveCq: cqA, receiveDepth: a.info.maxReceiveQueueDepth + 1 })), 'ERR_ND_OUT_OF_RANGE');
    misuse(ndThrow(() => a.createCompletionQueue({ depth: 'big' as never })), 'ERR_ND_INVALID_ARGUMENT');
    misuse(ndThrow(() => a.createCompletionQueue({ depth: a.info.maxCompletionQueueDepth + 1 })), 'ERR_ND_OUT_OF_RANGE');
  });

  it('posting', async () => {
    misuse(await ndError(qp.receive('memory' as never)), 'ERR_ND_INVALID_ARGUMENT');
    misuse(await ndError(qp.receive([mrA, 7] as never)), 'ERR_ND_INVALID_ARGUMENT');
    misuse(await ndError(qp.write(mrA, null as never)), 'ERR_ND_INVALID_ARGUMENT');
    misuse(await ndError(qp.write(mrA, { address: 1, token: 1, length: 4096 } as never)), 'ERR_ND_INVALID_ARGUMENT');
    misuse(await ndError(qp.send(mrA, 'inline' as never)), 'ERR_ND_INVALID_ARGUMENT');
    misuse(ndThrow(() => qp.post('atomic' as never, mrA)), 'ERR_ND_INVALID_ARGUMENT');
    misuse(ndThrow(() => qp.post('receive', mrA, undefined, { silent: true })), 'ERR_ND_INVALID_ARGUMENT');
    misuse(await ndError(qp.bind(mrA as never, mrA, { read: true })), 'ERR_ND_INVALID_ARGUMENT');
    misuse(await ndError(qp.bind(a.createMemoryWindow(), mrA, {})), 'ERR_ND_INVALID_ARGUMENT');
  });

  it('a connect to a malformed address', async () => {
    const q = a.createQueuePair({ receiveCq: cqA });
    misuse(await ndError(a.connect(q, 'no-port')), 'ERR_ND_INVALID_ARGUMENT');
    misuse(await ndError(a.connect(q, { host: '127.0.0.1', port: 70000 })), 'ERR_ND_OUT_OF_RANGE');
    misuse(await ndError(a.connect(mrA as never, '127.0.0.1:1')), 'ERR_ND_INVALID_ARGUMENT');
    await q.close();
  });
});

describe('segments out of range and too many SGEs', () => {
  it('are refused before reaching the provider', async () => {
    misuse(ndThrow(() => mrA.slice(4000, 97)), 'ERR_ND_OUT_OF_RANGE');
    misuse(ndThrow(() => mrA.slice(-1)), 'ERR_ND_OUT_OF_RANGE');
    misuse(ndThrow(() => mrA.remote(0, 4097)), 'ERR_ND_OUT_OF_RANGE');
    misuse(await ndError(qp.receive({ region: mrA, offset: 4000, length: 97 })), 'ERR_ND_OUT_OF_RANGE');
    misuse(await ndError(qp.receive({ region: mrA, offset: 4096, length: 1 })), 'ERR_ND_OUT_OF_RANGE');
    misuse(await ndError(qp.receive({ region: mrA, offset: 0.5, length: 1 })), 'ERR_ND_INVALID_ARGUMENT');
    misuse(await ndError(qp.receive([mrA.slice(0, 1), mrA.slice(1, 1), mrA.slice(2, 1)])), 'ERR_ND_TOO_MANY_SGES');
    misuse(await ndError(qp.write(mrA, remote, { offset: 1 })), 'ERR_ND_OUT_OF_RANGE');
    misuse(await ndError(qp.write(mrA, { address: 0xfffffffffffff001n, token: 1, length: 8192 })), 'ERR_ND_OUT_OF_RANGE');
    expect(qp.outstanding).toEqual({ receive: 0, initiator: 0 });
    expect(mrA.inFlight).toBe(0);
  });
});

describe('objects from another adapter', () => {
  it('are refused with ERR_ND_WRONG_ADAPTER', async () => {
    misuse(ndThrow(() => a.createQueuePair({ receiveCq: cqB })), 'ERR_ND_WRONG_ADAPTER');
    misuse(ndThrow(() => a.createQueuePair({ receiveCq: cqA, initiatorCq: cqB })), 'ERR_ND_WRONG_ADAPTER');
    misuse(await ndError(qp.receive(mrB)), 'ERR_ND_WRONG_ADAPTER');
    misuse(await ndError(qp.send([mrA.slice(0, 1), mrB.slice(0, 1)])), 'ERR_ND_WRONG_ADAPTER');
    misuse(await ndError(qp.bind(b.createMemoryWindow(), mrA, { read: true })), 'ERR_ND_WRONG_ADAPTER');
    misuse(await ndError(b.connect(qp, '127.0.0.1:1')), 'ERR_ND_WRONG_ADAPTER');
  });
});

describe('foreign receivers of the native objects', () => {
  it('a method called on another object is refused before it runs; an accessor with ERR_ND_FOREIGN_OBJECT', () => {
    // The native methods skip the type-tag check because V8 refuses a foreign receiver (method signature).
    const nativeCq = cqA._native as unknown as Record<string, (...args: unknown[]) => unknown>;
    const nativeMr = mrA._native as unknown as object;
    const poll = Object.getPrototypeOf(nativeCq).poll as (max: number) => unknown;
    for (const receiver of [{}, nativeMr, a._native, Object.create(Object.getPrototypeOf(nativeCq))]) {
      expect(() => poll.call(receiver, 1)).toThrow(TypeError);
    }
    const post = Object.getPrototypeOf(qp._native).post as (...args: number[]) => unknown;
    expect(() => post.call(nativeCq, 5, 1, 0, 0, 0, 0, 0)).toThrow(TypeError);
    const window = a.createMemoryWindow();
    const token = Object.getOwnPropertyDescriptor(Object.getPrototypeOf(window._native), 'remoteToken')!.get!;
    misuse(ndThrow(() => token.call(nativeCq)), 'ERR_ND_FOREIGN_OBJECT');
    misuse(ndThrow(() => token.call(nativeMr)), 'ERR_ND_FOREIGN_OBJECT');
    // Every accessor: its receiver is tag-checked before any C++ member runs (binding/addon/addon.h TaggedAccessor), so
    // no member is called on an object of another class (UBSan's vptr check in `npm run test:asan`).
    const nativeAdapter = a._native as unknown as object;
    const owners: Array<[object, string, object]> = [
      [nativeAdapter, 'info', nativeCq],
      [nativeAdapter, 'provider', nativeMr],
      [nativeCq, 'depth', nativeAdapter],
      [window._native as unknown as object, 'remoteToken', nativeAdapter],
    ];
    for (const [owner, name, foreign] of owners) {
      const get = Object.getOwnPropertyDescriptor(Object.getPrototypeOf(owner), name)!.get!;
      expect(() => get.call(owner), name).not.toThrow();
      for (const receiver of [foreign, {}, Object.create(Object.getPrototypeOf(owner))]) {
        misuse(ndThrow(() => get.call(receiver)), 'ERR_ND_FOREIGN_OBJECT');
      }
    }
  });
});

describe('closed objects', () => {
  it('a closed QP, a deregistered region, a closed CQ, a closed adapter', async () => {
    const c = await openAdapter('127.0.0.1');
    const cq = c.createCompletionQueue();
    const q = c.createQueuePair({ receiveCq: cq });
    const mr = await c.allocateMemory(128);
    await q.close();
    misuse(await ndError(q.receive(mr)), 'ERR_ND_CLOSED');
    misuse(await ndError(q.send(null)), 'ERR_ND_CLOSED');
    misuse(ndThrow(() => q.post('send', null)), 'ERR_ND_CLOSED');
    const q2 = c.createQueuePair({ receiveCq: cq });
    await mr.deregister();
    await mr.deregister(); // idempotent
    misuse(await ndError(q2.receive(mr)), 'ERR_ND_CLOSED');
    misuse(ndThrow(() => mr.remote()), 'ERR_ND_CLOSED');
    await cq.close();
    misuse(ndThrow(() => c.createQueuePair({ receiveCq: cq })), 'ERR_ND_CLOSED');
    misuse(ndThrow(() => cq.poll()), 'ERR_ND_CLOSED');
    misuse(await ndError(q2.receive(null)), 'ERR_ND_CLOSED'); // closed with its CQ
    await c.close();
    misuse(ndThrow(() => c.createCompletionQueue()), 'ERR_ND_CLOSED');
    misuse(await ndError(c.allocateMemory(8)), 'ERR_ND_CLOSED');
    misuse(await ndError(c.listen()), 'ERR_ND_CLOSED');
    misuse(ndThrow(() => c.stats()), 'ERR_ND_CLOSED');
    await c.close();
  });
});

describe('strict options: unknown keys and non-boolean flags are refused, message by message', () => {
  const message = (err: NdError) => {
    misuse(err, 'ERR_ND_INVALID_ARGUMENT');
    return err.message;
  };

  it('registerMemory access', async () => {
    expect(message(await ndError(a.registerMemory(new ArrayBuffer(8), { remotewrite: true } as never)))).toBe(
      "registerMemory: unknown access option 'remotewrite' (did you mean 'remoteWrite'?)",
    );
    expect(message(await ndError(a.registerMemory(new ArrayBuffer(8), { remoteWrite: 'yes' } as never)))).toBe(
      'registerMemory: access.remoteWrite must be true or false, got "yes"',
    );
    expect(message(await ndError(a.allocateMemory(8, { localWrite: 1 } as never)))).toBe(
      'registerMemory: access.localWrite must be true or false, got number 1',
    );
    expect(message(await ndError(a.registerMemory(new ArrayBuffer(8), { zzzzzzzz: true } as never)))).toBe(
      "registerMemory: unknown access option 'zzzzzzzz' (known access: localWrite, remoteRead, remoteWrite, readSink)",
    );
  });

  it('listen, openAdapter, listAddresses', async () => {
    expect(message(await ndError(a.listen({ prot: 4791 } as never)))).toBe("listen: unknown option 'prot' (did you mean 'port'?)");
    expect(message(await ndError(openAdapter('127.0.0.1', { completoin: 'thread' } as never)))).toBe(
      "openAdapter: unknown option 'completoin' (did you mean 'completion'?)",
    );
    expect(message(await ndError(listAddresses({ Provider: 'soft' } as never)))).toBe(
      "listAddresses: unknown option 'Provider' (did you mean 'provider'?)",
    );
  });

  it('createQueuePair, createCompletionQueue, createSharedReceiveQueue', () => {
    expect(message(ndThrow(() => a.createQueuePair({ receiveCq: cqA, recieveDepth: 4 } as never)))).toBe(
      "createQueuePair: unknown option 'recieveDepth' (did you mean 'receiveDepth'?)",
    );
    expect(message(ndThrow(() => a.createCompletionQueue({ dept: 4 } as never)))).toBe(
      "createCompletionQueue: unknown option 'dept' (did you mean 'depth'?)",
    );
    expect(message(ndThrow(() => a.createSharedReceiveQueue({ maxQueue: 4 } as never)))).toBe(
      "createSharedReceiveQueue: unknown option 'maxQueue' (did you mean 'maxQueued'?)",
    );
  });

  it('send, write, read, post and bind', async () => {
    expect(message(await ndError(qp.write(mrA, mrA.remote(), { ofset: 4 } as never)))).toBe("write: unknown option 'ofset' (did you mean 'offset'?)");
    expect(message(await ndError(qp.send(mrA, { inline: 1 } as never)))).toBe('send: inline must be true or false, got number 1');
    expect(message(await ndError(qp.read(mrA, mrA.remote(), { inline: true } as never)))).toBe(
      "read: unknown option 'inline' (known options: offset, fence, signal)",
    );
    expect(message(ndThrow(() => qp.post('write', mrA, mrA.remote(), { silet: true } as never)))).toBe(
      "write: unknown option 'silet' (did you mean 'silent'?)",
    );
    const window = a.createMemoryWindow();
    expect(message(await ndError(qp.bind(window, mrA, { raed: true } as never)))).toBe("bind: unknown access option 'raed' (did you mean 'read'?)");
    await window.close();
  });

  it('connect and accept', async () => {
    const q = a.createQueuePair({ receiveCq: cqA });
    expect(message(await ndError(a.connect(q, '127.0.0.1:1', { localport: 5 } as never)))).toBe(
      "connect: unknown option 'localport' (did you mean 'localPort'?)",
    );
    await q.close();
  });
});

describe('messages that say what happened and what to do', () => {
  it('a port in use names the address and says it is in use', async () => {
    const first = await a.listen();
    const err = await ndError(a.listen({ port: first.address.port }));
    expect(err.code).toBe('ND_SHARING_VIOLATION');
    expect(err.message).toBe(
      `listen: address 127.0.0.1:${first.address.port} is already in use (ND_SHARING_VIOLATION): another listener, in this or another ` +
        'process, has it; close that listener, pick another port, or pass port 0 (or no port) for an ephemeral one',
    );
    await first.close();
  });

  it('an address no adapter serves names it and the addresses that are served', async () => {
    const err = await ndError(a.listen({ host: '192.0.2.99' }));
    expect(err.code).toBe('ND_INVALID_ADDRESS');
    expect(err.message).toBe(
      `listen: address 192.0.2.99 is not served by this adapter (ND_INVALID_ADDRESS): it serves ${a.queryAddressList().join(', ')}; ` +
        'listen on one of those, or open the adapter of that address (listAddresses() lists every address a provider serves)',
    );
  });

  it('a connect to 0.0.0.0, :: or port 0 says it names no peer (the same on every provider)', async () => {
    for (const [remote, what] of [['0.0.0.0:4791', 'the unspecified address'], ['[::]:4791', 'the unspecified address'], ['127.0.0.1:0', 'port 0']]) {
      const qp = a.createQueuePair({ receiveCq: cqA });
      const err = await ndError(a.connect(qp, remote));
      expect(err.code).toBe('ND_INVALID_ADDRESS');
      expect(err.message).toBe(
        `connect: ${remote} names no peer (${what}): connect to the listener's address and port, e.g. listener.address`,
      );
      await qp.close();
    }
  });

  it('a detached ArrayBuffer is called detached, not zero bytes', async () => {
    const ab = new ArrayBuffer(64);
    const view = new Uint8Array(ab, 8, 8);
    structuredClone(ab, { transfer: [ab] });
    for (const buffer of [ab, view]) {
      const err = await ndError(a.registerMemory(buffer));
      misuse(err, 'ERR_ND_DETACHED');
      expect(err.message).toBe(
        'registerMemory: the ArrayBuffer is detached: it was transferred (postMessage/structuredClone with transfer, ' +
          'ArrayBuffer.prototype.transfer) and has no memory any more; register the buffer it was transferred to, or a new one',
      );
    }
    expect((await ndError(a.registerMemory(new ArrayBuffer(0)))).message).toBe(
      'registerMemory: cannot register zero bytes (ND refuses zero-length regions): register at least 1 byte',
    );
  });

  it('a part of a Buffer is called what it is, with what to register instead', async () => {
    const err = await ndError(a.registerMemory(Buffer.alloc(64).subarray(8, 16)));
    expect(err.message).toBe(
      'registerMemory: this Buffer (8 bytes at offset 8) is a view of part of a 64-byte ArrayBuffer (from subarray()/slice()); ' +
        'a Buffer is registered only whole, as it may share memory with unrelated data: register the whole buffer and use ' +
        'region.slice(8, 8) for this part, or pass a Uint8Array view (new Uint8Array(buf.buffer, offset, length)) if the rest of the ArrayBuffer is yours',
    );
    const pooled = Buffer.from('from the pool');
    // The pool's size is Node's (8 KiB up to Node 20, 64 KiB since): the message names the ArrayBuffer it found.
    expect((await ndError(a.registerMemory(pooled))).message).toMatch(new RegExp(`part of a ${pooled.buffer.byteLength}-byte ArrayBuffer, Node's shared Buffer pool`));
  });

  it('a region larger than one Uint8Array can view says so (not "Invalid typed array length")', async () => {
    // The longest Uint8Array is V8's: 4 GiB up to Node 20, 2^53 - 1 bytes since Node 22 (buffer.constants.MAX_LENGTH).
    // Past it, or past the adapter's maxRegistrationSize (1 TiB for the built-in provider), whichever is less.
    const bytes = Math.min(bufferConstants.MAX_LENGTH, a.info.maxRegistrationSize) + 1;
    const err = await ndError(a.allocateMemory(bytes));
    misuse(err, 'ERR_ND_OUT_OF_RANGE');
    expect(err.message).toMatch(new RegExp(`^allocateMemory: ${bytes} bytes exceed (the adapter's maxRegistrationSize of|\\d+ [KMGT]iB, the longest Uint8Array)`));
  });

  it('a connect to a plain TCP server times out with a hint that the peer is not an iWARP endpoint', async () => {
    const sockets = new Set<Socket>();
    const server = createServer((socket) => {
      sockets.add(socket);
      socket.on('error', () => undefined); // reset when the connector gives up
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const port = (server.address() as AddressInfo).port;
    const q = a.createQueuePair({ receiveCq: cqA });
    try {
      const err = await ndError(a.connect(q, { host: '127.0.0.1', port }));
      expect(err.code).toBe('ND_IO_TIMEOUT');
      expect(err.message).toBe(
        `connect failed: ND_IO_TIMEOUT (0xC00000B5): to 127.0.0.1:${port}: no MPA Reply came in time: if the peer accepted the TCP ` +
          'connection, it did not answer the MPA handshake (RFC 5044 §7) and is probably not an iWARP/netdirect endpoint ' +
          '(check the host and port); otherwise the host did not answer at all',
      );
    } finally {
      await q.close();
      for (const socket of sockets) socket.destroy();
      server.close();
    }
  }, 60_000);

  it('a write before connect says to connect first', async () => {
    const q = a.createQueuePair({ receiveCq: cqA });
    const err = await ndError(q.write(mrA, mrA.remote()));
    expect(err.code).toBe('ND_CONNECTION_INVALID');
    expect(err.message).toBe(
      'write failed: ND_CONNECTION_INVALID (0xC000023A): the queue pair is not connected: connect it first (adapter.connect(qp, remote), ' +
        'or connector.connect() then completeConnect(), or connector.accept(qp) on the passive side)',
    );
    await q.close();
  });
});

describe('queue depth', () => {
  it('with maxQueued 0, posting beyond the depth fails with ND_NO_MORE_ENTRIES, deterministically', async () => {
    const q = a.createQueuePair({ receiveCq: cqA, receiveDepth: 3, maxQueued: 0 });
    const posted = [q.receive(mrA.slice(0, 1)), q.receive(mrA.slice(1, 1)), q.receive(mrA.slice(2, 1))];
    const settled = Promise.allSettled(posted); // handled now: close() below rejects them (ND_CANCELED)
    const err = await ndError(q.receive(mrA.slice(3, 1)));
    expect([err.code, err.status]).toEqual(['ND_NO_MORE_ENTRIES', 0x8000001a]);
    expect(err.message).toBe(
      'receive failed: ND_NO_MORE_ENTRIES (0x8000001A): the receive queue is full (3 outstanding of depth 3) and maxQueued is 0 ' +
        '(no request waits): await some requests before posting more, or allow waiting with maxQueued',
    );
    expect(() => q.post('receive', mrA.slice(3, 1))).toThrow(expect.objectContaining({ code: 'ND_NO_MORE_ENTRIES' }));
    await q.close();
    expect((await settled).every((r) => r.status === 'rejected')).toBe(true);
  });

  it('beyond the depth requests wait up to maxQueued, then fail with a message that says what to do', async () => {
    const q = a.createQueuePair({ receiveCq: cqA, receiveDepth: 2, maxQueued: 2 });
    expect(q.maxQueued).toBe(2);
    const accepted = [0, 1, 2, 3].map((i) => q.receive(mrA.slice(i, 1)));
    expect(q.outstanding.receive).toBe(2);
    expect(q.queued).toEqual({ receive: 2, initiator: 0 });
    const err = await ndError(q.receive(mrA.slice(4, 1)));
    expect(err.message).toBe(
      'receive failed: ND_NO_MORE_ENTRIES (0x8000001A): the receive queue is full (2 outstanding of depth 2) and 2 more requests ' +
        'wait for a slot (maxQueued 2): await some requests before posting more, or raise maxQueued or the depth',
    );
    await q.close();
    const results = await Promise.allSettled(accepted);
    const codes = results.map((r) => (r.status === 'rejected' ? (r.reason as NdError).code : 'resolved'));
    expect(codes).toEqual(['ND_CANCELED', 'ND_CANCELED', 'ND_CANCELED', 'ND_CANCELED']);
    const never = (results[3] as PromiseRejectedResult).reason as NdError;
    expect(never.message).toBe(
      'receive failed: ND_CANCELED (0xC0000120): 1 bytes, never posted: it was waiting for a slot of the full receive queue when the queue pair was closed',
    );
    expect(q.queued).toEqual({ receive: 0, initiator: 0 });
  });

  it('maxQueued is checked', () => {
    misuse(ndThrow(() => a.createQueuePair({ receiveCq: cqA, maxQueued: -1 })), 'ERR_ND_OUT_OF_RANGE');
    misuse(ndThrow(() => a.createQueuePair({ receiveCq: cqA, maxQueued: 'many' as never })), 'ERR_ND_INVALID_ARGUMENT');
  });
});

describe('connection state misuse', () => {
  it('posting on an unconnected QP fails with an ND status, accept on an idle connector is refused', async () => {
    const q = a.createQueuePair({ receiveCq: cqA });
    const err = await ndError(q.send(mrA));
    expect(err.code).toMatch(/^ND_/);
    const connector = a.createConnector();
    misuse(await ndError(connector.accept(q)), 'ERR_ND_BUSY');
    misuse(await ndError(connector.completeConnect()), 'ERR_ND_BUSY');
    await connector.close();
    misuse(await ndError(connector.connect(q, '127.0.0.1:1')), 'ERR_ND_CLOSED');
    await q.close();
  });

  it('an aborted connect rejects with ERR_ND_ABORTED', async () => {
    const q = a.createQueuePair({ receiveCq: cqA });
    const listener = await b.listen({});
    const controller = new AbortController();
    const connecting = a.connect(q, listener.address, { signal: controller.signal });
    controller.abort();
    const err = await ndError(connecting);
    expect(err.code).toBe('ERR_ND_ABORTED');
    expect(err.name).toBe('AbortError');
    expect((await ndError(a.connect(q, listener.address, { signal: AbortSignal.abort() }))).code).toBe('ERR_ND_ABORTED');
    await listener.close();
    await q.close();
  });
});

// Messages that say what to do (#29 finding 7): each failure a user met names its cause and the fix, one test each.
// Both ends in this process over the built-in provider (loopback), so every status comes from a real peer.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openAdapter, type Adapter, type CompletionQueue, type QueuePair } from '../lib/index';
import { join } from '../lib/job/index';
import { ndError } from './helpers';

let a: Adapter;
let b: Adapter;
let cqa: CompletionQueue;
let cqb: CompletionQueue;

/** A fresh connected pair: each case breaks its own. */
async function pair(): Promise<[QueuePair, QueuePair]> {
  const qa = a.createQueuePair({ receiveCq: cqa });
  const qb = b.createQueuePair({ receiveCq: cqb });
  const listener = await b.listen({ port: 0 });
  const accepted = listener.getConnectionRequest().then((c) => c.accept(qb));
  await a.connect(qa, listener.address);
  await accepted;
  await listener.close();
  return [qa, qb];
}

beforeAll(async () => {
  a = await openAdapter('127.0.0.1');
  b = await openAdapter('127.0.0.1');
  cqa = a.createCompletionQueue();
  cqb = b.createCompletionQueue();
});

afterAll(async () => {
  await a?.close();
  await b?.close();
});

describe('messages that say what to do', () => {
  it('a Buffer posted unregistered points to registerMemory', async () => {
    const [qa] = await pair();
    const err = await ndError(qa.send(Buffer.from('hi') as never));
    expect(err.code).toBe('ERR_ND_INVALID_ARGUMENT');
    expect(err.message).toMatch(/got Buffer: memory is posted only once registered with the adapter: const region = await adapter\.registerMemory\(buffer\)/);
  });

  it('a Write the peer refuses names the likely causes: unknown token, out of range, no remoteWrite', async () => {
    const [qa] = await pair();
    const source = await a.allocateMemory(64);
    const readOnly = await b.allocateMemory(64); // no remoteWrite
    const err = await ndError(qa.write(source.slice(0, 8), readOnly.remote()));
    expect(err.code).toBe('ND_ACCESS_VIOLATION');
    expect(err.message).toMatch(/the peer refused the Write: its token is unknown there or no longer valid .*or the region lacks remoteWrite \(the peer registers it with \{ remoteWrite: true \}\)/);
  });

  it('the request after a failure says an earlier failure broke the queue pair, and which', async () => {
    const [qa] = await pair();
    const source = await a.allocateMemory(64);
    const readOnly = await b.allocateMemory(64);
    const first = qa.write(source.slice(0, 8), readOnly.remote());
    const second = qa.write(source.slice(0, 8), readOnly.remote());
    expect((await ndError(first)).code).toBe('ND_ACCESS_VIOLATION');
    const err = await ndError(second);
    expect(err.code).toBe('ND_CANCELED');
    expect(err.message).toMatch(/flushed: an earlier request of this queue pair failed, write ND_ACCESS_VIOLATION, and a queue pair stops at its first error/);
  });

  it('a receive too small for the message says the message was larger', async () => {
    const [qa, qb] = await pair();
    const small = await b.allocateMemory(4);
    const big = await a.allocateMemory(64);
    const received = qb.receive(small.slice(0, 4));
    await ndError(qa.send(big.slice(0, 64)));
    const err = await ndError(received);
    expect(err.code).toBe('ND_BUFFER_OVERFLOW');
    expect(err.message).toMatch(/receive of up to 4 bytes \(the message that arrived was larger than this receive/);
  });

  it("win.put(rank, 0, [1, 2, 3]) names put, not write, and says to wrap the numbers", async () => {
    const job = await join({ launcher: 'singleton' });
    try {
      const win = await job.allocateWindow(64);
      const err = await ndError(win.put(0, 0, [1, 2, 3] as never));
      expect(err.code).toBe('ERR_ND_INVALID_ARGUMENT');
      expect(err.operation).toBe('put');
      expect(err.message).toBe(
        'put: data must be a typed array (Float64Array, Uint8Array, a Buffer...), a MemoryRegion or a Segment (or an array of regions and segments), got an array of 3: wrap the numbers in a typed array, e.g. Float64Array.from([1, 2, 3])',
      );
      expect((await ndError(win.get(0, 0, 'x' as never))).operation).toBe('get');
    } finally {
      await job.close();
    }
  });
});

// recv() and sendrecv() that need not wait for ever (#29 finding 5): { timeoutMs, signal } bound the wait; the job goes
// on, and a message that comes after the receive gave up goes to the next receive (none is lost). Two ranks in this
// process over an explicit rendezvous, and a job of one rank receiving from itself.
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { join, type Job } from '../lib/job/index';
import { ndError } from './helpers';

describe('recv with a timeout or a signal', () => {
  let r0: Job;
  let r1: Job;
  beforeAll(async () => {
    const secret = randomBytes(32).toString('hex');
    const port = 20000 + Math.floor(Math.random() * 10000);
    const at = { launcher: 'rendezvous' as const, rendezvous: `127.0.0.1:${port}`, size: 2, secret, address: '127.0.0.1', timeoutMs: 20_000 };
    [r0, r1] = await Promise.all([join({ ...at, rank: 0 }), join({ ...at, rank: 1 })]);
  });
  afterAll(async () => {
    await Promise.all([r0?.close(), r1?.close()]);
  });

  it('a recv that times out rejects ERR_ND_JOB_TIMEOUT; the message sent after it reaches the next recv', async () => {
    const err = await ndError(r0.recv(1, { tag: 7, timeoutMs: 50 }));
    expect(err.code).toBe('ERR_ND_JOB_TIMEOUT');
    expect(err.message).toBe('recv: no message from rank 1 with tag 7 came within timeoutMs 50 ms');
    await r1.send(Float64Array.of(1.5), 0, { tag: 7 });
    expect(Array.from(await r0.recv(1, { tag: 7, timeoutMs: 10_000 }))).toEqual([1.5]);
    expect(r0.failure).toBeNull();
  });

  it('a signal ends the wait with ERR_ND_ABORTED; sendrecv takes the same options', async () => {
    const ac = new AbortController();
    const waiting = r0.recv(1, { tag: 8, signal: ac.signal });
    ac.abort();
    expect((await ndError(waiting)).code).toBe('ERR_ND_ABORTED');
    const err = await ndError(r1.sendrecv(Int32Array.of(1), 0, 0, { recvTag: 9, timeoutMs: 50 }));
    expect(err.code).toBe('ERR_ND_JOB_TIMEOUT');
    // The Send of that sendrecv was delivered: rank 0 still receives it.
    expect(Array.from(await r0.recv(1, { timeoutMs: 10_000 }))).toEqual([1]);
  });

  it('bad options are typed errors', async () => {
    expect((await ndError(r0.recv(1, { timeoutMs: 0 }))).code).toBe('ERR_ND_OUT_OF_RANGE');
    expect((await ndError(r0.recv(1, { timeoutMs: 1.5 }))).code).toBe('ERR_ND_OUT_OF_RANGE');
    expect((await ndError(r0.recv(1, { signal: {} as never }))).code).toBe('ERR_ND_INVALID_ARGUMENT');
  });
});

describe('a job of one rank receiving from itself', () => {
  it('times out, then gets the message sent after', async () => {
    const job = await join({ launcher: 'singleton' });
    try {
      expect((await ndError(job.recv(0, { tag: 3, timeoutMs: 20 }))).code).toBe('ERR_ND_JOB_TIMEOUT');
      await job.send(Uint8Array.of(9), 0, { tag: 3 });
      expect(Array.from(await job.recv(0, { tag: 3, timeoutMs: 1000 }))).toEqual([9]);
    } finally {
      await job.close();
    }
  });
});

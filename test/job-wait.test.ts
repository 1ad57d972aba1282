// Waits of the job that need not last for ever (#29 finding 5). recv() and sendrecv(): { timeoutMs, signal } bound
// the wait; the job goes on, and a message that comes after the receive gave up goes to the next receive (none is
// lost). The collectives: the same options, but giving up fails the job on every rank (ERR_ND_JOB_ABANDONED) and
// later calls say so; an options mistake or a signal aborted before the call starts nothing. Two ranks in this
// process over an explicit rendezvous, and a job of one rank.
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

  it('32 receives waiting on one signal: one abort ends them all, and Node warns of no listener leak', async () => {
    const warnings: Error[] = [];
    const onWarning = (w: Error) => warnings.push(w);
    process.on('warning', onWarning);
    try {
      const ac = new AbortController();
      const waiting = Array.from({ length: 32 }, (_, i) => ndError(r0.recv(1, { tag: 100 + i, signal: ac.signal })));
      ac.abort();
      expect((await Promise.all(waiting)).map((e) => e.code)).toEqual(Array(32).fill('ERR_ND_ABORTED'));
      await new Promise((r) => setImmediate(r));
      expect(warnings.filter((w) => w.name === 'MaxListenersExceededWarning')).toEqual([]);
      expect(r0.failure).toBeNull();
    } finally {
      process.off('warning', onWarning);
    }
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

/** The ranks of a fresh job in this process (a collective given up on fails its job, so each case takes its own). */
async function ranks(size: number, completion?: 'manual' | 'loop', spinMicros?: number): Promise<Job[]> {
  const secret = randomBytes(32).toString('hex');
  const port = 20000 + Math.floor(Math.random() * 10000);
  const at = { launcher: 'rendezvous' as const, rendezvous: `127.0.0.1:${port}`, size, secret, address: '127.0.0.1', timeoutMs: 20_000, completion, spinMicros };
  return Promise.all(Array.from({ length: size }, (_, rank) => join({ ...at, rank })));
}
const pair = () => ranks(2) as Promise<[Job, Job]>;

describe('collectives with a timeout or a signal', () => {
  it('a barrier that times out rejects ERR_ND_JOB_TIMEOUT naming the silent rank; both ranks then fail ERR_ND_JOB_ABANDONED', async () => {
    const [r0, r1] = await pair();
    try {
      const err = await ndError(r0.barrier({ timeoutMs: 50 }));
      expect(err.code).toBe('ERR_ND_JOB_TIMEOUT');
      expect(err.message).toBe(
        'barrier: rank 1 did not answer within timeoutMs 50 ms; the job is failed (job.failure: ERR_ND_JOB_ABANDONED): a collective given up on one rank cannot be resumed',
      );
      expect(r0.failure?.code).toBe('ERR_ND_JOB_ABANDONED');
      expect(r0.failure?.peer).toBe(0);
      const seen = await r1.failed;
      expect(seen.code).toBe('ERR_ND_JOB_ABANDONED');
      expect(seen.peer).toBe(0);
      expect(seen.message).toBe(
        'barrier: rank 0 gave up on this call after timeoutMs 50 ms, waiting for rank 1; a collective given up on one rank cannot be resumed, so the job is failed on every rank: close() it',
      );
      // Later calls, on either rank, collective or not, throw the job's failure.
      expect((await ndError(r1.allreduce(Float64Array.of(1)))).code).toBe('ERR_ND_JOB_ABANDONED');
      expect((await ndError(r0.barrier())).code).toBe('ERR_ND_JOB_ABANDONED');
      expect((await ndError(r0.send(Int32Array.of(1), 1))).code).toBe('ERR_ND_JOB_ABANDONED');
    } finally {
      await Promise.all([r0.close(), r1.close()]);
    }
  });

  // 'manual' completion mode: only cq.poll() dequeues; the job polls its own CQs, busily while a call waits and every
  // few milliseconds between calls (Job._drive, Job._idle), so a rank in no call still learns of the failure.
  it('manual completion mode: the rank that gives up times out, and the idle peer still learns of it (job.failed)', async () => {
    const [r0, r1] = (await ranks(2, 'manual')) as [Job, Job];
    try {
      expect([r0.adapter.completion, r1.adapter.completion]).toEqual(['manual', 'manual']);
      await Promise.all([r0.barrier({ timeoutMs: 10_000 }), r1.barrier({ timeoutMs: 10_000 })]);
      expect((await ndError(r0.barrier({ timeoutMs: 50 }))).code).toBe('ERR_ND_JOB_TIMEOUT');
      let timer: NodeJS.Timeout | undefined;
      const seen = await Promise.race([r1.failed, new Promise<null>((r) => (timer = setTimeout(() => r(null), 5000)))]);
      clearTimeout(timer);
      expect(seen?.code).toBe('ERR_ND_JOB_ABANDONED');
      expect(seen?.peer).toBe(0);
    } finally {
      await Promise.all([r0.close(), r1.close()]);
    }
  });

  it('a peer waiting in the same collective is released with the failure instead of waiting for ever', async () => {
    const [r0, r1, r2] = await ranks(3);
    try {
      // Ranks 0 and 1 are in an allreduce that rank 2 never joins; rank 0 gives up, rank 1 waits with no limit.
      const stuck = ndError(r1.allreduce(Float64Array.of(2)));
      const err = await ndError(r0.allreduce(Float64Array.of(1), 'sum', { timeoutMs: 30 }));
      expect(err.code).toBe('ERR_ND_JOB_TIMEOUT');
      expect(err.message).toMatch(/^allreduce: ranks? [12](, 2)? did not answer within timeoutMs 30 ms/);
      const released = await stuck;
      expect(released.code).toBe('ERR_ND_JOB_ABANDONED');
      expect(released.peer).toBe(0);
      expect((await r2.failed).code).toBe('ERR_ND_JOB_ABANDONED');
    } finally {
      await Promise.all([r0.close(), r1.close(), r2.close()]);
    }
  });

  it('a signal that aborts mid-call rejects ERR_ND_ABORTED (cause: its reason) and fails the job', async () => {
    const [r0, r1] = await pair();
    try {
      const ac = new AbortController();
      const waiting = r1.allreduce(Float64Array.of(1, 2), 'max', { signal: ac.signal });
      ac.abort(new Error('user pressed stop'));
      const err = await ndError(waiting);
      expect(err.code).toBe('ERR_ND_ABORTED');
      expect((err.cause as Error).message).toBe('user pressed stop');
      expect(r1.failure?.code).toBe('ERR_ND_JOB_ABANDONED');
      expect(r1.failure?.message).toContain('gave up on this call when its signal aborted, waiting for rank 0');
      // Rank 0 hears of it (a call of its own that already had rank 1's data could still complete first).
      expect((await r0.failed).code).toBe('ERR_ND_JOB_ABANDONED');
      expect((await ndError(r0.allreduce(Float64Array.of(3, 4), 'max'))).code).toBe('ERR_ND_JOB_ABANDONED');
    } finally {
      await Promise.all([r0.close(), r1.close()]);
    }
  });

  it('a large allreduce (RDMA Writes into the registered array) given up on: close() still settles on both ranks', async () => {
    const [r0, r1] = await pair();
    const big = new Float64Array(64 * 1024).fill(1); // 512 KiB: the zero-copy ring
    const err = await ndError(r0.allreduce(big, 'sum', { timeoutMs: 40 }));
    expect(err.code).toBe('ERR_ND_JOB_TIMEOUT');
    expect((await ndError(r1.allreduce(new Float64Array(64 * 1024)))).code).toBe('ERR_ND_JOB_ABANDONED');
    await Promise.all([r0.close(), r1.close()]);
  });

  it('bad options and a signal aborted before the call start nothing: the job goes on, the next calls agree', async () => {
    const [r0, r1] = await pair();
    try {
      const bad = { timeoutMs: 0 };
      const data = Float64Array.of(1);
      const refused = [
        r0.barrier(bad),
        r0.broadcast(data, 0, bad),
        r0.allreduce(data, 'sum', bad),
        r0.gather(data, 0, bad),
        r0.allgather(data, bad),
        r0.reduce(data, 'sum', 0, bad),
        r0.scatter(Float64Array.of(1, 2), data, 0, bad),
        r0.reduceScatter(Float64Array.of(1, 2), 'sum', bad),
        r0.alltoall(Float64Array.of(1, 2), new Float64Array(2), bad),
        r0.allocateWindow(64, bad),
      ];
      for (const p of refused) expect((await ndError(p)).code).toBe('ERR_ND_OUT_OF_RANGE');
      expect((await ndError(r0.barrier({ signal: 'stop' as never }))).code).toBe('ERR_ND_INVALID_ARGUMENT');
      const ac = new AbortController();
      ac.abort();
      expect((await ndError(r0.allreduce(data, 'sum', { signal: ac.signal }))).code).toBe('ERR_ND_ABORTED');
      expect(r0.failure).toBeNull();
      // None of those took a call's tag: the ranks still agree on the next collective.
      const [a, b] = await Promise.all([r0.allreduce(Float64Array.of(1), 'sum', { timeoutMs: 10_000 }), r1.allreduce(Float64Array.of(2))]);
      expect([a[0], b[0]]).toEqual([3, 3]);
      const [w0, w1] = await Promise.all([r0.allocateWindow(64, { timeoutMs: 10_000 }), r1.allocateWindow(64)]);
      await Promise.all([w0.free({ timeoutMs: 10_000 }), w1.free()]);
      expect(r0.failure).toBeNull();
    } finally {
      await Promise.all([r0.close(), r1.close()]);
    }
  });
});

describe('a job of one rank', () => {
  it('its collectives take the options and complete', async () => {
    const job = await join({ launcher: 'singleton' });
    try {
      await job.barrier({ timeoutMs: 1000 });
      expect(Array.from(await job.allreduce(Int32Array.of(5), 'sum', { timeoutMs: 1000 }))).toEqual([5]);
    } finally {
      await job.close();
    }
  });
});

// The job's own progress loop (lib/job/job.ts ManualDriver), in 'manual' mode and in 'loop' mode with a busy-poll
// window: one loop polls every job of the process while a call of it waits, without an event-loop turn between a
// completion and the program's next post, and hands the thread back to the event loop every millisecond. So a
// second job in the process (here the other rank) and timers still run while a call waits: a loop that kept the
// thread would leave the recv below waiting for ever.
describe("the job's progress loop", () => {
  // 'loop' with a window only off Windows: the Windows tier (Wine) was not run for it when it was added.
  it.each([['manual', undefined] as const, ...(process.platform === 'win32' ? [] : [['loop', 500] as const])])('%s mode (spinMicros %s), two ranks in one process: 300 notified puts each way, then a recv that waits for a send a timer makes, and a wait without busy-polling', async (completion, spinMicros) => {
    const [r0, r1] = (await ranks(2, completion, spinMicros)) as [Job, Job];
    try {
      expect([r0.adapter.completion, r0.adapter.spinMicros]).toEqual([completion, spinMicros ?? r0.adapter.spinMicros]);
      const [w0, w1] = await Promise.all([r0.allocateWindow(8), r1.allocateWindow(8)]);
      const seen: number[] = [];
      const ping = async () => {
        for (let i = 0; i < 300; i++) {
          await w0.put(1, 0, Float64Array.of(i), { notify: true });
          await w0.waitNotifications(1, 1);
          seen.push(new Float64Array(w0.buffer.buffer, w0.buffer.byteOffset, 1)[0]);
        }
      };
      const pong = async () => {
        for (let i = 0; i < 300; i++) {
          await w1.waitNotifications(0, 1);
          const got = new Float64Array(w1.buffer.buffer, w1.buffer.byteOffset, 1)[0];
          await w1.put(0, 0, Float64Array.of(-got), { notify: true });
        }
      };
      await Promise.all([ping(), pong()]);
      expect(seen).toEqual(Array.from({ length: 300 }, (_, i) => -i));
      let fired = false;
      const late = r0.recv(1, { tag: 5, timeoutMs: 10_000 });
      setTimeout(() => {
        fired = true;
        void r1.send(Int32Array.of(42), 0, { tag: 5 });
      }, 30);
      expect(Array.from(await late)).toEqual([42]);
      expect(fired).toBe(true);
      // A wait that does not busy-poll (ndbench's ranks while rank 0 runs MPI: Job._quietly) still ends: in manual
      // mode the job polls every 10 ms meanwhile, in loop mode the event loop delivers.
      const quiet = r1._quietly(() => r1.barrier({ timeoutMs: 10_000 }));
      await new Promise((r) => setTimeout(r, 30));
      await Promise.all([r0.barrier({ timeoutMs: 10_000 }), quiet]);
      await Promise.all([r0.allreduce(Float64Array.of(1)), r1.allreduce(Float64Array.of(2))]).then(([a, b]) => expect([a[0], b[0]]).toEqual([3, 3]));
      await Promise.all([w0.free(), w1.free()]);
    } finally {
      await Promise.all([r0.close(), r1.close()]);
    }
  });
});

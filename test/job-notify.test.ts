// Notified puts (lib/job/window.ts; docs/job.md "Windows and notification"): over a same-host connection a flag per
// put in the target's notification area, read from memory by the target while it waits, else (TCP, a target that
// does not poll, every flag in use) a notify Send. Two ranks in this process, per completion mode and transport:
// a ping-pong, bursts of notified puts interleaved with plain ones, counted exactly (none lost, none twice), and
// which way they went. A peer that dies in the middle of a burst: test/job.test.ts.
import { randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { join, type Job, type Window } from '../lib/job/index';
import { ndError } from './helpers';

type Mode = { completion: 'manual' | 'loop' | 'thread'; spinMicros?: number };

async function ranks(mode: Mode, shm: boolean, size = 2): Promise<Job[]> {
  const secret = randomBytes(32).toString('hex');
  const port = 20000 + Math.floor(Math.random() * 10000);
  const before = process.env.NETDIRECT_SHM;
  process.env.NETDIRECT_SHM = shm ? '1' : '0'; // read by each adapter as it opens
  try {
    const at = { launcher: 'rendezvous' as const, rendezvous: `127.0.0.1:${port}`, size, secret, address: '127.0.0.1', timeoutMs: 20_000, ...mode };
    return await Promise.all(Array.from({ length: size }, (_, rank) => join({ ...at, rank })));
  } finally {
    if (before === undefined) delete process.env.NETDIRECT_SHM;
    else process.env.NETDIRECT_SHM = before;
  }
}

const f64 = (w: Window, n: number) => new Float64Array(w.buffer.buffer, w.buffer.byteOffset, n);
/** Flags `w` took from `peer` (same host) and wrote to it. */
const taken = (w: Window, peer: number): number => (w as unknown as { taken: number[] }).taken[peer];
const flagged = (w: Window, peer: number): number => (w as unknown as { flagged: number[] }).flagged[peer];

// On Windows 'manual' and 'thread' ('auto' there; the loop modes of jobs are not run under the Windows tier).
const modes: Array<[string, Mode]> = [
  ['manual', { completion: 'manual' }],
  ...(process.platform === 'win32'
    ? []
    : ([
        ['loop, spinMicros 500', { completion: 'loop', spinMicros: 500 }],
        ['loop', { completion: 'loop', spinMicros: 0 }],
      ] as Array<[string, Mode]>)),
  ['thread', { completion: 'thread' }],
];
// Shared memory is Linux's: elsewhere every connection is TCP and only that case runs.
const cases = [...(process.platform === 'linux' ? modes.map(([n, m]) => [`${n}, shm`, m, true] as const) : []), ...modes.map(([n, m]) => [`${n}, tcp`, m, false] as const)];

describe.each(cases)('notified puts, %s', (_name, mode, shm) => {
  it('a ping-pong, then bursts of notified puts among plain ones: every one counted once, its data there first', async () => {
    const [r0, r1] = (await ranks(mode, shm)) as [Job, Job];
    try {
      expect(r0._channels[1]!.qp.transport).toBe(shm ? 'shm' : process.platform === 'linux' ? 'tcp' : r0._channels[1]!.qp.transport);
      const N = 1000;
      const [w0, w1] = await Promise.all([r0.allocateWindow(8 * N), r1.allocateWindow(8 * N)]);
      // Ping-pong: each side waits for the other's put and answers with what it read.
      const seen: number[] = [];
      await Promise.all([
        (async () => {
          for (let i = 1; i <= 200; i++) {
            await w0.put(1, 0, Float64Array.of(i), { notify: true });
            await w0.waitNotifications(1, 1);
            seen.push(f64(w0, 1)[0]);
          }
        })(),
        (async () => {
          for (let i = 1; i <= 200; i++) {
            await w1.waitNotifications(0, 1);
            await w1.put(0, 0, Float64Array.of(-f64(w1, 1)[0]), { notify: true });
          }
        })(),
      ]);
      expect(seen).toEqual(Array.from({ length: 200 }, (_, i) => -(i + 1)));
      // A burst: N puts, every other one notified, all posted at once; the target waits for all N/2 in one call.
      for (let round = 1; round <= 2; round++) {
        const waited = w1.waitNotifications(0, N / 2, { timeoutMs: 20_000 });
        await Promise.all(Array.from({ length: N }, (_, k) => w0.put(1, 8 * k, Float64Array.of(round * N + k), { notify: k % 2 === 1 })));
        await waited;
        // Each notified put's data is there, and so is every plain put posted before it.
        expect(Array.from(f64(w1, N))).toEqual(Array.from({ length: N }, (_, k) => round * N + k));
        // Not one more: nothing was counted twice.
        expect((await ndError(w1.waitNotifications(0, 1, { timeoutMs: 30 }))).code).toBe('ERR_ND_JOB_TIMEOUT');
        expect(w1.notifications(0)).toBe(0);
      }
      // Waits of a few at a time while the puts go, in both directions at once.
      const chunks = async (from: Window, to: Window, src: number, dst: number) => {
        const waiting = (async () => {
          for (let i = 0; i < 30; i++) await to.waitNotifications(src, 10, { timeoutMs: 20_000 });
        })();
        for (let i = 0; i < 300; i++) await from.put(dst, 8 * (i % N), Float64Array.of(i), { notify: true });
        await waiting;
        expect(to.notifications(src)).toBe(0);
      };
      await Promise.all([chunks(w0, w1, 0, 1), chunks(w1, w0, 1, 0)]);
      // A wait longer than any busy-poll window (the put comes 30 ms late), then a ping-pong again. Over shared
      // memory: a rank that polls its flags (manual; loop with a window, once polling again) gets flags after it,
      // one that does not (loop without a window, thread) asked for notify Sends and gets those.
      const before = taken(w1, 0);
      const late = w1.waitNotifications(0, 1, { timeoutMs: 20_000 });
      await new Promise((r) => setTimeout(r, 30));
      await w0.put(1, 0, Float64Array.of(7), { notify: true });
      await late;
      expect(f64(w1, 1)[0]).toBe(7);
      await Promise.all([
        (async () => {
          for (let i = 0; i < 50; i++) {
            await w0.put(1, 0, Float64Array.of(i), { notify: true });
            await w0.waitNotifications(1, 1);
          }
        })(),
        (async () => {
          for (let i = 0; i < 50; i++) {
            await w1.waitNotifications(0, 1);
            await w1.put(0, 0, Float64Array.of(i), { notify: true });
          }
        })(),
      ]);
      // (Loop mode with a window goes either way: on a loaded machine its progress loop stops spinning for 100 ms
      // after a preemption, lib/job/job.ts ManualDriver.shutUntil, and asks for Sends meanwhile.)
      if (shm && mode.completion === 'manual') {
        expect(taken(w1, 0) - before).toBeGreaterThan(25);
        expect(r1._channels[0]!.wakeAsked).toBe(false);
      }
      if (shm && (mode.completion === 'thread' || mode.spinMicros === 0)) {
        expect(taken(w1, 0) - before).toBe(0);
        expect(r1._channels[0]!.wakeAsked).toBe(true);
      }
      // Which way they went: flags over shared memory (most of them), none over TCP.
      if (shm) {
        expect(taken(w1, 0)).toBeGreaterThan(0);
        expect(taken(w1, 0)).toBe(flagged(w0, 1));
      } else {
        expect([taken(w1, 0), flagged(w0, 1), taken(w0, 1), flagged(w1, 0)]).toEqual([0, 0, 0, 0]);
      }
      await Promise.all([w0.free(), w1.free()]);
    } finally {
      await Promise.all([r0.close(), r1.close()]);
    }
  });
});

// A flag Write completes silently (lib/job/window.ts): it is let go when a later request of its queue pair completes.
// Its source is the channel's, not the window's, so freeing a window never waits for it: here rank 0's last request
// to rank 3 is a flag, and the barrier of window.free() sends nothing from 0 to 3 (with 4 ranks rank 0 sends to 1
// and 2 only).
describe.skipIf(process.platform !== 'linux')('notified puts, 4 ranks over shared memory', () => {
  it('window.free() after a flag to a rank the barrier does not send to', async () => {
    const jobs = await ranks({ completion: 'manual' }, true, 4);
    try {
      const ws = await Promise.all(jobs.map((j) => j.allocateWindow(64)));
      await Promise.all([ws[0].put(3, 0, Float64Array.of(42), { notify: true }), ws[3].waitNotifications(0, 1)]);
      expect(f64(ws[3], 1)[0]).toBe(42);
      expect(taken(ws[3], 0)).toBe(1);
      let timer: NodeJS.Timeout | undefined;
      const stuck = new Promise((resolve) => (timer = setTimeout(() => resolve('stuck'), 10_000)));
      expect(await Promise.race([Promise.all(ws.map((w) => w.free())).then(() => 'freed'), stuck])).toBe('freed');
      clearTimeout(timer);
    } finally {
      await Promise.all(jobs.map((j) => j.close()));
    }
  });
});

// A completion queue too small for what completes into it overruns: the provider drops what does not fit, the
// flush of its queue pairs included (docs/nd2.md, "CQ depth and flushes"), so nothing more would ever settle.
// lib/ learns it from the addon's cqError record and fails every request that would complete into that CQ, and
// every later one, with ND_BUFFER_OVERFLOW and a message that says what to size.
import { afterAll, describe, expect, it } from 'vitest';
import type { Adapter } from '../lib/index';
import { ndError, ndThrow, openLocal, testDevice } from './helpers';

const open: Adapter[] = [];
afterAll(async () => {
  await Promise.all(open.map((a) => a.close()));
});

// 'loop' mode makes the overrun certain: the 64 Sends below leave inline while the JS thread posts them, and the
// server's completions are only taken when that thread next runs the event loop, by which time all 64 are in (the
// software provider reads them in one round; a device places them as they arrive). On Windows, where 'loop' only
// moves the CQ's notification onto the event loop (the provider's engine thread still places each Send as it
// arrives, and each Notify packet drains the CQ) and 'thread' has a poller thread, a small CQ may keep up. 'manual' makes it certain too: the application polls, and
// this one does not; the poller watches each CQ for errors only (Notify ND_CQ_NOTIFY_ERRORS) and reports the overrun.
const MODES = process.platform === 'win32' ? (['manual'] as const) : (['loop', 'manual'] as const);

describe('a completion queue overrun', () => {
  it.each(MODES)('fails the receives still waiting, and later posts, with ND_BUFFER_OVERFLOW saying what to size (no hang): %s mode', async (mode) => {
    const { adapter: server } = await openLocal(mode);
    open.push(server);
    const small = server.createCompletionQueue({ depth: 2 });
    const qp = server.createQueuePair({ receiveCq: small, receiveDepth: 32 }); // 32 more wait in order (README)
    const slots = await server.allocateMemory(64 * 64);
    const receives = Array.from({ length: 64 }, (_, i) =>
      qp.receive(slots.slice(64 * i, 64)).then(
        () => null,
        (err: unknown) => err,
      ),
    );
    const listener = await server.listen();
    const accepting = (async () => (await listener.getConnectionRequest()).accept(qp))();

    const { adapter: client, cq } = await openLocal();
    open.push(client);
    const cqp = client.createQueuePair({ receiveCq: cq, initiatorDepth: 64 });
    await client.connect(cqp, listener.address);
    await accepting;
    const src = await client.allocateMemory(8);
    // 64 messages into a CQ of depth 2: the provider may round the depth up, but not to 64.
    const sends = Array.from({ length: 64 }, () => cqp.send(src).then(() => null, (err: unknown) => err));

    const outcomes = await Promise.all(receives); // before the fix, most of these never settled
    const failed = outcomes.filter((o) => o !== null) as Error[];
    expect(failed.length).toBeGreaterThan(0);
    // Every failure is the overrun's, except on Linux siw, whose queue pair goes to error and flushes its receives
    // (ND_CANCELED; the waiting ones then meet the QP in error, ND_CONNECTION_INVALID) before its CQ error event
    // arrives (docs/verbs.md §5).
    const device = await testDevice();
    const flushFirst = device.provider === 'verbs' && device.transport === 'iwarp';
    const overrun = failed.filter((err) => (err as { code?: string }).code === 'ND_BUFFER_OVERFLOW');
    if (!flushFirst) expect(overrun.length).toBe(failed.length);
    for (const err of overrun) {
      expect(err).toMatchObject({ operation: 'receive' });
      expect(err.message).toMatch(/completion queue overrun: more completions arrived than its depth of 2 holds/);
      expect(err.message).toMatch(/receive depths if it is their receiveCq/);
    }
    for (const err of failed) expect(['ND_BUFFER_OVERFLOW', ...(flushFirst ? ['ND_CANCELED', 'ND_CONNECTION_INVALID'] : [])]).toContain((err as { code?: string }).code);
    // Each Send settles: delivered, or cancelled when the server's QP failed; on RoCE one the server never received
    // is retried as receiver-not-ready for ever (rnr_retry 7), so there they are left to the adapter's close.
    if (device.transport !== 'roce' && device.transport !== 'infiniband') await Promise.all(sends);

    // A later request on a queue pair of that CQ fails at once, as a promise and as a post.
    const later = await ndError(qp.receive(slots.slice(0, 64)));
    expect(later.code).toBe('ND_BUFFER_OVERFLOW');
    expect(later.message).toMatch(/^receive failed: ND_BUFFER_OVERFLOW \(0x80000005\): completion queue overrun/);
    const posted = ndThrow(() => qp.post('receive', slots.slice(0, 64)));
    expect(posted.code).toBe('ND_BUFFER_OVERFLOW');
    await qp.close();
    await small.close();
  });
});

// A shared receive queue behind several connections: every message lands in the oldest posted receive, and the
// completion names the queue pair it arrived on (SrqCompletion.qp), so a server can tell its clients apart.
import { afterAll, describe, expect, it } from 'vitest';
import type { Adapter, QueuePair } from '../lib/index';
import { openLocal } from './helpers';

const open: Adapter[] = [];
afterAll(async () => {
  await Promise.all(open.map((a) => a.close()));
});

describe('srq.receive() behind two connections', () => {
  it('resolves with the queue pair each message arrived on, and the message where the receive said', async () => {
    const { adapter: server, cq } = await openLocal();
    open.push(server);
    const srq = server.createSharedReceiveQueue({ depth: 8 });
    const listener = await server.listen();
    const slots = await server.allocateMemory(8 * 16);
    const receives = Array.from({ length: 8 }, (_, i) => srq.receive(slots.slice(16 * i, 16)));

    // Two clients, each on its own adapter, each accepted on its own QP of the SRQ.
    const clients: { adapter: Adapter; qp: QueuePair; accepted: QueuePair }[] = [];
    for (let k = 0; k < 2; k++) {
      const { adapter, cq: ccq } = await openLocal();
      open.push(adapter);
      const qp = adapter.createQueuePair({ receiveCq: ccq });
      const accepted = server.createQueuePair({ receiveCq: cq, srq });
      const accepting = (async () => (await listener.getConnectionRequest()).accept(accepted))();
      await adapter.connect(qp, listener.address);
      await accepting;
      clients.push({ adapter, qp, accepted });
    }

    // Client k sends messages "k:i" of different lengths, alternating, each after the previous landed.
    const expected: { qp: QueuePair; text: string }[] = [];
    for (let i = 0; i < 8; i++) {
      const k = i % 2;
      const text = `${k}:${'x'.repeat(i)}`;
      const src = await clients[k].adapter.allocateMemory(16);
      src.buffer.set(Buffer.from(text));
      await clients[k].qp.send(src.slice(0, text.length));
      const c = await receives[i];
      expected.push({ qp: clients[k].accepted, text });
      expect(c.qp).toBe(clients[k].accepted);
      expect(c.bytes).toBe(text.length);
      expect(Buffer.from(slots.buffer.subarray(16 * i, 16 * i + c.bytes)).toString()).toBe(text);
      await src.deregister();
    }
    expect(expected.filter((e) => e.qp === clients[0].accepted).length).toBe(4);
  });
});

// An attacker's half-open handshakes (issue #28 finding 6; docs/security.md "Half-open handshakes"): silent TCP
// connections to a listener of the software provider that never send an MPA Request. Plain JavaScript so that
// test/handshake.test.ts and the repository tool scripts/bench-halfopen.mjs hold them the same way.
import net from 'node:net';

/**
 * Opens `count` silent connections to 127.0.0.1:`port`, connection i from local address `from[i % from.length]`.
 * With `reopenMs` a connection the listener drops is opened again that many milliseconds later (the attacker
 * comes back); without it a dropped one stays closed.
 *
 * @param {number} port
 * @param {{ count: number, from?: string[], reopenMs?: number }} options
 * @returns {{ sockets: Set<net.Socket>, readonly closed: number, readonly reopened: number, connected(): number, stop(): void }}
 *   `sockets` the connections open or opening, `closed` how many closed, `reopened` how many were opened again,
 *   `connected()` how many are connected now; `stop()` destroys them all and reopens none.
 */
export function holdHalfOpen(port, { count, from = ['127.0.0.2', '127.0.0.3', '127.0.0.4', '127.0.0.5'], reopenMs }) {
  const sockets = new Set();
  let running = true;
  let closed = 0;
  let reopened = 0;
  const hold = (i) => {
    const s = net.connect({ port, host: '127.0.0.1', localAddress: from[i % from.length] });
    sockets.add(s);
    s.on('error', () => undefined);
    s.resume();
    s.on('close', () => {
      closed++;
      if (reopenMs === undefined) return;
      sockets.delete(s);
      if (!running) return;
      reopened++;
      setTimeout(() => running && hold(i), reopenMs);
    });
  };
  for (let i = 0; i < count; i++) hold(i);
  return {
    sockets,
    get closed() {
      return closed;
    },
    get reopened() {
      return reopened;
    },
    connected: () => [...sockets].filter((s) => !s.connecting && !s.destroyed).length,
    stop() {
      running = false;
      for (const s of sockets) s.destroy();
    },
  };
}

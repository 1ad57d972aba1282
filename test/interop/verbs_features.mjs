// verbs_features: shared receive queues, memory windows and disconnects of the verbs provider (docs/verbs.md),
// run inside the siw-vm guest by verbs-provider.interop.test.ts on one device, both ends in this process (two
// adapters on the same device; siw and rxe carry a connection to their own address).
//
//   node verbs_features.mjs ADDRESS PORT
//
// Steps (each prints a line; "verbs_features: ok" and exit 0, or "verbs_features: FAIL ..." and exit 1):
//   srq   two server QPs share one SRQ; three Sends from two client QPs land in the SRQ's receives in the order
//         posted, every byte checked;
//   zero  a 0-byte Send into a 0-byte receive (no SGE with a byte in it);
//   mw    where the device has memory windows (info.maxWindowSize > 0): a window bound over part of a region,
//         the peer Writes and Reads through it (bytes checked), the window invalidated, and a Read through the
//         old token then fails; where it has none: createMemoryWindow fails ND_NOT_SUPPORTED ("mw: not supported");
//   memlock  a registration past the process's locked-memory limit: ND_NO_MEMORY naming RLIMIT_MEMLOCK (where the
//         device enforces it: siw does even for root);
//   disc  a client-initiated and a server-initiated disconnect: the initiator's disconnect() and the other
//         side's `disconnected` both complete (the side told of the peer's disconnect disconnects too).
// ND_FEATURES_PROVIDER (default 'verbs') runs it over another provider ('soft' on the host checks the script).
import { readFileSync } from 'node:fs';
import { openAdapter } from '../../dist/esm/index.mjs';

const TIMEOUT_MS = 20_000;
class Failure extends Error {}
const say = (l) => process.stdout.write(l + '\n');
const pat = (seed, i) => (i * 7 + (i >>> 8) * 13 + seed * 59) & 0xff;
const fill = (buf, n, seed) => { for (let i = 0; i < n; i++) buf[i] = pat(seed, i); };
function check(what, buf, n, seed) {
  for (let i = 0; i < n; i++) {
    if (buf[i] !== pat(seed, i)) throw new Failure(`${what}: byte ${i} of ${n} is 0x${buf[i].toString(16)}, expected 0x${pat(seed, i).toString(16)}`);
  }
}
async function step(promise, what) {
  let t;
  const timeout = new Promise((_, reject) => { t = setTimeout(() => reject(new Failure(`timeout (${TIMEOUT_MS} ms): ${what}`)), TIMEOUT_MS); });
  try {
    return await Promise.race([promise, timeout]);
  } catch (err) {
    if (err instanceof Failure) throw err;
    throw new Failure(`${what} failed: ${err?.code ?? ''} ${err?.message ?? err}`);
  } finally {
    clearTimeout(t);
  }
}

const [address, portArg] = process.argv.slice(2);
if (!address || !portArg) {
  process.stderr.write('usage: verbs_features.mjs ADDRESS PORT\n');
  process.exit(2);
}
const port = Number(portArg);
const N = 4096;

async function main() {
  const server = await openAdapter(address, { provider: process.env.ND_FEATURES_PROVIDER ?? 'verbs' });
  const client = await openAdapter(address, { provider: process.env.ND_FEATURES_PROVIDER ?? 'verbs' });
  try {
    // --- srq
    const srq = server.createSharedReceiveQueue({ depth: 8, maxSge: 1 });
    const scq = server.createCompletionQueue({ depth: 64 });
    const sqA = server.createQueuePair({ receiveCq: scq, srq, initiatorDepth: 8, maxInitiatorSge: 1 });
    const sqB = server.createQueuePair({ receiveCq: scq, srq, initiatorDepth: 8, maxInitiatorSge: 1 });
    const ccq = client.createCompletionQueue({ depth: 64 });
    const c1 = client.createQueuePair({ receiveCq: ccq, receiveDepth: 4, initiatorDepth: 8, maxReceiveSge: 1, maxInitiatorSge: 1 });
    const c2 = client.createQueuePair({ receiveCq: ccq, receiveDepth: 4, initiatorDepth: 8, maxReceiveSge: 1, maxInitiatorSge: 1 });
    const rx = [];
    for (let i = 0; i < 4; i++) rx.push(await server.allocateMemory(N));
    const receives = rx.map((m) => srq.receive(m));
    receives.forEach((p) => p.catch(() => undefined));
    say(`srq: 4 receives posted, outstanding ${srq.outstanding}`);

    const listener = await server.listen({ host: address, port, backlog: 2 });
    const accepted = (async () => {
      const k1 = await listener.getConnectionRequest();
      await k1.accept(sqA);
      const k2 = await listener.getConnectionRequest();
      await k2.accept(sqB);
      return [k1, k2];
    })();
    const k1c = await step(client.connect(c1, { host: address, port }), 'client 1 connect');
    const k2c = await step(client.connect(c2, { host: address, port }), 'client 2 connect');
    const [s1, s2] = await step(accepted, 'server accepts');
    say('srq: two connections established, both server QPs on one SRQ');
    await new Promise((r) => setTimeout(r, 50)); // siw: the first Send right after the MPA Reply (nd_peer.mjs)

    const tx = await client.allocateMemory(N);
    const plan = [[c1, sqA, 1, 1000], [c2, sqB, 2, 4096], [c1, sqA, 3, 17]];
    for (let i = 0; i < plan.length; i++) {
      const [cq, sq, seed, n] = plan[i];
      fill(tx.buffer, n, seed);
      await step(cq.send(tx.slice(0, n)), `srq: Send ${i}`);
      const c = await step(receives[i], `srq: receive ${i}`);
      if (c.bytes !== n) throw new Failure(`srq: receive ${i} has ${c.bytes} bytes, expected ${n}`);
      check(`srq: receive ${i}`, rx[i].buffer, n, seed);
      say(`srq: receive ${i}: ${n} bytes from client ${cq === c1 ? 1 : 2} (for server QP ${sq === sqA ? "A" : "B"}) verified`);
    }
    if (srq.outstanding !== 1) throw new Failure(`srq: ${srq.outstanding} receives outstanding, expected 1`);
    say('srq: ok');

    // --- zero: a 0-byte Send into a receive with no bytes (siw's driver refuses a receive without SGEs).
    const z = c1.receive(tx.slice(5, 0));
    z.catch(() => undefined);
    await step(sqA.send(null), 'zero: a 0-byte Send');
    const zc = await step(z, 'zero: the 0-byte receive');
    if (zc.bytes !== 0) throw new Failure(`zero: the receive completed ${zc.bytes} bytes, expected 0`);
    say('zero: a 0-byte Send landed in a 0-byte receive');

    // --- mw
    if (server.info.maxWindowSize === 0) {
      let code = 'created';
      try {
        server.createMemoryWindow();
      } catch (err) {
        code = err?.code;
        say(`mw: not supported (${err?.message})`);
      }
      if (code !== 'ND_NOT_SUPPORTED') throw new Failure(`mw: createMemoryWindow on a device without windows: ${code}`);
    } else {
      const region = await server.allocateMemory(2 * N, { remoteRead: true, remoteWrite: true });
      const window = server.createMemoryWindow();
      const remote = await step(sqA.bind(window, region.slice(N, N), { read: true, write: true }), 'mw: bind');
      say(`mw: bound: token 0x${remote.token.toString(16)}, ${remote.length} bytes (region token 0x${region.remoteToken?.toString(16) ?? '?'})`);
      const local = await client.allocateMemory(N);
      fill(local.buffer, N, 5);
      await step(c1.write(local, remote), 'mw: Write through the window');
      check('mw: the Write placed through the window', region.buffer.subarray(N), N, 5);
      say('mw: Write through the window verified');
      fill(region.buffer.subarray(N), N, 6);
      local.buffer.fill(0);
      await step(c1.read(local, remote), 'mw: Read through the window');
      check('mw: the Read through the window', local.buffer, N, 6);
      say('mw: Read through the window verified');
      await step(sqA.invalidate(window), 'mw: invalidate');
      let failed = null;
      try {
        await step(c1.read(local, remote), 'mw: Read after invalidate');
      } catch (err) {
        failed = err.message;
      }
      if (failed === null) throw new Failure('mw: a Read through an invalidated window succeeded');
      say(`mw: Read through the invalidated window refused (${failed})`);
    }

    // --- memlock: a registration past this process's locked-memory limit (siw counts pinned pages against
    // RLIMIT_MEMLOCK even for root): ND_NO_MEMORY, and the message names the limit and how to raise it.
    const m = /^Max locked memory\s+(\S+)/m.exec(readFileSync('/proc/self/limits', 'utf8'));
    const limit = m === null || m[1] === 'unlimited' ? Infinity : Number(m[1]);
    if (!(limit <= 256 * 1024 * 1024)) {
      say(`memlock: no finite limit below 256 MiB to pass (${m?.[1] ?? 'not in /proc/self/limits'})`);
    } else {
      const big = new Uint8Array(limit + (1 << 20));
      try {
        const region = await server.registerMemory(big);
        say(`memlock: ${big.length} bytes registered past the ${limit}-byte limit (not enforced for this process)`);
        await region.deregister();
      } catch (err) {
        if (err?.code !== 'ND_NO_MEMORY') throw new Failure(`memlock: registering ${big.length} bytes: ${err?.code} ${err?.message}`);
        say(`memlock: refused (${err.code}: ${err.message})`);
      }
    }

    // --- disc: client 2 disconnects; the server disconnects client 1.
    await step(Promise.all([k2c.disconnect(), s2.disconnected]), 'disc: client-initiated disconnect');
    say('disc: client-initiated disconnect completed on both sides');
    await step(Promise.all([s1.disconnect(), k1c.disconnected]), 'disc: server-initiated disconnect');
    say('disc: server-initiated disconnect completed on both sides');
    for (const x of [k1c, k2c, s1, s2, listener, c1, c2, sqA, sqB, srq]) await x.close().catch(() => undefined);
    say('verbs_features: ok');
    return 0;
  } finally {
    await client.close().catch(() => undefined);
    await server.close().catch(() => undefined);
  }
}

main().then(
  (code) => process.exit(code),
  (err) => {
    say(`verbs_features: FAIL ${err instanceof Failure ? err.message : err?.stack ?? err}`);
    process.exit(1);
  },
);

// An attacker on a rank's host (test/job-netns.test.ts, issue #28): started with `ip netns exec <host>` in the
// namespace of rank 0 while the job wires up, it does what any local process can. It reads the listening TCP
// sockets from /proc/net/tcp; keeps those that belong to a rank (as root it maps their inodes to processes; any
// user can simply try them all); and against each listener:
//   - connects with netdirect as "rank 1", with the private data the job used before (magic, rank, FNV-1a of the
//     job id, which it computes from mpiexec's pid) and with the present layout and a made-up proof: each must be
//     refused;
//   - holds ATTACK_HOLD silent TCP connections (a slowloris) from 127.0.0.1, reopened when dropped, until it exits.
//     From another source address than the forged connects: the listener keeps at most 128 half-open setups per
//     address (docs/security.md), so forged connects among 300 holders from one address could be reset by that cap
//     before the rank reads their private data (seen under the sanitizer tier's slower start), leaving the rank's own
//     refusal untested.
// Runs until SIGTERM (or ATTACK_MS milliseconds), then prints one JSON line: { listeners, attempts, refused,
// accepted, other, held }.
import { readdirSync, readFileSync, readlinkSync } from 'node:fs';
import net from 'node:net';
import { networkInterfaces } from 'node:os';
import { openAdapter } from 'netdirect';

let until = Date.now() + Number(process.env.ATTACK_MS ?? 60_000);
process.on('SIGTERM', () => (until = 0));
const holdEach = Number(process.env.ATTACK_HOLD ?? 200);
const address = Object.values(networkInterfaces()).flat().find((a) => a.family === 'IPv4' && !a.internal)?.address ?? '127.0.0.1';
const out = { address, listeners: [], attempts: 0, refused: 0, accepted: 0, other: [], held: 0 };

/** Listening IPv4 sockets: port and inode. */
function listening() {
  return readFileSync('/proc/net/tcp', 'utf8')
    .split('\n')
    .slice(1)
    .map((l) => l.trim().split(/\s+/))
    .filter((f) => f[3] === '0A')
    .map((f) => ({ port: parseInt(f[1].split(':')[1], 16), inode: f[9] }));
}

/** Inodes of the sockets held by a rank of the job (a process running test/netns/rank.mjs). */
function rankSockets() {
  const inodes = new Set();
  for (const pid of readdirSync('/proc').filter((p) => /^\d+$/.test(p))) {
    try {
      if (!readFileSync(`/proc/${pid}/cmdline`, 'utf8').includes('rank.mjs')) continue;
      for (const fd of readdirSync(`/proc/${pid}/fd`)) {
        const m = /^socket:\[(\d+)\]$/.exec(readlinkSync(`/proc/${pid}/fd/${fd}`));
        if (m) inodes.add(m[1]);
      }
    } catch {
      // gone meanwhile
    }
  }
  return inodes;
}

function fnv1a(text) {
  let h = 0x811c9dc5;
  for (const ch of text) h = Math.imul(h ^ ch.charCodeAt(0), 0x01000193) >>> 0;
  return h;
}

const adapter = await openAdapter(address);
const cq = adapter.createCompletionQueue({ depth: 16 });
const holders = new Set();
let running = true;

function hold(port) {
  const s = net.connect({ port, host: address, localAddress: '127.0.0.1' });
  holders.add(s);
  s.on('error', () => undefined);
  s.on('connect', () => out.held++);
  s.resume();
  s.on('close', () => {
    holders.delete(s);
    if (running && Date.now() < until) setTimeout(() => hold(port), 10); // back at once
  });
}

/**
 * Hydra's kvsname starts kvs_<mpiexec's pid>_0, and every user sees mpiexec's pid in /proc; Debian's MPICH 4.0
 * appends a random number and the host name, so this guess misses there (the old private data's weak job ids were
 * the rendezvous' and an empty PMI-2 jobid), but an older Hydra's bare kvs_<pid>_0 it hits.
 */
function guessedKvsnames() {
  const names = [];
  for (const pid of readdirSync('/proc').filter((p) => /^\d+$/.test(p))) {
    try {
      const argv0 = readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0')[0];
      if (/mpiexec(\.hydra)?$/.test(argv0)) names.push(`kvs_${pid}_0`);
    } catch {
      // gone meanwhile
    }
  }
  return names;
}

async function forge(port) {
  const tries = [];
  for (const kvsname of guessedKvsnames()) {
    const old = new Uint8Array(12);
    const v = new DataView(old.buffer);
    v.setUint32(0, 0x4e444a42);
    v.setUint32(4, 1);
    v.setUint32(8, fnv1a(kvsname));
    tries.push(old);
  }
  const present = new Uint8Array(40);
  new DataView(present.buffer).setUint32(0, 0x4e444a42);
  new DataView(present.buffer).setUint32(4, 1);
  crypto.getRandomValues(present.subarray(8));
  tries.push(present);
  out.guesses = tries.length - 1;
  for (const privateData of tries) {
    out.attempts++;
    const qp = adapter.createQueuePair({ receiveCq: cq, receiveDepth: 2, initiatorDepth: 2 });
    try {
      const c = await adapter.connect(qp, { host: address, port }, { privateData });
      out.accepted++;
      await c.disconnect().catch(() => undefined);
    } catch (err) {
      if (err.code === 'ND_CONNECTION_REFUSED') out.refused++;
      else out.other.push(err.code);
    }
    await qp.close().catch(() => undefined);
  }
}

const seen = new Set();
const attacks = [];
while (Date.now() < until) {
  const mine = rankSockets();
  for (const { port, inode } of listening()) {
    if (seen.has(port) || !mine.has(inode)) continue;
    seen.add(port);
    out.listeners.push(port);
    for (let i = 0; i < holdEach; i++) hold(port);
    attacks.push(forge(port));
  }
  await new Promise((r) => setTimeout(r, 20));
}
await Promise.all(attacks);
running = false;
for (const s of holders) s.destroy();
await adapter.close();
console.log(JSON.stringify(out));
process.exit(0);

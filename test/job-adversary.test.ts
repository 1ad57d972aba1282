// netdirect/job against an attacker on the same host (issue #28): each case is the adversary written as a test —
// a fake rendezvous, fake PMI-1 and PMI-2 launchers, an impostor rank, silent and flooding clients — and checks
// that join(), the rendezvous, close() and waitNotifications end with a typed NdError (or serve the real ranks)
// instead of crashing, hanging or letting the outsider in. docs/job.md "Membership" and "Limits" state what is
// checked; the accept-side pressure cases (findings 6 and 7) are in test/handshake.test.ts.
import { createHmac, randomBytes } from 'node:crypto';
import { closeSync, openSync } from 'node:fs';
import { connect, createServer, type AddressInfo, type Server, type Socket } from 'node:net';
import * as os from 'node:os';
import * as path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { NdError, openAdapter } from '../lib/index';
import { encodePmi2, framePmi2, join, parsePmi1, startRendezvous, type Job } from '../lib/job/index';
import { pmi2Launcher } from './launch-helpers';

/** The rendezvous' proof as lib/job/rendezvous.ts states it: HMAC-SHA256 (RFC 2104) of the words, in hex. */
const proof = (key: string, ...words: Array<string | number>) => createHmac('sha256', key).update(['netdirect-job', ...words].join(' ')).digest('hex');

const secret = () => randomBytes(32).toString('hex');
const cleanups: Array<() => unknown> = [];
afterEach(async () => {
  for (const f of cleanups.splice(0).reverse()) await Promise.resolve(f()).catch(() => undefined);
});

async function listen(server: Server): Promise<number> {
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  cleanups.push(() => new Promise((r) => server.close(r)));
  return (server.address() as AddressInfo).port;
}

/** A TCP server whose connections are kept (and destroyed at the end of the test). */
async function tcpServer(onConnection: (s: Socket) => void): Promise<{ port: number; sockets: Socket[] }> {
  const sockets: Socket[] = [];
  const server = createServer((s) => {
    sockets.push(s);
    s.on('error', () => undefined);
    onConnection(s);
    if (s.listenerCount('data') === 0) s.resume(); // read what comes, so that the client's close is seen
  });
  const port = await listen(server);
  cleanups.push(() => sockets.forEach((s) => s.destroy()));
  return { port, sockets };
}

/** A free port on 127.0.0.1 (bound, then released). */
async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as AddressInfo).port;
  await new Promise((r) => server.close(r));
  return port;
}

type Reply = string | null | undefined; // a raw reply, silence, or the launcher's normal answer

/**
 * A PMI-1 launcher as Hydra serves it, reached by PMI_PORT: init, get_maxes, get_my_kvsname, put, barrier_in
 * (answered once `size` connections sent it), get, finalize. `hook` may replace any answer (a raw line, or null:
 * silence), which is how each adversary is written.
 */
async function pmi1Server(size: number, hook: (cmd: string, a: Record<string, string>, s: Socket) => Reply = () => undefined) {
  const kvs = new Map<string, string>();
  let barrier: Socket[] = [];
  const { port } = await tcpServer((s) => {
    let buf = '';
    s.setEncoding('utf8').on('data', (d: string) => {
      buf += d;
      for (let nl = buf.indexOf('\n'); nl >= 0; nl = buf.indexOf('\n')) {
        const a = parsePmi1(buf.slice(0, nl));
        buf = buf.slice(nl + 1);
        const h = hook(a.cmd, a, s);
        if (h === null) continue;
        if (typeof h === 'string') {
          s.write(h);
          continue;
        }
        if (a.cmd === 'init') s.write('cmd=response_to_init pmi_version=1 pmi_subversion=1 rc=0\n');
        else if (a.cmd === 'get_maxes') s.write('cmd=maxes kvsname_max=256 keylen_max=64 vallen_max=1024\n');
        else if (a.cmd === 'get_my_kvsname') s.write('cmd=my_kvsname kvsname=kvs_42_0\n');
        else if (a.cmd === 'put') {
          kvs.set(a.key, a.value);
          s.write('cmd=put_result rc=0\n');
        } else if (a.cmd === 'barrier_in') {
          barrier.push(s);
          if (barrier.length === size) {
            for (const b of barrier) b.write('cmd=barrier_out\n');
            barrier = [];
          }
        } else if (a.cmd === 'get') {
          const v = kvs.get(a.key);
          s.write(v === undefined ? 'cmd=get_result rc=-1 msg=key_not_found\n' : `cmd=get_result rc=0 value=${v}\n`);
        } else if (a.cmd === 'finalize') s.write('cmd=finalize_ack\n');
      }
    });
  });
  return { port, kvs, env: (rank: number): NodeJS.ProcessEnv => ({ PMI_PORT: `127.0.0.1:${port}`, PMI_RANK: String(rank), PMI_SIZE: String(size) }) };
}

/** The PMI-2 launcher of test/launch-helpers.ts, reached by PMI_PORT; `hook` as for pmi1Server (raw replies are whole frames). */
async function pmi2Server(size: number, hook: (cmd: string, a: Record<string, string>) => Reply = () => undefined) {
  const launcher = pmi2Launcher({ size, jobid: '4242.0', hook });
  const { port } = await tcpServer((s) => void launcher.serve(s));
  return { port, kvs: launcher.kvs, env: (rank: number): NodeJS.ProcessEnv => ({ PMI_PORT: `127.0.0.1:${port}`, PMI_RANK: String(rank), PMI_SIZE: String(size), PMI_JOBID: '4242.0' }) };
}

async function failure(p: Promise<unknown>): Promise<NdError> {
  const err = await p.then(
    (v) => {
      if (v && typeof (v as Job).close === 'function') void (v as Job).close({ timeoutMs: 1000 }).catch(() => undefined);
      throw new Error('expected a rejection, it resolved');
    },
    (e) => e,
  );
  expect(err).toBeInstanceOf(NdError);
  return err as NdError;
}

const rendezvousJoin = (port: number, rank: number, size: number, s: string, timeoutMs = 3000) =>
  join({ launcher: 'rendezvous', rendezvous: `127.0.0.1:${port}`, rank, size, secret: s, address: '127.0.0.1', timeoutMs });

describe('finding 2: membership is proven, not claimed', () => {
  it('an outsider without the secret is refused by the rendezvous before it learns anything; the real rank then joins', async () => {
    const s = secret();
    const port = await freePort();
    const rank0 = rendezvousJoin(port, 0, 2, s, 10_000);
    // The outsider: any process that can reach the port, knowing the protocol but not the secret.
    const err = await failure(rendezvousJoin(port, 1, 2, secret()));
    expect(err.code).toBe('ERR_ND_JOB_AUTH');
    expect(err.message).toMatch(/refused rank 1: claimed rank 1 without proof of the job's secret/);
    // Its raw view: a challenge, then an error — no welcome, no jobId, no keys.
    const raw = connect(port, '127.0.0.1');
    let heard = '';
    raw.setEncoding('utf8').on('data', (d: string) => (heard += d));
    await new Promise((r) => raw.once('data', r));
    const challenge = JSON.parse(heard.split('\n')[0]).challenge;
    expect(challenge).toMatch(/^[0-9a-f]{32}$/);
    raw.write(`${JSON.stringify({ hello: { rank: 1, size: 2, nonce: 'a'.repeat(32), proof: 'b'.repeat(64) } })}\n`);
    await new Promise((r) => raw.on('close', r));
    expect(heard).not.toMatch(/welcome|jobId|nd-addr/);
    const [job0, job1] = await Promise.all([rank0, rendezvousJoin(port, 1, 2, s, 10_000)]);
    expect([job0.rank, job1.rank]).toEqual([0, 1]);
    expect(job0.jobId).toBe(job1.jobId);
    await Promise.all([job0.close(), job1.close()]);
  });

  it('without a secret a rendezvous rank does not start: the error names NETDIRECT_JOB_SECRET', async () => {
    const env = { NETDIRECT_RENDEZVOUS: '127.0.0.1:1', NETDIRECT_RANK: '0', NETDIRECT_SIZE: '2' };
    for (const NETDIRECT_JOB_SECRET of [undefined, 'short']) {
      const err = await failure(join({ env: { ...env, NETDIRECT_JOB_SECRET }, timeoutMs: 2000 }));
      expect(err.code).toBe('ERR_ND_INVALID_ARGUMENT');
      expect(err.message).toMatch(/NETDIRECT_JOB_SECRET must be a job secret of 32\.\.1024 characters \(make one with `netdirect job-secret`\)/);
    }
    await expect(startRendezvous({ size: 2 } as any)).rejects.toMatchObject({ code: 'ERR_ND_INVALID_ARGUMENT' });
  });

  it('a port already taken by something else is an error for rank 0, and the squatter hears no key', async () => {
    let heard = '';
    const { port } = await tcpServer((s) => s.setEncoding('utf8').on('data', (d: string) => (heard += d)));
    const err = await failure(rendezvousJoin(port, 0, 2, secret()));
    expect(err.code).toBe('ERR_ND_JOB_AUTH');
    expect(err.message).toMatch(/is not a rendezvous of netdirect\/job.*the port was taken before rank 0 could host it/);
    expect(heard).not.toMatch(/nd-addr|put|fence/);
  });

  it('a fake rendezvous that speaks the protocol but cannot prove the secret is refused by every rank', async () => {
    let heard = '';
    const { port } = await tcpServer((s) => {
      s.write(`${JSON.stringify({ challenge: 'c'.repeat(32) })}\n`);
      s.setEncoding('utf8').on('data', (d: string) => {
        heard += d;
        if (d.includes('hello')) s.write(`${JSON.stringify({ welcome: { jobId: 'evil', proof: '0'.repeat(64) } })}\n`);
      });
    });
    for (const rank of [0, 1]) {
      const err = await failure(rendezvousJoin(port, rank, 2, secret()));
      expect(err.code).toBe('ERR_ND_JOB_AUTH');
      expect(err.message).toMatch(/could not prove it knows the job's secret/);
    }
    expect(heard).not.toMatch(/nd-addr/);
  });

  it('an impostor connecting to a rank\'s listener (address read as from /proc/net/tcp) with the old private data is refused', async () => {
    // The launcher holds rank 1's read of rank 0's address until the impostor has tried: rank 0 is then waiting
    // for its one connection from a higher rank, and only the proof tells the two apart.
    let held: Socket | undefined;
    const launcher = await pmi1Server(2, (cmd, a, s) => {
      if (cmd !== 'get' || a.key !== 'nd-addr-0') return undefined;
      held = s;
      return null;
    });
    const rank0 = join({ env: launcher.env(0), address: '127.0.0.1', timeoutMs: 15_000 });
    const rank1 = join({ env: launcher.env(1), address: '127.0.0.1', timeoutMs: 15_000 });
    for (let i = 0; i < 400 && held === undefined; i++) await new Promise((r) => setTimeout(r, 25));
    const where = launcher.kvs.get('nd-addr-0')!.split('/')[0];
    // What the impostor can know: the address, the job id (kvsname); it forges rank 1 with the old key (FNV-1a of
    // the job id, derived from public values), and then with the new layout and a made-up proof.
    let h = 0x811c9dc5;
    for (const ch of 'kvs_42_0') h = Math.imul(h ^ ch.charCodeAt(0), 0x01000193) >>> 0;
    const adapter = await openAdapter('127.0.0.1');
    cleanups.push(() => adapter.close());
    const forged = [new Uint8Array(12), new Uint8Array(40)];
    new DataView(forged[0].buffer).setUint32(0, 0x4e444a42);
    new DataView(forged[0].buffer).setUint32(4, 1);
    new DataView(forged[0].buffer).setUint32(8, h);
    forged[1].set(forged[0]);
    for (const privateData of forged) {
      const cq = adapter.createCompletionQueue({ depth: 8 });
      const qp = adapter.createQueuePair({ receiveCq: cq });
      const err = await failure(adapter.connect(qp, where, { privateData }));
      expect(err.code).toBe('ND_CONNECTION_REFUSED');
      await qp.close();
      await cq.close();
    }
    held!.write(`cmd=get_result rc=0 value=${launcher.kvs.get('nd-addr-0')}\n`);
    const [job0, job1] = await Promise.all([rank0, rank1]);
    expect(job0.refusedConnects).toBe(2);
    // The real ranks are connected to each other: a window put with notification goes through.
    const [w0, w1] = await Promise.all([job0.allocateWindow(64), job1.allocateWindow(64)]);
    await w1.put(0, 0, new Uint8Array([7, 8, 9]), { notify: true });
    await w0.waitNotifications(1, 1, { timeoutMs: 5000 });
    expect([...w0.buffer.subarray(0, 3)]).toEqual([7, 8, 9]);
    await Promise.all([w0.free(), w1.free()]);
    await Promise.all([job0.close(), job1.close()]);
  });
});

describe('finding 3: timeoutMs (and signal) bound every wait on the launcher', () => {
  const T = 1500;
  it('a rendezvous that accepts and never speaks', async () => {
    const { port } = await tcpServer(() => undefined);
    const err = await failure(rendezvousJoin(port, 1, 2, secret(), T));
    expect(err.code).toBe('ERR_ND_JOB_TIMEOUT');
    expect(err.message).toMatch(/sent no challenge within timeoutMs 1500 ms/);
  });
  it('a rank that joined and never fences', async () => {
    const s = secret();
    const port = await freePort();
    const rank0 = rendezvousJoin(port, 0, 2, s, T);
    // Rank 1 holds the secret but goes quiet after hello (stuck, or an insider): rank 0's fence ends at timeoutMs.
    let raw: Socket | undefined;
    for (let i = 0; i < 100 && raw === undefined; i++) {
      raw = await new Promise<Socket | undefined>((resolve) => {
        const c = connect(port, '127.0.0.1', () => resolve(c));
        c.on('error', () => resolve(undefined));
      });
      if (raw === undefined) await new Promise((r) => setTimeout(r, 20));
    }
    cleanups.push(() => raw!.destroy());
    const challenge = await new Promise<string>((resolve) => raw!.setEncoding('utf8').once('data', (d: string) => resolve(JSON.parse(d.split('\n')[0]).challenge)));
    const nonce = 'd'.repeat(32);
    raw!.write(`${JSON.stringify({ hello: { rank: 1, size: 2, nonce, proof: proof(s, 'hello', challenge, nonce, 1, 2) } })}\n`);
    const err = await failure(rank0);
    expect(err.code).toBe('ERR_ND_JOB_TIMEOUT');
    expect(err.message).toMatch(/did not end fence 1 \(a rank has not reached it\) within timeoutMs 1500 ms/);
  });
  for (const [name, at] of [['after init', 'get_maxes'], ['at barrier_in', 'barrier_in']] as const) {
    it(`PMI-1 silent ${name}`, async () => {
      const launcher = await pmi1Server(1, (cmd) => (cmd === at ? null : undefined));
      const err = await failure(join({ env: launcher.env(0), address: '127.0.0.1', timeoutMs: T }));
      expect(err.code).toBe('ERR_ND_JOB_TIMEOUT');
      expect(err.message).toMatch(new RegExp(`did not answer cmd=${at}`));
    });
  }
  it('a PMI_PORT that accepts and stays silent', async () => {
    const { port } = await tcpServer(() => undefined);
    const err = await failure(join({ launcher: 'hydra', env: { PMI_PORT: `127.0.0.1:${port}`, PMI_RANK: '0', PMI_SIZE: '1' }, timeoutMs: T }));
    expect(err.code).toBe('ERR_ND_JOB_TIMEOUT');
  });
  it('PMI-2 silent at kvs-fence', async () => {
    const launcher = await pmi2Server(1, (cmd) => (cmd === 'kvs-fence' ? null : undefined));
    const err = await failure(join({ launcher: 'pmi2', env: launcher.env(0), address: '127.0.0.1', timeoutMs: T }));
    expect(err.code).toBe('ERR_ND_JOB_TIMEOUT');
    expect(err.message).toMatch(/did not answer kvs-fence/);
  });
  it('PMI-2 announcing a 999,999-byte frame is refused at once', async () => {
    const launcher = await pmi2Server(1, (cmd) => (cmd === 'fullinit' ? '999999cmd=fullinit-response;' : undefined));
    const err = await failure(join({ launcher: 'pmi2', env: launcher.env(0), timeoutMs: 60_000 }));
    expect(err.code).toBe('ERR_ND_JOB_BOOTSTRAP');
    expect(err.message).toMatch(/frame of 999999 bytes, more than the 65536/);
  });
  it('an AbortSignal ends join() where it waits', async () => {
    const { port } = await tcpServer(() => undefined);
    const ac = new AbortController();
    const p = join({ launcher: 'hydra', env: { PMI_PORT: `127.0.0.1:${port}`, PMI_RANK: '0', PMI_SIZE: '1' }, timeoutMs: 60_000, signal: ac.signal });
    setTimeout(() => ac.abort(new Error('enough')), 100);
    const err = await failure(p);
    expect(err.code).toBe('ERR_ND_ABORTED');
  });
  it('close() when the other rank never closes ends at its timeoutMs, everything released', async () => {
    const s = secret();
    const port = await freePort();
    const [job0, job1] = await Promise.all([rendezvousJoin(port, 0, 2, s, 10_000), rendezvousJoin(port, 1, 2, s, 10_000)]);
    const err = await failure(job0.close({ timeoutMs: 500 }));
    expect(err.code).toBe('ERR_ND_JOB_TIMEOUT');
    expect(err.message).toMatch(/the other ranks did not reach close\(\)/);
    await job1.close({ timeoutMs: 1000 }).catch(() => undefined);
  });
});

describe('finding 4: input is bounded and read in linear time', () => {
  it('a rendezvous sending 32 MiB without a newline: the rank stops at the line limit', async () => {
    let written = 0;
    const { port } = await tcpServer((s) => {
      const chunk = Buffer.alloc(64 * 1024, 0x41);
      const pump = () => {
        while (written < 32 * 1024 * 1024 && !s.destroyed) {
          written += chunk.length;
          if (!s.write(chunk)) return void s.once('drain', pump);
        }
      };
      pump();
    });
    const err = await failure(rendezvousJoin(port, 1, 2, secret(), 60_000));
    expect(err.code).toBe('ERR_ND_JOB_BOOTSTRAP');
    expect(err.message).toMatch(/sent more than \d+ bytes without the end of a line/);
  });
  it('PMI-1 sending 32 MiB without a newline', async () => {
    const junk = 'x'.repeat(32 * 1024 * 1024);
    const launcher = await pmi1Server(1, (cmd) => (cmd === 'init' ? junk : undefined));
    const err = await failure(join({ env: launcher.env(0), timeoutMs: 60_000 }));
    expect(err.code).toBe('ERR_ND_JOB_BOOTSTRAP');
    expect(err.message).toMatch(/sent more than 65536 bytes/);
  });
  it('the rendezvous server drops a client sending a long line; ranks still join', async () => {
    const s = secret();
    const server = await startRendezvous({ size: 1, secret: s });
    cleanups.push(() => server.close());
    const flood = connect(server.port, server.host);
    flood.on('error', () => undefined);
    const closed = new Promise((r) => flood.on('close', r));
    flood.write(Buffer.alloc(4 * 1024 * 1024, 0x41));
    await closed;
    const job = await join({ launcher: 'rendezvous', rendezvous: `${server.host}:${server.port}`, rank: 0, size: 1, secret: s, timeoutMs: 5000 });
    await job.close();
  });
});

describe('finding 5: silent outsiders hold nothing', () => {
  it('the hosted rendezvous drops a connection silent past helloTimeoutMs, and close() does not wait for it', async () => {
    const server = await startRendezvous({ size: 2, secret: secret(), helloTimeoutMs: 300 });
    const silent = connect(server.port, server.host);
    silent.on('error', () => undefined);
    silent.resume();
    await new Promise((r) => silent.on('close', r));
    expect(server.refused.map((r) => r.reason)).toEqual(['did not prove membership within 300 ms']);
    const holder = connect(server.port, server.host); // one that stays: close() destroys it
    holder.on('error', () => undefined);
    await new Promise((r) => holder.on('connect', r));
    await server.close();
    holder.destroy();
  });
  it('rank 0 hosting: job.close() returns with a silent outsider connected', async () => {
    const s = secret();
    const port = await freePort();
    const job = await rendezvousJoin(port, 0, 1, s);
    const silent = connect(port, '127.0.0.1');
    silent.on('error', () => undefined);
    cleanups.push(() => silent.destroy());
    await new Promise((r) => silent.on('connect', r));
    await job.close();
  });
  it('more than 64 silent connections: the oldest are dropped, a rank still gets in', async () => {
    const s = secret();
    const server = await startRendezvous({ size: 1, secret: s });
    cleanups.push(() => server.close());
    const holders = Array.from({ length: 100 }, () => {
      const h = connect(server.port, server.host);
      h.on('error', () => undefined);
      h.resume();
      cleanups.push(() => h.destroy());
      return h;
    });
    await Promise.all(holders.map((h) => new Promise((r) => h.on('connect', r))));
    const job = await join({ launcher: 'rendezvous', rendezvous: `${server.host}:${server.port}`, rank: 0, size: 1, secret: s, timeoutMs: 5000 });
    await job.close();
    expect(server.refused.length).toBeGreaterThanOrEqual(36);
  });
});

describe('finding 8: claimed sizes and ranks are checked against stated maxima and the launcher\'s own answers', () => {
  it('PMI-2 fullinit size=2147483647 is refused before anything is allocated', async () => {
    const launcher = await pmi2Server(1, (cmd, a) => (cmd === 'fullinit' ? framePmi2(encodePmi2('fullinit-response', [['rc', 0], ['rank', a.pmirank], ['size', 2147483647]])) : undefined));
    const env = { ...launcher.env(0) };
    delete env.PMI_SIZE;
    const err = await failure(join({ launcher: 'pmi2', env, timeoutMs: 5000 }));
    expect(err.code).toBe('ERR_ND_JOB_BOOTSTRAP');
    expect(err.message).toMatch(/size="2147483647", not a rank of a job of at most 1024/);
  });
  it('a fullinit size that disagrees with PMI_SIZE, a rank that is not PMI_RANK', async () => {
    const big = await pmi2Server(1, (cmd, a) => (cmd === 'fullinit' ? framePmi2(encodePmi2('fullinit-response', [['rc', 0], ['rank', a.pmirank], ['size', 3]])) : undefined));
    expect((await failure(join({ launcher: 'pmi2', env: big.env(0), timeoutMs: 5000 }))).message).toMatch(/size=3, but PMI_SIZE is "1"/);
    const other = await pmi2Server(2, (cmd) => (cmd === 'fullinit' ? framePmi2(encodePmi2('fullinit-response', [['rc', 0], ['rank', 1], ['size', 2]])) : undefined));
    expect((await failure(join({ launcher: 'pmi2', env: other.env(0), timeoutMs: 5000 }))).message).toMatch(/rank=1, but PMI_RANK is 0/);
  });
  it('PMI_SIZE, NETDIRECT_SIZE and startRendezvous beyond the maximum', async () => {
    expect((await failure(join({ env: { PMI_PORT: '127.0.0.1:1', PMI_RANK: '0', PMI_SIZE: '100000' } }))).message).toMatch(/at most 1024/);
    expect((await failure(join({ launcher: 'rendezvous', rendezvous: '127.0.0.1:1', rank: 0, size: 5000, secret: secret() }))).message).toMatch(/0\.\.1024/);
    await expect(startRendezvous({ size: 5000, secret: secret() })).rejects.toMatchObject({ code: 'ERR_ND_OUT_OF_RANGE' });
  });
});

describe('finding 9: every failure is an NdError naming what is at fault', () => {
  it('null and non-object replies of a rendezvous, a welcome without a jobId: errors naming the reply', async () => {
    const want: Record<string, RegExp> = {
      null: /sent "null", not a message of its protocol/,
      '{"welcome":null}': /refused rank 1: \{"welcome":null\}/,
      '{"welcome":{"jobId":null}}': /could not prove it knows the job's secret/,
    };
    for (const [reply, message] of Object.entries(want)) {
      const { port } = await tcpServer((s) => {
        s.write(`${JSON.stringify({ challenge: 'c'.repeat(32) })}\n`);
        s.once('data', () => s.write(`${reply}\n`));
      });
      const err = await failure(rendezvousJoin(port, 1, 2, secret()));
      expect(err.code).toMatch(/ERR_ND_JOB_(BOOTSTRAP|AUTH)/);
      expect(err.message).toMatch(message);
    }
  });
  it('kvs:null and keys whose values are null, from a rendezvous that passed the proof: errors naming the fence', async () => {
    // A broken rendezvous that holds the secret: a proxy in front of a real one rewrites the end of the fence.
    const s = secret();
    for (const rewrite of [() => null, (kvs: Record<string, string>) => Object.fromEntries(Object.keys(kvs).map((k) => [k, null]))]) {
      const server = await startRendezvous({ size: 2, secret: s });
      cleanups.push(() => server.close());
      const { port } = await tcpServer((client) => {
        const up = connect(server.port, server.host);
        up.on('error', () => undefined);
        cleanups.push(() => up.destroy());
        client.on('data', (d: Buffer) => up.write(d));
        let buf = '';
        up.setEncoding('utf8').on('data', (d: string) => {
          buf += d;
          for (let nl = buf.indexOf('\n'); nl >= 0; nl = buf.indexOf('\n')) {
            const msg = JSON.parse(buf.slice(0, nl));
            buf = buf.slice(nl + 1);
            if (msg.fenced !== undefined) msg.kvs = rewrite(msg.kvs);
            client.write(`${JSON.stringify(msg)}\n`);
          }
        });
      });
      const joins = [0, 1].map((rank) => join({ launcher: 'rendezvous', rendezvous: `127.0.0.1:${port}`, rank, size: 2, secret: s, address: '127.0.0.1', timeoutMs: 5000 }));
      for (const j of joins) j.catch(() => undefined); // both are awaited below, one after the other
      for (const j of joins) {
        const err = await failure(j);
        expect(err.code).toBe('ERR_ND_JOB_BOOTSTRAP');
        expect(err.message).toMatch(/expected the end of fence 1 with the keys/);
      }
    }
  }, 20_000);
  it('PMI_FD not open, PMI_FD a regular file, PMI_PORT=…:99999', async () => {
    const notOpen = await failure(join({ launcher: 'hydra', env: { PMI_FD: '987', PMI_RANK: '0', PMI_SIZE: '1' }, timeoutMs: 2000 }));
    expect(notOpen.code).toBe('ERR_ND_JOB_BOOTSTRAP');
    expect(notOpen.message).toMatch(/PMI_FD="987"/);
    const file = path.join(os.tmpdir(), `nd-pmi-fd-${process.pid}`);
    const fd = openSync(file, 'w');
    cleanups.push(() => closeSync(fd));
    const regular = await failure(join({ launcher: 'hydra', env: { PMI_FD: String(fd), PMI_RANK: '0', PMI_SIZE: '1' }, timeoutMs: 2000 }));
    expect(regular.message).toMatch(new RegExp(`PMI_FD="${fd}"`));
    const badPort = await failure(join({ launcher: 'hydra', env: { PMI_PORT: '127.0.0.1:99999', PMI_RANK: '0', PMI_SIZE: '1' }, timeoutMs: 2000 }));
    expect(badPort.code).toBe('ERR_ND_JOB_BOOTSTRAP');
    expect(badPort.message).toMatch(/PMI_PORT="127\.0\.0\.1:99999"/);
  });
  it('a PMI-1 get_result without a value, a my_kvsname without kvsname', async () => {
    const noName = await pmi1Server(1, (cmd) => (cmd === 'get_my_kvsname' ? 'cmd=my_kvsname rc=0\n' : undefined));
    expect((await failure(join({ env: noName.env(0), timeoutMs: 2000 }))).message).toMatch(/my_kvsname has no kvsname=/);
  });
});

describe('finding 10: waitNotifications(from, count) checks its arguments and only ever rejects', () => {
  it('NaN, -1, 1.5, a freed window and a closed job: rejections, never a throw; timeoutMs and signal end a wait', async () => {
    const job = await join({ env: {}, address: '127.0.0.1' });
    const w = await job.allocateWindow(64);
    for (const count of [NaN, -1, 1.5, Infinity, '1' as any]) {
      let p: Promise<void> | undefined;
      expect(() => (p = w.waitNotifications(0, count))).not.toThrow();
      await expect(p).rejects.toMatchObject({ code: 'ERR_ND_OUT_OF_RANGE' });
    }
    await w.waitNotifications(0, 0);
    await w.put(0, 0, new Uint8Array(1), { notify: true });
    expect(w.notifications(0)).toBe(1);
    await expect(w.waitNotifications(0, 2, { timeoutMs: 50 })).rejects.toMatchObject({ code: 'ERR_ND_JOB_TIMEOUT' });
    const ac = new AbortController();
    const aborted = w.waitNotifications(0, 2, { signal: ac.signal });
    ac.abort();
    await expect(aborted).rejects.toMatchObject({ code: 'ERR_ND_ABORTED' });
    expect(w.notifications(0)).toBe(1); // the waits that ended consumed nothing
    await w.waitNotifications(0, 1);
    await w.free();
    let p: Promise<void> | undefined;
    expect(() => (p = w.waitNotifications(0, 1))).not.toThrow();
    await expect(p).rejects.toMatchObject({ code: 'ERR_ND_CLOSED' });
    const w2 = await job.allocateWindow(64);
    await job.close();
    expect(() => (p = w2.waitNotifications(0, 1))).not.toThrow();
    await expect(p).rejects.toMatchObject({ code: 'ERR_ND_CLOSED' });
  });
});

describe('finding 11: numbers are parsed strictly', () => {
  for (const rank of ['0x0', ' 0', '0e0', '00', '+0', '-0']) {
    it(`PMI-2 fullinit rank=${JSON.stringify(rank)} is refused`, async () => {
      const launcher = await pmi2Server(1, (cmd) => (cmd === 'fullinit' ? framePmi2(encodePmi2('fullinit-response', [['rc', 0], ['rank', rank], ['size', 1]])) : undefined));
      const err = await failure(join({ launcher: 'pmi2', env: launcher.env(0), timeoutMs: 5000 }));
      expect(err.code).toBe('ERR_ND_JOB_BOOTSTRAP');
      expect(err.message).toMatch(/fullinit-response has rank=/);
    });
  }
  it('PMI_RANK=0x0, NETDIRECT_RANK=1e0 and a PMI-1 vallen_max=0x400 are refused', async () => {
    expect((await failure(join({ env: { PMI_PORT: '127.0.0.1:1', PMI_RANK: '0x0', PMI_SIZE: '1' } }))).message).toMatch(/PMI_RANK="0x0"/);
    expect((await failure(join({ env: { NETDIRECT_RENDEZVOUS: '127.0.0.1:1', NETDIRECT_RANK: '1e0', NETDIRECT_SIZE: '2', NETDIRECT_JOB_SECRET: secret() } }))).message).toMatch(/"1e0"/);
    const launcher = await pmi1Server(1, (cmd) => (cmd === 'get_maxes' ? 'cmd=maxes vallen_max=0x400\n' : undefined));
    expect((await failure(join({ env: launcher.env(0), timeoutMs: 2000 }))).message).toMatch(/vallen_max="0x400"/);
  });
});

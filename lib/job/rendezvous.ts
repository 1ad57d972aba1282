// The explicit rendezvous: a small TCP key-value service for jobs no PMI launcher serves (Open MPI's mpirun,
// MS-MPI's mpiexec, scripts and tests). Messages are JSON objects, one per line:
//   server → client  {"challenge":nonceS}                              (first, on every connection)
//   client → server  {"hello":{"rank":r,"size":n,"nonce":nonceC,"proof":P}}
//   server → client  {"welcome":{"jobId":id,"proof":Q}}  or  {"error":reason} and the connection closed
//   client → server  {"put":[key,value]}  {"fence":epoch}  {"finalize":true}
//   server → client  {"fenced":epoch,"kvs":{...}}  {"abort":{"rank":r,"reason":...}}  {"bye":true}
// Membership is proven, not claimed: P = HMAC-SHA256(secret, "netdirect-job hello <nonceS> <nonceC> <r> <n>")
// and Q = HMAC-SHA256(secret, "netdirect-job welcome <nonceS> <nonceC> <id> <r>") (RFC 2104), with the job's
// secret (NETDIRECT_JOB_SECRET) that both sides hold and neither sends. A client without it is refused before it
// learns anything; a service without it (something else on the port) is refused by the client. The nonces make
// every proof good for one connection only.
//
// A fence completes when every rank of the job has sent it; the reply carries every key put so far. A rank
// whose connection closes before it said finalize aborts the job: every other rank's pending fence fails
// naming it, so no rank waits forever for a dead one. The server ends once every rank finalized.
//
// Bounded (docs/job.md "Limits"): a connection that has not proven membership within helloTimeoutMs is closed;
// at most MAX_PENDING such connections are held (a newer one closes the oldest); a client's line is at most
// MAX_CLIENT_LINE bytes, a rank puts at most MAX_KEYS_PER_RANK keys of at most MAX_KEY / MAX_VALUE characters.

import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import { createServer, connect, type Server, type Socket } from 'node:net';
import { NdError } from '../errors.js';
import { MAX_JOB_SIZE, type Bootstrap } from './bootstrap.js';
import { authError, bootstrapError, bounded, peerError, strictUint, type Limit } from './errors.js';
import { StreamReader } from './wire.js';

/** How long a new connection to the rendezvous may take to prove membership (default). */
export const HELLO_TIMEOUT_MS = 10_000;
/** How long rank 0, finding the rendezvous port taken, waits for what holds it to send a challenge. */
const TAKEN_PORT_MS = 5000;
/** Connections that have not proven membership yet, held at once; a newer one closes the oldest. */
export const MAX_PENDING = 64;
/** The longest line a client may send the server. */
export const MAX_CLIENT_LINE = 16 * 1024;
/** Keys one rank may put, and their lengths. */
export const MAX_KEYS_PER_RANK = 8;
export const MAX_KEY = 256;
export const MAX_VALUE = 1024;
/** The longest line the server may send a client: every key of the largest job, with room to spare. */
export const MAX_SERVER_LINE = 2 * MAX_JOB_SIZE * MAX_KEYS_PER_RANK * (MAX_KEY + MAX_VALUE);
/** The shortest secret accepted: 32 characters (e.g. 16 random bytes in hex). */
export const MIN_SECRET = 32;
const MAX_SECRET = 1024;

/** Checks a job secret's shape; `what` names where it came from (the variable or option). */
export function checkSecret(secret: unknown, what: string, operation: string): string {
  if (typeof secret !== 'string' || secret.length < MIN_SECRET || secret.length > MAX_SECRET) {
    const got = typeof secret === 'string' ? `${secret.length} characters` : secret === undefined ? 'nothing' : typeof secret;
    throw new NdError('ERR_ND_INVALID_ARGUMENT', 0, operation, `${operation}: ${what} must be a job secret of ${MIN_SECRET}..${MAX_SECRET} characters (make one with \`netdirect job-secret\`), got ${got}`);
  }
  return secret;
}

/** A fresh secret: 32 random bytes as 64 hex characters (what `netdirect job-secret` prints). */
export function makeJobSecret(): string {
  return randomBytes(32).toString('hex');
}

/** HMAC-SHA256 of the words, space-separated, under `secret`, in hex. */
export function proof(secret: string, ...words: Array<string | number>): string {
  return createHmac('sha256', secret).update(['netdirect-job', ...words].join(' ')).digest('hex');
}

/** Compares two hex proofs in constant time (false when either is not 64 hex characters). */
export function proofMatches(got: unknown, want: string): boolean {
  if (typeof got !== 'string' || !/^[0-9a-f]{64}$/.test(got)) return false;
  return timingSafeEqual(Buffer.from(got, 'hex'), Buffer.from(want, 'hex'));
}

const NONCE = /^[0-9a-f]{32}$/;

export interface RendezvousServer {
  readonly host: string;
  readonly port: number;
  /** Settles when every rank finalized (or the job aborted). */
  readonly done: Promise<void>;
  /** Connections refused so far: where they came from and why (a wrong proof, a rank taken, silence...). */
  readonly refused: ReadonlyArray<{ readonly from: string; readonly reason: string }>;
  /** Closes every connection, members' and others', and stops listening; never waits on a peer. */
  close(): Promise<void>;
}

export interface RendezvousOptions {
  host?: string;
  port?: number;
  size: number;
  /** The job's secret: every rank must prove it holds it (NETDIRECT_JOB_SECRET on the ranks). */
  secret: string;
  /** Milliseconds a new connection has to prove membership (default HELLO_TIMEOUT_MS). */
  helloTimeoutMs?: number;
  /** @internal Serving does not keep the process alive (rank 0 hosting inside join(): lib/job/job.ts, `unclosed`). */
  unref?: boolean;
}

interface Member {
  socket: Socket;
  finalized: boolean;
  epoch: number;
  keys: number;
}

/**
 * Starts a rendezvous for a job of `size` ranks on host:port (port 0: any free one). Rejects (EADDRINUSE...)
 * when the address cannot be listened on: it never shares a port.
 */
export async function startRendezvous(options: RendezvousOptions): Promise<RendezvousServer> {
  if (typeof options !== 'object' || options === null) throw new NdError('ERR_ND_INVALID_ARGUMENT', 0, 'startRendezvous', 'startRendezvous: options must be an object');
  const size = options.size;
  if (!Number.isSafeInteger(size) || size < 1 || size > MAX_JOB_SIZE) {
    throw new NdError('ERR_ND_OUT_OF_RANGE', 0, 'startRendezvous', `startRendezvous: size must be 1..${MAX_JOB_SIZE}, got ${String(size)}`);
  }
  const secret = checkSecret(options.secret, 'options.secret', 'startRendezvous');
  const helloMs = options.helloTimeoutMs ?? HELLO_TIMEOUT_MS;
  if (!Number.isSafeInteger(helloMs) || helloMs < 1) throw new NdError('ERR_ND_OUT_OF_RANGE', 0, 'startRendezvous', `startRendezvous: helloTimeoutMs must be a positive integer, got ${String(helloMs)}`);
  const members = new Map<number, Member>();
  const pending = new Set<Socket>(); // insertion order: the oldest first
  const sockets = new Set<Socket>();
  const refused: Array<{ from: string; reason: string }> = [];
  const kvs: Record<string, string> = {};
  const fenced = new Map<number, Set<number>>();
  const jobId = `nd-${randomBytes(12).toString('hex')}`;
  let aborted = false;
  let finish!: () => void;
  const done = new Promise<void>((resolve) => (finish = resolve));
  const send = (s: Socket, m: unknown) => {
    if (!s.destroyed) s.write(`${JSON.stringify(m)}\n`);
  };
  const refuse = (s: Socket, reason: string) => {
    if (refused.length < 1000) refused.push({ from: `${s.remoteAddress}:${s.remotePort}`, reason });
    send(s, { error: reason });
    s.end();
    setTimeout(() => s.destroy(), 1000).unref();
  };
  const abort = (rank: number, reason: string) => {
    if (aborted) return;
    aborted = true;
    for (const m of members.values()) send(m.socket, { abort: { rank, reason } });
    finish();
  };
  const server: Server = createServer((socket) => {
    if (options.unref) socket.unref();
    let rank = -1;
    sockets.add(socket);
    pending.add(socket);
    if (pending.size > MAX_PENDING) {
      const oldest = pending.values().next().value!;
      pending.delete(oldest);
      refuse(oldest, `did not prove membership before ${MAX_PENDING} newer connections came`);
    }
    const reader = new StreamReader(socket, 'rendezvous', MAX_CLIENT_LINE, 'the client');
    const nonceS = randomBytes(16).toString('hex');
    const helloTimer = setTimeout(() => {
      if (rank < 0) refuse(socket, `did not prove membership within ${helloMs} ms`);
    }, helloMs);
    helloTimer.unref();
    socket.setNoDelay(true);
    socket.on('error', () => undefined);
    socket.on('close', () => {
      clearTimeout(helloTimer);
      sockets.delete(socket);
      pending.delete(socket);
      const m = members.get(rank);
      if (m !== undefined && m.socket === socket && !m.finalized) abort(rank, 'closed its connection to the rendezvous before finalize (did it exit?)');
    });
    send(socket, { challenge: nonceS });
    void (async () => {
      for (;;) {
        let msg: any;
        try {
          msg = JSON.parse(await reader.line('rendezvous'));
        } catch {
          socket.destroy();
          return;
        }
        // Anything but a JSON object (null, a number, an array) is not a message of this protocol.
        if (typeof msg !== 'object' || msg === null || Array.isArray(msg)) {
          socket.destroy();
          return;
        }
        if (rank < 0) {
          const h = msg.hello;
          if (typeof h !== 'object' || h === null) return refuse(socket, 'sent something before hello');
          const r = strictUint(h.rank, MAX_JOB_SIZE - 1);
          if (typeof h.nonce !== 'string' || !NONCE.test(h.nonce) || r === null) return refuse(socket, 'sent a malformed hello');
          if (!proofMatches(h.proof, proof(secret, 'hello', nonceS, h.nonce, r, String(h.size)))) {
            return refuse(socket, `claimed rank ${r} without proof of the job's secret`);
          }
          if (h.size !== size || r >= size) return refuse(socket, `rank ${r} of ${String(h.size)} does not fit this job of ${size} ranks`);
          if (members.has(r)) return refuse(socket, `rank ${r} joined twice`);
          clearTimeout(helloTimer);
          pending.delete(socket);
          rank = r;
          members.set(r, { socket, finalized: false, epoch: 0, keys: 0 });
          send(socket, { welcome: { jobId, proof: proof(secret, 'welcome', nonceS, h.nonce, jobId, r) } });
          if (aborted) socket.destroy();
          continue;
        }
        const me = members.get(rank)!;
        if (msg.put !== undefined) {
          const [key, value] = Array.isArray(msg.put) ? msg.put : [];
          if (typeof key !== 'string' || typeof value !== 'string' || key.length > MAX_KEY || value.length > MAX_VALUE || (!(key in kvs) && ++me.keys > MAX_KEYS_PER_RANK)) {
            socket.destroy(); // a member that breaks the limits aborts the job (the close handler names it)
            return;
          }
          kvs[key] = value;
        } else if (msg.fence !== undefined) {
          if (msg.fence !== me.epoch + 1) {
            socket.destroy();
            return;
          }
          const epoch = ++me.epoch;
          const set = fenced.get(epoch) ?? new Set<number>();
          fenced.set(epoch, set);
          set.add(rank);
          if (set.size === size) {
            fenced.delete(epoch);
            for (const m of members.values()) send(m.socket, { fenced: epoch, kvs });
          }
        } else if (msg.finalize === true) {
          me.finalized = true;
          send(socket, { bye: true });
          socket.end();
          if (members.size === size && [...members.values()].every((m) => m.finalized)) finish();
          return;
        } else {
          socket.destroy();
          return;
        }
      }
    })();
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen({ port: options.port ?? 0, host: options.host ?? '127.0.0.1', exclusive: true }, () => {
      server.off('error', reject);
      resolve();
    });
  });
  // Hosted by rank 0 inside join(): serving must not keep that process alive by itself (lib/job/job.ts, `unclosed`).
  if (options.unref) server.unref();
  const address = server.address() as { address: string; port: number };
  const close = async () => {
    for (const s of sockets) s.destroy();
    finish();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  };
  void done.then(() => server.close());
  return { host: address.address, port: address.port, done, refused, close };
}

export function parseHostPort(text: string, what: string): { host: string; port: number } {
  const m = /^\[?([^\]]*?)\]?:(0|[1-9][0-9]{0,4})$/.exec(text.trim());
  if (m === null || m[1] === '' || Number(m[2]) > 65535 || Number(m[2]) === 0) throw bootstrapError('rendezvous', 'join', `${what} must be host:port (port 1..65535), got ${JSON.stringify(text)}`);
  return { host: m[1], port: Number(m[2]) };
}

async function connectWithRetry(host: string, port: number, limit: Limit): Promise<Socket> {
  let delay = 20;
  for (;;) {
    let s: Socket | undefined;
    try {
      return await bounded(
        new Promise<Socket>((resolve, reject) => {
          s = connect({ host, port });
          s.once('connect', () => {
            s!.off('error', reject);
            resolve(s!);
          });
          s.once('error', reject);
        }),
        limit,
        'join',
        `the rendezvous at ${host}:${port} did not accept the connection`,
        () => s?.destroy(),
      );
    } catch (err) {
      if (err instanceof NdError) throw err;
      if (Date.now() + delay > limit.deadline) {
        throw bootstrapError('rendezvous', 'join', `cannot reach the rendezvous at ${host}:${port}: ${(err as Error).message}`, err);
      }
      await bounded(new Promise((r) => setTimeout(r, delay)), limit, 'join', `the rendezvous at ${host}:${port} was not reached`);
      delay = Math.min(delay * 2, 500);
    }
  }
}

export class RendezvousClient implements Bootstrap {
  jobId = '';
  secret: string | undefined;
  private kvs: Record<string, string> = {};
  private epoch = 0;
  private readonly reader: StreamReader;
  private failure: Error | null = null;
  /** The server this process hosts (rank 0 when the address was free), closed after finalize. */
  hosted: RendezvousServer | null = null;

  private constructor(
    readonly launcher: 'rendezvous' | 'openmpi' | 'msmpi',
    socket: Socket,
    readonly rank: number,
    readonly size: number,
    private readonly where: string,
  ) {
    this.reader = new StreamReader(socket, 'rendezvous', MAX_SERVER_LINE, `the rendezvous at ${where}`);
  }

  /**
   * Joins the rendezvous at host:port as rank/size, proving membership with `secret` and checking the service's
   * proof in turn. Rank 0 first tries to host it there itself: when the port is taken it connects to whatever
   * holds it, which must prove it knows the secret (a startRendezvous() of the launching side does; anything else
   * is refused). The others retry until it answers or `limit` ends.
   */
  static async connect(
    launcher: 'rendezvous' | 'openmpi' | 'msmpi',
    where: string,
    rank: number,
    size: number,
    secret: string,
    limit: Limit,
  ): Promise<RendezvousClient> {
    const { host, port } = parseHostPort(where, 'the rendezvous');
    let hosted: RendezvousServer | null = null;
    if (rank === 0) {
      try {
        hosted = await startRendezvous({ host, port, size, secret, unref: true });
      } catch (err) {
        const code = (err as NodeJS.ErrnoException).code;
        // EADDRINUSE: someone holds the port (it must prove itself below); EADDRNOTAVAIL: not an address of this
        // host (the launching side hosts it elsewhere). Anything else is this rank's problem to report.
        if (code !== 'EADDRINUSE' && code !== 'EADDRNOTAVAIL') throw bootstrapError(launcher, 'join', `cannot host the rendezvous at ${where}: ${(err as Error).message}`, err);
      }
    }
    let socket: Socket;
    try {
      socket = await connectWithRetry(host, port, limit);
    } catch (err) {
      void hosted?.close();
      throw err;
    }
    const c = new RendezvousClient(launcher, socket, rank, size, where);
    c.hosted = hosted;
    c.secret = secret;
    try {
      // A rendezvous sends its challenge as soon as it accepts. Rank 0 that found the port taken gives what holds it
      // a few seconds to show it is one.
      const taken = rank === 0 && hosted === null;
      const first = await c.next('join', taken ? { ...limit, deadline: Math.min(limit.deadline, Date.now() + TAKEN_PORT_MS) } : limit, `the rendezvous at ${where} sent no challenge`).catch((err) => {
        if (taken && err instanceof NdError && err.code === 'ERR_ND_JOB_TIMEOUT') throw authError('join', `what listens at ${where} is not a rendezvous of netdirect/job (it sent no challenge): the port was taken before rank 0 could host it`);
        throw err;
      });
      if (typeof first.challenge !== 'string' || !NONCE.test(first.challenge)) {
        throw authError('join', `what listens at ${where} is not a rendezvous of netdirect/job (it sent ${JSON.stringify(first).slice(0, 80)}, not a challenge)${hosted === null && rank === 0 ? ': the port was taken before rank 0 could host it' : ''}`);
      }
      const nonceC = randomBytes(16).toString('hex');
      c.reader.write(`${JSON.stringify({ hello: { rank, size, nonce: nonceC, proof: proof(secret, 'hello', first.challenge, nonceC, rank, size) } })}\n`);
      const reply = await c.next('join', limit, `the rendezvous at ${where} did not answer hello`);
      if (typeof reply.welcome !== 'object' || reply.welcome === null) {
        const why = typeof reply.error === 'string' ? reply.error.slice(0, 200) : JSON.stringify(reply).slice(0, 80);
        throw authError('join', `the rendezvous at ${where} refused rank ${rank}: ${why} (is NETDIRECT_JOB_SECRET the job's?)`);
      }
      const jobId = reply.welcome.jobId;
      if (typeof jobId !== 'string' || jobId.length === 0 || jobId.length > MAX_KEY || !proofMatches(reply.welcome.proof, proof(secret, 'welcome', first.challenge, nonceC, jobId, rank))) {
        throw authError('join', `the service at ${where} could not prove it knows the job's secret: it is not this job's rendezvous`);
      }
      c.jobId = jobId;
    } catch (err) {
      c.destroy();
      throw err;
    }
    return c;
  }

  private async next(operation: string, limit?: Limit, what?: string): Promise<any> {
    if (this.failure) throw this.failure;
    this.reader.socket.ref();
    try {
      const line = await this.reader.line(operation, limit, what);
      let msg: any;
      try {
        msg = JSON.parse(line);
      } catch {
        msg = undefined;
      }
      if (typeof msg !== 'object' || msg === null || Array.isArray(msg)) {
        throw bootstrapError('rendezvous', operation, `the rendezvous at ${this.where} sent ${JSON.stringify(line.slice(0, 80))}, not a message of its protocol (is something else listening on its port?)`);
      }
      if (typeof msg.abort === 'object' && msg.abort !== null) {
        const r = strictUint(msg.abort.rank, this.size - 1);
        this.failure = r === null ? bootstrapError('rendezvous', operation, 'the rendezvous aborted the job') : peerError(r, operation, String(msg.abort.reason).slice(0, 200));
        throw this.failure;
      }
      return msg;
    } finally {
      this.reader.socket.unref();
    }
  }

  async put(key: string, value: string): Promise<void> {
    if (this.failure) throw this.failure;
    if (key.length > MAX_KEY || value.length > MAX_VALUE) throw bootstrapError('rendezvous', 'put', `a key of at most ${MAX_KEY} and a value of at most ${MAX_VALUE} characters, got ${key.length} and ${value.length}`);
    this.reader.write(`${JSON.stringify({ put: [key, value] })}\n`);
  }

  async fence(limit?: Limit): Promise<void> {
    const epoch = ++this.epoch;
    this.reader.write(`${JSON.stringify({ fence: epoch })}\n`);
    const reply = await this.next('fence', limit, `the rendezvous did not end fence ${epoch} (a rank has not reached it)`);
    if (reply.fenced !== epoch || typeof reply.kvs !== 'object' || reply.kvs === null || Array.isArray(reply.kvs) || !Object.values(reply.kvs).every((v) => typeof v === 'string')) {
      throw bootstrapError('rendezvous', 'fence', `expected the end of fence ${epoch} with the keys, got ${JSON.stringify(reply).slice(0, 80)}`);
    }
    this.kvs = reply.kvs;
  }

  async get(key: string): Promise<string> {
    const v = Object.hasOwn(this.kvs, key) ? this.kvs[key] : undefined;
    if (v === undefined) throw bootstrapError('rendezvous', 'get', `no key ${key} (was it put before the last fence?)`);
    return v;
  }

  async finalize(limit?: Limit): Promise<void> {
    try {
      this.reader.write(`${JSON.stringify({ finalize: true })}\n`);
      await this.next('finalize', limit).catch(() => undefined);
    } finally {
      this.reader.socket.destroy();
    }
    if (this.hosted) {
      // The others may still be finalizing: wait for them a while (at most 5 s, or what is left of `limit`),
      // then stop serving. The hosted server does not keep the process alive (see startRendezvous's unref): the
      // timer does, until they are done.
      const wait = Math.max(0, Math.min(5000, limit ? limit.deadline - Date.now() : 5000));
      let timer: NodeJS.Timeout | undefined;
      await Promise.race([this.hosted.done, new Promise((r) => (timer = setTimeout(r, wait)))]);
      clearTimeout(timer);
      await this.hosted.close();
    }
  }

  destroy(): void {
    this.reader.socket.destroy();
    void this.hosted?.close();
  }
}

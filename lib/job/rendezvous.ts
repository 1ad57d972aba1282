// The explicit rendezvous: a small TCP key-value service for jobs no PMI launcher serves (Open MPI's mpirun,
// MS-MPI's mpiexec, scripts and tests). Messages are JSON objects, one per line:
//   client → server  {"hello":{"rank":r,"size":n}}  {"put":[key,value]}  {"fence":epoch}  {"finalize":true}
//   server → client  {"welcome":{"jobId":id}}  {"fenced":epoch,"kvs":{...}}  {"abort":{"rank":r,"reason":...}}
// A fence completes when every rank of the job has sent it; the reply carries every key put so far. A rank
// whose connection closes before it said finalize aborts the job: every other rank's pending fence fails
// naming it, so no rank waits forever for a dead one. The server ends once every rank finalized.

import { createServer, connect, type Server, type Socket } from 'node:net';
import type { Bootstrap } from './bootstrap.js';
import { bootstrapError, peerError } from './errors.js';
import { StreamReader } from './wire.js';

export interface RendezvousServer {
  readonly host: string;
  readonly port: number;
  /** Settles when every rank finalized (or the job aborted). */
  readonly done: Promise<void>;
  close(): Promise<void>;
}

interface Member {
  socket: Socket;
  finalized: boolean;
}

/** Starts a rendezvous for a job of `size` ranks on host:port (port 0: any free one). */
export async function startRendezvous(options: { host?: string; port?: number; size: number }): Promise<RendezvousServer> {
  const size = options.size;
  if (!Number.isInteger(size) || size < 1) throw new RangeError(`size must be a positive integer, got ${size}`);
  const members = new Map<number, Member>();
  const kvs: Record<string, string> = {};
  const fenced = new Map<number, Set<number>>();
  const jobId = `nd-${process.pid}-${Date.now().toString(36)}`;
  let aborted = false;
  let finish!: () => void;
  const done = new Promise<void>((resolve) => (finish = resolve));
  const send = (s: Socket, m: unknown) => {
    if (!s.destroyed) s.write(`${JSON.stringify(m)}\n`);
  };
  const abort = (rank: number, reason: string) => {
    if (aborted) return;
    aborted = true;
    for (const m of members.values()) send(m.socket, { abort: { rank, reason } });
    finish();
  };
  const server: Server = createServer((socket) => {
    let rank = -1;
    const reader = new StreamReader(socket, 'rendezvous');
    socket.on('error', () => undefined);
    socket.on('close', () => {
      const m = members.get(rank);
      if (m !== undefined && !m.finalized) abort(rank, 'closed its connection to the rendezvous before finalize (did it exit?)');
    });
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
        if (typeof msg.hello === 'object' && msg.hello !== null) {
          const r = msg.hello.rank;
          if (!Number.isInteger(r) || r < 0 || r >= size || msg.hello.size !== size || members.has(r)) {
            send(socket, { error: `rank ${r} of ${msg.hello.size} does not fit this job of ${size} ranks (or joined twice)` });
            socket.destroy();
            return;
          }
          rank = r;
          members.set(r, { socket, finalized: false });
          send(socket, { welcome: { jobId } });
          if (aborted) socket.destroy();
        } else if (Array.isArray(msg.put) && rank >= 0) {
          kvs[String(msg.put[0])] = String(msg.put[1]);
        } else if (msg.fence !== undefined && rank >= 0) {
          const epoch = Number(msg.fence);
          const set = fenced.get(epoch) ?? new Set<number>();
          fenced.set(epoch, set);
          set.add(rank);
          if (set.size === size) {
            fenced.delete(epoch);
            for (const m of members.values()) send(m.socket, { fenced: epoch, kvs });
          }
        } else if (msg.finalize && rank >= 0) {
          members.get(rank)!.finalized = true;
          send(socket, { bye: true });
          socket.end();
          if (members.size === size && [...members.values()].every((m) => m.finalized)) finish();
          return;
        }
      }
    })();
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port ?? 0, options.host ?? '127.0.0.1', () => {
      server.off('error', reject);
      resolve();
    });
  });
  const address = server.address() as { address: string; port: number };
  void done.then(() => server.close());
  return {
    host: address.address,
    port: address.port,
    done,
    close: async () => {
      for (const m of members.values()) m.socket.destroy();
      finish();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

export function parseHostPort(text: string, what: string): { host: string; port: number } {
  const m = /^\[?([^\]]*?)\]?:(\d+)$/.exec(text.trim());
  if (m === null || m[1] === '' || Number(m[2]) > 65535) throw bootstrapError('rendezvous', 'join', `${what} must be host:port, got ${JSON.stringify(text)}`);
  return { host: m[1], port: Number(m[2]) };
}

async function connectWithRetry(host: string, port: number, deadline: number): Promise<Socket> {
  let delay = 20;
  for (;;) {
    try {
      return await new Promise<Socket>((resolve, reject) => {
        const s = connect({ host, port });
        s.once('connect', () => {
          s.off('error', reject);
          resolve(s);
        });
        s.once('error', reject);
      });
    } catch (err) {
      if (Date.now() + delay > deadline) {
        throw bootstrapError('rendezvous', 'join', `cannot reach the rendezvous at ${host}:${port}: ${(err as Error).message}`, err);
      }
      await new Promise((r) => setTimeout(r, delay));
      delay = Math.min(delay * 2, 500);
    }
  }
}

export class RendezvousClient implements Bootstrap {
  jobId = '';
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
  ) {
    this.reader = new StreamReader(socket, 'rendezvous');
  }

  /**
   * Joins the rendezvous at host:port as rank/size. Rank 0 first tries to host it there itself (when the address
   * is local and the port free); the others retry until it answers or `timeoutMs` passed.
   */
  static async connect(
    launcher: 'rendezvous' | 'openmpi' | 'msmpi',
    where: string,
    rank: number,
    size: number,
    timeoutMs: number,
  ): Promise<RendezvousClient> {
    const { host, port } = parseHostPort(where, 'the rendezvous');
    let hosted: RendezvousServer | null = null;
    if (rank === 0) hosted = await startRendezvous({ host, port, size }).catch(() => null); // in use: someone hosts it
    const socket = await connectWithRetry(host, port, Date.now() + timeoutMs);
    const c = new RendezvousClient(launcher, socket, rank, size);
    c.hosted = hosted;
    try {
      socket.write(`${JSON.stringify({ hello: { rank, size } })}\n`);
      const reply = await c.next('join');
      if (typeof reply.welcome !== 'object' || reply.welcome === null) throw bootstrapError('rendezvous', 'join', `the rendezvous refused rank ${rank}: ${reply.error ?? JSON.stringify(reply)}`);
      c.jobId = String(reply.welcome.jobId);
    } catch (err) {
      c.destroy();
      throw err;
    }
    return c;
  }

  private async next(operation: string): Promise<any> {
    if (this.failure) throw this.failure;
    this.reader.socket.ref();
    try {
      const line = await this.reader.line(operation);
      let msg: any;
      try {
        msg = JSON.parse(line);
      } catch {
        msg = undefined;
      }
      if (typeof msg !== 'object' || msg === null || Array.isArray(msg)) {
        throw bootstrapError('rendezvous', operation, `the rendezvous sent ${JSON.stringify(line.slice(0, 80))}, not a message of its protocol (is something else listening on its port?)`);
      }
      if (typeof msg.abort === 'object' && msg.abort !== null) {
        this.failure = peerError(msg.abort.rank, operation, String(msg.abort.reason));
        throw this.failure;
      }
      return msg;
    } finally {
      this.reader.socket.unref();
    }
  }

  async put(key: string, value: string): Promise<void> {
    if (this.failure) throw this.failure;
    this.reader.write(`${JSON.stringify({ put: [key, value] })}\n`);
  }

  async fence(): Promise<void> {
    const epoch = ++this.epoch;
    this.reader.write(`${JSON.stringify({ fence: epoch })}\n`);
    const reply = await this.next('fence');
    if (reply.fenced !== epoch || typeof reply.kvs !== 'object' || reply.kvs === null) {
      throw bootstrapError('rendezvous', 'fence', `expected the end of fence ${epoch} with the keys, got ${JSON.stringify(reply).slice(0, 80)}`);
    }
    this.kvs = reply.kvs;
  }

  async get(key: string): Promise<string> {
    const v = this.kvs[key];
    if (v === undefined) throw bootstrapError('rendezvous', 'get', `no key ${key} (was it put before the last fence?)`);
    return v;
  }

  async finalize(): Promise<void> {
    try {
      this.reader.write(`${JSON.stringify({ finalize: true })}\n`);
      await this.next('finalize').catch(() => undefined);
    } finally {
      this.reader.socket.destroy();
    }
    if (this.hosted) {
      // The others may still be finalizing: wait for them a while, then stop serving.
      await Promise.race([this.hosted.done, new Promise((r) => setTimeout(r, 5000).unref())]);
      await this.hosted.close();
    }
  }

  destroy(): void {
    this.reader.socket.destroy();
    void this.hosted?.close();
  }
}

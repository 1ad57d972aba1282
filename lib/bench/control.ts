// The out-of-band control channel between ndbench's client and server (perftest has one too): JSON lines
// over a TCP connection. It carries the client's configuration, the ND listen port and the start/end of each
// phase. Remote memory descriptors travel in ND private data, not here. It is idle while a phase is timed.

import * as net from 'node:net';

export type Message = { op: string; [key: string]: unknown };

export class Control {
  private buffer = '';
  private readonly queue: Message[] = [];
  private waiter: { resolve: (m: Message) => void; reject: (e: Error) => void } | null = null;
  private failure: Error | null = null;

  constructor(readonly socket: net.Socket) {
    socket.setNoDelay(true);
    socket.setEncoding('utf8');
    socket.on('data', (chunk: string) => {
      this.buffer += chunk;
      for (let nl = this.buffer.indexOf('\n'); nl >= 0; nl = this.buffer.indexOf('\n')) {
        const line = this.buffer.slice(0, nl);
        this.buffer = this.buffer.slice(nl + 1);
        if (line.trim() === '') continue;
        let m: Message;
        try {
          m = JSON.parse(line) as Message;
        } catch {
          this.fail(new Error(`control channel: bad message ${JSON.stringify(line.slice(0, 80))}`));
          return;
        }
        if (m.op === 'error') {
          this.fail(new Error(`peer failed: ${String(m.message)}`));
          return;
        }
        if (this.waiter) {
          const w = this.waiter;
          this.waiter = null;
          w.resolve(m);
        } else {
          this.queue.push(m);
        }
      }
    });
    socket.on('error', (err) => this.fail(new Error(`control channel: ${err.message}`)));
    socket.on('close', () => this.fail(new Error('control channel closed by the peer')));
  }

  get localAddress(): string {
    return stripV4Mapped(this.socket.localAddress ?? '127.0.0.1');
  }
  get remoteAddress(): string {
    return stripV4Mapped(this.socket.remoteAddress ?? '127.0.0.1');
  }

  private fail(err: Error): void {
    if (this.failure) return;
    this.failure = err;
    if (this.waiter) {
      const w = this.waiter;
      this.waiter = null;
      w.reject(err);
    }
  }

  send(m: Message): void {
    if (!this.socket.destroyed) this.socket.write(JSON.stringify(m) + '\n');
  }

  /** The next message; `op` (if given) must match. Rejects on peer error, close or timeout. */
  next(op: string | undefined, timeoutMs: number): Promise<Message> {
    const queued = this.queue.shift();
    const check = (m: Message): Message => {
      if (op !== undefined && m.op !== op) throw new Error(`control channel: expected '${op}', got '${m.op}'`);
      return m;
    };
    if (queued) return Promise.resolve(queued).then(check);
    if (this.failure) return Promise.reject(this.failure);
    return new Promise<Message>((resolve, reject) => {
      const timer = setTimeout(() => {
        this.waiter = null;
        reject(new Error(`control channel: no '${op ?? 'message'}' from the peer within ${timeoutMs / 1000} s`));
      }, timeoutMs);
      this.waiter = {
        resolve: (m) => {
          clearTimeout(timer);
          try {
            resolve(check(m));
          } catch (e) {
            reject(e);
          }
        },
        reject: (e) => {
          clearTimeout(timer);
          reject(e);
        },
      };
    });
  }

  close(): void {
    this.socket.end();
    this.socket.destroy();
  }

  /**
   * Connects, retrying while the server is not listening yet (MPI ranks and --loopback start together).
   * `waiting` is told once, at the first refusal, so a client started before its server does not look hung.
   */
  static async connect(host: string, port: number, timeoutMs: number, waiting?: (message: string) => void): Promise<Control> {
    const deadline = Date.now() + timeoutMs;
    let told = false;
    for (;;) {
      try {
        const socket = await new Promise<net.Socket>((resolve, reject) => {
          const s = net.connect({ host, port });
          s.once('connect', () => {
            s.off('error', reject);
            resolve(s);
          });
          s.once('error', reject);
        });
        return new Control(socket);
      } catch (err) {
        const code = (err as NodeJS.ErrnoException).code;
        if (code !== 'ECONNREFUSED' && code !== 'ECONNRESET') {
          throw new Error(`cannot reach the ndbench server at ${host}:${port}: ${(err as Error).message}`);
        }
        if (Date.now() > deadline) {
          throw new Error(
            `no ndbench server at ${host}:${port} after ${timeoutMs / 1000} s (${code}): start the server first ` +
              `(\`ndbench <test>\` with no host, on ${host}), check the host and the control port (-p), or wait longer (--timeout)`,
          );
        }
        if (!told && waiting !== undefined) {
          told = true;
          waiting(`ndbench: waiting for the server at ${host}:${port} (retrying for up to ${timeoutMs / 1000} s)\n`);
        }
        await new Promise((r) => setTimeout(r, 50));
      }
    }
  }
}

export function stripV4Mapped(a: string): string {
  return a.startsWith('::ffff:') && a.includes('.') ? a.slice(7) : a;
}

/** Listens and resolves once listening; accept() then waits for one connection. */
export async function listenControl(host: string | undefined, port: number): Promise<{ server: net.Server; port: number; accept(timeoutMs: number): Promise<Control> }> {
  const server = net.createServer();
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen({ host, port }, () => {
      server.off('error', reject);
      resolve();
    });
  });
  const bound = (server.address() as net.AddressInfo).port;
  return {
    server,
    port: bound,
    accept(timeoutMs: number) {
      return new Promise<Control>((resolve, reject) => {
        const timer = setTimeout(() => reject(new Error(`no ndbench client connected within ${timeoutMs / 1000} s`)), timeoutMs);
        server.once('connection', (s) => {
          clearTimeout(timer);
          server.close();
          resolve(new Control(s));
        });
      });
    },
  };
}

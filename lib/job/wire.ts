// A byte stream read in the two framings the launchers use: newline-terminated lines (PMI-1) and frames with a
// 6-character decimal length in front (PMI-2). One request at a time per stream: the PMI clients await each
// reply before the next command, as the protocols require.

import type { Socket } from 'node:net';
import { bootstrapError } from './errors.js';

export class StreamReader {
  private chunks: Buffer[] = [];
  private buffered = 0;
  private waiter: (() => void) | null = null;
  private ended: Error | null = null;

  constructor(
    readonly socket: Socket,
    private readonly launcher: string,
  ) {
    socket.on('data', (d: Buffer) => {
      this.chunks.push(d);
      this.buffered += d.length;
      this.wake();
    });
    const end = (err?: Error) => {
      this.ended ??= err ?? new Error('the launcher closed the connection');
      this.wake();
    };
    socket.on('end', () => end());
    socket.on('close', () => end());
    socket.on('error', (err) => end(err));
  }

  private wake(): void {
    const w = this.waiter;
    this.waiter = null;
    w?.();
  }

  private all(): Buffer {
    if (this.chunks.length > 1) this.chunks = [Buffer.concat(this.chunks)];
    return this.chunks[0] ?? Buffer.alloc(0);
  }

  private take(n: number): Buffer {
    const b = this.all();
    const out = b.subarray(0, n);
    this.chunks = n < b.length ? [b.subarray(n)] : [];
    this.buffered -= n;
    return Buffer.from(out);
  }

  private async more(operation: string): Promise<void> {
    if (this.ended) throw bootstrapError(this.launcher, operation, `connection lost: ${this.ended.message}`, this.ended);
    await new Promise<void>((resolve) => (this.waiter = resolve));
  }

  /** The next line, without its newline. */
  async line(operation: string): Promise<string> {
    for (;;) {
      const i = this.all().indexOf(0x0a);
      if (i >= 0) return this.take(i + 1).toString('utf8', 0, i);
      await this.more(operation);
    }
  }

  /** Exactly n bytes. */
  async exact(n: number, operation: string): Promise<Buffer> {
    while (this.buffered < n) await this.more(operation);
    return this.take(n);
  }

  write(text: string): void {
    this.socket.write(text);
  }
}

// A byte stream read in the two framings the launchers use: newline-terminated lines (PMI-1, the rendezvous) and
// frames with a 6-character decimal length in front (PMI-2). One request at a time per stream: the PMI clients
// await each reply before the next command, as the protocols require.
//
// Bounded: the stream holds at most `maxBytes` unread bytes (a line or frame longer than that, or a peer sending
// more than it was asked for, ends the stream with an NdError naming the limit), every byte is looked at once
// for a newline (chunks are kept as they came and joined only for the line taken), and every read ends at its
// Limit's deadline or signal.

import type { Socket } from 'node:net';
import { abortError, bootstrapError, timeoutError, type Limit } from './errors.js';

export class StreamReader {
  private chunks: Buffer[] = [];
  private buffered = 0;
  /** Chunks before this index, holding `scannedBytes` bytes, have no newline. */
  private scannedChunks = 0;
  private scannedBytes = 0;
  private waiter: (() => void) | null = null;
  private ended: Error | null = null;
  private overflow = false;

  constructor(
    readonly socket: Socket,
    private readonly launcher: string,
    /** The most unread bytes held: the longest line or frame a reply may be. */
    readonly maxBytes = 64 * 1024,
    /** Names what is at the other end, for messages ("the launcher", "the rendezvous"). */
    private readonly who = 'the launcher',
  ) {
    socket.on('data', (d: Buffer) => {
      if (this.ended) return;
      this.chunks.push(d);
      this.buffered += d.length;
      if (this.buffered > this.maxBytes) {
        this.overflow = true;
        this.ended = new Error(`${this.who} sent more than ${this.maxBytes} bytes without the end of a ${this.launcher === 'pmi2' ? 'frame' : 'line'} (the limit of one reply)`);
        this.chunks = [];
        this.buffered = 0;
        socket.destroy();
      }
      this.wake();
    });
    const end = (err?: Error) => {
      this.ended ??= err ?? new Error(`${this.who} closed the connection`);
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

  /** Removes the first n buffered bytes and returns them as one Buffer (the only copy). */
  private take(n: number): Buffer {
    const out = Buffer.allocUnsafe(n);
    let at = 0;
    while (at < n) {
      const c = this.chunks[0];
      const k = Math.min(c.length, n - at);
      c.copy(out, at, 0, k);
      at += k;
      if (k === c.length) this.chunks.shift();
      else this.chunks[0] = c.subarray(k);
    }
    this.buffered -= n;
    this.scannedChunks = 0;
    this.scannedBytes = 0;
    return out;
  }

  /** Offset of the first newline in the buffered bytes, or -1; each byte is scanned once. */
  private newline(): number {
    while (this.scannedChunks < this.chunks.length) {
      const c = this.chunks[this.scannedChunks];
      const i = c.indexOf(0x0a);
      if (i >= 0) return this.scannedBytes + i;
      this.scannedBytes += c.length;
      this.scannedChunks++;
    }
    return -1;
  }

  private more(operation: string, limit: Limit | undefined, what: string): Promise<void> {
    if (this.ended) {
      const how = this.overflow ? this.ended.message : `connection lost: ${this.ended.message}`;
      return Promise.reject(bootstrapError(this.launcher, operation, how, this.ended));
    }
    if (limit === undefined) return new Promise<void>((resolve) => (this.waiter = resolve));
    const { signal } = limit;
    if (signal?.aborted) return Promise.reject(abortError(operation, signal));
    const left = limit.deadline - Date.now();
    if (left <= 0) return Promise.reject(timeoutError(operation, what, limit));
    return new Promise<void>((resolve, reject) => {
      const done = () => {
        clearTimeout(timer);
        signal?.removeEventListener('abort', onAbort);
        this.waiter = null;
      };
      const onAbort = () => {
        done();
        reject(abortError(operation, signal!));
      };
      const timer = setTimeout(() => {
        done();
        reject(timeoutError(operation, what, limit));
      }, left);
      signal?.addEventListener('abort', onAbort, { once: true });
      this.waiter = () => {
        done();
        resolve();
      };
    });
  }

  /** The next line, without its newline; `what` names the reply awaited, for the timeout's message. */
  async line(operation: string, limit?: Limit, what = `${this.who} did not answer`): Promise<string> {
    for (;;) {
      const i = this.newline();
      if (i >= 0) return this.take(i + 1).toString('utf8', 0, i);
      await this.more(operation, limit, what);
    }
  }

  /** Exactly n bytes (n at most maxBytes). */
  async exact(n: number, operation: string, limit?: Limit, what = `${this.who} did not answer`): Promise<Buffer> {
    if (n > this.maxBytes) throw bootstrapError(this.launcher, operation, `${this.who} announced ${n} bytes, more than the ${this.maxBytes} a reply may have`);
    while (this.buffered < n) await this.more(operation, limit, what);
    return this.take(n);
  }

  write(text: string): void {
    if (!this.socket.destroyed) this.socket.write(text);
  }
}

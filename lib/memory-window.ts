// MemoryWindow (IND2MemoryWindow): a remote-access window over part of a region, bound and invalidated
// through a queue pair (qp.bind / qp.invalidate).

import type { NativeMemoryWindow } from './native.js';
import type { AdapterContext } from './context.js';
import { InFlight } from './requests.js';

/**
 * A memory window (IND2MemoryWindow): remote access to part of a region, granted with qp.bind() and revoked
 * with qp.invalidate() (or by the peer's Send with Invalidate), without registering or deregistering memory.
 * After a bind, `remoteToken` is the token to send the peer (with the address of the bound range).
 *
 * @example
 * ```ts
 * import type { Adapter, QueuePair } from 'netdirect';
 * // `qp` is connected (Connector); the peer may read 4 KiB of `region` until the window is invalidated.
 * async function lend(adapter: Adapter, qp: QueuePair): Promise<void> {
 *   const region = await adapter.allocateMemory(65536);
 *   const window = adapter.createMemoryWindow();
 *   const remote = await qp.bind(window, region.slice(0, 4096), { read: true });
 *   console.log(window.bound, window.remoteToken === remote.token); // true true: send `remote` to the peer
 *   await qp.invalidate(window);
 *   await window.close();
 * }
 * void lend;
 * ```
 */
export class MemoryWindow implements AsyncDisposable {
  /** @internal */ readonly _ctx: AdapterContext;
  /** @internal */ readonly _native: NativeMemoryWindow;
  /** @internal Bind/invalidate requests in flight. */
  readonly _inflight = new InFlight();
  /** @internal */ _bound = false;
  private _state: 'open' | 'closing' | 'closed' = 'open';
  private _closing: Promise<void> | null = null;

  /** @internal Use adapter.createMemoryWindow(). */
  constructor(ctx: AdapterContext, native: NativeMemoryWindow) {
    this._ctx = ctx;
    this._native = native;
  }

  /** The token (32 bits) peers use once the window is bound; 0 after close(). */
  get remoteToken(): number {
    return this._state === 'closed' ? 0 : this._native.remoteToken >>> 0;
  }
  /** True between a completed bind and a completed invalidate. */
  get bound(): boolean {
    return this._bound;
  }
  /** @internal */
  get _open(): boolean {
    return this._state === 'open';
  }

  /**
   * Waits for bind/invalidate requests that use the window, then releases it. Idempotent: every call returns
   * the same promise, which never rejects.
   */
  close(): Promise<void> {
    return (this._closing ??= this._close());
  }

  private async _close(): Promise<void> {
    this._state = 'closing';
    await this._inflight.idle();
    this._native.close();
    this._state = 'closed';
    this._bound = false;
    this._ctx.forget(this);
  }

  /** close(), for `await using window = adapter.createMemoryWindow()`. */
  async [Symbol.asyncDispose](): Promise<void> {
    await this.close();
  }
}

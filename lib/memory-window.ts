// MemoryWindow (IND2MemoryWindow): a remote-access window over part of a region, bound and invalidated
// through a queue pair (qp.bind / qp.invalidate).

import type { NativeMemoryWindow } from './native.js';
import type { Adapter } from './adapter.js';
import { InFlight } from './requests.js';

export class MemoryWindow implements AsyncDisposable {
  /** @internal */ readonly _adapter: Adapter;
  /** @internal */ readonly _native: NativeMemoryWindow;
  /** @internal Bind/invalidate requests in flight. */
  readonly _inflight = new InFlight();
  /** @internal */ _bound = false;
  private _state: 'open' | 'closing' | 'closed' = 'open';
  private _closing: Promise<void> | null = null;

  /** @internal Use adapter.createMemoryWindow(). */
  constructor(adapter: Adapter, native: NativeMemoryWindow) {
    this._adapter = adapter;
    this._native = native;
  }

  /** The token peers use once the window is bound. */
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

  /** Waits for bind/invalidate requests that use the window, then releases it. Idempotent. */
  close(): Promise<void> {
    return (this._closing ??= this._close());
  }

  private async _close(): Promise<void> {
    this._state = 'closing';
    await this._inflight.idle();
    this._native.close();
    this._state = 'closed';
    this._bound = false;
    this._adapter._forget(this);
  }

  async [Symbol.asyncDispose](): Promise<void> {
    await this.close();
  }
}

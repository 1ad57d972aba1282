// Listener (IND2Listener): accepts connection requests. Each getConnectionRequest() supplies a fresh native
// connector; the returned Connector is in the 'requested' state (accept() or reject() it).

import { ERR_ND_CLOSED, NdError, asNdError, callerStack, misuse } from './errors.js';
import type { NativeListener } from './native.js';
import type { AdapterContext } from './context.js';
import { Connector, abortedError, signalOf, type Endpoint } from './connector.js';
import { InFlight } from './requests.js';
import { K_GET_CONNECTION_REQUEST } from './records.js';
import { checkOptions } from './validate.js';

export interface ListenOptions {
  /** Local address to listen on (default: the adapter's address). */
  host?: string;
  /** Port (default 0: an ephemeral port; read it from listener.address). */
  port?: number;
  /** Connection requests the provider queues before getConnectionRequest() takes them (default 0: its default). */
  backlog?: number;
}

/** The keys getConnectionRequest() accepts (strict option checking: validate.ts checkOptions). */
const CONNECTION_REQUEST_KEYS = ['signal'] as const;

export interface ConnectionRequestOptions {
  /**
   * Aborting withdraws this getConnectionRequest() (its native connector is released; a request arriving later
   * goes to another call) and rejects with an NdError of code ERR_ND_ABORTED whose `cause` is `signal.reason`.
   */
  signal?: AbortSignal;
}

/**
 * A listening endpoint (IND2Listener), from adapter.listen(). Each connection request comes as a Connector in the
 * 'requested' state, from getConnectionRequest() or by iterating the listener; accept() or reject() it.
 *
 * @example
 * ```ts
 * import { openAdapter } from 'netdirect';
 * const adapter = await openAdapter('127.0.0.1');
 * const listener = await adapter.listen({ port: 0 });
 * console.log(`listening on ${listener.address.host}:${listener.address.port}`);
 * const cq = adapter.createCompletionQueue();
 * const serving = (async () => {
 *   for await (const request of listener) {
 *     await request.accept(adapter.createQueuePair({ receiveCq: cq }));
 *     console.log('connected from', request.peerAddress);
 *   }
 * })();
 * await adapter.connect(adapter.createQueuePair({ receiveCq: cq }), listener.address);
 * await listener.close(); // the loop ends
 * await serving;
 * await adapter.close();
 * ```
 */
export class Listener implements AsyncDisposable, AsyncIterable<Connector> {
  /** The address and port listened on. */
  readonly address: Endpoint;
  /** @internal */ readonly _ctx: AdapterContext;
  /** @internal */ readonly _native: NativeListener;
  private readonly _inflight = new InFlight();
  private readonly _waiting = new Set<Connector>();
  private _state: 'open' | 'closing' | 'closed' = 'open';
  private _closing: Promise<void> | null = null;
  private _cancelEpoch = 0;  // bumped by each abort (see _waitForRequest)

  /** @internal Use adapter.listen(). */
  constructor(ctx: AdapterContext, native: NativeListener) {
    this._ctx = ctx;
    this._native = native;
    const a = native.getLocalAddress();
    this.address = Object.freeze({ host: a.host, port: a.port });
  }

  /**
   * Waits for the next connection request. Rejects with ND_CANCELED when the listener is closed, with
   * ERR_ND_ABORTED when `options.signal` aborts first.
   *
   * @param options - signal: withdraws this call when aborted.
   * @returns a connector in the 'requested' state: accept() or reject() it; its privateData is the initiator's.
   * @throws {@link NdError} ERR_ND_CLOSED when the listener or the adapter is closed (or closes meanwhile);
   *   ERR_ND_INVALID_ARGUMENT for an unknown option or a signal that is not an AbortSignal; ND_CANCELED when
   *   close() cancels the wait; ERR_ND_ABORTED when `signal` aborts.
   */
  async getConnectionRequest(options: ConnectionRequestOptions = {}): Promise<Connector> {
    const op = 'getConnectionRequest';
    try {
      if (this._state !== 'open') throw misuse(ERR_ND_CLOSED, op, 'listener is closed');
      this._ctx.checkOpen(op);
      checkOptions(options, op, CONNECTION_REQUEST_KEYS);
      const signal = signalOf(options.signal, op);
      if (signal?.aborted) throw abortedError(op, signal);
      for (;;) {
        const connector = await this._waitForRequest(op, signal);
        if (connector !== null) return connector;
      }
    } catch (err) {
      throw callerStack(asNdError(err, op));
    }
  }

  // One native GetConnectionRequest. ND can only cancel all of a listener's requests at once
  // (CancelOverlappedRequests), so an abort cancels them all and bumps _cancelEpoch: the others see ND_CANCELED
  // from a newer epoch with their own signal not aborted and resolve null, to be issued again (no connection is
  // lost: a request not yet matched stays queued in the provider).
  private async _waitForRequest(op: string, signal: AbortSignal | undefined): Promise<Connector | null> {
    const epoch = this._cancelEpoch;
    const connector = new Connector(this._ctx, this._ctx.native.createConnector());
    connector._state = 'waiting';
    this._waiting.add(connector);
    const onAbort = () => {
      this._cancelEpoch++;
      try {
        this._native.cancel();
      } catch {
        // Nothing pending any more.
      }
    };
    signal?.addEventListener('abort', onAbort, { once: true });
    try {
      await this._ctx.overlapped(K_GET_CONNECTION_REQUEST, op, this._inflight, (id) => this._native.getConnectionRequest(id, connector._native),
        `on ${this.address.host}:${this.address.port}`);
    } catch (err) {
      this._waiting.delete(connector);
      await connector.close();
      if (signal?.aborted) throw abortedError(op, signal, err);
      const sibling = err instanceof NdError && err.code === 'ND_CANCELED' && this._cancelEpoch !== epoch && this._state === 'open';
      if (sibling) return null;
      throw err;
    } finally {
      signal?.removeEventListener('abort', onAbort);
    }
    this._waiting.delete(connector);
    if (this._ctx.state !== 'open') {
      await connector.close();
      throw misuse(ERR_ND_CLOSED, op, 'adapter closed while waiting for a connection request');
    }
    if (signal?.aborted) {
      // The abort came after a request was matched to this call: refuse it rather than drop it silently.
      connector._state = 'requested';
      this._ctx.adopt(connector);
      try {
        connector.reject();
      } finally {
        await connector.close();
      }
      throw abortedError(op, signal);
    }
    connector._state = 'requested';
    this._ctx.adopt(connector);
    return connector;
  }

  /**
   * Yields connection requests until the listener is closed (the loop then ends without an error).
   *
   * @throws {@link NdError} what getConnectionRequest() rejects with while the listener is open.
   */
  async *[Symbol.asyncIterator](): AsyncIterator<Connector> {
    while (this._state === 'open') {
      let connector: Connector;
      try {
        connector = await this.getConnectionRequest();
      } catch (err) {
        if (this._state !== 'open') return;
        throw err;
      }
      yield connector;
    }
  }

  /**
   * Cancels pending getConnectionRequest() calls (they reject with ND_CANCELED), then releases. Idempotent: every
   * call returns the same promise. Connections already accepted are not affected.
   */
  close(): Promise<void> {
    return (this._closing ??= this._close());
  }

  private async _close(): Promise<void> {
    this._state = 'closing';
    try {
      this._native.cancel();
    } catch {
      // Nothing pending.
    }
    await this._inflight.idle();
    await Promise.allSettled([...this._waiting].map((c) => c.close()));
    this._native.close();
    this._state = 'closed';
    this._ctx.forget(this);
  }

  /** close(), for `await using listener = await adapter.listen()`. */
  async [Symbol.asyncDispose](): Promise<void> {
    await this.close();
  }
}

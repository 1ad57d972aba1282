// Connector (IND2Connector): connection setup and teardown for one queue pair. Active side: connect() then
// completeConnect() (adapter.connect() does both); passive side: a connector from listener.getConnectionRequest(),
// then accept() or reject().

import { isIP } from 'node:net';
import { lookup } from 'node:dns/promises';
import {
  ERR_ND_ABORTED,
  ERR_ND_CLOSED,
  ERR_ND_INVALID_ARGUMENT,
  ERR_ND_OUT_OF_RANGE,
  ERR_ND_WRONG_ADAPTER,
  ERR_ND_BUSY,
  NdError,
  asNdError,
  callerStack,
  misuse,
} from './errors.js';
import type { NativeConnector } from './native.js';
import type { AdapterContext } from './context.js';
import { QueuePair } from './queue-pair.js';
import { InFlight } from './requests.js';
import { K_ACCEPT, K_COMPLETE_CONNECT, K_CONNECT, K_DISCONNECT, K_NOTIFY_DISCONNECT } from './records.js';
import { checkIndex, checkOptions, describe } from './validate.js';

/** An IP address and a port. */
export interface Endpoint {
  /** IPv4 or IPv6 address (no brackets). */
  host: string;
  /** 0..65535. */
  port: number;
}

export interface ConnectOptions {
  /** Sent to the peer with the connection request (at most info.maxCallerData bytes). */
  privateData?: Uint8Array;
  /** Reads this side will serve (IRD); default info.maxInboundReadLimit. */
  inboundReadLimit?: number;
  /** Reads this side wants to issue (ORD); default info.maxOutboundReadLimit. */
  outboundReadLimit?: number;
  /** Local port to bind (default: ephemeral). */
  localPort?: number;
  /**
   * Aborting cancels the connector (CancelOverlappedRequests: the connection attempt is abandoned and its
   * socket closed) and rejects with an NdError of code ERR_ND_ABORTED whose `cause` is `signal.reason`.
   * Without a signal the software provider still bounds the handshake (NETDIRECT_HANDSHAKE_TIMEOUT_MS, default
   * 10 s: ND_IO_TIMEOUT).
   */
  signal?: AbortSignal;
}

/** The keys connect() accepts (strict option checking: validate.ts checkOptions). */
const CONNECT_KEYS = ['privateData', 'inboundReadLimit', 'outboundReadLimit', 'localPort', 'signal'] as const;
/** The keys accept() accepts. */
const ACCEPT_KEYS = ['privateData', 'inboundReadLimit', 'outboundReadLimit', 'signal'] as const;

/** Options of connector.accept(). */
export interface AcceptOptions {
  /** Sent to the peer with the accept (at most info.maxCalleeData bytes); it reads connector.privateData. */
  privateData?: Uint8Array;
  /** Reads this side will serve (IRD); default info.maxInboundReadLimit. */
  inboundReadLimit?: number;
  /** Reads this side wants to issue (ORD); default info.maxOutboundReadLimit. */
  outboundReadLimit?: number;
  /**
   * Aborting cancels the pending Accept (the connection is abandoned and closed) and rejects with an NdError of
   * code ERR_ND_ABORTED whose `cause` is `signal.reason`. Without a signal the software provider still bounds the
   * wait for a peer-to-peer initiator's RTR (NETDIRECT_HANDSHAKE_TIMEOUT_MS, default 10 s: ND_IO_TIMEOUT).
   */
  signal?: AbortSignal;
}

/** Checks an optional `signal` option: undefined or an AbortSignal. */
export function signalOf(value: unknown, operation: string): AbortSignal | undefined {
  if (value !== undefined && !(value instanceof AbortSignal)) {
    throw misuse(ERR_ND_INVALID_ARGUMENT, operation, `signal must be an AbortSignal, got ${describe(value)}`);
  }
  return value;
}

/** The NdError an aborted operation rejects with (signal.reason as its cause). */
export function abortedError(operation: string, signal: AbortSignal | undefined, fallbackCause?: unknown): NdError {
  return new NdError(ERR_ND_ABORTED, 0, operation, `${operation}: aborted`, { cause: signal?.reason ?? fallbackCause });
}

/**
 * Parses "host:port", "[v6]:port" or { host, port } (brackets optional in the object form) without resolving.
 *
 * @param remote - the address, as connect() and listener.address take and give it.
 * @param operation - the name errors give the failed call (default 'connect').
 * @returns `{ host, port }`; a host name stays a name.
 * @throws {@link NdError} ERR_ND_INVALID_ARGUMENT for a malformed address or an empty host; ERR_ND_OUT_OF_RANGE
 *   for a port that is not an integer in 0..65535.
 */
export function parseAddress(remote: string | Endpoint, operation = 'connect'): Endpoint {
  let host: string;
  let port: unknown;
  if (typeof remote === 'string') {
    const m = /^\[([^\]]+)\]:(\d+)$/.exec(remote) ?? /^([^:[\]]+):(\d+)$/.exec(remote);
    if (m === null) {
      throw misuse(ERR_ND_INVALID_ARGUMENT, operation, `address must be "host:port" or "[ipv6]:port", got ${JSON.stringify(remote)}`);
    }
    host = m[1];
    port = Number(m[2]);
  } else if (typeof remote === 'object' && remote !== null && typeof remote.host === 'string') {
    host = remote.host.startsWith('[') && remote.host.endsWith(']') ? remote.host.slice(1, -1) : remote.host;
    port = remote.port;
  } else {
    throw misuse(ERR_ND_INVALID_ARGUMENT, operation, `address must be "host:port", "[ipv6]:port" or { host, port }, got ${describe(remote)}`);
  }
  if (host.length === 0) throw misuse(ERR_ND_INVALID_ARGUMENT, operation, 'host is empty');
  if (typeof port !== 'number' || !Number.isInteger(port) || port < 0 || port > 65535) {
    throw misuse(ERR_ND_OUT_OF_RANGE, operation, `port must be an integer in 0..65535, got ${describe(port)}`);
  }
  return { host, port };
}

/** parseAddress() and, for a name, a DNS lookup to the numeric address the provider needs. */
export async function parseEndpoint(remote: string | Endpoint, operation = 'connect'): Promise<Endpoint> {
  const ep = parseAddress(remote, operation);
  if (isIP(ep.host) !== 0) return ep;
  try {
    const { address } = await lookup(ep.host);
    return { host: address, port: ep.port };
  } catch (err) {
    throw new NdError('ND_INVALID_ADDRESS', 0xc0000141, operation, `${operation}: cannot resolve host ${JSON.stringify(ep.host)}: ${(err as Error).message}`, { cause: err });
  }
}

/**
 * A connect's destination must name one peer: not the unspecified address (0.0.0.0, ::) and not port 0. Checked
 * here so the error is the same on every provider (ND has no status of its own for it: the software provider and
 * Windows kernel providers fail the Connect with STATUS_BAD_NETWORK_NAME, docs/nd2.md §3.6).
 */
function checkDestination(target: Endpoint, operation: string): void {
  const family = isIP(target.host);
  const unspecified = (family === 4 && target.host.split('.').every((b) => Number(b) === 0)) || (family === 6 && /^[0:]+$/.test(target.host));
  if (unspecified || target.port === 0) {
    const where = family === 6 ? `[${target.host}]:${target.port}` : `${target.host}:${target.port}`;
    throw new NdError('ND_INVALID_ADDRESS', 0xc0000141, operation,
      `${operation}: ${where} names no peer (${unspecified ? 'the unspecified address' : 'port 0'}): connect to the listener's address and port, e.g. listener.address`);
  }
}

function privateDataOf(value: unknown, max: number, name: string, operation: string): Uint8Array | null {
  if (value === undefined || value === null) return null;
  if (!(value instanceof Uint8Array)) throw misuse(ERR_ND_INVALID_ARGUMENT, operation, `privateData must be a Uint8Array, got ${describe(value)}`);
  if (value.byteLength > max) throw misuse(ERR_ND_OUT_OF_RANGE, operation, `privateData has ${value.byteLength} bytes; ${name} is ${max}`);
  return value;
}

/** Where a connector is in its life: `connector.state`. */
export type ConnectorState =
  | 'idle' // fresh from createConnector()
  | 'waiting' // handed to a pending getConnectionRequest
  | 'requested' // a connection request arrived (passive side)
  | 'connecting' // Connect in progress
  | 'connected' // Connect done, CompleteConnect not yet
  | 'completing' // CompleteConnect / Accept in progress
  | 'established'
  | 'disconnecting'
  | 'disconnected'
  | 'rejected'
  | 'failed'
  | 'closed';

const GONE_CODES = new Set(['ND_CONNECTION_INVALID', 'ND_CONNECTION_ABORTED', 'ND_CANCELED', 'STATUS_CONNECTION_DISCONNECTED', 'ND_IO_TIMEOUT', 'ND_CONNECTION_REFUSED']);

/**
 * Connection setup and teardown for one queue pair (IND2Connector). Active side: adapter.connect(), or
 * adapter.createConnector() then connect() and completeConnect(); passive side: a connector from
 * listener.getConnectionRequest(), then accept() or reject(). `privateData` carries the peer's bytes of the
 * handshake; `disconnected` settles when the connection is gone.
 *
 * @example
 * ```ts
 * import { openAdapter, encodeRemote } from 'netdirect';
 * const adapter = await openAdapter('127.0.0.1');
 * const listener = await adapter.listen();
 * const cq = adapter.createCompletionQueue();
 * const region = await adapter.allocateMemory(4096, { remoteWrite: true });
 * // passive side: accept with this side's memory in the private data
 * const served = (async () => {
 *   const request = await listener.getConnectionRequest();
 *   await request.accept(adapter.createQueuePair({ receiveCq: cq }), { privateData: encodeRemote(region.remote()) });
 *   return request;
 * })();
 * // active side, step by step (adapter.connect() does the three steps)
 * const connector = adapter.createConnector();
 * const qp = adapter.createQueuePair({ receiveCq: cq });
 * await connector.connect(qp, listener.address, { signal: AbortSignal.timeout(5000) });
 * await connector.completeConnect();
 * console.log(connector.state, connector.peerAddress, (await served).state); // 'established' ... 'established'
 * await connector.disconnect();
 * await adapter.close();
 * ```
 */
export class Connector implements AsyncDisposable {
  /** @internal */ readonly _ctx: AdapterContext;
  /** @internal */ readonly _native: NativeConnector;
  /** @internal */ _qp: QueuePair | null = null;
  /** @internal */ _state: ConnectorState = 'idle';
  private readonly _inflight = new InFlight();
  private _aborted = false;
  private _disconnecting: Promise<void> | null = null;
  private _closing: Promise<void> | null = null;
  private _disconnected: Promise<void> | null = null;
  private _resolveDisconnected: (() => void) | null = null;
  private _notifyArmed = false;
  // The endpoints stay readable after the connection ends (ND's Get*Address then fails ND_CONNECTION_INVALID):
  // read once the connection is established, or on first successful use before that.
  private _local: Endpoint | null = null;
  private _peer: Endpoint | null = null;

  /** @internal Use adapter.createConnector() or listener.getConnectionRequest(). */
  constructor(ctx: AdapterContext, native: NativeConnector) {
    this._ctx = ctx;
    this._native = native;
  }

  /** The connection state ('established' once usable). */
  get state(): ConnectorState {
    return this._state;
  }
  /** The queue pair connected (or being connected) through this connector. */
  get qp(): QueuePair | null {
    return this._qp;
  }

  private _checkState(operation: string, ...allowed: ConnectorState[]): void {
    if (this._state === 'closed') throw misuse(ERR_ND_CLOSED, operation, 'connector is closed');
    if (!allowed.includes(this._state)) {
      throw misuse(ERR_ND_BUSY, operation, `connector is ${this._state}; ${operation}() needs it ${allowed.join(' or ')}`);
    }
    this._ctx.checkOpen(operation);
  }

  private _checkQp(qp: unknown, operation: string): QueuePair {
    if (!(qp instanceof QueuePair)) throw misuse(ERR_ND_INVALID_ARGUMENT, operation, `qp must be a QueuePair, got ${describe(qp)}`);
    if (qp._ctx !== this._ctx) throw misuse(ERR_ND_WRONG_ADAPTER, operation, 'the queue pair belongs to another adapter');
    if (!qp._open) throw misuse(ERR_ND_CLOSED, operation, 'the queue pair is closed');
    if (qp._connector !== null && qp._connector !== this) throw misuse(ERR_ND_BUSY, operation, 'the queue pair already has a connection');
    return qp;
  }

  private _limits(options: ConnectOptions | AcceptOptions, operation: string): [number, number] {
    const info = this._ctx.info;
    const ird = this._ctx.count(options.inboundReadLimit, 'inboundReadLimit', info.maxInboundReadLimit, info.maxInboundReadLimit, operation, true);
    const ord = this._ctx.count(options.outboundReadLimit, 'outboundReadLimit', info.maxOutboundReadLimit, info.maxOutboundReadLimit, operation, true);
    return [ird, ord];
  }

  /**
   * Sends a connection request for `qp` to `remote`. completeConnect() finishes it.
   *
   * @param qp - an unconnected queue pair of this connector's adapter.
   * @param remote - 'host:port', '[v6]:port' or `{ host, port }`; a host name is resolved.
   * @param options - privateData (at most adapter.info.maxCallerData bytes), inboundReadLimit and
   *   outboundReadLimit (Reads in flight, up to adapter.info.maxInboundReadLimit / maxOutboundReadLimit),
   *   localPort (0..65535), signal.
   * @throws {@link NdError} ERR_ND_CLOSED when the connector (or `qp`) is closed; ERR_ND_BUSY when it was used
   *   already; ERR_ND_INVALID_ARGUMENT for a malformed address, a wrong queue pair or option;
   *   ERR_ND_WRONG_ADAPTER for a queue pair of another adapter; ERR_ND_OUT_OF_RANGE for private data or limits
   *   beyond the adapter's; ND_INVALID_ADDRESS for a name that does not resolve, 0.0.0.0 or port 0;
   *   ND_CONNECTION_REFUSED when nobody listens there or the peer rejects; ND_IO_TIMEOUT when no MPA reply
   *   comes (the peer is not an iWARP endpoint, or does not answer); ND_HOST_UNREACHABLE /
   *   ND_NETWORK_UNREACHABLE; ERR_ND_ABORTED when `signal` aborts.
   */
  async connect(qp: QueuePair, remote: string | Endpoint, options: ConnectOptions = {}): Promise<void> {
    const op = 'connect';
    try {
      this._checkState(op, 'idle');
      checkOptions(options, op, CONNECT_KEYS);
      this._checkQp(qp, op);
      const signal = signalOf(options.signal, op);
      const privateData = privateDataOf(options.privateData, this._ctx.info.maxCallerData, 'maxCallerData', op);
      const [ird, ord] = this._limits(options, op);
      const localPort = options.localPort === undefined ? 0 : checkIndex(options.localPort, 'localPort', op);
      if (localPort > 65535) throw misuse(ERR_ND_OUT_OF_RANGE, op, `localPort must be 0..65535, got ${localPort}`);
      this._state = 'connecting';
      this._qp = qp;
      qp._connector = this;
      let target: Endpoint;
      try {
        target = await parseEndpoint(remote, op);
        checkDestination(target, op);
        this._throwIfAborted(signal, op);
        this._native.bind(this._ctx.address, localPort);
        await this._withSignal(signal, () =>
          this._ctx.overlapped(K_CONNECT, op, this._inflight, (id) => this._native.connect(id, qp._native, target.host, target.port, ird, ord, privateData),
            `to ${target.host}:${target.port}`),
        );
      } catch (err) {
        this._fail(qp);
        throw this._abortedError(err, signal, op);
      }
      this._state = 'connected';
    } catch (err) {
      throw callerStack(asNdError(err, op));
    }
  }

  /**
   * Completes an active connection once the peer accepted: the queue pair is usable after this.
   *
   * @throws {@link NdError} ERR_ND_CLOSED when the connector is closed; ERR_ND_BUSY unless connect() succeeded
   *   just before; ND_CONNECTION_ABORTED or ND_CANCELED when the peer went away meanwhile; ND_IO_TIMEOUT when it
   *   stops answering.
   */
  completeConnect(): Promise<void> {
    return this._completeConnect(undefined);
  }

  /** @internal */
  async _completeConnect(signal: AbortSignal | undefined): Promise<void> {
    const op = 'completeConnect';
    try {
      this._checkState(op, 'connected');
      this._state = 'completing';
      try {
        this._throwIfAborted(signal, op);
        await this._withSignal(signal, () => this._ctx.overlapped(K_COMPLETE_CONNECT, op, this._inflight, (id) => this._native.completeConnect(id)));
      } catch (err) {
        this._fail(this._qp);
        throw this._abortedError(err, signal, op);
      }
      this._established();
    } catch (err) {
      throw callerStack(asNdError(err, op));
    }
  }

  /**
   * Accepts a connection request (passive side) with `qp`; resolves once the peer completed the connection.
   * Rejects with ND_IO_TIMEOUT if the peer does not complete it within the provider's handshake deadline, and with
   * ERR_ND_ABORTED when `options.signal` aborts first.
   *
   * @param qp - an unconnected queue pair of this connector's adapter.
   * @param options - privateData (at most adapter.info.maxCalleeData bytes), inboundReadLimit and
   *   outboundReadLimit (Reads in flight, up to the adapter's maxInboundReadLimit / maxOutboundReadLimit), signal.
   * @throws {@link NdError} ERR_ND_CLOSED when the connector (or `qp`) is closed; ERR_ND_BUSY unless the connector
   *   holds a connection request ('requested'); ERR_ND_INVALID_ARGUMENT for a wrong queue pair or option;
   *   ERR_ND_WRONG_ADAPTER for a queue pair of another adapter; ERR_ND_OUT_OF_RANGE for private data or limits
   *   beyond the adapter's; ND_CONNECTION_REFUSED when the initiator declined (reject() or close() after its
   *   connect()); ND_CONNECTION_ABORTED when it went away; ND_IO_TIMEOUT past the handshake deadline;
   *   ERR_ND_ABORTED when `signal` aborts.
   */
  async accept(qp: QueuePair, options: AcceptOptions = {}): Promise<void> {
    const op = 'accept';
    try {
      this._checkState(op, 'requested');
      checkOptions(options, op, ACCEPT_KEYS);
      this._checkQp(qp, op);
      const signal = signalOf(options.signal, op);
      const privateData = privateDataOf(options.privateData, this._ctx.info.maxCalleeData, 'maxCalleeData', op);
      const [ird, ord] = this._limits(options, op);
      if (signal?.aborted) {
        this.reject();  // refused rather than left hanging: the peer's connect fails with ND_CONNECTION_REFUSED
        throw abortedError(op, signal);
      }
      this._state = 'completing';
      this._qp = qp;
      qp._connector = this;
      try {
        await this._withSignal(signal, () =>
          this._ctx.overlapped(K_ACCEPT, op, this._inflight, (id) => this._native.accept(id, qp._native, ird, ord, privateData)),
        );
      } catch (err) {
        this._fail(qp);
        throw this._abortedError(err, signal, op);
      }
      this._established();
    } catch (err) {
      throw callerStack(asNdError(err, op));
    }
  }

  /**
   * Rejects a connection request (passive side), or a connection after connect() (active side).
   *
   * @param privateData - bytes for the peer (at most adapter.info.maxCalleeData).
   * @throws {@link NdError} ERR_ND_CLOSED when the connector is closed; ERR_ND_BUSY in any other state than
   *   'requested' or 'connected'; ERR_ND_INVALID_ARGUMENT / ERR_ND_OUT_OF_RANGE for wrong private data.
   */
  reject(privateData?: Uint8Array): void {
    const op = 'reject';
    this._checkState(op, 'requested', 'connected');
    const data = privateDataOf(privateData, this._ctx.info.maxCalleeData, 'maxCalleeData', op);
    this._native.reject(data);
    const qp = this._qp;
    this._state = 'rejected';
    if (qp !== null) this._fail(qp);
    this._resolveDisconnected?.();
  }

  /**
   * The peer's private data (from its connect, accept or reject); empty when it sent none.
   *
   * @throws {@link NdError} ERR_ND_CLOSED when the connector is closed.
   */
  get privateData(): Uint8Array {
    if (this._state === 'closed') throw misuse(ERR_ND_CLOSED, 'privateData', 'connector is closed');
    return this._native.getPrivateData();
  }

  /** The peer's read limits: inbound (Reads it serves) and outbound (Reads it issues). */
  get readLimits(): { inbound: number; outbound: number } {
    if (this._state === 'closed') throw misuse(ERR_ND_CLOSED, 'readLimits', 'connector is closed');
    const [inbound, outbound] = this._native.getReadLimits();
    return { inbound, outbound };
  }

  /**
   * This side's address and port of the connection (readable after it ended).
   *
   * @throws {@link NdError} ERR_ND_CLOSED when the connector is closed; ND_CONNECTION_INVALID before a connection
   *   exists.
   */
  get localAddress(): Endpoint {
    if (this._state === 'closed') throw misuse(ERR_ND_CLOSED, 'localAddress', 'connector is closed');
    if (this._local === null) {
      const a = this._native.getLocalAddress();
      this._local = { host: a.host, port: a.port };
    }
    return { ...this._local };
  }

  /**
   * The peer's address and port (readable after the connection ended).
   *
   * @throws {@link NdError} ERR_ND_CLOSED when the connector is closed; ND_CONNECTION_INVALID before a connection
   *   exists.
   */
  get peerAddress(): Endpoint {
    if (this._state === 'closed') throw misuse(ERR_ND_CLOSED, 'peerAddress', 'connector is closed');
    if (this._peer === null) {
      const a = this._native.getPeerAddress();
      this._peer = { host: a.host, port: a.port };
    }
    return { ...this._peer };
  }

  /**
   * Settles (always resolves, never rejects) when the connection is gone: the peer disconnected, this side
   * disconnected, the connection failed or the connector was closed. NotifyDisconnect is armed on first use.
   */
  get disconnected(): Promise<void> {
    if (this._disconnected === null) {
      this._disconnected = new Promise<void>((resolve) => {
        this._resolveDisconnected = resolve;
      });
      if (this._state === 'established') this._armNotify();
      else if (this._isOver()) this._resolveDisconnected?.();
    }
    return this._disconnected;
  }

  private _isOver(): boolean {
    return this._state === 'disconnected' || this._state === 'rejected' || this._state === 'failed' || this._state === 'closed';
  }

  private _armNotify(): void {
    if (this._notifyArmed) return;
    this._notifyArmed = true;
    const done = () => this._resolveDisconnected?.();
    this._ctx
      .overlapped(K_NOTIFY_DISCONNECT, 'notifyDisconnect', this._inflight, (id) => this._native.notifyDisconnect(id))
      .then(done, done);
  }

  private _established(): void {
    this._state = 'established';
    try {
      void this.localAddress;
      void this.peerAddress;
    } catch {
      // Already gone again (the peer disconnected at once): the getters then report why.
    }
    if (this._disconnected !== null) this._armNotify();
  }

  private _fail(qp: QueuePair | null): void {
    if (this._state !== 'closed' && this._state !== 'rejected') this._state = 'failed';
    if (qp !== null && qp._connector === this) qp._connector = null;
    this._qp = null;
    this._resolveDisconnected?.();
  }

  private _throwIfAborted(signal: AbortSignal | undefined, operation: string): void {
    if (signal?.aborted) {
      this._aborted = true;
      throw abortedError(operation, signal);
    }
  }

  private async _withSignal<T>(signal: AbortSignal | undefined, run: () => Promise<T>): Promise<T> {
    if (signal === undefined) return run();
    const onAbort = () => {
      this._aborted = true;
      try {
        this._native.cancel();
      } catch {
        // Nothing pending any more.
      }
    };
    signal.addEventListener('abort', onAbort, { once: true });
    try {
      return await run();
    } finally {
      signal.removeEventListener('abort', onAbort);
    }
  }

  private _abortedError(err: unknown, signal: AbortSignal | undefined, operation: string): unknown {
    if (this._aborted && !(err instanceof NdError && err.code === ERR_ND_ABORTED)) return abortedError(operation, signal, err);
    return err;
  }

  /**
   * Disconnects (ND flushes the queue pair: its outstanding requests complete with ND_CANCELED). Idempotent.
   * Before the connection is established it cancels the pending step instead; between connect() and
   * completeConnect() it declines the connection as reject() does (the peer's accept() fails
   * ND_CONNECTION_REFUSED). A peer already gone is not an error.
   *
   * @throws {@link NdError} the provider's status when the disconnect fails otherwise (the connector is
   *   'disconnected' either way).
   */
  disconnect(): Promise<void> {
    return (this._disconnecting ??= this._disconnect());
  }

  private async _disconnect(): Promise<void> {
    const op = 'disconnect';
    if (this._state !== 'established') {
      if (this._state === 'connected') {
        this.reject();  // nothing is pending to cancel: the connection waits for this side's answer
      } else if (this._state === 'connecting' || this._state === 'completing') {
        try {
          this._native.cancel();
        } catch {
          // Nothing pending.
        }
      }
      return;
    }
    this._state = 'disconnecting';
    const qp = this._qp;
    try {
      await this._ctx.overlapped(K_DISCONNECT, op, this._inflight, (id) => this._native.disconnect(id));
    } catch (err) {
      if (!(err instanceof NdError && GONE_CODES.has(err.code))) throw callerStack(asNdError(err, op));
    } finally {
      this._state = 'disconnected';
      if (qp !== null && qp._open) {
        try {
          qp._native.flush();
        } catch {
          // The QP is already torn down.
        }
      }
      this._resolveDisconnected?.();
    }
  }

  /** Disconnects if connected, cancels what is pending, waits for it, then releases the connector. Idempotent. */
  close(): Promise<void> {
    return (this._closing ??= this._close());
  }

  private async _close(): Promise<void> {
    if (this._state === 'established') await this.disconnect().catch(() => undefined);
    try {
      this._native.cancel();
    } catch {
      // Nothing pending.
    }
    await this._inflight.idle();
    this._native.close();
    const qp = this._qp;
    if (qp !== null && qp._connector === this) qp._connector = null;
    this._qp = null;
    this._state = 'closed';
    this._resolveDisconnected?.();
    this._ctx.forget(this);
  }

  /** close(), for `await using connector = await adapter.connect(...)`. */
  async [Symbol.asyncDispose](): Promise<void> {
    await this.close();
  }
}

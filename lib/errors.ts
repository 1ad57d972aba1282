// NdError: the one error class of netdirect. ND failures carry the ND status name as `code` and the status as
// an unsigned 32-bit number; misuse caught in TypeScript carries an ERR_ND_* code and status 0. The addon builds
// its errors through the factory below (handed over once with binding.setErrorFactory), so every error a user
// sees is an NdError whichever side raised it.

/** A wrong argument type or value (not a number where one is needed, unknown option value, ...). */
export const ERR_ND_INVALID_ARGUMENT = 'ERR_ND_INVALID_ARGUMENT';
/** The object (adapter, queue pair, memory region, ...) is closed or closing. */
export const ERR_ND_CLOSED = 'ERR_ND_CLOSED';
/** The object belongs to another adapter. */
export const ERR_ND_WRONG_ADAPTER = 'ERR_ND_WRONG_ADAPTER';
/** A segment, depth, size or offset outside what the object or adapter allows. */
export const ERR_ND_OUT_OF_RANGE = 'ERR_ND_OUT_OF_RANGE';
/** More scatter/gather entries than the queue pair was created for. */
export const ERR_ND_TOO_MANY_SGES = 'ERR_ND_TOO_MANY_SGES';
/** The ArrayBuffer was detached (transferred) and no longer has memory behind it. */
export const ERR_ND_DETACHED = 'ERR_ND_DETACHED';
/** The object is busy with another operation that must finish first. */
export const ERR_ND_BUSY = 'ERR_ND_BUSY';
/** The operation was aborted through its AbortSignal. */
export const ERR_ND_ABORTED = 'ERR_ND_ABORTED';
/** An address the addon cannot parse: a port above 65535, a non-numeric IPv6 zone, a host that is no address. */
export const ERR_ND_INVALID_ADDRESS = 'ERR_ND_INVALID_ADDRESS';
/** An addon object constructed with `new` from JavaScript: only its factory (openAdapter(), adapter.create...()) makes one. */
export const ERR_ND_ILLEGAL_CONSTRUCTOR = 'ERR_ND_ILLEGAL_CONSTRUCTOR';
/** An argument that should be an object of this addon (a queue pair, a region, ...) is something else. */
export const ERR_ND_FOREIGN_OBJECT = 'ERR_ND_FOREIGN_OBJECT';
/** A memory region that is not registered (never, or no longer). */
export const ERR_ND_INVALID_REGION = 'ERR_ND_INVALID_REGION';

export type NdMisuseCode =
  | typeof ERR_ND_INVALID_ARGUMENT
  | typeof ERR_ND_CLOSED
  | typeof ERR_ND_WRONG_ADAPTER
  | typeof ERR_ND_OUT_OF_RANGE
  | typeof ERR_ND_TOO_MANY_SGES
  | typeof ERR_ND_DETACHED
  | typeof ERR_ND_BUSY
  | typeof ERR_ND_ABORTED
  | typeof ERR_ND_INVALID_ADDRESS
  | typeof ERR_ND_ILLEGAL_CONSTRUCTOR
  | typeof ERR_ND_FOREIGN_OBJECT
  | typeof ERR_ND_INVALID_REGION;

/** netdirect/job: the launcher's protocol or the rendezvous failed or refused (docs/job.md). */
export const ERR_ND_JOB_BOOTSTRAP = 'ERR_ND_JOB_BOOTSTRAP';
/** netdirect/job: a peer rank failed without an ND status to report (the error's `peer` names it). */
export const ERR_ND_JOB_PEER = 'ERR_ND_JOB_PEER';
/**
 * netdirect/job: ranks called different things at the same point: another collective, or the same one with a
 * different count, element type, operation or root. The message names both calls; every rank of the job fails.
 */
export const ERR_ND_JOB_MISMATCH = 'ERR_ND_JOB_MISMATCH';

/** netdirect/job: a rank, a rendezvous or a connecting peer could not prove it belongs to the job (docs/job.md "Membership"). */
export const ERR_ND_JOB_AUTH = 'ERR_ND_JOB_AUTH';
/** netdirect/job: a launcher, the rendezvous, a peer or a notification did not answer within the call's timeoutMs. */
export const ERR_ND_JOB_TIMEOUT = 'ERR_ND_JOB_TIMEOUT';
/**
 * netdirect/job: a rank gave up on a collective (its timeoutMs passed or its signal aborted). A collective given
 * up on one rank cannot be resumed, so the job is failed on every rank: this is job.failure, and every later call
 * throws it (docs/job.md "Giving up on a collective").
 */
export const ERR_ND_JOB_ABANDONED = 'ERR_ND_JOB_ABANDONED';

/** Codes of the job layer (status 0, like misuse, but about the job rather than the call). */
export type NdJobCode =
  | typeof ERR_ND_JOB_BOOTSTRAP
  | typeof ERR_ND_JOB_PEER
  | typeof ERR_ND_JOB_MISMATCH
  | typeof ERR_ND_JOB_AUTH
  | typeof ERR_ND_JOB_TIMEOUT
  | typeof ERR_ND_JOB_ABANDONED;

/** The name of every ND status netdirect knows (binding/nd/nd_status.h; docs/nd2.md says what each means here). */
export type NdStatusName =
  | 'ND_SUCCESS'
  | 'ND_TIMEOUT'
  | 'ND_PENDING'
  | 'ND_BUFFER_OVERFLOW'
  | 'ND_DEVICE_BUSY'
  | 'ND_NO_MORE_ENTRIES'
  | 'ND_UNSUCCESSFUL'
  | 'ND_ACCESS_VIOLATION'
  | 'ND_INVALID_HANDLE'
  | 'ND_INVALID_PARAMETER'
  | 'ND_INVALID_DEVICE_REQUEST'
  | 'ND_NO_MEMORY'
  | 'ND_INVALID_PARAMETER_MIX'
  | 'ND_DATA_OVERRUN'
  | 'ND_SHARING_VIOLATION'
  | 'ND_INSUFFICIENT_RESOURCES'
  | 'ND_DEVICE_NOT_READY'
  | 'ND_IO_TIMEOUT'
  | 'ND_NOT_SUPPORTED'
  | 'ND_INTERNAL_ERROR'
  | 'ND_INVALID_PARAMETER_1'
  | 'ND_INVALID_PARAMETER_2'
  | 'ND_INVALID_PARAMETER_3'
  | 'ND_INVALID_PARAMETER_4'
  | 'ND_INVALID_PARAMETER_5'
  | 'ND_INVALID_PARAMETER_6'
  | 'ND_INVALID_PARAMETER_7'
  | 'ND_INVALID_PARAMETER_8'
  | 'ND_INVALID_PARAMETER_9'
  | 'ND_INVALID_PARAMETER_10'
  | 'ND_CANCELED'
  | 'ND_REMOTE_ERROR'
  | 'ND_INVALID_ADDRESS'
  | 'ND_INVALID_DEVICE_STATE'
  | 'ND_INVALID_BUFFER_SIZE'
  | 'ND_TOO_MANY_ADDRESSES'
  | 'ND_ADDRESS_ALREADY_EXISTS'
  | 'ND_CONNECTION_REFUSED'
  | 'ND_CONNECTION_INVALID'
  | 'ND_CONNECTION_ACTIVE'
  | 'ND_NETWORK_UNREACHABLE'
  | 'ND_HOST_UNREACHABLE'
  | 'ND_CONNECTION_ABORTED'
  | 'ND_DEVICE_REMOVED'
  | 'STATUS_CONNECTION_DISCONNECTED'
  | 'STATUS_BAD_NETWORK_NAME'
  | 'STATUS_ADDRESS_ALREADY_ASSOCIATED'
  | 'STATUS_DATA_ERROR';

/**
 * `NdError.code`: an ND status name for failures the provider reports, an ERR_ND_* code for misuse caught before
 * anything reaches ND, or the hex value (`'0xC0001234'`) of a status this table does not name.
 */
export type NdErrorCode = NdStatusName | NdMisuseCode | NdJobCode | `0x${string}`;

// The same table as binding/nd/nd_status.h (ND_STATUS_LIST + ND_EXTRA_STATUS_LIST), kept here so that names
// resolve without loading the addon.
const STATUS_NAMES: ReadonlyMap<number, NdStatusName> = new Map<number, NdStatusName>([
  [0x00000000, 'ND_SUCCESS'],
  [0x00000102, 'ND_TIMEOUT'],
  [0x00000103, 'ND_PENDING'],
  [0x80000005, 'ND_BUFFER_OVERFLOW'],
  [0x80000011, 'ND_DEVICE_BUSY'],
  [0x8000001a, 'ND_NO_MORE_ENTRIES'],
  [0xc0000001, 'ND_UNSUCCESSFUL'],
  [0xc0000005, 'ND_ACCESS_VIOLATION'],
  [0xc0000008, 'ND_INVALID_HANDLE'],
  [0xc000000d, 'ND_INVALID_PARAMETER'],
  [0xc0000010, 'ND_INVALID_DEVICE_REQUEST'],
  [0xc0000017, 'ND_NO_MEMORY'],
  [0xc0000030, 'ND_INVALID_PARAMETER_MIX'],
  [0xc000003c, 'ND_DATA_OVERRUN'],
  [0xc0000043, 'ND_SHARING_VIOLATION'],
  [0xc000009a, 'ND_INSUFFICIENT_RESOURCES'],
  [0xc00000a3, 'ND_DEVICE_NOT_READY'],
  [0xc00000b5, 'ND_IO_TIMEOUT'],
  [0xc00000bb, 'ND_NOT_SUPPORTED'],
  [0xc00000e5, 'ND_INTERNAL_ERROR'],
  [0xc00000ef, 'ND_INVALID_PARAMETER_1'],
  [0xc00000f0, 'ND_INVALID_PARAMETER_2'],
  [0xc00000f1, 'ND_INVALID_PARAMETER_3'],
  [0xc00000f2, 'ND_INVALID_PARAMETER_4'],
  [0xc00000f3, 'ND_INVALID_PARAMETER_5'],
  [0xc00000f4, 'ND_INVALID_PARAMETER_6'],
  [0xc00000f5, 'ND_INVALID_PARAMETER_7'],
  [0xc00000f6, 'ND_INVALID_PARAMETER_8'],
  [0xc00000f7, 'ND_INVALID_PARAMETER_9'],
  [0xc00000f8, 'ND_INVALID_PARAMETER_10'],
  [0xc0000120, 'ND_CANCELED'],
  [0xc000013d, 'ND_REMOTE_ERROR'],
  [0xc0000141, 'ND_INVALID_ADDRESS'],
  [0xc0000184, 'ND_INVALID_DEVICE_STATE'],
  [0xc0000206, 'ND_INVALID_BUFFER_SIZE'],
  [0xc0000209, 'ND_TOO_MANY_ADDRESSES'],
  [0xc000020a, 'ND_ADDRESS_ALREADY_EXISTS'],
  [0xc0000236, 'ND_CONNECTION_REFUSED'],
  [0xc000023a, 'ND_CONNECTION_INVALID'],
  [0xc000023b, 'ND_CONNECTION_ACTIVE'],
  [0xc000023c, 'ND_NETWORK_UNREACHABLE'],
  [0xc000023d, 'ND_HOST_UNREACHABLE'],
  [0xc0000241, 'ND_CONNECTION_ABORTED'],
  [0xc00002b6, 'ND_DEVICE_REMOVED'],
  [0xc000020c, 'STATUS_CONNECTION_DISCONNECTED'],
  [0xc00000cc, 'STATUS_BAD_NETWORK_NAME'],
  [0xc0000238, 'STATUS_ADDRESS_ALREADY_ASSOCIATED'],
  [0xc000003e, 'STATUS_DATA_ERROR'],
]);

const STATUS_VALUES: ReadonlyMap<string, number> = new Map([...STATUS_NAMES].map(([v, n]) => [n, v]));

/** Status values lib/ itself needs. */
export const ND_SUCCESS = 0;
export const ND_PENDING = 0x103;
export const ND_NO_MORE_ENTRIES = 0x8000001a;
export const ND_BUFFER_OVERFLOW = 0x80000005;
export const ND_CANCELED = 0xc0000120;
export const ND_ACCESS_VIOLATION = 0xc0000005;
export const ND_REMOTE_ERROR = 0xc000013d;
export const ND_IO_TIMEOUT = 0xc00000b5;
export const ND_INSUFFICIENT_RESOURCES = 0xc000009a;
export const ND_CONNECTION_REFUSED = 0xc0000236;
export const ND_CONNECTION_ABORTED = 0xc0000241;

export function hex32(value: number): string {
  return '0x' + (value >>> 0).toString(16).toUpperCase().padStart(8, '0');
}

/**
 * The name of an ND status ('ND_ACCESS_VIOLATION' for 0xC0000005). Accepts signed or unsigned 32-bit values;
 * an unknown status is named by its hex value ('0xC0001234').
 *
 * @param status - an ND status (HRESULT/NTSTATUS), e.g. a raw completion's `status`.
 * @returns its name, or '0x' and 8 upper-case hex digits.
 */
export function ndStatusName(status: number): NdStatusName | `0x${string}` {
  const unsigned = status >>> 0;
  return STATUS_NAMES.get(unsigned) ?? (hex32(unsigned) as `0x${string}`);
}

/**
 * The value of a status name ('ND_CANCELED' → 0xC0000120), or undefined.
 *
 * @param name - a status name as in NdError.code.
 * @returns the unsigned 32-bit status, or undefined for a name the table does not have (ERR_ND_* codes included).
 */
export function ndStatusValue(name: NdStatusName | string): number | undefined {
  return STATUS_VALUES.get(name);
}

/**
 * The one error class of netdirect. `code` says what failed: an ND status name ('ND_CANCELED',
 * 'ND_ACCESS_VIOLATION', ...: the provider reported it, `status` is its value; docs/nd2.md says what each means
 * here) or an ERR_ND_* code for misuse caught before anything reached ND (`status` 0). `operation` names the
 * call ('write', 'connect', ...). An abort through an AbortSignal is an NdError named 'AbortError' with code
 * ERR_ND_ABORTED.
 *
 * @example
 * ```ts
 * import { NdError, type QueuePair, type MemoryRegion, type RemoteMemory } from 'netdirect';
 * async function put(qp: QueuePair, local: MemoryRegion, remote: RemoteMemory): Promise<boolean> {
 *   try {
 *     await qp.write(local, remote);
 *     return true;
 *   } catch (err) {
 *     if (!(err instanceof NdError)) throw err;
 *     if (err.code === 'ND_CANCELED') return false; // flushed: the connection is gone
 *     if (err.code === 'ND_ACCESS_VIOLATION') console.error('the peer does not allow this Write:', err.message);
 *     throw err;
 *   }
 * }
 * void put;
 * ```
 */
export class NdError extends Error {
  /** The ND status name ('ND_ACCESS_VIOLATION', 'ND_CANCELED', ...) or an ERR_ND_* code for misuse. */
  readonly code: NdErrorCode;
  /** The HRESULT/NTSTATUS as an unsigned 32-bit number; 0 for misuse caught before reaching ND. */
  readonly status: number;
  /** The operation that failed: 'write', 'connect', 'registerMemory', ... */
  readonly operation: string;

  /**
   * Errors are made by netdirect; a subclass or a test may make its own.
   *
   * @param code - the status name or ERR_ND_* code.
   * @param status - the status value (0 for misuse); stored unsigned.
   * @param operation - the failed call.
   * @param message - what happened and what to do.
   * @param options - cause: the underlying error, if any.
   */
  constructor(code: NdErrorCode, status: number, operation: string, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.code = code;
    this.status = status >>> 0;
    this.operation = operation;
    this.name = code === ERR_ND_ABORTED ? 'AbortError' : 'NdError';
  }

  /** True for errors whose code is an ND status name (as opposed to ERR_ND_* misuse). */
  get isStatus(): boolean {
    return !this.code.startsWith('ERR_ND_');
  }
}

/** A misuse error (status 0). */
export function misuse(code: NdMisuseCode, operation: string, message: string): NdError {
  return new NdError(code, 0, operation, `${operation}: ${message}`);
}

/** An error for an ND status returned by the provider, with context for the message. */
export function statusError(status: number, operation: string, context?: string): NdError {
  const name = ndStatusName(status);
  const text = `${operation} failed: ${name} (${hex32(status)})${context ? ': ' + context : ''}`;
  return new NdError(name, status, operation, text);
}

/** The factory handed to the addon: (code, status, operation, message) → NdError. */
export function errorFactory(code: string, status: number, operation: string, message: string): Error {
  // The addon passes an ND status name or an ERR_ND_* code (binding/addon/addon.cc), so the cast only widens nothing.
  const resolved = (code || (status ? ndStatusName(status) : ERR_ND_INVALID_ARGUMENT)) as NdErrorCode;
  return new NdError(resolved, status >>> 0, operation, message);
}

/**
 * Gives `err` the stack of the code running now and returns it; API methods call it in their catch block, so
 * only when an error actually happens. After an `await`, V8 appends the awaiting callers ("at async userFn",
 * zero-cost async stack traces), so an error that settles a request from a completion batch still points at
 * the code that started the request, instead of at the batch callback. Capturing a stack eagerly before every
 * native call cost 3-5 µs per operation, more than a whole write on the data path.
 */
export function callerStack<E extends Error>(err: E): E {
  Error.captureStackTrace(err, callerStack);
  return err;
}

/** Any thrown value as an NdError (non-NdErrors become ND_INTERNAL_ERROR-free misuse wrappers keeping cause). */
export function asNdError(err: unknown, operation: string): NdError {
  if (err instanceof NdError) return err;
  const message = err instanceof Error ? err.message : String(err);
  return new NdError(ERR_ND_INVALID_ARGUMENT, 0, operation, `${operation}: ${message}`, { cause: err });
}

/** The callbacks of the waits on each signal (one 'abort' listener per signal: see whenAborted). */
const aborters = new WeakMap<AbortSignal, Set<() => void>>();

/**
 * Runs `callback` once when `signal` aborts; returns the function that forgets it. Every wait given one signal
 * (requests of lib/waiting.ts abortable, the job's waits of lib/job/errors.ts raceLimit) shares a single 'abort'
 * listener: an EventTarget listener costs about a microsecond to add and remove (a large part of a loopback round
 * trip), and Node warns of a leak past 10 listeners on one signal, which a program posting its receives ahead with
 * one signal would pass.
 */
export function whenAborted(signal: AbortSignal, callback: () => void): () => void {
  let set = aborters.get(signal);
  if (set === undefined) {
    const callbacks = (set = new Set());
    aborters.set(signal, callbacks);
    signal.addEventListener(
      'abort',
      () => {
        aborters.delete(signal);
        for (const f of [...callbacks]) f();
        callbacks.clear();
      },
      { once: true },
    );
  }
  const callbacks = set;
  callbacks.add(callback);
  return () => callbacks.delete(callback);
}

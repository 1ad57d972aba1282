// Errors of the job layer: every one is an NdError. Those caused by a peer carry `peer` (its rank) and name it
// in the message; those of the launcher's protocol carry the launcher's name.

import { ERR_ND_ABORTED, ERR_ND_INVALID_ARGUMENT, ERR_ND_OUT_OF_RANGE, ERR_ND_JOB_ABANDONED, ERR_ND_JOB_AUTH, ERR_ND_JOB_BOOTSTRAP, ERR_ND_JOB_MISMATCH, ERR_ND_JOB_PEER, ERR_ND_JOB_TIMEOUT, NdError, whenAborted } from '../errors.js';

export { ERR_ND_JOB_ABANDONED, ERR_ND_JOB_AUTH, ERR_ND_JOB_BOOTSTRAP, ERR_ND_JOB_MISMATCH, ERR_ND_JOB_PEER, ERR_ND_JOB_TIMEOUT };

/** An NdError that may name the rank it is about. */
export type JobError = NdError & { peer?: number };


export function bootstrapError(launcher: string, operation: string, message: string, cause?: unknown): JobError {
  return new NdError(ERR_ND_JOB_BOOTSTRAP, 0, operation, `${operation} (${launcher}): ${message}`, { cause });
}

/** A party that could not prove it belongs to the job (the rendezvous, a rank connecting or accepting). */
export function authError(operation: string, message: string, peer?: number): JobError {
  const err: JobError = new NdError(ERR_ND_JOB_AUTH, 0, operation, `${operation}: ${message}`);
  if (peer !== undefined) err.peer = peer;
  return err;
}

/**
 * A wait's end: `timeoutMs` passed (ERR_ND_JOB_TIMEOUT) or its signal aborted (ERR_ND_ABORTED, cause: the
 * signal's reason). `what` says what did not answer.
 */
export interface Limit {
  /** Date.now() value at which the wait ends. */
  readonly deadline: number;
  /** The timeout the deadline came from, for messages. */
  readonly timeoutMs: number;
  readonly signal?: AbortSignal;
}

/**
 * Checks a call's { timeoutMs, signal } (either may be absent): timeoutMs an integer min..2^31-1 (setTimeout's
 * range), signal an AbortSignal. Every job call that waits takes these two the same way.
 */
export function checkWaitOptions(operation: string, timeoutMs: unknown, signal: unknown, min = 1): void {
  if (timeoutMs !== undefined && (!Number.isSafeInteger(timeoutMs) || (timeoutMs as number) < min || (timeoutMs as number) > 0x7fffffff)) {
    throw new NdError(ERR_ND_OUT_OF_RANGE, 0, operation, `${operation}: timeoutMs must be an integer ${min}..${0x7fffffff}, got ${String(timeoutMs)}`);
  }
  if (signal !== undefined && !(signal instanceof AbortSignal)) throw new NdError(ERR_ND_INVALID_ARGUMENT, 0, operation, `${operation}: signal must be an AbortSignal`);
}

export function limitOf(timeoutMs: number, signal?: AbortSignal): Limit {
  return { deadline: Date.now() + timeoutMs, timeoutMs, signal };
}

export function timeoutError(operation: string, what: string, limit: Limit): JobError {
  return new NdError(ERR_ND_JOB_TIMEOUT, 0, operation, `${operation}: ${what} within timeoutMs ${limit.timeoutMs} ms`);
}

export function abortError(operation: string, signal: AbortSignal): JobError {
  return new NdError(ERR_ND_ABORTED, 0, operation, `${operation}: aborted`, { cause: signal.reason });
}

/**
 * Settles with `work`, or rejects when `limit`'s deadline passes or its signal aborts first (then `onEnd` runs,
 * e.g. to close the socket that was being waited on). The timer is cleared as soon as `work` settles.
 */
export function bounded<T>(work: Promise<T>, limit: Limit | undefined, operation: string, what: string, onEnd?: () => void): Promise<T> {
  if (limit === undefined) return work;
  return raceLimit(work, limit, (why) => {
    onEnd?.();
    return why === 'abort' ? abortError(operation, limit.signal!) : timeoutError(operation, what, limit);
  });
}

/**
 * Settles with `work`, or, when `limit`'s deadline passes or its signal aborts first, rejects with what `end`
 * returns for that reason ('abort' at once when the signal is already aborted). `work` is left to settle on its
 * own (its rejection is handled).
 */
export function raceLimit<T>(work: Promise<T>, limit: Limit, end: (why: 'timeout' | 'abort') => Error): Promise<T> {
  const { signal } = limit;
  if (signal?.aborted) {
    work.catch(() => undefined);
    return Promise.reject(end('abort'));
  }
  return new Promise<T>((resolve, reject) => {
    let timer: NodeJS.Timeout | undefined;
    let forget: (() => void) | undefined;
    const stop = (why: 'timeout' | 'abort') => {
      cleanup();
      work.catch(() => undefined);
      reject(end(why));
    };
    const cleanup = () => {
      clearTimeout(timer);
      forget?.();
    };
    timer = setTimeout(() => stop('timeout'), Math.max(0, limit.deadline - Date.now()));
    // One listener per signal however many waits share it (lib/errors.ts whenAborted).
    if (signal) forget = whenAborted(signal, () => stop('abort'));
    work.then(
      (v) => {
        cleanup();
        resolve(v);
      },
      (err) => {
        cleanup();
        reject(err);
      },
    );
  });
}

/** How long a call of the job waits: for ever (MPI's way) unless a timeout or a signal is given. */
export interface WaitOptions {
  /** Give up after this many milliseconds (1..2^31-1): ERR_ND_JOB_TIMEOUT. */
  timeoutMs?: number;
  /** Give up when it aborts: ERR_ND_ABORTED. */
  signal?: AbortSignal;
}

/** A call's { timeoutMs, signal } checked (checkWaitOptions), as a Limit; undefined when neither is given. */
export function waitLimit(options: WaitOptions | undefined, operation: string): Limit | undefined {
  if (options !== undefined && (typeof options !== 'object' || options === null)) throw new NdError(ERR_ND_INVALID_ARGUMENT, 0, operation, `${operation}: options must be an object`);
  const timeoutMs = options?.timeoutMs;
  const signal = options?.signal;
  checkWaitOptions(operation, timeoutMs, signal);
  if (timeoutMs === undefined && signal === undefined) return undefined;
  return limitOf(timeoutMs ?? 0x7fffffff, signal);
}

/**
 * A whole number as launchers and the rendezvous write them: decimal digits, no sign, no leading zeros, no
 * spaces, hex or exponent ("0x0", " 1", "1e0" and "01" are refused), at most `max`. Null when it is not one.
 */
export function strictUint(text: unknown, max: number): number | null {
  if (typeof text === 'number') return Number.isSafeInteger(text) && text >= 0 && text <= max ? text : null;
  if (typeof text !== 'string' || !/^(0|[1-9][0-9]{0,15})$/.test(text)) return null;
  const n = Number(text);
  return n <= max ? n : null;
}

/**
 * The error that settles an operation because rank `peer` failed. Keeps the ND status of the cause when there
 * is one (ND_CONNECTION_ABORTED, ND_CANCELED...), so code that switches on `code` still can.
 */
export function peerError(peer: number, operation: string, what: string, cause?: unknown): JobError {
  const nd = cause instanceof NdError ? cause : undefined;
  const code = nd?.isStatus ? nd.code : ERR_ND_JOB_PEER;
  const err: JobError = new NdError(code, nd?.status ?? 0, operation, `${operation}: rank ${peer} ${what}${nd ? ` (${nd.code})` : ''}`, { cause });
  err.peer = peer;
  return err;
}

/** The ranks disagree on a call: `message` names both (lib/job/signature.ts). */
export function mismatchError(operation: string, message: string, peer?: number): JobError {
  const err: JobError = new NdError(ERR_ND_JOB_MISMATCH, 0, operation, message);
  if (peer !== undefined) err.peer = peer;
  return err;
}

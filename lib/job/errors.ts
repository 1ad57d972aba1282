// Errors of the job layer: every one is an NdError. Those caused by a peer carry `peer` (its rank) and name it
// in the message; those of the launcher's protocol carry the launcher's name.

import { ERR_ND_JOB_BOOTSTRAP, ERR_ND_JOB_MISMATCH, ERR_ND_JOB_PEER, NdError } from '../errors.js';

export { ERR_ND_JOB_BOOTSTRAP, ERR_ND_JOB_MISMATCH, ERR_ND_JOB_PEER };

/** An NdError that may name the rank it is about. */
export type JobError = NdError & { peer?: number };


export function bootstrapError(launcher: string, operation: string, message: string, cause?: unknown): JobError {
  return new NdError(ERR_ND_JOB_BOOTSTRAP, 0, operation, `${operation} (${launcher}): ${message}`, { cause });
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

// What join() needs from a launcher: rank, size, a job id, and a key-value space with a fence (put, then fence,
// then every rank's puts are visible to get). The PMI-1 and PMI-2 clients, the explicit rendezvous and the
// singleton implement it.

import { bootstrapError, type Limit } from './errors.js';

/**
 * The most ranks a job may have. Every rank keeps a channel to every other (lib/job/channel.ts: about 1 MiB
 * registered each), so a job of MAX_JOB_SIZE ranks registers about 1 GiB per rank; a size a launcher or the
 * rendezvous claims beyond it is refused before anything is allocated (docs/job.md "Limits").
 */
export const MAX_JOB_SIZE = 1024;

export type LauncherName = 'hydra' | 'pmi2' | 'openmpi' | 'msmpi' | 'rendezvous' | 'singleton';

export interface Bootstrap {
  readonly launcher: LauncherName;
  readonly rank: number;
  readonly size: number;
  /** The launcher's job (kvs) name, or one the rendezvous made up. */
  readonly jobId: string;
  /** The job's secret when the launcher side provided one (the rendezvous launchers); else rank 0 makes one. */
  readonly secret?: string;
  /** Each call's wait ends at `limit` (its deadline or signal) when one is given. */
  put(key: string, value: string, limit?: Limit): Promise<void>;
  /** Every rank's puts before the fence are visible to get() after it; also a barrier. */
  fence(limit?: Limit): Promise<void>;
  get(key: string, fromRank: number, limit?: Limit): Promise<string>;
  /** Tells the launcher this rank is done (PMI finalize) and closes the channel. */
  finalize(limit?: Limit): Promise<void>;
  /** Closes the channel without the protocol's goodbye (after a failure). */
  destroy(): void;
}

/** A job of one rank: nothing to exchange. */
export class Singleton implements Bootstrap {
  readonly launcher = 'singleton' as const;
  readonly rank = 0;
  readonly size = 1;
  readonly jobId = `singleton-${process.pid}`;
  private readonly kvs = new Map<string, string>();
  async put(key: string, value: string): Promise<void> {
    this.kvs.set(key, value);
  }
  async fence(): Promise<void> {}
  async get(key: string): Promise<string> {
    const v = this.kvs.get(key);
    if (v === undefined) throw bootstrapError('singleton', 'get', `no key ${key}`);
    return v;
  }
  async finalize(): Promise<void> {}
  destroy(): void {}
}

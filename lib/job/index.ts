// netdirect/job: jobs of N ranks (docs/job.md). join() learns rank and size from the launcher that started the
// process (MPICH/Intel MPI Hydra over PMI-1, Slurm over PMI-2, Open MPI and MS-MPI through a rendezvous, or an
// explicit rendezvous), connects every pair of ranks, and offers windows and collectives.

export { join, Job, defaultAddress, type JoinOptions, type CollectiveOptions, type RecvOptions, type SendrecvOptions } from './job.js';
export { Window, type WindowOptions, type PutOptions } from './window.js';
export { detectLauncher, LAUNCHERS, type Detection } from './detect.js';
export { startRendezvous, type RendezvousServer } from './rendezvous.js';
export type { LauncherName } from './bootstrap.js';
export type { ReduceOp, NumericArray } from './collectives.js';
export { ERR_ND_JOB_ABANDONED, ERR_ND_JOB_AUTH, ERR_ND_JOB_BOOTSTRAP, ERR_ND_JOB_MISMATCH, ERR_ND_JOB_PEER, ERR_ND_JOB_TIMEOUT, type JobError, type WaitOptions } from './errors.js';
export { encodePmi2, framePmi2, parsePmi2 } from './pmi2.js';
export { parsePmi1 } from './pmi1.js';

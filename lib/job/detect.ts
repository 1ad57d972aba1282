// Which launcher started this process, from its environment alone (nothing is contacted here). The order
// matters: Slurm's PMI-2 and Hydra both hand over PMI_FD, MS-MPI and Hydra both set PMI_RANK.
//   pmi2        PMI_FD with Slurm's marks (SLURM_STEP_ID / SLURM_JOB_ID, or PMI_JOBID)
//   hydra       PMI_FD (or PMI_PORT) with PMI_RANK and PMI_SIZE, or PMI_PORT with PMI_ID: MPICH's and Intel MPI's mpiexec
//   openmpi     OMPI_COMM_WORLD_RANK / OMPI_COMM_WORLD_SIZE: Open MPI's mpirun (addresses: a rendezvous)
//   msmpi       PMI_RANK / PMI_SIZE with MS-MPI's marks (PMI_SMPD_KEY, PMI_SMPD_ID, MSMPI_*): its mpiexec
//   rendezvous  NETDIRECT_RENDEZVOUS=host:port with NETDIRECT_RANK / NETDIRECT_SIZE
//   singleton   none of these: a job of one rank
// join({ launcher }) overrides it, and NETDIRECT_LAUNCHER does for a whole program.

import type { LauncherName } from './bootstrap.js';

export const LAUNCHERS: readonly LauncherName[] = ['hydra', 'pmi2', 'openmpi', 'msmpi', 'rendezvous', 'singleton'];

export interface Detection {
  launcher: LauncherName;
  /** The environment variables that decided it, for the report. */
  because: string[];
}

const has = (env: NodeJS.ProcessEnv, name: string) => env[name] !== undefined && env[name] !== '';

export function isMsMpi(env: NodeJS.ProcessEnv): boolean {
  return has(env, 'PMI_SMPD_KEY') || has(env, 'PMI_SMPD_ID') || Object.keys(env).some((k) => k.startsWith('MSMPI_'));
}

export function detectLauncher(env: NodeJS.ProcessEnv = process.env): Detection {
  const forced = env.NETDIRECT_LAUNCHER;
  if (forced !== undefined && forced !== '') {
    if (!(LAUNCHERS as readonly string[]).includes(forced)) throw new RangeError(`NETDIRECT_LAUNCHER must be one of ${LAUNCHERS.join('|')}, got ${JSON.stringify(forced)}`);
    return { launcher: forced as LauncherName, because: ['NETDIRECT_LAUNCHER'] };
  }
  const slurm = ['SLURM_STEP_ID', 'SLURM_JOB_ID', 'PMI_JOBID'].filter((n) => has(env, n));
  if (has(env, 'PMI_FD') && slurm.length > 0) return { launcher: 'pmi2', because: ['PMI_FD', ...slurm] };
  if (has(env, 'OMPI_COMM_WORLD_RANK') && has(env, 'OMPI_COMM_WORLD_SIZE')) return { launcher: 'openmpi', because: ['OMPI_COMM_WORLD_RANK', 'OMPI_COMM_WORLD_SIZE'] };
  if (has(env, 'PMI_RANK') && has(env, 'PMI_SIZE') && isMsMpi(env)) return { launcher: 'msmpi', because: ['PMI_RANK', 'PMI_SIZE', 'PMI_SMPD_KEY/MSMPI_*'] };
  if ((has(env, 'PMI_FD') || has(env, 'PMI_PORT')) && has(env, 'PMI_RANK') && has(env, 'PMI_SIZE')) {
    return { launcher: 'hydra', because: [has(env, 'PMI_FD') ? 'PMI_FD' : 'PMI_PORT', 'PMI_RANK', 'PMI_SIZE'] };
  }
  // `mpiexec -pmi-port` sets only these two: rank and size come from the port's initack handshake (lib/job/pmi1.ts).
  if (has(env, 'PMI_PORT') && has(env, 'PMI_ID')) return { launcher: 'hydra', because: ['PMI_PORT', 'PMI_ID'] };
  if (has(env, 'NETDIRECT_RENDEZVOUS')) return { launcher: 'rendezvous', because: ['NETDIRECT_RENDEZVOUS'] };
  return { launcher: 'singleton', because: [] };
}

// The job tier under the real launchers other than Slurm (test/job-slurm.test.ts), and the commands the README and
// docs/ndbench.md show, run as written (issue #29 finding 1):
// - MPICH's mpiexec (Hydra): `npx` and `npm run` do not pass Hydra's PMI_FD on, so `mpiexec -n N npx ndbench`
//   must fail at once naming PMI_FD and the command that works, and `mpiexec -pmi-port -n N npx ndbench` (PMI_PORT,
//   which lives in the environment) must work; the docs show the latter.
// - Open MPI's mpirun (Debian's openmpi-bin 4.1): rank and size from OMPI_COMM_WORLD_*, addresses through the
//   rendezvous at NETDIRECT_RENDEZVOUS.
// Commands are run from a user's project (test/launch-helpers.ts userProject()), where `npx ndbench` and `npm run`
// resolve as they do after `npm install netdirect`. Each launcher's part is skipped, saying why, where it is missing.
import { spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { cleanEnv, docCommands, docInlineCommands, expectRankReports, expectRing, freePort, killAll, run, sh, userProject } from './launch-helpers';

const which = (tool: string) => {
  const r = spawnSync('sh', ['-c', `command -v ${tool}`], { encoding: 'utf8' });
  return r.status === 0 ? r.stdout.trim() : undefined;
};
// MPICH's launcher by its own name (`mpiexec` may be Open MPI's where both are installed), and Open MPI's.
const hydra = ['mpiexec.hydra', 'mpiexec'].find((c) => /HYDRA/.test(spawnSync(c, ['--version'], { encoding: 'utf8' }).stdout ?? ''));
const openmpi = ['mpirun.openmpi', 'mpirun'].find((c) => /Open MPI|OpenRTE/.test(spawnSync(c, ['--version'], { encoding: 'utf8' }).stdout ?? ''));
const onLinux = process.platform === 'linux';

let project = '';
let bin = ''; // a directory put first in PATH: `mpiexec` and `mpirun` there are the launcher a case means
beforeAll(() => {
  if (!onLinux) return; // every case below is Linux only (the Windows tier runs this file too)
  project = userProject();
  bin = mkdtempSync(path.join(os.tmpdir(), 'netdirect-launchers-bin-'));
  // Scripts, not symlinks: Hydra looks for hydra_pmi_proxy beside the path it was started by.
  if (hydra) writeFileSync(path.join(bin, 'mpiexec'), `#!/bin/sh\nexec ${which(hydra)} "$@"\n`, { mode: 0o755 });
  if (openmpi) writeFileSync(path.join(bin, 'mpirun'), `#!/bin/sh\nexec ${which(openmpi)} "$@"\n`, { mode: 0o755 });
});
afterAll(() => {
  killAll();
  if (project) rmSync(project, { recursive: true, force: true });
  if (bin) rmSync(bin, { recursive: true, force: true });
});
const pathEnv = (extra: NodeJS.ProcessEnv = {}) => cleanEnv({ PATH: `${bin}:${process.env.PATH}`, ...extra });

/** The commands docs/job.md's table "Under each launcher, as tested" shows (read on Linux only: docs/ is not staged under Wine). */
const jobTable = () => docInlineCommands('docs/job.md', '### Under each launcher, as tested');

// docs/job.md's launcher table repeats the README's launch lines and adds `npm run ring` under Hydra: each of its
// commands is one that a tier runs as written (README's lines here and in test/job-slurm.test.ts; the npm run line
// below, read from the table).
describe.skipIf(!onLinux)("docs/job.md's launcher table", () => {
  it('shows only commands the tiers run as written', () => {
    const readme = docCommands('README.md', /^(mpiexec|srun|export NETDIRECT_JOB_SECRET=|NETDIRECT_RENDEZVOUS=\S+ mpirun) .*|^export NETDIRECT_JOB_SECRET=.*/);
    const table = jobTable();
    expect(table.length).toBeGreaterThanOrEqual(5);
    for (const line of table) {
      if (/npm run ring$/.test(line)) continue; // run from the table by the Hydra case below
      expect(readme, `docs/job.md's \`${line}\` is not a README line the tiers run`).toContain(line);
    }
    expect(table.filter((l) => /npm run ring$/.test(l))).toEqual(['mpiexec -pmi-port -n 4 npm run ring']);
  });
});

/** Quick forms of a documented osu_* command: the same launch, fewer sizes and iterations (later options win). */
const QUICK = ['-m', '1:64', '-i', '20', '-x', '2'];

// Each launch is killed after at most 120 s (run()), before the case's own limit.
describe.skipIf(!hydra || !onLinux)(`MPICH's mpiexec (Hydra)${hydra ? '' : ': skipped, MPICH is not installed (apt-get install mpich)'}`, { timeout: 150_000 }, () => {
  it("the README's mpiexec line runs as written: a ring of 4 ranks", async () => {
    const lines = docCommands('README.md', /^mpiexec .*examples\/ring-job\.mjs$/);
    expect(lines).toEqual(['mpiexec -n 4 node examples/ring-job.mjs']);
    expectRing(await sh(lines[0]!, { env: pathEnv(), timeoutMs: 90_000 }), 4, 'hydra');
  });

  it('every `mpiexec ... npx ndbench osu_*` command of README.md and docs/ndbench.md runs from a user\'s project (quick sizes)', async () => {
    const lines = [...docCommands('README.md', /^mpiexec .*npx ndbench osu_/), ...docCommands('docs/ndbench.md', /^mpiexec .*npx ndbench osu_/)];
    expect(lines.length).toBeGreaterThanOrEqual(6);
    for (const line of lines) {
      expect(line, 'npx loses PMI_FD: the docs show -pmi-port').toMatch(/^mpiexec -pmi-port -n \d /);
      const quick = `${line} ${QUICK.join(' ')}${/--compare mpi/.test(line) ? ' --reps 1' : ''}`;
      const ran = await sh(quick, { cwd: project, env: pathEnv(), timeoutMs: 120_000 });
      expect(ran.code, `${quick}\n${ran.stdout}\n${ran.stderr}`).toBe(0);
      if (/--format json/.test(line)) expect(() => JSON.parse(ran.stdout), ran.stdout).not.toThrow();
      else expect(ran.stdout, quick).toMatch(/^# (Size|\s+Avg Latency)/m);
    }
  }, 600_000);

  it("the docs' two-rank perftest form `mpiexec -n 2 npx ndbench write_lat` runs (it needs PMI_RANK/PMI_SIZE only, which npx passes on)", async () => {
    const lines = docCommands('docs/ndbench.md', /^mpiexec -n 2 npx ndbench write_lat$/);
    expect(lines).toHaveLength(1);
    const ran = await sh(`${lines[0]} -n 200`, { cwd: project, env: pathEnv(), timeoutMs: 90_000 });
    expect(ran.code, `${ran.stdout}\n${ran.stderr}`).toBe(0);
    expect(ran.stdout).toMatch(/#bytes\s+#iterations\s+t_min/);
  });

  it('mpiexec -n 2 npx ndbench osu_latency (no -pmi-port) fails at once with a sentence naming PMI_FD and the commands that work', async () => {
    const ran = await sh('mpiexec -n 2 npx ndbench osu_latency', { cwd: project, env: pathEnv(), timeoutMs: 90_000 });
    expect(ran.code).not.toBe(0);
    expect(ran.stderr).toMatch(/ndbench: join \(hydra\): PMI_FD="\d+" (is not open|is a pipe|is an eventfd|is a socket this process already uses)[^\n]*mpiexec -n N node app\.mjs[^\n]*mpiexec -pmi-port -n N npx ndbench/);
    expect(ran.stderr).not.toMatch(/Aborted|core dumped|Unsupported fd type|EEXIST|EPIPE|ENOTCONN/);
    expect(ran.ms).toBeLessThan(30_000); // at once: not after a join timeout
  });

  it('mpiexec -n 4 npm run ring fails at once naming PMI_FD (it was a raw "open EEXIST"); with -pmi-port the ring runs', async () => {
    const documented = jobTable().find((l) => /npm run ring$/.test(l))!; // docs/job.md's table, as written
    const bad = await sh(documented.replace(' -pmi-port', ''), { cwd: project, env: pathEnv(), timeoutMs: 90_000 });
    expect(bad.code).not.toBe(0);
    expect(bad.stderr).toMatch(/NdError: join \(hydra\): PMI_FD="\d+" [^\n]*npm run[^\n]*mpiexec -pmi-port/);
    expect(bad.stderr).not.toMatch(/EEXIST|Aborted|Unsupported fd type/);
    expectRing(await sh(documented, { cwd: project, env: pathEnv(), timeoutMs: 90_000 }), 4, 'hydra');
  });

  it('mpiexec -n 2 ./node_modules/.bin/ndbench osu_latency (the descriptor reaches node directly) runs', async () => {
    const ran = await sh(`mpiexec -n 2 ./node_modules/.bin/ndbench osu_latency ${QUICK.join(' ')}`, { cwd: project, env: pathEnv(), timeoutMs: 90_000 });
    expect(ran.code, `${ran.stdout}\n${ran.stderr}`).toBe(0);
    expect(ran.stdout).toMatch(/# Size\s+Latency \(us\)/);
  });

  it('mpiexec -pmi-port -n 4 of job-rank.mjs: rank and size from the initack handshake, the collectives and windows', async () => {
    const ran = await sh('mpiexec -pmi-port -n 4 node test/fixtures/job-rank.mjs', { env: pathEnv(), timeoutMs: 90_000 });
    expect(ran.code, ran.stderr).toBe(0);
    expectRankReports(ran, 4, 'hydra');
  });

  it('a second join() in one process is refused with an NdError (PMI_FD and PMI_PORT alike): the launcher serves one job per process', async () => {
    for (const flags of ['', '-pmi-port ']) {
      const ran = await sh(`mpiexec ${flags}-n 2 node test/fixtures/pmi-fd.mjs`, { env: pathEnv({ PMI_FD_SCENARIO: 'twice' }), timeoutMs: 90_000 });
      const outs = ran.stdout.split('\n').filter((l) => l.startsWith('{')).map((l) => JSON.parse(l));
      expect(outs.map((o) => o.rank).sort(), `${ran.stdout}\n${ran.stderr}`).toEqual([0, 1]);
      for (const o of outs) {
        expect(o.second.code).toBe('ERR_ND_JOB_BOOTSTRAP');
        expect(o.second.message).toMatch(flags ? /PMI_PORT with PMI_ID=\d was already used by an earlier join\(\)/ : /PMI_FD="\d+" was already used by an earlier join\(\)/);
      }
    }
  });
});

describe.skipIf(!onLinux)('PMI_FD that is not the launcher\'s socket', () => {
  it('PMI_FD set to each descriptor 0..31 of a process: an NdError saying what the descriptor is, never a crash or a hang', async () => {
    const ran = await run(process.execPath, ['test/fixtures/pmi-fd.mjs'], { env: cleanEnv({ PMI_FD_SCENARIO: 'probe' }), timeoutMs: 60_000 });
    expect(ran.signal, ran.stderr).toBeNull();
    expect(ran.code, ran.stderr).toBe(0);
    const lines = ran.stdout.split('\n').filter((l) => l.startsWith('{')).map((l) => JSON.parse(l));
    expect(lines.at(-1)).toEqual({ alive: true });
    const tries = lines.slice(0, -1);
    expect(tries.map((t) => t.fd)).toEqual(Array.from({ length: 32 }, (_, i) => i));
    for (const t of tries) {
      expect(t.code, JSON.stringify(t)).toBe('ERR_ND_JOB_BOOTSTRAP');
      expect(t.message).toMatch(new RegExp(`^join \\(hydra\\): PMI_FD="${t.fd}" (is standard (input|output|error)|is not open|is a pipe|is an eventfd|is a terminal|is a file|is a directory|is a socket this process already uses)`));
      expect(t.ms).toBeLessThan(1000);
    }
    // stdio, libuv's pipes and eventfds, and closed numbers each appear among 0..31 in a Node process.
    expect(tries.some((t) => /is a pipe/.test(t.message))).toBe(true);
    expect(tries.some((t) => /is not open/.test(t.message))).toBe(true);
  });

  it('PMI_FD that is not a number is refused as such', async () => {
    const { join } = await import('../lib/job/index');
    for (const bad of ['x', '-1', '3.5', ' 7']) {
      const err = await join({ env: { PMI_FD: bad, PMI_RANK: '0', PMI_SIZE: '2' }, timeoutMs: 1000 }).catch((e) => e);
      expect(err.code).toBe('ERR_ND_JOB_BOOTSTRAP');
      expect(err.message).toMatch(/PMI_FD=.* is not a descriptor number/);
    }
  });
});

describe.skipIf(!openmpi || !onLinux)(`Open MPI's mpirun${openmpi ? '' : ': skipped, Open MPI is not installed (apt-get install openmpi-bin)'}`, { timeout: 120_000 }, () => {
  // As root Open MPI refuses to start without --allow-run-as-root, and more ranks than cores need --oversubscribe;
  // these variables are the same switches (Open MPI 4.1's mpirun(1)), so the README's line runs unchanged.
  const ompiEnv = (extra: NodeJS.ProcessEnv = {}) =>
    pathEnv({ OMPI_ALLOW_RUN_AS_ROOT: '1', OMPI_ALLOW_RUN_AS_ROOT_CONFIRM: '1', OMPI_MCA_rmaps_base_oversubscribe: '1', ...extra });

  it("the README's mpirun lines run as written (node0 = this machine): a ring of 4 ranks through the rendezvous", async () => {
    const lines = [...docCommands('README.md', /^export NETDIRECT_JOB_SECRET=/), ...docCommands('README.md', /^NETDIRECT_RENDEZVOUS=\S+ mpirun .*examples\/ring-job\.mjs$/)];
    expect(lines).toEqual([
      'export NETDIRECT_JOB_SECRET=$(npx netdirect job-secret)',
      'NETDIRECT_RENDEZVOUS=node0:29500 mpirun -x NETDIRECT_RENDEZVOUS -x NETDIRECT_JOB_SECRET -n 4 node examples/ring-job.mjs',
    ]);
    const script = lines.join('\n').replace('node0:29500', `127.0.0.1:${await freePort()}`);
    expectRing(await sh(script, { env: ompiEnv(), timeoutMs: 90_000 }), 4, 'openmpi');
  });

  it.each([2, 4])('mpirun --allow-run-as-root --oversubscribe -n %i of job-rank.mjs: the collectives and windows', async (n) => {
    const ran = await run(openmpi!, ['--allow-run-as-root', '--oversubscribe', '-n', String(n), 'node', 'test/fixtures/job-rank.mjs'], {
      env: cleanEnv({ NETDIRECT_RENDEZVOUS: `127.0.0.1:${await freePort()}`, NETDIRECT_JOB_SECRET: randomBytes(32).toString('hex') }),
      timeoutMs: 90_000,
    });
    expect(ran.code, ran.stderr).toBe(0);
    expectRankReports(ran, n, 'openmpi');
  });

  it("docs/ndbench.md's mpirun line (npx ndbench osu_barrier) runs as it is: rank, size and the rendezvous are environment variables, which npx passes on", async () => {
    const lines = docCommands('docs/ndbench.md', /^NETDIRECT_RENDEZVOUS=\S+ mpirun .*npx ndbench osu_/);
    expect(lines).toEqual(['NETDIRECT_RENDEZVOUS=node0:29500 mpirun -x NETDIRECT_RENDEZVOUS -x NETDIRECT_JOB_SECRET -n 4 npx ndbench osu_barrier']);
    const line = `${lines[0]!.replace('node0:29500', `127.0.0.1:${await freePort()}`)} -i 20 -x 2`;
    const ran = await sh(line, { cwd: project, env: ompiEnv({ NETDIRECT_JOB_SECRET: randomBytes(32).toString('hex') }), timeoutMs: 90_000 });
    expect(ran.code, `${ran.stdout}\n${ran.stderr}`).toBe(0);
    expect(ran.stdout).toMatch(/4 ranks \(launcher openmpi\)/);
    expect(ran.stdout).toMatch(/Avg Latency\(us\)/);
  });

  it('without NETDIRECT_RENDEZVOUS every rank fails at once with an NdError saying to set it', async () => {
    const ran = await run(openmpi!, ['--allow-run-as-root', '--oversubscribe', '-n', '2', 'node', 'test/fixtures/job-rank.mjs'], { env: cleanEnv(), timeoutMs: 60_000 });
    expect(ran.code).not.toBe(0);
    expect(ran.stderr).toMatch(/join \(openmpi\): openmpi gives rank and size but no way to reach the others: set NETDIRECT_RENDEZVOUS=host:port/);
  });
});

// ndbench's OSU-named tests for jobs (lib/bench/osu.ts) end to end under MPICH's real mpiexec (Hydra): the table's
// shape (OSU's columns, one row per size, positive figures; min <= avg <= max over the ranks for collectives),
// JSON, and --compare mpi (scripts/osu-mpi.c built with mpicc at run time) with MPI's figure and the ratio beside
// netdirect's. Short iteration counts: these check what is printed, never how fast (figures go to docs/ndbench.md).
import { spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { parseOsuArgs, rowsOf, targetLines, type OsuOptions } from '../../lib/bench/osu';
import { UsageError } from '../../lib/bench/options';
import { cli, expectPrintedRatio, runNdbench } from './ndbench';

const mpiexec = ['mpiexec.hydra', 'mpiexec'].find((c) => /HYDRA/.test(spawnSync(c, ['--version'], { encoding: 'utf8' }).stdout ?? ''));
const hasMpicc = spawnSync('mpicc', ['-show'], { encoding: 'utf8' }).status === 0;
const quick = ['-i', '5', '-x', '1'];

/** `mpiexec -n <ranks> ndbench args...`, with the environment of a plain shell (no launcher variables). */
function underMpiexec(ranks: number, args: string[], timeoutMs = 120_000, env: NodeJS.ProcessEnv = process.env): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const child = spawn(mpiexec!, ['-n', String(ranks), process.execPath, cli, ...args], { stdio: ['ignore', 'pipe', 'pipe'], env });
  let stdout = '';
  let stderr = '';
  child.stdout.setEncoding('utf8').on('data', (d: string) => (stdout += d));
  child.stderr.setEncoding('utf8').on('data', (d: string) => (stderr += d));
  const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
  return new Promise((resolve) =>
    child.on('close', (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    }),
  );
}

/** The table: '#' lines (title, notes, then the column header), rows of numbers, then '#' lines of targets. */
function table(stdout: string): { header: string; notes: string[]; rows: number[][]; footer: string[] } {
  const lines = stdout.trimEnd().split('\n');
  const first = lines.findIndex((l) => !l.startsWith('#'));
  expect(first, stdout).toBeGreaterThan(0);
  const end = lines.findIndex((l, i) => i > first && l.startsWith('#'));
  const body = lines.slice(first, end < 0 ? undefined : end);
  return {
    header: lines[first - 1],
    notes: lines.slice(0, first - 1),
    rows: body.map((l) => l.trim().split(/\s+/).map(Number)),
    footer: end < 0 ? [] : lines.slice(end),
  };
}

function expectPositive(rows: number[][]): void {
  for (const r of rows) for (const v of r) expect(Number.isFinite(v) && v >= 0, `row ${r.join(' ')}`).toBe(true);
  for (const r of rows) expect(r[1], `row ${r.join(' ')}`).toBeGreaterThan(0);
}

describe('ndbench osu_* options', () => {
  const parse = (...argv: string[]) => parseOsuArgs(argv, {}) as OsuOptions;
  it("OSU defaults: sizes per kind of test, OSU's iterations and warm-ups per kind around 8 KiB, window 64", () => {
    const lat = parse('osu_latency');
    expect(lat.sizes[0]).toBe(1);
    expect(lat.sizes.at(-1)).toBe(4 * 1024 * 1024);
    expect([lat.iters, lat.itersLarge, lat.warmup, lat.warmupLarge, lat.window, lat.reps]).toEqual([10000, 1000, 100, 10, 64, 1]);
    const counts = (t: string) => { const o = parse(t); return [o.iters, o.itersLarge, o.warmup, o.warmupLarge]; };
    expect(counts('osu_put_latency')).toEqual([10000, 1000, 100, 10]);
    expect(counts('osu_bw')).toEqual([100, 20, 10, 2]);
    expect(counts('osu_get_bw')).toEqual([100, 20, 10, 2]);
    expect(counts('osu_allreduce')).toEqual([1000, 100, 100, 10]);
    expect(parse('osu_bcast').sizes.at(-1)).toBe(1024 * 1024);
    expect(parse('osu_allreduce', '-m', '1:16').sizes).toEqual([4, 8, 16]); // a float at least
    expect(parse('osu_barrier').sizes).toEqual([0]);
  });
  it('-m [min:]max, -i and -x set both small and large counts, glued values, --compare mpi repeats 3 times', () => {
    const o = parse('osu_bw', '-m', '8:64', '-i20', '--warmup=3', '-W', '16', '--compare', 'mpi');
    expect(o.sizes).toEqual([8, 16, 32, 64]);
    expect([o.iters, o.itersLarge, o.warmup, o.warmupLarge, o.window, o.reps, o.compareMpi]).toEqual([20, 20, 3, 3, 16, 3, true]);
    expect(parse('osu_latency', '-m', '256').sizes).toEqual([1, 2, 4, 8, 16, 32, 64, 128, 256]);
    expect(parse('osu_latency', '--compare', 'mpi', '--reps', '5').reps).toBe(5);
  });
  it('refuses what it cannot do, with the reason', () => {
    expect(() => parse('osu_latency', '--compare', 'tcp')).toThrow(/--compare for the osu_\* tests takes mpi/);
    expect(() => parse('osu_latency', 'somehost')).toThrow(/one test and no host/);
    expect(() => parse('osu_latency', '-m', '64:8')).toThrow(UsageError);
    expect(() => parse('osu_latency', '-q', '2')).toThrow(/unknown option -q/);
    expect(() => parse('osu_bw', '-W', '1000')).toThrow(/at most 256/);
    expect(parseOsuArgs(['osu_bw', '--help'], {})).toBeNull();
  });
  it('targets: a line for each target the table has a ratio for, met or not', () => {
    const f = (v: number) => ({ avg: v, min: v, max: v });
    const lat = parse('osu_latency', '-m', '4:16', '--compare', 'mpi');
    const lines = targetLines(lat, rowsOf(lat, [[f(10), f(13), f(50)]], [[f(1), f(10), f(1)]]));
    expect(lines.map((t) => t.line)).toEqual(['# target at 8 B: nd/MPI <= 1.30; measured 1.30: met']);
    const mr = parse('osu_mbw_mr', '-m', '4096:4096', '--compare', 'mpi');
    expect(targetLines(mr, rowsOf(mr, [[f(90)]], [[f(100)]])).map((t) => [t.line, t.met])).toEqual([['# target at 4096 B: nd/MPI >= 1.00; measured 0.90: not met', false]]);
    const bar = parse('osu_barrier', '--compare', 'mpi');
    expect(targetLines(bar, rowsOf(bar, [[f(3)]], [[f(2)]]))[0].line).toBe('# target: nd/MPI <= 1.50; measured 1.50: met');
    expect(targetLines(lat, rowsOf(lat, [[f(10), f(13), f(50)]], []))).toEqual([]); // no MPI figures, no target lines
  });

  it('rows: medians over the repetitions, the ratio netdirect over MPI', () => {
    const o = parse('osu_allreduce', '-m', '4:8', '--compare', 'mpi');
    const f = (v: number) => ({ avg: v, min: v / 2, max: v * 2 });
    const rows = rowsOf(o, [[f(10), f(20)], [f(30), f(10)], [f(20), f(90)]], [[f(5), f(10)], [f(10), f(10)], [f(40), f(10)]]);
    expect(rows.map((r) => [r.size, r.netdirect.avg, r.mpi!.avg, r.ratio])).toEqual([[4, 20, 10, 2], [8, 20, 10, 2]]);
    expect(rows[0].reps.netdirect).toHaveLength(3);
  });
});

describe('ndbench osu_* without a launcher', () => {
  it('a plain command is a job of one rank: it says which launch the test needs', () => {
    const r = runNdbench(process.cwd(), ['osu_latency', ...quick]);
    expect(r.status, r.out).toBe(1);
    expect(r.stderr).toMatch(/osu_latency needs exactly 2 ranks, this job has 1 \(no launcher started this process\): run it as `mpiexec -n 2 ndbench osu_latency`/);
  });
});

describe.skipIf(!mpiexec)('ndbench osu_* under mpiexec (Hydra)', () => {
  // Bandwidth from 256 bytes: a few bytes at a time move well under 0.005 MB/s here, which OSU's two decimals print as 0.00.
  it.each([
    ['osu_latency', 'Latency (us)', 1],
    ['osu_bw', 'Bandwidth (MB/s)', 256],
    ['osu_bibw', 'Bandwidth (MB/s)', 256],
    ['osu_put_latency', 'Latency (us)', 1],
    ['osu_put_bw', 'Bandwidth (MB/s)', 256],
    ['osu_get_bw', 'Bandwidth (MB/s)', 256],
  ])('mpiexec -n 2 ndbench %s: OSU\'s two columns, a row per size', async (test, column, min) => {
    const r = await underMpiexec(2, [test, '-m', `${min}:${min * 64}`, ...quick, '-W', '8']);
    expect(r.code, r.stderr).toBe(0);
    const t = table(r.stdout);
    expect(t.notes[0]).toMatch(new RegExp(`^# ndbench ${test}: OSU .* over netdirect/job`));
    expect(t.notes[1]).toMatch(/^# 2 ranks \(launcher hydra\)/);
    expect(t.header).toMatch(new RegExp(`^# Size\\s+${column.replace(/[()/]/g, '\\$&')}$`));
    expect(t.rows.map((row) => row[0])).toEqual([1, 2, 4, 8, 16, 32, 64].map((k) => k * min));
    for (const row of t.rows) expect(row).toHaveLength(2);
    expectPositive(t.rows);
  });

  it.each(['osu_bcast', 'osu_allreduce', 'osu_alltoall'])('mpiexec -n 4 ndbench %s: avg, min, max over the ranks and the iterations', async (test) => {
    const r = await underMpiexec(4, [test, '-m', '4:1024', ...quick]);
    expect(r.code, r.stderr).toBe(0);
    const t = table(r.stdout);
    expect(t.notes[1]).toMatch(/^# 4 ranks \(launcher hydra\)/);
    expect(t.header).toMatch(/^# Size\s+Avg Latency\(us\)\s+Min Latency\(us\)\s+Max Latency\(us\)\s+Iterations$/);
    expect(t.rows.map((row) => row[0])).toEqual([4, 8, 16, 32, 64, 128, 256, 512, 1024]);
    for (const [, avg, min, max, iterations] of t.rows) {
      expect(min).toBeLessThanOrEqual(avg + 0.01);
      expect(avg).toBeLessThanOrEqual(max + 0.01);
      expect(iterations).toBe(5);
    }
    expectPositive(t.rows);
  });

  it.each([
    ['osu_multi_lat', /^# Size\s+Latency \(us\)$/, 2, 1],
    ['osu_mbw_mr', /^# Size\s+MB\/s\s+Messages\/s$/, 3, 256],
  ])('mpiexec -n 4 ndbench %s: two pairs (rank r with r + 2)', async (test, header, columns, min) => {
    const r = await underMpiexec(4, [test, '-m', `${min}:${min * 8}`, ...quick, '-W', '8']);
    expect(r.code, r.stderr).toBe(0);
    const t = table(r.stdout);
    expect(t.notes[1]).toMatch(/^# 4 ranks \(launcher hydra\).*rank r (with|sends to) r \+ n\/2/);
    expect(t.header).toMatch(header);
    expect(t.rows.map((row) => row[0])).toEqual([1, 2, 4, 8].map((k) => k * min));
    for (const row of t.rows) expect(row).toHaveLength(columns);
    expectPositive(t.rows);
  });

  it('mpiexec -n 3 ndbench osu_mbw_mr is refused: pairs need an even number of ranks', async () => {
    const r = await underMpiexec(3, ['osu_mbw_mr', ...quick]);
    expect(r.code).not.toBe(0);
    expect(r.stderr).toMatch(/osu_mbw_mr needs an even number of ranks \(pairs: rank r with r \+ n\/2\), this job has 3/);
  });

  // --completion manual: the job polls its own CQs while a call waits (lib/job/job.ts Job._drive). Before, nothing
  // polled them: the first barrier never finished and close() gave up after 60 s ("did not reach close()").
  it.each([['osu_latency', '8:8'], ['osu_bw', '256:512'], ['osu_put_latency', '8:8'], ['osu_get_bw', '256:512']])(
    'mpiexec -n 2 ndbench %s --completion manual: a polled loop, a figure, exit 0',
    async (test, sizes) => {
      const r = await underMpiexec(2, [test, '-m', sizes, ...quick, '-W', '8', '--completion', 'manual'], 25_000);
      expect(r.code, r.stderr).toBe(0);
      const t = table(r.stdout);
      expect(t.notes[1]).toMatch(/completion manual;/);
      expect(t.rows.length).toBeGreaterThan(0);
      expectPositive(t.rows);
    },
    40_000,
  );

  it('the busy-poll window: NETDIRECT_SPIN_MICROS when no --spin-micros is given, the option over it; the header says which', async () => {
    const env = { ...process.env, NETDIRECT_SPIN_MICROS: '50' };
    const fromEnv = await underMpiexec(2, ['osu_latency', '-m', '8:8', ...quick], 120_000, env);
    expect(fromEnv.code, fromEnv.stderr).toBe(0);
    expect(table(fromEnv.stdout).notes.join('\n')).toMatch(/completion \w+, spin 50 us;/);
    const fromOption = await underMpiexec(2, ['osu_latency', '-m', '8:8', '--spin-micros', '0', ...quick], 120_000, env);
    expect(fromOption.code, fromOption.stderr).toBe(0);
    expect(fromOption.stdout).not.toMatch(/spin \d+ us/);
  });

  it('mpiexec -n 4 ndbench osu_barrier: one row without a size', async () => {
    const r = await underMpiexec(4, ['osu_barrier', ...quick]);
    expect(r.code, r.stderr).toBe(0);
    const t = table(r.stdout);
    expect(t.header).toMatch(/^#\s+Avg Latency\(us\)\s+Min Latency\(us\)\s+Max Latency\(us\)\s+Iterations$/);
    expect(t.rows).toHaveLength(1);
    expect(t.rows[0]).toHaveLength(4);
    expectPositive(t.rows);
  });

  it('--format json: every size with its repetitions', async () => {
    const r = await underMpiexec(2, ['osu_latency', '-m', '1:4', ...quick, '--reps', '2', '--format', 'json']);
    expect(r.code, r.stderr).toBe(0);
    const report = JSON.parse(r.stdout);
    expect(report).toMatchObject({ schema: 'ndbench-osu/1', tool: 'ndbench', test: 'osu_latency', ranks: 2, launcher: 'hydra', units: 'us' });
    expect(report.results.map((x: { size: number }) => x.size)).toEqual([1, 2, 4]);
    for (const x of report.results) {
      expect(x.reps.netdirect).toHaveLength(2);
      expect(x.netdirect.avg).toBeGreaterThan(0);
    }
  });

  it('-n 3 for a two-rank test is refused with the launch to use', async () => {
    const r = await underMpiexec(3, ['osu_latency', ...quick]);
    expect(r.code).not.toBe(0);
    expect(r.stderr).toMatch(/osu_latency needs exactly 2 ranks, this job has 3: run it as `mpiexec -n 2 ndbench osu_latency`/);
  });

  it('--compare mpi with an MPI launcher that fails: started once more, then netdirect alone, each said', async () => {
    const r = await underMpiexec(2, ['osu_latency', '-m', '1:2', ...quick, '--compare', 'mpi', '--reps', '1', '--mpiexec', '/bin/false']);
    expect(r.code, r.stderr).toBe(0);
    if (/mpicc not found/.test(r.stderr)) return; // no MPI compiler: the case below
    expect(r.stderr).toMatch(/--compare mpi: the MPI run failed at start-up, starting it once more \(\/bin\/false -n 2 osu-mpi osu_latency: exit 1\)/);
    expect(r.stderr).toMatch(/--compare mpi: the MPI run failed \(\/bin\/false .*\); the run goes on without the MPI comparison/);
    expect(table(r.stdout).header).not.toMatch(/MPI/);
  });

  it('--compare mpi with mpicc but no MPI headers names the package that has them', async () => {
    const dir = mkdtempSync(path.join(os.tmpdir(), 'nd-osu-cc-'));
    const mpicc = path.join(dir, 'mpicc');
    // What Debian's mpicc says when mpich was installed without libmpich-dev.
    writeFileSync(mpicc, '#!/bin/sh\necho "osu-mpi.c:25:10: fatal error: mpi.h: No such file or directory" >&2\nexit 1\n', { mode: 0o755 });
    try {
      const r = await underMpiexec(2, ['osu_latency', '-m', '1:2', ...quick, '--compare', 'mpi', '--reps', '1', '--mpicc', mpicc]);
      expect(r.code, r.stderr).toBe(0);
      expect(r.stderr).toMatch(/--compare mpi: \S+mpicc could not compile \S+osu-mpi\.c \(MPI's headers are missing: Debian\/Ubuntu: apt-get install libmpich-dev\): .*mpi\.h: No such file.*; the run goes on without the MPI comparison/);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('--compare mpi without an MPI compiler says so and runs netdirect alone', async () => {
    const r = await underMpiexec(2, ['osu_latency', '-m', '1:2', ...quick, '--compare', 'mpi', '--reps', '1', '--mpicc', '/nonexistent/mpicc']);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stderr).toMatch(/--compare mpi: \/nonexistent\/mpicc not found: install an MPI .*; the run goes on without the MPI comparison/);
    const t = table(r.stdout);
    expect(t.notes.join('\n')).toMatch(/# MPI: not run/);
    expect(t.header).not.toMatch(/MPI/);
    expect(t.rows.map((row) => row.length)).toEqual([2, 2]);
  });
});

describe.skipIf(!mpiexec || !hasMpicc)('ndbench osu_* --compare mpi (mpicc at run time)', () => {
  it('mpiexec -n 2 ndbench osu_latency --compare mpi: netdirect, MPI and the ratio per size', async () => {
    const r = await underMpiexec(2, ['osu_latency', '-m', '1:16', ...quick, '--compare', 'mpi', '--reps', '2']);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stderr, 'the MPI side did not run').not.toMatch(/the MPI run failed \(/);
    const t = table(r.stdout);
    expect(t.notes.join('\n')).toMatch(/# MPI: MPICH Version: \S+; nd\/MPI = netdirect's figure over MPI's; median of 2 repetitions/);
    // Both ranks are on this host: the header says what MPI's figure is made of (its shared memory) and what ours is.
    expect(t.notes.join('\n')).toMatch(/# all 2 ranks on one host: MPI moves their messages through shared memory; netdirect's connections here use \w+/);
    expect(t.header).toMatch(/^# Size\s+Latency \(us\)\s+MPI \(us\)\s+nd\/MPI$/);
    expect(t.rows.map((row) => row[0])).toEqual([1, 2, 4, 8, 16]);
    for (const [, nd, mpi, ratio] of t.rows) {
      expect(nd).toBeGreaterThan(0);
      expect(mpi).toBeGreaterThan(0);
      expect(ratio).toBeGreaterThan(0);
      // The ratio is of the unrounded figures: within the rounding of the two printed ones.
      expectPrintedRatio(ratio, nd, mpi);
    }
    // 8 B has a target: the footer says what it is and whether this run met it.
    expect(t.footer).toEqual([expect.stringMatching(/^# target at 8 B: nd\/MPI <= 1\.30; measured \d+\.\d\d: (met|not met)$/)]);
  });

  // The ranks other than 0 wait in a barrier while rank 0 runs MPI, without busy-polling (Job._quietly). In manual
  // mode nothing else held their event loop then: rank 1 reached 'beforeExit' mid-wait and closed the job, rank 0
  // waited 60 s for it in close(), and Hydra killed both (exit code 9, no figure). Two repetitions: the wait
  // happens between them and after the last.
  it.each([
    ['--completion', 'manual'],
    ['--spin-micros', '100000'],
  ])('mpiexec -n 2 ndbench osu_latency --compare mpi %s %s: both sides figured, every rank exits 0', async (flag, value) => {
    const r = await underMpiexec(2, ['osu_latency', '-m', '8:8', ...quick, '--compare', 'mpi', '--reps', '2', flag, value]);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stderr, 'the MPI side did not run').not.toMatch(/the MPI run failed \(/);
    const t = table(r.stdout);
    expect(t.notes.join('\n')).toMatch(flag === '--completion' ? /completion manual;/ : /spin 100000 us;/);
    expect(t.rows).toHaveLength(1);
    const [size, nd, mpi] = t.rows[0];
    expect([size, nd > 0, mpi > 0]).toEqual([8, true, true]);
  });

  it('mpiexec -n 2 ndbench osu_put_bw --compare mpi: MPI_Put + MPI_Win_flush beside puts + a 1-byte get', async () => {
    const r = await underMpiexec(2, ['osu_put_bw', '-m', '1024:2048', ...quick, '-W', '8', '--compare', 'mpi', '--reps', '1']);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stderr, 'the MPI side did not run').not.toMatch(/the MPI run failed \(/);
    const t = table(r.stdout);
    expect(t.header).toMatch(/^# Size\s+Bandwidth \(MB\/s\)\s+MPI \(MB\/s\)\s+nd\/MPI$/);
    expect(t.rows.map((row) => row[0])).toEqual([1024, 2048]);
    for (const row of t.rows) for (const v of row) expect(v).toBeGreaterThan(0);
  });

  it('--compare mpi whose job prints every figure and then never ends (MPI_Finalize hung): ended after the grace, figures kept, said', async () => {
    // A launcher that behaves like MPICH over UCX between namespaces: the figures and '# done', then no exit.
    const dir = mkdtempSync(path.join(os.tmpdir(), 'nd-osu-hang-'));
    const launcher = path.join(dir, 'mpiexec-hangs');
    writeFileSync(launcher, '#!/bin/sh\nprintf "# Fake MPI 1.0\\n1 7.000 7.000 7.000 2\\n2 8.000 8.000 8.000 2\\n# done\\n"\nexec sleep 600\n', { mode: 0o755 });
    try {
      const started = Date.now();
      const r = await underMpiexec(2, ['osu_latency', '-m', '1:2', ...quick, '--compare', 'mpi', '--reps', '1', '--mpiexec', launcher]);
      expect(r.code, r.stderr).toBe(0);
      expect(r.stderr).toMatch(/--compare mpi: the MPI job printed every figure but had not ended 10 s later \(MPI_Finalize did not return\); it was ended and its figures kept/);
      expect(r.stderr).not.toMatch(/the MPI run failed/);
      const t = table(r.stdout);
      expect(t.notes.join('\n')).toMatch(/# MPI: Fake MPI 1\.0;/);
      expect(t.rows.map((row) => row.slice(0, 1).concat(row[2]))).toEqual([[1, 7], [2, 8]]);
      expect(Date.now() - started).toBeLessThan(60_000); // not the 600 s of the hung job, nor --timeout
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('mpiexec -n 4 ndbench osu_allreduce --compare mpi: MPI\'s average beside the ranks\' avg/min/max', async () => {
    const r = await underMpiexec(4, ['osu_allreduce', '-m', '4:64', '-i', '3', '-x', '1', '--compare', 'mpi', '--reps', '1'], 180_000);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stderr, 'the MPI side did not run').not.toMatch(/the MPI run failed \(/);
    const t = table(r.stdout);
    expect(t.header).toMatch(/^# Size\s+Avg Latency\(us\)\s+Min Latency\(us\)\s+Max Latency\(us\)\s+Iterations\s+MPI Avg\(us\)\s+nd\/MPI$/);
    expect(t.rows.map((row) => row[0])).toEqual([4, 8, 16, 32, 64]);
    for (const row of t.rows) {
      expect(row).toHaveLength(7);
      expect(row[5]).toBeGreaterThan(0);
      expect(row[6]).toBeGreaterThan(0);
    }
  });
});

if (!mpiexec) console.warn('test/bench/osu.test.ts: MPICH\'s mpiexec (Hydra) not found (apt-get install mpich): the mpiexec cases are skipped');
else if (!hasMpicc) console.warn('test/bench/osu.test.ts: mpicc not found (apt-get install mpich): the --compare mpi cases are skipped');

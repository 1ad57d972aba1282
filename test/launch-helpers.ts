// Pieces of the launcher tiers (test/job-slurm.test.ts, test/job-launchers.test.ts): running a launcher's command
// line, a user's project that has netdirect installed (so `npx ndbench` and `npm run` resolve as they do for a
// user), and the commands the README and docs/ show, read from their code blocks.
import { chmodSync, mkdirSync, mkdtempSync, readFileSync, symlinkSync, writeFileSync } from 'node:fs';
import { spawn, type SpawnOptions } from 'node:child_process';
import * as os from 'node:os';
import * as path from 'node:path';
import { expect } from 'vitest';
import { root } from './helpers';

export interface Ran {
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
  ms: number;
}

/** The environment without any launcher's variables (so the test's own environment never leaks into a rank). */
export function cleanEnv(extra: NodeJS.ProcessEnv = {}): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [k, v] of Object.entries(process.env)) {
    if (/^(PMI_|PMIX_|OMPI_|SLURM_|NETDIRECT_|MPIR_|HYDRA_|MPI_LOCAL|NDBENCH_)/.test(k)) continue;
    env[k] = v;
  }
  return { ...env, ...extra };
}

/** Runs a command; kills its process group after timeoutMs (the launcher and the ranks under it). */
export function run(command: string, args: string[], options: SpawnOptions & { timeoutMs?: number } = {}): Promise<Ran> {
  const start = Date.now();
  const child = spawn(command, args, { cwd: root, env: cleanEnv(), ...options, stdio: ['ignore', 'pipe', 'pipe'], detached: true });
  let stdout = '';
  let stderr = '';
  child.stdout!.setEncoding('utf8').on('data', (d: string) => (stdout += d));
  child.stderr!.setEncoding('utf8').on('data', (d: string) => (stderr += d));
  const timer = setTimeout(() => {
    stderr += `\n[test] killed after ${options.timeoutMs ?? 120_000} ms\n`;
    try {
      process.kill(-child.pid!, 'SIGKILL');
    } catch {
      child.kill('SIGKILL');
    }
  }, options.timeoutMs ?? 120_000);
  return new Promise((resolve) =>
    child.on('close', (code, signal) => {
      clearTimeout(timer);
      resolve({ code, signal, stdout, stderr, ms: Date.now() - start });
    }),
  );
}

/** A command line as the docs write it, run by sh (variable assignments, quoting) in cwd. */
export function sh(line: string, options: SpawnOptions & { timeoutMs?: number } = {}): Promise<Ran> {
  return run('sh', ['-c', line], options);
}

/** Every line of the file's code blocks that matches, its trailing `# comment` removed. */
export function docCommands(file: string, match: RegExp): string[] {
  const text = readFileSync(path.join(root, file), 'utf8');
  const out: string[] = [];
  for (const block of text.matchAll(/```[a-z]*\n([\s\S]*?)```/g)) {
    for (const raw of block[1]!.split('\n')) {
      const line = raw.replace(/\s+#\s.*$/, '').trim();
      if (match.test(line)) out.push(line);
    }
  }
  return out;
}

/**
 * A user's project with netdirect installed as npm installs a dependency: node_modules/netdirect (here a link to
 * this checkout, built) and node_modules/.bin/ndbench linking to its bin with the execute bit npm sets. A `ring`
 * script runs examples/ring-job.mjs (the issue's `npm run ring`). npx and npm run find both without the registry.
 */
export function userProject(): string {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'netdirect-user-'));
  mkdirSync(path.join(dir, 'node_modules/.bin'), { recursive: true });
  symlinkSync(root, path.join(dir, 'node_modules/netdirect'));
  const cli = path.join(root, 'dist/cjs/bench/cli.js');
  chmodSync(cli, 0o755);
  symlinkSync('../netdirect/dist/cjs/bench/cli.js', path.join(dir, 'node_modules/.bin/ndbench'));
  writeFileSync(path.join(dir, 'ring.mjs'), readFileSync(path.join(root, 'examples/ring-job.mjs')));
  writeFileSync(
    path.join(dir, 'package.json'),
    JSON.stringify({ name: 'user-project', version: '1.0.0', private: true, type: 'module', dependencies: { netdirect: '*' }, scripts: { ring: 'node ring.mjs' } }, null, 2),
  );
  return dir;
}

/** The reports test/fixtures/job-rank.mjs printed (one JSON line per rank), each rank's checks all passed. */
export function expectRankReports(ran: Ran, size: number, launcher: string): void {
  const reports = ran.stdout
    .split('\n')
    .filter((l) => l.startsWith('{'))
    .map((l) => JSON.parse(l));
  expect(reports.map((r) => r.rank).sort((a, b) => a - b), `${ran.stdout}\n${ran.stderr}`).toEqual(Array.from({ length: size }, (_, i) => i));
  for (const r of reports) {
    expect(r.size).toBe(size);
    expect(r.launcher).toBe(launcher);
    expect(Object.entries(r.checks).filter(([, ok]) => ok !== true), `rank ${r.rank}`).toEqual([]);
    expect(Object.keys(r.checks).length).toBeGreaterThan(20);
  }
}

/** examples/ring-job.mjs's output: every rank's line under the launcher, and rank 0's verdict. */
export function expectRing(ran: Ran, size: number, launcher: string): void {
  expect(ran.code, `${ran.stdout}\n${ran.stderr}`).toBe(0);
  expect(ran.stdout).toContain(`ring of ${size} ranks: every block arrived intact`);
  for (let r = 0; r < size; r++) expect(ran.stdout).toContain(`rank ${r}/${size} (${launcher}): block from rank ${(r + size - 1) % size} intact`);
}

// Pieces of the launcher tiers (test/job-slurm.test.ts, test/job-launchers.test.ts): running a launcher's command
// line, a user's project that has netdirect installed (so `npx ndbench` and `npm run` resolve as they do for a
// user), and the commands the README and docs/ show, read from their code blocks.
import { chmodSync, mkdirSync, mkdtempSync, readFileSync, symlinkSync, writeFileSync } from 'node:fs';
import { spawn, type SpawnOptions } from 'node:child_process';
import { createServer } from 'node:net';
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

/**
 * A TCP port on 127.0.0.1 that is free now (and `also` ports after it), below Linux's ephemeral range (32768-60999
 * by default): a port in that range can be taken at any moment by the client end of some connection on the machine,
 * and a rendezvous that rank 0 cannot host there is refused to every rank (seen once with 40296).
 */
export async function freePort(also = 0): Promise<number> {
  const bindable = (port: number) =>
    new Promise<boolean>((resolve) => {
      const server = createServer();
      server.once('error', () => resolve(false));
      server.listen(port, '127.0.0.1', () => server.close(() => resolve(true)));
    });
  for (;;) {
    const port = 10000 + Math.floor(Math.random() * 20000);
    let ok = true;
    for (let i = 0; i <= also && ok; i++) ok = await bindable(port + i);
    if (ok) return port;
  }
}

/** Process groups of the commands still running (killed by killAll()). */
const live = new Set<number>();

/** Kills every command run() started that is still running (for afterAll: a test that timed out leaves its own). */
export function killAll(): void {
  for (const pgid of live) {
    try {
      process.kill(-pgid, 'SIGKILL');
    } catch {
      // gone already
    }
  }
  live.clear();
}

/** Runs a command; kills its process group after timeoutMs (the launcher and the ranks under it). */
export function run(command: string, args: string[], options: SpawnOptions & { timeoutMs?: number } = {}): Promise<Ran> {
  const start = Date.now();
  const child = spawn(command, args, { cwd: root, env: cleanEnv(), ...options, stdio: ['ignore', 'pipe', 'pipe'], detached: true });
  if (child.pid !== undefined) live.add(child.pid);
  let stdout = '';
  let stderr = '';
  child.stdout!.setEncoding('utf8').on('data', (d: string) => (stdout += d));
  child.stderr!.setEncoding('utf8').on('data', (d: string) => (stderr += d));
  const timer = setTimeout(() => {
    stderr += `\n[test] killed after ${options.timeoutMs ?? 60_000} ms\n`;
    try {
      process.kill(-child.pid!, 'SIGKILL');
    } catch {
      child.kill('SIGKILL');
    }
  }, options.timeoutMs ?? 60_000);
  return new Promise((resolve) =>
    child.on('close', (code, signal) => {
      clearTimeout(timer);
      if (child.pid !== undefined) live.delete(child.pid);
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
 * this checkout, built) and node_modules/.bin/ndbench and netdirect linking to its bins with the execute bit npm sets. A `ring`
 * script runs examples/ring-job.mjs (the issue's `npm run ring`). npx and npm run find both without the registry.
 */
export function userProject(): string {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'netdirect-user-'));
  mkdirSync(path.join(dir, 'node_modules/.bin'), { recursive: true });
  symlinkSync(root, path.join(dir, 'node_modules/netdirect'));
  // npm sets the execute bit of a package's bins when it installs it; tsc does not (the README's `npx netdirect ...`
  // run in this checkout resolves to dist/cjs/cli.js itself).
  for (const cli of ['dist/cjs/bench/cli.js', 'dist/cjs/cli.js']) chmodSync(path.join(root, cli), 0o755);
  symlinkSync('../netdirect/dist/cjs/bench/cli.js', path.join(dir, 'node_modules/.bin/ndbench'));
  symlinkSync('../netdirect/dist/cjs/cli.js', path.join(dir, 'node_modules/.bin/netdirect'));
  writeFileSync(path.join(dir, 'ring.mjs'), readFileSync(path.join(root, 'examples/ring-job.mjs')));
  writeFileSync(
    path.join(dir, 'package.json'),
    JSON.stringify({ name: 'user-project', version: '1.0.0', private: true, type: 'module', dependencies: { netdirect: '*' }, scripts: { ring: 'node ring.mjs' } }, null, 2),
  );
  return dir;
}

/** The reports test/fixtures/job-rank.mjs printed (one JSON line per rank), each rank's checks all passed. */
export function expectRankReports(ran: Ran, size: number, launcher: string, why = `${ran.stdout}\n${ran.stderr}`): void {
  expect(ran.code, why).toBe(0);
  const reports = ran.stdout
    .split('\n')
    .filter((l) => l.startsWith('{'))
    .map((l) => JSON.parse(l));
  expect(reports.map((r) => r.rank).sort((a, b) => a - b), why).toEqual(Array.from({ length: size }, (_, i) => i));
  for (const r of reports) {
    expect(r.size).toBe(size);
    expect(r.launcher).toBe(launcher);
    expect(Object.entries(r.checks).filter(([, ok]) => ok !== true), `rank ${r.rank}`).toEqual([]);
    expect(Object.keys(r.checks).length).toBeGreaterThan(20);
  }
}

/** examples/ring-job.mjs's output: every rank's line under the launcher, and rank 0's verdict. */
export function expectRing(ran: Ran, size: number, launcher: string, why = `${ran.stdout}\n${ran.stderr}`): void {
  expect(ran.code, why).toBe(0);
  expect(ran.stdout).toContain(`ring of ${size} ranks: every block arrived intact`);
  for (let r = 0; r < size; r++) expect(ran.stdout).toContain(`rank ${r}/${size} (${launcher}): block from rank ${(r + size - 1) % size} intact`);
}

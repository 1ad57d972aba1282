// Pieces of the launcher tiers (test/job-slurm.test.ts, test/job-launchers.test.ts): running a launcher's command
// line, a user's project that has netdirect installed (so `npx ndbench` and `npm run` resolve as they do for a
// user), and the commands the README and docs/ show, read from their code blocks.
import { chmodSync, mkdirSync, mkdtempSync, readFileSync, symlinkSync, writeFileSync } from 'node:fs';
import { spawn, type SpawnOptions } from 'node:child_process';
import { createServer, type Socket } from 'node:net';
import * as os from 'node:os';
import * as path from 'node:path';
import { expect } from 'vitest';
import { encodePmi2, framePmi2, parsePmi1, parsePmi2 } from '../lib/job/index';
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
 * The launch commands written as inline code (`mpiexec ...`, `mpirun ...`, `srun ...`, `export ...`,
 * `NETDIRECT_RENDEZVOUS=... mpirun ...`) in the section of `file` under the heading `heading`, in order: the
 * commands docs/job.md's launcher table shows, for the tests that run them as written.
 */
export function docInlineCommands(file: string, heading: string): string[] {
  const text = readFileSync(path.join(root, file), 'utf8');
  const at = text.indexOf(`\n${heading}\n`);
  if (at < 0) throw new Error(`${file} has no heading ${JSON.stringify(heading)}`);
  const rest = text.slice(at + heading.length + 2);
  const end = rest.search(/\n#+ |\n\*\*/); // the next heading or bold paragraph
  const section = end < 0 ? rest : rest.slice(0, end);
  return [...section.matchAll(/`((?:mpiexec |mpirun |srun |export |NETDIRECT_RENDEZVOUS=)[^`]*)`/g)].map((m) => m[1]!); // a name alone is no command
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

/** A launcher's answer replaced by a test: a raw reply written as it is, null (silence) or undefined (the normal one). */
export type Pmi2Reply = string | null | undefined;

export interface Pmi2LauncherOptions {
  /** Ranks of the job: kvs-fence is answered once this many connections sent it. */
  size: number;
  /** What job-getid answers. */
  jobid: string;
  /** Refuse a fullinit without pmijobid with rc=3, as Slurm 22.05 does (src/plugins/mpi/pmi2). */
  strict?: boolean;
  /** Replaces any answer (a raw frame, or null: silence): how each adversary of test/job-adversary.test.ts is written. */
  hook?: (cmd: string, attrs: Record<string, string>) => Pmi2Reply;
}

/**
 * A PMI-2 launcher as Slurm's `--mpi=pmi2` serves it, for the sockets a test hands it (socketpairs, or connections
 * to a PMI_PORT): the PMI-1 style init line, then length-prefixed commands: fullinit, job-getid, kvs-put, kvs-fence
 * (answered once every rank fenced), kvs-get, finalize; anything else gets rc=-1. `log` records what was asked
 * (`init <version>`, then each command), `kvs` what was put.
 */
export function pmi2Launcher(o: Pmi2LauncherOptions): { serve(s: Socket): Promise<void>; log: string[]; kvs: Map<string, string> } {
  const kvs = new Map<string, string>();
  const log: string[] = [];
  let fenced: Socket[] = [];
  const send = (s: Socket, cmd: string, attrs: Array<[string, string | number]>) => s.write(framePmi2(encodePmi2(cmd, attrs)));
  const serve = (s: Socket) =>
    new Promise<void>((resolve) => {
      let buf = Buffer.alloc(0);
      let initDone = false;
      s.on('data', (d: Buffer) => {
        buf = Buffer.concat([buf, d]);
        for (;;) {
          if (!initDone) {
            const nl = buf.indexOf(0x0a);
            if (nl < 0) return;
            const line = parsePmi1(buf.subarray(0, nl).toString());
            buf = buf.subarray(nl + 1);
            log.push(`init ${line.pmi_version}`);
            s.write('cmd=response_to_init pmi_version=2 pmi_subversion=0 rc=0\n');
            initDone = true;
            continue;
          }
          if (buf.length < 6) return;
          const n = Number(buf.subarray(0, 6).toString().trim());
          if (buf.length < 6 + n) return;
          const m = parsePmi2(buf.subarray(6, 6 + n).toString());
          buf = buf.subarray(6 + n);
          log.push(m.cmd);
          const h = o.hook?.(m.cmd, m);
          if (h === null) continue;
          if (typeof h === 'string') {
            s.write(h);
            continue;
          }
          if (m.cmd === 'fullinit' && o.strict && (m.pmijobid === undefined || m.pmijobid === '')) send(s, 'fullinit-response', [['rc', 3], ['errmsg', 'pmijobid missing in fullinit command']]);
          else if (m.cmd === 'fullinit') send(s, 'fullinit-response', [['rc', 0], ['pmi-version', 2], ['pmi-subversion', 0], ['rank', m.pmirank], ['size', o.size], ['appnum', 0], ['debugged', 'FALSE'], ['pmiverbose', 'FALSE']]);
          else if (m.cmd === 'job-getid') send(s, 'job-getid-response', [['rc', 0], ['jobid', o.jobid]]);
          else if (m.cmd === 'kvs-put') {
            kvs.set(m.key, m.value);
            send(s, 'kvs-put-response', [['rc', 0]]);
          } else if (m.cmd === 'kvs-fence') {
            fenced.push(s);
            if (fenced.length === o.size) {
              for (const f of fenced) send(f, 'kvs-fence-response', [['rc', 0]]);
              fenced = [];
            }
          } else if (m.cmd === 'kvs-get') {
            const v = kvs.get(m.key);
            send(s, 'kvs-get-response', v === undefined ? [['rc', 0], ['found', 'FALSE']] : [['rc', 0], ['found', 'TRUE'], ['value', v]]);
          } else if (m.cmd === 'finalize') {
            send(s, 'finalize-response', [['rc', 0]]);
            resolve();
          } else send(s, `${m.cmd}-response`, [['rc', -1], ['errmsg', 'not served by this test']]);
        }
      });
      s.on('close', () => resolve());
    });
  return { serve, log, kvs };
}

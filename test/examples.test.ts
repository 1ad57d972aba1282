// The README's quick start, run exactly as the README shows it.
import { spawn, type ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import * as path from 'node:path';
import { describe, expect, it } from 'vitest';
import { root } from './helpers';

function run(command: string): { child: ChildProcess; output: Promise<{ code: number | null; stdout: string; stderr: string }>; line: (re: RegExp) => Promise<string> } {
  const [bin, ...args] = command.split(/\s+/);
  expect(bin).toBe('node');
  const child = spawn(process.execPath, args, { cwd: root, stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  const waiters: Array<[RegExp, (s: string) => void]> = [];
  child.stdout!.setEncoding('utf8').on('data', (d: string) => {
    stdout += d;
    for (const [re, resolve] of waiters) {
      const m = stdout.match(re);
      if (m) resolve(m[0]);
    }
  });
  child.stderr!.setEncoding('utf8').on('data', (d: string) => (stderr += d));
  const output = new Promise<{ code: number | null; stdout: string; stderr: string }>((resolve) =>
    child.on('exit', (code) => resolve({ code, stdout, stderr })),
  );
  const line = (re: RegExp) =>
    new Promise<string>((resolve, reject) => {
      const m = stdout.match(re);
      if (m) return resolve(m[0]);
      waiters.push([re, resolve]);
      output.then((o) => reject(new Error(`exited (${o.code}) before printing ${re}:\n${o.stdout}\n${o.stderr}`)));
    });
  return { child, output, line };
}

describe('README quick start', () => {
  it('runs as written: the server prints what the client wrote', async () => {
    const readme = readFileSync(path.join(root, 'README.md'), 'utf8');
    const commands = [...readme.matchAll(/^\s*(node examples\/quickstart\.mjs[^\n#]*?)\s*(#.*)?$/gm)].map((m) => m[1].trim());
    expect(commands).toEqual(['node examples/quickstart.mjs --serve', 'node examples/quickstart.mjs 127.0.0.1']);
    const server = run(commands[0]);
    await server.line(/listening on 127\.0\.0\.1:\d+/);
    const client = run(commands[1]);
    const c = await client.output;
    expect(c.code, c.stderr).toBe(0);
    expect(c.stdout).toMatch(/^wrote \d+ bytes to 127\.0\.0\.1:18515 at 0x[0-9a-f]+/);
    const s = await server.output;
    expect(s.code, s.stderr).toBe(0);
    expect(s.stdout).toMatch(/received \d+ bytes by RDMA Write from 127\.0\.0\.1: hello from process \d+ via RDMA Write/);
  });
});

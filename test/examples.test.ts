// The README's quick start, run exactly as the README shows it.
import { spawn, type ChildProcess } from 'node:child_process';
import { readFileSync, rmSync, writeFileSync } from 'node:fs';
import * as path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { freeSubnet, NetnsLab, netnsUnavailable } from './netns/topology.mjs';
import { root } from './helpers';

function run(command: string): { child: ChildProcess; output: Promise<{ code: number | null; stdout: string; stderr: string }>; line: (re: RegExp) => Promise<string> } {
  const [bin, ...args] = command.split(/\s+/);
  const child = bin === 'ip' ? spawn(bin, args, { cwd: root, stdio: ['ignore', 'pipe', 'pipe'] }) : spawn(process.execPath, args, { cwd: root, stdio: ['ignore', 'pipe', 'pipe'] });
  if (bin !== 'ip') expect(bin).toBe('node');
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
    expect(commands).toEqual(['node examples/quickstart.mjs --serve', 'node examples/quickstart.mjs <address of A>']);
    const server = run(commands[0]);
    // The server says which address to give the client: the one the client then uses, as a user on host B would.
    const address = (await server.line(/listening on \S+:\d+/)).replace(/^listening on (.*):\d+$/, '$1');
    const client = run(commands[1].replace('<address of A>', address));
    const c = await client.output;
    expect(c.code, c.stderr).toBe(0);
    const at = address.replace(/\./g, '\\.');
    expect(c.stdout).toMatch(new RegExp(`^wrote \\d+ bytes to ${at}:18515 at 0x[0-9a-f]+`));
    const s = await server.output;
    expect(s.code, s.stderr).toBe(0);
    expect(s.stdout).toMatch(new RegExp(`received \\d+ bytes by RDMA Write from ${at}: hello from process \\d+ via RDMA Write`));
  });
});

// The same two commands on two hosts: Linux network namespaces joined by a bridge (test/netns/topology.mjs), each
// with its own address and TCP/IP stack. Root and `ip` only (the namespace tier's needs): skipped otherwise.
const tag = `q${process.pid % 100000}`;
const netnsSkip = netnsUnavailable(tag);
describe.skipIf(netnsSkip !== null)('README quick start across two hosts (network namespaces)', () => {
  const lab = new NetnsLab(tag);
  afterAll(() => lab.teardown());
  it('the server on host A prints its address, the client on host B writes into its memory', async () => {
    const readme = readFileSync(path.join(root, 'README.md'), 'utf8');
    const [serve, write] = [...readme.matchAll(/^\s*(node examples\/quickstart\.mjs[^\n#]*?)\s*(#.*)?$/gm)].map((m) => m[1].trim());
    const t = lab.bridgedHosts('qs', freeSubnet([]), 2);
    const inHost = (i: number, command: string) => run(`ip netns exec ${t.hosts[i]} ${process.execPath} ${command.replace(/^node /, '')}`);
    const server = inHost(0, serve);
    const address = (await server.line(/listening on \S+:\d+/)).replace(/^listening on (.*):\d+$/, '$1');
    expect(address).toBe(t.addresses[0]);
    const client = inHost(1, write.replace('<address of A>', address));
    const c = await client.output;
    expect(c.code, c.stderr).toBe(0);
    const s = await server.output;
    expect(s.code, s.stderr).toBe(0);
    expect(s.stdout).toContain(`by RDMA Write from ${t.addresses[1]}: hello from process`);
  });
});
if (netnsSkip !== null) console.warn(`test/examples.test.ts: the two-host quick start is skipped: ${netnsSkip}`);

describe('README code blocks', () => {
  // Every ```js block of the README is a whole program: written to a file in the package root (so that
  // `import ... from 'netdirect'` resolves to this package by its name) and run.
  const readme = readFileSync(path.join(root, 'README.md'), 'utf8');
  const blocks = [...readme.matchAll(/^```js\n([\s\S]*?)^```$/gm)].map((m) => m[1]);

  it('has code blocks to run', () => {
    expect(blocks.length).toBeGreaterThan(0);
  });

  blocks.forEach((code, i) => {
    it(`block ${i + 1} runs as written`, async () => {
      const file = path.join(root, `.readme-block-${process.pid}-${i}.mjs`);
      writeFileSync(file, code);
      try {
        const { child, output } = run(`node ${path.basename(file)}`);
        const timer = setTimeout(() => child.kill('SIGKILL'), 60_000);
        const o = await output;
        clearTimeout(timer);
        expect(o.code, `${o.stdout}\n${o.stderr}`).toBe(0);
        expect(o.stderr).toBe('');
      } finally {
        rmSync(file, { force: true });
      }
    });
  });

  it('the quick-start block moves the bytes it says', async () => {
    const file = path.join(root, `.readme-quick-${process.pid}.mjs`);
    writeFileSync(file, blocks[0]);
    try {
      const o = await run(`node ${path.basename(file)}`).output;
      expect(o.stdout).toBe('5 bytes written, the target reads "hello"\n');
    } finally {
      rmSync(file, { force: true });
    }
  });
});

describe('examples/', () => {
  it('ring.mjs: 4 ranks each write a block into the next and find the one they received intact', async () => {
    const o = await run('node examples/ring.mjs --ranks 4 --block 65536').output;
    expect(o.code, `${o.stdout}\n${o.stderr}`).toBe(0);
    for (const [rank, prev] of [[0, 3], [1, 0], [2, 1], [3, 2]]) {
      expect(o.stdout).toContain(`rank ${rank}: 65536 bytes from rank ${prev}, all correct`);
    }
    expect(o.stdout).toContain('ring of 4 ranks: every block arrived intact');
  });

  it('write-latency.mjs: prints a median, a p99 and a bandwidth for every size', async () => {
    const o = await run('node examples/write-latency.mjs --iterations 50 --inflight 8').output;
    expect(o.code, `${o.stdout}\n${o.stderr}`).toBe(0);
    for (const size of [8, 64, 512, 4096, 65536]) {
      expect(o.stdout).toMatch(new RegExp(`^ *${size} +\\d+\\.\\d +\\d+\\.\\d +\\d+\\.\\d$`, 'm'));
    }
  });
});

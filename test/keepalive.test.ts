// The event loop and pending requests, in the run's completion mode (vitest.config.mts runs this file once per
// mode): a process with nothing pending ends by itself even with a connection open; a pending receive keeps it
// alive, as a pending socket read does in Node, until the receive completes. In 'manual' mode a pending request
// does not keep a process alive by itself (nothing completes it but cq.poll()): there the children poll while
// requests are pending (fixtures/manual-driver.mjs), as a manual-mode program must, and that polling keeps them
// alive; the 'unpolled' case checks that a receive nobody polls lets the process end.
import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import * as path from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import type { Adapter, CompletionQueue, Listener } from '../lib/index';
import { fixtures, openLocal, root } from './helpers';

let adapter: Adapter;
let cq: CompletionQueue;
let listener: Listener;

beforeAll(async () => {
  ({ adapter, cq } = await openLocal());
  // The project's mode really is in use (NETDIRECT_COMPLETION, else 'auto'); the cases below read adapter.completion.
  expect(adapter.completion).toBe(process.env.NETDIRECT_COMPLETION ?? (process.platform === 'win32' ? 'thread' : 'loop'));
  listener = await adapter.listen({});
});

afterAll(async () => {
  await adapter?.close();
});

function child(what: string, env: NodeJS.ProcessEnv = process.env) {
  const proc = spawn(process.execPath, [path.join(fixtures, 'keepalive.mjs'), what, `${listener.address.host}:${listener.address.port}`], {
    cwd: root,
    env,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  const said = (text: string) =>
    new Promise<void>((resolve) => {
      const check = () => (stdout.includes(text) ? resolve() : undefined);
      proc.stdout.on('data', check);
      check();
    });
  proc.stdout.setEncoding('utf8').on('data', (d: string) => (stdout += d));
  proc.stderr.setEncoding('utf8').on('data', (d: string) => (stderr += d));
  const closed = new Promise<{ code: number | null; signal: string | null }>((resolve) => proc.on('close', (code, signal) => resolve({ code, signal })));
  return { proc, said, closed, out: () => ({ stdout, stderr }) };
}

async function acceptOne() {
  const qp = adapter.createQueuePair({ receiveCq: cq });
  const connector = await listener.getConnectionRequest();
  await connector.accept(qp);
  return qp;
}

it('a pending receive keeps the process alive until it completes; then the process ends by itself', async () => {
  const c = child('receive');
  const qp = await acceptOne();
  await c.said('waiting');
  expect(c.out().stdout).toContain(`mode:${adapter.completion}`); // the child runs in the run's mode too
  await new Promise((r) => setTimeout(r, 500));
  expect(c.proc.exitCode, c.out().stderr).toBeNull(); // still waiting for its receive
  const mr = await adapter.allocateMemory(64);
  await qp.send(mr.slice(0, 24));
  expect(await c.closed).toEqual({ code: 0, signal: null });
  expect(c.out()).toEqual({ stdout: expect.stringContaining('received 24'), stderr: '' });
  await qp.close();
});

/** CPU seconds (user + system) the process has used so far; undefined where /proc is not there. */
function cpuSeconds(pid: number): number | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return (Number(fields[11]) + Number(fields[12])) / 100; // utime, stime in clock ticks (USER_HZ, 100 on Linux)
  } catch {
    return undefined;
  }
}

it('with a busy-poll window (NETDIRECT_SPIN_MICROS) a pending receive completes, the waiting stops spinning after the window, and the process ends by itself', async () => {
  const c = child('receive', { ...process.env, NETDIRECT_SPIN_MICROS: '20000' });
  const qp = await acceptOne();
  await c.said('waiting');
  // Past the 20 ms window the child sleeps again, though its receive is pending: over the next 600 ms it uses a
  // small part of a core (a window that never closed would use all of it). Not in 'manual' mode, where the child
  // polls all the while by design (manual-driver.mjs).
  await new Promise((r) => setTimeout(r, 200));
  const before = cpuSeconds(c.proc.pid!);
  await new Promise((r) => setTimeout(r, 600));
  const after = cpuSeconds(c.proc.pid!);
  if (before !== undefined && after !== undefined && adapter.completion !== 'manual') expect(after - before, 'CPU seconds while waiting 0.6 s').toBeLessThan(0.3);
  expect(c.proc.exitCode, c.out().stderr).toBeNull();
  const mr = await adapter.allocateMemory(64);
  await qp.send(mr.slice(0, 24));
  expect(await c.closed).toEqual({ code: 0, signal: null });
  expect(c.out()).toEqual({ stdout: expect.stringContaining('received 24'), stderr: '' });
  await qp.close();
});

it('a process with a connection open and nothing pending ends by itself', async () => {
  const c = child('idle');
  const qp = await acceptOne();
  expect(await c.closed).toEqual({ code: 0, signal: null });
  expect(c.out()).toEqual({ stdout: expect.stringContaining('connected'), stderr: '' });
  await qp.close();
});

it("a receive nobody polls keeps the process alive except in 'manual' mode, where only cq.poll() completes it", async () => {
  const c = child('unpolled');
  const qp = await acceptOne();
  await c.said('waiting');
  expect(c.out().stdout).toContain(`mode:${adapter.completion}`);
  if (adapter.completion === 'manual') {
    expect(await c.closed).toEqual({ code: 0, signal: null });
    expect(c.out()).toEqual({ stdout: expect.not.stringContaining('received'), stderr: '' });
  } else {
    // Nothing to poll in these modes: the same as the first case.
    await new Promise((r) => setTimeout(r, 500));
    expect(c.proc.exitCode, c.out().stderr).toBeNull();
    const mr = await adapter.allocateMemory(64);
    await qp.send(mr.slice(0, 24));
    expect(await c.closed).toEqual({ code: 0, signal: null });
    expect(c.out()).toEqual({ stdout: expect.stringContaining('received 24'), stderr: '' });
  }
  await qp.close();
});

it('workers that are terminated, exit or close with a connection open leave the process running', async () => {
  const proc = spawn(process.execPath, [path.join(fixtures, 'worker-exit.mjs')], { cwd: root, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  proc.stdout.setEncoding('utf8').on('data', (d: string) => (out += d));
  proc.stderr.setEncoding('utf8').on('data', (d: string) => (out += d));
  const [code, signal] = await new Promise<[number | null, string | null]>((resolve) => proc.on('close', (c, s) => resolve([c, s])));
  expect({ code, signal, out }).toEqual({ code: 0, signal: null, out: 'ok\n' });
}, 60_000);

// Shared pieces of the two-process tests: the RPC client for test/fixtures/peer.mjs and the local side.
import { fork, type ChildProcess } from 'node:child_process';
import * as path from 'node:path';
import { expect } from 'vitest';
import { NdError, openAdapter, type Adapter, type CompletionOption, type CompletionQueue, type Connector, type QueuePair } from '../lib/index';
import { driveManual } from './fixtures/manual-driver.mjs';
import { describeAdapter, track } from './hang-report';

export const fixtures = path.join(__dirname, 'fixtures');
export const root = path.resolve(__dirname, '..');
export const MiB = 1024 * 1024;

export interface Exit {
  code: number | null;
  signal: NodeJS.Signals | null;
  stderr: string;
  stdout: string;
}

export class Peer {
  readonly child: ChildProcess;
  readonly exited: Promise<Exit>;
  private nextId = 1;
  private readonly calls = new Map<number, { resolve: (v: any) => void; reject: (e: unknown) => void; cmd: string }>();
  stderr = '';
  stdout = '';

  constructor(script = 'peer.mjs', args: string[] = [], execArgv: string[] = []) {
    this.child = fork(path.join(fixtures, script), args, {
      cwd: root,
      serialization: 'advanced',
      stdio: ['ignore', 'pipe', 'pipe', 'ipc'],
      execArgv,
    });
    this.child.stderr!.setEncoding('utf8').on('data', (d: string) => (this.stderr += d));
    this.child.stdout!.setEncoding('utf8').on('data', (d: string) => (this.stdout += d));
    this.child.on('message', (m: any) => {
      if (m.ready) return;
      const call = this.calls.get(m.id);
      if (!call) return;
      this.calls.delete(m.id);
      if (m.ok) call.resolve(m.value);
      else call.reject(Object.assign(new Error(`peer ${call.cmd}: ${m.error.message}`), m.error));
    });
    const untrack = track(`peer ${script} (pid ${this.child.pid})`, () => {
      const calls = [...this.calls.values()].map((c) => c.cmd).join(', ') || 'none';
      return `pending calls: ${calls}; stderr tail: ${JSON.stringify(this.stderr.slice(-400))}`;
    });
    this.exited = new Promise((resolve) => {
      this.child.on('exit', (code, signal) => {
        untrack();
        for (const call of this.calls.values()) call.reject(new Error(`peer exited (${code ?? signal}) during ${call.cmd}\n${this.stderr}`));
        this.calls.clear();
        resolve({ code, signal, stderr: this.stderr, stdout: this.stdout });
      });
    });
  }

  /** Resolves once the child said it is ready (its module graph, addon included, loaded). */
  ready(): Promise<void> {
    return new Promise((resolve, reject) => {
      const onMessage = (m: any) => {
        if (m?.ready) {
          this.child.off('message', onMessage);
          resolve();
        }
      };
      this.child.on('message', onMessage);
      this.exited.then((e) => reject(new Error(`peer exited before ready: ${e.code ?? e.signal}\n${e.stderr}`)));
    });
  }

  call<T = any>(cmd: string, args?: unknown): Promise<T> {
    const id = this.nextId++;
    return new Promise<T>((resolve, reject) => {
      this.calls.set(id, { resolve, reject, cmd });
      this.child.send({ id, cmd, args });
    });
  }

  async stop(): Promise<Exit> {
    if (this.child.exitCode === null && this.child.signalCode === null) {
      this.call('exit', { code: 0 }).catch(() => undefined);
    }
    return this.exited;
  }
}

export async function startPeer(): Promise<Peer> {
  const peer = new Peer();
  await peer.ready();
  return peer;
}

export interface Local {
  adapter: Adapter;
  cq: CompletionQueue;
  qp: QueuePair;
  connector: Connector;
}

/** Connects a fresh local QP to the peer (which listens and accepts), with receives posted on the peer first. */
export async function connectToPeer(
  adapter: Adapter,
  cq: CompletionQueue,
  peer: Peer,
  address: { host: string; port: number },
  receives: unknown[] = [],
  qpOptions: Record<string, unknown> = {},
): Promise<{ qp: QueuePair; connector: Connector; accepted: any }> {
  const qp = adapter.createQueuePair({ receiveCq: cq, receiveDepth: 256, initiatorDepth: 256, ...qpOptions });
  const accepting = peer.call('accept', { receives });
  const connector = await adapter.connect(qp, address);
  const accepted = await accepting;
  return { qp, connector, accepted };
}

/**
 * The address the two-process suites open their adapters on: 127.0.0.1, or NETDIRECT_TEST_ADDRESS (an RDMA
 * device's address in the siw-vm guest, where provider 'auto' opens the verbs provider: docs/verbs.md §6).
 */
export const TEST_ADDRESS = process.env.NETDIRECT_TEST_ADDRESS || '127.0.0.1';

/**
 * An adapter on `address` (default TEST_ADDRESS, 127.0.0.1) in `completion` mode (default: the run's mode, NETDIRECT_COMPLETION or 'auto'). In the
 * run's mode, a 'manual' adapter is driven (fixtures/manual-driver.mjs: its CQs are polled while requests are
 * pending), as a manual-mode program would; one asked for explicitly is left to the test to poll.
 */
export async function openLocal(
  completion?: CompletionOption,
  address: string = TEST_ADDRESS,
): Promise<{ adapter: Adapter; cq: CompletionQueue }> {
  const adapter = await openAdapter(address, completion === undefined ? {} : { completion });
  if (completion === undefined) driveManual(adapter);
  track(`adapter ${adapter.address}`, () => describeAdapter(adapter));
  const cq = adapter.createCompletionQueue({ depth: 2048 });
  return { adapter, cq };
}

/** The promise's rejection, which must be an NdError. */
export async function ndError(promise: Promise<unknown>): Promise<NdError> {
  try {
    await promise;
  } catch (err) {
    expect(err).toBeInstanceOf(NdError);
    return err as NdError;
  }
  throw new Error('expected the promise to reject with an NdError');
}

/** What a synchronous call throws, which must be an NdError. */
export function ndThrow(fn: () => unknown): NdError {
  try {
    fn();
  } catch (err) {
    expect(err).toBeInstanceOf(NdError);
    return err as NdError;
  }
  throw new Error('expected the call to throw an NdError');
}

/** Has the promise settled yet? (Checked after the microtask queue drains.) */
export async function isSettled(promise: Promise<unknown>): Promise<boolean> {
  let settled = false;
  promise.then(
    () => (settled = true),
    () => (settled = true),
  );
  await new Promise((r) => setImmediate(r));
  return settled;
}

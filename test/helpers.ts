// Shared pieces of the two-process tests: the RPC client for test/fixtures/peer.mjs and the local side.
import { execFileSync, fork, type ChildProcess } from 'node:child_process';
import * as os from 'node:os';
import * as path from 'node:path';
import { expect } from 'vitest';
import { NdError, openAdapter, type Adapter, type CompletionOption, type CompletionQueue, type Connector, type QueuePair } from '../lib/index';
import { rdmaTransport, readRdmaDevices } from '../lib/doctor';
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

/** What TEST_ADDRESS opens: the provider and, for the verbs provider, the RDMA device serving the address. */
export interface TestDevice {
  provider: string;
  /** The RDMA device (sysfs /sys/class/infiniband/<name>, its parent netdev holding TEST_ADDRESS); '' for 'soft'. */
  name: string;
  /** 'iwarp' | 'roce' | 'infiniband' for an RDMA device (docs/verbs.md), 'soft' for the software provider. */
  transport: string;
  /** Adapter.info.maxWindowSize > 0. */
  windows: boolean;
}

let testDeviceOnce: Promise<TestDevice> | undefined;

/** The device TEST_ADDRESS maps to (an adapter opened once on it, and sysfs for an RDMA device's transport). */
export function testDevice(): Promise<TestDevice> {
  testDeviceOnce ??= (async () => {
    const a = await openAdapter(TEST_ADDRESS, { completion: 'thread' });
    const d: TestDevice = { provider: a.provider, name: '', transport: 'soft', windows: Number(a.info.maxWindowSize) > 0 };
    await a.close();
    if (d.provider === 'soft') return d;
    const netdev = Object.entries(os.networkInterfaces()).find(([, addrs]) => addrs?.some((x) => x.address === TEST_ADDRESS))?.[0];
    const sysfs = readRdmaDevices();
    const devices = Array.isArray(sysfs) ? sysfs : []; // no sysfs: the transport stays unknown
    // sysfs names a software device's netdev in `parent` (rxe) or not at all (siw): iproute2's `rdma link` does.
    let links: Array<{ ifname?: string; netdev?: string }> = [];
    try {
      links = JSON.parse(execFileSync('rdma', ['-j', 'link', 'show'], { encoding: 'utf8', timeout: 10_000, stdio: ['ignore', 'pipe', 'ignore'] }));
    } catch {
      // no iproute2 rdma: sysfs only
    }
    const name =
      devices.find((x) => netdev !== undefined && x.parent === netdev)?.name ??
      links.find((l) => netdev !== undefined && l.netdev === netdev)?.ifname ??
      '';
    const device = devices.find((x) => x.name === name);
    d.name = name;
    d.transport = device === undefined ? 'unknown' : rdmaTransport(device);
    return d;
  })();
  return testDeviceOnce;
}

/**
 * What a device cannot do that a suite asserts for the software provider (docs/verbs.md §6 lists them per device):
 * - 'memory-windows': the device has no memory windows (info.maxWindowSize 0: siw);
 * - 'remote-errors-at-initiator': an iWARP device completes a Send or Write when it has transmitted it (RDMAP
 *   does not acknowledge them, RFC 5040 §4.2), so a remote access error or a Send without a receive reaches the
 *   initiator only as the peer's Terminate ending the connection: Linux siw then flushes the initiator's
 *   requests (ND_CANCELED) without the Terminate's status, and serves a Read from a region without remote read
 *   access (siw_qp_tx.c checks a Read Response's source with no permission bits);
 * - 'send-without-receive-fails': on RoCE and InfiniBand a Send with no receive posted at the peer is retried
 *   (receiver not ready) for as long as the peer does not post one (the provider asks for RNR retry 7: for ever),
 *   it does not fail; on iWARP the Send completes once transmitted and the peer's Terminate ends the connection.
 * Returns the skip reason naming the device, or null when the device can.
 */
export async function deviceCannot(
  what: 'memory-windows' | 'remote-errors-at-initiator' | 'send-without-receive-fails' | 'initiator-declines',
): Promise<string | null> {
  const d = await testDevice();
  if (d.provider === 'soft') return null;
  const dev = `${d.name || TEST_ADDRESS} (${d.provider} provider, ${d.transport})`;
  switch (what) {
    case 'memory-windows':
      return d.windows ? null : `${dev} has no memory windows (info.maxWindowSize 0)`;
    case 'remote-errors-at-initiator':
      return d.transport === 'iwarp'
        ? `${dev}: iWARP completes a Write or Send once transmitted (RFC 5040: unacknowledged); a remote access error ` +
            'ends the connection by a Terminate, seen by the initiator as ND_CANCELED, and Linux siw does not check remote read access'
        : null;
    case 'send-without-receive-fails':
      return d.transport === 'roce' || d.transport === 'infiniband'
        ? `${dev}: a Send without a receive at the peer is retried as receiver-not-ready for ever (rnr_retry 7), it does not fail`
        : d.transport === 'iwarp'
          ? `${dev}: iWARP completes a Send once transmitted (RFC 5040: unacknowledged); the missing receive ends the connection by a Terminate, no request fails with ND_REMOTE_ERROR`
          : null;
    case 'initiator-declines':
      return d.transport === 'iwarp'
        ? `${dev}: the kernel's iWARP connection manager establishes the connection before connect() completes, so the peer's accept() has succeeded when the initiator declines; reject() or close() then disconnects`
        : null;
  }
}

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

type DeviceLimit = Parameters<typeof deviceCannot>[0];

/** Skips the running test (its context `ctx`) with the device's reason where TEST_ADDRESS's device cannot do `what`. */
export async function skipWhereDeviceCannot(ctx: { skip(condition: boolean, note?: string): void }, ...what: DeviceLimit[]): Promise<void> {
  for (const w of what) {
    const reason = await deviceCannot(w);
    if (reason !== null) ctx.skip(true, reason);
  }
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

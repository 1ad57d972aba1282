// Gathering the facts of this machine (lib/doctor/facts.ts): the providers, PowerShell on Windows, a loopback
// self-test, /sys/class/infiniband and the verbs provider elsewhere, the peers named on the command line.

import { existsSync, readdirSync, readFileSync, readlinkSync } from 'node:fs';
import { lookup } from 'node:dns/promises';
import { isIP } from 'node:net';
import * as os from 'node:os';
import * as path from 'node:path';
import { listAddresses, listProviders, nativeBinding, nativeVersion, openAdapter } from '../discovery.js';
import { NdError } from '../errors.js';
import { decodeRemote, encodeRemote } from '../memory-region.js';
import { type DoctorFacts, type DoctorOptions, type LocalNetworkFact, type PeerFact, type RdmaDeviceFact, type SelfTestFact } from './facts.js';
import { defaultPowerShell, runPowerShell } from './powershell.js';

function errorText(err: unknown): { error: string; code?: string } {
  if (err instanceof NdError) return { error: `${err.message} [${err.code}]`, code: err.code };
  return { error: err instanceof Error ? err.message : String(err) };
}

/** Swallows a rejection nobody may be waiting for any more (the self-test's race), keeping the promise. */
function quiet<T>(p: Promise<T>): Promise<T> {
  p.catch(() => undefined);
  return p;
}

/**
 * Opens the built-in provider's adapter on 127.0.0.1, connects a listener and a connector of that adapter,
 * RDMA-Writes 4 KiB, sends a zero-byte Send behind it (it completes after the Write is placed) and compares
 * the bytes. Bounded by timeoutMs; the adapter is closed either way (which settles whatever is still pending).
 */
export async function runSelfTest(timeoutMs = 5000): Promise<SelfTestFact> {
  const started = performance.now();
  const bytes = 4096;
  let stage = 'opening the adapter';
  let timer: NodeJS.Timeout | undefined;
  // The program's mode (NETDIRECT_COMPLETION, else 'auto') — but not 'manual', where nothing here would poll.
  const manual = process.env.NETDIRECT_COMPLETION === 'manual';
  const opening = quiet(openAdapter('127.0.0.1', { provider: 'soft', ...(manual ? { completion: 'auto' as const } : {}) }));
  const work = quiet(
    (async (): Promise<SelfTestFact> => {
      const adapter = await opening;
      stage = 'setting up queues and memory';
      const cq = adapter.createCompletionQueue({ depth: 16 });
      const serverQp = adapter.createQueuePair({ receiveCq: cq });
      const clientQp = adapter.createQueuePair({ receiveCq: cq });
      const target = await adapter.allocateMemory(bytes, { remoteWrite: true });
      const source = await adapter.allocateMemory(bytes);
      for (let i = 0; i < bytes; i++) source.buffer[i] = (i * 31 + 7) & 0xff;
      const done = quiet(serverQp.receive(null));
      stage = 'listening on 127.0.0.1';
      const listener = await adapter.listen({ host: '127.0.0.1', port: 0 });
      const accepted = quiet(
        listener.getConnectionRequest().then((c) => c.accept(serverQp, { privateData: encodeRemote(target.remote()) })),
      );
      stage = `connecting to 127.0.0.1:${listener.address.port}`;
      const connector = await adapter.connect(clientQp, listener.address);
      stage = 'accepting';
      await accepted;
      stage = 'writing';
      const written = await clientQp.write(source, decodeRemote(connector.privateData));
      stage = 'sending behind the write';
      await clientQp.send(null);
      await done;
      const bad = target.buffer.findIndex((b, i) => b !== source.buffer[i]);
      if (bad >= 0) throw new Error(`the written bytes differ from the source at offset ${bad}`);
      return {
        ok: true,
        bytes: written.bytes,
        ms: Math.round((performance.now() - started) * 10) / 10,
        port: listener.address.port,
        completion: adapter.completion,
      };
    })(),
  );
  const deadline = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`no result within ${timeoutMs} ms`)), timeoutMs);
  });
  try {
    return await Promise.race([work, deadline]);
  } catch (err) {
    const e = errorText(err);
    return { ...e, ok: false, error: `${stage}: ${e.error}` };
  } finally {
    clearTimeout(timer);
    const adapter = await opening.catch(() => undefined);
    await adapter?.close().catch(() => undefined);
  }
}

/** @internal The RDMA devices sysfs lists (also test/helpers.ts testDevice). */
export function readRdmaDevices(root = '/sys/class/infiniband'): RdmaDeviceFact[] | { error: string } {
  let names: string[];
  try {
    names = readdirSync(root);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return [];
    return { error: (err as Error).message };
  }
  const read = (file: string): string | undefined => {
    try {
      return readFileSync(file, 'utf8').trim() || undefined;
    } catch {
      return undefined;
    }
  };
  return names.sort().map((name) => {
    const dir = path.join(root, name);
    const device: RdmaDeviceFact = { name };
    try {
      device.driver = path.basename(readlinkSync(path.join(dir, 'device', 'driver')));
    } catch {
      // Software devices (siw, rxe) have no PCI device; their type shows in the name and node_type.
    }
    const nodeType = read(path.join(dir, 'node_type'));
    if (nodeType !== undefined) device.nodeType = nodeType;
    const parent = read(path.join(dir, 'parent'));
    if (parent !== undefined) device.parent = parent;
    const portState = read(path.join(dir, 'ports', '1', 'state'));
    if (portState !== undefined) device.portState = portState;
    const linkLayer = read(path.join(dir, 'ports', '1', 'link_layer'));
    if (linkLayer !== undefined) device.linkLayer = linkLayer;
    return device;
  });
}

async function readVerbsProvider(): Promise<{ built: boolean; listed: boolean; addresses: string[]; error?: string }> {
  const built = nativeBinding().builtProviders.includes('verbs');
  try {
    if (!built) return { built, listed: false, addresses: [] };
    if (!listProviders().some((p) => p.name === 'verbs')) {
      // Built but not listed: the provider says why when asked for by name (no rdma-core, or no device).
      try {
        await (await openAdapter('127.0.0.1', { provider: 'verbs' })).close();
        return { built, listed: false, addresses: [] };
      } catch (err) {
        return { built, listed: false, addresses: [], error: (err as Error).message.replace(/^.*?provider 'verbs': /, '') };
      }
    }
    return { built, listed: true, addresses: await listAddresses({ provider: 'verbs' }) };
  } catch (err) {
    return { built, listed: false, addresses: [], error: (err as Error).message };
  }
}

/** @internal iwarp | roce | infiniband from sysfs: node type 4 is an RNIC (iWARP); else the port's link layer decides. */
export function rdmaTransport(x: RdmaDeviceFact): string {
  if (x.nodeType !== undefined && /^4\b|RNIC/.test(x.nodeType)) return 'iwarp';
  if (x.linkLayer === 'Ethernet') return 'roce';
  if (x.linkLayer === 'InfiniBand') return 'infiniband';
  return 'transport unknown';
}

function localNetworks(): LocalNetworkFact[] {
  const out: LocalNetworkFact[] = [];
  for (const [name, list] of Object.entries(os.networkInterfaces())) {
    for (const a of list ?? []) {
      if (a.cidr) out.push({ interface: name, address: a.address, cidr: a.cidr, internal: a.internal });
    }
  }
  return out;
}

async function resolvePeers(hosts: string[]): Promise<PeerFact[]> {
  return Promise.all(
    hosts.map(async (host): Promise<PeerFact> => {
      const bare = host.startsWith('[') && host.endsWith(']') ? host.slice(1, -1) : host;
      if (isIP(bare) !== 0) return { host, address: bare };
      try {
        return { host, address: (await lookup(bare)).address };
      } catch (err) {
        return { host, error: (err as Error).message };
      }
    }),
  );
}

/** The DLL path of a provider spec ('path', 'path#{GUID}'), or undefined for a name ('auto', 'i40wb'). */
export function dllPathOf(spec: string): string | undefined {
  const bare = spec.replace(/#\{[^}]*\}$/, '');
  return /[\\/]/.test(bare) ? bare : undefined;
}

export async function gatherDoctorFacts(options: DoctorOptions = {}): Promise<DoctorFacts> {
  const platform = options.platform ?? process.platform;
  const facts: DoctorFacts = { platform, arch: process.arch, node: process.version, providers: [], env: {} };
  try {
    facts.addonVersion = nativeVersion();
  } catch {
    // The version is decoration; a broken addon shows in the checks below.
  }
  try {
    facts.providers = listProviders();
  } catch (err) {
    facts.providers = { error: errorText(err).error };
  }
  for (const name of ['NETDIRECT_PROVIDER', 'NETDIRECT_SOFT_CRC'] as const) {
    const value = process.env[name];
    if (value !== undefined && value !== '') facts.env[name] = value;
  }
  if (platform === 'win32') {
    facts.providerFiles = {};
    if (Array.isArray(facts.providers)) {
      for (const p of facts.providers) if (p.kind === 'system' && p.path) facts.providerFiles[p.path] = existsSync(p.path);
    }
    const override = facts.env.NETDIRECT_PROVIDER && dllPathOf(facts.env.NETDIRECT_PROVIDER);
    if (override) facts.providerFiles[override] = existsSync(override);
    const [ps, peers] = await Promise.all([
      runPowerShell(options.powershell ?? defaultPowerShell(), options.powershellTimeoutMs),
      resolvePeers(options.peers ?? []),
    ]);
    facts.powershell = ps;
    facts.peers = peers;
    facts.localNetworks = localNetworks();
    return facts;
  }
  try {
    facts.addresses = await listAddresses({ provider: 'soft' });
  } catch (err) {
    facts.addresses = { error: errorText(err).error };
  }
  try {
    facts.hardwareCrc32c = nativeBinding().hardwareCrc32c();
    facts.crc32cImplementation = nativeBinding().crc32cImplementation();
  } catch {
    // Left undefined: reported as unknown.
  }
  if (options.selfTest !== false) facts.selfTest = await runSelfTest(options.selfTestTimeoutMs ?? 5000);
  if (platform === 'linux') {
    facts.rdmaDevices = readRdmaDevices();
    facts.verbsProvider = await readVerbsProvider();
    facts.kernelModules = { siw: existsSync('/sys/module/siw'), rdma_rxe: existsSync('/sys/module/rdma_rxe') };
  }
  return facts;
}

// Discovery: listProviders (the built-in software provider and, on Windows, the ND v2 providers of the Winsock
// catalog), listAddresses (NdQueryAddressList) and openAdapter (NdOpenAdapter).

import { createSocket } from 'node:dgram';
import { isIP } from 'node:net';
import { lookup } from 'node:dns/promises';
import { binding as loaded } from './binding.js';
import type { NativeBinding } from './native.js';
import { ERR_ND_INVALID_ARGUMENT, ERR_ND_OUT_OF_RANGE, NdError, asNdError, callerStack, errorFactory, misuse } from './errors.js';
import { Adapter, type AdapterOptions, type CompletionOption } from './adapter.js';
import { checkIndex, checkOptions, describe } from './validate.js';

/** A provider listProviders() found. */
export interface ProviderInfo {
  /** The name to pass as AdapterOptions.provider ('soft' for the built-in one). */
  name: string;
  /** 'builtin': the software provider in this package; 'system': an ND v2 provider installed on Windows. */
  kind: 'builtin' | 'system';
  /** Provider DLL (Windows). */
  path?: string;
  /** Catalog provider id (Windows) or the built-in provider's GUID. */
  guid?: string;
  /** 0x20000 for ND v2. */
  ndVersion: number;
}

const binding = loaded as NativeBinding;
let factorySet = false;

/** @internal The addon, with NdError handed to it once. */
export function nativeBinding(): NativeBinding {
  if (!factorySet) {
    binding.setErrorFactory(errorFactory);
    factorySet = true;
  }
  return binding;
}

/**
 * The addon's version string.
 *
 * @returns the version the native addon was built as.
 */
export function nativeVersion(): string {
  return nativeBinding().version;
}

function providerOf(value: unknown, operation: string): string {
  if (value === undefined) return 'auto';
  if (typeof value !== 'string' || value.length === 0) {
    throw misuse(ERR_ND_INVALID_ARGUMENT, operation, `provider must be 'auto', 'soft', a provider name or a DLL path, got ${describe(value)}`);
  }
  return value;
}

/**
 * The ND v2 providers this machine offers: the built-in software provider ('soft') everywhere and, on Windows,
 * those of the Winsock catalog.
 *
 * @returns one entry per provider, the built-in one included.
 * @example
 * ```ts
 * import { listProviders, listAddresses } from 'netdirect';
 * for (const p of listProviders()) console.log(p.name, p.kind, await listAddresses({ provider: p.name }));
 * ```
 */
export function listProviders(): ProviderInfo[] {
  return nativeBinding()
    .listProviders()
    .map((p) => {
      const info: ProviderInfo = { name: p.name, kind: p.kind, ndVersion: p.ndVersion };
      if (p.path !== undefined) info.path = p.path;
      if (p.guid !== undefined) info.guid = p.guid;
      return info;
    });
}

const LIST_ADDRESSES_KEYS = ['provider'] as const;
const ADAPTER_KEYS = ['provider', 'completion', 'spinMicros', 'sharedMemory'] as const;

/**
 * The local addresses the provider's adapters serve (NdQueryAddressList): what openAdapter() accepts.
 *
 * @param options - provider: 'auto' (default), 'soft', a provider name from listProviders() or a DLL path.
 * @returns IPv4 and IPv6 addresses as strings.
 * @throws {@link NdError} ERR_ND_INVALID_ARGUMENT for an unknown option or a provider that is not a non-empty
 *   string; ND_NOT_SUPPORTED when no provider has that name; the provider's status when it cannot list.
 */
export async function listAddresses(options: { provider?: string } = {}): Promise<string[]> {
  const op = 'listAddresses';
  try {
    checkOptions(options, op, LIST_ADDRESSES_KEYS);
    return nativeBinding().listAddresses(providerOf(options.provider, op));
  } catch (err) {
    throw callerStack(asNdError(err, op));
  }
}

const COMPLETION_MODES = ['auto', 'loop', 'thread', 'manual'] as const;

/**
 * The completion mode asked for: the option, else the NETDIRECT_COMPLETION environment variable (so a whole
 * program or test run can be switched without code changes), else 'auto'.
 */
function completionOf(option: unknown, op: string): CompletionOption {
  const fromEnv = process.env.NETDIRECT_COMPLETION;
  const value = option ?? (fromEnv === undefined || fromEnv === '' ? 'auto' : fromEnv);
  if (!(COMPLETION_MODES as readonly unknown[]).includes(value)) {
    const where = option === undefined ? 'NETDIRECT_COMPLETION' : 'completion';
    throw misuse(ERR_ND_INVALID_ARGUMENT, op, `${where} must be one of ${COMPLETION_MODES.map((m) => `'${m}'`).join(', ')}, got ${describe(value)}`);
  }
  return value as CompletionOption;
}

/**
 * The busy-poll window asked for: the option, else the NETDIRECT_SPIN_MICROS environment variable (a whole
 * program, e.g. every rank under mpiexec), else 0.
 */
function spinMicrosOf(option: unknown, op: string): number {
  const fromEnv = process.env.NETDIRECT_SPIN_MICROS;
  if (option === undefined && fromEnv !== undefined && fromEnv !== '' && !/^\d+$/.test(fromEnv)) {
    throw misuse(ERR_ND_INVALID_ARGUMENT, op, `NETDIRECT_SPIN_MICROS must be a whole number of microseconds, got ${describe(fromEnv)}`);
  }
  const value = option ?? (fromEnv === undefined || fromEnv === '' ? 0 : Number(fromEnv));
  const where = option === undefined ? 'NETDIRECT_SPIN_MICROS' : 'spinMicros';
  const n = checkIndex(value, where, op);
  if (n > 1_000_000) throw misuse(ERR_ND_OUT_OF_RANGE, op, `${where} must be at most 1000000, got ${n}`);
  return n;
}

/** openAdapter() without an address: which local address to open. */
export interface AdapterSelection extends AdapterOptions {
  /**
   * The peer the adapter is for (an address or a host name): the local address the operating system routes to it
   * is opened, as rdma_resolve_addr picks a source address. Without it: the first address the provider serves
   * that is not loopback or link-local (listAddresses()), else loopback.
   */
  peer?: string;
}

/**
 * Opens the adapter that serves `address` (a local IPv4/IPv6 address, or a name that resolves to one); without
 * an address, the adapter for `options.peer` (the local address that routes to it) or this host's first one.
 *
 * @param address - a local address ('127.0.0.1', '::1', '[fe80::1%2]') or a host name resolving to one;
 *   listAddresses() lists them. The software provider also serves every other address of 127.0.0.0/8
 *   ('127.0.0.2', ...: the host itself, not listed), so several endpoints on one host can each have their own.
 *   A peer's address is not a local one: pass `{ peer }` instead to open the adapter that reaches it.
 * @param options - provider, completion mode ('auto', 'loop', 'thread', 'manual'; else the NETDIRECT_COMPLETION
 *   environment variable), spinMicros (µs, 0..1000000; else the NETDIRECT_SPIN_MICROS environment variable),
 *   sharedMemory (same-host connections through shared memory; else the NETDIRECT_SHM environment variable);
 *   without an address also `peer`.
 * @returns the open adapter; close it (or `await using`) when done.
 * @throws {@link NdError} ERR_ND_INVALID_ARGUMENT for a non-string address, an unknown option or a wrong option
 *   value; ERR_ND_OUT_OF_RANGE for spinMicros above 1000000; ND_INVALID_ADDRESS when a name does not resolve,
 *   when no route leads to `peer`, or when none of the provider's adapters serves the address (the message lists
 *   the ones that do); ND_NOT_SUPPORTED for an unknown provider, or completion 'loop' with a provider that
 *   cannot be driven from the event loop.
 * @example
 * ```ts
 * import { openAdapter } from 'netdirect';
 * await using adapter = await openAdapter('127.0.0.1', { completion: 'auto' });
 * console.log(adapter.provider, adapter.completion, adapter.info.maxTransferLength);
 * await using toPeer = await openAdapter({ peer: '127.0.0.1' }); // the local address that routes to the peer
 * console.log(toPeer.address);
 * ```
 */
export async function openAdapter(options?: AdapterSelection): Promise<Adapter>;
export async function openAdapter(address: string, options?: AdapterOptions): Promise<Adapter>;
export async function openAdapter(addressOrOptions?: string | AdapterSelection, maybeOptions?: AdapterOptions): Promise<Adapter> {
  const op = 'openAdapter';
  try {
    let address: string;
    let options: AdapterOptions;
    if (typeof addressOrOptions === 'string') {
      if (addressOrOptions.length === 0) throw misuse(ERR_ND_INVALID_ARGUMENT, op, 'address must be a local IP address string, got an empty string');
      address = addressOrOptions;
      options = maybeOptions === undefined ? {} : maybeOptions;
      checkOptions(options, op, ADAPTER_KEYS);
    } else if (addressOrOptions === undefined || (typeof addressOrOptions === 'object' && addressOrOptions !== null && maybeOptions === undefined)) {
      const { peer, ...rest } = addressOrOptions ?? {};
      options = rest;
      checkOptions(options, op, ADAPTER_KEYS);
      if (peer !== undefined && (typeof peer !== 'string' || peer.length === 0)) {
        throw misuse(ERR_ND_INVALID_ARGUMENT, op, `peer must be the peer's address or host name, got ${describe(peer)}`);
      }
      address = peer !== undefined ? await localAddressFor(peer, op) : firstLocalAddress(providerOf(options.provider, op), op);
    } else {
      throw misuse(ERR_ND_INVALID_ARGUMENT, op, `address must be a local IP address string (or pass { peer } alone), got ${describe(addressOrOptions)}`);
    }
    const provider = providerOf(options.provider, op);
    checkBuilt(provider, op);
    const completion = completionOf(options.completion, op);
    const spinMicros = spinMicrosOf(options.spinMicros, op);
    const sharedMemory: unknown = options.sharedMemory;
    if (sharedMemory !== undefined && typeof sharedMemory !== 'boolean') {
      throw misuse(ERR_ND_INVALID_ARGUMENT, op, `sharedMemory must be a boolean, got ${describe(sharedMemory)}`);
    }
    let host = address.startsWith('[') && address.endsWith(']') ? address.slice(1, -1) : address;
    if (isIP(host) === 0) {
      checkNoPort(address, op);
      try {
        host = (await lookup(host)).address;
      } catch (err) {
        throw new NdError('ND_INVALID_ADDRESS', 0xc0000141, op, `${op}: cannot resolve ${JSON.stringify(address)}: ${(err as Error).message}`, { cause: err });
      }
    }
    let adapter: Adapter;
    try {
      adapter = new Adapter(nativeBinding(), host, provider, completion, spinMicros);
    } catch (err) {
      throw notLocalHint(err, host, provider);
    }
    if (sharedMemory !== undefined) adapter._native.sharedMemory(sharedMemory);
    return adapter;
  } catch (err) {
    throw callerStack(asNdError(err, op));
  }
}

/** What to install for the verbs provider, by distribution family (docs/verbs.md). */
export const VERBS_BUILD_PACKAGES = 'Debian/Ubuntu: apt-get install libibverbs-dev librdmacm-dev; Fedora/RHEL: dnf install rdma-core-devel';

/**
 * 'verbs' asked for on Linux where this build has no verbs provider: the addon was compiled without rdma-core's
 * headers, and installing runtime packages cannot add it. Said before the native layer's generic refusal.
 */
function checkBuilt(provider: string, op: string): void {
  if (provider !== 'verbs' || process.platform !== 'linux') return;
  if (nativeBinding().builtProviders.includes('verbs')) return;
  throw new NdError(
    'ND_NOT_SUPPORTED',
    0xc00000bb,
    op,
    `${op}: this build of netdirect has no 'verbs' provider: rdma-core's headers were not found when the addon was compiled ` +
      `(${VERBS_BUILD_PACKAGES}), then rebuild it: npm rebuild netdirect --build-from-source. Installing runtime packages ` +
      "(rdma-core, ibverbs-providers) alone does not add it. `netdirect doctor` shows what this machine has.",
  );
}

/**
 * An adapter is named by an address alone; "192.0.2.2:18515" (what a listener prints) is no host name (a DNS name has
 * no colon), so it is refused before any lookup: the resolvers disagree on it (Windows' getaddrinfo takes
 * "[::1]:18515" as ::1, glibc's refuses it), and their errors would not say the port belongs to connect().
 */
function checkNoPort(address: string, op: string): void {
  const m = /^(\[[^\]]*\]|[^:]+):(\d+)$/.exec(address);
  if (m === null) return;
  const host = m[1].startsWith('[') ? m[1].slice(1, -1) : m[1];
  throw new NdError('ND_INVALID_ADDRESS', 0xc0000141, op,
    `${op}: ${JSON.stringify(address)} looks like "host:port": give the address alone (${JSON.stringify(host)}) and the port to connect()`);
}

/** The local address the kernel would send from to reach `peer` (a connected UDP socket sends nothing). */
async function localAddressFor(peer: string, op: string): Promise<string> {
  let host = peer.startsWith('[') && peer.endsWith(']') ? peer.slice(1, -1) : peer;
  let family = isIP(host);
  if (family === 0) {
    checkNoPort(peer, op);
    try {
      ({ address: host, family } = await lookup(host));
    } catch (err) {
      throw new NdError('ND_INVALID_ADDRESS', 0xc0000141, op, `${op}: cannot resolve the peer ${JSON.stringify(peer)}: ${(err as Error).message}`, { cause: err });
    }
  }
  const socket = createSocket(family === 6 ? 'udp6' : 'udp4');
  try {
    await new Promise<void>((resolve, reject) => {
      socket.once('error', reject);
      socket.connect(9, host, () => resolve());
    });
    return socket.address().address;
  } catch (err) {
    throw new NdError('ND_INVALID_ADDRESS', 0xc0000141, op, `${op}: no route from this host to the peer ${JSON.stringify(peer)}: ${(err as Error).message}`, { cause: err });
  } finally {
    socket.close();
  }
}

/** This host's first address the provider serves, preferring one that other hosts can reach. */
function firstLocalAddress(provider: string, op: string): string {
  const all = nativeBinding().listAddresses(provider);
  const reachable = (a: string) => !/^(127\.|::1$|fe80:)/i.test(a);
  const pick = all.find((a) => reachable(a) && isIP(a) === 4) ?? all.find(reachable) ?? all[0];
  if (pick === undefined) throw new NdError('ND_INVALID_ADDRESS', 0xc0000141, op, `${op}: the provider ${JSON.stringify(provider)} serves no address on this host (listAddresses() is empty)`);
  return pick;
}

/**
 * ND_INVALID_ADDRESS for an address no adapter serves usually means a peer's address was passed: say which
 * addresses are local and how to pick the one that reaches the peer.
 */
function notLocalHint(err: unknown, host: string, provider: string): unknown {
  if (!(err instanceof NdError) || err.code !== 'ND_INVALID_ADDRESS') return err;
  let local: string[] = [];
  try {
    local = nativeBinding().listAddresses(provider);
  } catch {
    return err;
  }
  if (local.includes(host)) return err;
  err.message +=
    `: ${host} is not an address of this host (it serves ${local.join(', ') || 'none'}). To reach a peer at ${host}, ` +
    `open the local adapter that routes to it: openAdapter({ peer: '${host}' }), or openAdapter() for this host's first address`;
  return err;
}

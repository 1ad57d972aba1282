// Discovery: listProviders (the built-in software provider and, on Windows, the ND v2 providers of the Winsock
// catalog), listAddresses (NdQueryAddressList) and openAdapter (NdOpenAdapter).

import { isIP } from 'node:net';
import { lookup } from 'node:dns/promises';
import { binding as loaded } from './binding.js';
import type { NativeBinding } from './native.js';
import { ERR_ND_INVALID_ARGUMENT, ERR_ND_OUT_OF_RANGE, NdError, asNdError, callerStack, errorFactory, misuse } from './errors.js';
import { Adapter, type AdapterOptions, type CompletionOption } from './adapter.js';
import { checkIndex, checkOptions, describe } from './validate.js';

export interface ProviderInfo {
  name: string;
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

/** The addon's version string. */
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
const ADAPTER_KEYS = ['provider', 'completion', 'spinMicros'] as const;

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

/** Opens the adapter that serves `address` (a local IPv4/IPv6 address, or a name that resolves to one). */
export async function openAdapter(address: string, options: AdapterOptions = {}): Promise<Adapter> {
  const op = 'openAdapter';
  try {
    if (typeof address !== 'string' || address.length === 0) {
      throw misuse(ERR_ND_INVALID_ARGUMENT, op, `address must be a local IP address string, got ${describe(address)}`);
    }
    checkOptions(options, op, ADAPTER_KEYS);
    const provider = providerOf(options.provider, op);
    const completion = completionOf(options.completion, op);
    const spinMicros = options.spinMicros === undefined ? 0 : checkIndex(options.spinMicros, 'spinMicros', op);
    if (spinMicros > 1_000_000) throw misuse(ERR_ND_OUT_OF_RANGE, op, `spinMicros must be at most 1000000, got ${spinMicros}`);
    let host = address.startsWith('[') && address.endsWith(']') ? address.slice(1, -1) : address;
    if (isIP(host) === 0) {
      try {
        host = (await lookup(host)).address;
      } catch (err) {
        throw new NdError('ND_INVALID_ADDRESS', 0xc0000141, op, `${op}: cannot resolve ${JSON.stringify(address)}: ${(err as Error).message}`, { cause: err });
      }
    }
    return new Adapter(nativeBinding(), host, provider, completion, spinMicros);
  } catch (err) {
    throw callerStack(asNdError(err, op));
  }
}

#!/usr/bin/env node
// The `netdirect` command: `netdirect list` (providers and their addresses) and `netdirect info <address>`
// (the adapter's ND2_ADAPTER_INFO, decoded), `netdirect ping` (rping-compatible, lib/ping.ts) and
// `netdirect doctor` (setup checks, lib/doctor/).

import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import * as path from 'node:path';
import { binding, packageRoot } from './binding.js';
import { listAddresses, listProviders, openAdapter } from './discovery.js';
import { NdError, hex32 } from './errors.js';
import type { AdapterInfo } from './adapter.js';
import { ping, PingUsageError, PING_USAGE } from './ping.js';
import { formatDoctorReport, gatherDoctorFacts, reportOf, type DoctorFacts } from './doctor/index.js';

const USAGE = `usage: netdirect <command>
  list                 providers (name, kind, GUID, DLL path) and the addresses each serves
  job-secret           a fresh job secret (32 random bytes in hex) for NETDIRECT_JOB_SECRET: what the ranks of a
                       job under the rendezvous prove they hold (docs/job.md "Membership")
  info <address>       the ND2_ADAPTER_INFO of the adapter that serves <address>, decoded
                       options: --provider <name|dll path>   --json
  doctor [--json | --facts] [--peer <host>]... [--from <facts.json>]
                       setup checks, each failure with the command that fixes it. Windows: ND v2 provider in the
                       Winsock catalog, NetworkDirect and NetworkDirectAcrossIPSubnets, firewall rule for UDP 3935,
                       RDMA per adapter, SR-IOV/VMQ on a vSwitch, Hyper-V guest RDMA, SMB "RDMA Capable".
                       Elsewhere: the software provider, addresses, CRC32c, a loopback RDMA Write self-test,
                       RDMA devices and siw/rxe modules.
                       --json: { platform, checks: [{ id, title, status, detail, fix? }], summary }
                       --peer <host>: a host you will connect to (a blocked NetworkDirectAcrossIPSubnets then fails
                       when it is on another subnet); --facts: print the gathered facts as JSON (for bug reports);
                       --from <facts.json>: diagnose saved facts instead of this machine
                       exit code: 0 no check failed (ok/warn/skip only), 1 a check failed, 2 usage error
  provider list | install [--dll <path>] | uninstall
                       Windows: netdirect's software provider (netdirect_soft.dll, beside the addon unless --dll)
                       in the Winsock catalog as an ND v2 provider (WSCInstallProvider64_32, as vendor installers
                       do), so ND applications (MS-MPI, the SDK's tools) find it; install and uninstall need an
                       Administrator and read the catalog back. list: the catalog's ND v2 providers.
  ping -s|-c ...       rping-compatible ping (rdma-core rping's protocol), both roles: netdirect ping -h
  --version, -V        the version of netdirect`;

const FLAG_NAMES: Array<[keyof AdapterInfo['adapterFlags'], string]> = [
  ['inOrderDma', 'ND_ADAPTER_FLAG_IN_ORDER_DMA_SUPPORTED'],
  ['cqInterruptModeration', 'ND_ADAPTER_FLAG_CQ_INTERRUPT_MODERATION_SUPPORTED'],
  ['multiEngine', 'ND_ADAPTER_FLAG_MULTI_ENGINE_SUPPORTED'],
  ['cqResize', 'ND_ADAPTER_FLAG_CQ_RESIZE_SUPPORTED'],
  ['loopbackConnections', 'ND_ADAPTER_FLAG_LOOPBACK_CONNECTIONS_SUPPORTED'],
];
const KNOWN_FLAGS = 0x1 | 0x4 | 0x8 | 0x100 | 0x10000;

function option(args: string[], name: string): string | undefined {
  const i = args.indexOf(name);
  if (i < 0) return undefined;
  const value = args[i + 1];
  if (value === undefined || value.startsWith('--')) throw new UsageError(`${name} needs a value`);
  args.splice(i, 2);
  return value;
}

class UsageError extends Error {}

function packageVersion(): string {
  return String(JSON.parse(readFileSync(`${packageRoot()}/package.json`, 'utf8')).version);
}

async function list(): Promise<void> {
  for (const p of listProviders()) {
    console.log(`${p.name} (${p.kind}, ND version ${hex32(p.ndVersion)})`);
    if (p.guid) console.log(`  guid:      ${p.guid}`);
    if (p.path) console.log(`  path:      ${p.path}`);
    let addresses: string[];
    try {
      addresses = await listAddresses({ provider: p.path ?? p.name });
    } catch (err) {
      console.log(`  addresses: error: ${(err as Error).message}`);
      continue;
    }
    console.log(`  addresses: ${addresses.length === 0 ? '(none)' : addresses.join(', ')}`);
  }
}

function formatValue(value: number | bigint): string {
  return typeof value === 'bigint' ? `${value} (0x${value.toString(16)})` : String(value);
}

async function info(args: string[]): Promise<void> {
  const json = args.includes('--json');
  const rest = args.filter((a) => a !== '--json');
  const provider = option(rest, '--provider');
  const unknown = rest.find((a) => a.startsWith('-'));
  if (unknown !== undefined) throw new UsageError(`info: unknown option ${JSON.stringify(unknown)} (info takes --provider <name> and --json)`);
  const address = rest[0];
  if (address === undefined || rest.length > 1) throw new UsageError('info needs exactly one <address>');
  const adapter = await openAdapter(address, { provider });
  try {
    const i = adapter.info;
    if (json) {
      console.log(JSON.stringify({ address: adapter.address, provider: adapter.provider, info: i }, (_k, v) => (typeof v === 'bigint' ? v.toString() : v), 2));
      return;
    }
    console.log(`adapter ${adapter.address} (provider ${adapter.provider})`);
    const width = 28;
    for (const [key, value] of Object.entries(i)) {
      if (key === 'adapterFlags') continue;
      let text = formatValue(value as number | bigint);
      if (key === 'infoVersion') text = hex32(value as number);
      if (key === 'vendorId' || key === 'deviceId') text = `0x${(value as number).toString(16).padStart(4, '0')}`;
      if (key === 'adapterId') text = `0x${(value as bigint).toString(16).padStart(16, '0')}`;
      console.log(`  ${key.padEnd(width)}${text}`);
    }
    const flags = i.adapterFlags;
    console.log(`  ${'adapterFlags'.padEnd(width)}${hex32(flags.value)}`);
    for (const [key, name] of FLAG_NAMES) console.log(`    ${flags[key] ? '[x]' : '[ ]'} ${name}`);
    const unknown = flags.value & ~KNOWN_FLAGS;
    if (unknown !== 0) console.log(`    [x] unknown bits ${hex32(unknown)}`);
  } finally {
    await adapter.close();
  }
}

/** {6E657464-6972-6563-7473-6F6674000000}: netdirect's software provider (binding/soft/provider.h). */
const SOFT_PROVIDER_GUID = '{6E657464-6972-6563-7473-6F6674000000}';

function softDllPath(): string {
  const addon = process.env.NETDIRECT_ADDON_PATH || (require('node-gyp-build') as { resolve(dir: string): string }).resolve(packageRoot());
  return path.join(path.dirname(addon), 'netdirect_soft.dll');
}

function providerCommand(args: string[]): number {
  const [sub, ...rest] = args;
  switch (sub) {
    case 'list': {
      if (rest.length > 0) throw new UsageError(`provider list takes no arguments, got ${rest.map((a) => JSON.stringify(a)).join(' ')}`);
      const system = listProviders().filter((p) => p.kind === 'system');
      if (system.length === 0) console.log('no ND v2 provider in the Winsock catalog');
      for (const p of system) {
        const ours = p.guid?.toUpperCase() === SOFT_PROVIDER_GUID ? '  (netdirect software provider)' : '';
        console.log(`${p.name}  ${p.guid ?? ''}  ${p.path ?? ''}${ours}`);
      }
      return 0;
    }
    case 'install': {
      const dll = option(rest, '--dll') ?? softDllPath();
      if (rest.length > 0) throw new UsageError(`provider install: unknown argument ${JSON.stringify(rest[0])}`);
      const how = binding.catalogInstall(path.resolve(dll)) as string;
      console.log(`netdirect provider install: ${path.resolve(dll)} ${SOFT_PROVIDER_GUID}: ${how}`);
      return 0;
    }
    case 'uninstall': {
      if (rest.length > 0) throw new UsageError(`provider uninstall takes no arguments, got ${rest.map((a) => JSON.stringify(a)).join(' ')}`);
      const how = binding.catalogUninstall() as string;
      console.log(`netdirect provider uninstall: ${SOFT_PROVIDER_GUID}: ${how}`);
      return 0;
    }
    default:
      throw new UsageError(sub === undefined ? 'provider needs list, install or uninstall' : `provider: unknown subcommand ${JSON.stringify(sub)}`);
  }
}

async function doctorCommand(args: string[]): Promise<number> {
  const rest = [...args];
  const peers: string[] = [];
  for (let peer = option(rest, '--peer'); peer !== undefined; peer = option(rest, '--peer')) peers.push(peer);
  const from = option(rest, '--from');
  const flags = new Set(rest);
  for (const a of flags) if (a !== '--json' && a !== '--facts') throw new UsageError(`doctor: unknown argument ${JSON.stringify(a)}`);
  let facts: DoctorFacts;
  if (from !== undefined) {
    try {
      facts = JSON.parse(readFileSync(from, 'utf8')) as DoctorFacts;
    } catch (err) {
      throw new UsageError(`doctor: cannot read facts from ${from}: ${(err as Error).message}`);
    }
    if (typeof facts !== 'object' || facts === null || typeof facts.platform !== 'string') {
      throw new UsageError(`doctor: ${from} is not a facts file (netdirect doctor --facts writes one)`);
    }
  } else {
    facts = await gatherDoctorFacts({ peers });
  }
  if (flags.has('--facts')) {
    console.log(JSON.stringify(facts, null, 2));
    return 0;
  }
  const report = reportOf(facts);
  console.log(flags.has('--json') ? JSON.stringify(report, null, 2) : formatDoctorReport(report, facts));
  return report.summary.fail > 0 ? 1 : 0;
}

export async function main(argv: string[]): Promise<number> {
  const [command, ...args] = argv;
  try {
    switch (command) {
      case 'list':
        if (args.length > 0) throw new UsageError(`list takes no arguments, got ${args.map((a) => JSON.stringify(a)).join(' ')}`);
        await list();
        return 0;
      case 'job-secret':
        if (args.length > 0) throw new UsageError(`job-secret takes no arguments, got ${args.map((a) => JSON.stringify(a)).join(' ')}`);
        console.log(randomBytes(32).toString('hex'));
        return 0;
      case '--version':
      case '-V':
      case 'version':
        console.log(`netdirect ${packageVersion()}`);
        return 0;
      case 'info':
        await info(args);
        return 0;
      case 'doctor':
        return await doctorCommand(args);
      case 'provider':
        return providerCommand(args);
      case 'ping':
        if (args.includes('-h') || args.includes('--help')) {
          console.log(PING_USAGE);
          return 0;
        }
        try {
          return await ping(args);
        } catch (err) {
          if (err instanceof PingUsageError) {
            console.error(`netdirect ping: ${err.message}\n${PING_USAGE}`);
            return 2;
          }
          throw err;
        }
      case undefined:
      case '-h':
      case '--help':
      case 'help':
        console.log(USAGE);
        return command === undefined ? 2 : 0;
      default:
        throw new UsageError(`unknown command ${JSON.stringify(command)}`);
    }
  } catch (err) {
    if (err instanceof UsageError) {
      console.error(`netdirect: ${err.message}\n${USAGE}`);
      return 2;
    }
    if (err instanceof NdError) {
      console.error(`netdirect: ${err.message} [${err.code}]`);
      return 1;
    }
    throw err;
  }
}

if (require.main === module) {
  main(process.argv.slice(2)).then(
    (code) => {
      process.exitCode = code;
    },
    (err) => {
      console.error(err);
      process.exitCode = 1;
    },
  );
}

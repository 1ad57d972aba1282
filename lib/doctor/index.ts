// `netdirect doctor`: setup checks with the exact fix for each failure (issue #4).
//
// Gathering and diagnosis are separate: gatherDoctorFacts() reads the machine (the Winsock catalog through
// listProviders(), one PowerShell run for the Windows networking cmdlets, or the software provider, a loopback
// self-test and /sys on other platforms) into plain JSON; diagnose(facts) is a pure function from those facts
// to checks. Tests feed diagnose() recorded facts (test/fixtures/doctor/*.json); `netdirect doctor --facts`
// prints the facts of a real machine in that same shape.
//
// The report (`netdirect doctor --json`, doctor()) is stable:
//   { platform: string,                       // process.platform: 'win32', 'linux', ...
//     checks: [{ id: string,                  // stable id, e.g. 'nd-provider', 'firewall-iwarp', 'self-test'
//                title: string,               // one line, for people
//                status: 'ok' | 'warn' | 'fail' | 'skip',   // skip: not applicable, or could not run (detail says which)
//                detail: string,              // what was found; lines separated by '\n'
//                fix?: string }],             // commands that fix it (Windows: PowerShell, as Administrator);
//                                             // lines starting with '#' are guidance, not commands
//     summary: { ok: number, warn: number, fail: number, skip: number } }
// The CLI exits 1 when summary.fail > 0, else 0.

import { execFile, type ChildProcess } from 'node:child_process';
import { existsSync, readdirSync, readFileSync, readlinkSync } from 'node:fs';
import { lookup } from 'node:dns/promises';
import { isIP } from 'node:net';
import * as os from 'node:os';
import * as path from 'node:path';
import { listAddresses, listProviders, nativeBinding, nativeVersion, openAdapter, type ProviderInfo } from '../discovery.js';
import { NdError } from '../errors.js';
import { decodeRemote, encodeRemote } from '../memory-region.js';
import { checkOptions } from '../validate.js';

export type CheckStatus = 'ok' | 'warn' | 'fail' | 'skip';

export interface DoctorCheck {
  id: string;
  title: string;
  status: CheckStatus;
  detail: string;
  fix?: string;
}

export interface DoctorReport {
  platform: string;
  checks: DoctorCheck[];
  summary: { ok: number; warn: number; fail: number; skip: number };
}

/** The keys doctor() accepts (strict option checking: validate.ts checkOptions). */
const DOCTOR_KEYS = ['peers', 'selfTest', 'selfTestTimeoutMs', 'powershell', 'powershellTimeoutMs', 'platform'] as const;

export interface DoctorOptions {
  /** Hosts this machine will connect to: a blocked NetworkDirectAcrossIPSubnets fails when one is on another subnet. */
  peers?: string[];
  /** Run the loopback RDMA Write self-test (platforms other than Windows). Default true. */
  selfTest?: boolean;
  /** Bound of the self-test, in milliseconds. Default 5000. */
  selfTestTimeoutMs?: number;
  /** The PowerShell executable (Windows). Default: %SystemRoot%\System32\WindowsPowerShell\v1.0\powershell.exe. */
  powershell?: string;
  /** Bound of the PowerShell run, in milliseconds. Default 60000. */
  powershellTimeoutMs?: number;
  /** @internal Gather as if on this platform (tests: the Windows path on Linux). */
  platform?: string;
}

export type SelfTestFact =
  | { ok: true; bytes: number; ms: number; port: number; /** the completion mode 'auto' chose (absent in older fact files) */ completion?: string }
  | { ok: false; error: string; code?: string };

export interface RdmaDeviceFact {
  name: string;
  driver?: string;
  nodeType?: string;
  parent?: string;
  /** Port 1's state (ports/1/state, e.g. "4: ACTIVE") and link layer ("InfiniBand" | "Ethernet"). */
  portState?: string;
  linkLayer?: string;
}

export interface PeerFact {
  host: string;
  address?: string;
  error?: string;
}

export interface LocalNetworkFact {
  interface: string;
  address: string;
  cidr: string;
  internal: boolean;
}

/** What gatherDoctorFacts() found; plain JSON. Fields absent on a platform are not gathered there. */
export interface DoctorFacts {
  platform: string;
  arch?: string;
  node?: string;
  addonVersion?: string;
  providers: ProviderInfo[] | { error: string };
  /** Windows: each system provider's DLL path → whether the file exists. */
  providerFiles?: Record<string, boolean>;
  env: { NETDIRECT_PROVIDER?: string; NETDIRECT_SOFT_CRC?: string };
  /** Windows: the JSON object printed by POWERSHELL_SCRIPT (a key per cmdlet, {error} where one failed), or why it could not run. */
  powershell?: Record<string, unknown>;
  peers?: PeerFact[];
  localNetworks?: LocalNetworkFact[];
  /** Other platforms: */
  addresses?: string[] | { error: string };
  hardwareCrc32c?: boolean;
  /** 'avx512-vpclmulqdq' | 'pclmulqdq' | 'sse4.2' | 'table' (absent from older addons and fact files). */
  crc32cImplementation?: string;
  selfTest?: SelfTestFact;
  rdmaDevices?: RdmaDeviceFact[] | { error: string };
  /** The verbs provider (docs/verbs.md): listed (rdma-core loads, a device exists) and the addresses it serves. */
  verbsProvider?: { listed: boolean; addresses: string[]; error?: string };
  kernelModules?: { siw: boolean; rdma_rxe: boolean };
}

// ---- gathering ---------------------------------------------------------------------------------------------

/**
 * One PowerShell run for every Windows cmdlet: prints NETDIRECT_DOCTOR_MARK, then one JSON object with a key per
 * fact; a cmdlet that fails gives {error: message} under its key. Each value is an array (ConvertTo-Json turns a
 * lone object into a bare object, so readers accept both). Enums are turned into their names with [string].
 */
export const POWERSHELL_SCRIPT = String.raw`
$ErrorActionPreference = 'Stop'
$ProgressPreference = 'SilentlyContinue'
try { [Console]::OutputEncoding = New-Object System.Text.UTF8Encoding $false } catch { }
$out = [ordered]@{ psVersion = "$($PSVersionTable.PSVersion)" }
function Get-Fact([string]$key, [scriptblock]$block) {
  try { $out[$key] = @(& $block) } catch { $out[$key] = [ordered]@{ error = "$($_.Exception.Message)" } }
}
Get-Fact 'computerSystem' { Get-CimInstance -ClassName Win32_ComputerSystem | Select-Object Manufacturer, Model, HypervisorPresent }
Get-Fact 'offload' { Get-NetOffloadGlobalSetting | Select-Object @{n='NetworkDirect';e={[string]$_.NetworkDirect}}, @{n='NetworkDirectAcrossIPSubnets';e={[string]$_.NetworkDirectAcrossIPSubnets}} }
Get-Fact 'netAdapters' { Get-NetAdapter | Select-Object Name, InterfaceDescription, ifIndex, @{n='Status';e={[string]$_.Status}} }
Get-Fact 'rdma' { Get-NetAdapterRdma | Select-Object Name, InterfaceDescription, Enabled }
Get-Fact 'advanced' { Get-NetAdapterAdvancedProperty -AllProperties -RegistryKeyword '*SRIOV','*VMQ','*NetworkDirect','*NetworkDirectTechnology','RdmaMaxVfsEnabled','RdmaVfEnabled' -ErrorAction SilentlyContinue | Select-Object Name, InterfaceDescription, DisplayName, DisplayValue, RegistryKeyword, RegistryValue }
Get-Fact 'firewallProfiles' { Get-NetFirewallProfile -PolicyStore ActiveStore | Select-Object Name, @{n='Enabled';e={[string]$_.Enabled}} }
Get-Fact 'firewallRules' {
  foreach ($f in @(Get-NetFirewallPortFilter -Protocol UDP -PolicyStore ActiveStore)) {
    $ports = @($f.LocalPort | ForEach-Object { "$_" })
    $hit = $false
    foreach ($p in $ports) {
      if ($p -eq '3935') { $hit = $true }
      elseif ($p -match '^(\d+)-(\d+)$' -and [int]$Matches[1] -le 3935 -and [int]$Matches[2] -ge 3935) { $hit = $true }
    }
    if ($hit) {
      $r = $f | Get-NetFirewallRule
      [pscustomobject]@{ Name = $r.Name; DisplayName = $r.DisplayName; Enabled = [string]$r.Enabled; Direction = [string]$r.Direction; Action = [string]$r.Action; Profile = [string]$r.Profile; Protocol = [string]$f.Protocol; LocalPort = $ports }
    }
  }
}
Get-Fact 'vmSwitches' { Get-VMSwitch | Select-Object Name, @{n='SwitchType';e={[string]$_.SwitchType}}, NetAdapterInterfaceDescription, NetAdapterInterfaceDescriptions, IovEnabled, EmbeddedTeamingEnabled }
Get-Fact 'smb' { Get-SmbServerNetworkInterface | Select-Object InterfaceIndex, ScopeName, IpAddress, FriendlyName, RdmaCapable, RssCapable, LinkSpeed }
Write-Output 'NETDIRECT-DOCTOR-JSON'
$out | ConvertTo-Json -Depth 5 -Compress
`;

const POWERSHELL_MARK = 'NETDIRECT-DOCTOR-JSON';

/** The JSON object of POWERSHELL_SCRIPT's output (after the mark; a UTF-8 BOM and other noise are skipped). */
export function parsePowerShellOutput(stdout: string): Record<string, unknown> {
  const text = stdout.replace(/^\uFEFF/, '');
  const mark = text.indexOf(POWERSHELL_MARK);
  const rest = mark >= 0 ? text.slice(mark + POWERSHELL_MARK.length) : text;
  const start = rest.indexOf('{');
  const end = rest.lastIndexOf('}');
  if (start < 0 || end < start) throw new Error('no JSON object in its output');
  const value = JSON.parse(rest.slice(start, end + 1)) as unknown;
  if (typeof value !== 'object' || value === null || Array.isArray(value)) throw new Error('its output is not a JSON object');
  return value as Record<string, unknown>;
}

function defaultPowerShell(): string {
  const root = process.env.SystemRoot ?? process.env.windir;
  if (root) {
    const full = path.win32.join(root, 'System32', 'WindowsPowerShell', 'v1.0', 'powershell.exe');
    if (existsSync(full)) return full;
  }
  return 'powershell.exe';
}

/** Runs POWERSHELL_SCRIPT; never throws: a PowerShell that is missing or fails gives { error }. */
export function runPowerShell(executable = defaultPowerShell(), timeoutMs = 60_000): Promise<Record<string, unknown>> {
  const encoded = Buffer.from(POWERSHELL_SCRIPT, 'utf16le').toString('base64');
  const args = ['-NoProfile', '-NonInteractive', '-ExecutionPolicy', 'Bypass', '-EncodedCommand', encoded];
  return new Promise((resolve) => {
    let child: ChildProcess | undefined;
    try {
      child = execFile(executable, args, { timeout: timeoutMs, maxBuffer: 16 * 1024 * 1024, windowsHide: true, encoding: 'utf8' }, (err, stdout, stderr) => {
        const code = child?.exitCode ?? (err as { code?: unknown } | null)?.code;
        if (err && (err as NodeJS.ErrnoException).code === 'ENOENT') {
          resolve({ error: `${executable} not found (${err.message})` });
          return;
        }
        if (err && (err as { killed?: boolean }).killed) {
          resolve({ error: `${executable} did not finish within ${timeoutMs} ms` });
          return;
        }
        try {
          resolve(parsePowerShellOutput(stdout));
        } catch (parseErr) {
          const said = `${stderr}`.trim().split(/\r?\n/).find((l) => l.trim() !== '' && !l.startsWith('#< CLIXML'));
          resolve({
            error:
              `${executable} exited with code ${String(code ?? 0)} without the expected JSON (${(parseErr as Error).message})` +
              (said ? `: ${said.trim()}` : '') +
              ' — is this a working Windows PowerShell? (Wine has only a stub)',
          });
        }
      });
      child.stdin?.end();
    } catch (err) {
      resolve({ error: `${executable} could not be started: ${(err as Error).message}` });
    }
  });
}

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

async function readVerbsProvider(): Promise<{ listed: boolean; addresses: string[]; error?: string }> {
  try {
    if (!listProviders().some((p) => p.name === 'verbs')) return { listed: false, addresses: [] };
    return { listed: true, addresses: await listAddresses({ provider: 'verbs' }) };
  } catch (err) {
    return { listed: false, addresses: [], error: (err as Error).message };
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
function dllPathOf(spec: string): string | undefined {
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

// ---- reading PowerShell's JSON -------------------------------------------------------------------------------

type Row = Record<string, unknown>;

function isError(v: unknown): v is { error: string } {
  return typeof v === 'object' && v !== null && !Array.isArray(v) && typeof (v as Row).error === 'string';
}

/** ConvertTo-Json gives a bare object for one result, an array for several, nothing for none. */
function rows(v: unknown): Row[] {
  if (Array.isArray(v)) return v.filter((x): x is Row => typeof x === 'object' && x !== null && !Array.isArray(x));
  if (typeof v === 'object' && v !== null) return [v as Row];
  return [];
}

function text(v: unknown): string | undefined {
  if (Array.isArray(v)) return v.length > 0 ? text(v[0]) : undefined;
  if (typeof v === 'string') return v;
  if (typeof v === 'number' || typeof v === 'boolean') return String(v);
  return undefined;
}

function texts(v: unknown): string[] {
  if (Array.isArray(v)) return v.map(text).filter((x): x is string => x !== undefined);
  const one = text(v);
  return one === undefined ? [] : [one];
}

/** An enum that ConvertTo-Json may give as its name or its number. */
function enumName(v: unknown, numbers: Record<number, string>): string | undefined {
  if (typeof v === 'number') return numbers[v]?.toLowerCase();
  if (typeof v === 'boolean') return v ? 'true' : 'false';
  const s = text(v);
  if (s === undefined) return undefined;
  if (/^\d+$/.test(s.trim())) return numbers[Number(s)]?.toLowerCase();
  return s.trim().toLowerCase();
}

// Values of the CIM enums, for output recorded without [string] (MSFT_NetOffloadGlobalSetting,
// MSFT_NetFirewallRule / CIM_PolicyRule, MSFT_NetFirewallProfile's GpoBoolean, Hyper-V's VMSwitchType).
const ENABLED_DISABLED = { 0: 'Disabled', 1: 'Enabled' };
const ALLOWED_BLOCKED = { 0: 'Blocked', 1: 'Allowed' };
const RULE_ENABLED = { 1: 'True', 2: 'False' };
const RULE_DIRECTION = { 1: 'Inbound', 2: 'Outbound' };
const RULE_ACTION = { 0: 'NotConfigured', 2: 'Allow', 3: 'AllowBypass', 4: 'Block' };
const GPO_BOOLEAN = { 0: 'False', 1: 'True', 2: 'NotConfigured' };
const SWITCH_TYPE = { 0: 'Private', 1: 'Internal', 2: 'External' };
// Microsoft's standardized *NetworkDirectTechnology keyword.
const ND_TECHNOLOGY: Record<string, string> = { '1': 'iWARP', '2': 'InfiniBand', '3': 'RoCE', '4': 'RoCEv2' };

function truthy(v: unknown): boolean | undefined {
  if (typeof v === 'boolean') return v;
  const s = enumName(v, { 0: 'False', 1: 'True' });
  if (s === 'true' || s === 'enabled') return true;
  if (s === 'false' || s === 'disabled') return false;
  return undefined;
}

/** PowerShell quoting for a value in a fix command: double quotes unless it holds $, ` or ". */
export function psQuote(value: string): string {
  if (!/[$`"\u201C\u201D]/.test(value)) return `"${value}"`;
  return `'${value.replace(/'/g, "''")}'`;
}

// ---- diagnosis ---------------------------------------------------------------------------------------------

const SEVERITY: Record<CheckStatus, number> = { skip: 0, ok: 1, warn: 2, fail: 3 };

/** Per-item findings of one check, folded into one status (the worst), one detail and one fix. */
class Findings {
  status: CheckStatus = 'skip';
  readonly lines: string[] = [];
  readonly fixes: string[] = [];

  add(status: CheckStatus, line: string, ...fix: string[]): this {
    if (SEVERITY[status] > SEVERITY[this.status]) this.status = status;
    this.lines.push(line);
    for (const f of fix) if (!this.fixes.includes(f)) this.fixes.push(f);
    return this;
  }

  check(id: string, title: string): DoctorCheck {
    const c: DoctorCheck = { id, title, status: this.status, detail: this.lines.join('\n') };
    if (this.fixes.length > 0) c.fix = this.fixes.join('\n');
    return c;
  }
}

function check(id: string, title: string, status: CheckStatus, detail: string, fix?: string): DoctorCheck {
  const c: DoctorCheck = { id, title, status, detail };
  if (fix !== undefined) c.fix = fix;
  return c;
}

const ADMIN_HINT = /access (is )?denied|administrator|elevat|0x80041003|permission/i;

/** The facts one check needs, or the reason it could not run. */
function psFact(facts: DoctorFacts, key: string, cmdlet: string): { rows: Row[] } | { reason: string } {
  const ps = facts.powershell;
  if (ps === undefined) return { reason: 'PowerShell was not run' };
  if (isError(ps)) return { reason: `PowerShell unavailable: ${ps.error}` };
  const v = ps[key];
  if (v === undefined) return { reason: `${cmdlet} gave no result` };
  if (isError(v)) return { reason: `${cmdlet}: ${v.error}${ADMIN_HINT.test(v.error) ? ' (run the terminal as Administrator)' : ''}` };
  return { rows: rows(v) };
}

const couldNotRun = (id: string, title: string, reason: string): DoctorCheck => check(id, title, 'skip', `could not run: ${reason}`);

interface AdapterView {
  name: string;
  description?: string;
  ifIndex?: number;
  status?: string;
}

function netAdapters(facts: DoctorFacts): AdapterView[] {
  const f = psFact(facts, 'netAdapters', 'Get-NetAdapter');
  if (!('rows' in f)) return [];
  return f.rows
    .map((r) => ({ name: text(r.Name) ?? '', description: text(r.InterfaceDescription), ifIndex: Number(text(r.ifIndex ?? r.InterfaceIndex)), status: text(r.Status) }))
    .filter((a) => a.name !== '');
}

interface RdmaView {
  name: string;
  description?: string;
  enabled: boolean | undefined;
}

function rdmaAdapters(facts: DoctorFacts): RdmaView[] | { reason: string } {
  const f = psFact(facts, 'rdma', 'Get-NetAdapterRdma');
  if (!('rows' in f)) return f;
  return f.rows
    .map((r) => ({ name: text(r.Name) ?? '', description: text(r.InterfaceDescription), enabled: truthy(r.Enabled) }))
    .filter((a) => a.name !== '');
}

/** Advanced property value (RegistryValue, a string array in the cmdlet's output) of one adapter, by keyword. */
function advanced(facts: DoctorFacts, adapter: string, keyword: string): string | undefined {
  const f = psFact(facts, 'advanced', 'Get-NetAdapterAdvancedProperty');
  if (!('rows' in f)) return undefined;
  const row = f.rows.find((r) => text(r.Name) === adapter && text(r.RegistryKeyword)?.toLowerCase() === keyword.toLowerCase());
  return row === undefined ? undefined : text(row.RegistryValue)?.trim();
}

function providerChecks(facts: DoctorFacts): DoctorCheck[] {
  const title = 'ND v2 provider in the Winsock catalog';
  if (!Array.isArray(facts.providers)) {
    return [check('nd-provider', title, 'fail', `listProviders() failed: ${facts.providers.error}`)];
  }
  const system = facts.providers.filter((p) => p.kind === 'system');
  const override = facts.env.NETDIRECT_PROVIDER;
  const out: DoctorCheck[] = [];
  if (system.length === 0) {
    const detail = [
      'No ND v2 provider is registered in the Winsock catalog, so no user-mode NetworkDirect application (netdirect,',
      'MS-MPI, ...) can use the RDMA adapters: the user-mode provider of the Intel Ethernet driver package (i40wb.dll)',
      'is not installed. User-mode ND is an optional feature of the Intel driver install; NDK (kernel-mode RDMA, used',
      'by SMB Direct) is part of the base driver, so Get-NetAdapterRdma can look fine without it.',
    ];
    if (override) detail.push(`NETDIRECT_PROVIDER=${override}: netdirect's 'auto' loads that DLL directly instead of the catalog.`);
    const fix = [
      '# Re-run the Intel Ethernet driver package installer (Autorun.exe, or DxSetup.exe from the package),',
      '# choose to modify/install features and select the user-mode RDMA feature, which Intel calls the',
      '# "Intel(R) Ethernet User Mode RDMA Provider"; the installer also offers the firewall rule for the',
      '# iWARP port mapper (UDP 3935). For an unattended install, see the DxSetup.exe documentation of your',
      '# driver package for the property that selects that feature.',
      '# Then check: netdirect list   (a provider of kind "system" with its DLL path)',
      "# Until then netdirect can load a provider DLL by path: openAdapter(address, { provider: '<dll path>' }) or",
      "# NETDIRECT_PROVIDER=<dll path>; provider: 'soft' is netdirect's built-in software iWARP provider.",
    ];
    out.push(check('nd-provider', title, 'fail', detail.join('\n'), fix.join('\n')));
    out.push(check('nd-provider-dll', 'ND v2 provider DLL present', 'skip', 'no catalog provider to check'));
  } else {
    out.push(
      check(
        'nd-provider',
        title,
        'ok',
        system.map((p) => `${p.name}${p.guid ? ` ${p.guid}` : ''}: ${p.path ?? '(no DLL path)'}`).join('\n'),
      ),
    );
    const files = new Findings();
    for (const p of system) {
      if (!p.path) {
        files.add('fail', `${p.name}: the catalog entry has no DLL path`, '# Repair the Intel Ethernet driver package install (its user-mode RDMA feature) so the provider is registered again');
      } else if (facts.providerFiles?.[p.path] === false) {
        files.add(
          'fail',
          `${p.name}: ${p.path} does not exist (the catalog entry outlived its DLL)`,
          '# Repair or re-install the user-mode RDMA feature of the Intel Ethernet driver package (re-run its installer, select the user-mode RDMA provider)',
        );
      } else if (facts.providerFiles?.[p.path] === true) {
        files.add('ok', `${p.name}: ${p.path} exists`);
      } else {
        files.add('skip', `${p.name}: ${p.path} was not checked`);
      }
    }
    out.push(files.check('nd-provider-dll', 'ND v2 provider DLL present'));
  }
  if (override !== undefined && override !== 'auto') {
    const bare = dllPathOf(override);
    if (bare !== undefined && facts.providerFiles?.[bare] === false) {
      out.push(
        check(
          'provider-override',
          'NETDIRECT_PROVIDER',
          'fail',
          `NETDIRECT_PROVIDER=${override}, but ${bare} does not exist: 'auto' fails`,
          'Remove-Item Env:NETDIRECT_PROVIDER   # or set it to the provider DLL path',
        ),
      );
    } else {
      out.push(check('provider-override', 'NETDIRECT_PROVIDER', 'ok', `NETDIRECT_PROVIDER=${override}: 'auto' uses this provider instead of the catalog's`));
    }
  }
  return out;
}

function networkDirectChecks(facts: DoctorFacts): DoctorCheck[] {
  const ndTitle = 'NetworkDirect enabled (Get-NetOffloadGlobalSetting)';
  const subnetTitle = 'NetworkDirect across IP subnets';
  const f = psFact(facts, 'offload', 'Get-NetOffloadGlobalSetting');
  if (!('rows' in f)) return [couldNotRun('network-direct', ndTitle, f.reason), couldNotRun('nd-across-subnets', subnetTitle, f.reason)];
  const row = f.rows[0] ?? {};
  const out: DoctorCheck[] = [];
  const nd = enumName(row.NetworkDirect, ENABLED_DISABLED);
  if (nd === 'enabled') out.push(check('network-direct', ndTitle, 'ok', 'NetworkDirect: Enabled'));
  else if (nd === 'disabled') {
    out.push(
      check('network-direct', ndTitle, 'fail', 'NetworkDirect: Disabled — Windows refuses ND (RDMA) connections on every adapter', 'Set-NetOffloadGlobalSetting -NetworkDirect Enabled'),
    );
  } else out.push(check('network-direct', ndTitle, 'warn', `NetworkDirect: unrecognised value ${JSON.stringify(row.NetworkDirect)}`));

  const across = enumName(row.NetworkDirectAcrossIPSubnets, ALLOWED_BLOCKED);
  const fix = 'Set-NetOffloadGlobalSetting -NetworkDirectAcrossIPSubnets Allowed';
  const offSubnet: string[] = [];
  const unresolved: string[] = [];
  for (const p of facts.peers ?? []) {
    if (p.address === undefined) unresolved.push(`${p.host} (${p.error ?? 'unresolved'})`);
    else if (!onLocalSubnet(p.address, facts.localNetworks ?? [])) offSubnet.push(p.host === p.address ? p.host : `${p.host} (${p.address})`);
  }
  const notes: string[] = [];
  if (offSubnet.length > 0) notes.push(`peers on another subnet: ${offSubnet.join(', ')}`);
  if (unresolved.length > 0) notes.push(`peers not resolved: ${unresolved.join(', ')}`);
  if (across === 'allowed') {
    out.push(check('nd-across-subnets', subnetTitle, 'ok', ['NetworkDirectAcrossIPSubnets: Allowed', ...notes].join('\n')));
  } else if (across === 'blocked') {
    if (offSubnet.length > 0) {
      out.push(
        check(
          'nd-across-subnets',
          subnetTitle,
          'fail',
          ['NetworkDirectAcrossIPSubnets: Blocked — ND connections to routed peers are refused', ...notes].join('\n'),
          fix,
        ),
      );
    } else {
      const scope = (facts.peers ?? []).length > 0 ? 'the given peers are on a local subnet' : 'fine while every peer is on a local subnet (give --peer <host> to check)';
      out.push(
        check('nd-across-subnets', subnetTitle, 'warn', [`NetworkDirectAcrossIPSubnets: Blocked — ND connections only within local IP subnets; ${scope}`, ...notes].join('\n'), fix),
      );
    }
  } else {
    out.push(check('nd-across-subnets', subnetTitle, 'warn', `NetworkDirectAcrossIPSubnets: unrecognised value ${JSON.stringify(row.NetworkDirectAcrossIPSubnets)}`));
  }
  return out;
}

/** Does a local (non-loopback) interface's subnet contain address? */
export function onLocalSubnet(address: string, networks: LocalNetworkFact[]): boolean {
  return networks.some((n) => !n.internal && inCidr(address, n.cidr));
}

function toBigInt(address: string): { value: bigint; bits: number } | undefined {
  const family = isIP(address);
  if (family === 4) return { value: address.split('.').reduce((acc, part) => (acc << 8n) | BigInt(Number(part)), 0n), bits: 32 };
  if (family !== 6) return undefined;
  let a = address.split('%')[0];
  const v4 = /(\d+\.\d+\.\d+\.\d+)$/.exec(a);
  if (v4) {
    const n = toBigInt(v4[1])!.value;
    a = a.slice(0, -v4[1].length) + `${(n >> 16n).toString(16)}:${(n & 0xffffn).toString(16)}`;
  }
  const [head, tail] = a.includes('::') ? a.split('::') : [a, undefined];
  const h = head ? head.split(':') : [];
  const t = tail ? tail.split(':') : [];
  const groups = tail === undefined ? h : [...h, ...Array(8 - h.length - t.length).fill('0'), ...t];
  return { value: groups.reduce((acc, g) => (acc << 16n) | BigInt(parseInt(g || '0', 16)), 0n), bits: 128 };
}

export function inCidr(address: string, cidr: string): boolean {
  const [base, prefixText] = cidr.split('/');
  const a = toBigInt(address);
  const b = toBigInt(base);
  const prefix = Number(prefixText);
  if (!a || !b || a.bits !== b.bits || !Number.isInteger(prefix)) return false;
  const shift = BigInt(a.bits - prefix);
  return a.value >> shift === b.value >> shift;
}

function firewallCheck(facts: DoctorFacts): DoctorCheck {
  const id = 'firewall-iwarp';
  const title = 'Firewall allows the iWARP port mapper (inbound UDP 3935)';
  const create = 'New-NetFirewallRule -DisplayName "iWARP Port Mapper" -Direction Inbound -Protocol UDP -LocalPort 3935 -Action Allow';
  const profiles = psFact(facts, 'firewallProfiles', 'Get-NetFirewallProfile');
  if ('rows' in profiles && profiles.rows.length > 0 && profiles.rows.every((r) => enumName(r.Enabled, GPO_BOOLEAN) === 'false')) {
    return check(id, title, 'ok', 'Windows Firewall is off in every profile: it blocks nothing (a third-party firewall still might)');
  }
  const f = psFact(facts, 'firewallRules', 'Get-NetFirewallRule/Get-NetFirewallPortFilter');
  if (!('rows' in f)) return couldNotRun(id, title, f.reason);
  const rules = f.rows.filter((r) => {
    const protocol = text(r.Protocol)?.toUpperCase();
    return (protocol === undefined || protocol === 'UDP' || protocol === '17') && texts(r.LocalPort).some((p) => portMatches(p, 3935));
  });
  const inbound = rules.filter((r) => enumName(r.Direction, RULE_DIRECTION) === 'inbound');
  const enabled = (r: Row) => enumName(r.Enabled, RULE_ENABLED) === 'true';
  const action = (r: Row) => enumName(r.Action, RULE_ACTION);
  const label = (r: Row) => `"${text(r.DisplayName) ?? text(r.Name) ?? '?'}"`;
  const blocking = inbound.filter((r) => enabled(r) && action(r) === 'block');
  if (blocking.length > 0) {
    return check(
      id,
      title,
      'fail',
      `inbound UDP 3935 is blocked by ${blocking.map(label).join(', ')} (a block rule wins over allow rules)`,
      blocking.map((r) => `Disable-NetFirewallRule -Name ${psQuote(text(r.Name) ?? '')}`).join('\n'),
    );
  }
  const allowing = inbound.filter((r) => action(r) === 'allow' || action(r) === 'allowbypass');
  const active = allowing.filter(enabled);
  if (active.length > 0) return check(id, title, 'ok', `allowed by ${active.map(label).join(', ')}`);
  if (allowing.length > 0) {
    return check(
      id,
      title,
      'fail',
      `the rule ${allowing.map(label).join(', ')} allows inbound UDP 3935 but is disabled`,
      allowing.map((r) => `Enable-NetFirewallRule -Name ${psQuote(text(r.Name) ?? '')}`).join('\n'),
    );
  }
  return check(
    id,
    title,
    'fail',
    'no enabled firewall rule allows inbound UDP 3935, which iWARP connection setup needs (the iWARP port mapper). ' +
      "The Intel installer offers to add this rule when Windows Firewall is on; with the firewall off at install time it must be added by hand.",
    create,
  );
}

function portMatches(spec: string, port: number): boolean {
  const s = spec.trim();
  if (s === String(port)) return true;
  const range = /^(\d+)-(\d+)$/.exec(s);
  return range !== null && Number(range[1]) <= port && port <= Number(range[2]);
}

function adapterRdmaCheck(facts: DoctorFacts): DoctorCheck {
  const id = 'adapter-rdma';
  const title = 'RDMA enabled on the adapters (Get-NetAdapterRdma)';
  const rdma = rdmaAdapters(facts);
  if (!Array.isArray(rdma)) return couldNotRun(id, title, rdma.reason);
  if (rdma.length === 0) {
    return check(
      id,
      title,
      'fail',
      'no adapter reports RDMA: no RDMA-capable adapter (Intel X722 / E810 are), or its driver is not the Intel driver with RDMA support',
      '# Install the current Intel Ethernet driver package for the adapter (NDK, kernel-mode RDMA, is part of its base driver), then: Get-NetAdapterRdma',
    );
  }
  const status = new Map(netAdapters(facts).map((a) => [a.name, a.status]));
  const found = new Findings();
  for (const a of rdma) {
    const what = `${a.name}${a.description ? ` (${a.description})` : ''}`;
    const technology = advanced(facts, a.name, '*NetworkDirectTechnology');
    const tech = technology !== undefined && ND_TECHNOLOGY[technology] ? `, NetworkDirect technology ${ND_TECHNOLOGY[technology]}` : '';
    if (a.enabled === true) {
      found.add('ok', `${what}: RDMA enabled${tech}`);
      if (technology === '3' || technology === '4') {
        found.add(
          'warn',
          `${what}: runs ${ND_TECHNOLOGY[technology]}, which iWARP peers (netdirect's software provider, Linux siw) do not speak`,
          `Set-NetAdapterAdvancedProperty -Name ${psQuote(a.name)} -RegistryKeyword "*NetworkDirectTechnology" -RegistryValue 1   # iWARP`,
        );
      }
    } else if (a.enabled === undefined) {
      found.add('warn', `${what}: RDMA state not reported`);
    } else {
      const up = status.get(a.name);
      const down = up !== undefined && up.toLowerCase() !== 'up';
      found.add(down ? 'warn' : 'fail', `${what}: RDMA disabled${down ? ` (adapter ${up})` : ''}`, `Enable-NetAdapterRdma -Name ${psQuote(a.name)}`);
    }
  }
  return found.check(id, title);
}

function vswitchCheck(facts: DoctorFacts): DoctorCheck {
  const id = 'vswitch-sriov-vmq';
  const title = 'SR-IOV and VMQ on RDMA adapters bound to a Hyper-V vSwitch';
  const f = psFact(facts, 'vmSwitches', 'Get-VMSwitch');
  if (!('rows' in f)) {
    if (/^Get-VMSwitch: .*(not recognized|not recognised|CommandNotFound)/i.test(f.reason)) {
      return check(id, title, 'skip', 'Hyper-V is not installed (no Get-VMSwitch): no vSwitch to check');
    }
    return couldNotRun(id, title, f.reason);
  }
  const external = f.rows.filter((s) => enumName(s.SwitchType, SWITCH_TYPE) === 'external');
  if (external.length === 0) return check(id, title, 'skip', f.rows.length === 0 ? 'no Hyper-V vSwitch' : 'no external vSwitch (none is bound to a physical adapter)');
  const rdma = rdmaAdapters(facts);
  const rdmaList = Array.isArray(rdma) ? rdma : [];
  const adapters = netAdapters(facts);
  const found = new Findings();
  for (const s of external) {
    const switchName = text(s.Name) ?? '?';
    const descriptions = [...new Set([...texts(s.NetAdapterInterfaceDescriptions), ...texts(s.NetAdapterInterfaceDescription)])];
    for (const description of descriptions) {
      const name = adapters.find((a) => a.description === description)?.name ?? rdmaList.find((a) => a.description === description)?.name;
      const isRdma = rdmaList.some((a) => a.description === description || (name !== undefined && a.name === name));
      if (!isRdma || name === undefined) {
        found.add('skip', `vSwitch "${switchName}" → ${name ?? description}: not an RDMA adapter`);
        continue;
      }
      const missing: string[] = [];
      const absent: string[] = [];
      for (const keyword of ['*SRIOV', '*VMQ']) {
        const value = advanced(facts, name, keyword);
        if (value === undefined) absent.push(keyword);
        else if (value !== '1') missing.push(keyword);
      }
      const extras: string[] = [];
      if (s.IovEnabled !== undefined && truthy(s.IovEnabled) === false) extras.push('the vSwitch was created without SR-IOV (IovEnabled False; only New-VMSwitch -EnableIov $true sets it)');
      const maxVfs = advanced(facts, name, 'RdmaMaxVfsEnabled');
      if (maxVfs !== undefined) extras.push(`RdmaMaxVfsEnabled ${maxVfs}${maxVfs === '0' ? ' (no RDMA VFs for guests)' : ''}`);
      const tail = extras.length > 0 ? `; ${extras.join('; ')}` : '';
      if (missing.length > 0) {
        found.add(
          'fail',
          `vSwitch "${switchName}" → ${name}: ${missing.join(' and ')} disabled${tail}`,
          ...missing.map((k) => `Set-NetAdapterAdvancedProperty -Name ${psQuote(name)} -RegistryKeyword "${k}" -RegistryValue 1`),
        );
      } else if (absent.length > 0) {
        found.add('warn', `vSwitch "${switchName}" → ${name}: the adapter has no ${absent.join('/')} property (not SR-IOV/VMQ capable, or hidden by the driver)${tail}`);
      } else {
        found.add('ok', `vSwitch "${switchName}" → ${name}: *SRIOV and *VMQ enabled${tail}`);
      }
    }
    if (descriptions.length === 0) found.add('skip', `vSwitch "${switchName}": no bound adapter reported`);
  }
  return found.check(id, title);
}

function hypervGuestCheck(facts: DoctorFacts): DoctorCheck {
  const id = 'hyperv-guest-rdma';
  const title = 'RDMA inside a Hyper-V guest';
  const f = psFact(facts, 'computerSystem', 'Get-CimInstance Win32_ComputerSystem');
  if (!('rows' in f)) return couldNotRun(id, title, f.reason);
  const cs = f.rows[0] ?? {};
  const manufacturer = text(cs.Manufacturer) ?? '';
  const model = text(cs.Model) ?? '';
  if (!(/^Microsoft Corporation$/i.test(manufacturer.trim()) && /^Virtual Machine$/i.test(model.trim()))) {
    return check(id, title, 'skip', `not a Hyper-V guest (${[manufacturer, model].filter(Boolean).join(' / ') || 'unknown model'})`);
  }
  const rdma = rdmaAdapters(facts);
  if (!Array.isArray(rdma)) return couldNotRun(id, title, rdma.reason);
  const host = [
    '# On the Hyper-V host (not in this VM), as Administrator — guest RDMA is NDK mode 3 (RDMA on the VM\'s SR-IOV VF):',
    'Set-NetAdapterAdvancedProperty -Name "<host adapter>" -RegistryKeyword "RdmaMaxVfsEnabled" -RegistryValue <number of VFs with RDMA>',
    'Set-VMNetworkAdapter -VMName "<this VM>" -IovWeight 100',
    'Set-VMNetworkAdapterRdma -VMName "<this VM>" -RdmaWeight 100',
    '# (the host adapter needs *SRIOV enabled and an SR-IOV vSwitch; see the vswitch-sriov-vmq check on the host)',
  ];
  const found = new Findings();
  const adapterNames = new Set<string>();
  const advancedRows = psFact(facts, 'advanced', 'Get-NetAdapterAdvancedProperty');
  if ('rows' in advancedRows) for (const r of advancedRows.rows) if (text(r.Name)) adapterNames.add(text(r.Name)!);
  for (const name of adapterNames) {
    const vf = advanced(facts, name, 'RdmaVfEnabled');
    if (vf === '0') {
      found.add('fail', `${name}: RdmaVfEnabled 0 (RDMA off on this VF)`, `Set-NetAdapterAdvancedProperty -Name ${psQuote(name)} -RegistryKeyword "RdmaVfEnabled" -RegistryValue 1`);
    } else if (vf !== undefined) {
      found.add('ok', `${name}: RdmaVfEnabled ${vf}`);
    }
  }
  const enabled = rdma.filter((a) => a.enabled === true);
  if (enabled.length > 0) {
    found.add('ok', `Hyper-V guest; RDMA enabled on ${enabled.map((a) => a.name).join(', ')}`);
  } else if (rdma.length > 0) {
    found.add('fail', `Hyper-V guest; RDMA is disabled on ${rdma.map((a) => a.name).join(', ')}`, ...rdma.map((a) => `Enable-NetAdapterRdma -Name ${psQuote(a.name)}`));
  } else {
    found.add('fail', 'Hyper-V guest without an RDMA adapter: the VM has no RDMA-capable virtual function', ...host);
  }
  if (found.status === 'fail' && !found.fixes.includes(host[0])) found.fixes.push(...host);
  return found.check(id, title);
}

function smbCheck(facts: DoctorFacts): DoctorCheck {
  const id = 'smb-rdma-capable';
  const title = 'SMB sees the adapters as "RDMA Capable" (Get-SmbServerNetworkInterface)';
  const f = psFact(facts, 'smb', 'Get-SmbServerNetworkInterface');
  if (!('rows' in f)) return couldNotRun(id, title, f.reason);
  const rdma = rdmaAdapters(facts);
  const rdmaList = Array.isArray(rdma) ? rdma : [];
  const adapters = netAdapters(facts);
  const byIndex = new Map<number, { capable: boolean; name: string; addresses: string[] }>();
  for (const r of f.rows) {
    const index = Number(text(r.InterfaceIndex));
    const name = adapters.find((a) => a.ifIndex === index)?.name ?? text(r.FriendlyName) ?? `interface ${index}`;
    const entry = byIndex.get(index) ?? { capable: false, name, addresses: [] };
    entry.capable ||= truthy(r.RdmaCapable) === true;
    const ip = text(r.IpAddress);
    if (ip && !entry.addresses.includes(ip)) entry.addresses.push(ip);
    byIndex.set(index, entry);
  }
  if (byIndex.size === 0) return check(id, title, 'skip', 'the SMB server reports no network interface (is the Server service running?)');
  const found = new Findings();
  for (const e of byIndex.values()) {
    const what = `${e.name}${e.addresses.length ? ` (${e.addresses.join(', ')})` : ''}`;
    const r = rdmaList.find((a) => a.name === e.name);
    if (e.capable) found.add('ok', `${what}: RDMA Capable`);
    else if (r?.enabled === false) found.add('fail', `${what}: not RDMA Capable — RDMA is disabled on the adapter`, `Enable-NetAdapterRdma -Name ${psQuote(e.name)}`);
    else if (r?.enabled === true) {
      found.add(
        'fail',
        `${what}: not RDMA Capable although RDMA is enabled — NDK (kernel RDMA) is not running on it`,
        `Restart-NetAdapter -Name ${psQuote(e.name)}   # the link drops for a moment`,
        'Update-SmbMultichannelConnection',
        '# Still False: update the Intel Ethernet driver (NDK is part of its base driver) and check Get-NetAdapterRdma | Format-List *',
      );
    }
  }
  if (found.status === 'skip') {
    found.add(
      'fail',
      `no SMB server interface is RDMA Capable (${[...byIndex.values()].map((e) => e.name).join(', ')})`,
      '# Enable RDMA on the RDMA adapter (see the adapter-rdma check), then: Update-SmbMultichannelConnection',
    );
  }
  return found.check(id, title);
}

function windowsChecks(facts: DoctorFacts): DoctorCheck[] {
  return [
    ...providerChecks(facts),
    ...networkDirectChecks(facts),
    firewallCheck(facts),
    adapterRdmaCheck(facts),
    vswitchCheck(facts),
    hypervGuestCheck(facts),
    smbCheck(facts),
  ];
}

function isLoopback(address: string): boolean {
  return address === '::1' || address.startsWith('127.');
}

function otherChecks(facts: DoctorFacts): DoctorCheck[] {
  const out: DoctorCheck[] = [];
  const providerTitle = 'Software iWARP provider (built in)';
  if (!Array.isArray(facts.providers)) out.push(check('soft-provider', providerTitle, 'fail', `listProviders() failed: ${facts.providers.error}`));
  else {
    const soft = facts.providers.find((p) => p.kind === 'builtin');
    const about = soft && [`${soft.name}${soft.guid ? ` ${soft.guid}` : ''}`, `ND version 0x${soft.ndVersion.toString(16).padStart(8, '0')}`];
    if (about && facts.addonVersion) about.push(`addon ${facts.addonVersion}`);
    out.push(
      about
        ? check('soft-provider', providerTitle, 'ok', about.join(', '))
        : check('soft-provider', providerTitle, 'fail', "listProviders() lists no built-in provider: the addon is not netdirect's own build"),
    );
  }

  const addressesTitle = 'Local addresses served (listAddresses)';
  if (facts.addresses === undefined) out.push(check('addresses', addressesTitle, 'skip', 'not gathered'));
  else if (!Array.isArray(facts.addresses)) out.push(check('addresses', addressesTitle, 'fail', `listAddresses() failed: ${facts.addresses.error}`));
  else if (facts.addresses.length === 0) out.push(check('addresses', addressesTitle, 'fail', 'no local address: the machine has no IPv4/IPv6 address up'));
  else if (facts.addresses.every(isLoopback)) {
    out.push(check('addresses', addressesTitle, 'warn', `${facts.addresses.join(', ')} — loopback only: peers on other hosts cannot reach this machine`));
  } else out.push(check('addresses', addressesTitle, 'ok', facts.addresses.join(', ')));

  const selfTitle = 'Self-test: RDMA Write over 127.0.0.1 (listener + connector in this process)';
  const t = facts.selfTest;
  if (t === undefined) out.push(check('self-test', selfTitle, 'skip', 'not run'));
  else if (t.ok) {
    const how = t.completion === undefined ? '' : `; completions: ${t.completion === 'loop' ? 'on the event loop (no thread hop)' : `'${t.completion}'`}`;
    out.push(check('self-test', selfTitle, 'ok', `${t.bytes}-byte RDMA Write placed and verified, then a Send, in ${t.ms} ms (port ${t.port}${how})`));
  }
  else {
    out.push(
      check(
        'self-test',
        selfTitle,
        'fail',
        `${t.error}`,
        facts.platform === 'linux'
          ? '# Check that 127.0.0.1 is up (ip addr show lo) and that local TCP connections are allowed (iptables/nftables rules on lo)'
          : '# Check that 127.0.0.1 is up and that local TCP connections are allowed',
      ),
    );
  }

  const crcTitle = 'CRC32c (MPA CRC of the software provider)';
  if (facts.hardwareCrc32c === true) {
    const how: Record<string, string> = {
      'avx512-vpclmulqdq': 'AVX-512 VPCLMULQDQ folding with crc32 chains (tens of GB/s per core)',
      pclmulqdq: 'PCLMULQDQ folding with crc32 chains',
      'sse4.2': 'the crc32 instruction (SSE4.2)',
    };
    const impl = facts.crc32cImplementation;
    out.push(check('crc32c', crcTitle, 'ok', `hardware: ${(impl && how[impl]) ?? 'the CPU\'s crc32 instruction'}`));
  }
  else if (facts.hardwareCrc32c === false) {
    out.push(check('crc32c', crcTitle, 'warn', 'software (table-driven): MPA CRC costs CPU at high bandwidth; NETDIRECT_SOFT_CRC=0 stops requesting it (a peer may still require it)'));
  } else out.push(check('crc32c', crcTitle, 'skip', 'unknown (the addon did not say)'));

  const crcEnv = facts.env.NETDIRECT_SOFT_CRC;
  out.push(
    check(
      'soft-crc-env',
      'NETDIRECT_SOFT_CRC',
      'ok',
      crcEnv === undefined
        ? 'not set: the software provider requests MPA CRC (default)'
        : crcEnv === '0'
          ? 'NETDIRECT_SOFT_CRC=0: the software provider does not request MPA CRC (it is still on when the peer asks for it)'
          : `NETDIRECT_SOFT_CRC=${crcEnv}: the software provider requests MPA CRC`,
    ),
  );

  const devicesTitle = 'RDMA devices (/sys/class/infiniband)';
  const d = facts.rdmaDevices;
  if (d === undefined) out.push(check('rdma-devices', devicesTitle, 'skip', `not gathered on ${facts.platform}`));
  else if (!Array.isArray(d)) out.push(check('rdma-devices', devicesTitle, 'skip', `could not run: ${d.error}`));
  else if (d.length === 0) {
    out.push(check('rdma-devices', devicesTitle, 'ok', "none — not needed: netdirect's built-in provider runs iWARP over ordinary TCP sockets"));
  } else {
    const v = facts.verbsProvider;
    const lines = d.map((x) => {
      const kind = x.driver ?? (/^siw/.test(x.name) ? 'siw (by name)' : /^rxe/.test(x.name) ? 'rxe (by name)' : 'driver unknown');
      const state = x.portState ? x.portState.replace(/^\d+:\s*/, '').toLowerCase() : 'state unknown';
      const usable = !v?.listed
        ? 'not usable: the verbs provider is not available (rdma-core missing?)'
        : state === 'active'
          ? "usable: openAdapter(address) opens it for an address it serves (or pin { provider: 'verbs' })"
          : 'not usable: port 1 is not active';
      return `${x.name}: ${kind}, ${rdmaTransport(x)}, port 1 ${state}${x.parent ? `, on ${x.parent}` : ''} — ${usable}`;
    });
    const tail = v?.listed
      ? `verbs provider addresses: ${v.addresses.length > 0 ? v.addresses.join(', ') : 'none (no IP address is bound to a device)'}`
      : `verbs provider not listed${v?.error ? ` (${v.error})` : ''}: install rdma-core (apt install libibverbs1 librdmacm1 ibverbs-providers); netdirect's software provider works without it`;
    out.push(check('rdma-devices', devicesTitle, 'ok', [...lines, tail].join('\n')));
  }

  const modulesTitle = 'Kernel soft-RDMA modules (siw, rdma_rxe)';
  const m = facts.kernelModules;
  if (m === undefined) out.push(check('kernel-soft-rdma', modulesTitle, 'skip', `not gathered on ${facts.platform}`));
  else {
    const loaded = [m.siw ? 'siw' : '', m.rdma_rxe ? 'rdma_rxe' : ''].filter(Boolean);
    out.push(
      check(
        'kernel-soft-rdma',
        modulesTitle,
        'ok',
        loaded.length === 0
          ? "neither loaded — not needed by netdirect; a kernel siw is an iWARP peer you can interop with (modprobe siw; rdma link add siw0 type siw netdev <if>)"
          : `${loaded.join(', ')} loaded${m.siw ? ' — kernel siw is an iWARP peer netdirect interoperates with (rping, perftest over siw)' : ''}${
              !m.siw && m.rdma_rxe ? ' — rxe is RoCEv2, not iWARP: netdirect does not talk to it' : ''
            }`,
      ),
    );
  }
  return out;
}

/**
 * The checks for a set of facts. Pure: same facts, same checks.
 *
 * @param facts - what was gathered on a machine (for instance the JSON `netdirect doctor --facts` saved there).
 * @returns one check per condition looked at, with its status, detail and, for a failure, the fix.
 */
export function diagnose(facts: DoctorFacts): DoctorCheck[] {
  return facts.platform === 'win32' ? windowsChecks(facts) : otherChecks(facts);
}

export function summarize(checks: DoctorCheck[]): DoctorReport['summary'] {
  const summary = { ok: 0, warn: 0, fail: 0, skip: 0 };
  for (const c of checks) summary[c.status]++;
  return summary;
}

/**
 * Gathers the facts of this machine and diagnoses them: what `netdirect doctor` prints. Failures to gather
 * (no PowerShell, a self-test that does not complete) become checks, not exceptions.
 *
 * @param options - peers (hosts to connect to), selfTest (default true) and selfTestTimeoutMs (ms, default 5000),
 *   powershell and powershellTimeoutMs (ms, default 60000) on Windows.
 * @returns the checks and a summary of their statuses.
 * @throws {@link NdError} ERR_ND_INVALID_ARGUMENT for an unknown option.
 * @example
 * ```ts
 * import { doctor } from 'netdirect';
 * const report = await doctor({ selfTest: true });
 * for (const c of report.checks) if (c.status === 'fail') console.log(c.title, c.detail, c.fix);
 * console.log(report.summary);
 * ```
 */
export async function doctor(options: DoctorOptions = {}): Promise<DoctorReport> {
  checkOptions(options, 'doctor', DOCTOR_KEYS);
  const facts = await gatherDoctorFacts(options);
  return reportOf(facts);
}

export function reportOf(facts: DoctorFacts): DoctorReport {
  const checks = diagnose(facts);
  return { platform: facts.platform, checks, summary: summarize(checks) };
}

// ---- text output -------------------------------------------------------------------------------------------

const MARK: Record<CheckStatus, string> = { ok: '[ ok ]', warn: '[warn]', fail: '[FAIL]', skip: '[skip]' };

/** The report for people: a status mark per check, details indented, the fix under each failure, a summary line. */
export function formatDoctorReport(report: DoctorReport, facts?: Pick<DoctorFacts, 'arch' | 'node' | 'addonVersion'>): string {
  const lines: string[] = [];
  const about = [report.platform, facts?.arch, facts?.node && `node ${facts.node}`, facts?.addonVersion && `addon ${facts.addonVersion}`].filter(Boolean);
  lines.push(`netdirect doctor (${about.join(', ')})`, '');
  const pad = '       ';
  let previous = '';
  for (const c of report.checks) {
    lines.push(`${MARK[c.status]} ${c.title}`);
    // One PowerShell failure skips several checks: its reason is printed once.
    const repeated = c.detail === previous && c.detail.startsWith('could not run: ');
    previous = c.detail;
    if (repeated) lines.push(`${pad}could not run: as above`);
    else for (const l of c.detail.split('\n')) if (l !== '') lines.push(pad + l);
    if (c.fix && c.status !== 'ok' && c.status !== 'skip') {
      const guidanceOnly = c.fix.split('\n').every((l) => l.startsWith('#'));
      lines.push(`${pad}${guidanceOnly ? 'what to do' : report.platform === 'win32' ? 'fix (PowerShell, as Administrator)' : 'fix'}:`);
      for (const l of c.fix.split('\n')) lines.push(`${pad}  ${l}`);
    }
  }
  const s = report.summary;
  lines.push('', `summary: ${s.ok} ok, ${s.warn} warn, ${s.fail} fail, ${s.skip} skip — ${s.fail > 0 ? 'run the fixes above, then netdirect doctor again' : 'no check failed'}`);
  return lines.join('\n');
}

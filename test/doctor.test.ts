// `netdirect doctor` (lib/doctor/): diagnose() on recorded facts (test/fixtures/doctor/*.json), the report's
// JSON shape, the PowerShell runner's failure paths, and the real run of the CLI (dist/cjs/cli.js, built by
// `npm test`'s pretest) on this machine.
import { spawnSync } from 'node:child_process';
import { readFileSync, readdirSync } from 'node:fs';
import * as path from 'node:path';
import { describe, expect, it } from 'vitest';
import {
  diagnose,
  formatDoctorReport,
  gatherDoctorFacts,
  inCidr,
  parsePowerShellOutput,
  psQuote,
  reportOf,
  runPowerShell,
  runSelfTest,
  type CheckStatus,
  type DoctorCheck,
  type DoctorFacts,
} from '../lib/doctor';
import { fixtures, root } from './helpers';

const FIXTURES = path.join(fixtures, 'doctor');
const load = (name: string): DoctorFacts => JSON.parse(readFileSync(path.join(FIXTURES, `${name}.json`), 'utf8')) as DoctorFacts;
const statuses = (checks: DoctorCheck[]) => Object.fromEntries(checks.map((c) => [c.id, c.status]));
const byId = (checks: DoctorCheck[], id: string): DoctorCheck => {
  const c = checks.find((x) => x.id === id);
  if (!c) throw new Error(`no check ${id} in ${checks.map((x) => x.id).join(', ')}`);
  return c;
};
const failing = (checks: DoctorCheck[]) => checks.filter((c) => c.status === 'fail').map((c) => c.id);
/** A fixture with its PowerShell facts changed by edit (a deep copy: fixtures stay as recorded). */
const variant = (name: string, edit: (ps: Record<string, any>, facts: DoctorFacts) => void): DoctorFacts => {
  const facts = load(name);
  edit(facts.powershell as Record<string, any>, facts);
  return facts;
};

const cli = (...args: string[]) =>
  spawnSync(process.execPath, [path.join(root, 'dist', 'cjs', 'cli.js'), ...args], { cwd: root, encoding: 'utf8', timeout: 90_000 });

const WINDOWS_IDS = [
  'nd-provider',
  'nd-provider-dll',
  'network-direct',
  'nd-across-subnets',
  'firewall-iwarp',
  'adapter-rdma',
  'vswitch-sriov-vmq',
  'hyperv-guest-rdma',
  'smb-rdma-capable',
];
const POWERSHELL_IDS = WINDOWS_IDS.filter((id) => !id.startsWith('nd-provider'));
const OTHER_IDS = ['soft-provider', 'addresses', 'self-test', 'crc32c', 'soft-crc-env', 'verbs-provider', 'rdma-devices', 'kernel-soft-rdma'];
const STATUSES: CheckStatus[] = ['ok', 'warn', 'fail', 'skip'];

describe('diagnose() on Windows facts', () => {
  it('every fixture is a facts file of a Windows machine', () => {
    const names = readdirSync(FIXTURES).filter((f) => f.endsWith('.json'));
    expect(names.length).toBeGreaterThanOrEqual(11);
    for (const n of names) expect(load(n.replace(/\.json$/, '')).platform, n).toBe('win32');
  });

  it('a healthy host: every check ok (not a guest: that one is skipped)', () => {
    const checks = diagnose(load('healthy'));
    expect(checks.map((c) => c.id)).toEqual(WINDOWS_IDS);
    expect(statuses(checks)).toEqual({ ...Object.fromEntries(WINDOWS_IDS.map((id) => [id, 'ok'])), 'hyperv-guest-rdma': 'skip' });
    expect(byId(checks, 'nd-provider').detail).toContain('C:\\Windows\\system32\\i40wb.dll');
    expect(byId(checks, 'firewall-iwarp').detail).toContain('"iWARP Port Mapper"');
    expect(byId(checks, 'vswitch-sriov-vmq').detail).toContain('SLOT 4 Port 2: *SRIOV and *VMQ enabled');
    expect(byId(checks, 'smb-rdma-capable').detail).toMatch(/SLOT 4 Port 1 .*RDMA Capable/);
    expect(checks.every((c) => c.fix === undefined)).toBe(true);
  });

  it('numeric enums and bare (unwrapped) values read the same as their names', () => {
    expect(statuses(diagnose(load('numeric-enums')))).toEqual(statuses(diagnose(load('healthy'))));
  });

  const broken: Array<[string, string[], string[]]> = [
    ['no-nd-provider', ['nd-provider'], ['User Mode RDMA Provider', "provider: '<dll path>'", 'NETDIRECT_PROVIDER=<dll path>']],
    ['rdma-disabled', ['adapter-rdma', 'smb-rdma-capable'], ['Enable-NetAdapterRdma -Name "SLOT 4 Port 1"']],
    ['firewall-missing', ['firewall-iwarp'], ['New-NetFirewallRule -DisplayName "iWARP Port Mapper" -Direction Inbound -Protocol UDP -LocalPort 3935 -Action Allow']],
    ['networkdirect-disabled', ['network-direct'], ['Set-NetOffloadGlobalSetting -NetworkDirect Enabled']],
    ['across-subnets-blocked', ['nd-across-subnets'], ['Set-NetOffloadGlobalSetting -NetworkDirectAcrossIPSubnets Allowed']],
    [
      'vswitch-no-sriov-vmq',
      ['vswitch-sriov-vmq'],
      [
        'Set-NetAdapterAdvancedProperty -Name "SLOT 4 Port 2" -RegistryKeyword "*SRIOV" -RegistryValue 1',
        'Set-NetAdapterAdvancedProperty -Name "SLOT 4 Port 2" -RegistryKeyword "*VMQ" -RegistryValue 1',
      ],
    ],
    [
      'hyperv-guest-no-rdmavf',
      ['adapter-rdma', 'hyperv-guest-rdma', 'smb-rdma-capable'],
      [
        'Set-NetAdapterAdvancedProperty -Name "Ethernet 2" -RegistryKeyword "RdmaVfEnabled" -RegistryValue 1',
        'Enable-NetAdapterRdma -Name "Ethernet 2"',
        '-RegistryKeyword "RdmaMaxVfsEnabled"',
        'Set-VMNetworkAdapterRdma',
      ],
    ],
    ['smb-not-rdma-capable', ['smb-rdma-capable'], ['Restart-NetAdapter -Name "SLOT 4 Port 1"', 'Update-SmbMultichannelConnection']],
    ['powershell-unavailable', ['nd-provider'], ['User Mode RDMA Provider']],
  ];

  it.each(broken)('%s: exactly %j fail, and the fix names the adapter', (name, ids, fixes) => {
    const report = reportOf(load(name));
    expect(failing(report.checks)).toEqual(ids);
    expect(report.summary.fail).toBe(ids.length);
    const fixText = ids.map((id) => byId(report.checks, id).fix ?? '').join('\n');
    for (const f of fixes) expect(fixText).toContain(f);
    // The human report prints each failure's fix under it.
    const text = formatDoctorReport(report);
    for (const f of fixes) expect(text).toContain(f);
    expect(text).toMatch(new RegExp(`summary: \\d+ ok, \\d+ warn, ${ids.length} fail, \\d+ skip`));
  });

  it('no ND provider: explains the optional user-mode feature (NDK is in the base driver)', () => {
    const c = byId(diagnose(load('no-nd-provider')), 'nd-provider');
    expect(c.detail).toMatch(/optional feature of the Intel driver install/);
    expect(c.detail).toMatch(/NDK .* part of the base driver/s);
    expect(byId(diagnose(load('no-nd-provider')), 'nd-provider-dll').status).toBe('skip');
  });

  it('PowerShell unavailable (Wine): its checks could not run, the catalog check still ran, NETDIRECT_PROVIDER is reported', () => {
    const checks = diagnose(load('powershell-unavailable'));
    for (const id of POWERSHELL_IDS) {
      expect(byId(checks, id).status, id).toBe('skip');
      expect(byId(checks, id).detail, id).toMatch(/^could not run: PowerShell unavailable: .*powershell\.exe exited with code 0/);
    }
    expect(byId(checks, 'nd-provider').detail).toMatch(/NETDIRECT_PROVIDER=Z:\\.*netdirect_soft\.dll/);
    expect(byId(checks, 'provider-override')).toMatchObject({ status: 'ok' });
    // The text report gives the reason once.
    const text = formatDoctorReport(reportOf(load('powershell-unavailable')));
    expect(text.match(/PowerShell unavailable/g)).toHaveLength(1);
    expect(text.match(/could not run: as above/g)).toHaveLength(POWERSHELL_IDS.length - 1);
  });

  it('across subnets blocked: a warning without peers on other subnets, a failure with one', () => {
    const facts = load('across-subnets-blocked');
    const withPeer = byId(diagnose(facts), 'nd-across-subnets');
    expect(withPeer.detail).toContain('node31.cluster.example (192.168.30.31)');
    expect(withPeer.detail).not.toContain('node12');
    const sameSubnet = byId(diagnose({ ...facts, peers: [facts.peers![0]] }), 'nd-across-subnets');
    expect(sameSubnet).toMatchObject({ status: 'warn', fix: 'Set-NetOffloadGlobalSetting -NetworkDirectAcrossIPSubnets Allowed' });
    expect(byId(diagnose({ ...facts, peers: [] }), 'nd-across-subnets').status).toBe('warn');
    expect(byId(diagnose({ ...facts, peers: [{ host: 'nowhere.invalid', error: 'ENOTFOUND' }] }), 'nd-across-subnets')).toMatchObject({
      status: 'warn',
      detail: expect.stringContaining('peers not resolved: nowhere.invalid (ENOTFOUND)'),
    });
  });

  it('firewall: a disabled allow rule, a block rule, a port range, the firewall off', () => {
    const disabled = byId(diagnose(variant('healthy', (ps) => (ps.firewallRules.Enabled = 'False'))), 'firewall-iwarp');
    expect(disabled).toMatchObject({ status: 'fail', fix: 'Enable-NetFirewallRule -Name "iWARP-PortMapper-In"' });
    // Recorded without [string]: MSFT_NetFirewallRule.Enabled is 1 (True) / 2 (False).
    const disabledNumeric = byId(diagnose(variant('numeric-enums', (ps) => (ps.firewallRules[0].Enabled = 2))), 'firewall-iwarp');
    expect(disabledNumeric).toMatchObject({ status: 'fail', fix: 'Enable-NetFirewallRule -Name "iWARP-PortMapper-In"' });
    const blocked = variant('healthy', (ps) => {
      ps.firewallRules = [ps.firewallRules, { Name: 'Block-UDP-3935', DisplayName: 'No iWARP', Enabled: 1, Direction: 1, Action: 4, Protocol: 'UDP', LocalPort: ['3935'] }];
    });
    expect(byId(diagnose(blocked), 'firewall-iwarp')).toMatchObject({ status: 'fail', fix: 'Disable-NetFirewallRule -Name "Block-UDP-3935"' });
    const range = variant('healthy', (ps) => (ps.firewallRules.LocalPort = ['3900-3999']));
    expect(byId(diagnose(range), 'firewall-iwarp').status).toBe('ok');
    const otherPort = variant('healthy', (ps) => (ps.firewallRules.LocalPort = ['3936-3999']));
    expect(byId(diagnose(otherPort), 'firewall-iwarp').status).toBe('fail');
    const off = variant('firewall-missing', (ps) => {
      ps.firewallProfiles = [
        { Name: 'Domain', Enabled: 'False' },
        { Name: 'Private', Enabled: 0 },
        { Name: 'Public', Enabled: 'False' },
      ];
    });
    expect(byId(diagnose(off), 'firewall-iwarp')).toMatchObject({ status: 'ok', detail: expect.stringMatching(/Firewall is off/) });
  });

  it('RDMA disabled on an adapter that is down is a warning; RoCEv2 mode is a warning with the iWARP fix', () => {
    const down = variant('rdma-disabled', (ps) => (ps.netAdapters[0].Status = 'Disconnected'));
    expect(byId(diagnose(down), 'adapter-rdma')).toMatchObject({ status: 'warn', fix: 'Enable-NetAdapterRdma -Name "SLOT 4 Port 1"' });
    const roce = variant('healthy', (ps) => {
      ps.advanced.push({ Name: 'SLOT 4 Port 1', RegistryKeyword: '*NetworkDirectTechnology', RegistryValue: ['4'] });
    });
    const c = byId(diagnose(roce), 'adapter-rdma');
    expect(c.status).toBe('warn');
    expect(c.detail).toContain('RoCEv2');
    expect(c.fix).toContain('Set-NetAdapterAdvancedProperty -Name "SLOT 4 Port 1" -RegistryKeyword "*NetworkDirectTechnology" -RegistryValue 1');
    const none = variant('healthy', (ps) => (ps.rdma = []));
    expect(byId(diagnose(none), 'adapter-rdma').status).toBe('fail');
  });

  it('one cmdlet failing skips its check only, and says when Administrator is needed', () => {
    const facts = variant('healthy', (ps) => (ps.smb = { error: 'Access denied' }));
    const checks = diagnose(facts);
    expect(byId(checks, 'smb-rdma-capable')).toMatchObject({ status: 'skip', detail: 'could not run: Get-SmbServerNetworkInterface: Access denied (run the terminal as Administrator)' });
    expect(failing(checks)).toEqual([]);
    const noHyperV = variant('healthy', (ps) => (ps.vmSwitches = { error: "The term 'Get-VMSwitch' is not recognized as the name of a cmdlet" }));
    expect(byId(diagnose(noHyperV), 'vswitch-sriov-vmq')).toMatchObject({ status: 'skip', detail: expect.stringMatching(/Hyper-V is not installed/) });
  });

  it('NETDIRECT_PROVIDER naming a DLL that does not exist fails; a name or "auto" is reported as is', () => {
    const facts = load('powershell-unavailable');
    const dll = facts.env.NETDIRECT_PROVIDER!;
    facts.providerFiles = { [dll]: false };
    expect(byId(diagnose(facts), 'provider-override')).toMatchObject({ status: 'fail', fix: expect.stringContaining('Remove-Item Env:NETDIRECT_PROVIDER') });
    expect(byId(diagnose({ ...facts, env: { NETDIRECT_PROVIDER: 'i40wb' } }), 'provider-override').status).toBe('ok');
    expect(diagnose({ ...facts, env: { NETDIRECT_PROVIDER: 'auto' } }).map((c) => c.id)).not.toContain('provider-override');
  });

  it('a catalog entry whose DLL is gone fails nd-provider-dll', () => {
    const facts = load('healthy');
    facts.providerFiles = { 'C:\\Windows\\system32\\i40wb.dll': false };
    const c = byId(diagnose(facts), 'nd-provider-dll');
    expect(c.status).toBe('fail');
    expect(c.detail).toContain('C:\\Windows\\system32\\i40wb.dll does not exist');
  });

  it('adapter names are quoted for PowerShell', () => {
    expect(psQuote('SLOT 4 Port 1')).toBe('"SLOT 4 Port 1"');
    expect(psQuote('vEthernet (RDMA)')).toBe('"vEthernet (RDMA)"');
    expect(psQuote('NIC $1')).toBe("'NIC $1'");
    expect(psQuote("Bob's \"NIC\"")).toBe("'Bob''s \"NIC\"'");
    const odd = variant('rdma-disabled', (ps) => {
      ps.rdma[0].Name = 'Port $A';
      ps.netAdapters[0].Name = 'Port $A';
    });
    expect(byId(diagnose(odd), 'adapter-rdma').fix).toBe("Enable-NetAdapterRdma -Name 'Port $A'");
  });

  it('is pure: the same facts give the same checks, and the facts are not modified', () => {
    for (const name of ['healthy', 'hyperv-guest-no-rdmavf', 'powershell-unavailable']) {
      const facts = load(name);
      const before = JSON.stringify(facts);
      expect(diagnose(facts)).toEqual(diagnose(load(name)));
      expect(JSON.stringify(facts)).toBe(before);
    }
  });
});

describe('diagnose() elsewhere (Linux facts)', () => {
  const base = (): DoctorFacts => ({
    platform: 'linux',
    providers: [{ name: 'soft', kind: 'builtin', guid: '{6E657464-6972-6563-7473-6F6674000000}', ndVersion: 0x20000 }],
    env: {},
    addresses: ['127.0.0.1', '10.1.2.3', '::1'],
    hardwareCrc32c: true,
    selfTest: { ok: true, bytes: 4096, ms: 12.5, port: 40000 },
    rdmaDevices: [],
    kernelModules: { siw: false, rdma_rxe: false },
  });

  it('the verbs provider: not built, no rdma-core and no device are three different answers', () => {
    const answer = (v: DoctorFacts['verbsProvider']) => byId(diagnose({ ...base(), verbsProvider: v }), 'verbs-provider');
    const notBuilt = answer({ built: false, listed: false, addresses: [] });
    expect(notBuilt.status).toBe('warn');
    expect(notBuilt.detail).toMatch(/^not built: this addon was compiled without rdma-core's headers.*apt-get install libibverbs-dev librdmacm-dev.*npm rebuild netdirect --build-from-source/);
    const noRuntime = answer({ built: true, listed: false, addresses: [], error: 'libibverbs.so.1 could not be loaded (not found)' });
    expect(noRuntime.detail).toMatch(/^built; no rdma-core runtime \(libibverbs\.so\.1 could not be loaded.*apt install libibverbs1/);
    const noDevice = answer({ built: true, listed: false, addresses: [], error: 'rdma-core is installed but reports no RDMA device' });
    expect(noDevice.detail).toMatch(/^built; no RDMA device \(rdma-core is installed but reports no RDMA device\)/);
    expect(answer({ built: true, listed: true, addresses: ['10.0.2.15'] }).detail).toBe('built and usable: serves 10.0.2.15');
  });

  it('a working machine: every check ok', () => {
    const checks = diagnose({ ...base(), verbsProvider: { built: true, listed: false, addresses: [], error: 'rdma-core is installed but reports no RDMA device' } });
    expect(checks.map((c) => c.id)).toEqual(OTHER_IDS);
    expect(failing(checks)).toEqual([]);
    expect(checks.every((c) => c.status === 'ok')).toBe(true);
  });

  it('names the CRC32c implementation when the addon says which (older fact files without it still read)', () => {
    expect(byId(diagnose({ ...base(), crc32cImplementation: 'avx512-vpclmulqdq' }), 'crc32c').detail).toMatch(/AVX-512 VPCLMULQDQ/);
    expect(byId(diagnose({ ...base(), crc32cImplementation: 'sse4.2' }), 'crc32c').detail).toMatch(/SSE4\.2/);
    expect(byId(diagnose(base()), 'crc32c').detail).toMatch(/^hardware: the CPU's crc32 instruction$/);
  });

  it('a failed self-test is a failure carrying the NdError text', () => {
    const facts = { ...base(), selfTest: { ok: false as const, error: 'connect failed: ND_CONNECTION_REFUSED (0xC0000236) [ND_CONNECTION_REFUSED]', code: 'ND_CONNECTION_REFUSED' } };
    const report = reportOf(facts);
    expect(failing(report.checks)).toEqual(['self-test']);
    expect(byId(report.checks, 'self-test').detail).toContain('ND_CONNECTION_REFUSED');
    expect(formatDoctorReport(report)).toMatch(/\[FAIL\] Self-test/);
  });

  it('loopback-only addresses and software CRC32c are warnings; devices and modules are listed', () => {
    const facts: DoctorFacts = {
      ...base(),
      addresses: ['127.0.0.1', '::1'],
      hardwareCrc32c: false,
      env: { NETDIRECT_SOFT_CRC: '0' },
      rdmaDevices: [
        { name: 'siw_eth0', nodeType: '4: RNIC', parent: 'eth0', portState: '4: ACTIVE', linkLayer: 'Ethernet' },
        { name: 'irdma0', driver: 'irdma', nodeType: '4: RNIC', portState: '1: DOWN' },
        { name: 'rxe0', nodeType: '1: CA', portState: '4: ACTIVE', linkLayer: 'Ethernet' },
      ],
      verbsProvider: { listed: true, addresses: ['10.0.2.15'] },
      kernelModules: { siw: true, rdma_rxe: false },
    };
    const checks = diagnose(facts);
    expect(statuses(checks)).toMatchObject({ addresses: 'warn', crc32c: 'warn', 'rdma-devices': 'ok', 'kernel-soft-rdma': 'ok' });
    const detail = byId(checks, 'rdma-devices').detail;
    expect(detail).toContain("siw_eth0: siw (by name), iwarp, port 1 active, on eth0 — usable: openAdapter(address) opens it for an address it serves (or pin { provider: 'verbs' })");
    expect(detail).toContain('irdma0: irdma, iwarp, port 1 down — not usable: port 1 is not active');
    expect(detail).toContain('rxe0: rxe (by name), roce, port 1 active');
    expect(detail).toContain('verbs provider addresses: 10.0.2.15');
    // Without the verbs provider (no rdma-core) the devices are listed as not usable, with what to install.
    const none = byId(diagnose({ ...facts, verbsProvider: { listed: false, addresses: [] } }), 'rdma-devices').detail;
    expect(none).toContain('not usable: the verbs provider is not available');
    expect(none).toMatch(/apt install libibverbs1 librdmacm1/);
    expect(byId(checks, 'kernel-soft-rdma').detail).toMatch(/^siw loaded/);
    expect(byId(checks, 'soft-crc-env').detail).toMatch(/NETDIRECT_SOFT_CRC=0/);
  });
});

describe('the report', () => {
  it('has the documented JSON shape', () => {
    for (const name of ['healthy', 'hyperv-guest-no-rdmavf']) {
      const report = JSON.parse(JSON.stringify(reportOf(load(name))));
      expect(Object.keys(report).sort()).toEqual(['checks', 'platform', 'summary']);
      expect(Object.keys(report.summary).sort()).toEqual(['fail', 'ok', 'skip', 'warn']);
      expect(report.summary.ok + report.summary.warn + report.summary.fail + report.summary.skip).toBe(report.checks.length);
      expect(new Set(report.checks.map((c: DoctorCheck) => c.id)).size).toBe(report.checks.length);
      for (const c of report.checks) {
        expect(Object.keys(c).every((k) => ['id', 'title', 'status', 'detail', 'fix'].includes(k)), JSON.stringify(c)).toBe(true);
        expect(c.id).toMatch(/^[a-z0-9-]+$/);
        expect(STATUSES).toContain(c.status);
        expect(typeof c.title).toBe('string');
        expect(typeof c.detail).toBe('string');
        if (c.status === 'fail') expect(typeof c.fix, c.id).toBe('string');
      }
    }
  });

  it('the cidr test behind --peer', () => {
    expect(inCidr('192.168.10.12', '192.168.10.11/24')).toBe(true);
    expect(inCidr('192.168.30.31', '192.168.10.11/24')).toBe(false);
    expect(inCidr('10.255.0.1', '10.20.0.11/8')).toBe(true);
    expect(inCidr('fd00::1:2', 'fd00::2/64')).toBe(true);
    expect(inCidr('fd01::1', 'fd00::2/64')).toBe(false);
    expect(inCidr('::ffff:192.168.10.9', '::ffff:192.168.10.1/120')).toBe(true);
    expect(inCidr('192.168.10.12', 'fd00::2/64')).toBe(false);
  });
});

describe('gathering', () => {
  it('reads PowerShell output after the mark, past a BOM and noise', () => {
    const out = '\uFEFFWARNING: something\r\nNETDIRECT-DOCTOR-JSON\r\n{"offload":{"NetworkDirect":"Enabled"},"rdma":[]}\r\n';
    expect(parsePowerShellOutput(out)).toEqual({ offload: { NetworkDirect: 'Enabled' }, rdma: [] });
    expect(() => parsePowerShellOutput('')).toThrow(/no JSON object/);
    expect(() => parsePowerShellOutput('NETDIRECT-DOCTOR-JSON\n[1]')).toThrow();
  });

  it('a missing or broken PowerShell gives {error}, never a throw', async () => {
    const missing = await runPowerShell(path.join(root, 'no-such-powershell.exe'));
    expect(missing.error).toMatch(/not found|could not be started/);
    // A program that is not PowerShell (node refuses the arguments): the exit code and its stderr are reported.
    const wrong = await runPowerShell(process.execPath);
    expect(wrong.error).toMatch(/exited with code \d+ without the expected JSON/);
  });

  it('the Windows path with PowerShell missing: catalog check real, the rest "could not run"', async () => {
    const facts = await gatherDoctorFacts({ platform: 'win32', powershell: path.join(root, 'no-such-powershell.exe'), peers: ['127.0.0.1'] });
    expect(facts.powershell).toHaveProperty('error');
    expect(facts.peers).toEqual([{ host: '127.0.0.1', address: '127.0.0.1' }]);
    const checks = diagnose(facts);
    expect(checks.map((c) => c.id).filter((id) => id !== 'provider-override')).toEqual(WINDOWS_IDS);
    for (const id of POWERSHELL_IDS) expect(byId(checks, id).detail, id).toMatch(/^could not run: PowerShell unavailable/);
    const system = (facts.providers as Array<{ kind: string }>).filter((p) => p.kind === 'system');
    expect(byId(checks, 'nd-provider').status).toBe(system.length > 0 ? 'ok' : 'fail');
  });

  it('the self-test opens the adapter on 127.0.0.1 and verifies an RDMA Write; its bound fails it and cleans up', async () => {
    const late = await runSelfTest(1);
    expect(late.ok).toBe(false);
    expect(late).toMatchObject({ error: expect.stringMatching(/^[a-z0-9.: ]+: no result within 1 ms$/) });
    const result = await runSelfTest(10_000);
    expect(result).toMatchObject({ ok: true, bytes: 4096, completion: process.platform === 'win32' ? 'thread' : 'loop' });
  });
});

describe('netdirect doctor (CLI, this machine)', () => {
  it('--json: the real run', () => {
    const r = cli('doctor', '--json');
    expect(r.error).toBeUndefined();
    const report = JSON.parse(r.stdout);
    expect(report.platform).toBe(process.platform);
    expect(r.status).toBe(report.summary.fail > 0 ? 1 : 0);
    for (const c of report.checks) expect(STATUSES).toContain(c.status);
    if (process.platform === 'win32') {
      // Real Windows, or Windows node under Wine (no PowerShell: those checks could not run; no catalog provider).
      for (const id of WINDOWS_IDS) expect(report.checks.map((c: DoctorCheck) => c.id)).toContain(id);
    } else {
      expect(report.checks.map((c: DoctorCheck) => c.id)).toEqual(OTHER_IDS);
      expect(byId(report.checks, 'self-test'), r.stderr).toMatchObject({ status: 'ok' });
      expect(byId(report.checks, 'self-test').detail).toMatch(/4096-byte RDMA Write placed and verified/);
      expect(byId(report.checks, 'self-test').detail).toMatch(/completions: on the event loop/);
      expect(byId(report.checks, 'addresses').detail).toContain('127.0.0.1');
      expect(r.status, r.stdout).toBe(0);
    }
  });

  it('text output: a mark per check and the summary line', () => {
    const r = cli('doctor');
    expect(r.stdout).toMatch(/^netdirect doctor \(/);
    expect(r.stdout).toMatch(/^summary: \d+ ok, \d+ warn, \d+ fail, \d+ skip/m);
    const marks = r.stdout.split('\n').filter((l) => /^\[( ok |warn|FAIL|skip)\] /.test(l));
    expect(marks.length).toBeGreaterThan(0);
    if (process.platform !== 'win32') {
      expect(marks.length).toBe(OTHER_IDS.length);
      expect(r.stdout).toMatch(/^\[ ok \] Self-test: RDMA Write over 127\.0\.0\.1/m);
      expect(r.status).toBe(0);
    }
  });

  it('exit codes: 1 when a check fails (saved facts), 0 when none does, 2 on misuse', () => {
    const bad = cli('doctor', '--from', path.join(FIXTURES, 'firewall-missing.json'));
    expect(bad.status, bad.stderr).toBe(1);
    expect(bad.stdout).toMatch(/^\[FAIL\] Firewall allows the iWARP port mapper/m);
    expect(bad.stdout).toContain('New-NetFirewallRule -DisplayName "iWARP Port Mapper"');
    const good = cli('doctor', '--from', path.join(FIXTURES, 'healthy.json'), '--json');
    expect(good.status, good.stderr).toBe(0);
    expect(JSON.parse(good.stdout).summary).toEqual({ ok: 8, warn: 0, fail: 0, skip: 1 });
    expect(cli('doctor', '--frobnicate').status).toBe(2);
    expect(cli('doctor', '--from', path.join(root, 'no-such-facts.json')).status).toBe(2);
    expect(cli('doctor', '--peer').status).toBe(2);
  });

  it('--facts prints what diagnose() reads', () => {
    const r = cli('doctor', '--facts');
    expect(r.status, r.stderr).toBe(0);
    const facts = JSON.parse(r.stdout) as DoctorFacts;
    expect(facts.platform).toBe(process.platform);
    expect(Array.isArray(facts.providers)).toBe(true);
    expect(diagnose(facts).length).toBeGreaterThan(0);
  });
});

// The Windows checks: ND provider in the Winsock catalog, NetworkDirect and AcrossIPSubnets, the UDP 3935
// firewall rule, RDMA on the adapter, SR-IOV/VMQ on a vSwitch, Hyper-V guest RDMA, SMB "RDMA Capable".

import { isIP } from 'node:net';
import { listProviders, openAdapter } from '../discovery.js';
import { ALLOWED_BLOCKED, ENABLED_DISABLED, Findings, GPO_BOOLEAN, ND_TECHNOLOGY, RULE_ACTION, RULE_DIRECTION, RULE_ENABLED, type Row, SWITCH_TYPE, advanced, check, couldNotRun, enumName, netAdapters, psFact, psQuote, rdmaAdapters, text, texts, truthy } from './check.js';
import { type DoctorCheck, type DoctorFacts, type LocalNetworkFact } from './facts.js';
import { dllPathOf } from './gather.js';

/** netdirect's software provider in the catalog (binding/soft/provider.h NETDIRECT_SOFT_PROVIDER_ID). */
const SOFT_PROVIDER_GUID = '{6E657464-6972-6563-7473-6F6674000000}';

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
      "# Without RDMA hardware: 'netdirect provider install' (as Administrator) registers netdirect's software",
      '# iWARP provider (netdirect_soft.dll) in the catalog, for any ND application (MS-MPI, the SDK tools).',
    ];
    out.push(check('nd-provider', title, 'fail', detail.join('\n'), fix.join('\n')));
    out.push(check('nd-provider-dll', 'ND v2 provider DLL present', 'skip', 'no catalog provider to check'));
  } else {
    out.push(
      check(
        'nd-provider',
        title,
        'ok',
        system
          .map(
            (p) =>
              `${p.name}${p.guid ? ` ${p.guid}` : ''}: ${p.path ?? '(no DLL path)'}` +
              (p.guid?.toUpperCase() === SOFT_PROVIDER_GUID ? " (netdirect's software provider: 'netdirect provider install')" : ''),
          )
          .join('\n'),
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

export function windowsChecks(facts: DoctorFacts): DoctorCheck[] {
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

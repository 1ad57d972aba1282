// The one PowerShell run of `netdirect doctor` on Windows: the embedded script (the networking cmdlets'
// output as JSON between marks), running it, and reading its output.

import { execFile, type ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import * as path from 'node:path';

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

export function defaultPowerShell(): string {
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

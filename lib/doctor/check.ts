// What every check shares: reading PowerShell's JSON (lone objects, enums as numbers), folding findings into one
// status, the facts one check needs or why it could not run.

import { type CheckStatus, type DoctorCheck, type DoctorFacts } from './facts.js';

export type Row = Record<string, unknown>;

function isError(v: unknown): v is { error: string } {
  return typeof v === 'object' && v !== null && !Array.isArray(v) && typeof (v as Row).error === 'string';
}

/** ConvertTo-Json gives a bare object for one result, an array for several, nothing for none. */
function rows(v: unknown): Row[] {
  if (Array.isArray(v)) return v.filter((x): x is Row => typeof x === 'object' && x !== null && !Array.isArray(x));
  if (typeof v === 'object' && v !== null) return [v as Row];
  return [];
}

export function text(v: unknown): string | undefined {
  if (Array.isArray(v)) return v.length > 0 ? text(v[0]) : undefined;
  if (typeof v === 'string') return v;
  if (typeof v === 'number' || typeof v === 'boolean') return String(v);
  return undefined;
}

export function texts(v: unknown): string[] {
  if (Array.isArray(v)) return v.map(text).filter((x): x is string => x !== undefined);
  const one = text(v);
  return one === undefined ? [] : [one];
}

/** An enum that ConvertTo-Json may give as its name or its number. */
export function enumName(v: unknown, numbers: Record<number, string>): string | undefined {
  if (typeof v === 'number') return numbers[v]?.toLowerCase();
  if (typeof v === 'boolean') return v ? 'true' : 'false';
  const s = text(v);
  if (s === undefined) return undefined;
  if (/^\d+$/.test(s.trim())) return numbers[Number(s)]?.toLowerCase();
  return s.trim().toLowerCase();
}

// Values of the CIM enums, for output recorded without [string] (MSFT_NetOffloadGlobalSetting,
// MSFT_NetFirewallRule / CIM_PolicyRule, MSFT_NetFirewallProfile's GpoBoolean, Hyper-V's VMSwitchType).
export const ENABLED_DISABLED = { 0: 'Disabled', 1: 'Enabled' };
export const ALLOWED_BLOCKED = { 0: 'Blocked', 1: 'Allowed' };
export const RULE_ENABLED = { 1: 'True', 2: 'False' };
export const RULE_DIRECTION = { 1: 'Inbound', 2: 'Outbound' };
export const RULE_ACTION = { 0: 'NotConfigured', 2: 'Allow', 3: 'AllowBypass', 4: 'Block' };
export const GPO_BOOLEAN = { 0: 'False', 1: 'True', 2: 'NotConfigured' };
export const SWITCH_TYPE = { 0: 'Private', 1: 'Internal', 2: 'External' };
// Microsoft's standardized *NetworkDirectTechnology keyword.
export const ND_TECHNOLOGY: Record<string, string> = { '1': 'iWARP', '2': 'InfiniBand', '3': 'RoCE', '4': 'RoCEv2' };

export function truthy(v: unknown): boolean | undefined {
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
export class Findings {
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

export function check(id: string, title: string, status: CheckStatus, detail: string, fix?: string): DoctorCheck {
  const c: DoctorCheck = { id, title, status, detail };
  if (fix !== undefined) c.fix = fix;
  return c;
}

const ADMIN_HINT = /access (is )?denied|administrator|elevat|0x80041003|permission/i;

/** The facts one check needs, or the reason it could not run. */
export function psFact(facts: DoctorFacts, key: string, cmdlet: string): { rows: Row[] } | { reason: string } {
  const ps = facts.powershell;
  if (ps === undefined) return { reason: 'PowerShell was not run' };
  if (isError(ps)) return { reason: `PowerShell unavailable: ${ps.error}` };
  const v = ps[key];
  if (v === undefined) return { reason: `${cmdlet} gave no result` };
  if (isError(v)) return { reason: `${cmdlet}: ${v.error}${ADMIN_HINT.test(v.error) ? ' (run the terminal as Administrator)' : ''}` };
  return { rows: rows(v) };
}

export const couldNotRun = (id: string, title: string, reason: string): DoctorCheck => check(id, title, 'skip', `could not run: ${reason}`);

interface AdapterView {
  name: string;
  description?: string;
  ifIndex?: number;
  status?: string;
}

export function netAdapters(facts: DoctorFacts): AdapterView[] {
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

export function rdmaAdapters(facts: DoctorFacts): RdmaView[] | { reason: string } {
  const f = psFact(facts, 'rdma', 'Get-NetAdapterRdma');
  if (!('rows' in f)) return f;
  return f.rows
    .map((r) => ({ name: text(r.Name) ?? '', description: text(r.InterfaceDescription), enabled: truthy(r.Enabled) }))
    .filter((a) => a.name !== '');
}

/** Advanced property value (RegistryValue, a string array in the cmdlet's output) of one adapter, by keyword. */
export function advanced(facts: DoctorFacts, adapter: string, keyword: string): string | undefined {
  const f = psFact(facts, 'advanced', 'Get-NetAdapterAdvancedProperty');
  if (!('rows' in f)) return undefined;
  const row = f.rows.find((r) => text(r.Name) === adapter && text(r.RegistryKeyword)?.toLowerCase() === keyword.toLowerCase());
  return row === undefined ? undefined : text(row.RegistryValue)?.trim();
}

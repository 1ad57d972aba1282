// The report: diagnose() from facts to checks, the summary, doctor() (gather + diagnose) and the text for people.

import { checkOptions } from '../validate.js';
import { type CheckStatus, DOCTOR_KEYS, type DoctorCheck, type DoctorFacts, type DoctorOptions, type DoctorReport } from './facts.js';
import { gatherDoctorFacts } from './gather.js';
import { otherChecks } from './other.js';
import { windowsChecks } from './windows.js';

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

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
//
// The folder: facts.ts (the facts and the report types), powershell.ts (the embedded script, running it),
// gather.ts (fact gathering), check.ts (what checks share), windows.ts (the Windows checks), other.ts (the checks
// elsewhere), report.ts (diagnose(), doctor(), the text report).

export { type CheckStatus, type DoctorCheck, type DoctorReport, type DoctorOptions, type SelfTestFact, type RdmaDeviceFact, type PeerFact, type LocalNetworkFact, type DoctorFacts } from './facts.js';
export { POWERSHELL_SCRIPT, parsePowerShellOutput, runPowerShell } from './powershell.js';
export { runSelfTest, gatherDoctorFacts } from './gather.js';
/** @internal */ export { readRdmaDevices, rdmaTransport } from './gather.js';
export { psQuote } from './check.js';
export { onLocalSubnet, inCidr } from './windows.js';
export { diagnose, summarize, doctor, reportOf, formatDoctorReport } from './report.js';

// The API suites (test/*.test.ts) on the guest's RDMA devices through the verbs provider (issue #14, docs/verbs.md
// §6): NETDIRECT_TEST_ADDRESS = the device's address makes the two-process suites open their adapters there, and
// provider 'auto' picks the verbs provider. The suites, lib/ and a trimmed node_modules go into the guest with
// `push-node --suites`; vitest runs inside the guest once per device. A test a device cannot run skips itself
// with the device's reason (test/helpers.ts deviceCannot); any failed test fails this file.
import { describe, expect, inject, it } from 'vitest';
import type { SiwVmContext } from './global-setup';
import { runCmd } from './proc';
import { GUEST_IP, SiwVm } from './siw-vm';
import * as path from 'node:path';

const ctx = inject('siwVm') as SiwVmContext | undefined;
const ready = ctx?.ready === true;
if (!ready) process.stderr.write(`[interop] API suites in the guest: skipped: ${ctx ? ctx.reason : 'not set up'}\n`);

const NODE = '/opt/nd/bin/node';
const PKG = '/opt/nd/pkg';
const SUITES = ['data', 'access', 'posting', 'lifecycle', 'misc', 'lifetime', 'cq-overrun', 'poller', 'keepalive'].map((s) => `test/${s}.test.ts`);
// handshake.test.ts drives the software provider's MPA handshake and does not apply to a verbs device.
const DEVICES = [
  { name: 'siw0', ip: GUEST_IP, suites: SUITES },
  { name: 'rxe0', ip: '10.0.3.15', suites: SUITES },
];

interface Report {
  numPassedTests: number;
  numFailedTests: number;
  numPendingTests: number;
  numTodoTests: number;
  testResults: Array<{ name: string; assertionResults: Array<{ fullName: string; status: string; failureMessages: string[] }> }>;
}

describe.skipIf(!ready)('API suites on the guest devices (verbs provider)', () => {
  let vm: SiwVm;

  it('push-node --suites', async () => {
    vm = new SiwVm(ctx!.tools, (m) => process.stderr.write(`[interop] ${m}\n`));
    const t0 = Date.now();
    const push = await runCmd(path.join(ctx!.tools, 'push-node'), ['--suites'], { timeoutMs: 300_000 });
    expect(push.code, push.stdout + push.stderr).toBe(0);
    process.stderr.write(`[interop] push-node --suites: ${((Date.now() - t0) / 1000).toFixed(1)} s\n`);
  }, 320_000);

  for (const dev of DEVICES) {
    it(`${dev.name}: ${dev.suites.map((s) => path.basename(s)).join(', ')}`, async () => {
      const t0 = Date.now();
      const report = `/tmp/suites-${dev.name}.json`;
      // siw charges registered memory to RLIMIT_MEMLOCK even for root (docs/verbs.md §6).
      const r = await vm.run(
        `cd ${PKG} && rm -f ${report} && ulimit -l unlimited && NETDIRECT_TEST_ADDRESS=${dev.ip} timeout 600 ${NODE} node_modules/vitest/vitest.mjs run ` +
          `--project default --reporter=dot --reporter=json --outputFile.json=${report} ${dev.suites.join(' ')} >/tmp/suites-${dev.name}.log 2>&1; ` +
          `echo "exit $?"; cat ${report}`,
        660_000,
      );
      const secs = ((Date.now() - t0) / 1000).toFixed(0);
      const json = r.output.slice(r.output.indexOf('{'));
      let rep: Report;
      try {
        rep = JSON.parse(json) as Report;
      } catch {
        const log = await vm.run(`tail -c 6000 /tmp/suites-${dev.name}.log`, 30_000);
        throw new Error(`${dev.name}: no vitest report (${r.output.slice(0, 200)}):\n${log.output}`);
      }
      const skipped = rep.testResults.flatMap((f) => f.assertionResults.filter((t) => t.status === 'skipped' || t.status === 'pending').map((t) => t.fullName));
      const failed = rep.testResults.flatMap((f) => f.assertionResults.filter((t) => t.status === 'failed').map((t) => `${t.fullName}: ${t.failureMessages[0]?.split('\n')[0]}`));
      process.stderr.write(
        `[interop] API suites on ${dev.name}: ${rep.numPassedTests} passed, ${rep.numFailedTests} failed, ${rep.numPendingTests + rep.numTodoTests} skipped (${secs} s)\n` +
          skipped.map((s) => `[interop]   skipped: ${s}\n`).join(''),
      );
      expect(failed, failed.join('\n')).toEqual([]);
      expect(rep.numPassedTests).toBeGreaterThan(0);
    }, 700_000);
  }
});

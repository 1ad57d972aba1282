// scripts/soak.js (`npm run soak`) in a short run, so the script cannot rot: two processes, mixed Writes, Reads and
// Sends over several QPs, every byte verified, RSS and fds sampled. Only correctness is asserted (no bad bytes, no
// failed request, both processes exit 0, the samples are there); the figures are for the long run's reader.
import { execFile } from 'node:child_process';
import * as path from 'node:path';
import { expect, it } from 'vitest';
import { root } from './helpers';

// scripts/ is not staged for the Windows tier (scripts/wine-test.sh), and the soak samples /proc: Linux.
it.skipIf(process.platform === 'win32')('a short soak moves verified data over several QPs and reports samples and a verdict', async () => {
  const out = await new Promise<string>((resolve, reject) =>
    execFile(process.execPath, [path.join(root, 'scripts/soak.js'), '--seconds', '8', '--sample', '1', '--qps', '4', '--max-size', '65536', '--json'], { cwd: root, timeout: 60_000 }, (err, stdout, stderr) =>
      err && !stdout ? reject(new Error(`${err.message}\n${stderr}`)) : resolve(stdout),
    ),
  );
  const report = JSON.parse(out.trim().split('\n').pop()!);
  expect(report.badBytes).toBe(0);
  expect(report.failures).toEqual([]);
  expect(report.errors).toEqual([]);
  expect(report.exit).toEqual({ client: { code: 0, signal: null }, server: { code: 0, signal: null } });
  expect(report.ok).toBe(true);
  for (const op of ['write', 'read', 'send']) expect(report.ops[op]).toBeGreaterThan(0);
  expect(report.rows.length).toBeGreaterThanOrEqual(3);
  for (const row of report.rows) {
    expect(row.client.rss).toBeGreaterThan(0);
    expect(row.server.fds).toBeGreaterThan(0);
  }
  expect(report.flat.client).toHaveProperty('rssFlat');
  expect(report.flat.server).toHaveProperty('fdsFlat');
  expect(report.flat.client).toHaveProperty('outsideV8Flat');
}, 90_000);

// What the ndbench end-to-end tests (cli.test.ts, perftest-cli.test.ts) share: running the built command, and reading
// the numbers of a perftest-style table.
import { spawnSync } from 'node:child_process';
import * as path from 'node:path';
import { expect } from 'vitest';
import { RESULT_LINE } from '../../lib/bench/report';

const root = path.resolve(__dirname, '..', '..');
export const cli = process.env.NDBENCH_TEST_CLI ?? path.join(root, 'dist', 'cjs', 'bench', 'cli.js');

/** Runs `ndbench args...` (dist/cjs/bench/cli.js, built by `npm test`'s pretest) in `cwd` and waits for it. */
export function runNdbench(cwd: string, args: string[]) {
  const r = spawnSync(process.execPath, [cli, ...args], { cwd, encoding: 'utf8', timeout: 90_000 });
  return { status: r.status, signal: r.signal, stdout: r.stdout, stderr: r.stderr, out: `${r.stdout}\n${r.stderr}` };
}

/**
 * Numeric rows of a perftest table: the lines after a column header (starting ' #bytes'), up to RESULT_LINE. `which`
 * picks the first header, or the last (after -H's sample listing perftest repeats it).
 */
export function tableRows(stdout: string, which: 'first' | 'last' = 'first'): number[][] {
  const lines = stdout.split('\n');
  const isHeader = (l: string) => l.startsWith(' #bytes');
  const h = which === 'first' ? lines.findIndex(isHeader) : lines.map(isHeader).lastIndexOf(true);
  expect(h, stdout).toBeGreaterThan(0);
  const out: number[][] = [];
  for (const l of lines.slice(h + 1)) {
    if (l === RESULT_LINE) break;
    out.push(l.trim().split(/\s+/).map(Number));
  }
  return out;
}

/**
 * Checks a printed ratio against the two printed figures it was computed from. Each figure is printed to two
 * decimals, so it is within 0.005 of the unrounded one, and the printed ratio (also two decimals) must lie
 * between the extremes of those intervals. A fixed relative margin is not enough: a fast baseline such as MPI
 * over shared memory at 0.25 us already carries a 2 % rounding error.
 */
export function expectPrintedRatio(ratio: number, nd: number, base: number): void {
  const h = 0.005;
  const eps = 1e-9;
  const what = `ratio ${ratio} vs ${nd}/${base}`;
  expect(ratio, what).toBeGreaterThanOrEqual((nd - h) / (base + h) - h - eps);
  expect(ratio, what).toBeLessThanOrEqual(base > h ? (nd + h) / (base - h) + h + eps : Infinity);
}

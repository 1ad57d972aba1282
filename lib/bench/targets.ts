// netdirect's performance targets against perftest on the same device (docs/ndbench.md, "--compare perftest"):
// each row names a test, a size, the completion mode it needs and the bound on the ratio netdirect / perftest of
// the headline figure (t_typical for latency: lower is better; BW average for bandwidth: higher is better).
// A run of ndbench with --compare perftest evaluates the rows of its own test and prints the whole table, so
// the rows it did not measure say which command does.

import type { BenchOptions, TestName } from './options.js';
import type { Report } from './report.js';
import { headline } from './stats.js';

export interface Target {
  row: string;
  test: TestName;
  size: number;
  /** The completion mode the row is defined for (undefined: any). */
  completion?: BenchOptions['completion'];
  /** ratio <= max (latency) or ratio >= min (bandwidth). */
  max?: number;
  min?: number;
  /** The command that measures the row (printed where this run did not). */
  command: string;
}

export const TARGETS: readonly Target[] = [
  {
    row: 'write_lat 8 B, manual mode vs ib_write_lat',
    test: 'write_lat',
    size: 8,
    completion: 'manual',
    max: 1.3,
    command: 'ndbench write_lat -s 8 --completion manual --compare perftest',
  },
  {
    row: 'write_bw 64 KiB vs ib_write_bw',
    test: 'write_bw',
    size: 65536,
    min: 0.9,
    command: 'ndbench write_bw -s 65536 --compare perftest',
  },
];

export interface TargetResult {
  row: string;
  target: string;
  /** Medians over the repetitions (µs or MiB/s), when measured. */
  netdirect?: number;
  perftest?: number;
  ratio?: number;
  result: 'pass' | 'miss' | 'not measured';
  /** Why not measured, or the unit of the figures. */
  note: string;
}

function bound(t: Target): string {
  return t.max !== undefined ? `<= ${t.max}x` : `>= ${t.min}x`;
}

/** The targets table of a report (its options and rows): pass/miss where this run measured the row. */
export function evaluateTargets(report: Report): TargetResult[] {
  return TARGETS.map((t) => {
    const base = { row: t.row, target: bound(t) };
    if (report.test !== t.test) return { ...base, result: 'not measured', note: `run: ${t.command}` } as const;
    if (t.completion !== undefined && report.options.completion !== t.completion) {
      return { ...base, result: 'not measured', note: `needs --completion ${t.completion} (this run: ${report.options.completion})` } as const;
    }
    const r = report.results.find((x) => x.size === t.size && x.baselines.perftest !== undefined);
    if (r === undefined) return { ...base, result: 'not measured', note: `size ${t.size} not in this run (-s ${t.size})` } as const;
    const nd = headline(r.netdirect);
    const pt = headline(r.baselines.perftest!);
    const ratio = pt > 0 ? nd / pt : NaN;
    const ok = Number.isFinite(ratio) && (t.max !== undefined ? ratio <= t.max : ratio >= (t.min as number));
    return { ...base, netdirect: nd, perftest: pt, ratio, result: ok ? 'pass' : 'miss', note: report.kind === 'latency' ? 'usec, t_typical' : 'MiB/s, BW average' } as const;
  });
}

/** The targets table as text (after the results table). */
export function formatTargets(rows: TargetResult[], repetitions: number): string {
  const f = (v: number | undefined) => (v === undefined || !Number.isFinite(v) ? '-' : v.toFixed(2));
  const lines = [
    ` Targets: netdirect / perftest on the same device, medians over ${repetitions} repetition${repetitions === 1 ? '' : 's'} (docs/ndbench.md)`,
    ` ${'row'.padEnd(44)} ${'netdirect'.padStart(10)} ${'perftest'.padStart(10)} ${'ratio'.padStart(6)}  ${'target'.padEnd(7)} result`,
  ];
  for (const r of rows) {
    lines.push(
      ` ${r.row.padEnd(44)} ${f(r.netdirect).padStart(10)} ${f(r.perftest).padStart(10)} ${f(r.ratio).padStart(6)}  ${r.target.padEnd(7)} ${r.result}` +
        (r.note ? `  (${r.note})` : ''),
    );
  }
  return lines.join('\n');
}

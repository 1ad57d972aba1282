// ndbench --compare perftest off the RDMA device (the guest tier runs it end to end on siw:
// test/interop/verbs-provider.interop.test.ts): reading perftest's tables (fixtures captured from Debian's perftest
// 4.5 in the siw-vm guest, on siw0 and rxe0), the arguments perftest gets, the targets table, the median
// repetition, the options, and what the command says where perftest or a device is missing.
import { spawnSync } from 'node:child_process';
import { chmodSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { cli } from './ndbench';
import { parseArgs } from '../../lib/bench/options';
import { parsePerftestTable, perftestArgs, perftestAvailable } from '../../lib/bench/perftest';
import { addResult, newReport } from '../../lib/bench/report';
import { medianRun } from '../../lib/bench/run';
import { bandwidthStats, latencyStats } from '../../lib/bench/stats';
import { evaluateTargets, formatTargets } from '../../lib/bench/targets';

const fixture = (name: string) => readFileSync(path.join(__dirname, 'fixtures', name), 'utf8');
const dir = mkdtempSync(path.join(tmpdir(), 'ndbench-perftest-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('perftest tables', () => {
  it('ib_write_lat: the nine latency columns (µs)', () => {
    expect(parsePerftestTable(fixture('ib_write_lat-siw.txt'))).toEqual({
      MsgSize: 8, n_iterations: 200, t_min: 59.87, t_max: 20999.56, t_typical: 8011.75, t_avg: 8331.61, t_stdev: 4059.18,
      percentile_99: 20793.8, 'percentile_99.9': 20999.56, tps: 1e6 / 8331.61,
    });
  });

  it('ib_write_lat -D: t_avg and tps; the average stands for the median perftest does not print', () => {
    const s = parsePerftestTable(fixture('ib_write_lat-siw-D.txt'));
    expect(s).toMatchObject({ MsgSize: 8, n_iterations: 60, t_avg: 8339.75, t_typical: 8339.75, tps: 59.95 });
  });

  it('ib_write_bw: perftest\'s MB/sec is MiB/s (MsgRate × size agrees), Gb/sec converted', () => {
    const s = parsePerftestTable(fixture('ib_write_bw-rxe.txt'));
    expect(s).toEqual({ MsgSize: 65536, n_iterations: 200, BW_peak: 6.95, BW_average: 6.95, MsgRate: 0.000111 });
    expect(Math.abs((0.000111e6 * 65536) / 2 ** 20 - 6.95)).toBeLessThan(0.05);
    const gbits = fixture('ib_write_bw-rxe.txt').replace(/MB\/sec/g, 'Gb/sec').replace(/ 6\.95 /g, ' 8.00 ');
    expect((parsePerftestTable(gbits) as { BW_average: number }).BW_average).toBeCloseTo(1e9 / 2 ** 20, 6);
  });

  it('an output without a table (a failed connect) is an error naming what perftest said', () => {
    expect(() => parsePerftestTable('Function rdma_connect failed\n Unable to perform rdma_client function\n')).toThrow(/no result table.*\n.*rdma_connect failed/s);
    expect(() => parsePerftestTable(' #bytes #iterations    t_min[usec]    t_max[usec]  t_typical[usec]\n----\n')).toThrow(/no row/);
  });
});

describe('perftest arguments', () => {
  const p = { test: 'write_bw' as const, size: 65536, iters: 5000, duration: 0, qps: 2, txDepth: 64, inline: 0, device: 'siw0', timeoutMs: 1000 };
  it('the same size, count, depth and QPs over rdma_cm; the client names the server', () => {
    expect(perftestArgs('server', 18600, p)).toEqual(['-R', '-F', '-p', '18600', '-s', '65536', '-d', 'siw0', '-n', '5000', '-t', '64', '-q', '2']);
    expect(perftestArgs('client', 18600, { ...p, test: 'write_lat', size: 8, duration: 2, inline: 64, device: undefined }, '10.0.2.15')).toEqual([
      '-R', '-F', '-p', '18600', '-s', '8', '-D', '2', '-I', '64', '10.0.2.15',
    ]);
  });
});

describe('targets', () => {
  const lat = (usTypical: number) => latencyStats(8, Array.from({ length: 100 }, () => usTypical * 2000), 2);
  const report = (argv: string[], nd: number, pt: number) => {
    const o = parseArgs(argv, {}) as Exclude<ReturnType<typeof parseArgs>, null | 'version'>;
    const r = newReport(o, '0', 'block');
    const s = o.sizes[0];
    if (o.test === 'write_lat') addResult(r, s, lat(nd), { perftest: lat(pt) });
    else addResult(r, s, bandwidthStats(s, 1000, (s * 1000 * 1e9) / (nd * 2 ** 20)), { perftest: bandwidthStats(s, 1000, (s * 1000 * 1e9) / (pt * 2 ** 20)) });
    return r;
  };

  it('write_lat 8 B manual: pass at <= 1.3x, miss above; the other row says which command measures it', () => {
    const pass = evaluateTargets(report(['write_lat', '-s', '8', '--completion', 'manual', '--compare', 'perftest'], 12, 10));
    expect(pass[0]).toMatchObject({ result: 'pass', netdirect: 12, perftest: 10 });
    expect(pass[0].ratio).toBeCloseTo(1.2, 6);
    expect(pass[1]).toMatchObject({ result: 'not measured', note: expect.stringContaining('ndbench write_bw -s 65536') });
    expect(evaluateTargets(report(['write_lat', '-s', '8', '--completion', 'manual', '--compare', 'perftest'], 14, 10))[0].result).toBe('miss');
    const text = formatTargets(pass, 3);
    expect(text).toMatch(/medians over 3 repetitions/);
    expect(text).toMatch(/write_lat 8 B, manual mode vs ib_write_lat\s+12\.00\s+10\.00\s+1\.20\s+<= 1\.3x\s+pass/);
  });

  it('write_lat in another completion mode or size is not measured, with what to change', () => {
    expect(evaluateTargets(report(['write_lat', '-s', '8', '--completion', 'loop', '--compare', 'perftest'], 1, 1))[0]).toMatchObject({
      result: 'not measured', note: 'needs --completion manual (this run: loop)',
    });
    expect(evaluateTargets(report(['write_lat', '-s', '16', '--completion', 'manual', '--compare', 'perftest'], 1, 1))[0].note).toMatch(/-s 8/);
  });

  it('write_bw 64 KiB: pass at >= 0.9x, miss below', () => {
    expect(evaluateTargets(report(['write_bw', '--compare', 'perftest'], 95, 100))[1]).toMatchObject({ result: 'pass' });
    expect(evaluateTargets(report(['write_bw', '--compare', 'perftest'], 85, 100))[1]).toMatchObject({ result: 'miss' });
  });

  it('the row of a repetition set is its median one', () => {
    expect(medianRun([lat(30), lat(10), lat(20)])).toBe(2);
    expect(medianRun([lat(40), lat(10), lat(20), lat(30)])).toBe(2);
  });
});

describe('options', () => {
  it('--compare perftest: three repetitions unless given; all = every baseline; reg_mr has no perftest', () => {
    const o = parseArgs(['write_lat', '--compare', 'perftest'], {}) as { compare: string[]; repetitions: number; compareImplicit: boolean };
    expect(o).toMatchObject({ compare: ['perftest'], repetitions: 3, compareImplicit: false });
    expect(parseArgs(['write_lat', '--compare', 'perftest', '--repetitions', '5'], {})).toMatchObject({ repetitions: 5 });
    expect(parseArgs(['write_lat', '--compare', 'tcp'], {})).toMatchObject({ repetitions: 1 });
    expect(parseArgs(['write_lat', '--compare', 'all'], {})).toMatchObject({ compare: ['tcp', 'node-net', 'perftest'], compareImplicit: true });
    // native polls from C++: with --completion manual it is one of "all", and left out with a note otherwise.
    expect(parseArgs(['write_lat', '--compare', 'all', '--completion', 'manual'], {})).toMatchObject({ compare: ['tcp', 'node-net', 'perftest', 'native'] });
    expect(parseArgs(['write_lat', '--compare', 'all'], {})!.notes).toContainEqual(expect.stringMatching(/native left out: .*add --completion manual/));
    expect(() => parseArgs(['reg_mr', '--compare', 'perftest'], {})).toThrow(/reg_mr has no perftest counterpart/);
  });
});

describe('ndbench --compare perftest where perftest cannot run', { timeout: 120_000 }, () => {
  const run = (args: string[], PATH: string) => spawnSync(process.execPath, [cli, ...args], { encoding: 'utf8', timeout: 90_000, env: { ...process.env, PATH } });
  const fakeBin = path.join(dir, 'bin');

  it('no perftest on PATH: explicit --compare perftest exits 1 saying what to install, before running anything', () => {
    const r = run(['write_lat', '--loopback', '-s', '8', '-n', '20', '--compare', 'perftest', '--timeout', '20'], dir);
    expect(r.status, r.stderr).toBe(1);
    expect(r.stderr).toMatch(/--compare perftest: ib_write_lat is not on PATH: install perftest/);
    expect(r.stdout).not.toMatch(/#bytes/);
  });

  it.skipIf(perftestAvailable('write_lat').ok)('perftest installed but no RDMA device: exits 1 saying so', () => {
    require('node:fs').mkdirSync(fakeBin, { recursive: true });
    writeFileSync(path.join(fakeBin, 'ib_write_lat'), '#!/bin/sh\necho "should not run" >&2\nexit 3\n');
    chmodSync(path.join(fakeBin, 'ib_write_lat'), 0o755);
    const r = run(['write_lat', '--loopback', '-s', '8', '-n', '20', '--compare', 'perftest', '--timeout', '20'], fakeBin);
    expect(r.status, r.stderr).toBe(1);
    // Off Linux the platform itself is the reason (perftest drives Linux RDMA devices), found before any device.
    const why = process.platform === 'linux' ? /ib_write_lat is installed but this machine has no RDMA device/ : new RegExp(`perftest runs on Linux RDMA devices; this is ${process.platform}`);
    expect(r.stderr).toMatch(why);
    expect(r.stderr).not.toMatch(/should not run/);
  });

  it('--compare all leaves perftest out with a note and runs the other baselines (exit 0)', () => {
    const r = run(['write_lat', '--loopback', '-s', '8', '-n', '20', '--compare', 'all', '--timeout', '20'], path.dirname(process.execPath));
    expect(r.status, r.stderr).toBe(0);
    expect(r.stderr).toMatch(/note: --compare all: perftest left out: ib_write_lat is not on PATH/);
    expect(r.stdout).toMatch(/tcp\[usec\]\s+nd\/tcp\s+node-net\[usec\]\s+nd\/node-net/);
    expect(r.stdout).not.toMatch(/perftest|Targets/);
  });
});

// perftest's habits end to end (dist/cjs/bench/cli.js, tiny --loopback runs): -b bidirectional, -H/-U sample
// listings, the server's own table, --output, -N, -w, --cpu_util, -I, --run_infinitely and the progress line.
// Figures are never asserted beyond "exists, positive, laid out as perftest lays it out".
import { spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { cli, runNdbench, tableRows } from './ndbench';
import { parseArgs, type BenchOptions } from '../../lib/bench/options';
import { RESULT_LINE } from '../../lib/bench/report';
import { meter } from '../../lib/bench/nd';
import { PROGRESS_AFTER_MS, progressLine } from '../../lib/bench/run';

const dir = mkdtempSync(path.join(tmpdir(), 'ndbench-perftest-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

function ndbench(...args: string[]) {
  return runNdbench(dir, args);
}

function rows(stdout: string): number[][] {
  return tableRows(stdout, 'last');
}

/** perftest's "#, usec" listing that starts at line `from`: the values, checked to be numbered 1, 2, … */
function listing(lines: string[], from: number): number[] {
  expect(lines[from]).toBe('#, usec');
  const values: number[] = [];
  for (let i = from + 1; /^\d+, /.test(lines[i] ?? ''); i++) {
    const [n, v] = lines[i].split(', ').map(Number);
    expect(n).toBe(values.length + 1);
    values.push(v);
  }
  return values;
}

describe('ndbench --help', () => {
  it('lists perftest\'s and OSU\'s flags, what is accepted with a note and what is refused', () => {
    const help = ndbench('--help');
    expect(help.status).toBe(0);
    for (const opt of ['-b, --bidirectional', '-H, --report-histogram', '-U, --report-unsorted', '-N, --noPeak', '-I, --inline_size', '-e, --events',
      '--output bandwidth|message_rate|latency', '--run_infinitely', '--cpu_util', '--out_json', '-m <min:max>', '-W <n>', '-V, --version',
      'accepted, no effect here', 'refused with the reason', '-s4096']) {
      expect(help.stdout).toContain(opt);
    }
  });
});

describe('ndbench -b (bidirectional)', { timeout: 120_000 }, () => {
  it.each(['write_bw', 'read_bw', 'send_bw'])('%s --loopback -b: both directions measured and added', (test) => {
    const file = path.join(dir, `${test}-b.json`);
    const r = ndbench(test, '--loopback', '-b', '-s4096', '-n', '50', '--timeout', '30', '--json', file);
    expect(r.status, r.out).toBe(0);
    expect(r.stdout).toContain('Bidirectional BW Test');
    const [row] = rows(r.stdout);
    expect(row[0]).toBe(4096);
    expect(row[1]).toBe(100); // 50 each way
    const rep = JSON.parse(readFileSync(file, 'utf8'));
    expect(rep.options.bidirectional).toBe(true);
    expect(rep.definitions.BW_average).toMatch(/sum of both directions/);
    expect(rep.results[0].netdirect.BW_average).toBeGreaterThan(0);
  });
});

describe('ndbench -H / -U (latency samples)', { timeout: 120_000 }, () => {
  it('write_lat -H: the sorted samples (top 2 dropped), then the column header and the row', () => {
    const r = ndbench('write_lat', '--loopback', '-H', '-s', '8', '-n', '20', '--timeout', '30');
    expect(r.status, r.out).toBe(0);
    const lines = r.stdout.split('\n');
    const at = lines.indexOf('#, usec');
    const values = listing(lines, at);
    expect(values).toHaveLength(18);
    expect([...values].sort((a, b) => a - b)).toEqual(values);
    expect(lines[at + 19]).toBe(RESULT_LINE);
    expect(lines[at + 20]).toMatch(/^ #bytes #iterations\s+t_min\[usec\]/);
    const [row] = rows(r.stdout);
    expect(row[1]).toBe(20);
    expect(row[2]).toBeCloseTo(values[0], 1); // t_min
    expect(row[3]).toBeCloseTo(values[17], 1); // t_max
  });

  it('send_lat -U: every sample in measurement order, the same as the JSON samples_usec', () => {
    const file = path.join(dir, 'u.json');
    const r = ndbench('send_lat', '--loopback', '-U', '-s', '8', '-n', '20', '--json', file, '--timeout', '30');
    expect(r.status, r.out).toBe(0);
    const lines = r.stdout.split('\n');
    const values = listing(lines, lines.indexOf('#, usec'));
    expect(values).toHaveLength(20);
    const saved = JSON.parse(readFileSync(file, 'utf8')).results[0].samples_usec as number[];
    expect(saved).toHaveLength(20);
    values.forEach((v, i) => expect(v).toBe(Number(saved[i].toPrecision(6)))); // perftest's %g: 6 significant digits
  });
});

describe('ndbench: the server prints the table too', { timeout: 120_000 }, () => {
  it('a separate server (-p 0) prints the same header and rows as the client', async () => {
    const server = spawn(process.execPath, [cli, 'write_bw', '-p', '0', '--timeout', '30'], { cwd: dir, stdio: ['ignore', 'pipe', 'pipe'] });
    let sout = '';
    let serr = '';
    server.stdout.setEncoding('utf8').on('data', (d: string) => (sout += d));
    server.stderr.setEncoding('utf8').on('data', (d: string) => (serr += d));
    const exited = new Promise<number | null>((resolve) => server.on('exit', resolve));
    const port = await new Promise<string>((resolve, reject) => {
      const t = setInterval(() => {
        const m = /on port (\d+)/.exec(serr);
        if (m) {
          clearInterval(t);
          resolve(m[1]);
        }
      }, 20);
      exited.then(() => reject(new Error(`server exited: ${serr}`)));
    });
    const client = spawnSync(process.execPath, [cli, 'write_bw', '127.0.0.1', '-p', port, '-s', '4096', '-n', '50', '--timeout', '30'], { encoding: 'utf8' });
    expect(client.status, client.stderr).toBe(0);
    expect(await exited).toBe(0);
    expect(sout).toContain('RDMA_Write BW Test');
    expect(rows(sout)).toEqual(rows(client.stdout));
  });
});

describe('ndbench --output, -N, -w, --cpu_util, -I', { timeout: 120_000 }, () => {
  it('--output prints only the figure, one line per size', () => {
    const bw = ndbench('write_bw', '--loopback', '-s', '4096', '-n', '50', '--output=bandwidth', '--timeout', '30');
    expect(bw.status, bw.out).toBe(0);
    expect(bw.stdout).toMatch(/^\d+\.\d{6}\n$/);
    expect(Number(bw.stdout)).toBeGreaterThan(0);
    const lat = ndbench('write_lat', '--loopback', '-m', '2:4', '-n', '10', '--output', 'latency', '--timeout', '30');
    expect(lat.status, lat.out).toBe(0);
    expect(lat.stdout.trim().split('\n')).toHaveLength(2);
  });

  it('-N prints BW peak 0; --cpu_util adds a column; -I inlines (header says so); -w above the result fails with the figure', () => {
    const r = ndbench('write_bw', '--loopback', '-s', '64', '-n', '50', '-N', '--cpu_util', '-I', '64', '--timeout', '30');
    expect(r.status, r.out).toBe(0);
    expect(r.stdout).toContain('Max inline data : 64[B]');
    expect(r.stdout).toMatch(/MsgRate\[Mpps\]\s+CPU_Util\[%\]/);
    const [row] = rows(r.stdout);
    expect(row[2]).toBe(0);
    // CPU time under Wine's node.exe reads 0 for a short run (its clock ticks coarsely); the column is there.
    if (!process.env.NETDIRECT_UNDER_WINE) expect(row[5]).toBeGreaterThan(0);
    const limited = ndbench('write_bw', '--loopback', '-s', '64', '-n', '20', '-w', '1000000', '--timeout', '30');
    expect(limited.status).toBe(1);
    expect(limited.stderr).toMatch(/BW average [\d.]+ MiB\/sec at 64 B is below the -w limit of 1000000 MiB\/sec/);
    const inline = ndbench('send_lat', '--loopback', '-s', '300', '-n', '10', '-I', '512', '--timeout', '30');
    expect(inline.status).toBe(1);
    expect(inline.stderr).toContain("-I 512: the adapter's maxInlineDataSize is 256 bytes: use -I 256 or less");
  });

  it('--heap adds a heap[B/msg] column: the batched loop (prepared requests, pollInto) allocates less per message than post() + poll()', () => {
    const json = path.join(dir, 'heap.json');
    // 200,000 messages: a dozen heap intervals of 16,384 (lib/bench/stats.ts HeapMeter), so that the median is not one
    // the JIT compiled in (with 60,000 a loaded machine gave the batched loop 28 B/msg against post()'s 21).
    const batched = ndbench('write_bw', '--loopback', '-s', '8', '-n', '200000', '--completion', 'manual', '-l', '32', '--heap', '--json', json, '--timeout', '30');
    expect(batched.status, batched.out).toBe(0);
    expect(batched.stdout).toMatch(/MsgRate\[Mpps\]\s+heap\[B\/msg\]/);
    const perMessage = JSON.parse(readFileSync(json, 'utf8')).results[0].netdirect.heap_bytes_per_op;
    expect(perMessage).toBeGreaterThanOrEqual(0);
    expect(rows(batched.stdout)[0][5]).toBeCloseTo(perMessage, 2);
    const single = ndbench('write_bw', '--loopback', '-s', '8', '-n', '200000', '--completion', 'manual', '--heap', '--timeout', '30');
    expect(single.status, single.out).toBe(0);
    // A RawCompletion object per completion, against none.
    expect(rows(single.stdout)[0][5]).toBeGreaterThan(perMessage);
  });

  it('notes for accepted no-op flags go to stderr once (not again from the --loopback server)', () => {
    const r = ndbench('write_lat', '--loopback', '-s', '8', '-n', '10', '-x', '3', '-R', '-F', '--timeout', '30');
    expect(r.status, r.out).toBe(0);
    expect(r.stderr.match(/note: -x 3: iWARP addresses peers by IP address/g)).toHaveLength(1);
    expect(r.stderr.match(/note: -R: /g)).toHaveLength(1);
  });
});

describe('ndbench --run_infinitely', { timeout: 120_000 }, () => {
  // Ctrl-C is SIGINT, which a Windows process cannot be sent from another (node's kill() terminates it).
  it.skipIf(process.platform === 'win32')('prints a row every -D seconds until Ctrl-C, then ends cleanly', async () => {
    const child = spawn(process.execPath, [cli, 'write_bw', '--loopback', '-s', '4096', '-D', '0.3', '--run_infinitely', '--timeout', '30'], { cwd: dir });
    let out = '';
    child.stdout.setEncoding('utf8').on('data', (d: string) => (out += d));
    const exited = new Promise<number | null>((resolve) => child.on('exit', resolve));
    await new Promise<void>((resolve, reject) => {
      const t = setInterval(() => {
        if ((out.match(/^ 4096 /gm) ?? []).length >= 2) {
          clearInterval(t);
          resolve();
        }
      }, 50);
      exited.then(() => reject(new Error(`exited early: ${out}`)));
    });
    child.kill('SIGINT');
    expect(await exited).toBe(0);
    expect(rows(out).length).toBeGreaterThanOrEqual(2);
    expect(out.trimEnd().endsWith(RESULT_LINE)).toBe(true);
  });
});

describe('progress line', () => {
  const io = () => {
    const err: string[] = [];
    return { err, io: { out: () => undefined, err: (t: string) => void err.push(t), errIsTTY: false } };
  };

  it('stays quiet for the first seconds, then shows the phase, its percentage, elapsed time and an ETA', () => {
    const o = parseArgs(['write_lat', '-s', '8', '-n', '1000', '--progress'], {}) as BenchOptions;
    let now = 1_000_000;
    const { err, io: sink } = io();
    const p = progressLine(o, sink, () => now);
    p.start(0, 8, 'netdirect');
    meter.total = 1000;
    meter.done = 250;
    expect(err).toEqual([]); // not yet PROGRESS_AFTER_MS
    now += PROGRESS_AFTER_MS + 1000; // 3 s in, a quarter done (warm-up counted in the weight)
    expect(p.line()).toMatch(/ndbench write_lat: 8 B \(1\/1\) netdirect 25%  elapsed 0:03  ETA 0:\d\d/);
    const eta = Number(/ETA 0:(\d\d)/.exec(p.line())![1]);
    expect(eta).toBeGreaterThanOrEqual(9); // 3 s for ≤ 25 % of the run
    p.stop();
  });

  it('-D runs: the clock gives the fraction; a sweep counts the sizes', () => {
    const o = parseArgs(['write_bw', '-m', '4:16', '-D', '2', '--progress'], {}) as BenchOptions;
    let now = 0;
    const { io: sink } = io();
    const p = progressLine(o, sink, () => now);
    p.start(0, 4, 'netdirect');
    now = 2000;
    p.end();
    p.start(1, 8, 'netdirect');
    now = 3000;
    expect(p.line()).toBe(' ndbench write_bw: 8 B (2/3) netdirect 50%  elapsed 0:03  ETA 0:03');
    p.stop();
  });
});

// The ndbench command end to end (dist/cjs/bench/cli.js, built by `npm test`'s pretest): tiny --loopback runs of
// every test in every completion mode, the baselines, every output format, --json and --plot. Figures are never
// asserted (benchmarks are not tests): only that they exist, are positive and are laid out as promised.
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { expectPrintedRatio, runNdbench, tableRows } from './ndbench';
import { RESULT_LINE, validateReport } from '../../lib/bench/report';
import { parseXml } from './xml';

const root = path.resolve(__dirname, '..', '..');
const dir = mkdtempSync(path.join(tmpdir(), 'ndbench-test-'));

afterAll(() => rmSync(dir, { recursive: true, force: true }));

function ndbench(...args: string[]) {
  return runNdbench(root, args);
}

function rows(stdout: string): number[][] {
  return tableRows(stdout, 'first');
}

describe('ndbench command line', { timeout: 120_000 }, () => {
  it('--help prints the usage; misuse exits 2 with the reason', () => {
    const help = ndbench('--help');
    expect(help.status).toBe(0);
    expect(help.stdout).toMatch(/^usage: ndbench <test> \[server-host\] \[options\]/);
    for (const opt of ['--loopback', '--compare', '--plot', '--completion', '--crc', '--report_gbits', '-a, --all']) expect(help.stdout).toContain(opt);
    const bad = ndbench('write_lat', '--compare', 'udp');
    expect(bad.status).toBe(2);
    expect(bad.stderr).toMatch(/--compare must be one of tcp\|node-net/);
    expect(ndbench('nonsense').status).toBe(2);
    // A usage error is one sentence and a pointer to --help, not the whole usage again.
    expect(bad.stderr.trim().split('\n')).toHaveLength(2);
    const perftestName = ndbench('ib_write_bw');
    expect(perftestName.status).toBe(2);
    expect(perftestName.stderr).toMatch(/unknown test "ib_write_bw", did you mean write_bw\? \(perftest's ib_write_bw is ndbench's write_bw\)/);
    expect(ndbench('write_lta').stderr).toMatch(/did you mean write_lat\?/);
  });

  it('--timeout bounds a server waiting for its client too', () => {
    const r = ndbench('write_lat', '-p', '0', '--timeout', '1');
    expect(r.status).toBe(1);
    expect(r.stderr).toMatch(/no ndbench client connected within 1 s/);
  });

  it('a client with no server says it waits, then gives up with what to do', () => {
    const r = ndbench('write_lat', '127.0.0.1', '-p', '1', '--timeout', '1');
    expect(r.status).toBe(1);
    expect(r.stderr).toBe(
      'ndbench: waiting for the server at 127.0.0.1:1 (retrying for up to 1 s)\n' +
        'ndbench: no ndbench server at 127.0.0.1:1 after 1 s (ECONNREFUSED): start the server first (`ndbench <test>` with no host, ' +
        'on 127.0.0.1), check the host and the control port (-p), or wait longer (--timeout)\n',
    );
  });

  it('--version and -V print the package version', () => {
    const pkg = JSON.parse(readFileSync(path.join(root, 'package.json'), 'utf8'));
    for (const flag of ['--version', '-V']) {
      const r = ndbench(flag);
      expect(r.status).toBe(0);
      expect(r.stdout.trim()).toBe(`ndbench (netdirect) ${pkg.version}`);
    }
  });

  it('a size beyond the adapter\'s maxTransferLength says so (not "Invalid typed array length" or ND_BUFFER_OVERFLOW)', () => {
    for (const size of ['2147483648', '1073741825']) {
      const r = ndbench('write_lat', '--loopback', '-s', size, '-n', '5', '--timeout', '20');
      expect(r.status, r.out).toBe(1);
      // Whichever side opens its adapter first reports it (the client relays the server's failure as 'peer failed').
      expect(r.stderr).toContain(
        `messages of ${size} bytes exceed the adapter's maxTransferLength of 1 GiB (1073741824 bytes), the largest one request moves: use -s 1073741824 or less`,
      );
      expect(r.stderr).toMatch(/^ndbench: (peer failed: )?messages of /m);
    }
  });
});

describe('ndbench --loopback, every test, every completion mode', { timeout: 120_000 }, () => {
  const tests = ['write_lat', 'write_bw', 'read_lat', 'read_bw', 'send_lat', 'send_bw'];
  // On Windows 'auto' is 'thread' and 'loop' is offered when asked for (docs/windows-event-loop.md): all three run.
  for (const completion of ['loop', 'thread', 'manual']) {
    it.each(tests)(`%s --completion ${completion}`, (test) => {
      const file = path.join(dir, `${test}-${completion}.json`);
      const r = ndbench(test, '--loopback', '-s', '64', '-n', '20', '--completion', completion, '--timeout', '20', '--json', file);
      expect(r.status, r.out).toBe(0);
      expect(r.stdout).toContain(test.endsWith('lat') ? 'Latency Test' : 'BW Test');
      // The header and the JSON say which mode ran (not the poller thread whatever ran).
      expect(r.stdout).toMatch(new RegExp(`ibv_wr\\* API     : OFF \\(ND v2; completions: ${completion},`));
      expect(JSON.parse(readFileSync(file, 'utf8')).environment.completion).toBe(completion);
      const table = rows(r.stdout);
      expect(table).toHaveLength(1);
      expect(table[0][0]).toBe(64);
      expect(table[0]).toHaveLength(test.endsWith('lat') ? 9 : 5);
      expect(table[0].every((v) => Number.isFinite(v) && v >= 0)).toBe(true);
      // Positive before rounding: the table's 2 decimals print 1280 bytes moved in a slow 0.3 s as 0.00 MB/sec.
      const measured = JSON.parse(readFileSync(file, 'utf8')).results[0].netdirect;
      expect(measured[test.endsWith('lat') ? 't_typical' : 'BW_average']).toBeGreaterThan(0);
    });
  }
});


describe('ndbench baselines in the same run', { timeout: 120_000 }, () => {
  it('--compare tcp,node-net prints each baseline and the ratio beside netdirect\'s figure (latency)', () => {
    const r = ndbench('write_lat', '--loopback', '-s', '8', '-n', '30', '--compare', 'tcp,node-net', '--timeout', '20');
    expect(r.status, r.out).toBe(0);
    expect(r.stdout).toMatch(/tcp\[usec\]\s+nd\/tcp\s+node-net\[usec\]\s+nd\/node-net/);
    const [row] = rows(r.stdout);
    expect(row).toHaveLength(13);
    expect(row[9]).toBeGreaterThan(0);
    expectPrintedRatio(row[10], row[4], row[9]);
    expect(row[11]).toBeGreaterThan(0);
    expectPrintedRatio(row[12], row[4], row[11]);
  });

  it('--compare native: the same test on the same queue pair from a C++ loop, beside the JS figure (manual mode)', () => {
    for (const test of ['write_lat', 'read_lat', 'send_lat']) {
      const file = path.join(dir, `native-${test}.json`);
      const r = ndbench(test, '--loopback', '-s', '64', '-n', '200', '-Q', '2', '--completion', 'manual', '--compare', 'native', '--json', file, '--timeout', '20');
      expect(r.status, r.out).toBe(0);
      expect(r.stdout).toMatch(/native\[usec\]\s+nd\/native/);
      expect(r.stdout).toMatch(/Baseline native\s*: the same test on the same queue pair/);
      const [row] = rows(r.stdout);
      expect(row).toHaveLength(11);
      expect(row[9]).toBeGreaterThan(0);
      expectPrintedRatio(row[10], row[4], row[9]);
      const saved = JSON.parse(readFileSync(file, 'utf8'));
      expect(validateReport(saved)).toEqual([]);
      expect(saved.options.compare).toEqual(['native']);
      expect(saved.results[0].baselines.native.n_iterations).toBe(200);
      expect(saved.results[0].ratios.native).toBeGreaterThan(0);
    }
    // Timed (-D) and inline (-I): the native loop follows the same options as the JS one.
    const timed = ndbench('write_lat', '--loopback', '-s', '8', '-D', '1', '-I', '64', '--completion', 'manual', '--compare', 'native', '--timeout', '20');
    expect(timed.status, timed.out).toBe(0);
    expect(timed.stdout).toMatch(/native\[usec\]/);
    // write_bw (the message rate): counted, timed and batched against Writes the C++ loop posts one at a time.
    for (const extra of [['-n', '3000'], ['-D', '1'], ['-n', '3000', '-l', '16']]) {
      const file = path.join(dir, `native-write_bw.json`);
      const bw = ndbench('write_bw', '--loopback', '-s', '8', ...extra, '-t', '64', '--completion', 'manual', '--compare', 'native', '--json', file, '--timeout', '20');
      expect(bw.status, bw.out).toBe(0);
      expect(bw.stdout).toMatch(/native\[MiB\/sec\]\s+nd\/native/);
      expect(bw.stdout).toMatch(/Baseline native\s*: the same Writes on the same queue pair/);
      const saved = JSON.parse(readFileSync(file, 'utf8'));
      expect(validateReport(saved), extra.join(' ')).toEqual([]);
      const native = saved.results[0].baselines.native;
      if (extra[0] === '-n') expect(native.n_iterations).toBe(3000);
      else expect(native.n_iterations).toBeGreaterThan(0);
      expect(native.MsgRate).toBeGreaterThan(0);
      expect(saved.results[0].ratios.native).toBeGreaterThan(0);
    }
  });

  it('bandwidth: --compare tcp in OSU format, and send_bw/read_bw patterns', () => {
    for (const test of ['write_bw', 'read_bw', 'send_bw']) {
      const r = ndbench(test, '--loopback', '-s', '4096', '-n', '50', '--compare', 'tcp', '--format', 'osu', '--timeout', '20');
      expect(r.status, r.out).toBe(0);
      const line = r.stdout.split('\n').find((l) => /^4096\s/.test(l))!;
      const [size, nd, tcp, ratio] = line.trim().split(/\s+/).map(Number);
      expect(size).toBe(4096);
      expect(nd).toBeGreaterThan(0);
      expect(tcp).toBeGreaterThan(0);
      expectPrintedRatio(ratio, nd, tcp);
    }
  });
});

describe('ndbench reports and pictures', { timeout: 120_000 }, () => {
  it('--format json and --json: the schema, units and ratios', () => {
    const file = path.join(dir, 'r.json');
    const r = ndbench('send_lat', '--loopback', '-s', '16', '-n', '20', '--compare', 'node-net', '--format', 'json', '--json', file, '--timeout', '20');
    expect(r.status, r.out).toBe(0);
    const printed = JSON.parse(r.stdout);
    const saved = JSON.parse(readFileSync(file, 'utf8'));
    expect(saved).toEqual(printed);
    expect(validateReport(saved)).toEqual([]);
    expect(saved).toMatchObject({ tool: 'ndbench', test: 'send_lat', verb: 'Send', kind: 'latency' });
    expect(saved.units.latency).toMatch(/usec/);
    expect(saved.results[0].ratios['node-net']).toBeGreaterThan(0);
  });

  it('-a sweep with --plot: a valid SVG with every size, netdirect and the baseline', () => {
    const svgFile = path.join(dir, 'sweep.svg');
    const jsonFile = path.join(dir, 'sweep.json');
    const r = ndbench('write_bw', '--loopback', '-a', '-n', '5', '-t', '4', '--compare', 'tcp', '--plot', svgFile, '--json', jsonFile, '--timeout', '30');
    expect(r.status, r.out).toBe(0);
    expect(rows(r.stdout).map((x) => x[0])).toEqual(Array.from({ length: 23 }, (_, i) => 2 ** (i + 1)));
    const doc = parseXml(readFileSync(svgFile, 'utf8'));
    expect(doc.root).toBe('svg');
    expect(doc.text).toContain('netdirect');
    expect(doc.text).toContain('tcp');
    expect(doc.text).toContain('8M');
    expect(doc.elements.filter((e) => e === 'circle').length).toBeGreaterThanOrEqual(2 * 2 * 23);
    expect(validateReport(JSON.parse(readFileSync(jsonFile, 'utf8')))).toEqual([]);
  });

  it('-D runs by time and prints perftest\'s duration columns; --report_gbits', () => {
    const lat = ndbench('write_lat', '--loopback', '-s', '8', '-D', '0.3', '--timeout', '20');
    expect(lat.status, lat.out).toBe(0);
    expect(lat.stdout).toContain(' #bytes        #iterations       t_avg[usec]    tps average');
    const bw = ndbench('write_bw', '--loopback', '-s', '65536', '-D', '0.3', '--report_gbits', '--timeout', '20');
    expect(bw.status, bw.out).toBe(0);
    expect(bw.stdout).toContain('BW average[Gb/sec]');
    expect(rows(bw.stdout)[0][1]).toBeGreaterThan(0);
  });

  it('-q: several QPs writing, with the RSS growth per idle QP in the JSON; reg_mr', () => {
    const file = path.join(dir, 'q.json');
    const r = ndbench('write_bw', '--loopback', '-s', '4096', '-n', '10', '-q', '8', '--json', file, '--timeout', '20');
    expect(r.status, r.out).toBe(0);
    expect(r.stdout).toMatch(/Number of qps\s+: 8/);
    const rep = JSON.parse(readFileSync(file, 'utf8'));
    expect(rep.results[0].netdirect.n_iterations).toBe(80);
    expect(rep.extra.rss_per_idle_qp_bytes).toBeTypeOf('number');
    const reg = ndbench('reg_mr', '-s', '4096', '-n', '20');
    expect(reg.status, reg.out).toBe(0);
    expect(reg.stdout).toContain('RegisterMemory Latency Test');
    expect(rows(reg.stdout)[0][4]).toBeGreaterThan(0);
  });

  it('--crc on|off reaches both sides (the run succeeds either way)', () => {
    for (const crc of ['on', 'off']) {
      const r = ndbench('write_bw', '--loopback', '-s', '65536', '-n', '20', '--crc', crc, '--timeout', '20');
      expect(r.status, r.out).toBe(0);
      expect(r.stdout).toContain(`MPA CRC32c      : ${crc.toUpperCase()}`);
    }
  });
});

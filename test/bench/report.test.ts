// ndbench's outputs from synthetic results (no addon): perftest's columns parse, OSU's two columns, the JSON
// schema, baseline ratios beside netdirect's figure, and the --plot SVG as well-formed XML.
import { describe, expect, it } from 'vitest';
import { parseArgs } from '../../lib/bench/options';
import { RESULT_LINE, addResult, figurePrinter, formatJson, formatReport, g6, newReport, sampleListing, validateReport, type Report } from '../../lib/bench/report';
import { warmupOf } from '../../lib/bench/options';
import { bandwidthStats, latencyStats, toGbits } from '../../lib/bench/stats';
import { num, renderSvg } from '../../lib/bench/plot';
import { parseXml } from './xml';

const LAT_HEADER =
  ' #bytes #iterations    t_min[usec]    t_max[usec]  t_typical[usec]    t_avg[usec]    t_stdev[usec]   99% percentile[usec]   99.9% percentile[usec] ';
const BW_HEADER = ' #bytes     #iterations    BW peak[MiB/sec]    BW average[MiB/sec]   MsgRate[Mpps]';

function latReport(compare: string[] = []): Report {
  const o = parseArgs(['write_lat', '-a', ...compare.flatMap((c) => ['--compare', c])], {})!;
  const r = newReport(o, '1.2.3', 'block');
  for (const size of [2, 4, 8]) {
    const nd = latencyStats(size, Array.from({ length: 1000 }, (_, i) => 20_000 + i * 10), 2);
    const base = Object.fromEntries(compare.map((c) => [c, latencyStats(size, Array.from({ length: 1000 }, () => 40_000), 2)]));
    addResult(r, size, nd, base);
  }
  return r;
}

function bwReport(compare: string[] = []): Report {
  const o = parseArgs(['write_bw', '-a', ...compare.flatMap((c) => ['--compare', c])], {})!;
  const r = newReport(o, '1.2.3', 'block');
  for (const size of [4096, 65536, 1 << 20]) {
    const nd = bandwidthStats(size, 5000, (size * 5000) / 2e9 * 1e9); // 2 GB/s
    const base = Object.fromEntries(compare.map((c) => [c, bandwidthStats(size, 5000, (size * 5000) / 2.5e9 * 1e9)]));
    addResult(r, size, nd, base);
  }
  return r;
}

/** Rows of perftest's table: the lines after the column header, up to the closing RESULT_LINE. */
function perftestRows(text: string, header: string): number[][] {
  const lines = text.split('\n');
  const h = lines.findIndex((l) => l.startsWith(header.trimEnd()));
  expect(h, text).toBeGreaterThan(0);
  const rows: number[][] = [];
  for (const l of lines.slice(h + 1)) {
    if (l === RESULT_LINE) break;
    rows.push(l.trim().split(/\s+/).map(Number));
  }
  return rows;
}

describe('latency statistics (perftest)', () => {
  it('drops the top two samples, halves round trips, median as t_typical', () => {
    const s = latencyStats(8, [10_000, 2_000, 4_000, 6_000, 8_000, 1_000_000, 999_000], 2);
    expect(s.n_iterations).toBe(7);
    expect(s.t_min).toBe(1);
    expect(s.t_max).toBe(5); // 999 000 and 1 000 000 ns dropped
    expect(s.t_typical).toBe(3);
    expect(s.t_avg).toBe(3);
    expect(latencyStats(8, [3000, 3000, 3000, 3000], 1).t_typical).toBe(3);
  });
  it('bandwidth in MiB/s, message rate in Mpps, Gb/s by perftest\'s factor', () => {
    const b = bandwidthStats(1 << 20, 1000, 1e9);
    expect(b.BW_average).toBeCloseTo(1000);
    expect(b.MsgRate).toBeCloseTo(0.001);
    expect(toGbits(1000)).toBeCloseTo(8.388608);
  });
});

describe('perftest format', () => {
  it('latency: perftest\'s header block, exact column header, 9 numeric columns per row', () => {
    const text = formatReport(latReport(), 'perftest', { reportGbits: false, duration: false });
    expect(text).toContain('RDMA_Write Latency Test');
    expect(text.split('\n')).toContain(RESULT_LINE);
    expect(RESULT_LINE).toHaveLength(87);
    expect(text).toContain(LAT_HEADER.trimEnd());
    const rows = perftestRows(text, LAT_HEADER);
    expect(rows).toHaveLength(3);
    for (const row of rows) {
      expect(row).toHaveLength(9);
      expect(row.every(Number.isFinite)).toBe(true);
    }
    expect(rows.map((r) => r[0])).toEqual([2, 4, 8]);
    expect(rows[0][1]).toBe(1000);
    expect(rows[0][4]).toBeCloseTo(latReport().results[0].netdirect['t_typical' as never], 2);
  });

  it('bandwidth: perftest\'s columns in MiB/s, or Gb/s with --report_gbits', () => {
    const text = formatReport(bwReport(), 'perftest', { reportGbits: false, duration: false });
    expect(text).toContain('RDMA_Write BW Test');
    const rows = perftestRows(text, BW_HEADER);
    expect(rows).toHaveLength(3);
    for (const row of rows) expect(row).toHaveLength(5);
    expect(rows[2][3]).toBeCloseTo(2e9 / 2 ** 20, 1);
    const g = formatReport(bwReport(), 'perftest', { reportGbits: true, duration: false });
    expect(g).toContain(' #bytes     #iterations    BW peak[Gb/sec]    BW average[Gb/sec]   MsgRate[Mpps]');
    expect(perftestRows(g, ' #bytes     #iterations    BW peak[Gb/sec]')[2][3]).toBeCloseTo(16, 1);
  });

  it('duration mode prints perftest\'s t_avg / tps columns', () => {
    const text = formatReport(latReport(), 'perftest', { reportGbits: false, duration: true });
    const rows = perftestRows(text, ' #bytes        #iterations       t_avg[usec]    tps average');
    expect(rows[0]).toHaveLength(4);
  });

  it('--compare: each baseline and the ratio netdirect/baseline right of perftest\'s columns', () => {
    const text = formatReport(latReport(['tcp', 'node-net']), 'perftest', { reportGbits: false, duration: false });
    expect(text).toContain('tcp[usec]   nd/tcp');
    expect(text).toContain('node-net[usec]   nd/node-net');
    expect(text).toMatch(/Baseline tcp\s*: native C\+\+ TCP ping-pong/);
    const rows = perftestRows(text, LAT_HEADER);
    for (const row of rows) {
      expect(row).toHaveLength(13);
      expect(row[9]).toBeCloseTo(20); // tcp half RTT, µs
      expect(row[10]).toBeCloseTo(row[4] / row[9], 2);
      expect(row[12]).toBeCloseTo(row[4] / row[11], 2);
    }
    const bw = perftestRows(formatReport(bwReport(['tcp']), 'perftest', { reportGbits: false, duration: false }), BW_HEADER);
    expect(bw[0]).toHaveLength(7);
    expect(bw[0][6]).toBeCloseTo(0.8, 2);
  });
});

describe('perftest -H / -U / --output / --cpu_util', () => {
  it('listings: "#, usec", numbered from 1, %g values; -H sorted without the top two', () => {
    expect(sampleListing([3.5, 1.25, 2, 100, 50], 'unsorted')).toBe('#, usec\n1, 3.5\n2, 1.25\n3, 2\n4, 100\n5, 50');
    expect(sampleListing([3.5, 1.25, 2, 100, 50], 'sorted')).toBe('#, usec\n1, 1.25\n2, 2\n3, 3.5');
    expect(g6(1.23456789)).toBe('1.23457');
  });
  it('a row with samples prints the listing, the result line and the column header before it', () => {
    const r = latReport();
    r.results[0].samples_usec = [12, 10, 11, 13, 14];
    const text = formatReport(r, 'perftest', { reportGbits: false, duration: false, histogram: true, unsorted: true });
    const lines = text.split('\n');
    const at = lines.indexOf('#, usec');
    expect(lines.slice(at, at + 6)).toEqual(['#, usec', '1, 12', '2, 10', '3, 11', '4, 13', '5, 14']);
    expect(lines.slice(at + 6, at + 10)).toEqual(['#, usec', '1, 10', '2, 11', '3, 12']);
    expect(lines[at + 10]).toBe(RESULT_LINE);
    expect(lines[at + 11]).toBe(LAT_HEADER);
    expect(lines[at + 12]).toMatch(/^ 2\s+1000\s/);
  });
  it('--output prints one figure with six decimals; --cpu_util a column after perftest\'s', () => {
    const bw = bwReport();
    const p = figurePrinter(bw, 'bandwidth', false);
    expect(p.header()).toBe('');
    expect(p.row(bw.results[2])).toBe((bw.results[2].netdirect as { BW_average: number }).BW_average.toFixed(6));
    expect(figurePrinter(bw, 'message_rate', false).row(bw.results[0])).toMatch(/^\d+\.\d{6}$/);
    expect(figurePrinter(latReport(), 'latency', false).row(latReport().results[0])).toBe((latReport().results[0].netdirect as { t_avg: number }).t_avg.toFixed(6));
    bw.results[0].cpu_util_percent = 42.5;
    const text = formatReport(bw, 'perftest', { reportGbits: false, duration: false, cpuUtil: true });
    expect(text).toContain(BW_HEADER + '    CPU_Util[%]');
    expect(perftestRows(text, BW_HEADER)[0][5]).toBe(42.5);
  });
});

describe('OSU format', () => {
  it('banner, "# Size" header, two decimals, MB = 10^6 bytes', () => {
    const text = formatReport(bwReport(['tcp']), 'osu', { reportGbits: false, duration: false });
    const lines = text.trim().split('\n');
    expect(lines[0]).toMatch(/^# ndbench \(OSU format\) RDMA_Write Bandwidth Test v1\.2\.3/);
    const header = lines.find((l) => l.startsWith('# Size'))!;
    expect(header).toMatch(/^# Size\s+Bandwidth \(MB\/s\)\s+tcp \(MB\/s\)\s+nd\/tcp$/);
    const rows = lines.filter((l) => !l.startsWith('#')).map((l) => l.trim().split(/\s+/).map(Number));
    expect(rows.map((r) => r[0])).toEqual([4096, 65536, 1 << 20]);
    expect(rows[0][1]).toBeCloseTo(2000, 1); // 2 GB/s in MB/s
    expect(rows[0][3]).toBeCloseTo(0.8, 2);
    const lat = formatReport(latReport(), 'osu', { reportGbits: false, duration: false });
    expect(lat).toMatch(/^# Size\s+Latency \(us\)$/m);
    expect(lat).toMatch(/^2\s+\d+\.\d\d$/m);
  });
});

describe('JSON report', () => {
  it('has the schema: perftest\'s JSON keys, units, definitions, baselines and ratios', () => {
    for (const r of [latReport(['tcp', 'node-net']), bwReport(['tcp'])]) {
      const parsed = JSON.parse(formatJson(r));
      expect(validateReport(parsed)).toEqual([]);
      expect(parsed.units).toBeTypeOf('object');
      expect(parsed.definitions.ratio).toMatch(/netdirect .* \/ baseline/);
    }
    const lat = JSON.parse(formatJson(latReport(['tcp'])));
    expect(Object.keys(lat.results[0].netdirect)).toEqual(
      expect.arrayContaining(['MsgSize', 'n_iterations', 't_min', 't_max', 't_typical', 't_avg', 't_stdev', 'percentile_99', 'percentile_99.9']),
    );
    expect(lat.results[0].ratios.tcp).toBeCloseTo(lat.results[0].netdirect.t_typical / lat.results[0].baselines.tcp.t_typical);
    const bw = JSON.parse(formatJson(bwReport()));
    expect(Object.keys(bw.results[0].netdirect)).toEqual(['MsgSize', 'n_iterations', 'BW_peak', 'BW_average', 'MsgRate']);
    expect(bw.options.warmup_iterations).toBe(warmupOf({ iters: bw.options.iterations, duration: bw.options.duration_s, test: bw.test }));
  });

  it('validateReport names what is missing', () => {
    const r = JSON.parse(formatJson(latReport(['tcp'])));
    delete r.results[1].baselines.tcp;
    delete r.results[0].netdirect.t_typical;
    expect(validateReport(r)).toEqual(expect.arrayContaining(['results[0].netdirect.t_typical', 'results[1].baselines.tcp.MsgSize']));
    expect(validateReport(null)).not.toEqual([]);
  });
});

describe('--plot SVG', () => {
  it('is well-formed XML with both panels, a log-x axis, a legend and units', () => {
    for (const r of [latReport(['tcp', 'node-net']), bwReport(['tcp'])]) {
      const svg = renderSvg(r);
      const doc = parseXml(svg);
      expect(doc.root).toBe('svg');
      expect(doc.attributes[0].xmlns).toBe('http://www.w3.org/2000/svg');
      expect(doc.elements).not.toContain('script');
      expect(doc.elements.filter((e) => e === 'path').length).toBeGreaterThanOrEqual(1 + r.options.compare.length);
      expect(doc.text).toContain('message size (bytes, log scale)');
      expect(doc.text).toContain('MiB/s (log scale)');
      expect(doc.text).toContain('µs (log scale)');
      for (const name of ['netdirect', ...r.options.compare]) expect(doc.text).toContain(name);
      expect(doc.text).toMatch(/Bandwidth/);
      expect(doc.text).toMatch(/Latency|Time per message/);
    }
  });

  it('draws the median-to-p99 band of a latency test, the derived panel dashed, and a ratio panel per run with baselines', () => {
    const lat = renderSvg(latReport(['tcp', 'node-net']));
    expect(lat).toMatch(/fill-opacity="0\.15"[^>]*><title>netdirect: median to 99th percentile/);
    expect(lat).toContain('Latency (measured: median, half round trip)');
    expect(lat).toContain('Bandwidth (derived: size / half round trip median latency)');
    expect(lat).toMatch(/stroke-dasharray="6 4"/);
    expect(lat).toMatch(/MiB\/s \(derived\)/);
    expect(lat).toContain('Ratio netdirect / baseline (median latency, same run)');
    expect(lat).toContain('below 1×: netdirect');
    expect(lat).toMatch(/>1×<\/text>/);
    const bw = renderSvg(bwReport(['tcp']));
    expect(bw).toContain('Bandwidth (measured: BW average)');
    expect(bw).not.toContain('median to 99th percentile');
    expect(bw).toContain('above 1×: netdirect');
    const alone = renderSvg(bwReport([]));
    expect(alone).not.toContain('Ratio netdirect');
  });

  it('labels ticks as numbers, not exponents', () => {
    expect(['0.01', '0.5', '1', '12.5', '980', '1k', '10k', '1.5M', '2G'].map((t) => num(Number(t.replace('k', 'e3').replace('M', 'e6').replace('G', 'e9'))))).toEqual([
      '0.01', '0.5', '1', '12.5', '980', '1k', '10k', '1.5M', '2G',
    ]);
    const ticks = [...renderSvg(latReport(['tcp'])).matchAll(/text-anchor="end">([^<]*)</g)].map((m) => m[1]);
    expect(ticks.length).toBeGreaterThan(4);
    for (const t of ticks) expect(t).toMatch(/^\d+(\.\d+)?[kMG]?×?$/);
  });

  it('escapes text and survives a single size and missing points', () => {
    const r = latReport(['tcp']);
    r.results = r.results.slice(0, 1);
    r.environment.provider = 'a<b>&"c"';
    expect(() => parseXml(renderSvg(r))).not.toThrow();
    r.results = [];
    expect(parseXml(renderSvg(r)).text).toContain('no data');
  });
});

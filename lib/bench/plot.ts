// --plot: a self-contained SVG (no scripts, no external fonts or styles) against message size (log-x):
//  1. the measured figure: latency (median, with a shaded band up to the 99th percentile) for a latency test,
//     bandwidth (BW average) for a bandwidth test;
//  2. the other figure derived from it (size / latency, or size / bandwidth), drawn dashed with hollow markers and
//     titled "derived", so it never reads as a measurement;
//  3. with baselines of the same run (--compare), the ratio netdirect / baseline per size, with its meaning.
// One line per series (netdirect and each baseline); ticks read as numbers (1k, 10k), not exponents.

import type { Report } from './report.js';
import { isLatencyStats, MIB, type Stats } from './stats.js';

const W = 760;
const PANEL_H = 300;
const RATIO_H = 240;
const M = { left: 78, right: 150, top: 44, bottom: 48 };
const COLORS: Record<string, string> = { netdirect: '#1f77b4', tcp: '#d62728', 'node-net': '#2ca02c', native: '#9467bd' };

function esc(s: string): string {
  return s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;');
}

function sizeLabel(b: number): string {
  if (b >= MIB && b % MIB === 0) return `${b / MIB}M`;
  if (b >= 1024 && b % 1024 === 0) return `${b / 1024}K`;
  return String(b);
}

/** A tick or tooltip value the way people write it: 0.01, 0.5, 12.5, 980, 1k, 10k, 1.5M. */
export function num(v: number): string {
  if (!Number.isFinite(v)) return String(v);
  const a = Math.abs(v);
  for (const [scale, suffix] of [[1e9, 'G'], [1e6, 'M'], [1e3, 'k']] as const) {
    if (a >= scale) return `${trim(v / scale)}${suffix}`;
  }
  return trim(v);
}
function trim(v: number): string {
  const a = Math.abs(v);
  const digits = a >= 100 ? 0 : a >= 10 ? 1 : a >= 1 ? 2 : Math.max(2, 1 - Math.floor(Math.log10(a || 1)));
  return String(Number(v.toFixed(digits)));
}

interface Series {
  name: string;
  points: Array<[number, number]>;
  /** Upper edge of a band per point (the 99th percentile), drawn shaded between the line and it. */
  upper?: Array<[number, number]>;
}

interface PanelStyle {
  /** Derived from the measured figure: dashed lines, hollow markers. */
  derived?: boolean;
  /** The y axis is a ratio on a log-2 scale with a reference line at 1. */
  ratio?: boolean;
  /** A line under the legend explaining the band or the ratio. */
  note?: string;
  height?: number;
}

function bandwidthOf(s: Stats): number {
  return isLatencyStats(s) ? s.MsgSize / (s.t_typical / 1e6) / MIB : s.BW_average;
}
function latencyOf(s: Stats): number {
  return isLatencyStats(s) ? s.t_typical : s.BW_average > 0 ? (s.MsgSize / (s.BW_average * MIB)) * 1e6 : NaN;
}

const usable = ([x, y]: [number, number]) => x > 0 && y > 0 && Number.isFinite(y);

function panel(y0: number, title: string, unit: string, series: Series[], style: PanelStyle = {}): string {
  const pts = series.flatMap((s) => [...s.points, ...(s.upper ?? [])]).filter(usable);
  const out: string[] = [];
  const pw = W - M.left - M.right;
  const ph = (style.height ?? PANEL_H) - M.top - M.bottom;
  const top = y0 + M.top;
  out.push(`<text x="${M.left}" y="${y0 + 26}" font-size="15" font-weight="bold">${esc(title)}</text>`);
  out.push(`<rect x="${M.left}" y="${top}" width="${pw}" height="${ph}" fill="none" stroke="#444"/>`);
  if (pts.length === 0) {
    out.push(`<text x="${M.left + pw / 2}" y="${top + ph / 2}" text-anchor="middle">no data</text>`);
    return out.join('\n');
  }
  let xmin = Math.log2(Math.min(...pts.map((p) => p[0])));
  let xmax = Math.log2(Math.max(...pts.map((p) => p[0])));
  if (xmax - xmin < 1) {
    xmin -= 1;
    xmax += 1;
  }
  // y: powers of ten; a ratio spanning less than 64× gets powers of two around its line at 1.
  const ys = pts.map((p) => p[1]);
  const base = style.ratio && Math.max(...ys, 1) / Math.min(...ys, 1) < 64 ? 2 : 10;
  const lg = (v: number) => Math.log(v) / Math.log(base);
  let ymin = Math.floor(lg(Math.min(...pts.map((p) => p[1]), ...(style.ratio ? [1] : []))));
  let ymax = Math.ceil(lg(Math.max(...pts.map((p) => p[1]), ...(style.ratio ? [1] : []))));
  if (ymax - ymin < 1) {
    ymin -= 1;
    ymax += 1;
  }
  const X = (x: number) => M.left + ((Math.log2(x) - xmin) / (xmax - xmin)) * pw;
  const Y = (y: number) => top + ph - ((lg(y) - ymin) / (ymax - ymin)) * ph;
  // Grid and ticks: x at powers of two (every other one when crowded), y at powers of ten.
  const step = xmax - xmin > 12 ? 2 : 1;
  for (let e = Math.ceil(xmin); e <= Math.floor(xmax); e += step) {
    const x = X(2 ** e);
    out.push(`<line x1="${x.toFixed(1)}" y1="${top}" x2="${x.toFixed(1)}" y2="${top + ph}" stroke="#ddd"/>`);
    out.push(`<text x="${x.toFixed(1)}" y="${top + ph + 16}" font-size="11" text-anchor="middle">${sizeLabel(2 ** e)}</text>`);
  }
  for (let e = ymin; e <= ymax; e++) {
    const y = Y(base ** e);
    const one = style.ratio && e === 0;
    out.push(`<line x1="${M.left}" y1="${y.toFixed(1)}" x2="${M.left + pw}" y2="${y.toFixed(1)}" stroke="${one ? '#888' : '#ddd'}"${one ? ' stroke-width="1.5"' : ''}/>`);
    out.push(`<text x="${M.left - 6}" y="${(y + 4).toFixed(1)}" font-size="11" text-anchor="end">${style.ratio ? `${num(base ** e)}×` : num(base ** e)}</text>`);
  }
  out.push(`<text x="${M.left + pw / 2}" y="${top + ph + 36}" font-size="12" text-anchor="middle">message size (bytes, log scale)</text>`);
  out.push(
    `<text x="18" y="${top + ph / 2}" font-size="12" text-anchor="middle" transform="rotate(-90 18 ${top + ph / 2})">${esc(unit)} (log scale)</text>`,
  );
  const dash = style.derived ? ' stroke-dasharray="6 4"' : '';
  series.forEach((s, i) => {
    const color = COLORS[s.name] ?? '#555';
    const good = s.points.filter(usable);
    const upper = (s.upper ?? []).filter(usable);
    if (upper.length > 1 && upper.length === good.length) {
      // The band: along the medians, back along the 99th percentiles.
      const edge = [...good, ...[...upper].reverse()].map(([x, y], j) => `${j ? 'L' : 'M'}${X(x).toFixed(1)},${Y(y).toFixed(1)}`);
      out.push(`<path d="${edge.join(' ')} Z" fill="${color}" fill-opacity="0.15" stroke="none"><title>${esc(`${s.name}: median to 99th percentile`)}</title></path>`);
    }
    if (good.length > 1) {
      const d = good.map(([x, y], j) => `${j ? 'L' : 'M'}${X(x).toFixed(1)},${Y(y).toFixed(1)}`).join(' ');
      out.push(`<path d="${d}" fill="none" stroke="${color}" stroke-width="2"${dash}/>`);
    }
    for (const [x, y] of good) {
      const fill = style.derived ? `fill="#fff" stroke="${color}" stroke-width="1.5"` : `fill="${color}"`;
      const what = style.ratio ? `${num(y)}×` : `${num(y)} ${unit}${style.derived ? ' (derived)' : ''}`;
      out.push(`<circle cx="${X(x).toFixed(1)}" cy="${Y(y).toFixed(1)}" r="3" ${fill}><title>${esc(`${s.name}: ${x} B, ${what}`)}</title></circle>`);
    }
    const ly = top + 14 + i * 20;
    const lx = M.left + pw + 14;
    out.push(`<line x1="${lx}" y1="${ly}" x2="${lx + 22}" y2="${ly}" stroke="${color}" stroke-width="2"${dash}/>`);
    out.push(`<text x="${lx + 28}" y="${ly + 4}" font-size="12">${esc(s.name)}</text>`);
  });
  if (style.note) {
    const lx = M.left + pw + 14;
    style.note.split('\n').forEach((line, j) => {
      out.push(`<text x="${lx}" y="${top + 20 + series.length * 20 + j * 14}" font-size="10" fill="#555">${esc(line)}</text>`);
    });
  }
  return out.join('\n');
}

/**
 * The SVG document for a report (`ndbench --plot`): the headline figure per message size for netdirect and
 * each baseline.
 *
 * @param report - a report from runClient(), runLoopback() or a saved --out_json file.
 * @returns the SVG text.
 */
export function renderSvg(report: Report): string {
  const names = ['netdirect', ...report.options.compare];
  const statsOf = (name: string) =>
    report.results
      .map((r) => [r.size, (name === 'netdirect' ? r.netdirect : r.baselines[name as keyof typeof r.baselines]) as Stats | undefined] as const)
      .filter((p): p is readonly [number, Stats] => p[1] !== undefined);
  const series = (f: (s: Stats) => number, upper?: (s: Stats) => number): Series[] =>
    names.map((name) => ({
      name,
      points: statsOf(name).map(([size, s]) => [size, f(s)] as [number, number]),
      upper: upper && statsOf(name).map(([size, s]) => [size, upper(s)] as [number, number]),
    }));
  const lat = report.kind === 'latency';
  const latDef = report.test === 'read_lat' ? 'full round trip' : 'half round trip';
  const p99 = (s: Stats) => (isLatencyStats(s) ? s.percentile_99 : NaN);
  const panels = lat
    ? [
        { title: `Latency (measured: median, ${latDef})`, unit: 'µs', series: series(latencyOf, p99), style: { note: 'shaded: median to\n99th percentile' } },
        { title: `Bandwidth (derived: size / ${latDef} median latency)`, unit: 'MiB/s', series: series(bandwidthOf), style: { derived: true } },
      ]
    : [
        { title: 'Bandwidth (measured: BW average)', unit: 'MiB/s', series: series(bandwidthOf), style: {} },
        { title: 'Time per message (derived: size / bandwidth)', unit: 'µs', series: series(latencyOf), style: { derived: true } },
      ];
  const ratios: Series[] = report.options.compare.map((name) => ({
    name,
    points: report.results
      .map((r) => [r.size, r.ratios[name as keyof typeof r.ratios] ?? NaN] as [number, number])
      .filter(usable),
  }));
  const ratioNote = lat ? 'below 1×: netdirect\nis faster' : 'above 1×: netdirect\nis faster';
  const H = 2 * PANEL_H + (ratios.length ? RATIO_H : 0) + 50;
  const caption = `ndbench ${report.test} — ${report.verb}, provider ${report.environment.provider ?? report.options.provider}, completion ${report.environment.completion ?? report.options.completion}, CRC ${report.options.crc}, ${report.environment.date}`;
  return [
    '<?xml version="1.0" encoding="UTF-8"?>',
    `<svg xmlns="http://www.w3.org/2000/svg" width="${W}" height="${H}" viewBox="0 0 ${W} ${H}" font-family="Helvetica, Arial, sans-serif">`,
    `<title>${esc(caption)}</title>`,
    `<rect width="${W}" height="${H}" fill="#fff"/>`,
    `<text x="${W / 2}" y="20" font-size="13" text-anchor="middle">${esc(caption)}</text>`,
    `<g transform="translate(0,20)">`,
    panel(0, panels[0].title, panels[0].unit, panels[0].series, panels[0].style),
    panel(PANEL_H, panels[1].title, panels[1].unit, panels[1].series, panels[1].style),
    ...(ratios.length
      ? [panel(2 * PANEL_H, `Ratio netdirect / baseline (${lat ? 'median latency' : 'BW average'}, same run)`, 'ratio', ratios, { ratio: true, note: ratioNote, height: RATIO_H })]
      : []),
    '</g>',
    '</svg>',
    '',
  ].join('\n');
}

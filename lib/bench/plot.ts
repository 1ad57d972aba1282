// --plot: a self-contained SVG (no scripts, no external fonts or styles) with two panels against message size
// (log-x): bandwidth and latency, one line per series (netdirect and each baseline of the same run). A latency
// test measures latency, and its bandwidth panel shows size / latency; a bandwidth test measures bandwidth, and
// its latency panel shows the time per message (size / bandwidth). Derived panels say so in their title.

import type { Report } from './report.js';
import { isLatencyStats, MIB, type Stats } from './stats.js';

const W = 760;
const PANEL_H = 300;
const M = { left: 78, right: 150, top: 44, bottom: 48 };
const COLORS: Record<string, string> = { netdirect: '#1f77b4', tcp: '#d62728', 'node-net': '#2ca02c' };

function esc(s: string): string {
  return s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;');
}

function sizeLabel(b: number): string {
  if (b >= MIB && b % MIB === 0) return `${b / MIB}M`;
  if (b >= 1024 && b % 1024 === 0) return `${b / 1024}K`;
  return String(b);
}

function num(v: number): string {
  if (v >= 1000) return v.toExponential(0).replace('e+', 'e');
  if (v >= 1) return String(Math.round(v * 100) / 100);
  return v.toPrecision(2);
}

interface Series {
  name: string;
  points: Array<[number, number]>;
}

function bandwidthOf(s: Stats): number {
  return isLatencyStats(s) ? s.MsgSize / (s.t_typical / 1e6) / MIB : s.BW_average;
}
function latencyOf(s: Stats): number {
  return isLatencyStats(s) ? s.t_typical : s.BW_average > 0 ? (s.MsgSize / (s.BW_average * MIB)) * 1e6 : NaN;
}

function panel(y0: number, title: string, unit: string, series: Series[]): string {
  const pts = series.flatMap((s) => s.points).filter(([x, y]) => x > 0 && y > 0 && Number.isFinite(y));
  const out: string[] = [];
  const pw = W - M.left - M.right;
  const ph = PANEL_H - M.top - M.bottom;
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
  let ymin = Math.floor(Math.log10(Math.min(...pts.map((p) => p[1]))));
  let ymax = Math.ceil(Math.log10(Math.max(...pts.map((p) => p[1]))));
  if (ymax - ymin < 1) {
    ymin -= 1;
    ymax += 1;
  }
  const X = (x: number) => M.left + ((Math.log2(x) - xmin) / (xmax - xmin)) * pw;
  const Y = (y: number) => top + ph - ((Math.log10(y) - ymin) / (ymax - ymin)) * ph;
  // Grid and ticks: x at powers of two (every other one when crowded), y at powers of ten.
  const step = xmax - xmin > 12 ? 2 : 1;
  for (let e = Math.ceil(xmin); e <= Math.floor(xmax); e += step) {
    const x = X(2 ** e);
    out.push(`<line x1="${x.toFixed(1)}" y1="${top}" x2="${x.toFixed(1)}" y2="${top + ph}" stroke="#ddd"/>`);
    out.push(`<text x="${x.toFixed(1)}" y="${top + ph + 16}" font-size="11" text-anchor="middle">${sizeLabel(2 ** e)}</text>`);
  }
  for (let e = ymin; e <= ymax; e++) {
    const y = Y(10 ** e);
    out.push(`<line x1="${M.left}" y1="${y.toFixed(1)}" x2="${M.left + pw}" y2="${y.toFixed(1)}" stroke="#ddd"/>`);
    out.push(`<text x="${M.left - 6}" y="${(y + 4).toFixed(1)}" font-size="11" text-anchor="end">${num(10 ** e)}</text>`);
  }
  out.push(`<text x="${M.left + pw / 2}" y="${top + ph + 36}" font-size="12" text-anchor="middle">message size (bytes, log scale)</text>`);
  out.push(
    `<text x="18" y="${top + ph / 2}" font-size="12" text-anchor="middle" transform="rotate(-90 18 ${top + ph / 2})">${esc(unit)} (log scale)</text>`,
  );
  series.forEach((s, i) => {
    const color = COLORS[s.name] ?? '#555';
    const good = s.points.filter(([x, y]) => x > 0 && y > 0 && Number.isFinite(y));
    if (good.length > 1) {
      const d = good.map(([x, y], j) => `${j ? 'L' : 'M'}${X(x).toFixed(1)},${Y(y).toFixed(1)}`).join(' ');
      out.push(`<path d="${d}" fill="none" stroke="${color}" stroke-width="2"/>`);
    }
    for (const [x, y] of good) {
      out.push(`<circle cx="${X(x).toFixed(1)}" cy="${Y(y).toFixed(1)}" r="3" fill="${color}"><title>${esc(`${s.name}: ${x} B, ${num(y)} ${unit}`)}</title></circle>`);
    }
    const ly = top + 14 + i * 20;
    const lx = M.left + pw + 14;
    out.push(`<line x1="${lx}" y1="${ly}" x2="${lx + 22}" y2="${ly}" stroke="${color}" stroke-width="2"/>`);
    out.push(`<text x="${lx + 28}" y="${ly + 4}" font-size="12">${esc(s.name)}</text>`);
  });
  return out.join('\n');
}

/** The SVG document for a report. */
export function renderSvg(report: Report): string {
  const names = ['netdirect', ...report.options.compare];
  const series = (f: (s: Stats) => number): Series[] =>
    names.map((name) => ({
      name,
      points: report.results
        .map((r) => [r.size, (name === 'netdirect' ? r.netdirect : r.baselines[name as keyof typeof r.baselines]) as Stats | undefined] as const)
        .filter((p): p is readonly [number, Stats] => p[1] !== undefined)
        .map(([size, s]) => [size, f(s)] as [number, number]),
    }));
  const lat = report.kind === 'latency';
  const latDef = report.test === 'read_lat' ? 'full round trip' : 'half round trip';
  const bwTitle = lat ? `Bandwidth (derived: size / ${latDef} latency)` : 'Bandwidth (measured, BW average)';
  const latTitle = lat ? `Latency (measured, t_typical = median, ${latDef})` : 'Time per message (derived: size / bandwidth)';
  const H = 2 * PANEL_H + 50;
  const caption = `ndbench ${report.test} — ${report.verb}, provider ${report.environment.provider ?? report.options.provider}, completion ${report.options.completion}, CRC ${report.options.crc}, ${report.environment.date}`;
  return [
    '<?xml version="1.0" encoding="UTF-8"?>',
    `<svg xmlns="http://www.w3.org/2000/svg" width="${W}" height="${H}" viewBox="0 0 ${W} ${H}" font-family="Helvetica, Arial, sans-serif">`,
    `<title>${esc(caption)}</title>`,
    `<rect width="${W}" height="${H}" fill="#fff"/>`,
    `<text x="${W / 2}" y="20" font-size="13" text-anchor="middle">${esc(caption)}</text>`,
    `<g transform="translate(0,20)">`,
    panel(0, bwTitle, 'MiB/s', series(bandwidthOf)),
    panel(PANEL_H, latTitle, 'µs', series(latencyOf)),
    '</g>',
    '</svg>',
    '',
  ].join('\n');
}

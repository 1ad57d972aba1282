// Result records and the arithmetic behind them, as perftest defines it: latency samples sorted, the top
// LAT_MEASURE_TAIL (2) dropped, t_typical = median; bandwidth in MiB/s (2^20 B) or Gb/s (10^9 bit), MsgRate in Mpps.

import { getHeapStatistics } from 'node:v8';

/** Slowest latency samples dropped before the statistics (perftest's LAT_MEASURE_TAIL). */
export const LAT_MEASURE_TAIL = 2;
export const MIB = 1024 * 1024;

/** perftest's latency columns, µs. */
export interface LatencyStats {
  MsgSize: number;
  n_iterations: number;
  t_min: number;
  t_max: number;
  t_typical: number;
  t_avg: number;
  t_stdev: number;
  percentile_99: number;
  'percentile_99.9': number;
  /** Transactions per second (duration mode's column; 1e6 / t_avg). */
  tps: number;
}

/** perftest's bandwidth columns: MiB/s (BW_peak, BW_average) and Mpps. */
export interface BandwidthStats {
  MsgSize: number;
  n_iterations: number;
  BW_peak: number;
  BW_average: number;
  MsgRate: number;
  /**
   * JS heap allocated per completed message during the phase, bytes (V8 heap statistics, see HeapMeter); absent when
   * the phase was too short to sample.
   */
  heap_bytes_per_op?: number;
}

/** The statistics of one message size: latency (µs) or bandwidth (MiB/s, Mpps). */
export type Stats = LatencyStats | BandwidthStats;

/** True for latency statistics (they have t_typical). */
export function isLatencyStats(s: Stats): s is LatencyStats {
  return 't_typical' in s;
}

/**
 * Percentile of an ascending array (nearest rank, as perftest indexes its sorted array).
 *
 * @param sorted - the values, ascending.
 * @param p - the percentile, 0..100.
 * @returns the value at that rank; NaN for an empty array.
 */
export function percentile(sorted: ArrayLike<number>, p: number): number {
  if (sorted.length === 0) return NaN;
  const i = Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1));
  return sorted[i];
}

/**
 * The median (the mean of the two middle values for an even count).
 *
 * @param values - in any order (copied, not sorted in place).
 * @returns the median; NaN for no values.
 */
export function median(values: ArrayLike<number>): number {
  const a = Float64Array.from(values as ArrayLike<number>).sort();
  if (a.length === 0) return NaN;
  const m = a.length >> 1;
  return a.length % 2 ? a[m] : (a[m - 1] + a[m]) / 2;
}

/**
 * Latency statistics from per-iteration times in nanoseconds; `divisor` 2 turns round trips into half round
 * trips (write/send lat), 1 keeps them (read lat), as perftest's rtt_factor.
 *
 * @param size - message size in bytes.
 * @param samplesNs - one time per iteration, in ns.
 * @param divisor - 2 for ping-pong tests, 1 for read_lat.
 * @returns perftest's latency columns in µs (the slowest LAT_MEASURE_TAIL samples dropped).
 */
export function latencyStats(size: number, samplesNs: ArrayLike<number>, divisor: number): LatencyStats {
  const all = Float64Array.from(samplesNs as ArrayLike<number>).sort();
  const keep = all.length > LAT_MEASURE_TAIL + 1 ? all.subarray(0, all.length - LAT_MEASURE_TAIL) : all;
  const us = keep.map((v) => v / divisor / 1000);
  let sum = 0;
  for (const v of us) sum += v;
  const avg = us.length ? sum / us.length : NaN;
  let sq = 0;
  for (const v of us) sq += (v - avg) * (v - avg);
  return {
    MsgSize: size,
    n_iterations: all.length,
    t_min: us[0],
    t_max: us[us.length - 1],
    t_typical: median(us),
    t_avg: avg,
    t_stdev: us.length > 1 ? Math.sqrt(sq / (us.length - 1)) : 0,
    percentile_99: percentile(us, 99),
    'percentile_99.9': percentile(us, 99.9),
    tps: avg > 0 ? 1e6 / avg : 0,
  };
}

/**
 * Bandwidth from a count of messages moved in `elapsedNs`; `peakMiBs` from the best window, if measured.
 *
 * @param size - message size in bytes.
 * @param iterations - messages moved.
 * @param elapsedNs - the time they took, in ns.
 * @param peakMiBs - the best windowed rate in MiB/s (default: the average).
 * @returns BW_peak and BW_average in MiB/s, MsgRate in Mpps.
 */
export function bandwidthStats(size: number, iterations: number, elapsedNs: number, peakMiBs?: number): BandwidthStats {
  const seconds = elapsedNs / 1e9;
  const avg = seconds > 0 ? (size * iterations) / seconds / MIB : 0;
  return {
    MsgSize: size,
    n_iterations: iterations,
    BW_peak: Math.max(peakMiBs ?? avg, avg),
    BW_average: avg,
    MsgRate: seconds > 0 ? iterations / seconds / 1e6 : 0,
  };
}

/**
 * JS heap allocated per operation in the steady state of a phase: V8's used_heap_size is read every `every`
 * operations, the growth between two reads is what was allocated in between unless a garbage collection ran (the
 * heap shrank: that interval is left out), and the figure is the median over the intervals, so that one-off
 * allocations (code the JIT compiles, a table that grows once) do not count. Each read allocates its statistics
 * object (a few hundred bytes, ~0.04 bytes per operation at the default interval): what one read allocates is
 * measured once (two reads back to back) and taken off every interval, so that a loop that allocates nothing shows 0.
 */
export class HeapMeter {
  private last = -1;
  private lastOps = 0;
  private next = 0;
  private readonly rates: number[] = [];
  private readonly self: number;
  constructor(private readonly every = 16384) {
    let self = Infinity;
    // The smallest of a few tries: a garbage collection between two reads makes one negative, a lazy compile large.
    for (let i = 0; i < 3; i++) {
      const a = getHeapStatistics().used_heap_size;
      const b = getHeapStatistics().used_heap_size;
      if (b >= a) self = Math.min(self, b - a);
    }
    this.self = Number.isFinite(self) ? self : 0;
  }

  /** Call with the operations done so far; reads the heap when another `every` have completed. */
  sample(done: number): void {
    if (done < this.next) return;
    const used = getHeapStatistics().used_heap_size;
    if (this.last >= 0 && used >= this.last && done > this.lastOps) this.rates.push(Math.max(0, used - this.last - this.self) / (done - this.lastOps));
    this.last = used;
    this.lastOps = done;
    this.next = done + this.every;
  }

  /** Median bytes per operation over the intervals counted, or undefined when none was. */
  perOp(): number | undefined {
    if (this.rates.length === 0) return undefined;
    const r = [...this.rates].sort((x, y) => x - y);
    const m = r.length >> 1;
    return r.length % 2 === 1 ? r[m] : (r[m - 1] + r[m]) / 2;
  }
}

/**
 * (time ns, messages done so far) marks for peakFromMarks, in typed arrays, at least `step` messages apart: reading
 * the clock allocates (performance.now() does on Node 20), so a mark per poll would show in HeapMeter's figure.
 */
export class Marks {
  private t = new Float64Array(4096);
  private d = new Float64Array(4096);
  private n = 0;
  private last = -Infinity;
  private readonly t0 = performance.now();
  constructor(private readonly step = 1) {}

  push(done: number): void {
    if (done - this.last < this.step) return;
    this.last = done;
    if (this.n === this.t.length) {
      const t = new Float64Array(this.n * 2);
      const d = new Float64Array(this.n * 2);
      t.set(this.t);
      d.set(this.d);
      this.t = t;
      this.d = d;
    }
    this.t[this.n] = (performance.now() - this.t0) * 1e6;
    this.d[this.n++] = done;
  }

  list(): Array<[number, number]> {
    const out: Array<[number, number]> = [];
    for (let i = 0; i < this.n; i++) out.push([this.t[i], this.d[i]]);
    return out;
  }
}

/** Best rate over windows of at least `minOps` messages, from (time ns, messages done so far) marks. */
export function peakFromMarks(size: number, marks: Array<[number, number]>, minOps: number): number | undefined {
  let best: number | undefined;
  let j = 0;
  for (let i = 1; i < marks.length; i++) {
    while (j < i - 1 && marks[i][1] - marks[j + 1][1] >= minOps) j++;
    const ops = marks[i][1] - marks[j][1];
    const dt = marks[i][0] - marks[j][0];
    if (ops >= minOps && dt > 0) {
      const r = (ops * size) / (dt / 1e9) / MIB;
      if (best === undefined || r > best) best = r;
    }
  }
  return best;
}

/** MiB/s → Gb/s (perftest: Factor = 10^9 / (2^20 * 8)). */
export function toGbits(mibs: number): number {
  return (mibs * MIB * 8) / 1e9;
}

/** The figure a comparison uses: t_typical for latency, BW_average for bandwidth. */
export function headline(s: Stats): number {
  return isLatencyStats(s) ? s.t_typical : s.BW_average;
}

/** perftest -b: both directions added (peak, average and message rate of each side's own stream). */
export function sumBandwidth(a: BandwidthStats, b: BandwidthStats): BandwidthStats {
  return {
    MsgSize: a.MsgSize,
    n_iterations: a.n_iterations + b.n_iterations,
    BW_peak: a.BW_peak + b.BW_peak,
    BW_average: a.BW_average + b.BW_average,
    MsgRate: a.MsgRate + b.MsgRate,
  };
}

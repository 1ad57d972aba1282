// netdirect/bench: the benchmark library the `ndbench` CLI is built on.

export {
  TESTS,
  BASELINES,
  DEFAULT_PORT,
  USAGE,
  UsageError,
  allSizes,
  expandShort,
  isLatency,
  mpiRank,
  parseArgs,
  tcpMode,
  type Baseline,
  type BenchOptions,
  type Format,
  type TestName,
} from './options.js';
export {
  LAT_MEASURE_TAIL,
  bandwidthStats,
  headline,
  isLatencyStats,
  latencyStats,
  median,
  percentile,
  sumBandwidth,
  toGbits,
  type BandwidthStats,
  type LatencyStats,
  type Stats,
} from './stats.js';
export {
  REPORT_SCHEMA,
  RESULT_LINE,
  addResult,
  figurePrinter,
  sampleListing,
  formatJson,
  formatReport,
  newReport,
  osuPrinter,
  perftestPrinter,
  validateReport,
  type PerftestPrintOptions,
  type Printer,
  type Report,
  type SizeResult,
} from './report.js';
export { renderSvg } from './plot.js';
export { baselineClient, baselineServer, loadTcpAddon, patternOf, statsOf, type PhaseParams, type RawResult } from './baselines.js';
export { defaultIo, runClient, runLoopback, runServer, type RunIo } from './run.js';
export { main } from './main.js';
export { OSU_TESTS, OSU_USAGE, TARGETS, isOsuTest, parseOsuArgs, runOsu, osuHeader, osuRow, rowsOf, targetLines, type OsuOptions, type OsuRow, type OsuTest, type Figure, type Target } from './osu.js';

#!/usr/bin/env node
'use strict';
// The sanitizer tier (`npm run test:asan`): builds the addon, netdirect_soft and the native tests with
// AddressSanitizer + UndefinedBehaviorSanitizer into build-asan/ (scripts/build-asan.js, CMake option
// NETDIRECT_SANITIZE), runs every native test (build-asan/tests/*_test), then the vitest suite with node loading
// build-asan/Release/netdirect.node (NETDIRECT_ADDON_PATH, lib/binding.ts). node itself is not instrumented, so the
// ASan runtime is preloaded (LD_PRELOAD) into it and into every process it starts (test fixtures, peers), with leak
// detection off there (node's own allocations; the native tests keep it on).
// Every ASan report is also written to build-asan/reports/ (log_path), and any file there fails the run, so a report
// in a child process whose exit status a test tolerates is not lost. UBSan is built without recovery
// (-fno-sanitize-recover=all): its first finding ends the process with exit code 23, as ASan's does; its report goes
// to stderr only (GCC 12's UBSan runtime ignores log_path next to ASan's).
// Options: --no-build (reuse build-asan/), --native-only, --vitest-only, then vitest arguments (files, -t ...).
// Skipped by the tier: test/build/ (native.test.ts runs build/tests, which this script runs from build-asan/ itself;
// pack.test.ts builds the release prebuilds, uninstrumented) and the launcher tiers (see runVitest).
const { spawnSync } = require('node:child_process');
const fs = require('node:fs');
const path = require('node:path');
const { build, out } = require('./build-asan');

const root = path.resolve(__dirname, '..');
const reports = path.join(out, 'reports');

function compilerRuntime(name) {
  // The runtime of the compiler that built build-asan/ (CMAKE_CXX_COMPILER), e.g. /usr/lib/gcc/x86_64-linux-gnu/12/libasan.so.
  let cxx = 'g++';
  try {
    const m = /^CMAKE_CXX_COMPILER:\w+=(.*)$/m.exec(fs.readFileSync(path.join(out, 'CMakeCache.txt'), 'utf8'));
    if (m && m[1].trim()) cxx = m[1].trim();
  } catch {
    // Not configured yet: the default compiler.
  }
  const r = spawnSync(cxx, [`-print-file-name=${name}`], { encoding: 'utf8' });
  const file = (r.stdout || '').trim();
  if (r.status !== 0 || !path.isAbsolute(file) || !fs.existsSync(file)) {
    throw new Error(`netdirect: cannot find ${name} of ${cxx} (install libasan / libubsan, e.g. apt-get install g++)`);
  }
  return file;
}

function sanitizerEnv({ leaks }) {
  const common = `log_path=${path.join(reports, 'report')}:log_exe_name=1`;
  return {
    // abort_on_error=0, exitcode 23: a sanitizer death is a plain non-zero exit, distinct from a signal.
    ASAN_OPTIONS: [`detect_leaks=${leaks ? 1 : 0}`, 'halt_on_error=1', 'exitcode=23', 'check_initialization_order=1',
      'strict_init_order=1', common].join(':'),
    UBSAN_OPTIONS: ['print_stacktrace=1', 'halt_on_error=1', 'exitcode=23'].join(':'),
    LSAN_OPTIONS: `suppressions=${path.join(root, 'test', 'asan', 'lsan.supp')}`,
  };
}

function readReports() {
  if (!fs.existsSync(reports)) return [];
  return fs.readdirSync(reports).sort().map((f) => ({ file: f, text: fs.readFileSync(path.join(reports, f), 'utf8') }));
}

function runNative() {
  const dir = path.join(out, 'tests');
  const tests = fs.readdirSync(dir).filter((f) => f.endsWith('_test')).sort();
  const env = { ...process.env, ...sanitizerEnv({ leaks: true }) };
  let failed = 0;
  for (const t of tests) {
    const started = Date.now();
    const r = spawnSync(path.join(dir, t), [], { cwd: root, env, encoding: 'utf8', timeout: 600_000 });
    const ok = r.status === 0 && !r.error;
    console.log(`${ok ? 'ok  ' : 'FAIL'} ${t} (${((Date.now() - started) / 1000).toFixed(1)} s)`);
    if (!ok) {
      failed++;
      process.stdout.write(`${r.stdout || ''}${r.stderr || ''}`);
      console.log(`${t}: exit ${r.status} signal ${r.signal}${r.error ? ` (${r.error.message})` : ''}`);
    }
  }
  return failed;
}

function runVitest(args) {
  const vitest = path.join(path.dirname(require.resolve('vitest/package.json', { paths: [root] })), 'vitest.mjs');
  const env = {
    ...process.env,
    ...sanitizerEnv({ leaks: false }),
    LD_PRELOAD: [compilerRuntime('libasan.so'), process.env.LD_PRELOAD].filter(Boolean).join(':'),
    NETDIRECT_ADDON_PATH: path.join(out, 'Release', 'netdirect.node'),
    NETDIRECT_P2P_RACE_CONNECTIONS: process.env.NETDIRECT_P2P_RACE_CONNECTIONS || '1500',
    NETDIRECT_VITEST_REPORT: path.join(out, 'vitest-report.json'), // with CI set (vitest.config.mts), not build/'s
  };
  // The launcher tiers (test/job-slurm.test.ts, test/job-launchers.test.ts) check Slurm's, MPICH's and Open MPI's
  // launchers, not native code the job tests elsewhere do not run: under the preloaded runtime, srun, slurmd and
  // Open MPI's orted would carry ASan into programs that are not ours.
  env.NETDIRECT_TEST_EXCLUDE = 'test/build/**,test/job-slurm.test.ts,test/job-launchers.test.ts';
  const r = spawnSync(process.execPath, [vitest, 'run', ...args],
    { cwd: root, env, stdio: 'inherit' });
  return r.status === 0 ? 0 : 1;
}

function main(argv) {
  const flags = new Set(argv.filter((a) => a === '--no-build' || a === '--native-only' || a === '--vitest-only'));
  const rest = argv.filter((a) => !flags.has(a));
  const started = Date.now();
  if (!flags.has('--no-build')) {
    if (build('build') !== 0) return 1;
    // dist/ for the tests that run the compiled package (cli, fixtures that import dist/).
    const ts = spawnSync(process.execPath, [path.join(__dirname, 'build-ts.js')], { cwd: root, stdio: 'inherit' });
    if (ts.status !== 0) return 1;
  }
  fs.rmSync(reports, { recursive: true, force: true });
  fs.mkdirSync(reports, { recursive: true });
  let failed = 0;
  if (!flags.has('--vitest-only')) {
    console.log('\n=== native tests (build-asan/tests/)');
    failed += runNative();
  }
  if (!flags.has('--native-only')) {
    console.log('\n=== vitest with build-asan/Release/netdirect.node');
    failed += runVitest(rest);
  }
  const found = readReports();
  for (const r of found) console.log(`\n--- sanitizer report ${path.join('build-asan', 'reports', r.file)}\n${r.text}`);
  const secs = ((Date.now() - started) / 1000).toFixed(0);
  if (found.length > 0) {
    console.log(`\nsanitizer tier: ${found.length} sanitizer report(s) (above), ${secs} s`);
    return 1;
  }
  console.log(`\nsanitizer tier: ${failed ? 'FAILED' : 'passed'}, no sanitizer reports, ${secs} s`);
  return failed ? 1 : 0;
}

if (require.main === module) {
  process.exitCode = main(process.argv.slice(2));
}

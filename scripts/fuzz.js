#!/usr/bin/env node
'use strict';
// The fuzzing tier (test/fuzz/README.md): builds the libFuzzer targets (test/fuzz/*_fuzz.cc, CMake option
// NETDIRECT_FUZZ, Clang with AddressSanitizer + UndefinedBehaviorSanitizer) into build-fuzz/, replays the committed
// seed corpus (test/fuzz/corpus/<target>/) and fuzzes each target for a bounded time. Any crash, sanitizer report,
// leak, timeout or failed invariant fails the run, and the input is printed (base64 and hex) so that it can be
// added to the corpus.
//
//   npm run fuzz [-- [target|all] [seconds]]     all targets, 60 s each by default
//   node scripts/fuzz.js --replay [target|all]   only build and replay the corpus
//   node scripts/fuzz.js --build                 only build
// Environment: NETDIRECT_FUZZ_CC / NETDIRECT_FUZZ_CXX (default clang / clang++), CMAKE_BUILD_PARALLEL_LEVEL.
// New inputs a run finds go to build-fuzz/corpus/<target>/ (not committed); crash inputs to
// build-fuzz/artifacts/<target>/.
const { spawnSync } = require('node:child_process');
const fs = require('node:fs');
const path = require('node:path');

const root = path.resolve(__dirname, '..');
const out = path.join(root, 'build-fuzz');
const corpusRoot = path.join(root, 'test', 'fuzz', 'corpus');

function targets() {
  return fs
    .readdirSync(path.join(root, 'test', 'fuzz'))
    .filter((f) => f.endsWith('_fuzz.cc'))
    .map((f) => f.slice(0, -'_fuzz.cc'.length))
    .sort();
}

function run(cmd, args, opts = {}) {
  const r = spawnSync(cmd, args, { stdio: 'inherit', ...opts });
  if (r.error) throw new Error(`${cmd}: ${r.error.message}`);
  return r.status ?? 1;
}

function build(only) {
  const cc = process.env.NETDIRECT_FUZZ_CC || 'clang';
  const cxx = process.env.NETDIRECT_FUZZ_CXX || 'clang++';
  if (spawnSync(cxx, ['--version'], { stdio: 'ignore' }).status !== 0) {
    throw new Error(`${cxx} not found: the fuzzing tier needs Clang with libFuzzer (Debian: apt-get install clang libclang-rt-14-dev)`);
  }
  if (!fs.existsSync(path.join(out, 'CMakeCache.txt'))) {
    const rc = run('cmake', ['-S', root, '-B', out, '-DNETDIRECT_FUZZ=ON', '-DNETDIRECT_BUILD_TESTS=OFF',
      '-DCMAKE_BUILD_TYPE=Release', `-DCMAKE_C_COMPILER=${cc}`, `-DCMAKE_CXX_COMPILER=${cxx}`]);
    if (rc !== 0) throw new Error('cmake configure of build-fuzz/ failed');
  }
  const target = only ? `${only}_fuzz` : 'netdirect_fuzz';
  if (run('cmake', ['--build', out, '--target', target]) !== 0) throw new Error(`building ${target} failed`);
}

function binary(t) {
  return path.join(out, 'fuzz', `${t}_fuzz`);
}

const env = {
  ...process.env,
  // libFuzzer reports these as crashes (and saves the input); stacks readable.
  ASAN_OPTIONS: process.env.ASAN_OPTIONS || 'detect_leaks=1:abort_on_error=1:symbolize=1',
  UBSAN_OPTIONS: process.env.UBSAN_OPTIONS || 'print_stacktrace=1:halt_on_error=1',
};

// Prints what a failing run left in its artifact directory: each input in base64 and hex.
function printArtifacts(t, dir, files) {
  const found = files ?? (fs.existsSync(dir) ? fs.readdirSync(dir).map((f) => path.join(dir, f)) : []);
  if (found.length === 0) {
    console.error(`fuzz ${t}: failed, and the failing input could not be identified${dir ? ` (nothing in ${dir})` : ''}`);
    return;
  }
  for (const f of found) {
    const b = fs.readFileSync(f);
    console.error(`\nfuzz ${t}: failing input ${path.relative(root, f)} (${b.length} bytes)`);
    console.error(`  base64: ${b.toString('base64')}`);
    if (b.length <= 4096) console.error(`  hex:    ${b.toString('hex')}`);
    console.error(`  to keep it as a regression seed: cp ${path.relative(root, f)} test/fuzz/corpus/${t}/<name>`);
    console.error(`  to reproduce: ${path.relative(root, binary(t))} ${path.relative(root, f)}`);
  }
}

// Every committed seed once, in one process; false on the first failure (printed, with the input that failed).
function replay(t) {
  const dir = path.join(corpusRoot, t);
  const files = fs.existsSync(dir) ? fs.readdirSync(dir).sort().map((f) => path.join(dir, f)) : [];
  if (files.length === 0) {
    console.log(`fuzz ${t}: no committed corpus`);
    return true;
  }
  const t0 = Date.now();
  // With files (not directories) as arguments libFuzzer runs each once, printing "Running: <file>" first.
  const r = spawnSync(binary(t), ['-timeout=10', ...files], { env, encoding: 'utf8' });
  if (r.status !== 0) {
    const log = (r.stdout || '') + (r.stderr || '');
    process.stderr.write(log);
    const running = [...log.matchAll(/^Running: (.+)$/gm)].pop();
    printArtifacts(t, null, running ? [running[1]] : []);
    return false;
  }
  console.log(`fuzz ${t}: replayed ${files.length} corpus inputs, no finding (${Date.now() - t0} ms)`);
  return true;
}

// Coverage-guided fuzzing from the committed corpus (plus what earlier runs found) for `seconds`.
function fuzz(t, seconds) {
  const work = path.join(out, 'corpus', t);
  const artifacts = path.join(out, 'artifacts', t);
  fs.mkdirSync(work, { recursive: true });
  fs.rmSync(artifacts, { recursive: true, force: true });
  fs.mkdirSync(artifacts, { recursive: true });
  const dirs = [work];
  if (fs.existsSync(path.join(corpusRoot, t))) dirs.push(path.join(corpusRoot, t));
  const t0 = Date.now();
  const r = spawnSync(binary(t), [`-max_total_time=${seconds}`, '-timeout=10', '-rss_limit_mb=2048',
    '-print_final_stats=1', `-artifact_prefix=${artifacts}/`, ...dirs], { env, encoding: 'utf8' });
  const log = (r.stdout || '') + (r.stderr || '');
  const stat = (name) => (log.match(new RegExp(`stat::${name}:\\s+(\\d+)`)) || [])[1];
  const cov = (log.match(/DONE\s+cov: (\d+) ft: (\d+) corp: (\d+)/) || []).slice(1);
  if (r.status !== 0) {
    process.stderr.write(log.split('\n').filter((l) => !/^#\d+\s+(NEW|REDUCE|pulse)/.test(l)).join('\n'));
    printArtifacts(t, artifacts);
    return false;
  }
  console.log(`fuzz ${t}: ${stat('number_of_executed_units')} runs in ${((Date.now() - t0) / 1000).toFixed(0)} s ` +
    `(${stat('average_exec_per_sec')}/s), coverage ${cov[0]} edges / ${cov[1]} features, corpus ${cov[2]}, no finding`);
  return true;
}

function main(argv) {
  let mode = 'fuzz';
  const rest = [];
  for (const a of argv) {
    if (a === '--replay') mode = 'replay';
    else if (a === '--build') mode = 'build';
    else rest.push(a);
  }
  const all = targets();
  const which = rest[0] && rest[0] !== 'all' ? rest[0] : null;
  if (which && !all.includes(which)) throw new Error(`no fuzz target "${which}" (have: ${all.join(', ')})`);
  const seconds = Number(rest[1] ?? 60);
  if (!(seconds > 0)) throw new Error(`seconds must be a positive number, not "${rest[1]}"`);
  const t0 = Date.now();
  build(which);
  if (mode === 'build') return 0;
  const list = which ? [which] : all;
  let ok = true;
  for (const t of list) ok = replay(t) && ok;
  if (mode === 'fuzz' && ok) {
    for (const t of list) ok = fuzz(t, seconds) && ok;
  }
  console.log(`fuzz: ${ok ? 'no finding' : 'FAILED'} (${list.join(', ')}; ${((Date.now() - t0) / 1000).toFixed(0)} s wall)`);
  return ok ? 0 : 1;
}

try {
  process.exitCode = main(process.argv.slice(2));
} catch (e) {
  console.error(`fuzz: ${e.message}`);
  process.exitCode = 1;
}

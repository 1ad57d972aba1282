#!/usr/bin/env node
'use strict';
// npm "install" script: use a loadable addon if there is one (prebuilds/<platform>-<arch>/ or a previous
// build/Release), else build it from source with cmake-js. Never node-gyp.
// Force a source build with `npm install --build-from-source` or NETDIRECT_BUILD_FROM_SOURCE=1.

const { spawnSync } = require('node:child_process');
const path = require('node:path');
const { run, root } = require('./build-native');

const target = `${process.platform}-${process.arch} (Node ${process.version}, N-API ${process.versions.napi})`;

// Load in a child process, like node-gyp-build-test: a crash or a bad dlopen must not take down npm.
function probe() {
  const code = `
    try {
      const load = require(require.resolve('node-gyp-build', { paths: [${JSON.stringify(root)}] }));
      const file = load.resolve(${JSON.stringify(root)});
      require(file);
      process.stdout.write(file);
    } catch (err) {
      process.stderr.write(String((err && err.message) || err).split('\\n')[0]);
      process.exit(1);
    }`;
  const res = spawnSync(process.execPath, ['-e', code], { cwd: root, encoding: 'utf8' });
  if (res.status === 0) return { ok: true, file: res.stdout.trim() };
  if (res.status === null) return { ok: false, reason: `loading it crashed the process (${res.signal})` };
  return { ok: false, reason: (res.stderr || '').trim() || `exit status ${res.status}` };
}

function hasCmake() {
  const res = spawnSync('cmake', ['--version'], { encoding: 'utf8' });
  return res.status === 0;
}

function fail(lines) {
  console.error(['', '*** netdirect: native addon build failed ***', ...lines, ''].join('\n'));
  process.exit(1);
}

const truthy = (v) => v !== undefined && v !== '' && v !== '0' && v !== 'false';
const fromSource = truthy(process.env.NETDIRECT_BUILD_FROM_SOURCE) || truthy(process.env.npm_config_build_from_source);

/**
 * Which providers the addon has, and on Linux what to do when the verbs provider (RDMA devices through rdma-core,
 * docs/verbs.md) was left out: it is compiled only where rdma-core's headers are, and nothing at run time can add it.
 */
function reportProviders(file) {
  const script = `const a = require(${JSON.stringify(file)});
    process.stdout.write(JSON.stringify({ built: a.builtProviders || [], usable: a.listProviders().map((p) => p.name) }))`;
  const res = spawnSync(process.execPath, ['-e', script], { cwd: root, encoding: 'utf8' });
  if (res.status !== 0) return;
  let found;
  try {
    found = JSON.parse(res.stdout);
  } catch {
    return;
  }
  const { built, usable } = found;
  const state = (name) => (usable.includes(name) ? name : `${name} (built; not usable here: \`netdirect doctor\` says why)`);
  console.log(`netdirect: providers in this addon: ${built.map(state).join(', ')}`);
  if (process.platform === 'linux' && !built.includes('verbs')) {
    console.log(
      "netdirect: no 'verbs' provider (RDMA devices: InfiniBand, RoCE, iWARP NICs, siw, rxe): rdma-core's headers were not found at build time.\n" +
        '  For RDMA hardware: apt-get install libibverbs-dev librdmacm-dev (Fedora/RHEL: dnf install rdma-core-devel), then\n' +
        '  npm rebuild netdirect --build-from-source. Without it netdirect uses its software iWARP provider over TCP.',
    );
  }
}

if (!fromSource) {
  const found = probe();
  if (found.ok) {
    console.log(`netdirect: using native addon ${path.relative(root, found.file)} for ${target}`);
    reportProviders(found.file);
    process.exit(0);
  }
  console.log(`netdirect: no usable prebuilt addon for ${target}: ${found.reason}`);
}

console.log('netdirect: building the native addon from source with cmake-js (CMake >= 3.15 and a C++17 compiler)...');
if (!hasCmake()) {
  fail([
    `No prebuilt addon matches ${target}, and CMake is not installed, so it cannot be built from source.`,
    'Install CMake (>= 3.15) and a C++17 compiler, then run `npm rebuild netdirect`:',
    '  Debian/Ubuntu: apt-get install cmake g++ make    Fedora: dnf install cmake gcc-c++ make',
    '  macOS: xcode-select --install && brew install cmake    Windows: Visual Studio 2022 "Desktop development with C++" + CMake',
  ]);
}

const status = run(['build']);
if (status !== 0) {
  fail([
    `cmake-js exited with status ${status} while building for ${target}; the compiler/CMake error is above.`,
    'Needs CMake >= 3.15 and a C++17 compiler (g++ >= 8, clang >= 7, MSVC 2019+).',
    'Retry with `npm rebuild netdirect --foreground-scripts` to see the full build log.',
  ]);
}

const built = probe();
if (!built.ok) {
  fail([
    `The build finished but no loadable addon was produced for ${target}: ${built.reason}`,
    /did not self-register/.test(built.reason)
      ? 'build/Release/netdirect.node has no module registration: binding/addon/*.cc must contain NODE_API_MODULE (binding/addon/addon.cc).'
      : 'Expected build/Release/netdirect.node. Does binding/ contain the addon sources (binding/addon/*.cc)?',
  ]);
}
console.log(`netdirect: built ${path.relative(root, built.file)}`);
reportProviders(built.file);

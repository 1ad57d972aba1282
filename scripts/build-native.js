#!/usr/bin/env node
'use strict';
// Runs cmake-js (never node-gyp) for this package:
//   node scripts/build-native.js [build|rebuild|compile|configure|clean] [--tests] [cmake-js options]
// Adds --parallel <cores> unless given, so a fresh build uses every core (CMake's Makefile generator is serial by default).
// --tests also builds the native test programs (build/tests/, CMake option NETDIRECT_BUILD_TESTS): `npm test` and the
// sanitizer tier want them, `npm install` does not (scripts/install.js builds the addon alone).
// Usable from other scripts: require('./build-native').run(['rebuild', '--arch', 'x64'], { tests: true }) -> exit code.

const { spawnSync } = require('node:child_process');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');

const root = path.resolve(__dirname, '..');

function cores() {
  return typeof os.availableParallelism === 'function' ? os.availableParallelism() : os.cpus().length || 1;
}

function outDir(argv) {
  const i = argv.findIndex((a) => a === '--out' || a === '-O');
  return i >= 0 && argv[i + 1] ? path.resolve(root, argv[i + 1]) : path.join(root, 'build');
}

function readCache(dir) {
  try {
    return fs.readFileSync(path.join(dir, 'CMakeCache.txt'), 'utf8');
  } catch {
    return null;
  }
}

// A build/ made from another checkout (copied or moved tree) has a CMakeCache.txt that CMake refuses to reuse.
function staleCache(cache) {
  const m = cache && /^CMAKE_HOME_DIRECTORY:INTERNAL=(.*)$/m.exec(cache);
  try {
    return !!m && fs.realpathSync(m[1].trim()) !== fs.realpathSync(root);
  } catch {
    return false;
  }
}

// cmake-js applies --CD options only when it configures, and `build` configures only a tree that has no cache yet:
// a tree configured without the tests must be configured again to gain them.
function testsConfigured(cache) {
  return !!cache && /^NETDIRECT_BUILD_TESTS:BOOL=ON$/m.test(cache);
}

function run(args, options = {}) {
  let argv = args.length ? [...args] : ['build'];
  const tests = options.tests || argv.includes('--tests');
  argv = argv.filter((a) => a !== '--tests');
  const cache = readCache(outDir(argv));
  if ((argv[0] === 'build' || argv[0] === 'compile') && staleCache(cache)) {
    console.log(`netdirect: ${path.relative(root, outDir(argv))}/ was configured for another directory; doing a clean rebuild.`);
    argv[0] = 'rebuild';
  }
  if (tests) {
    argv.push('--CDNETDIRECT_BUILD_TESTS=ON');
    if (argv[0] === 'build' && cache && !testsConfigured(cache)) {
      const status = run(['configure', ...argv.slice(1)], { ...options, tests: false });
      if (status !== 0) return status;
    }
  }
  if (!argv.some((a) => a === '-p' || a === '--parallel' || a.startsWith('--parallel='))) {
    argv.push('--parallel', String(process.env.CMAKE_BUILD_PARALLEL_LEVEL || cores()));
  }
  let cmakeJs;
  try {
    cmakeJs = require.resolve('cmake-js/bin/cmake-js', { paths: [root] });
  } catch {
    console.error('netdirect: cmake-js is not installed (it is a dependency of netdirect: run `npm install` first).');
    return 1;
  }
  const res = spawnSync(process.execPath, [cmakeJs, ...argv], {
    cwd: root,
    stdio: options.stdio || 'inherit',
    env: process.env,
  });
  if (res.error) {
    console.error(`netdirect: could not run cmake-js: ${res.error.message}`);
    return 1;
  }
  return res.status === null ? 1 : res.status;
}

module.exports = { run, root };

if (require.main === module) {
  process.exitCode = run(process.argv.slice(2));
}

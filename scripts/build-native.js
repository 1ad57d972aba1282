#!/usr/bin/env node
'use strict';
// Runs cmake-js (never node-gyp) for this package: `node scripts/build-native.js [build|rebuild|compile|configure|clean] [cmake-js options]`.
// Adds --parallel <cores> unless given, so a fresh build uses every core (CMake's Makefile generator is serial by default).
// Usable from other scripts: require('./build-native').run(['rebuild', '--arch', 'x64']) -> exit code.

const { spawnSync } = require('node:child_process');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');

const root = path.resolve(__dirname, '..');

function cores() {
  return typeof os.availableParallelism === 'function' ? os.availableParallelism() : os.cpus().length || 1;
}

// A build/ made from another checkout (copied or moved tree) has a CMakeCache.txt that CMake refuses to reuse.
function staleCache() {
  try {
    const cache = fs.readFileSync(path.join(root, 'build', 'CMakeCache.txt'), 'utf8');
    const m = /^CMAKE_HOME_DIRECTORY:INTERNAL=(.*)$/m.exec(cache);
    return !!m && fs.realpathSync(m[1].trim()) !== fs.realpathSync(root);
  } catch {
    return false;
  }
}

function run(args, options = {}) {
  const argv = args.length ? [...args] : ['build'];
  if ((argv[0] === 'build' || argv[0] === 'compile') && staleCache()) {
    console.log('netdirect: build/ was configured for another directory; doing a clean rebuild.');
    argv[0] = 'rebuild';
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

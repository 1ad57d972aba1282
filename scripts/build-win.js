#!/usr/bin/env node
'use strict';
// Cross-builds the win32-x64 addon on a Linux host with mingw-w64 (cmake/mingw-w64-x86_64.cmake), into
// build-win/: build-win/Release/netdirect.node (the addon, software provider linked in) and
// build-win/Release/netdirect_soft.dll (the software provider as an ND v2 provider DLL).
// `node scripts/build-win.js [build|rebuild|clean] [cmake-js options]`. Needs g++-mingw-w64-x86-64.
// Also the build tree of the win32-x64 prebuild (scripts/prebuild.js, which strips and copies the two files to
// prebuilds/win32-x64/), which the Windows test tier (scripts/wine-test.sh) runs under Wine.

const { spawnSync } = require('node:child_process');
const path = require('node:path');
const { run, root } = require('./build-native');

function haveMingw() {
  const r = spawnSync('x86_64-w64-mingw32-g++-posix', ['--version'], { stdio: 'ignore' });
  return r.status === 0;
}

function main(argv) {
  if (!haveMingw()) {
    console.error('netdirect: x86_64-w64-mingw32-g++-posix not found; install mingw-w64 (Debian/Ubuntu: apt-get install g++-mingw-w64-x86-64).');
    return 1;
  }
  const args = argv.length ? [...argv] : ['build'];
  args.push(
    '--out', 'build-win',
    `--CDCMAKE_TOOLCHAIN_FILE=${path.join(root, 'cmake', 'mingw-w64-x86_64.cmake')}`,
    '--CDNETDIRECT_BUILD_TESTS=OFF',
  );
  return run(args);
}

module.exports = { main, haveMingw };

if (require.main === module) {
  process.exitCode = main(process.argv.slice(2));
}

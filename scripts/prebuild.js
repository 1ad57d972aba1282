#!/usr/bin/env node
'use strict';
// `npm run prebuild`: build the addon with cmake-js and store it as prebuilds/<platform>-<arch>/netdirect.<libc>.node,
// where node-gyp-build finds it when build/ is absent (and `npm install` then skips the source build).
//
// prebuildify has no cmake-js backend: it spawns its "node-gyp" command as
//   <cmd> rebuild --target=<node version> --devdir=<dir> [--arch=<arch>] (--release|--debug)
// and then moves the first *.node out of build/Release. This file is both the driver and that command: run
// with `rebuild ...` it maps the call onto `cmake-js rebuild`. Node-API (package.json "binary.napi_versions")
// makes the Node version irrelevant and needs no header download: cmake-js uses the node-api-headers package.
// Environment: PREBUILD_ARCH (default: this machine's), PREBUILD_STRIP=0 to keep symbols.

const path = require('node:path');
const { run, root } = require('./build-native');

// Pinned like classic-level: otherwise `--napi` picks the newest Node that node-abi knows.
const TARGET = '20.20.2';

function asNodeGyp(args) {
  const opt = (name) => {
    const hit = args.find((a) => a.startsWith(`--${name}=`));
    return hit ? hit.slice(name.length + 3) : undefined;
  };
  const cmakeArgs = ['rebuild'];
  const arch = opt('arch');
  if (arch) cmakeArgs.push('--arch', arch);
  if (args.includes('--debug')) cmakeArgs.push('--debug');
  console.log(`prebuild: cmake-js ${cmakeArgs.join(' ')} (prebuildify target: node ${opt('target') || '?'}, Node-API)`);
  return run(cmakeArgs);
}

function prebuild() {
  const prebuildify = require(require.resolve('prebuildify', { paths: [root] }));
  const opts = {
    cwd: root,
    napi: true,
    strip: process.env.PREBUILD_STRIP !== '0',
    tagLibc: true, // netdirect.glibc.node vs netdirect.musl.node: node-gyp-build skips the wrong libc
    targets: [TARGET],
    // Spawned through the platform shell (sh / cmd), so the command can be "node this-file".
    shell: true,
    nodeGyp: `"${process.execPath}" "${__filename}"`,
  };
  prebuildify(opts, (err) => {
    if (err) {
      console.error(`prebuild: failed: ${err.message || err}`);
      process.exitCode = 1;
      return;
    }
    const dir = path.join(root, 'prebuilds', `${process.platform}-${process.env.PREBUILD_ARCH || process.arch}`);
    console.log(`prebuild: wrote ${path.relative(root, dir)}${path.sep}${require('node:fs').readdirSync(dir).join(', ')}`);
  });
}

if (process.argv[2] === 'rebuild') {
  process.exitCode = asNodeGyp(process.argv.slice(3));
} else {
  prebuild();
}

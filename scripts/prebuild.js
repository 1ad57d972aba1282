#!/usr/bin/env node
'use strict';
// `npm run prebuild`: build the addon with cmake-js and store it where node-gyp-build looks when build/ is absent,
// so that `npm install` (scripts/install.js) loads it and skips the source build:
//   prebuilds/linux-x64/netdirect.glibc.node   this machine's platform (libc-tagged on Linux: musl skips it)
//   prebuilds/win32-x64/netdirect.node         cross-built with mingw-w64 (cmake/mingw-w64-x86_64.cmake), with
//   prebuilds/win32-x64/netdirect_soft.dll     the software provider's ND v2 DLL beside it
// Which platforms:
//   node scripts/prebuild.js                        this platform, plus win32-x64 when mingw-w64 is installed
//                                                   (without it, a note says win32-x64 was skipped; exit 0)
//   node scripts/prebuild.js --platform win32       exactly these (comma-separated: linux, win32, ...); each one
//   NETDIRECT_PREBUILD_PLATFORMS=linux,win32        must be built: no mingw-w64, or a platform this machine cannot
//                                                   build, exits 1. The environment wins over --platform, so it
//                                                   also overrides prepack's list (`NETDIRECT_PREBUILD_PLATFORMS=linux
//                                                   npm pack` packs without the win32 prebuild).
// package.json "prepack" runs `--platform linux,win32`: `npm pack` and `npm publish` ship both prebuilds or fail.
// Each platform has its own cmake-js build tree, reused incrementally: build-prebuild/<platform>-<arch>/ (no native
// tests) and, for the cross build, build-win/ (shared with `npm run build:win` and the Wine tier). build/ — the
// development build that `npm test` loads — is never touched, so a prebuild can run while tests do.
//
// prebuildify does the naming, stripping and copying of DLLs beside the addon, but has no cmake-js backend: it
// spawns its "node-gyp" command as
//   <cmd> rebuild --target=<node version> --devdir=<dir> [--arch=<arch>] (--release|--debug)
// in its working directory, then moves the first *.node out of <that directory>/build/Release and copies the *.dll
// there. This file is both the driver and that command: run as `rebuild ...` it builds the platform prebuildify
// names in PREBUILD_PLATFORM in that platform's tree and copies the results into a scratch directory
// (build-prebuild/stage-<platform>-<arch>/build/Release). Node-API ("binary.napi_versions") makes the Node version
// irrelevant and needs no header download: cmake-js uses the node-api-headers package.
// Environment: PREBUILD_ARCH (this platform's arch; default: this machine's), PREBUILD_STRIP=0 to keep symbols.

const fs = require('node:fs');
const path = require('node:path');
const { run, root } = require('./build-native');
const buildWin = require('./build-win');

// Pinned like classic-level: otherwise `--napi` picks the newest Node that node-abi knows.
const TARGET = '20.20.2';
const MINGW = 'x86_64-w64-mingw32';
const PLATFORMS_ENV = 'NETDIRECT_PREBUILD_PLATFORMS';

const treeOf = (platform, arch) =>
  platform === 'win32' && process.platform !== 'win32'
    ? path.join(root, 'build-win')
    : path.join(root, 'build-prebuild', `${platform}-${arch}`);
const stageOf = (platform, arch) => path.join(root, 'build-prebuild', `stage-${platform}-${arch}`);

// ---- `rebuild ...`: the command prebuildify spawns ------------------------------------------------------------

function asNodeGyp(args) {
  const opt = (name) => {
    const hit = args.find((a) => a.startsWith(`--${name}=`));
    return hit ? hit.slice(name.length + 3) : undefined;
  };
  const platform = process.env.PREBUILD_PLATFORM || process.platform;
  const arch = opt('arch') || process.arch;
  const config = args.includes('--debug') ? 'Debug' : 'Release';
  const tree = treeOf(platform, arch);
  let status;
  if (platform === process.platform) {
    const cmakeArgs = ['build', '--out', tree, '--arch', arch, '--CDNETDIRECT_BUILD_TESTS=OFF'];
    if (config === 'Debug') cmakeArgs.push('--debug');
    console.log(`prebuild: cmake-js ${cmakeArgs.join(' ')} (prebuildify target: node ${opt('target') || '?'}, Node-API)`);
    status = run(cmakeArgs);
  } else if (platform === 'win32') {
    console.log(`prebuild: cross build for win32-${arch} in ${path.relative(root, tree)}/ (scripts/build-win.js, mingw-w64)`);
    status = buildWin.main(config === 'Debug' ? ['build', '--debug'] : ['build']);
  } else {
    console.error(`prebuild: cannot build for ${platform} on ${process.platform}`);
    return 1;
  }
  if (status !== 0) return status;
  // prebuildify takes the results from <its cwd>/build/Release: the addon and the DLLs that ship beside it.
  const from = path.join(tree, config);
  const to = path.join(process.cwd(), 'build', 'Release');
  fs.rmSync(to, { recursive: true, force: true });
  fs.mkdirSync(to, { recursive: true });
  const files = fs.readdirSync(from).filter((f) => /\.(node|dll)$/i.test(f));
  if (!files.some((f) => f.endsWith('.node'))) {
    console.error(`prebuild: the build left no *.node in ${from}`);
    return 1;
  }
  for (const f of files) fs.copyFileSync(path.join(from, f), path.join(to, f));
  return 0;
}

// ---- the driver -----------------------------------------------------------------------------------------------

function usage(message) {
  console.error(`prebuild: ${message}`);
  console.error('usage: node scripts/prebuild.js [--platform <linux|win32|...>[,...]]   (or NETDIRECT_PREBUILD_PLATFORMS=<list>)');
  return 2;
}

/** The platforms to build and whether they were asked for (then each one is required). */
function platformsFrom(argv) {
  let list;
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (a === '--platform' && i + 1 < argv.length) list = argv[++i];
    else if (a.startsWith('--platform=')) list = a.slice('--platform='.length);
    else return { error: `unknown argument '${a}'` };
  }
  const fromEnv = (process.env[PLATFORMS_ENV] || '').trim();
  if (fromEnv) list = fromEnv;
  if (list === undefined) {
    const implicit = [process.platform];
    if (process.platform !== 'win32') implicit.push('win32');
    return { platforms: implicit, explicit: false };
  }
  const platforms = [...new Set(list.split(',').map((p) => p.trim()).filter(Boolean))];
  if (platforms.length === 0) return { error: `no platform in '${list}'` };
  return { platforms, explicit: true, source: fromEnv ? PLATFORMS_ENV : '--platform' };
}

function prebuildOne(platform, arch) {
  const prebuildify = require(require.resolve('prebuildify', { paths: [root] }));
  const cross = platform === 'win32' && process.platform !== 'win32';
  const stage = stageOf(platform, arch);
  fs.mkdirSync(stage, { recursive: true });
  const dir = path.join(root, 'prebuilds', `${platform}-${arch}`);
  fs.rmSync(dir, { recursive: true, force: true }); // no stale files from an earlier layout get packed
  const opts = {
    cwd: stage,
    out: root,
    name: 'netdirect',
    platform,
    arch,
    napi: true,
    strip: process.env.PREBUILD_STRIP !== '0',
    stripBin: cross ? `${MINGW}-strip` : process.env.PREBUILD_STRIP_BIN || 'strip',
    tagLibc: platform === 'linux', // netdirect.glibc.node vs netdirect.musl.node: node-gyp-build skips the wrong libc
    targets: [TARGET],
    // Spawned through the platform shell (sh / cmd), so the command can be "node this-file".
    shell: true,
    nodeGyp: `"${process.execPath}" "${__filename}"`,
  };
  return new Promise((resolve) => {
    prebuildify(opts, (err) => {
      if (err) {
        console.error(`prebuild: ${platform}-${arch} failed: ${err.message || err}`);
        resolve(false);
        return;
      }
      const files = fs.readdirSync(dir).map((f) => `${f} (${Math.round(fs.statSync(path.join(dir, f)).size / 1024)} KiB)`);
      console.log(`prebuild: wrote ${path.relative(root, dir)}${path.sep}: ${files.join(', ')}`);
      resolve(true);
    });
  });
}

async function main(argv) {
  const plan = platformsFrom(argv);
  if (plan.error) return usage(plan.error);
  const todo = [];
  for (const platform of plan.platforms) {
    if (platform !== process.platform && platform !== 'win32') {
      console.error(
        `prebuild: cannot build the ${platform} prebuild on ${process.platform} (asked for by ${plan.source}): ` +
          `only ${process.platform} and win32 (cross, with mingw-w64) can be built here. ` +
          `Build it on ${platform}, or set ${PLATFORMS_ENV} to the platforms this machine can build.`,
      );
      return 1;
    }
    if (platform === 'win32' && process.platform !== 'win32' && !buildWin.haveMingw()) {
      const missing = `${MINGW}-g++-posix not found`;
      const install = 'Debian/Ubuntu: apt-get install g++-mingw-w64-x86-64';
      if (plan.explicit) {
        console.error(`prebuild: cannot build the win32-x64 prebuild (asked for by ${plan.source}): ${missing}. Install mingw-w64 (${install}).`);
        return 1;
      }
      console.log(`prebuild: skipping win32-x64: ${missing}. Install mingw-w64 to build it too (${install}); \`--platform win32\` makes this an error.`);
      continue;
    }
    // A linux prebuild without the verbs provider would leave every user on an RDMA cluster on software iWARP
    // without a word: the headers it compiles against must be here (the provider dlopens the libraries at run time).
    if (platform === 'linux' && !['/usr/include/infiniband/verbs.h', '/usr/include/rdma/rdma_cma.h'].every((f) => fs.existsSync(f))) {
      console.error(
        'prebuild: the linux prebuild must carry the verbs provider, and rdma-core\'s headers are missing ' +
          '(Debian/Ubuntu: apt-get install libibverbs-dev librdmacm-dev; Fedora/RHEL: dnf install rdma-core-devel)',
      );
      return 1;
    }
    todo.push({ platform, arch: platform === 'win32' ? 'x64' : process.env.PREBUILD_ARCH || process.arch });
  }
  for (const { platform, arch } of todo) {
    if (!(await prebuildOne(platform, arch))) return 1;
  }
  return 0;
}

if (process.argv[2] === 'rebuild') {
  process.exitCode = asNodeGyp(process.argv.slice(3));
} else {
  main(process.argv.slice(2)).then(
    (code) => {
      process.exitCode = code;
    },
    (err) => {
      console.error(`prebuild: ${err.stack || err}`);
      process.exitCode = 1;
    },
  );
}

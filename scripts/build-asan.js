#!/usr/bin/env node
'use strict';
// Builds the sanitizer tier: the addon, netdirect_soft and the native tests with AddressSanitizer +
// UndefinedBehaviorSanitizer (CMake option NETDIRECT_SANITIZE) into build-asan/ (build-asan/Release/netdirect.node,
// build-asan/tests/<name>_test), leaving build/ alone. `node scripts/build-asan.js [build|rebuild|clean]`.
// Run by scripts/test-asan.js (`npm run test:asan`).
const path = require('node:path');
const { run, root } = require('./build-native');

const out = path.join(root, 'build-asan');

function build(command = 'build') {
  return run([command, '--out', out, '--CDNETDIRECT_SANITIZE=ON'], { tests: true });
}

module.exports = { build, out };

if (require.main === module) {
  process.exitCode = build(process.argv[2] || 'build');
}

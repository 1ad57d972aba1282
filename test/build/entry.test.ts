// The package as a user gets it: `require('netdirect')` and `import ... from 'netdirect'` resolve through
// package.json "exports" to dist/ (built by `npm run build:ts`, which `npm test` runs first), and the addon loads.
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

const root = path.resolve(__dirname, '..', '..');
let consumer: string;
let cannotLink = ''; // why the consumer project could not be set up (then the entry-point tests skip)

function node(args: string[], env: NodeJS.ProcessEnv = {}) {
  const res = spawnSync(process.execPath, args, {
    cwd: consumer,
    encoding: 'utf8',
    env: { ...process.env, ...env },
    timeout: 20_000,
  });
  return { status: res.status, stdout: res.stdout, stderr: res.stderr, out: `${res.stdout}\n${res.stderr}` };
}

function write(name: string, text: string): string {
  const file = path.join(consumer, name);
  writeFileSync(file, text);
  return file;
}

function requireDist() {
  for (const f of ['dist/cjs/index.js', 'dist/cjs/index.d.ts', 'dist/esm/index.mjs', 'dist/esm/index.d.mts']) {
    if (!existsSync(path.join(root, f))) throw new Error(`${f} is missing: run \`npm run build:ts\` (npm test does it)`);
  }
}

beforeAll(() => {
  // A consumer project outside the package, with netdirect linked into its node_modules like an install.
  consumer = mkdtempSync(path.join(tmpdir(), 'netdirect-consumer-'));
  mkdirSync(path.join(consumer, 'node_modules'));
  try {
    symlinkSync(root, path.join(consumer, 'node_modules', 'netdirect'), 'junction');
  } catch (err) {
    if (process.platform !== 'win32') throw err;
    // Wine (the Windows test tier) cannot make junctions to its Unix drive: ENOTSUP. Real Windows can.
    cannotLink = `cannot link the package into a consumer project here (${(err as NodeJS.ErrnoException).code}: Wine has no junctions)`;
  }
  writeFileSync(path.join(consumer, 'package.json'), '{ "name": "consumer", "private": true }\n');
});

afterAll(() => {
  if (consumer) rmSync(consumer, { recursive: true, force: true });
});

describe('package entry points', () => {
  it('require("netdirect") loads the CommonJS build and exports openAdapter', (ctx) => {
    ctx.skip(!!cannotLink, cannotLink);
    requireDist();
    const file = write(
      'entry.cjs',
      `const nd = require('netdirect');
       console.log(JSON.stringify({ file: require.resolve('netdirect'), keys: Object.keys(nd), openAdapter: typeof nd.openAdapter }));`,
    );
    const r = node([file]);
    expect(r.status, r.out).toBe(0);
    const got = JSON.parse(r.stdout);
    expect(got.file).toMatch(/dist[\\/]cjs[\\/]index\.js$/);
    expect(got.openAdapter, `exports: ${got.keys.join(', ')}`).toBe('function');
  });

  it('import from "netdirect" loads the ESM entry with named and default exports, sharing one instance with require', (ctx) => {
    ctx.skip(!!cannotLink, cannotLink);
    requireDist();
    const file = write(
      'entry.mjs',
      `import { createRequire } from 'node:module';
       import * as ns from 'netdirect';
       import nd, { openAdapter } from 'netdirect';
       const cjs = createRequire(import.meta.url)('netdirect');
       console.log(JSON.stringify({
         url: import.meta.resolve('netdirect'),
         keys: Object.keys(ns),
         openAdapter: typeof openAdapter,
         sameAsRequire: openAdapter === cjs.openAdapter && nd === cjs,
       }));`,
    );
    const r = node([file]);
    expect(r.status, r.out).toBe(0);
    const got = JSON.parse(r.stdout);
    expect(got.url).toMatch(/dist\/esm\/index\.mjs$/);
    expect(got.openAdapter, `exports: ${got.keys.join(', ')}`).toBe('function');
    expect(got.sameAsRequire).toBe(true);
  });

  it('type declarations resolve for both ESM (.mts) and CommonJS (.cts) consumers', (ctx) => {
    ctx.skip(!!cannotLink, cannotLink);
    requireDist();
    write('esm.mts', `import { openAdapter } from 'netdirect';\nexport const f: typeof openAdapter = openAdapter;\n`);
    write('cjs.cts', `import nd = require('netdirect');\nexport const f: typeof nd.openAdapter = nd.openAdapter;\n`);
    write(
      'tsconfig.json',
      JSON.stringify({
        compilerOptions: { module: 'node20', strict: true, noEmit: true, skipLibCheck: false, types: ['node'],
          typeRoots: [path.join(root, 'node_modules', '@types')] },
        files: ['esm.mts', 'cjs.cts'],
      }),
    );
    const tsc = path.join(root, 'node_modules', 'typescript', 'bin', 'tsc');
    const r = node([tsc, '-p', path.join(consumer, 'tsconfig.json')]);
    expect(r.status, r.out).toBe(0);
  });
});

describe('native addon', () => {
  it('lib/binding.ts loads it from source too (vitest, no dist/)', async () => {
    const { binding, packageRoot } = await import('../../lib/binding');
    expect(packageRoot()).toBe(root);
    expect(typeof binding).toBe('object');
  });

  it('node-gyp-build finds and loads it (build/Release or prebuilds/)', () => {
    requireDist();
    const file = write(
      'addon.cjs',
      `const ngb = require(${JSON.stringify(require.resolve('node-gyp-build', { paths: [root] }))});
       const file = ngb.resolve(${JSON.stringify(root)});
       const { binding } = require(${JSON.stringify(path.join(root, 'dist', 'cjs', 'binding.js'))});
       console.log(JSON.stringify({ file, type: typeof binding, keys: Object.keys(binding) }));`,
    );
    const r = node([file]);
    expect(r.status, r.out).toBe(0);
    const got = JSON.parse(r.stdout);
    expect(got.file).toMatch(/\.node$/);
    // Set by a tier that stages a particular addon (scripts/wine-test.sh: the win32 prebuild, no build/).
    const expected = process.env.NETDIRECT_TEST_ADDON;
    if (expected) expect(path.relative(root, got.file), 'NETDIRECT_TEST_ADDON').toBe(path.normalize(expected));
    expect(got.type).toBe('object');
    expect(got.keys.length, 'the addon exports nothing').toBeGreaterThan(0);
  });

  it('a missing addon gives an error that names the platform, the places tried and the fix', () => {
    requireDist();
    const empty = mkdtempSync(path.join(tmpdir(), 'netdirect-noaddon-'));
    try {
      const file = write('missing.cjs', `require(${JSON.stringify(path.join(root, 'dist', 'cjs', 'binding.js'))});`);
      const r = node([file], { NETDIRECT_PREBUILD: empty });
      expect(r.status).not.toBe(0);
      expect(r.stderr).toContain(`no native addon for ${process.platform}-${process.arch}`);
      expect(r.stderr).toContain(`Node ${process.version}`);
      expect(r.stderr).toContain('npm rebuild netdirect');
      expect(r.stderr).toContain('prebuilds');
    } finally {
      rmSync(empty, { recursive: true, force: true });
    }
  });
});

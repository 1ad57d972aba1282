// The published package carries both prebuilds and installs without a compiler: `npm run prepack` (the
// scripts/prebuild.js --platform linux,win32 that `npm pack`/`npm publish` run first), then `npm pack
// --ignore-scripts` (its other hook, prepare, rebuilds dist/ in place while other test files read it), then an
// install of the tarball into a consumer project whose PATH has node and sh but no compiler, cmake or make.
// Build tests, not timings: a cold prebuild compiles two addons (~2-4 min on 2 cores); warm, the build trees
// (build-prebuild/linux-x64/, build-win/) are reused and it takes seconds. Never touches build/.
import { spawnSync, type SpawnSyncOptions } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, realpathSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

const root = path.resolve(__dirname, '..', '..');
const PREBUILDS = ['prebuilds/linux-x64/netdirect.glibc.node', 'prebuilds/win32-x64/netdirect.node', 'prebuilds/win32-x64/netdirect_soft.dll'];
const BUILD_MINUTES = 20;

function onPath(cmd: string): string | null {
  const r = spawnSync('sh', ['-c', `command -v ${cmd}`], { encoding: 'utf8' });
  return r.status === 0 ? r.stdout.trim() : null;
}

// npm's own CLI script, run with this node: `npm test` sets npm_execpath; otherwise the npm on PATH.
function npmCli(): string | null {
  if (process.env.npm_execpath && /npm-cli\.js$/.test(process.env.npm_execpath)) return process.env.npm_execpath;
  const npm = process.platform === 'win32' ? null : onPath('npm');
  return npm ? realpathSync(npm) : null;
}

function whyNot(): string {
  if (process.platform !== 'linux') return `the prebuilds are built and packed on Linux (win32 is cross-built there), not on ${process.platform}`;
  if (!onPath('x86_64-w64-mingw32-g++-posix')) {
    return 'mingw-w64 is not installed (x86_64-w64-mingw32-g++-posix): the win32-x64 prebuild cannot be built (apt-get install g++-mingw-w64-x86-64)';
  }
  if (!npmCli()) return 'npm is not on PATH';
  return '';
}
const skip = whyNot();

// Nested npm runs get a clean environment: no npm_* variables of the `npm test` that runs this file.
function cleanEnv(extra: NodeJS.ProcessEnv = {}): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [k, v] of Object.entries(process.env)) if (!/^npm_/i.test(k)) env[k] = v;
  return { ...env, NETDIRECT_PREBUILD_PLATFORMS: '', ...extra };
}

function run(args: string[], options: SpawnSyncOptions & { timeoutMinutes?: number }) {
  const r = spawnSync(process.execPath, args, { encoding: 'utf8', timeout: (options.timeoutMinutes ?? 5) * 60_000, ...options });
  const out = `${r.stdout ?? ''}\n${r.stderr ?? ''}`;
  return { status: r.status, signal: r.signal, stdout: String(r.stdout ?? ''), out, error: r.error };
}

let tmp: string;
let tarball: string;
let packed: { path: string; size: number }[] = [];

beforeAll(() => {
  if (skip) return;
  tmp = mkdtempSync(path.join(tmpdir(), 'netdirect-pack-'));
  const prepack = run([npmCli()!, 'run', 'prepack'], { cwd: root, env: cleanEnv(), timeoutMinutes: BUILD_MINUTES });
  if (prepack.status !== 0) throw new Error(`npm run prepack failed (${prepack.status ?? prepack.signal}):\n${prepack.out.slice(-4000)}`);
  const pack = run([npmCli()!, 'pack', '--ignore-scripts', '--json', '--pack-destination', tmp], { cwd: root, env: cleanEnv() });
  if (pack.status !== 0) throw new Error(`npm pack failed (${pack.status ?? pack.signal}):\n${pack.out}`);
  const [info] = JSON.parse(pack.stdout);
  tarball = path.join(tmp, info.filename);
  packed = info.files;
}, BUILD_MINUTES * 60_000 + 60_000);

afterAll(() => {
  if (tmp) rmSync(tmp, { recursive: true, force: true });
});

describe('npm pack with the prebuilds', () => {
  it('prepack builds both platforms, and the tarball ships them (not their build trees)', (ctx) => {
    ctx.skip(!!skip, skip);
    const pkg = JSON.parse(readFileSync(path.join(root, 'package.json'), 'utf8'));
    expect(pkg.scripts.prepack).toMatch(/^node scripts\/prebuild\.js --platform linux,win32$/);
    const files = packed.map((f) => f.path);
    for (const f of PREBUILDS) {
      expect(files, f).toContain(f);
      expect(packed.find((p) => p.path === f)!.size, f).toBeGreaterThan(100_000);
    }
    expect(files.filter((f) => /^(build|build-win|build-prebuild)\//.test(f))).toEqual([]);
    expect(existsSync(tarball)).toBe(true);
  });

  it('the win32 prebuild is a stripped x86-64 DLL importing NODE.EXE; the provider DLL exports the ND entry points', (ctx) => {
    ctx.skip(!!skip, skip);
    const pe = (file: string) => {
      const b = readFileSync(path.join(root, file));
      expect(b.toString('latin1', 0, 2), `${file}: MZ`).toBe('MZ');
      const nt = b.readUInt32LE(0x3c);
      expect(b.toString('latin1', nt, nt + 4), `${file}: PE signature`).toBe('PE\0\0');
      return {
        machine: b.readUInt16LE(nt + 4),
        symbols: b.readUInt32LE(nt + 4 + 8) + b.readUInt32LE(nt + 4 + 12), // COFF symbol table: gone when stripped
        dll: (b.readUInt16LE(nt + 4 + 18) & 0x2000) !== 0,
        text: b.toString('latin1'),
      };
    };
    const addon = pe('prebuilds/win32-x64/netdirect.node');
    expect([addon.machine, addon.dll, addon.symbols]).toEqual([0x8664, true, 0]);
    expect(addon.text).toContain('NODE.EXE'); // the Node-API import library names the host executable
    expect(addon.text).toContain('napi_register_module_v1');
    const provider = pe('prebuilds/win32-x64/netdirect_soft.dll');
    expect([provider.machine, provider.dll, provider.symbols]).toEqual([0x8664, true, 0]);
    for (const name of ['DllGetClassObject', 'DllCanUnloadNow']) expect(provider.text).toContain(name);
    const elf = readFileSync(path.join(root, 'prebuilds/linux-x64/netdirect.glibc.node'));
    expect(elf.toString('latin1', 0, 4)).toBe('\x7fELF');
    expect(elf.includes('.symtab'), 'the linux prebuild is stripped').toBe(false);
  });

  it('installs into a project with no compiler on PATH, from the prebuild, and does RDMA', (ctx) => {
    ctx.skip(!!skip, skip);
    // PATH = node and sh only: a source build (cmake + c++) is impossible, so a working install used the prebuild.
    const bin = path.join(tmp, 'bin');
    mkdirSync(bin);
    symlinkSync(process.execPath, path.join(bin, 'node'));
    symlinkSync('/bin/sh', path.join(bin, 'sh'));
    const env = cleanEnv({ PATH: bin });
    for (const tool of ['cc', 'c++', 'gcc', 'g++', 'cmake', 'make', 'ninja']) {
      expect(spawnSync('/bin/sh', ['-c', `command -v ${tool}`], { env }).status, `${tool} is reachable`).not.toBe(0);
    }
    const consumer = path.join(tmp, 'consumer');
    mkdirSync(consumer);
    writeFileSync(path.join(consumer, 'package.json'), '{ "name": "consumer", "private": true }\n');
    const install = run([npmCli()!, 'install', tarball, '--prefer-offline', '--no-audit', '--no-fund', '--foreground-scripts'], { cwd: consumer, env });
    expect(install.status, install.out).toBe(0);
    expect(install.out).toContain('netdirect: using native addon prebuilds/linux-x64/netdirect.glibc.node');
    expect(install.out).not.toContain('building the native addon from source');
    const pkgDir = path.join(consumer, 'node_modules', 'netdirect');
    expect(existsSync(path.join(pkgDir, 'build')), 'the install created build/').toBe(false);

    writeFileSync(
      path.join(consumer, 'use.cjs'),
      `const nd = require('netdirect');
       const addon = require('node-gyp-build').resolve(require('node:path').dirname(require.resolve('netdirect/package.json')));
       (async () => {
         const [a, b] = [await nd.openAdapter('127.0.0.1'), await nd.openAdapter('127.0.0.1')];
         const [cqa, cqb] = [a.createCompletionQueue(), b.createCompletionQueue()];
         const [qa, qb] = [a.createQueuePair({ receiveCq: cqa }), b.createQueuePair({ receiveCq: cqb })];
         const target = await b.allocateMemory(64, { remoteWrite: true });
         const listener = await b.listen({});
         const accepted = listener.getConnectionRequest().then((c) => c.accept(qb));
         await a.connect(qa, listener.address);
         await accepted;
         const source = await a.allocateMemory(64);
         source.buffer.fill(0x5a);
         await qa.write(source.slice(0, 64), target.remote());
         const landed = target.buffer.every((x) => x === 0x5a);
         await Promise.all([a.close(), b.close()]);
         console.log(JSON.stringify({ addon, providers: nd.listProviders().map((p) => p.name), built: require(addon).builtProviders, landed }));
       })().catch((e) => { console.error(e); process.exit(1); });`,
    );
    const use = run(['use.cjs'], { cwd: consumer, env, timeoutMinutes: 1 });
    expect(use.status, use.out).toBe(0);
    const got = JSON.parse(use.stdout);
    expect(path.relative(pkgDir, got.addon)).toBe(path.join('prebuilds', 'linux-x64', 'netdirect.glibc.node'));
    expect(got.providers).toContain('soft');
    // The published linux prebuild carries the verbs provider (scripts/prebuild.js refuses to build one without it),
    // and the install says which providers it has.
    expect(got.built).toContain('verbs');
    expect(install.out).toMatch(/netdirect: providers in this addon: soft, verbs/);
    expect(got.landed, 'the RDMA Write did not land').toBe(true);

    // The examples ship in the package and run from it, importing the installed package by its name.
    const ring = run([path.join(pkgDir, 'examples', 'ring.mjs'), '--ranks', '3'], { cwd: consumer, env, timeoutMinutes: 1 });
    expect(ring.status, ring.out).toBe(0);
    expect(ring.stdout).toContain('ring of 3 ranks: every block arrived intact');
    const lat = run([path.join(pkgDir, 'examples', 'write-latency.mjs'), '--iterations', '50'], { cwd: consumer, env, timeoutMinutes: 1 });
    expect(lat.status, lat.out).toBe(0);
    expect(lat.stdout).toMatch(/^65536 +\d/m);
  });
});

// Loads the native addon (build/Release, build/Debug, then prebuilds/<platform>-<arch>/) with node-gyp-build, or
// the one file NETDIRECT_ADDON_PATH names.
import { existsSync, readFileSync } from 'node:fs';
import * as path from 'node:path';

// node-gyp-build ships no type declarations; it is a plain CommonJS function.
// eslint-disable-next-line @typescript-eslint/no-require-imports
const nodeGypBuild = require('node-gyp-build') as ((dir: string) => unknown) & { resolve(dir: string): string };

const PACKAGE_NAME = 'netdirect';

/** The directory holding netdirect's package.json: lib/ when run from source, dist/cjs/ once compiled. */
export function packageRoot(from: string = __dirname): string {
  for (let dir = from; ; dir = path.dirname(dir)) {
    const manifest = path.join(dir, 'package.json');
    if (existsSync(manifest)) {
      try {
        if (JSON.parse(readFileSync(manifest, 'utf8')).name === PACKAGE_NAME) return dir;
      } catch {
        // Unreadable package.json: keep walking up.
      }
    }
    if (path.dirname(dir) === dir) {
      throw new Error(`netdirect: cannot find the netdirect package root above ${from}`);
    }
  }
}

function libc(): string {
  if (process.platform !== 'linux') return '';
  // glibc reports its version in the process report; musl (Alpine) does not.
  const header = (process.report?.getReport() as { header?: { glibcVersionRuntime?: string } } | undefined)?.header;
  return header?.glibcVersionRuntime ? `, glibc ${header.glibcVersionRuntime}` : ', musl';
}

function loadError(root: string, cause: unknown): Error {
  const reason = cause instanceof Error ? cause.message.split('\n')[0] : String(cause);
  const notFound = /No native build was found/.test(reason);
  const target = `${process.platform}-${process.arch} (Node ${process.version}, N-API ${process.versions.napi}, addon built for N-API 8${libc()})`;
  // node-gyp-build looks in <PKG>_PREBUILD instead of the package when that variable is set.
  const base = process.env[`${PACKAGE_NAME.toUpperCase()}_PREBUILD`] || root;
  const tried = [
    path.join(base, 'build', 'Release', '*.node'),
    path.join(base, 'build', 'Debug', '*.node'),
    path.join(base, 'prebuilds', `${process.platform}-${process.arch}`, '*.node'),
  ];
  const lines = [
    notFound
      ? `netdirect: no native addon for ${target}.`
      : `netdirect: the native addon for ${target} was found but failed to load: ${reason}`,
    `Tried (node-gyp-build): ${tried.join(', ')}`,
    'Fix: build it from source with `npm rebuild netdirect` (needs CMake >= 3.15 and a C++17 compiler:',
    '  apt-get install cmake g++ make / dnf install cmake gcc-c++ / Visual Studio 2022 C++ + CMake on Windows);',
    '  in a netdirect checkout: `npm run build:native`.',
    `  To load an addon from elsewhere, set ${PACKAGE_NAME.toUpperCase()}_PREBUILD=<dir holding build/Release/ or prebuilds/>`,
    `  or ${PACKAGE_NAME.toUpperCase()}_ADDON_PATH=<path to the .node file>.`,
  ];
  if (notFound) lines.push(`Cause: ${reason}`);
  return new Error(lines.join('\n'), { cause });
}

function load(): any {
  // NETDIRECT_ADDON_PATH=<path to a .node file>: load exactly that addon instead of searching (the sanitizer
  // tier, `npm run test:asan`, points it at build-asan/Release/netdirect.node).
  const override = process.env[`${PACKAGE_NAME.toUpperCase()}_ADDON_PATH`];
  if (override) {
    try {
      return require(path.resolve(override));
    } catch (err) {
      const reason = err instanceof Error ? err.message.split('\n')[0] : String(err);
      throw new Error(`netdirect: cannot load the addon ${override} (NETDIRECT_ADDON_PATH): ${reason}`, { cause: err });
    }
  }
  const root = packageRoot();
  try {
    return nodeGypBuild(root);
  } catch (err) {
    throw loadError(root, err);
  }
}

/** The native module. Typed as `any` until the binding's declarations exist. */
// eslint-disable-next-line @typescript-eslint/no-explicit-any
export const binding: any = load();

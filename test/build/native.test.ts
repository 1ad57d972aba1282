// Runs each native unit test (test/native/<name>_test.cc -> build/tests/<name>_test, built by `npm run build:native`).
// A test passes when its executable exits 0; its output is shown on failure.
import { spawnSync } from 'node:child_process';
import { existsSync, readdirSync } from 'node:fs';
import * as path from 'node:path';
import { describe, expect, it } from 'vitest';

const root = path.resolve(__dirname, '..', '..');
const sourceDir = path.join(root, 'test', 'native');
const sources = existsSync(sourceDir) ? readdirSync(sourceDir).filter((f) => f.endsWith('_test.cc')).sort() : [];

// The Windows cross-build (scripts/build-win.js) does not build test/native: these run on the Linux build only.
const notHere = process.platform === 'win32' ? 'native unit tests are built and run by the Linux build only' : '';

describe('native unit tests (build/tests/)', () => {
  it.skipIf(sources.length > 0)('none yet (no test/native/*_test.cc)', () => {});

  for (const source of sources) {
    const name = source.replace(/\.cc$/, '');
    it(name, (ctx) => {
      ctx.skip(!!notHere, notHere);
      const exe = path.join(root, 'build', 'tests', process.platform === 'win32' ? `${name}.exe` : name);
      expect(existsSync(exe), `${exe} is missing: run \`npm run build:native\``).toBe(true);
      const r = spawnSync(exe, [], { cwd: root, encoding: 'utf8', timeout: 60_000 });
      expect(r.error, String(r.error)).toBeUndefined();
      expect(r.status, `${name} exited with ${r.status} (signal ${r.signal})\n${r.stdout}\n${r.stderr}`).toBe(0);
    });
  }
});

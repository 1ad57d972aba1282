// The siw interop tier (`npm run test:interop`): netdirect's iWARP wire against Linux soft-iWARP in a qemu
// guest (test/interop/siw-vm). Kept out of the default `npm test`, which must not need the VM.
import { fileURLToPath } from 'node:url';
import { defineConfig } from 'vitest/config';

export default defineConfig({
  root: fileURLToPath(new URL('../..', import.meta.url)),
  test: {
    include: ['test/interop/**/*.interop.test.ts'],
    globalSetup: ['test/interop/global-setup.ts'],
    pool: 'forks',
    // One guest, one siw configuration at a time: files and tests run one after another.
    fileParallelism: false,
    testTimeout: 180_000,
    hookTimeout: 300_000,
    teardownTimeout: 60_000,
    watch: false,
  },
});

import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    // Native addons and threads do not mix (vitest docs: segfaults in the `threads` pool): one child process per file.
    pool: 'forks',
    // Two-process native tests (connect, transfer, teardown) take seconds, not milliseconds.
    testTimeout: 30_000,
    hookTimeout: 30_000,
    teardownTimeout: 10_000,
    watch: false,
  },
});

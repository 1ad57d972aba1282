import { configDefaults, defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    // The siw interop tier has its own config (test/interop/vitest.interop.config.mts, `npm run test:interop`).
    exclude: [...configDefaults.exclude, 'test/interop/**'],
    // Native addons and threads do not mix (vitest docs: segfaults in the `threads` pool): one child process per file.
    pool: 'forks',
    // Two-process native tests (connect, transfer, teardown) take seconds, not milliseconds.
    testTimeout: 30_000,
    hookTimeout: 30_000,
    teardownTimeout: 10_000,
    watch: false,
    // CI also writes a JSON report, from which .ci/run prints a plain "N passed, N failed" line (the sanitizer tier,
    // scripts/test-asan.js, names its own: NETDIRECT_VITEST_REPORT).
    reporters: process.env.CI
      ? ['default', ['json', { outputFile: process.env.NETDIRECT_VITEST_REPORT || 'build/vitest-report.json' }]]
      : ['default'],
  },
});

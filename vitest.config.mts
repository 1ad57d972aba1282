import { configDefaults, defineConfig } from 'vitest/config';

// The suites that move data and settle requests run once per completion mode: 'loop' (the default on Linux:
// NETDIRECT_COMPLETION unset means 'auto'), 'thread' and 'manual'. Child processes the tests start (peers,
// lifecycle, keepalive and gc fixtures) inherit NETDIRECT_COMPLETION, so both ends run in the project's mode.
// In 'manual' mode promises settle only inside cq.poll(): every adapter a test or child opens in the run's mode
// is polled while it has requests pending by test/fixtures/manual-driver.mjs, as a manual-mode program would
// (test/helpers.ts openLocal(), peer.mjs 'open'). Tests that ask for a mode explicitly poll for themselves
// (test/poller.test.ts has the manual-mode cases without the driver).
const COMPLETION_SUITES = [
  'test/data.test.ts',
  'test/access.test.ts',
  'test/lifecycle.test.ts',
  'test/lifetime.test.ts',
  'test/misc.test.ts',
  'test/poller.test.ts',
  'test/keepalive.test.ts',
  'test/posting.test.ts',
  'test/request-abort.test.ts',
  'test/srq.test.ts',
  'test/handshake.test.ts',
  'test/cq-overrun.test.ts',
  'test/shm.test.ts',
];

// The same suites once more with same-host shared memory on (docs/shm.md): NETDIRECT_SHM=1 reaches every adapter the
// tests and their child processes open, so every connection between two of them moves its data through the rings
// (test/shm.test.ts checks qp.transport says so). Linux only (elsewhere the provider stays on TCP); in each completion
// mode: 'loop' (the default), 'thread' (the engine thread on the doorbells) and 'manual' (the inline poller reading
// the ring).
const SHM_ENV = { NETDIRECT_SHM: '1' };

// The API suites once more against provider variance (docs/testing.md): the software provider answers, where ND v2
// leaves a provider the choice, as a vendor's may — ND_PENDING and a completion packet for what finished in the
// call, failed packets for what failed in it, ND_BUFFER_OVERFLOW first to size queries, short GetResults, spurious
// and two-phase notifications. Seeded, so a failure repeats (thread interleavings aside; another seed:
// NETDIRECT_SOFT_VARIANCE_SEED=<n> npx vitest run --project variance). Loop mode (the default) and thread mode.
const VARIANCE_SUITES = [
  'test/data.test.ts',
  'test/access.test.ts',
  'test/lifecycle.test.ts',
  'test/lifetime.test.ts',
  'test/misuse.test.ts',
  'test/poller.test.ts',
  'test/keepalive.test.ts',
  'test/batch.test.ts',
];
const VARIANCE_ENV = {
  NETDIRECT_SOFT_VARIANCE: process.env.NETDIRECT_SOFT_VARIANCE || 'all',
  NETDIRECT_SOFT_VARIANCE_SEED: process.env.NETDIRECT_SOFT_VARIANCE_SEED || '20261203',
};

export default defineConfig({
  test: {
    // The siw interop tier has its own config (test/interop/vitest.interop.config.mts, `npm run test:interop`).
    // NETDIRECT_TEST_EXCLUDE (comma-separated globs) leaves more out: the sanitizer tier skips test/build/ with it
    // (a CLI --exclude does not reach the projects below).
    exclude: [...configDefaults.exclude, 'test/interop/**', ...(process.env.NETDIRECT_TEST_EXCLUDE?.split(',').filter(Boolean) ?? [])],
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
    projects: [
      { extends: true, test: { name: 'default', include: ['test/**/*.test.ts'] } },
      // On Windows 'auto' already is 'thread' (docs/windows-event-loop.md): the default project covers it.
      ...(process.platform === 'win32'
        ? []
        : [{ extends: true, test: { name: 'thread', include: COMPLETION_SUITES, env: { NETDIRECT_COMPLETION: 'thread' } } }]),
      { extends: true, test: { name: 'manual', include: COMPLETION_SUITES, env: { NETDIRECT_COMPLETION: 'manual' } } },
      { extends: true, test: { name: 'variance', include: VARIANCE_SUITES, env: VARIANCE_ENV } },
      ...(process.platform === 'linux'
        ? [
            { extends: true, test: { name: 'shm', include: COMPLETION_SUITES, env: SHM_ENV } },
            { extends: true, test: { name: 'shm-thread', include: COMPLETION_SUITES, env: { ...SHM_ENV, NETDIRECT_COMPLETION: 'thread' } } },
            { extends: true, test: { name: 'shm-manual', include: COMPLETION_SUITES, env: { ...SHM_ENV, NETDIRECT_COMPLETION: 'manual' } } },
          ]
        : []),
      ...(process.platform === 'win32'
        ? []
        : [{ extends: true, test: { name: 'variance-thread', include: VARIANCE_SUITES, env: { ...VARIANCE_ENV, NETDIRECT_COMPLETION: 'thread' } } }]),
    ],
  },
});

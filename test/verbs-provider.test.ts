// The verbs provider (docs/verbs.md) where this machine has no usable RDMA device (CI, most desktops): the
// addon loads without it, listProviders() leaves it out, and pinning it fails with a typed error that says why.
// Its behaviour on a real device is tested in the siw interop tier (test/interop/verbs-provider.interop.test.ts).
import { describe, expect, it } from 'vitest';
import { listProviders, NdError, openAdapter } from '../lib/index';

const listed = listProviders().some((p) => p.name === 'verbs');

describe.skipIf(listed)('verbs provider without an RDMA device', () => {
  it("pinning provider 'verbs' rejects with ND_DEVICE_NOT_READY (or ND_NOT_SUPPORTED without it) and the reason", async () => {
    const err = await openAdapter('127.0.0.1', { provider: 'verbs' }).then(
      () => null,
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(NdError);
    const e = err as NdError;
    expect(['ND_DEVICE_NOT_READY', 'ND_NOT_SUPPORTED']).toContain(e.code);
    expect(e.message).toMatch(/rdma-core|verbs/);
  });
});

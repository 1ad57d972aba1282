// The verbs provider (docs/verbs.md) where this machine has no usable RDMA device (CI, most desktops): the
// addon loads without it, listProviders() leaves it out, and pinning it fails with a typed error that says why.
// Its behaviour on a real device is tested in the siw interop tier (test/interop/verbs-provider.interop.test.ts).
import * as os from 'node:os';
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

// provider 'auto' (binding/providers.cc PreferDeviceProvider): a device's address goes to the verbs provider (the
// siw interop tier checks that), any other address and loopback to the software provider.
const external = Object.values(os.networkInterfaces())
  .flat()
  .find((i) => i !== undefined && i.family === 'IPv4' && !i.internal)?.address;

describe.skipIf(listed)("provider 'auto' where no RDMA device serves the address", () => {
  for (const address of ['127.0.0.1', external]) {
    it.skipIf(address === undefined)(`openAdapter(${address ?? 'a non-loopback address'}) opens the software provider`, async () => {
      const a = await openAdapter(address!);
      try {
        expect(a.provider).toBe('soft');
      } finally {
        await a.close();
      }
    });
  }
});

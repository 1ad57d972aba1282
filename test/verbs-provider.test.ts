// The verbs provider (docs/verbs.md) where this machine has no usable RDMA device (CI, most desktops): the
// addon loads without it, listProviders() leaves it out, and pinning it fails with a typed error that says why.
// Its behaviour on a real device is tested in the siw interop tier (test/interop/verbs-provider.interop.test.ts).
import * as os from 'node:os';
import { describe, expect, it } from 'vitest';
import { listProviders, NdError, openAdapter } from '../lib/index';
import { memlockLimit, withMemlockHint } from '../lib/adapter';

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

// provider 'auto' (binding/providers/providers.cc PreferDeviceProvider): a device's address goes to the verbs provider (the
// siw interop tier checks that), any other address and loopback to the software provider.
const external = Object.values(os.networkInterfaces())
  .flat()
  .find((i) => i !== undefined && i.family === 'IPv4' && !i.internal)?.address;

// Linux only: on Windows 'auto' picks among the installed ND v2 providers (the Windows tier: netdirect_soft.dll).
describe.skipIf(listed || process.platform !== 'linux')("provider 'auto' where no RDMA device serves the address", () => {
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

// The message a refused registration gets on a verbs device (checked end to end on siw in the interop tier,
// verbs_features.mjs 'memlock'): the locked-memory limit read from /proc/self/limits.
describe('a registration the verbs provider refuses with ND_NO_MEMORY', () => {
  const limits = (v: string) => `Limit                     Soft Limit           Hard Limit           Units\nMax locked memory         ${v}              ${v}              bytes\n`;
  const noMemory = () => new NdError('ND_NO_MEMORY', 0xc0000017, 'registerMemory', 'registerMemory failed: ND_NO_MEMORY');

  it('names RLIMIT_MEMLOCK with its value and how to raise it', () => {
    const e = withMemlockHint(noMemory(), 'verbs', 16 << 20, limits('8388608')) as NdError;
    expect(e).toBeInstanceOf(NdError);
    expect(e.code).toBe('ND_NO_MEMORY');
    expect(e.message).toBe(
      'registerMemory failed: ND_NO_MEMORY: the RDMA device pins registered memory, and 16777216 bytes more may exceed ' +
        "this process's locked-memory limit (soft RLIMIT_MEMLOCK 8 MiB): raise it (`ulimit -l unlimited` in the shell " +
        'that starts node; LimitMEMLOCK=infinity for a systemd service; memlock in /etc/security/limits.conf for logins), ' +
        'or register less at a time',
    );
    expect((e as Error).cause).toBeInstanceOf(NdError);
  });

  it('leaves the error alone where the limit is unlimited, for another provider, or another status', () => {
    const err = noMemory();
    expect(withMemlockHint(err, 'verbs', 1, limits('unlimited'))).toBe(err);
    expect(withMemlockHint(err, 'soft', 1, limits('65536'))).toBe(err);
    const other = new NdError('ND_ACCESS_VIOLATION', 0xc0000005, 'registerMemory', 'x');
    expect(withMemlockHint(other, 'verbs', 1, limits('65536'))).toBe(other);
  });

  it('without /proc/self/limits it still says what to raise', () => {
    expect((withMemlockHint(noMemory(), 'verbs', 1, '') as Error).message).toMatch(/more may exceed this process's locked-memory limit: raise it/);
    expect(memlockLimit(limits('65536'))).toBe(65536);
    expect(memlockLimit(limits('unlimited'))).toBe(Infinity);
    expect(memlockLimit('')).toBeUndefined();
  });
});

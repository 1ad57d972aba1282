// openAdapter() without a local address (#29): the adapter for a peer ({ peer }: the local address the kernel routes
// to it, as rdma_resolve_addr picks one), or this host's first reachable address; and a peer's address passed where
// a local one belongs says which addresses are local and what to call instead.
import { describe, expect, it } from 'vitest';
import { listAddresses, openAdapter } from '../lib/index';
import { nativeBinding } from '../lib/discovery';
import { ndError } from './helpers';

describe('openAdapter without a local address', () => {
  it('{ peer } opens the local address that routes to the peer', async () => {
    await using loop = await openAdapter({ peer: '127.0.0.1' });
    expect(loop.address).toBe('127.0.0.1');
    await using named = await openAdapter({ peer: 'localhost', completion: 'manual' });
    expect(['127.0.0.1', '::1']).toContain(named.address);
    expect(named.completion).toBe('manual');
    const local = await listAddresses();
    const outward = local.find((a) => !a.startsWith('127.') && a.includes('.'));
    if (outward !== undefined) {
      // A host of this address's own network: the route leaves through it.
      await using toSelf = await openAdapter({ peer: outward });
      expect(toSelf.address).toBe(outward);
    }
  });

  it('no argument: the first address other hosts can reach, else loopback', async () => {
    await using a = await openAdapter();
    const local = await listAddresses();
    expect(local).toContain(a.address);
    if (local.some((x) => !/^(127\.|::1$|fe80:)/i.test(x))) expect(a.address).not.toMatch(/^(127\.|::1$|fe80:)/i);
  });

  it('a peer\'s address passed as the local one names the local addresses and openAdapter({ peer })', async () => {
    const err = await ndError(openAdapter('203.0.113.9')); // TEST-NET-3: never an address of this host
    expect(err.code).toBe('ND_INVALID_ADDRESS');
    expect(err.message).toMatch(/203\.0\.113\.9 is not an address of this host \(it serves 127\.0\.0\.1, .*\)\. To reach a peer at 203\.0\.113\.9, open the local adapter that routes to it: openAdapter\(\{ peer: '203\.0\.113\.9' \}\)/);
  });

  it('a peer that is not an address or name, or that does not resolve, is a typed error', async () => {
    expect((await ndError(openAdapter({ peer: 5 as never }))).code).toBe('ERR_ND_INVALID_ARGUMENT');
    expect((await ndError(openAdapter({ peer: '' }))).code).toBe('ERR_ND_INVALID_ARGUMENT');
    expect((await ndError(openAdapter({ peer: 'no-such-host.invalid' }))).message).toMatch(/cannot resolve the peer "no-such-host\.invalid"/);
    expect((await ndError(openAdapter({ peer: '127.0.0.1', sideways: 1 } as never))).code).toBe('ERR_ND_INVALID_ARGUMENT');
    // What a listener prints, pasted whole: the error says the port goes to connect().
    for (const [given, host] of [['192.0.2.2:18515', '192.0.2.2'], ['[::1]:18515', '::1']]) {
      const err = await ndError(openAdapter({ peer: given }));
      expect(err.code).toBe('ND_INVALID_ADDRESS');
      expect(err.message).toContain(`"${given}" looks like "host:port": give the address alone ("${host}") and the port to connect()`);
    }
    expect((await ndError(openAdapter('127.0.0.1:18515'))).message).toContain('give the address alone ("127.0.0.1")');
    expect((await ndError(openAdapter(null as never))).code).toBe('ERR_ND_INVALID_ARGUMENT');
  });
});

describe("provider 'verbs' where this build has none", () => {
  // CI's build always has it (rdma-core's headers are installed); an addon compiled without them has no 'verbs' in
  // builtProviders. That one state is made here by hiding it from that list, which is all the check reads.
  it.skipIf(process.platform !== 'linux')('says the build lacks it, what to install and to rebuild (not "DLLs load on Windows only")', async () => {
    const addon = nativeBinding();
    const built = addon.builtProviders;
    Object.defineProperty(addon, 'builtProviders', { value: built.filter((p) => p !== 'verbs'), configurable: true, writable: true });
    try {
      const err = await ndError(openAdapter('127.0.0.1', { provider: 'verbs' }));
      expect(err.code).toBe('ND_NOT_SUPPORTED');
      expect(err.message).toMatch(/this build of netdirect has no 'verbs' provider: rdma-core's headers were not found when the addon was compiled \(Debian\/Ubuntu: apt-get install libibverbs-dev librdmacm-dev; .*\), then rebuild it: npm rebuild netdirect --build-from-source/);
      expect(err.message).not.toMatch(/Windows/);
    } finally {
      Object.defineProperty(addon, 'builtProviders', { value: built, configurable: true, writable: true });
    }
  });
});

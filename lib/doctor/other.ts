// The checks on other platforms: the built-in provider, its loopback self-test, RDMA devices and the verbs
// provider (Linux), the peers named on the command line.

import { VERBS_BUILD_PACKAGES, listAddresses, listProviders, openAdapter } from '../discovery.js';
import { check } from './check.js';
import { type DoctorCheck, type DoctorFacts } from './facts.js';
import { rdmaTransport } from './gather.js';

function isLoopback(address: string): boolean {
  return address === '::1' || address.startsWith('127.');
}

export function otherChecks(facts: DoctorFacts): DoctorCheck[] {
  const out: DoctorCheck[] = [];
  const providerTitle = 'Software iWARP provider (built in)';
  if (!Array.isArray(facts.providers)) out.push(check('soft-provider', providerTitle, 'fail', `listProviders() failed: ${facts.providers.error}`));
  else {
    const soft = facts.providers.find((p) => p.kind === 'builtin');
    const about = soft && [`${soft.name}${soft.guid ? ` ${soft.guid}` : ''}`, `ND version 0x${soft.ndVersion.toString(16).padStart(8, '0')}`];
    if (about && facts.addonVersion) about.push(`addon ${facts.addonVersion}`);
    out.push(
      about
        ? check('soft-provider', providerTitle, 'ok', about.join(', '))
        : check('soft-provider', providerTitle, 'fail', "listProviders() lists no built-in provider: the addon is not netdirect's own build"),
    );
  }

  const addressesTitle = 'Local addresses served (listAddresses)';
  if (facts.addresses === undefined) out.push(check('addresses', addressesTitle, 'skip', 'not gathered'));
  else if (!Array.isArray(facts.addresses)) out.push(check('addresses', addressesTitle, 'fail', `listAddresses() failed: ${facts.addresses.error}`));
  else if (facts.addresses.length === 0) out.push(check('addresses', addressesTitle, 'fail', 'no local address: the machine has no IPv4/IPv6 address up'));
  else if (facts.addresses.every(isLoopback)) {
    out.push(check('addresses', addressesTitle, 'warn', `${facts.addresses.join(', ')} — loopback only: peers on other hosts cannot reach this machine`));
  } else out.push(check('addresses', addressesTitle, 'ok', facts.addresses.join(', ')));

  const selfTitle = 'Self-test: RDMA Write over 127.0.0.1 (listener + connector in this process)';
  const t = facts.selfTest;
  if (t === undefined) out.push(check('self-test', selfTitle, 'skip', 'not run'));
  else if (t.ok) {
    const how = t.completion === undefined ? '' : `; completions: ${t.completion === 'loop' ? 'on the event loop (no thread hop)' : `'${t.completion}'`}`;
    out.push(check('self-test', selfTitle, 'ok', `${t.bytes}-byte RDMA Write placed and verified, then a Send, in ${t.ms} ms (port ${t.port}${how})`));
  }
  else {
    out.push(
      check(
        'self-test',
        selfTitle,
        'fail',
        `${t.error}`,
        facts.platform === 'linux'
          ? '# Check that 127.0.0.1 is up (ip addr show lo) and that local TCP connections are allowed (iptables/nftables rules on lo)'
          : '# Check that 127.0.0.1 is up and that local TCP connections are allowed',
      ),
    );
  }

  const crcTitle = 'CRC32c (MPA CRC of the software provider)';
  if (facts.hardwareCrc32c === true) {
    const how: Record<string, string> = {
      'avx512-vpclmulqdq': 'AVX-512 VPCLMULQDQ folding with crc32 chains (tens of GB/s per core)',
      pclmulqdq: 'PCLMULQDQ folding with crc32 chains',
      'sse4.2': 'the crc32 instruction (SSE4.2)',
    };
    const impl = facts.crc32cImplementation;
    out.push(check('crc32c', crcTitle, 'ok', `hardware: ${(impl && how[impl]) ?? 'the CPU\'s crc32 instruction'}`));
  }
  else if (facts.hardwareCrc32c === false) {
    out.push(check('crc32c', crcTitle, 'warn', 'software (table-driven): MPA CRC costs CPU at high bandwidth; NETDIRECT_SOFT_CRC=0 stops requesting it (a peer may still require it)'));
  } else out.push(check('crc32c', crcTitle, 'skip', 'unknown (the addon did not say)'));

  const crcEnv = facts.env.NETDIRECT_SOFT_CRC;
  out.push(
    check(
      'soft-crc-env',
      'NETDIRECT_SOFT_CRC',
      'ok',
      crcEnv === undefined
        ? 'not set: the software provider requests MPA CRC (default)'
        : crcEnv === '0'
          ? 'NETDIRECT_SOFT_CRC=0: the software provider does not request MPA CRC (it is still on when the peer asks for it)'
          : `NETDIRECT_SOFT_CRC=${crcEnv}: the software provider requests MPA CRC`,
    ),
  );

  // The verbs provider: not built (no rather than which runtime package), no rdma-core, no device, or usable.
  const vp = facts.verbsProvider;
  if (facts.platform === 'linux') {
    const [status, detail]: [DoctorCheck['status'], string] =
      vp === undefined
        ? ['skip', 'not gathered']
        : vp.built === false
        ? [
            'warn',
            "not built: this addon was compiled without rdma-core's headers, so it cannot drive RDMA devices whatever is installed now. " +
              `Install them (${VERBS_BUILD_PACKAGES}), then rebuild: npm rebuild netdirect --build-from-source`,
          ]
        : vp.listed
          ? ['ok', `built and usable: serves ${vp.addresses.length > 0 ? vp.addresses.join(', ') : 'no address yet (no IP address is bound to a device)'}`]
          : /could not be loaded|too old/.test(vp.error ?? '')
            ? ['ok', `built; no rdma-core runtime (${vp.error}): apt install libibverbs1 librdmacm1 ibverbs-providers for RDMA devices; the software provider works without it`]
            : ['ok', `built; no RDMA device${vp.error ? ` (${vp.error})` : ''}: not needed, the software provider runs iWARP over TCP`];
    out.push(check('verbs-provider', 'Verbs provider (RDMA devices through rdma-core)', status, detail));
  }

  const devicesTitle = 'RDMA devices (/sys/class/infiniband)';
  const d = facts.rdmaDevices;
  if (d === undefined) out.push(check('rdma-devices', devicesTitle, 'skip', `not gathered on ${facts.platform}`));
  else if (!Array.isArray(d)) out.push(check('rdma-devices', devicesTitle, 'skip', `could not run: ${d.error}`));
  else if (d.length === 0) {
    out.push(check('rdma-devices', devicesTitle, 'ok', "none — not needed: netdirect's built-in provider runs iWARP over ordinary TCP sockets"));
  } else {
    const v = facts.verbsProvider;
    const lines = d.map((x) => {
      const kind = x.driver ?? (/^siw/.test(x.name) ? 'siw (by name)' : /^rxe/.test(x.name) ? 'rxe (by name)' : 'driver unknown');
      const state = x.portState ? x.portState.replace(/^\d+:\s*/, '').toLowerCase() : 'state unknown';
      const usable = v?.built === false
        ? 'not usable: this addon was built without the verbs provider (see "Verbs provider")'
        : !v?.listed
        ? 'not usable: the verbs provider is not available (rdma-core missing?)'
        : state === 'active'
          ? "usable: openAdapter(address) opens it for an address it serves (or pin { provider: 'verbs' })"
          : 'not usable: port 1 is not active';
      return `${x.name}: ${kind}, ${rdmaTransport(x)}, port 1 ${state}${x.parent ? `, on ${x.parent}` : ''} — ${usable}`;
    });
    const tail = v?.listed
      ? `verbs provider addresses: ${v.addresses.length > 0 ? v.addresses.join(', ') : 'none (no IP address is bound to a device)'}`
      : `verbs provider not listed${v?.error ? ` (${v.error})` : ''}: install rdma-core (apt install libibverbs1 librdmacm1 ibverbs-providers); netdirect's software provider works without it`;
    out.push(check('rdma-devices', devicesTitle, 'ok', [...lines, tail].join('\n')));
  }

  const modulesTitle = 'Kernel soft-RDMA modules (siw, rdma_rxe)';
  const m = facts.kernelModules;
  if (m === undefined) out.push(check('kernel-soft-rdma', modulesTitle, 'skip', `not gathered on ${facts.platform}`));
  else {
    const loaded = [m.siw ? 'siw' : '', m.rdma_rxe ? 'rdma_rxe' : ''].filter(Boolean);
    out.push(
      check(
        'kernel-soft-rdma',
        modulesTitle,
        'ok',
        loaded.length === 0
          ? "neither loaded — not needed by netdirect; a kernel siw is an iWARP peer you can interop with (modprobe siw; rdma link add siw0 type siw netdev <if>)"
          : `${loaded.join(', ')} loaded${m.siw ? ' — kernel siw is an iWARP peer netdirect interoperates with (rping, perftest over siw)' : ''}${
              !m.siw && m.rdma_rxe ? ' — rxe is RoCEv2, not iWARP: netdirect does not talk to it' : ''
            }`,
      ),
    );
  }
  return out;
}

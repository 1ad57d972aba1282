// The verbs provider (binding/verbs/, docs/verbs.md, issue #14) on real Linux RDMA devices: the kernel's siw
// (iWARP, siw0 on eth0) and rxe (RoCE v2, rxe0 on the dummy nd0) in the siw-vm guest, with Node and this package
// inside the guest (test/interop/siw-vm/push-node). On each device:
//   * discovery: listProviders() shows 'verbs', listAddresses({provider:'verbs'}) the device's address, and
//     Adapter.info carries ibv_query_device's limits and the transport's private data limit;
//   * nd_peer.mjs over the verbs provider against verbs_peer.c (a plain rdma_cm + libibverbs program), both
//     roles, completion 'loop' (libuv watches the adapter's epoll descriptor) and 'thread';
//   * verbs_features.mjs: a shared receive queue behind two QPs, memory windows (rxe; ND_NOT_SUPPORTED on siw),
//     and disconnects initiated by either side;
// on siw only (the host's software provider speaks iWARP):
//   * interop across the wire: the verbs provider on guest siw <-> the software provider on the host, both
//     directions. Every byte is checked on the side it lands on (nd_peer.mjs / verbs_peer.c protocol);
//   * ndbench --compare perftest: netdirect and perftest's ib_write_lat / ib_write_bw on siw0 in one command,
//     the ratio per size and the targets table (figures printed, never asserted: docs/ndbench.md has them);
//     write_lat also with --compare native (the same test on the same verbs queue pair from C++).
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import type { SiwVmContext } from './global-setup';
import { Background, freePort, runCmd } from './proc';
import { GUEST_HOST_IP, GUEST_IP, hostPortFor, repoRoot, SiwVm } from './siw-vm';

const ctx = inject('siwVm') as SiwVmContext | undefined;
const HAVE_HEADERS = fs.existsSync('/usr/include/infiniband/verbs.h') && fs.existsSync('/usr/include/rdma/rdma_cma.h');
const ready = ctx?.ready === true && HAVE_HEADERS;
const skipReason = !ctx
  ? 'the interop tier is not set up here: run `npm run test:interop`'
  : !ctx.ready
    ? ctx.reason
    : 'rdma-core headers missing (libibverbs-dev, librdmacm-dev)';
if (!ready) process.stderr.write(`[interop] verbs provider: skipped: ${skipReason}\n`);

const HERE = __dirname;
const NODE = '/opt/nd/bin/node';
const PKG = '/opt/nd/pkg';
const PEER = '/opt/nd/extra/verbs_peer';
const SIZES = '1,4096,65536,1048576';
const VERBS_ENV = `ND_PEER_PROVIDER=verbs ND_PEER_LOCAL=${GUEST_IP}`;
// Guest ports forwarded from the host (siw-vm common.sh): 7179-7183 are this file's; tests inside the guest
// only take ports from 7300 on.
let nextGuestPort = 7179;
let nextInnerPort = 7300;

/** The guest's RDMA devices (test/interop/siw-vm/build sets both up at boot). */
const DEVICES = [
  // librdmacm's uint8_t private_data_len; siw has no memory windows (max_mw 0)
  { name: 'siw0', ip: GUEST_IP, transport: 'iwarp', callerData: 255, windows: false },
  // the IB CM REQ's 92 bytes less rdma_cm's 36; rxe has type 1 windows
  { name: 'rxe0', ip: '10.0.3.15', transport: 'roce', callerData: 56, windows: true },
] as const;

describe.skipIf(!ready)('verbs provider on Linux siw (siw-vm guest)', () => {
  let vm: SiwVm;
  const wall: string[] = [];

  beforeAll(async () => {
    vm = new SiwVm(ctx!.tools, (m) => process.stderr.write(`[interop] ${m}\n`));
    for (const f of ['build/Release/netdirect.node', 'dist/esm/index.mjs']) {
      if (!fs.existsSync(path.join(repoRoot, f))) throw new Error(`${f} missing: run npm run compile first`);
    }
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'netdirect-verbs-'));
    const bin = path.join(dir, 'verbs_peer');
    const b = await runCmd(process.env.CC || 'cc', ['-O2', '-Wall', '-o', bin, path.join(HERE, 'verbs_peer.c'), '-lrdmacm', '-libverbs'], { timeoutMs: 60_000 });
    if (b.code !== 0) throw new Error(`building verbs_peer failed:\n${b.stdout}${b.stderr}`);
    const t0 = Date.now();
    const push = await runCmd(path.join(ctx!.tools, 'push-node'), [bin], { timeoutMs: 300_000 });
    if (push.code !== 0) throw new Error(`push-node failed (exit ${push.code}):\n${push.stdout}${push.stderr}`);
    wall.push(`push-node ${((Date.now() - t0) / 1000).toFixed(1)} s`);
  }, 400_000);

  afterAll(() => {
    process.stderr.write(`[interop] verbs provider: ${wall.join(', ')}\n`);
  });

  const guestNode = (script: string): Promise<string> =>
    vm.check(`cd ${PKG} && echo ${Buffer.from(script).toString('base64')} | base64 -d > t.js && ${NODE} t.js`, 60_000);

  for (const dev of DEVICES) {
    const env = `ND_PEER_PROVIDER=verbs ND_PEER_LOCAL=${dev.ip}`;
    describe(`${dev.name} (${dev.transport})`, () => {
      it('discovery: the verbs provider, its address and the device limits in Adapter.info', async () => {
        const out = await guestNode(`
          const nd = require('./dist/cjs/index.js');
          (async () => {
            const names = nd.listProviders().map((p) => p.name);
            const addrs = await nd.listAddresses({ provider: 'verbs' });
            const a = await nd.openAdapter('${dev.ip}', { provider: 'verbs' });
            const i = a.info;
            console.log(JSON.stringify({ names, addrs, provider: a.provider, caller: i.maxCallerData, sge: i.maxInitiatorSge, cq: i.maxCompletionQueueDepth, ird: i.maxInboundReadLimit }));
            await a.close();
          })().catch((e) => { console.error(e); process.exit(1); });`);
        const r = JSON.parse(out.trim().split('\n').pop()!);
        expect(r.names).toEqual(expect.arrayContaining(['soft', 'verbs']));
        expect(r.addrs).toContain(dev.ip);
        expect(r.provider).toBe('verbs');
        expect(r.caller).toBe(dev.callerData);
        expect(r.sge).toBeGreaterThan(0);
        expect(r.cq).toBeGreaterThan(0);
        expect(r.ird).toBeGreaterThan(0);
      });

      it(`provider 'auto' opens ${dev.ip} on the verbs provider; loopback stays on the software provider`, async () => {
        const out = await guestNode(`
          const nd = require('./dist/cjs/index.js');
          (async () => {
            const a = await nd.openAdapter('${dev.ip}');
            const b = await nd.openAdapter('${dev.ip}', { provider: 'auto' });
            const l = await nd.openAdapter('127.0.0.1');
            console.log(JSON.stringify({ dflt: a.provider, auto: b.provider, loopback: l.provider, caller: a.info.maxCallerData }));
            await a.close(); await b.close(); await l.close();
          })().catch((e) => { console.error(e); process.exit(1); });`);
        const r = JSON.parse(out.trim().split('\n').pop()!);
        expect(r).toEqual({ dflt: 'verbs', auto: 'verbs', loopback: 'soft', caller: dev.callerData });
      });

      it(`netdirect doctor reports ${dev.name}: transport, link state, usable by the verbs provider`, async () => {
        const r = await vm.run(`cd ${PKG} && ${NODE} dist/cjs/cli.js doctor`, 60_000);
        expect(r.output, r.output).toMatch(new RegExp(`${dev.name}: \\S+ \\(by name\\), ${dev.transport}, port 1 active.*usable: openAdapter`));
        expect(r.output).toMatch(new RegExp(`verbs provider addresses: .*${dev.ip.replace(/\./g, '\\.')}`));
      });

      // 'manual' is not here: nd_peer.mjs awaits its requests' promises, which only cq.poll() settles in that mode.
      for (const mode of ['loop', 'thread'] as const) {
        it(`verbs provider as client, verbs_peer.c as server (completion ${mode})`, async () => {
          const port = nextInnerPort++;
          await vm.background('vps', `${PEER} server ${dev.ip} ${port} 11 ${SIZES}`);
          await vm.check(`for i in $(seq 300); do grep -q listening /tmp/vps.log 2>/dev/null && exit 0; sleep 0.1; done; exit 1`, 60_000);
          const r = await vm.run(`cd ${PKG} && NETDIRECT_COMPLETION=${mode} ${env} timeout 90 ${NODE} test/interop/nd_peer.mjs client ${dev.ip} ${port} 11 ${SIZES}`, 120_000);
          const peer = await vm.waitBackground('vps', 60_000);
          expect(r.output, r.output + peer.log).toMatch(/nd_peer: ok \(4 rounds\)/);
          expect(peer.log, peer.log).toMatch(/verbs_peer: ok \(4 rounds\)/);
        }, 180_000);
      }

      // test/interop/verbs_features.mjs: both ends in one guest process on this device.
      it(`shared receive queue, a 0-byte receive, memory windows${dev.windows ? '' : ' (none on this device: ND_NOT_SUPPORTED)'} and disconnects from either side`, async () => {
        const port = nextInnerPort++;
        const r = await vm.run(`cd ${PKG} && timeout 120 ${NODE} test/interop/verbs_features.mjs ${dev.ip} ${port}`, 150_000);
        expect(r.output, r.output).toMatch(/verbs_features: ok/);
        expect(r.output).toMatch(/srq: receive 2: 17 bytes from client 1 \(for server QP A\) verified/);
        expect(r.output).toMatch(/zero: a 0-byte Send landed in a 0-byte receive/);
        if (dev.windows) {
          expect(r.output).toMatch(/mw: Read through the window verified/);
          expect(r.output).toMatch(/mw: Read through the invalidated window refused \(.*ND_ACCESS_VIOLATION/);
        } else {
          expect(r.output).toMatch(/mw: not supported \(.*has no memory windows \(the device reports none/);
        }
        // siw charges registered pages to RLIMIT_MEMLOCK even for root, and the guest's limit is finite.
        if (dev.name === 'siw0') expect(r.output).toMatch(/memlock: refused \(ND_NO_MEMORY: .*soft RLIMIT_MEMLOCK \d.*ulimit -l unlimited/);
        else expect(r.output).toMatch(/memlock: (refused \(ND_NO_MEMORY: .*RLIMIT_MEMLOCK|\d+ bytes registered past|no finite limit)/);
        // On rxe, without the passive side's rdma_disconnect the initiator waits for the IB CM's DREQ timeouts.
        expect(r.output).toMatch(/disc: client-initiated disconnect completed on both sides/);
        expect(r.output).toMatch(/disc: server-initiated disconnect completed on both sides/);
      }, 180_000);

      it('verbs provider as server, verbs_peer.c as client', async () => {
        const port = nextInnerPort++;
        await vm.background('ndv', `cd ${PKG} && ${env} timeout 90 ${NODE} test/interop/nd_peer.mjs server ${port} 12 ${SIZES}`);
        await vm.check(`for i in $(seq 300); do grep -q listening /tmp/ndv.log 2>/dev/null && exit 0; sleep 0.1; done; exit 1`, 60_000);
        const r = await vm.run(`timeout 90 ${PEER} client ${dev.ip} ${port} 12 ${SIZES}`, 120_000);
        const nd = await vm.waitBackground('ndv', 60_000);
        expect(r.output, r.output + nd.log).toMatch(/verbs_peer: ok \(4 rounds\)/);
        expect(nd.log, nd.log).toMatch(/nd_peer: ok \(4 rounds\)/);
      }, 180_000);
    });
  }

  // rdma_cm listens on every device for a wildcard bind; an ND listener belongs to its adapter (one port of one
  // device): a request that arrives on rxe0 is refused at once, one on siw0 is handed over and accepted.
  it('a wildcard listener of the siw0 adapter refuses a request arriving on rxe0 and accepts one on siw0', async () => {
    const port = nextInnerPort++;
    const out = await guestNode(`
      const nd = require('./dist/cjs/index.js');
      const qp = (a) => a.createQueuePair({ receiveCq: a.createCompletionQueue() });
      (async () => {
        const s = await nd.openAdapter('${GUEST_IP}', { provider: 'verbs' });
        const l = await s.listen({ host: '0.0.0.0', port: ${port} });
        const other = await nd.openAdapter('10.0.3.15', { provider: 'verbs' });
        const same = await nd.openAdapter('${GUEST_IP}', { provider: 'verbs' });
        const r = { port: Number(s.info.adapterId & 0xffn) };
        const served = (async () => { const c = await l.getConnectionRequest(); await c.accept(qp(s)); return 'accepted'; })();
        try { await other.connect(qp(other), '10.0.3.15:${port}'); r.other = 'connected'; } catch (e) { r.other = e.code; }
        try { await same.connect(qp(same), '${GUEST_IP}:${port}'); r.same = 'connected'; } catch (e) { r.same = e.code; }
        r.served = await served;
        console.log(JSON.stringify(r));
        await other.close(); await same.close(); await s.close();
      })().catch((e) => { console.error(e); process.exit(1); });`);
    const r = JSON.parse(out.trim().split('\n').pop()!);
    // port: the adapter id packs the port rdma_cm bound the address to (siw has one: 1).
    expect(r).toEqual({ port: 1, other: 'ND_CONNECTION_REFUSED', same: 'connected', served: 'accepted' });
  }, 120_000);

  it('an address no RDMA device serves is refused by the verbs provider', async () => {
    const r = await vm.run(`cd ${PKG} && ${NODE} -e "require('./dist/cjs/index.js').openAdapter('127.0.0.1',{provider:'verbs'}).then(()=>console.log('opened'),(e)=>console.log(e.code, e.status))"`, 60_000);
    expect(r.output).toMatch(/ND_INVALID_ADDRESS/);
  });

  // The comparison end to end: ndbench's two sides and perftest's two, all on siw0 in one command. Only the
  // layout is checked; the figures (TCG qemu) go to stderr and docs/ndbench.md.
  for (const [test, args, size, row, compare] of [
    ['write_lat', '-s 8 -n 20 --completion manual', 8, 0, 'perftest,native'],
    ['write_bw', '-s 65536 -n 20', 65536, 1, 'perftest'],
  ] as const) {
    it(`ndbench ${test} --compare ${compare} on siw0: the figures, the ratios and the targets row`, async () => {
      const t0 = Date.now();
      const r = await vm.run(
        `cd ${PKG} && timeout 400 ${NODE} dist/cjs/bench/cli.js ${test} ${args} --loopback --provider verbs --bind ${GUEST_IP} ` +
          `--compare ${compare} --repetitions 3 --timeout 60 --json /tmp/${test}.json`,
        450_000,
      );
      wall.push(`--compare perftest ${test} ${((Date.now() - t0) / 1000).toFixed(1)} s`);
      process.stderr.write(`[interop] ${r.output.split('\n').filter((l) => /^ (#bytes|\d|write_|Targets)/.test(l)).join('\n[interop] ')}\n`);
      expect(r.code, r.output).toBe(0);
      expect(r.output).toMatch(new RegExp(`perftest\\[(usec|MiB/sec)\\]\\s+nd/perftest`));
      const j = JSON.parse(await vm.check(`cat /tmp/${test}.json`));
      const res = j.results[0];
      expect(res.size).toBe(size);
      expect(res.baselines.perftest.MsgSize).toBe(size);
      expect(res.ratios.perftest).toBeGreaterThan(0);
      expect(res.repetitions.netdirect).toHaveLength(3);
      expect(res.repetitions.perftest).toHaveLength(3);
      expect(j.extra.perftest_client).toMatch(new RegExp(`^ib_${test} -R -F -p \\d+ -s ${size} -d siw0 `));
      expect(j.targets[row].result).toMatch(/^(pass|miss)$/);
      if (compare.includes('native')) {
        expect(r.output).toMatch(/native\[usec\]\s+nd\/native/);
        expect(res.baselines.native.MsgSize).toBe(size);
        expect(res.ratios.native).toBeGreaterThan(0);
        expect(res.repetitions.native).toHaveLength(3);
      }
      expect(r.output).toMatch(new RegExp(`${j.targets[row].row}.*(pass|miss)`));
    }, 500_000);
  }

  it('interop: verbs provider (guest siw) connects to the software provider (host)', async () => {
    const port = await freePort();
    const host = new Background('node', [path.join(HERE, 'nd_peer.mjs'), 'server', String(port), '13', SIZES], { timeoutMs: 120_000 });
    try {
      await host.waitFor(/listening/, 30_000, 'the host nd_peer server listening');
      const r = await vm.run(`cd ${PKG} && ${VERBS_ENV} timeout 90 ${NODE} test/interop/nd_peer.mjs client ${GUEST_HOST_IP} ${port} 13 ${SIZES}`, 120_000);
      const h = await host.stop('SIGTERM', 30_000);
      expect(r.output, r.output).toMatch(/nd_peer: ok \(4 rounds\)/);
      expect(h.stdout, h.stdout + h.stderr).toMatch(/nd_peer: ok \(4 rounds\)/);
    } finally {
      await host.stop('SIGKILL', 1000).catch(() => undefined);
    }
  }, 180_000);

  it('interop: the software provider (host) connects to the verbs provider (guest siw)', async () => {
    const port = nextGuestPort++;
    await vm.background('ndv', `cd ${PKG} && ${VERBS_ENV} timeout 90 ${NODE} test/interop/nd_peer.mjs server ${port} 14 ${SIZES}`);
    await vm.check(`for i in $(seq 300); do grep -q listening /tmp/ndv.log 2>/dev/null && exit 0; sleep 0.1; done; exit 1`, 60_000);
    const r = await runCmd('node', [path.join(HERE, 'nd_peer.mjs'), 'client', '127.0.0.1', String(hostPortFor(port)), '14', SIZES], { timeoutMs: 120_000 });
    const nd = await vm.waitBackground('ndv', 60_000);
    // Each side's failure message carries the other's log: which side failed first is the question.
    expect(r.stdout, `${r.stdout}${r.stderr}\n--- guest (verbs) side:\n${nd.log}`).toMatch(/nd_peer: ok \(4 rounds\)/);
    expect(nd.log, `${nd.log}\n--- host (soft) side:\n${r.stdout}${r.stderr}`).toMatch(/nd_peer: ok \(4 rounds\)/);
  }, 180_000);
});

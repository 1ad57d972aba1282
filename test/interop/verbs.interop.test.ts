// RDMA Write, Read and Send between netdirect (test/interop/nd_peer.mjs, public API only) and a verbs program
// of our own (test/interop/verbs_peer.c: librdmacm + libibverbs, rdma-core 44) on Linux soft-iWARP (siw) in
// the siw-vm guest: the second route issue #5 asks for where rping does not reach (1 B, 1 MiB, Send payloads,
// buffers advertised in the accept's private data). Both roles, MPA CRC on and off, every byte checked on
// the side it lands on, and tshark's iWARP dissectors over one capture per case.
//
//   netdirect client: host `nd_peer.mjs client 127.0.0.1 17175` → slirp → guest `verbs_peer server 0.0.0.0 7175`
//   netdirect server: host `nd_peer.mjs server P`                 ← slirp ← guest `verbs_peer client 10.0.2.2 P`
//
// verbs_peer is compiled on the host (Debian 12 has rdma-core 44, like the guest; needs libibverbs-dev and
// librdmacm-dev, installed by .ci/interop.sh) as a dynamically linked binary and copied into the guest
// through the siw-vm `run` command (base64 in the command line, checked with md5sum).
import { createHash } from 'node:crypto';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { Capture, tsharkVerdict, type TsharkVerdict } from './capture';
import type { SiwVmContext } from './global-setup';
import { Background, runCmd, type CmdResult, freePort } from './proc';
import { GUEST_DMESG, GUEST_HOST_IP, hostPortFor, interopMode, kernelProblems, repoRoot, SiwVm, splitKernelLog } from './siw-vm';

const ctx = inject('siwVm') as SiwVmContext | undefined;
const HEADERS = ['/usr/include/infiniband/verbs.h', '/usr/include/rdma/rdma_cma.h'];
const missingHeaders = HEADERS.filter((h) => !fs.existsSync(h));
// NETDIRECT_INTEROP=1 makes missing verbs headers an error (beforeAll fails); unset, the file is skipped.
const ready = ctx?.ready === true && (missingHeaders.length === 0 || interopMode() === 'required');
const skipReason = !ctx
  ? 'the interop tier is not set up here: run `npm run test:interop`'
  : ctx.ready
    ? `missing ${missingHeaders.join(', ')} (apt-get install libibverbs-dev librdmacm-dev)`
    : ctx.reason;

const HERE = path.join(repoRoot, 'test', 'interop');
const ND_PEER = path.join(HERE, 'nd_peer.mjs');
const GUEST_BIN = '/tmp/verbs_peer';
const GUEST_PORT = 7175; // forwarded from host 17175 (test/interop/siw-vm/README.md); rping's 7174 stays free
const HOST_TO_GUEST_PORT = hostPortFor(GUEST_PORT);
const SIZES = [1, 4095, 65536, 1 << 20];
// What each side prints per round once the step's data is checked (verbs_peer.c / nd_peer.mjs).
const ACCEPTOR_STEPS = ['received Send verified', 'RDMA Write data verified', 'Send done', 'peer Read done'];
const CONNECTOR_STEPS = ['RDMA Write and Send done', 'received Send verified', 'RDMA Read data verified'];
const GUEST_RESET = 'for p in $(pidof verbs_peer); do kill -9 $p; done; dmesg -c >/dev/null';

interface Case {
  role: 'client' | 'server'; // netdirect's role
  crc: boolean; // NETDIRECT_SOFT_CRC: we ask for MPA CRC (siw, pristine, honours the request)
}
const CASES: Case[] = [
  { role: 'client', crc: false },
  { role: 'client', crc: true },
  { role: 'server', crc: false },
  { role: 'server', crc: true },
];

function roundLines(steps: string[]): string[] {
  return SIZES.flatMap((n, r) => steps.map((s) => `round ${r} size ${n}: ${s}`));
}

interface Run {
  nd: CmdResult;
  verbsExit: number | null;
  verbsLog: string;
  kernel: string[];
  verdict: TsharkVerdict;
  dropped: number;
}

describe.skipIf(!ready)('RDMA Write/Read/Send: netdirect vs a verbs program on Linux siw', () => {
  let vm: SiwVm;
  let artifacts: string;
  const wall: string[] = [];

  beforeAll(async () => {
    const t0 = Date.now();
    vm = new SiwVm(ctx!.tools, (m) => process.stderr.write(`[interop] ${m}\n`));
    artifacts = path.join(process.env.NETDIRECT_INTEROP_ARTIFACTS || fs.mkdtempSync(path.join(os.tmpdir(), 'netdirect-interop-')), 'verbs');
    fs.mkdirSync(artifacts, { recursive: true });
    process.stderr.write(`[interop] verbs artifacts: ${artifacts}\n`);
    if (!fs.existsSync(path.join(repoRoot, 'dist', 'esm', 'index.mjs'))) throw new Error('dist/esm missing: run npm run compile first');
    if (missingHeaders.length > 0) throw new Error(`NETDIRECT_INTEROP=1 but ${skipReason}`);
    // 1. Build on the host, dynamically linked (the guest has librdmacm1/libibverbs1 of rdma-core 44 too).
    const bin = path.join(artifacts, 'verbs_peer');
    const cc = process.env.CC || 'cc';
    const b = await runCmd(cc, ['-O2', '-Wall', '-Wextra', '-Werror', '-o', bin, path.join(HERE, 'verbs_peer.c'), '-lrdmacm', '-libverbs'], { timeoutMs: 60_000 });
    if (b.code !== 0) throw new Error(`building verbs_peer failed (${cc}, exit ${b.code}):\n${b.stdout}${b.stderr}`);
    // 2. Copy it in: `run` gives the guest command stdin=/dev/null, so the bytes travel base64 in the command
    //    line (chunks well below the 128 KiB single-argument limit), checked with md5sum.
    const bytes = fs.readFileSync(bin);
    const md5 = createHash('md5').update(bytes).digest('hex');
    const b64 = bytes.toString('base64');
    await vm.check(`rm -f ${GUEST_BIN} ${GUEST_BIN}.b64`, 15_000);
    for (let i = 0; i < b64.length; i += 48_000) {
      await vm.check(`printf %s '${b64.slice(i, i + 48_000)}' >> ${GUEST_BIN}.b64`, 30_000);
    }
    const out = await vm.check(`base64 -d ${GUEST_BIN}.b64 > ${GUEST_BIN} && chmod +x ${GUEST_BIN} && rm ${GUEST_BIN}.b64 && md5sum ${GUEST_BIN}`, 30_000);
    expect(out.split(/\s+/)[0], 'verbs_peer copied into the guest intact').toBe(md5);
    // 3. It loads there (the library ABI matches): the usage message, exit 2.
    const u = await vm.run(`${GUEST_BIN}`, 15_000);
    expect(u, 'verbs_peer runs in the guest').toMatchObject({ code: 2 });
    expect(u.output).toMatch(/usage: verbs_peer/);
    await vm.reloadSiw('pristine');
    wall.push(`setup (build + copy) ${Date.now() - t0} ms`);
  });

  afterAll(async () => {
    if (!vm) return;
    await vm.run(GUEST_RESET, 15_000).catch(() => {});
    if (wall.length) process.stderr.write(`[interop] verbs wall time: ${wall.join(', ')}\n`);
  });

  async function runCase(c: Case, seed: number, slug: string): Promise<Run> {
    const sizes = SIZES.join(',');
    const env = { ...process.env, NETDIRECT_SOFT_CRC: c.crc ? '1' : '0' };
    const pcap = path.join(artifacts, `${slug}.pcap`);
    let cap: Capture | undefined;
    let capStats: Awaited<ReturnType<Capture['stop']>> | undefined;
    let nd: CmdResult;
    let verbsExit: number | null;
    let verbsLog: string;
    let klog: string;
    await vm.check(GUEST_RESET, 15_000);
    try {
      if (c.role === 'client') {
        await vm.background('vps', `timeout 120 ${GUEST_BIN} server 0.0.0.0 ${GUEST_PORT} ${seed} ${sizes}`);
        await vm.waitListening(GUEST_PORT);
        cap = await Capture.start(pcap, [HOST_TO_GUEST_PORT]);
        nd = await runCmd(process.execPath, [ND_PEER, 'client', '127.0.0.1', String(HOST_TO_GUEST_PORT), String(seed), sizes], { timeoutMs: 120_000, env });
        const w = await vm.waitBackground('vps', 30_000);
        if (w.exit === null) await vm.killBackground('vps');
        verbsExit = w.exit;
        verbsLog = w.log;
        klog = splitKernelLog(await vm.check(GUEST_DMESG, 15_000)).klog;
      } else {
        const port = await freePort();
        cap = await Capture.start(pcap, [port]);
        const server = new Background(process.execPath, [ND_PEER, 'server', String(port), String(seed), sizes], { timeoutMs: 150_000, env });
        await server.waitFor(/listening on/, 15_000, 'nd_peer server to listen');
        const g = await vm.run(`timeout 120 ${GUEST_BIN} client ${GUEST_HOST_IP} ${port} ${seed} ${sizes}; echo vpc-exit=$?; ${GUEST_DMESG}`, 150_000);
        const guest = splitKernelLog(g.output);
        const t = setTimeout(() => void server.stop('SIGTERM'), 30_000);
        nd = await server.exited;
        clearTimeout(t);
        const m = guest.before.match(/^vpc-exit=(\d+)/m);
        verbsExit = m ? Number(m[1]) : null;
        verbsLog = guest.before;
        klog = guest.klog;
      }
    } finally {
      capStats = await cap?.stop();
    }
    // The Send payloads are test patterns: Wireshark's RPC-over-RDMA heuristic would claim (and "malform") some.
    const verdict = await tsharkVerdict(pcap, ['--disable-protocol', 'rpcordma']);
    fs.writeFileSync(path.join(artifacts, `${slug}.tshark.json`), JSON.stringify({ capture: capStats, ...verdict }, null, 2));
    fs.writeFileSync(
      path.join(artifacts, `${slug}.log`),
      `nd_peer exit ${nd.code} signal ${nd.signal} ${nd.ms} ms\n--- nd_peer stdout\n${nd.stdout}\n--- nd_peer stderr\n${nd.stderr}\n--- verbs_peer (exit ${verbsExit})\n${verbsLog}\n--- dmesg\n${klog}`,
    );
    return { nd, verbsExit, verbsLog, kernel: kernelProblems(klog), verdict, dropped: capStats?.dropped ?? NaN };
  }

  CASES.forEach((c, i) => {
    const name =
      (c.role === 'client' ? 'netdirect client → verbs_peer server on siw' : 'verbs_peer client on siw → netdirect server') +
      `: Write/Send/Read of ${SIZES.join(', ')} B, CRC ${c.crc ? 'on' : 'off'}`;
    it(name, async () => {
      const t0 = Date.now();
      const slug = `${String(i + 1).padStart(2, '0')}-nd-${c.role}-crc${c.crc ? 1 : 0}`;
      let r = await runCase(c, 1000 + 97 * i, slug);
      // Seen once in 9 runs (CRC on, siw sending a 1 MiB Send): siw put an FPDU on the wire whose CRC32c does not
      // match its bytes — tshark's independent check says "Bad CRC32" on that siw frame — and we answered, as
      // RFC 5044 requires, with Terminate LLP/CRC error and closed. siw 6.1 transmits with zero copy
      // (zcopy_tx=Y), which can let bytes change after the CRC was computed. That run proves our CRC check, not
      // a fault of ours: run the case once more. Lost capture packets (busy machine) also warrant one more run.
      if ((r.nd.code !== 0 && r.verdict.badCrc > 0) || r.dropped > 0) {
        process.stderr.write(`[interop] ${slug}: ${r.verdict.badCrc > 0 ? 'a frame with a bad CRC from siw' : 'capture dropped packets'}; running the case again\n`);
        r = await runCase(c, 2000 + 97 * i, `${slug}-again`);
      }
      wall.push(`${slug} ${Date.now() - t0} ms`);
      const text = `--- nd_peer (exit ${r.nd.code}, ${r.nd.ms} ms)\n${r.nd.stdout.slice(-3000)}${r.nd.stderr.slice(-2000)}\n--- verbs_peer (exit ${r.verbsExit})\n${r.verbsLog.slice(-3000)}`;
      // Both sides: every step of every round done and its data checked, clean end, exit 0.
      expect(r.nd.timedOut, text).toBe(false);
      expect(r.nd.code, text).toBe(0);
      expect(r.nd.stdout, text).toContain(`nd_peer: ok (${SIZES.length} rounds)`);
      expect(r.verbsExit, text).toBe(0);
      expect(r.verbsLog, text).toContain(`verbs_peer: ok (${SIZES.length} rounds)`);
      const ndLines = r.nd.stdout.split('\n');
      const verbsLines = r.verbsLog.split('\n');
      const [ndSteps, verbsSteps] = c.role === 'client' ? [CONNECTOR_STEPS, ACCEPTOR_STEPS] : [ACCEPTOR_STEPS, CONNECTOR_STEPS];
      expect(ndLines.filter((l) => l.startsWith('round '))).toEqual(roundLines(ndSteps));
      expect(verbsLines.filter((l) => l.startsWith('round '))).toEqual(roundLines(verbsSteps));
      // The buffer descriptor travelled in the accept's private data (16 bytes).
      expect(c.role === 'client' ? r.nd.stdout : r.verbsLog).toMatch(/established: peer buffer 0x[0-9a-f]+ rkey 0x[0-9a-f]+ len 1048576 \(private data 16 bytes\)/);
      expect(r.kernel, text).toEqual([]);
      // The wire, decoded independently.
      const v = r.verdict;
      expect(r.dropped, 'tcpdump dropped packets').toBe(0);
      expect(v.malformed).toBe(0);
      expect(v.expertErrors).toEqual([]);
      expect(v.unexpectedWarnings).toEqual([]);
      expect(v.mpaRequests).toBe(1);
      expect(v.mpaReplies).toBe(1);
      expect(v.terminates).toBe(0);
      // RDMA Write (0x00), Read Request (0x01), Read Response (0x02), Send (0x03): per round at least one
      // Write, one Read Request, one Read Response and three Sends (the data Send, the reply, DONE).
      expect(v.opcodes['0x00'] ?? 0).toBeGreaterThanOrEqual(SIZES.length);
      expect(v.opcodes['0x01'] ?? 0).toBeGreaterThanOrEqual(SIZES.length);
      expect(v.opcodes['0x02'] ?? 0).toBeGreaterThanOrEqual(SIZES.length);
      expect(v.opcodes['0x03'] ?? 0).toBeGreaterThanOrEqual(3 * SIZES.length);
      if (c.crc) {
        expect(v.goodCrc).toBe(v.fpdus);
        expect(v.badCrc).toBe(0);
      } else {
        expect(v.goodCrc + v.badCrc).toBe(0);
      }
    });
  });
});

if (!ready) {
  describe('RDMA Write/Read/Send: netdirect vs a verbs program on Linux siw', () => {
    it.skip(`skipped: ${skipReason}`, () => {});
  });
}

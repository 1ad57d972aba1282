// Packet capture on the host's loopback (tcpdump) and an independent decode of it with Wireshark's
// iWARP dissectors (tshark: iwarp_mpa, iwarp_ddp_rdmap; docs/iwarp.md §6).
import * as fs from 'node:fs';
import { Background, runCmd } from './proc';

export class Capture {
  private constructor(
    readonly file: string,
    private readonly proc: Background,
  ) {}

  /** Starts tcpdump on lo for the given TCP ports and waits until it is capturing. */
  static async start(file: string, ports: number[], timeoutMs = 15_000): Promise<Capture> {
    const filter = ports.map((p) => `tcp port ${p}`).join(' or ');
    // --immediate-mode: without it packets still in the kernel ring at SIGTERM are counted but never written.
    // -B: a large kernel buffer, so a host busy with the TCG guest drops nothing (asserted via dropped()).
    // Immediate mode makes libpcap use fixed ring slots of the snap length (256 KiB with -s0): 32 MiB held
    // only ~128 packets and a busy machine dropped some. 256 MiB holds ~1,000, plenty for these bursts.
    const proc = new Background('tcpdump', ['-i', 'lo', '-s0', '-U', '--immediate-mode', '-B', '262144', '-w', file, filter], {
      timeoutMs: 30 * 60_000,
    });
    await proc.waitFor(/listening on lo/, timeoutMs, 'tcpdump to start');
    return new Capture(file, proc);
  }

  /**
   * Stops tcpdump and returns its statistics. tcpdump exits at SIGTERM without draining the packets still
   * queued in the kernel, and lags behind on a loaded host: wait until the file stops growing first.
   */
  async stop(settleMs = 600, maxWaitMs = 15_000): Promise<{ captured: number; dropped: number; stats: string }> {
    const size = (): number => {
      try {
        return fs.statSync(this.file).size;
      } catch {
        return -1;
      }
    };
    const t0 = Date.now();
    let last = size();
    let stableSince = Date.now();
    while (Date.now() - t0 < maxWaitMs && Date.now() - stableSince < settleMs) {
      await new Promise((r) => setTimeout(r, 100));
      const now = size();
      if (now !== last) {
        last = now;
        stableSince = Date.now();
      }
    }
    const r = await this.proc.stop('SIGTERM');
    const stats = r.stderr.trim();
    const num = (re: RegExp): number => Number(stats.match(re)?.[1] ?? NaN);
    return { captured: num(/(\d+) packets? captured/), dropped: num(/(\d+) packets? dropped by kernel/), stats };
  }
}

export interface ExpertItem {
  severity: string; // Errors, Warns, Notes, Chats, Comments
  count: number;
  group: string;
  protocol: string;
  summary: string;
}

export interface TsharkVerdict {
  frames: number;
  malformed: number;
  mpaRequests: number;
  mpaReplies: number;
  fpdus: number; // FPDUs decoded (a frame may hold several)
  goodCrc: number;
  badCrc: number;
  terminates: number;
  opcodes: Record<string, number>; // FPDUs per RDMAP opcode (hex string as tshark prints it)
  expert: ExpertItem[];
  expertErrors: ExpertItem[];
  /**
   * Warnings above TCP other than the two that every MPA v2 Request raises in Wireshark (docs/iwarp.md §6).
   * TCP's own (D-SACK, retransmission, ...) come from slirp's TCP stack, not from the iWARP bytes; a capture
   * gap would also show as an FPDU count mismatch, which the tests check separately.
   */
  unexpectedWarnings: ExpertItem[];
}

/** The two warnings tshark 4.0 raises on every MPA v2 Request (Enhanced bit 0x10, Rev 2). */
const EXPECTED_MPA_WARNINGS = [/Res field is NOT set to zero/, /Rev field is NOT set to one/];

async function tshark(args: string[]): Promise<string> {
  const r = await runCmd('tshark', args, { timeoutMs: 120_000 });
  if (r.code !== 0) throw new Error(`tshark ${args.join(' ')} failed (${r.code}): ${r.stderr.slice(-2000)}`);
  return r.stdout;
}

export function parseExpert(text: string): ExpertItem[] {
  const items: ExpertItem[] = [];
  let severity = '';
  for (const line of text.split('\n')) {
    const sec = line.match(/^(Errors|Warns|Notes|Chats|Comments) \(\d+\)/);
    if (sec) {
      severity = sec[1];
      continue;
    }
    const row = line.match(/^\s+(\d+)\s+(\S+)\s+(\S+)\s+(.+?)\s*$/);
    if (row && severity) {
      items.push({ severity, count: Number(row[1]), group: row[2], protocol: row[3], summary: row[4] });
    }
  }
  return items;
}

/**
 * Decodes a capture with tshark (two passes) and summarizes what an interop test asserts on. extraArgs go to
 * both passes (e.g. `--disable-protocol rpcordma`: its heuristic claims arbitrary Send payloads).
 */
export async function tsharkVerdict(file: string, extraArgs: string[] = []): Promise<TsharkVerdict> {
  // Pass 1: per-frame fields, then the expert statistics (printed after the last frame).
  const out = await tshark([
    ...extraArgs,
    '-r', file, '-T', 'fields', '-E', 'occurrence=a', '-e', 'frame.number', '-e', '_ws.malformed',
    '-e', 'iwarp_mpa.key.req', '-e', 'iwarp_mpa.key.rep', '-e', 'iwarp_mpa.ulpdulength', '-e', 'iwarp_rdma.opcode',
    '-z', 'expert',
  ]);
  const lines = out.split('\n');
  const statsAt = lines.findIndex((l) => /^(Errors|Warns|Notes|Chats|Comments) \(\d+\)/.test(l) || /^=+$/.test(l));
  const frameLines = (statsAt < 0 ? lines : lines.slice(0, statsAt)).filter((l) => /^\d+\t/.test(l));
  let malformed = 0;
  let mpaRequests = 0;
  let mpaReplies = 0;
  let fpdus = 0;
  const opcodes: Record<string, number> = {};
  for (const l of frameLines) {
    const [, mal = '', req = '', rep = '', lens = '', ops = ''] = l.split('\t');
    if (mal) malformed++;
    if (req) mpaRequests++;
    if (rep) mpaReplies++;
    fpdus += lens.split(',').filter(Boolean).length;
    for (const op of ops.split(',').filter(Boolean)) opcodes[op] = (opcodes[op] ?? 0) + 1;
  }
  const expert = parseExpert(statsAt < 0 ? '' : lines.slice(statsAt).join('\n'));
  // Pass 2: the CRC verdict is only in the field's text ("Good CRC32" / "Bad CRC32, should be ...").
  const verbose = await tshark([...extraArgs, '-r', file, '-V', '-Y', 'iwarp_mpa']);
  const goodCrc = (verbose.match(/Good CRC32/g) ?? []).length;
  const badCrc = (verbose.match(/Bad CRC32/g) ?? []).length;
  const expertErrors = expert.filter((e) => e.severity === 'Errors');
  const unexpectedWarnings = expert.filter(
    (e) =>
      e.severity === 'Warns' &&
      e.protocol !== 'TCP' &&
      !(e.protocol === 'IWARP_MPA' && EXPECTED_MPA_WARNINGS.some((re) => re.test(e.summary))),
  );
  return {
    frames: frameLines.length,
    malformed,
    mpaRequests,
    mpaReplies,
    fpdus,
    goodCrc,
    badCrc,
    terminates: opcodes['0x07'] ?? 0,
    opcodes,
    expert,
    expertErrors,
    unexpectedWarnings,
  };
}

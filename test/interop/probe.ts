// Builds and runs test/interop/wire_probe.cc: the wire codecs alone (binding/soft/{crc32c,mpa,ddp_rdmap})
// playing rping's client or server over plain sockets.
import * as fs from 'node:fs';
import * as path from 'node:path';
import { Background, runCmd } from './proc';
import { repoRoot } from './siw-vm';

export const PROBE_SOURCES = [
  'binding/soft/wire/crc32c.cc',
  'binding/soft/wire/mpa.cc',
  'binding/soft/wire/ddp_rdmap.cc',
  'test/interop/wire_probe.cc',
].map((p) => path.join(repoRoot, p));

/** Compiles the probe into dir (C++17, warnings are errors); returns the executable's path. */
export async function buildProbe(dir: string): Promise<string> {
  fs.mkdirSync(dir, { recursive: true });
  const exe = path.join(dir, 'wire_probe');
  const cxx = process.env.CXX || 'g++';
  const r = await runCmd(
    cxx,
    ['-std=c++17', '-O2', '-Wall', '-Wextra', '-Werror', '-I', path.join(repoRoot, 'binding'), ...PROBE_SOURCES, '-o', exe],
    { timeoutMs: 180_000 },
  );
  if (r.code !== 0) throw new Error(`building wire_probe failed:\n${r.stdout}${r.stderr}`);
  return exe;
}

export interface ProbeSummary {
  role: 'initiator' | 'responder';
  pass: boolean;
  error: string;
  want_crc: boolean;
  p2p_requested: boolean;
  size: number;
  pings: number;
  negotiated?: { rev: number; v2: boolean; crc: boolean; ird: number; ord: number; p2p: boolean; rtr: string };
  tx: Record<string, number>;
  rx: Record<string, number>;
  crc_checked: number;
  crc_bad: number;
  nonzero_trailer_without_crc: number;
  terminate: boolean;
  terminate_desc: string;
  read_request_ulpdu_len: number;
  mpa_request: string;
  mpa_reply: string;
  first_send: string;
  first_read_request: string;
  peer_closed_cleanly: boolean;
  notes: string[];
}

export interface ProbeRun {
  code: number | null;
  log: string;
  summary?: ProbeSummary;
}

export function parseProbeOutput(code: number | null, log: string): ProbeRun {
  const line = log.split('\n').find((l) => l.startsWith('SUMMARY '));
  let summary: ProbeSummary | undefined;
  if (line) summary = JSON.parse(line.slice('SUMMARY '.length)) as ProbeSummary;
  return { code, log, summary };
}

export function probeArgs(o: {
  crc?: boolean;
  p2p?: boolean;
  rtr?: string;
  v1?: boolean;
  size?: number;
  count?: number;
  timeoutS?: number;
  firstDelayMs?: number;
  provoke?: string;
}): string[] {
  const a: string[] = [];
  if (o.crc) a.push('--crc');
  if (o.p2p) a.push('--p2p');
  if (o.rtr) a.push('--rtr', o.rtr);
  if (o.v1) a.push('--v1');
  if (o.size) a.push('--size', String(o.size));
  if (o.count !== undefined) a.push('--count', String(o.count));
  a.push('--timeout', String(o.timeoutS ?? 20));
  if (o.firstDelayMs) a.push('--first-delay-ms', String(o.firstDelayMs));
  if (o.provoke) a.push('--provoke', o.provoke);
  if ((o.size ?? 64) > 4096 || (o.count ?? 1) > 10) a.push('--quiet');
  return a;
}

/** Runs the probe as MPA initiator against host:port to completion. */
export async function runInitiator(exe: string, host: string, port: number, args: string[], timeoutMs = 90_000): Promise<ProbeRun> {
  const r = await runCmd(exe, ['connect', host, String(port), ...args], { timeoutMs });
  return parseProbeOutput(r.code, r.stdout + (r.stderr ? `\n--- stderr\n${r.stderr}` : '') + (r.timedOut ? '\n(probe timed out)' : ''));
}

/** Starts the probe as MPA responder on 127.0.0.1:port; resolves once it listens. */
export async function startResponder(
  exe: string,
  port: number,
  args: string[],
  timeoutMs = 120_000,
): Promise<{ done: Promise<ProbeRun>; proc: Background }> {
  const proc = new Background(exe, ['listen', String(port), ...args], { timeoutMs });
  await proc.waitFor(/LISTENING /, 10_000, 'the probe to listen');
  const done = proc.exited.then((r) =>
    parseProbeOutput(r.code, r.stdout + (r.stderr ? `\n--- stderr\n${r.stderr}` : '') + (r.timedOut ? '\n(probe timed out)' : '')),
  );
  return { done, proc };
}

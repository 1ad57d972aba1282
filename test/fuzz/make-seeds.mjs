#!/usr/bin/env node
// Makes the fuzzers' seed corpus (test/fuzz/corpus/<target>/) from packet captures of real siw sessions: the TCP
// payload that Linux soft-iWARP sent, split into its MPA frame and its FPDU stream (tshark's "follow tcp raw").
// Provenance and the exact command used: test/fuzz/README.md.
//
//   node test/fuzz/make-seeds.mjs [--out DIR] CAPTURE...
//   CAPTURE = path.pcap:label:side    side: which end of the TCP connection is siw — client, server or both
//
// Per capture and siw end it writes (formats: the comment at the top of each *_fuzz.cc):
//   mpa/       the MPA Request (responder settings) or Reply (initiator settings, CRC as our Request asked)
//   fpdu/      the FPDU stream as sent (whole FPDUs, at most ~4 KiB)
//   rx_stream/ a prefix of the FPDU stream the harness's memory can take, its STags and TOs made symbolic (Writes →
//              0x5EED0001 + offset, Read Request sources → 0x5EED0002 + offset, Read Responses → 0x5EED0007 + sink
//              slot offset), CRCs recomputed, settings from the MPA exchange (CRC, RTR) and the stream (Reads)
//   terminate/ the body of every Terminate siw sent
import { execFileSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { fileURLToPath } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));
let out = path.join(here, 'corpus');
const captures = [];
for (let i = 2; i < process.argv.length; i++) {
  if (process.argv[i] === '--out') out = process.argv[++i];
  else captures.push(process.argv[i]);
}
if (captures.length === 0) {
  console.error('usage: node test/fuzz/make-seeds.mjs [--out DIR] path.pcap:label:client|server|both ...');
  process.exit(2);
}

// ---- constants shared with the harnesses (rx_stream_fuzz.cc) ----
const SYM = 0x5eed0000;
const SINK_SLOT = 4100;
const READ_SIZES = [0, 64, 1000, 4000];
const RW_LEN = 80 * 1024;
const RO_LEN = 4096;
const MAX_RECV = 7;
const RECV_LEN = (i) => (1 + (i % 3)) * 100;
const MAX_INBOUND_READS = 2;
const MAX_SEED = 4096;

// ---- CRC32c (RFC 3720 Castagnoli, as MPA uses it) ----
const CRC_TABLE = (() => {
  const t = new Uint32Array(256);
  for (let n = 0; n < 256; n++) {
    let c = n;
    for (let k = 0; k < 8; k++) c = c & 1 ? (c >>> 1) ^ 0x82f63b78 : c >>> 1;
    t[n] = c >>> 0;
  }
  return t;
})();
function crc32c(buf) {
  let c = 0xffffffff;
  for (const b of buf) c = CRC_TABLE[(c ^ b) & 0xff] ^ (c >>> 8);
  return (c ^ 0xffffffff) >>> 0;
}

const pad = (ulen) => (4 - ((2 + ulen) & 3)) & 3;
const fpduSize = (ulen) => 2 + ulen + pad(ulen) + 4;

// The TCP payload of each direction of each connection in a capture.
function streams(pcap) {
  const ids = execFileSync('tshark', ['-r', pcap, '-T', 'fields', '-e', 'tcp.stream'], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] })
    .split('\n').filter(Boolean).map(Number);
  const result = [];
  for (const id of [...new Set(ids)]) {
    const text = execFileSync('tshark', ['-r', pcap, '-q', '-z', `follow,tcp,raw,${id}`], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'], maxBuffer: 1 << 28 });
    const client = [], server = [];
    for (const line of text.split('\n')) {
      const m = /^(\t?)([0-9a-f]+)$/.exec(line);
      if (m) (m[1] ? server : client).push(Buffer.from(m[2], 'hex'));
    }
    result.push({ id, client: Buffer.concat(client), server: Buffer.concat(server) });
  }
  return result;
}

// An MPA frame at the start of b: its size and flags, or null.
function mpaFrame(b) {
  if (b.length < 20 || !b.subarray(0, 12).toString('latin1').startsWith('MPA ID Re')) return null;
  const flags = b[16], rev = b[17], pdLen = b.readUInt16BE(18);
  const size = 20 + pdLen;
  const v2 = rev === 2 && (flags & 0x10) !== 0 && pdLen >= 4;
  return {
    size, crc: (flags & 0x40) !== 0, request: b.subarray(4, 16).toString('latin1') === ' ID Req Frame',
    p2p: v2 && (b.readUInt16BE(20) & 0x8000) !== 0,
    rtrWrite: v2 && (b.readUInt16BE(22) & 0x8000) !== 0, rtrRead: v2 && (b.readUInt16BE(22) & 0x4000) !== 0,
  };
}

// Whole FPDUs of a stream: { off, ulen, whole, u (the ULPDU) }.
function fpdus(b) {
  const list = [];
  for (let off = 0; off + 2 <= b.length;) {
    const ulen = b.readUInt16BE(off);
    const whole = fpduSize(ulen);
    if (off + whole > b.length) break;
    list.push({ off, ulen, whole, u: b.subarray(off + 2, off + 2 + ulen) });
    off += whole;
  }
  return list;
}

function write(dir, name, bytes) {
  fs.mkdirSync(path.join(out, dir), { recursive: true });
  fs.writeFileSync(path.join(out, dir, name), bytes);
  console.log(`${dir}/${name}: ${bytes.length} bytes`);
}

// The longest prefix of the FPDU stream the rx_stream harness can take, made symbolic. Returns null if empty.
function rxSeed(list, raw, settings) {
  const outFpdus = [];
  const writeBase = new Map(), srcBase = new Map();
  let sends = 0, sendBytes = 0, readReqs = 0, reads = 0, readSize = -1, inRead = false, readFirstTo = 0n, readGot = 0;
  let total = 0;
  for (const f of list) {
    const b = Buffer.from(raw.subarray(f.off, f.off + f.whole));
    const u = b.subarray(2, 2 + f.ulen);
    if (f.ulen < 2) break;
    const tagged = (u[0] & 0x80) !== 0, last = (u[0] & 0x40) !== 0, op = u[1] & 0x0f;
    let ok = true;
    if (tagged && f.ulen >= 14) {
      const stag = u.readUInt32BE(2), to = u.readBigUInt64BE(6), len = f.ulen - 14;
      if (op === 0 && len > 0) {
        if (!writeBase.has(stag)) writeBase.set(stag, to);
        const rel = to - writeBase.get(stag);
        ok = rel >= 0n && rel + BigInt(len) <= BigInt(RW_LEN);
        if (ok) { u.writeUInt32BE(SYM + 1, 2); u.writeBigUInt64BE(rel, 6); }
      } else if (op === 2) {
        if (!inRead) { inRead = true; readFirstTo = to; readGot = 0; }
        const rel = BigInt(reads * SINK_SLOT) + (to - readFirstTo);
        readGot += len;
        u.writeUInt32BE(SYM + 7, 2);
        u.writeBigUInt64BE(rel, 6);
        if (last) {
          const size = READ_SIZES.indexOf(readGot);
          ok = size >= 0 && (readSize < 0 || readSize === size) && reads < 3;
          readSize = size;
          reads++;
          inRead = false;
        }
      }
    } else if (!tagged && f.ulen >= 18) {
      if (op === 1 && f.ulen >= 46) {
        const stag = u.readUInt32BE(18 + 16), to = u.readBigUInt64BE(18 + 20), size = u.readUInt32BE(18 + 12);
        if (size > 0) {
          if (!srcBase.has(stag)) srcBase.set(stag, to);
          const rel = to - srcBase.get(stag);
          ok = rel >= 0n && rel + BigInt(size) <= BigInt(RO_LEN);
          if (ok) { u.writeUInt32BE(SYM + 2, 18 + 16); u.writeBigUInt64BE(rel, 18 + 20); }
        }
        ok = ok && ++readReqs <= MAX_INBOUND_READS;
      } else if (op >= 3 && op <= 6) {
        sendBytes += f.ulen - 18;
        ok = sends < MAX_RECV && sendBytes <= RECV_LEN(sends);
        if (last) { sends++; sendBytes = 0; }
      }
    }
    if (!ok || total + f.whole > MAX_SEED) break;
    b.writeUInt32LE(crc32c(b.subarray(0, f.whole - 4)), f.whole - 4);
    outFpdus.push(b);
    total += f.whole;
  }
  if (inRead) {
    // Cut inside a Read Response: drop its segments (simpler than an odd-sized Read).
    while (outFpdus.length > 0) {
      const u = outFpdus[outFpdus.length - 1].subarray(2);
      if ((u[0] & 0x80) && (u[1] & 0x0f) === 2 && !(u[0] & 0x40)) outFpdus.pop();
      else break;
    }
  }
  if (outFpdus.length === 0) return null;
  let b0 = 0x02 | 0x10;  // recompute CRCs; end of stream after the input
  if (settings.crc) b0 |= 0x01;
  if (settings.awaitRtr) b0 |= 0x04;
  if (settings.rtrRead) b0 |= 0x08;
  const b1 = MAX_RECV | (reads << 3) | (Math.max(readSize, 0) << 6);
  return Buffer.concat([Buffer.from([b0, b1]), ...outFpdus]);
}

for (const spec of captures) {
  const [pcap, label, side] = spec.split(':');
  if (!pcap || !label || !['client', 'server', 'both'].includes(side)) throw new Error(`bad capture spec ${spec}`);
  for (const s of streams(pcap)) {
    const req = mpaFrame(s.client), rep = mpaFrame(s.server);
    if (!req || !rep) continue;
    const crc = req.crc || rep.crc;
    const tag = `${label}${s.id ? `-c${s.id}` : ''}`;
    for (const end of side === 'both' ? ['client', 'server'] : [side]) {
      const bytes = s[end], frame = end === 'client' ? req : rep;
      // mpa: a Request to our responder; a Reply to our initiator (bit 4: our Request asked for CRC as the
      // captured one did).
      if (end === 'client') write('mpa', `${tag}.request`, Buffer.concat([Buffer.from([0x00]), bytes.subarray(0, frame.size)]));
      else write('mpa', `${tag}.reply`, Buffer.concat([Buffer.from([0x01 | (req.crc ? 0x10 : 0)]), bytes.subarray(0, frame.size)]));
      const raw = bytes.subarray(frame.size);
      const list = fpdus(raw);
      if (list.length === 0) continue;
      let n = 0;
      while (n < list.length && list[n].off + list[n].whole <= MAX_SEED) n++;
      if (n > 0) write('fpdu', `${tag}.${end}`, raw.subarray(0, list[n - 1].off + list[n - 1].whole));
      // The P2P initiator's first FPDU is its RTR, of the type the Reply chose.
      const awaitRtr = end === 'client' && rep.p2p;
      const rx = rxSeed(list, raw, { crc, awaitRtr, rtrRead: awaitRtr && !rep.rtrWrite && rep.rtrRead });
      if (rx) write('rx_stream', `${tag}.${end}`, rx);
      for (const [i, f] of list.entries()) {
        if (f.ulen >= 22 && !(f.u[0] & 0x80) && (f.u[1] & 0x0f) === 7) {
          const body = f.u.subarray(18);
          write('terminate', `${tag}.${end}.${i}`, Buffer.concat([Buffer.from([0x11, 0x00, crc ? 0x01 : 0x00, f.ulen & 0xff]), body]));
        }
      }
    }
  }
}

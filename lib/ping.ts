// `netdirect ping`: rdma-core rping's application protocol (docs/iwarp.md §5) over netdirect,
// as client (`-c -a host`) and server (`-s`), so that `netdirect ping -c` talks to `rping -s` and `rping -c`
// talks to `netdirect ping -s`. Also the first smoke test on a new setup.
//
// Per ping (all Sends 16 bytes, each side keeps exactly one 16-byte receive posted and re-posts it after every
// receive completion, as rping does):
//   C→S Send {start_buf, rkey, size} · S RDMA Read size bytes into its rdma_buf · S→C Send "go ahead"
//   C→S Send {rdma_buf, rkey, size}  · S RDMA Write strlen(rdma_buf)+1 bytes     · S→C Send "go ahead"
// The message is rping's struct rping_rdma_info, all big-endian: buf u64, rkey u32, size u32. Our remote tokens
// are the STag numbers in host order, so the rkey on the wire is the token written big-endian, and a received
// rkey read big-endian is the token to use.
import * as dgram from 'node:dgram';
import { isIP } from 'node:net';
import { openAdapter } from './discovery.js';
import { NdError } from './errors.js';
import type { Adapter } from './adapter.js';
import type { CompletionQueue, Completion } from './completion-queue.js';
import type { Connector } from './connector.js';
import type { MemoryRegion, RemoteMemory } from './memory-region.js';
import type { QueuePair } from './queue-pair.js';

export const PING_USAGE = `usage: netdirect ping -s [-a addr] [-p port] [options]       server (rping -s)
       netdirect ping -c -a host [-p port] [-I addr] [options] client (rping -c)
  -p port     port (default 7174, rping's)          -C count   pings (client; 0 or absent: forever)
  -S size     buffer size, 26..65535 (default 64)   -v         print the ping data
  -V          verify the echoed data (client)       -d         debug output (stderr)
  -P          persistent server (serve connections until killed)
  -I addr     client's local address (default: the one that routes to host)
  --provider <name|dll>   ND provider (default auto)`;

export const RPING_DEFAULT_PORT = 7174;
export const RPING_MIN_SIZE = 26; // sizeof("0x7fffffff") + sizeof("rdma-ping-%d: ") with gcc/glibc (docs/iwarp.md §5)
export const RPING_MAX_SIZE = 65535;
export const RPING_INFO_SIZE = 16;

// siw quirk (measured against Linux 6.1 soft-iWARP: 8 of 15 runs lost without a pause, 0 of 15 with 50 ms;
// test/interop/wire.interop.test.ts): rping's server on siw loses its first RDMA Read when our first Send
// arrives immediately after its MPA Reply — siw never puts the Read Request on the wire and rping hangs. siw's
// own initiator posts its first Send only after the ESTABLISHED event, so the client pauses like it does.
export const FIRST_SEND_DELAY_MS = 50;

export class PingUsageError extends Error {}

export interface PingOptions {
  role: 'server' | 'client';
  address?: string;
  source?: string;
  port: number;
  count: number;
  size: number;
  verbose: boolean;
  validate: boolean;
  debug: boolean;
  persistent: boolean;
  provider?: string;
  firstSendDelayMs: number;
}

export interface PingIo {
  out: (line: string) => void;
  err: (line: string) => void;
}

const defaultIo: PingIo = {
  out: (l) => process.stdout.write(l + '\n'),
  err: (l) => process.stderr.write(l + '\n'),
};

function intValue(flag: string, v: string | undefined, min: number, max: number): number {
  if (v === undefined || !/^\d+$/.test(v)) throw new PingUsageError(`${flag} needs a number, got ${v === undefined ? 'nothing' : JSON.stringify(v)}`);
  const n = Number(v);
  if (n < min || n > max) throw new PingUsageError(`${flag} must be ${min}..${max}, got ${n}`);
  return n;
}

/** Parses rping's options (`-p 7174` and `-p7174` both work). */
export function parsePingArgs(args: string[]): PingOptions {
  let role: 'server' | 'client' | undefined;
  const o: PingOptions = {
    role: 'client',
    port: RPING_DEFAULT_PORT,
    count: 0,
    size: 64,
    verbose: false,
    validate: false,
    debug: false,
    persistent: false,
    firstSendDelayMs: FIRST_SEND_DELAY_MS,
  };
  const setRole = (r: 'server' | 'client'): void => {
    if (role !== undefined && role !== r) throw new PingUsageError('-s and -c exclude each other');
    role = r;
  };
  for (let i = 0; i < args.length; i++) {
    const a = args[i];
    if (a === '--provider' || a === '--first-send-delay-ms') {
      const v = args[++i];
      if (v === undefined) throw new PingUsageError(`${a} needs a value`);
      if (a === '--provider') o.provider = v;
      else o.firstSendDelayMs = intValue(a, v, 0, 60_000);
      continue;
    }
    const m = /^-([A-Za-z])(.*)$/.exec(a);
    if (!m) throw new PingUsageError(`unexpected argument ${JSON.stringify(a)}`);
    const flag = `-${m[1]}`;
    const value = (): string | undefined => (m[2] !== '' ? m[2] : args[++i]);
    switch (m[1]) {
      case 's':
      case 'c':
      case 'v':
      case 'V':
      case 'd':
      case 'P':
        if (m[2] !== '') throw new PingUsageError(`${flag} takes no value`);
        if (m[1] === 's') setRole('server');
        else if (m[1] === 'c') setRole('client');
        else if (m[1] === 'v') o.verbose = true;
        else if (m[1] === 'V') o.validate = true;
        else if (m[1] === 'd') o.debug = true;
        else o.persistent = true;
        break;
      case 'a':
      case 'I': {
        const v = value();
        if (v === undefined || v === '') throw new PingUsageError(`${flag} needs an address`);
        if (m[1] === 'a') o.address = v;
        else o.source = v;
        break;
      }
      case 'p':
        o.port = intValue(flag, value(), 0, 65535);
        break;
      case 'C':
        o.count = intValue(flag, value(), 0, 0x7fffffff);
        break;
      case 'S':
        o.size = intValue(flag, value(), RPING_MIN_SIZE, RPING_MAX_SIZE);
        break;
      default:
        throw new PingUsageError(`unknown option ${flag}`);
    }
  }
  if (role === undefined) throw new PingUsageError('ping needs -s (server) or -c (client)');
  o.role = role;
  if (role === 'client' && o.address === undefined) throw new PingUsageError('the client needs -a <server address>');
  if (role === 'client' && o.port === 0) throw new PingUsageError('the client needs a port other than 0');
  return o;
}

/** rping's struct rping_rdma_info: {buf u64, rkey u32, size u32}, all big-endian. */
export function encodeRpingInfo(out: Uint8Array, address: bigint, token: number, size: number): void {
  const v = new DataView(out.buffer, out.byteOffset, RPING_INFO_SIZE);
  v.setBigUint64(0, address, false);
  v.setUint32(8, token >>> 0, false);
  v.setUint32(12, size >>> 0, false);
}

export function decodeRpingInfo(bytes: Uint8Array): { address: bigint; token: number; size: number } {
  const v = new DataView(bytes.buffer, bytes.byteOffset, RPING_INFO_SIZE);
  return { address: v.getBigUint64(0, false), token: v.getUint32(8, false), size: v.getUint32(12, false) };
}

/** Fills buf like rping's client for ping n: "rdma-ping-<n>: ", then 'A'..'z' cycling from 'A'+n%58, then NUL. */
export function fillRpingBuffer(buf: Uint8Array, ping: number): void {
  const prefix = `rdma-ping-${ping}: `;
  let i = 0;
  for (; i < prefix.length && i < buf.length; i++) buf[i] = prefix.charCodeAt(i);
  let c = 65 + (ping % 58);
  for (; i < buf.length; i++) {
    buf[i] = c;
    if (++c > 122) c = 65;
  }
  buf[buf.length - 1] = 0;
}

/** The C string at the start of buf (up to the first NUL or the end). */
function cString(buf: Uint8Array): string {
  const end = buf.indexOf(0);
  return Buffer.from(buf.buffer, buf.byteOffset, end < 0 ? buf.length : end).toString('latin1');
}

function strlen(buf: Uint8Array): number {
  const end = buf.indexOf(0);
  return end < 0 ? buf.length : end;
}

class PingFailure extends Error {}

/** Which local address routes to host (no packet is sent: a connected UDP socket only picks the route). */
export async function localAddressFor(host: string, port: number): Promise<string> {
  const family = isIP(host) === 6 ? 'udp6' : 'udp4';
  const sock = dgram.createSocket(family);
  try {
    await new Promise<void>((resolve, reject) => {
      sock.once('error', reject);
      sock.connect(port || 9, host, () => resolve());
    });
    return sock.address().address;
  } finally {
    sock.close();
  }
}

function statusText(err: unknown): string {
  if (err instanceof NdError) return `${err.code}${err.status ? ` (0x${(err.status >>> 0).toString(16).padStart(8, '0')})` : ''}`;
  return String((err as Error)?.message ?? err);
}

/**
 * One connection's queue pair, buffers and the single re-posted 16-byte receive. Every request settles with an
 * ND status: close() waits until they all have.
 */
class PingSession {
  qp!: QueuePair;
  connector: Connector | null = null;
  recvMr!: MemoryRegion;
  sendMr!: MemoryRegion;
  private pendingRecv: Promise<Completion> | null = null;
  readonly settled: string[] = [];

  constructor(
    readonly adapter: Adapter,
    readonly cq: CompletionQueue,
    readonly debug: (m: string) => void,
  ) {}

  async open(): Promise<void> {
    // rping: SQ 16, RQ 2, one SGE.
    this.qp = this.adapter.createQueuePair({ receiveCq: this.cq, receiveDepth: 2, initiatorDepth: 16, maxReceiveSge: 1, maxInitiatorSge: 1 });
    this.recvMr = await this.adapter.allocateMemory(RPING_INFO_SIZE);
    this.sendMr = await this.adapter.allocateMemory(RPING_INFO_SIZE);
  }

  /** Posts the one receive (before connect/accept, and again after every receive completion). */
  postReceive(): void {
    const p = this.qp.receive(this.recvMr);
    p.catch((err) => this.settled.push(`receive: ${statusText(err)}`));
    this.pendingRecv = p;
  }

  /** Waits for the posted receive, re-posts it, and returns the 16 bytes (a copy). */
  async receive(what: string): Promise<Uint8Array> {
    const p = this.pendingRecv;
    if (p === null) throw new PingFailure('internal: no receive posted');
    let c: Completion;
    try {
      c = await p;
    } catch (err) {
      throw new PingRequestError('receive', what, err);
    }
    const data = Uint8Array.from(this.recvMr.buffer);
    this.postReceive();
    if (c.bytes !== RPING_INFO_SIZE) throw new PingFailure(`Received bogus data, size ${c.bytes} (${what})`);
    return data;
  }

  async send(what: string): Promise<void> {
    try {
      await this.qp.send(this.sendMr);
    } catch (err) {
      throw new PingRequestError('send', what, err);
    }
  }

  async close(): Promise<void> {
    await this.qp?.close().catch(() => undefined);
    await this.connector?.close().catch(() => undefined);
    await this.recvMr?.deregister().catch(() => undefined);
    await this.sendMr?.deregister().catch(() => undefined);
    const o = this.qp?.outstanding;
    if (o) this.debug(`queue pair closed: outstanding receive ${o.receive}, initiator ${o.initiator}`);
  }
}

class PingRequestError extends Error {
  constructor(
    readonly request: string,
    readonly what: string,
    readonly failure: unknown,
  ) {
    super(`${request} (${what}) failed: ${statusText(failure)}`);
  }
}

async function withAdapter<T>(address: string, o: PingOptions, fn: (adapter: Adapter, cq: CompletionQueue) => Promise<T>): Promise<T> {
  const adapter = await openAdapter(address, { provider: o.provider });
  try {
    const cq = adapter.createCompletionQueue({ depth: 64 });
    return await fn(adapter, cq);
  } finally {
    await adapter.close();
  }
}

async function runClient(o: PingOptions, io: PingIo, debug: (m: string) => void): Promise<number> {
  const host = o.address!;
  const local = o.source ?? (await localAddressFor(host, o.port));
  debug(`client: local address ${local}, server ${host}:${o.port}, size ${o.size}, count ${o.count || 'forever'}`);
  return withAdapter(local, o, async (adapter, cq) => {
    const s = new PingSession(adapter, cq, debug);
    const access = { remoteRead: true, remoteWrite: true }; // + local write: rping's LOCAL_WRITE|REMOTE_READ|REMOTE_WRITE
    let start: MemoryRegion | undefined;
    let sink: MemoryRegion | undefined;
    let pings = 0;
    try {
      await s.open();
      start = await adapter.allocateMemory(o.size, access);
      sink = await adapter.allocateMemory(o.size, access);
      s.postReceive(); // before connecting: no RNR on iWARP (docs/iwarp.md §2)
      // rping's client serves one Read at a time (responder_resources 1) and issues none. Our ORD is 0 (rping
      // asks 1, unused): with ORD 0 the provider confirms Sends on transmission instead of with an internal
      // zero-length RDMA Read, which siw (Linux 6.1) sometimes answers with a stale non-zero-length Read
      // Response when its transmit path is idle (siw_init_rresp leaves the previous WQE's length; see
      // test/interop/ping.interop.test.ts) — that would end the connection with a DDP base/bounds Terminate.
      s.connector = await adapter.connect(s.qp, { host, port: o.port }, { inboundReadLimit: 1, outboundReadLimit: 0 });
      debug(`connected to ${host}:${o.port} (peer read limits ${JSON.stringify(s.connector.readLimits)})`);
      if (o.firstSendDelayMs > 0) await new Promise((r) => setTimeout(r, o.firstSendDelayMs));
      for (let ping = 0; o.count === 0 || ping < o.count; ping++) {
        fillRpingBuffer(start.buffer, ping);
        encodeRpingInfo(s.sendMr.buffer, start.address, start.remoteToken, o.size);
        await s.send(`ping ${ping}: start buffer advertisement`);
        await s.receive(`ping ${ping}: go-ahead after the server's RDMA Read`);
        encodeRpingInfo(s.sendMr.buffer, sink.address, sink.remoteToken, o.size);
        await s.send(`ping ${ping}: sink buffer advertisement`);
        await s.receive(`ping ${ping}: go-ahead after the server's RDMA Write`);
        if (o.validate && Buffer.compare(start.buffer, sink.buffer) !== 0) {
          io.err(`data mismatch! (ping ${ping})`);
          debug(`sent:     ${cString(start.buffer)}\nreceived: ${cString(sink.buffer)}`);
          return 1;
        }
        if (o.verbose) io.out(`ping data: ${cString(sink.buffer)}`);
        sink.buffer.fill(0);
        pings++;
      }
      debug(`${pings} pings done, disconnecting`);
      await s.connector.disconnect();
      return 0;
    } catch (err) {
      return reportFailure(err, io, `after ${pings} ping(s)`);
    } finally {
      await s.close();
      await start?.deregister().catch(() => undefined);
      await sink?.deregister().catch(() => undefined);
      if (s.settled.length > 0) debug(`settled: ${s.settled.join('; ')}`);
    }
  });
}

function reportFailure(err: unknown, io: PingIo, context: string): number {
  if (err instanceof PingRequestError) {
    io.err(`netdirect ping: ${err.message} ${context}`);
    return 1;
  }
  if (err instanceof PingFailure) {
    io.err(`netdirect ping: ${err.message} ${context}`);
    return 1;
  }
  if (err instanceof NdError) {
    io.err(`netdirect ping: ${err.message} [${err.code}] ${context}`);
    return 1;
  }
  throw err;
}

/** Serves one connection; resolves with the exit code (0: the client disconnected between pings). */
async function serveConnection(
  adapter: Adapter,
  cq: CompletionQueue,
  request: Connector,
  o: PingOptions,
  io: PingIo,
  debug: (m: string) => void,
): Promise<number> {
  const s = new PingSession(adapter, cq, debug);
  let sink: MemoryRegion | undefined;
  let pings = 0;
  const peer = request.peerAddress;
  try {
    await s.open();
    sink = await adapter.allocateMemory(o.size, { remoteRead: true, remoteWrite: true });
    s.postReceive();
    // rping's server: rdma_accept(child, NULL), read limits from the request (the provider clamps them).
    await request.accept(s.qp, {});
    s.connector = request;
    debug(`accepted ${peer.host}:${peer.port} (peer read limits ${JSON.stringify(request.readLimits)})`);
    let gone = false;
    void request.disconnected.then(() => (gone = true));
    for (;;) {
      let adv: Uint8Array;
      try {
        adv = await s.receive(`ping ${pings}: start buffer advertisement`);
      } catch (err) {
        // The client disconnecting while we wait for the next ping is rping's normal end.
        if (err instanceof PingRequestError) {
          await Promise.race([request.disconnected, new Promise((r) => setTimeout(r, 1000))]);
          if (gone) {
            debug(`client ${peer.host}:${peer.port} disconnected after ${pings} ping(s) (receive: ${statusText(err.failure)})`);
            return 0;
          }
        }
        throw err;
      }
      const src = decodeRpingInfo(adv);
      debug(`ping ${pings}: Read ${src.size} bytes from 0x${src.address.toString(16)} rkey 0x${src.token.toString(16)}`);
      if (src.size > o.size) throw new PingFailure(`the client's size ${src.size} exceeds ours (${o.size}): use the same -S on both sides`);
      const remote: RemoteMemory = { address: src.address, token: src.token, length: src.size };
      sink.buffer.fill(0);
      try {
        await s.qp.read(sink.slice(0, src.size), remote);
      } catch (err) {
        throw new PingRequestError('read', `ping ${pings}: RDMA Read of the client's start buffer`, err);
      }
      if (o.verbose) io.out(`server ping data: ${cString(sink.buffer)}`);
      s.sendMr.buffer.fill(0); // rping's server never fills its send buffer: the go-ahead is 16 zero bytes
      await s.send(`ping ${pings}: go-ahead after the RDMA Read`);
      const dst = decodeRpingInfo(await s.receive(`ping ${pings}: sink buffer advertisement`));
      const len = Math.min(strlen(sink.buffer) + 1, o.size);
      debug(`ping ${pings}: Write ${len} bytes to 0x${dst.address.toString(16)} rkey 0x${dst.token.toString(16)}`);
      if (len > dst.size) throw new PingFailure(`the client's sink (${dst.size} bytes) is smaller than the ${len} bytes to echo`);
      try {
        await s.qp.write(sink.slice(0, len), { address: dst.address, token: dst.token, length: dst.size });
      } catch (err) {
        throw new PingRequestError('write', `ping ${pings}: RDMA Write to the client's sink buffer`, err);
      }
      try {
        await s.send(`ping ${pings}: go-ahead after the RDMA Write`);
      } catch (err) {
        // After its last ping the client disconnects as soon as this go-ahead arrives, which can be before
        // the provider confirmed the Send's delivery (queue_pair.h, completion confirmation): the Send is then
        // flushed. The client got it; like rping's server, take the disconnect as the normal end.
        if (err instanceof PingRequestError) {
          await Promise.race([request.disconnected, new Promise((r) => setTimeout(r, 1000))]);
          if (gone) {
            debug(`client ${peer.host}:${peer.port} disconnected after ${pings + 1} ping(s) (last go-ahead: ${statusText(err.failure)})`);
            return 0;
          }
        }
        throw err;
      }
      pings++;
    }
  } catch (err) {
    return reportFailure(err, io, `(client ${peer.host}:${peer.port}, after ${pings} ping(s))`);
  } finally {
    await s.close();
    await sink?.deregister().catch(() => undefined);
    if (s.settled.length > 0) debug(`settled: ${s.settled.join('; ')}`);
  }
}

async function runServer(o: PingOptions, io: PingIo, debug: (m: string) => void): Promise<number> {
  // rping -s listens on INADDR_ANY by default. An adapter is opened on a local address, so a wildcard listens
  // through the loopback adapter (the software provider accepts any local address on a wildcard listener).
  const listenHost = o.address ?? '0.0.0.0';
  const wildcard = listenHost === '0.0.0.0' || listenHost === '::';
  const adapterAddress = wildcard ? (listenHost === '::' ? '::1' : '127.0.0.1') : listenHost;
  return withAdapter(adapterAddress, o, async (adapter, cq) => {
    const listener = await adapter.listen({ host: listenHost, port: o.port, backlog: 3 });
    io.err(`netdirect ping: listening on ${listener.address.host}:${listener.address.port}`);
    try {
      if (!o.persistent) {
        const request = await listener.getConnectionRequest();
        return await serveConnection(adapter, cq, request, o, io, debug);
      }
      // -P: every connection on its own, until killed.
      for (;;) {
        const request = await listener.getConnectionRequest();
        void serveConnection(adapter, cq, request, o, io, debug);
      }
    } finally {
      await listener.close();
    }
  });
}

/** Runs `netdirect ping <args>`; resolves with the process exit code. */
export async function ping(args: string[], io: PingIo = defaultIo): Promise<number> {
  const o = parsePingArgs(args);
  const debug = o.debug ? (m: string) => io.err(`[ping] ${m}`) : () => {};
  try {
    return o.role === 'client' ? await runClient(o, io, debug) : await runServer(o, io, debug);
  } catch (err) {
    return reportFailure(err, io, '');
  }
}

// PMI-1 client over the wire, as MPICH's and Intel MPI's Hydra launcher serves it: the launcher hands each
// process a connected socket (PMI_FD; PMI_PORT=host:port when it is to connect instead) and PMI_RANK/PMI_SIZE.
// Each command is one line of space-separated key=value attributes starting with cmd=, and gets one reply line:
//   cmd=init pmi_version=1 pmi_subversion=1    -> cmd=response_to_init ... rc=0
//   cmd=get_maxes                              -> cmd=maxes kvsname_max= keylen_max= vallen_max=
//   cmd=get_my_kvsname                         -> cmd=my_kvsname kvsname=
//   cmd=put kvsname= key= value=               -> cmd=put_result rc=0
//   cmd=barrier_in                             -> cmd=barrier_out   (the fence: all puts are then visible)
//   cmd=get kvsname= key=                      -> cmd=get_result rc=0 value=
//   cmd=finalize                               -> cmd=finalize_ack
// docs/job.md describes it in our words; no PMI library is linked.

import { fstatSync, type Stats } from 'node:fs';
import { Socket, connect } from 'node:net';
import { NdError } from '../errors.js';
import { MAX_JOB_SIZE, type Bootstrap } from './bootstrap.js';
import { bounded, bootstrapError, strictUint, type Limit } from './errors.js';
import { StreamReader } from './wire.js';

/** The longest PMI reply line read (Hydra's longest values are 1 KiB; MPICH's PMI_MAXVALLEN is 1024). */
export const PMI_MAX_LINE = 64 * 1024;
/** The longest kvsname, key or value accepted from the launcher. */
const PMI_MAX_WORD = 4096;

export type Attributes = Record<string, string>;

/** "cmd=x a=1 b=2" → { cmd: 'x', a: '1', b: '2' }. */
export function parsePmi1(line: string): Attributes {
  const out: Attributes = {};
  for (const word of line.trim().split(/ +/)) {
    const eq = word.indexOf('=');
    if (eq > 0) out[word.slice(0, eq)] = word.slice(eq + 1);
  }
  return out;
}

/** PMI-1 values cannot hold spaces, '=' or newlines. */
function checkWord(what: string, value: string): void {
  if (/[\s=]/.test(value) || value.length === 0) throw bootstrapError('hydra', 'put', `${what} ${JSON.stringify(value)} has a space, '=' or nothing`);
}

/** The launcher's connection, and the rank and size its port handshake gave (PMI_PORT with PMI_ID only). */
export interface PmiConnection {
  socket: Socket;
  rank?: number;
  size?: number;
}

/** Descriptors this process already handed to a job: the launcher serves one connection per process. */
const usedFds = new Set<number>();
let portUsed = false;

/** Says how to start a process so that the launcher's descriptor reaches it. */
function fdAdvice(launcher: string): string {
  const direct = launcher === 'pmi2' ? 'srun --mpi=pmi2 -n N node app.mjs' : 'mpiexec -n N node app.mjs';
  const bin = launcher === 'pmi2' ? 'srun --mpi=pmi2 -n N ./node_modules/.bin/ndbench ...' : 'mpiexec -n N ./node_modules/.bin/ndbench ...';
  const port = launcher === 'pmi2' ? '' : ", or have MPICH's mpiexec hand out a port instead of a descriptor: mpiexec -pmi-port -n N npx ndbench ...";
  return `a program between the launcher and node did not pass the descriptor on (npx, npm run and npm exec do not); start node directly (${direct}, ${bin})${port}`;
}

/**
 * Reads the first n lines the launcher sends, before any other reader is attached. Nothing may follow them: the
 * launcher sends nothing more until the client's next command.
 */
function readLines(socket: Socket, n: number, launcher: string, timeoutMs: number): Promise<string[]> {
  return new Promise((resolve, reject) => {
    let got = Buffer.alloc(0);
    const done = (err: Error | null, lines?: string[]) => {
      clearTimeout(timer);
      socket.off('data', onData).off('error', onError).off('close', onClose);
      if (err) reject(err);
      else resolve(lines!);
    };
    const onData = (d: Buffer) => {
      got = Buffer.concat([got, d]);
      const text = got.toString('utf8');
      const lines = text.split('\n');
      if (lines.length <= n) return;
      if (lines.length > n + 1 || lines[n] !== '') done(bootstrapError(launcher, 'join', `unexpected data from PMI_PORT after its ${n} handshake lines: ${JSON.stringify(text)}`));
      else done(null, lines.slice(0, n));
    };
    const onError = (err: Error) => done(bootstrapError(launcher, 'join', `PMI_PORT handshake: ${err.message}`, err));
    const onClose = () => done(bootstrapError(launcher, 'join', `the launcher closed PMI_PORT during the initack handshake (got ${JSON.stringify(got.toString('utf8'))})`));
    const timer = setTimeout(() => done(bootstrapError(launcher, 'join', `PMI_PORT handshake: no answer within ${timeoutMs} ms`)), timeoutMs);
    socket.on('data', onData).on('error', onError).on('close', onClose);
  });
}

/**
 * The launcher's connection: PMI_FD (a socket the launcher left open in this process) or PMI_PORT (host:port to
 * connect to). PMI_FD is checked before use: a descriptor that is not open, not a socket, is stdin/stdout/stderr,
 * is already in use in this process (libuv refuses it with EEXIST) or was handed to an earlier join() is refused
 * with an NdError saying why and how to start the process instead; it is never opened blindly (a pipe or an eventfd
 * there crashed the process before: issue #29 finding 1).
 * With PMI_PORT and PMI_ID (MPICH's `mpiexec -pmi-port`: Hydra 4.0 sets only these two), the client first sends
 * `cmd=initack pmiid=<PMI_ID>` and Hydra answers `cmd=initack`, then `cmd=set size=`, `cmd=set rank=` and
 * `cmd=set debug=` (MPICH's src/pmi/simple/simple_pmi.c, PMII_Set_from_port; tried against Debian's mpich 4.0.2);
 * PMI-1 goes on from there on the same connection. The environment survives npx and npm run where a descriptor does
 * not, so `mpiexec -pmi-port -n N npx ndbench ...` works.
 */
export async function pmiSocket(env: NodeJS.ProcessEnv, launcher: string, timeoutMs = 60_000): Promise<PmiConnection> {
  if (env.PMI_FD !== undefined && env.PMI_FD !== '') {
    const text = env.PMI_FD;
    const fd = Number(text);
    if (!/^\d+$/.test(text) || !Number.isSafeInteger(fd)) throw bootstrapError(launcher, 'join', `PMI_FD=${JSON.stringify(text)} is not a descriptor number`);
    const refuse = (what: string, cause?: unknown) => bootstrapError(launcher, 'join', `PMI_FD=${JSON.stringify(text)} ${what}: ${fdAdvice(launcher)}`, cause);
    if (fd <= 2) throw refuse(`is ${['standard input', 'standard output', 'standard error'][fd]}, not a connection to the launcher`);
    if (usedFds.has(fd)) {
      throw bootstrapError(launcher, 'join', `PMI_FD=${JSON.stringify(text)} was already used by an earlier join() in this process: the launcher serves one job per process (its connection closes with that job's close())`);
    }
    let stat: Stats;
    try {
      stat = fstatSync(fd);
    } catch (err) {
      throw refuse(`is not open in this process (${(err as NodeJS.ErrnoException).code ?? (err as Error).message})`, err);
    }
    // On Windows a descriptor the parent passed (a socketpair or pipe of node's spawn, which is all a PMI_FD can be
    // there) is a named pipe that fstat reports as none of these kinds: libuv opens it as a pipe, and the socket
    // below fails if it cannot (test/job.test.ts runs the PMI-2 socketpair case in the Windows tier).
    if (!stat.isSocket() && process.platform !== 'win32') {
      const kind = stat.isFIFO() ? 'a pipe' : stat.isFile() ? 'a file' : stat.isCharacterDevice() ? 'a terminal or device' : stat.isDirectory() ? 'a directory' : 'an eventfd, epoll or other descriptor';
      throw refuse(`is ${kind} in this process, not the launcher's socket`);
    }
    let socket: Socket;
    try {
      socket = new Socket({ fd, readable: true, writable: true });
    } catch (err) {
      // EEXIST: libuv already watches this descriptor (one of Node's own), so it is not the launcher's.
      throw refuse(`is a socket this process already uses for something else (${(err as Error).message})`, err);
    }
    usedFds.add(fd);
    return { socket };
  }
  const m = /^(.*):(\d+)$/.exec(env.PMI_PORT ?? '');
  if (m === null) throw bootstrapError(launcher, 'join', 'neither PMI_FD nor PMI_PORT=host:port is set: was this process started by the launcher?');
  const id = env.PMI_ID;
  if (id !== undefined && id !== '' && !/^\d+$/.test(id)) throw bootstrapError(launcher, 'join', `PMI_ID=${JSON.stringify(id)} is not a whole number`);
  if (portUsed && id !== undefined && id !== '') {
    throw bootstrapError(launcher, 'join', `PMI_PORT with PMI_ID=${id} was already used by an earlier join() in this process: the launcher serves one job per process`);
  }
  const socket = connect({ host: m[1], port: Number(m[2]) });
  await new Promise<void>((resolve, reject) => {
    socket.once('connect', resolve);
    socket.once('error', (err) => reject(bootstrapError(launcher, 'join', `cannot reach PMI_PORT ${env.PMI_PORT}: ${err.message}`, err)));
  });
  if (id === undefined || id === '') return { socket };
  portUsed = true;
  try {
    socket.write(`cmd=initack pmiid=${id}\n`);
    const [ack, ...sets] = (await readLines(socket, 4, launcher, timeoutMs)).map(parsePmi1);
    if (ack!.cmd !== 'initack') throw bootstrapError(launcher, 'join', `expected cmd=initack on PMI_PORT, the launcher answered cmd=${ack!.cmd ?? '(none)'}`);
    const set: Attributes = {};
    for (const line of sets) {
      if (line.cmd !== 'set') throw bootstrapError(launcher, 'join', `expected cmd=set after initack, the launcher answered cmd=${line.cmd ?? '(none)'}`);
      Object.assign(set, line);
    }
    const rank = Number(set.rank);
    const size = Number(set.size);
    if (!Number.isInteger(rank) || !Number.isInteger(size) || size < 1 || rank < 0 || rank >= size) {
      throw bootstrapError(launcher, 'join', `the initack handshake gave rank=${set.rank} size=${set.size}`);
    }
    return { socket, rank, size };
  } catch (err) {
    socket.destroy();
    throw err;
  }
}

/**
 * pmiSocket(), any failure it did not name itself as an NdError naming the variable at fault (a PMI_PORT above 65535
 * gives Node's ERR_SOCKET_BAD_PORT), and its connect and handshake bounded by `limit`.
 */
export async function launcherSocket(env: NodeJS.ProcessEnv, launcher: string, limit?: Limit): Promise<PmiConnection> {
  const variable = env.PMI_FD !== undefined && env.PMI_FD !== '' ? `PMI_FD=${JSON.stringify(env.PMI_FD)}` : `PMI_PORT=${JSON.stringify(env.PMI_PORT ?? '')}`;
  let opened: Promise<PmiConnection>;
  try {
    opened = pmiSocket(env, launcher, limit?.timeoutMs);
  } catch (err) {
    opened = Promise.reject(err);
  }
  try {
    return await bounded(opened, limit, 'join', `${variable}: the launcher's socket did not connect`);
  } catch (err) {
    if (err instanceof NdError) throw err;
    throw bootstrapError(launcher, 'join', `${variable} is not the launcher's socket: ${(err as Error).message}`, err);
  }
}

/** A word of a PMI reply: present, no longer than PMI_MAX_WORD. */
export function replyWord(reply: Attributes, key: string, launcher: string, operation: string, cmd: string): string {
  const v = reply[key];
  if (v === undefined || v === '') throw bootstrapError(launcher, operation, `the launcher's ${cmd} has no ${key}=`);
  if (v.length > PMI_MAX_WORD) throw bootstrapError(launcher, operation, `the launcher's ${cmd} has a ${key}= of ${v.length} characters, more than ${PMI_MAX_WORD}`);
  return v;
}

export class Pmi1 implements Bootstrap {
  readonly launcher = 'hydra' as const;
  jobId = '';
  vallenMax = 1024;
  private readonly reader: StreamReader;

  private constructor(
    socket: Socket,
    readonly rank: number,
    readonly size: number,
  ) {
    this.reader = new StreamReader(socket, 'hydra', PMI_MAX_LINE);
  }

  static async connect(env: NodeJS.ProcessEnv, limit?: Limit): Promise<Pmi1> {
    // PMI_RANK/PMI_SIZE, or under `mpiexec -pmi-port` (which sets neither) what the initack handshake said.
    const viaPort = (env.PMI_FD === undefined || env.PMI_FD === '') && env.PMI_ID !== undefined && env.PMI_ID !== '';
    const check = (rank: number | null, size: number | null, where: string): [number, number] => {
      if (rank === null || size === null || size < 1 || rank >= size) {
        throw bootstrapError('hydra', 'join', `${where} are not a rank of a job of at most ${MAX_JOB_SIZE} (decimal digits only)`);
      }
      return [rank, size];
    };
    const fromEnv = () => check(strictUint(env.PMI_RANK, MAX_JOB_SIZE - 1), strictUint(env.PMI_SIZE, MAX_JOB_SIZE), `PMI_RANK=${JSON.stringify(env.PMI_RANK)} PMI_SIZE=${JSON.stringify(env.PMI_SIZE)}`);
    if (!viaPort) fromEnv();
    const conn = await launcherSocket(env, 'hydra', limit);
    let rank: number;
    let size: number;
    try {
      [rank, size] = conn.rank !== undefined ? check(strictUint(String(conn.rank), MAX_JOB_SIZE - 1), strictUint(String(conn.size), MAX_JOB_SIZE), `the initack's rank=${conn.rank} size=${conn.size}`) : fromEnv();
    } catch (err) {
      conn.socket.destroy();
      throw err;
    }
    const pmi = new Pmi1(conn.socket, rank, size);
    try {
      await pmi.init(limit);
    } catch (err) {
      pmi.destroy();
      throw err;
    }
    return pmi;
  }

  /** Sends one command line and reads the reply, checking its cmd= and rc=. */
  private queue: Promise<unknown> = Promise.resolve();

  /** One command at a time: the protocol answers in order and has no request ids. */
  command(line: string, expect: string, operation: string, limit?: Limit): Promise<Attributes> {
    const run = this.queue.then(() => this._command(line, expect, operation, limit));
    this.queue = run.catch(() => undefined);
    return run;
  }

  private async _command(line: string, expect: string, operation: string, limit?: Limit): Promise<Attributes> {
    this.reader.socket.ref();
    try {
      this.reader.write(`${line}\n`);
      const reply = parsePmi1(await this.reader.line(operation, limit, `the launcher did not answer ${line.split(' ')[0]}`));
      if (reply.cmd !== expect) throw bootstrapError('hydra', operation, `expected cmd=${expect}, the launcher answered cmd=${reply.cmd ?? '(none)'}`);
      if (reply.rc !== undefined && reply.rc !== '0') {
        throw bootstrapError('hydra', operation, `the launcher refused ${line.split(' ')[0]}: rc=${reply.rc} ${reply.msg ?? reply.errmsg ?? ''}`);
      }
      return reply;
    } finally {
      this.reader.socket.unref();
    }
  }

  private async init(limit?: Limit): Promise<void> {
    const r = await this.command('cmd=init pmi_version=1 pmi_subversion=1', 'response_to_init', 'join', limit);
    if (r.pmi_version !== undefined && r.pmi_version !== '1') throw bootstrapError('hydra', 'join', `the launcher speaks PMI version ${r.pmi_version}, not 1`);
    const maxes = await this.command('cmd=get_maxes', 'maxes', 'join', limit);
    if (maxes.vallen_max !== undefined) {
      const v = strictUint(maxes.vallen_max, PMI_MAX_WORD);
      // Below 64 no address fits; above PMI_MAX_WORD the launcher claims more than a reply line may carry.
      if (v === null || v < 64) throw bootstrapError('hydra', 'join', `the launcher's maxes has vallen_max=${JSON.stringify(maxes.vallen_max)}, not a length of 64..${PMI_MAX_WORD}`);
      this.vallenMax = v;
    }
    this.jobId = replyWord(await this.command('cmd=get_my_kvsname', 'my_kvsname', 'join', limit), 'kvsname', 'hydra', 'join', 'my_kvsname');
  }

  async put(key: string, value: string, limit?: Limit): Promise<void> {
    checkWord('key', key);
    checkWord('value', value);
    if (value.length > this.vallenMax) throw bootstrapError('hydra', 'put', `value of ${value.length} characters exceeds vallen_max ${this.vallenMax}`);
    await this.command(`cmd=put kvsname=${this.jobId} key=${key} value=${value}`, 'put_result', 'put', limit);
  }

  async fence(limit?: Limit): Promise<void> {
    await this.command('cmd=barrier_in', 'barrier_out', 'fence', limit);
  }

  async get(key: string, _fromRank?: number, limit?: Limit): Promise<string> {
    checkWord('key', key);
    const r = await this.command(`cmd=get kvsname=${this.jobId} key=${key}`, 'get_result', 'get', limit);
    if (r.value === undefined || r.found === 'FALSE' || r.found === 'false') throw bootstrapError('hydra', 'get', `no key ${key} in ${this.jobId}`);
    return replyWord(r, 'value', 'hydra', 'get', 'get_result');
  }

  async finalize(limit?: Limit): Promise<void> {
    try {
      await this.command('cmd=finalize', 'finalize_ack', 'finalize', limit);
    } finally {
      this.destroy();
    }
  }

  destroy(): void {
    this.reader.socket.destroy();
  }
}

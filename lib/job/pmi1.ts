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

/** The launcher's socket: PMI_FD (inherited) or PMI_PORT (host:port to connect to). */
export async function pmiSocket(env: NodeJS.ProcessEnv, launcher: string): Promise<Socket> {
  if (env.PMI_FD !== undefined) {
    const fd = Number(env.PMI_FD);
    if (!Number.isInteger(fd) || fd < 0) throw bootstrapError(launcher, 'join', `PMI_FD=${JSON.stringify(env.PMI_FD)} is not a descriptor`);
    return new Socket({ fd, readable: true, writable: true });
  }
  const m = /^(.*):(\d+)$/.exec(env.PMI_PORT ?? '');
  if (m === null) throw bootstrapError(launcher, 'join', 'neither PMI_FD nor PMI_PORT=host:port is set: was this process started by the launcher?');
  const socket = connect({ host: m[1], port: Number(m[2]) });
  await new Promise<void>((resolve, reject) => {
    socket.once('connect', resolve);
    socket.once('error', (err) => reject(bootstrapError(launcher, 'join', `cannot reach PMI_PORT ${env.PMI_PORT}: ${err.message}`, err)));
  });
  return socket;
}

/**
 * pmiSocket(), its failures as NdErrors naming the variable at fault (a PMI_FD that is not open or not a socket
 * gives Node's ERR_INVALID_FD_TYPE, a PMI_PORT above 65535 ERR_SOCKET_BAD_PORT), and its connect bounded by
 * `limit`.
 */
export async function launcherSocket(env: NodeJS.ProcessEnv, launcher: string, limit?: Limit): Promise<Socket> {
  const variable = env.PMI_FD !== undefined ? `PMI_FD=${JSON.stringify(env.PMI_FD)}` : `PMI_PORT=${JSON.stringify(env.PMI_PORT ?? '')}`;
  let opened: Promise<Socket>;
  try {
    opened = pmiSocket(env, launcher);
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
    const rank = strictUint(env.PMI_RANK, MAX_JOB_SIZE - 1);
    const size = strictUint(env.PMI_SIZE, MAX_JOB_SIZE);
    if (rank === null || size === null || size < 1 || rank >= size) {
      throw bootstrapError('hydra', 'join', `PMI_RANK=${JSON.stringify(env.PMI_RANK)} PMI_SIZE=${JSON.stringify(env.PMI_SIZE)} are not a rank of a job of at most ${MAX_JOB_SIZE} (decimal digits only)`);
    }
    const pmi = new Pmi1(await launcherSocket(env, 'hydra', limit), rank, size);
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

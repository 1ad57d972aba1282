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
import type { Bootstrap } from './bootstrap.js';
import { bootstrapError } from './errors.js';
import { StreamReader } from './wire.js';

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
    this.reader = new StreamReader(socket, 'hydra');
  }

  static async connect(env: NodeJS.ProcessEnv): Promise<Pmi1> {
    const rank = Number(env.PMI_RANK);
    const size = Number(env.PMI_SIZE);
    if (!Number.isInteger(rank) || !Number.isInteger(size) || size < 1 || rank < 0 || rank >= size) {
      throw bootstrapError('hydra', 'join', `PMI_RANK=${env.PMI_RANK} PMI_SIZE=${env.PMI_SIZE} are not a rank of a job`);
    }
    const pmi = new Pmi1(await pmiSocket(env, 'hydra'), rank, size);
    try {
      await pmi.init();
    } catch (err) {
      pmi.destroy();
      throw err;
    }
    return pmi;
  }

  /** Sends one command line and reads the reply, checking its cmd= and rc=. */
  private queue: Promise<unknown> = Promise.resolve();

  /** One command at a time: the protocol answers in order and has no request ids. */
  command(line: string, expect: string, operation: string): Promise<Attributes> {
    const run = this.queue.then(() => this._command(line, expect, operation));
    this.queue = run.catch(() => undefined);
    return run;
  }

  private async _command(line: string, expect: string, operation: string): Promise<Attributes> {
    this.reader.socket.ref();
    try {
      this.reader.write(`${line}\n`);
      const reply = parsePmi1(await this.reader.line(operation));
      if (reply.cmd !== expect) throw bootstrapError('hydra', operation, `expected cmd=${expect}, the launcher answered cmd=${reply.cmd ?? '(none)'}`);
      if (reply.rc !== undefined && reply.rc !== '0') {
        throw bootstrapError('hydra', operation, `the launcher refused ${line.split(' ')[0]}: rc=${reply.rc} ${reply.msg ?? reply.errmsg ?? ''}`);
      }
      return reply;
    } finally {
      this.reader.socket.unref();
    }
  }

  private async init(): Promise<void> {
    const r = await this.command('cmd=init pmi_version=1 pmi_subversion=1', 'response_to_init', 'join');
    if (r.pmi_version !== undefined && r.pmi_version !== '1') throw bootstrapError('hydra', 'join', `the launcher speaks PMI version ${r.pmi_version}, not 1`);
    const maxes = await this.command('cmd=get_maxes', 'maxes', 'join');
    this.vallenMax = Number(maxes.vallen_max) || this.vallenMax;
    this.jobId = (await this.command('cmd=get_my_kvsname', 'my_kvsname', 'join')).kvsname ?? '';
    if (this.jobId === '') throw bootstrapError('hydra', 'join', 'the launcher gave no kvsname');
  }

  async put(key: string, value: string): Promise<void> {
    checkWord('key', key);
    checkWord('value', value);
    if (value.length > this.vallenMax) throw bootstrapError('hydra', 'put', `value of ${value.length} characters exceeds vallen_max ${this.vallenMax}`);
    await this.command(`cmd=put kvsname=${this.jobId} key=${key} value=${value}`, 'put_result', 'put');
  }

  async fence(): Promise<void> {
    await this.command('cmd=barrier_in', 'barrier_out', 'fence');
  }

  async get(key: string): Promise<string> {
    checkWord('key', key);
    const r = await this.command(`cmd=get kvsname=${this.jobId} key=${key}`, 'get_result', 'get');
    if (r.value === undefined || r.found === 'FALSE' || r.found === 'false') throw bootstrapError('hydra', 'get', `no key ${key} in ${this.jobId}`);
    return r.value;
  }

  async finalize(): Promise<void> {
    try {
      await this.command('cmd=finalize', 'finalize_ack', 'finalize');
    } finally {
      this.destroy();
    }
  }

  destroy(): void {
    this.reader.socket.destroy();
  }
}

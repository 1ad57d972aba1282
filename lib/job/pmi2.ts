// PMI-2 client over the wire, as Slurm's `srun --mpi=pmi2` serves it (and Hydra, when asked for PMI-2). The
// launcher hands each process a connected socket (PMI_FD) and PMI_RANK (Slurm also sets PMI_SIZE, PMI_JOBID).
// The client first says, in PMI-1 line form,
//   cmd=init pmi_version=2 pmi_subversion=0\n  -> cmd=response_to_init pmi_version=2 pmi_subversion=0 rc=0\n
// then every command is a frame: its length as 6 decimal characters, then `cmd=NAME;key=value;...;` where a ';'
// inside a value is doubled. Commands used here:
//   fullinit pmijobid= pmirank= threaded=FALSE  -> fullinit-response rank= size= appnum= rc=0
//                                     (Slurm refuses a fullinit without pmijobid: rc=3, "pmijobid missing")
//   job-getid                         -> job-getid-response jobid=
//   kvs-put key= value=               -> kvs-put-response rc=0
//   kvs-fence                         -> kvs-fence-response rc=0      (all puts visible to all after it)
//   kvs-get jobid= srcid= key=        -> kvs-get-response found=TRUE value=
//   finalize                          -> finalize-response
// docs/job.md describes it in our words; no PMI library is linked. Slurm is not installed where this was
// written first; test/job.test.ts checks it against a PMI-2 server of the test's own (which refuses what Slurm's
// refuses), and the Slurm tier (docs/job.md) under a real srun --mpi=pmi2.
// Slurm (22.05) does not undo the ';;' escaping of a value, so put() refuses a value with ';' rather than have it
// come back cut short.

import type { Socket } from 'node:net';
import { MAX_JOB_SIZE, type Bootstrap } from './bootstrap.js';
import { bootstrapError, strictUint, type Limit } from './errors.js';
import { launcherSocket, parsePmi1, replyWord, PMI_MAX_LINE } from './pmi1.js';
import { StreamReader } from './wire.js';

export type Attributes = Record<string, string>;

const LENGTH_DIGITS = 6;

/** Encodes a PMI-2 command (without its length). */
export function encodePmi2(cmd: string, attrs: Array<[string, string | number]> = []): string {
  const esc = (s: string) => s.replace(/;/g, ';;');
  return `cmd=${cmd};` + attrs.map(([k, v]) => `${k}=${esc(String(v))};`).join('');
}

/** Adds the 6-character length in front. */
export function framePmi2(body: string): string {
  const n = Buffer.byteLength(body);
  if (n >= 10 ** LENGTH_DIGITS) throw new RangeError(`PMI-2 command of ${n} bytes is too long`);
  return String(n).padStart(LENGTH_DIGITS, ' ') + body;
}

/** "cmd=x;a=1;b=x;;y;" → { cmd: 'x', a: '1', b: 'x;y' }. */
export function parsePmi2(body: string): Attributes {
  const out: Attributes = {};
  let i = 0;
  while (i < body.length) {
    const eq = body.indexOf('=', i);
    if (eq < 0) break;
    const key = body.slice(i, eq);
    let value = '';
    let j = eq + 1;
    for (; j < body.length; j++) {
      if (body[j] === ';') {
        if (body[j + 1] === ';') {
          value += ';';
          j++;
          continue;
        }
        break;
      }
      value += body[j];
    }
    out[key] = value;
    i = j + 1;
  }
  return out;
}

/** The longest PMI-2 frame read (Slurm's values are at most 1 KiB: PMI2_MAX_VALLEN in its pmi2.h). */
export const PMI2_MAX_FRAME = PMI_MAX_LINE;

/** Reads one length-prefixed frame (at most PMI2_MAX_FRAME bytes). */
export async function readPmi2(reader: StreamReader, operation: string, limit?: Limit, what?: string): Promise<Attributes> {
  const head = (await reader.exact(LENGTH_DIGITS, operation, limit, what)).toString('latin1');
  // Padded either side: Slurm 22.05 sends it left-aligned ("114   ", as srun --mpi=pmi2 does in test/job-slurm.test.ts).
  const n = /^ *[0-9]+ *$/.test(head) ? strictUint(head.trim().replace(/^0+(?=.)/, ''), Number.MAX_SAFE_INTEGER) : null;
  if (n === null) throw bootstrapError('pmi2', operation, `bad PMI-2 length field ${JSON.stringify(head)}`);
  if (n > PMI2_MAX_FRAME) throw bootstrapError('pmi2', operation, `the launcher announced a frame of ${n} bytes, more than the ${PMI2_MAX_FRAME} a reply may have`);
  return parsePmi2((await reader.exact(n, operation, limit, what)).toString('utf8'));
}

export class Pmi2 implements Bootstrap {
  readonly launcher = 'pmi2' as const;
  jobId = '';
  rank = -1;
  size = 0;
  private readonly reader: StreamReader;

  private constructor(socket: Socket) {
    this.reader = new StreamReader(socket, 'pmi2', PMI_MAX_LINE);
  }

  static async connect(env: NodeJS.ProcessEnv, limit?: Limit): Promise<Pmi2> {
    // Checked before the socket is touched: a malformed PMI_RANK is the environment's fault, not the launcher's.
    const pmirank = strictUint(env.PMI_RANK ?? env.PMI_ID, MAX_JOB_SIZE - 1);
    if (pmirank === null) throw bootstrapError('pmi2', 'join', `PMI_RANK=${JSON.stringify(env.PMI_RANK ?? env.PMI_ID)} is not a rank below ${MAX_JOB_SIZE} (decimal digits only)`);
    const pmi = new Pmi2((await launcherSocket(env, 'pmi2', limit)).socket);
    try {
      await pmi.init(env, pmirank, limit);
    } catch (err) {
      pmi.destroy();
      throw err;
    }
    return pmi;
  }

  private queue: Promise<unknown> = Promise.resolve();

  /** One command at a time: the protocol answers in order and has no request ids. */
  command(cmd: string, attrs: Array<[string, string | number]>, operation: string, limit?: Limit): Promise<Attributes> {
    const run = this.queue.then(() => this._command(cmd, attrs, operation, limit));
    this.queue = run.catch(() => undefined);
    return run;
  }

  private async _command(cmd: string, attrs: Array<[string, string | number]>, operation: string, limit?: Limit): Promise<Attributes> {
    this.reader.socket.ref();
    try {
      this.reader.write(framePmi2(encodePmi2(cmd, attrs)));
      const reply = await readPmi2(this.reader, operation, limit, `the launcher did not answer ${cmd}`);
      if (reply.cmd !== `${cmd}-response`) throw bootstrapError('pmi2', operation, `expected cmd=${cmd}-response, the launcher answered cmd=${reply.cmd ?? '(none)'}`);
      if (reply.rc !== undefined && reply.rc !== '0') {
        throw bootstrapError('pmi2', operation, `the launcher refused ${cmd}: rc=${reply.rc} ${reply.errmsg ?? reply.msg ?? ''}`);
      }
      return reply;
    } finally {
      this.reader.socket.unref();
    }
  }

  private async init(env: NodeJS.ProcessEnv, pmirank: number, limit?: Limit): Promise<void> {
    this.reader.socket.ref();
    try {
      this.reader.write('cmd=init pmi_version=2 pmi_subversion=0\n');
      const r = parsePmi1(await this.reader.line('join', limit, 'the launcher did not answer cmd=init'));
      if (r.cmd !== 'response_to_init' || (r.rc !== undefined && r.rc !== '0')) {
        throw bootstrapError('pmi2', 'join', `the launcher did not accept PMI version 2: ${JSON.stringify(r)}`);
      }
    } finally {
      this.reader.socket.unref();
    }
    // Slurm's launcher wants the job id it set in PMI_JOBID back in fullinit (MPICH's PMI-2 client sends it too).
    const pmijobid = env.PMI_JOBID ?? '';
    const init = await this.command('fullinit', [['pmijobid', pmijobid], ['pmirank', pmirank], ['threaded', 'FALSE']], 'join', limit);
    const rank = strictUint(init.rank, MAX_JOB_SIZE - 1);
    const size = strictUint(init.size, MAX_JOB_SIZE);
    if (rank === null || size === null || size < 1 || rank >= size) {
      throw bootstrapError('pmi2', 'join', `fullinit-response has rank=${JSON.stringify(init.rank)} size=${JSON.stringify(init.size)}, not a rank of a job of at most ${MAX_JOB_SIZE} (decimal digits only)`);
    }
    // The launcher's answers must agree with what it put in the environment.
    if (rank !== pmirank) throw bootstrapError('pmi2', 'join', `fullinit-response has rank=${rank}, but PMI_RANK is ${pmirank}`);
    const envSize = env.PMI_SIZE !== undefined ? strictUint(env.PMI_SIZE, MAX_JOB_SIZE) : size;
    if (envSize !== size) throw bootstrapError('pmi2', 'join', `fullinit-response has size=${size}, but PMI_SIZE is ${JSON.stringify(env.PMI_SIZE)}`);
    this.rank = rank;
    this.size = size;
    const got = await this.command('job-getid', [], 'join', limit);
    this.jobId = got.jobid !== undefined && got.jobid !== '' ? replyWord(got, 'jobid', 'pmi2', 'join', 'job-getid-response') : pmijobid;
    if (this.jobId === '') throw bootstrapError('pmi2', 'join', 'the launcher gave no job id (job-getid answered without jobid, and PMI_JOBID is not set)');
  }

  async put(key: string, value: string, limit?: Limit): Promise<void> {
    if (key.includes(';') || value.includes(';')) {
      throw bootstrapError('pmi2', 'put', `${key.includes(';') ? 'key' : 'value'} ${JSON.stringify(key.includes(';') ? key : value)} has a ';', which Slurm's PMI-2 does not unescape`);
    }
    await this.command('kvs-put', [['key', key], ['value', value]], 'put', limit);
  }

  async fence(limit?: Limit): Promise<void> {
    await this.command('kvs-fence', [], 'fence', limit);
  }

  async get(key: string, fromRank: number, limit?: Limit): Promise<string> {
    const r = await this.command('kvs-get', [['jobid', this.jobId], ['srcid', fromRank], ['key', key]], 'get', limit);
    if (r.found !== 'TRUE' && r.found !== 'true') throw bootstrapError('pmi2', 'get', `no key ${key} in job ${this.jobId}`);
    return replyWord(r, 'value', 'pmi2', 'get', 'kvs-get-response');
  }

  async finalize(limit?: Limit): Promise<void> {
    try {
      await this.command('finalize', [], 'finalize', limit);
    } finally {
      this.destroy();
    }
  }

  destroy(): void {
    this.reader.socket.destroy();
  }
}

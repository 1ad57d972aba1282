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
import type { Bootstrap } from './bootstrap.js';
import { bootstrapError } from './errors.js';
import { pmiSocket, parsePmi1 } from './pmi1.js';
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

/** Reads one length-prefixed frame. */
export async function readPmi2(reader: StreamReader, operation: string): Promise<Attributes> {
  const head = (await reader.exact(LENGTH_DIGITS, operation)).toString('latin1');
  const n = Number(head.trim());
  if (!Number.isInteger(n) || n < 0 || !/^ *\d+ *$/.test(head)) throw bootstrapError('pmi2', operation, `bad PMI-2 length field ${JSON.stringify(head)}`);
  return parsePmi2((await reader.exact(n, operation)).toString('utf8'));
}

export class Pmi2 implements Bootstrap {
  readonly launcher = 'pmi2' as const;
  jobId = '';
  rank = -1;
  size = 0;
  private readonly reader: StreamReader;

  private constructor(socket: Socket) {
    this.reader = new StreamReader(socket, 'pmi2');
  }

  static async connect(env: NodeJS.ProcessEnv): Promise<Pmi2> {
    const pmi = new Pmi2(await pmiSocket(env, 'pmi2'));
    try {
      await pmi.init(env);
    } catch (err) {
      pmi.destroy();
      throw err;
    }
    return pmi;
  }

  private queue: Promise<unknown> = Promise.resolve();

  /** One command at a time: the protocol answers in order and has no request ids. */
  command(cmd: string, attrs: Array<[string, string | number]>, operation: string): Promise<Attributes> {
    const run = this.queue.then(() => this._command(cmd, attrs, operation));
    this.queue = run.catch(() => undefined);
    return run;
  }

  private async _command(cmd: string, attrs: Array<[string, string | number]>, operation: string): Promise<Attributes> {
    this.reader.socket.ref();
    try {
      this.reader.write(framePmi2(encodePmi2(cmd, attrs)));
      const reply = await readPmi2(this.reader, operation);
      if (reply.cmd !== `${cmd}-response`) throw bootstrapError('pmi2', operation, `expected cmd=${cmd}-response, the launcher answered cmd=${reply.cmd ?? '(none)'}`);
      if (reply.rc !== undefined && reply.rc !== '0') {
        throw bootstrapError('pmi2', operation, `the launcher refused ${cmd}: rc=${reply.rc} ${reply.errmsg ?? reply.msg ?? ''}`);
      }
      return reply;
    } finally {
      this.reader.socket.unref();
    }
  }

  private async init(env: NodeJS.ProcessEnv): Promise<void> {
    const pmirank = Number(env.PMI_RANK ?? env.PMI_ID);
    if (!Number.isInteger(pmirank) || pmirank < 0) throw bootstrapError('pmi2', 'join', `PMI_RANK=${JSON.stringify(env.PMI_RANK)} is not a rank`);
    this.reader.socket.ref();
    try {
      this.reader.write('cmd=init pmi_version=2 pmi_subversion=0\n');
      const r = parsePmi1(await this.reader.line('join'));
      if (r.cmd !== 'response_to_init' || (r.rc !== undefined && r.rc !== '0')) {
        throw bootstrapError('pmi2', 'join', `the launcher did not accept PMI version 2: ${JSON.stringify(r)}`);
      }
    } finally {
      this.reader.socket.unref();
    }
    // Slurm's launcher wants the job id it set in PMI_JOBID back in fullinit (MPICH's PMI-2 client sends it too).
    const pmijobid = env.PMI_JOBID ?? '';
    const init = await this.command('fullinit', [['pmijobid', pmijobid], ['pmirank', pmirank], ['threaded', 'FALSE']], 'join');
    this.rank = Number(init.rank);
    this.size = Number(init.size);
    if (!Number.isInteger(this.rank) || !Number.isInteger(this.size) || this.rank < 0 || this.rank >= this.size) {
      throw bootstrapError('pmi2', 'join', `fullinit-response has rank=${init.rank} size=${init.size}`);
    }
    const jobid = (await this.command('job-getid', [], 'join')).jobid;
    this.jobId = jobid !== undefined && jobid !== '' ? jobid : pmijobid;
    if (this.jobId === '') throw bootstrapError('pmi2', 'join', 'the launcher gave no job id (job-getid answered without jobid, and PMI_JOBID is not set)');
  }

  async put(key: string, value: string): Promise<void> {
    if (key.includes(';') || value.includes(';')) {
      throw bootstrapError('pmi2', 'put', `${key.includes(';') ? 'key' : 'value'} ${JSON.stringify(key.includes(';') ? key : value)} has a ';', which Slurm's PMI-2 does not unescape`);
    }
    await this.command('kvs-put', [['key', key], ['value', value]], 'put');
  }

  async fence(): Promise<void> {
    await this.command('kvs-fence', [], 'fence');
  }

  async get(key: string, fromRank: number): Promise<string> {
    const r = await this.command('kvs-get', [['jobid', this.jobId], ['srcid', fromRank], ['key', key]], 'get');
    if (r.found !== 'TRUE' && r.found !== 'true') throw bootstrapError('pmi2', 'get', `no key ${key} in job ${this.jobId}`);
    return r.value ?? '';
  }

  async finalize(): Promise<void> {
    try {
      await this.command('finalize', [], 'finalize');
    } finally {
      this.destroy();
    }
  }

  destroy(): void {
    this.reader.socket.destroy();
  }
}

// The ndbench command as a function (the bin, lib/bench/cli.ts, only calls it): parse, pick the role, run.
// Exit codes: 0 done, 1 the benchmark failed, 2 usage error.

import { USAGE, UsageError, parseArgs } from './options.js';
import { OSU_USAGE, isOsuTest, parseOsuArgs, runOsu } from './osu.js';
import { defaultIo, packageVersion, runClient, runLoopback, runServer, type RunIo } from './run.js';

export async function main(argv: string[], io: RunIo = defaultIo): Promise<number> {
  if (isOsuTest(argv.find((a) => !a.startsWith('-')))) return osuMain(argv, io);
  let o;
  try {
    o = parseArgs(argv);
  } catch (err) {
    if (err instanceof UsageError) {
      io.err(`ndbench: ${err.message}\n(ndbench --help lists the tests and options)\n`);
      return 2;
    }
    throw err;
  }
  if (o === null) {
    io.out(USAGE);
    return 0;
  }
  if (o === 'version') {
    io.out(`ndbench (netdirect) ${packageVersion()}`);
    return 0;
  }
  // Accepted perftest flags that change nothing here say so (once: not again from the --loopback server child).
  if (!o.loopbackChild) for (const note of o.notes) io.err(`ndbench: note: ${note}\n`);
  // Ctrl-C ends --run_infinitely at the client, which then tells the server: the --loopback child ignores it.
  if (o.loopbackChild && o.runInfinitely) process.on('SIGINT', () => undefined);
  // The software provider reads its CRC setting from the environment; --loopback's server inherits it.
  if (o.crc !== undefined) process.env.NETDIRECT_SOFT_CRC = o.crc === 'on' ? '1' : '0';
  // The same for same-host shared memory (docs/shm.md): both sides' adapters read NETDIRECT_SHM when they open.
  if (o.shm !== undefined) process.env.NETDIRECT_SHM = o.shm === 'on' ? '1' : '0';
  try {
    if (o.loopbackChild) {
      await runServer(o, io, (port) => process.send?.({ port }));
    } else if (o.loopback) {
      await runLoopback(o, argv, io);
    } else if (o.server === undefined && o.test !== 'reg_mr') {
      await runServer(o, io);
    } else {
      await runClient(o, io);
    }
    return 0;
  } catch (err) {
    io.err(`ndbench: ${(err as Error).message}\n`);
    if (process.env.NDBENCH_DEBUG) io.err(`${(err as Error).stack}\n`);
    return 1;
  }
}

/** `ndbench osu_*`: the OSU-named tests of a job of N ranks (lib/bench/osu.ts). */
async function osuMain(argv: string[], io: RunIo): Promise<number> {
  let o;
  try {
    o = parseOsuArgs(argv);
  } catch (err) {
    if (err instanceof UsageError) {
      io.err(`ndbench: ${err.message}\n(ndbench ${argv.find((a) => !a.startsWith('-'))} --help lists its options)\n`);
      return 2;
    }
    throw err;
  }
  if (o === null) {
    io.out(OSU_USAGE);
    return 0;
  }
  try {
    await runOsu(o, io);
    return 0;
  } catch (err) {
    io.err(`ndbench: ${(err as Error).message}\n`);
    if (process.env.NDBENCH_DEBUG) io.err(`${(err as Error).stack}\n`);
    return 1;
  }
}

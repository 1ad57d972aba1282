// What the namespace tiers (test/netfault.test.ts, test/job-netns.test.ts) share: running system tools (ip, tc, cc),
// and driving test/netfault/linkem.c: build it, start one link between two network namespaces, send it commands
// (test/netfault/README.md lists them).
import { spawn } from 'node:child_process';
import * as path from 'node:path';
import * as readline from 'node:readline';
import { root } from '../helpers';

// run/tryRun live in test/netns/topology.mjs (also used by scripts/bench-netns.mjs); re-exported for the tiers here.
import { run } from '../netns/topology.mjs';
export { run, tryRun } from '../netns/topology.mjs';

/** Builds linkem into `dir` with cc; returns the executable's path. */
export function buildLinkem(dir: string): string {
  const exe = path.join(dir, 'linkem');
  run('cc', ['-O2', '-Wall', '-Wextra', '-Werror', '-o', exe, path.join(root, 'test/netfault/linkem.c')]);
  return exe;
}

export interface Linkem {
  /** Sends one command ("loss 1", "delay 5 2", "stats"...) and returns linkem's answer line. */
  command(c: string): Promise<string>;
  /** Ends linkem (end of its stdin); its TUN devices go with it. */
  close(): void;
}

/** Starts linkem with a TUN device `devA` in namespace `nsA` and `devB` in `nsB`; resolves once they exist. */
export async function startLinkem(exe: string, nsA: string, devA: string, nsB: string, devB: string): Promise<Linkem> {
  const proc = spawn(exe, ['--ns-a', `/run/netns/${nsA}`, '--dev-a', devA, '--ns-b', `/run/netns/${nsB}`, '--dev-b', devB], {
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  let stderr = '';
  proc.stderr!.setEncoding('utf8').on('data', (d: string) => (stderr += d));
  const lines: string[] = [];
  const waiters: Array<() => void> = [];
  readline.createInterface({ input: proc.stdout! }).on('line', (l) => {
    lines.push(l);
    for (const w of waiters.splice(0)) w();
  });
  const exited = new Promise<void>((resolve) => proc.on('exit', () => resolve()));
  const nextLine = async (): Promise<string> => {
    while (lines.length === 0) {
      const gone = await Promise.race([new Promise<boolean>((r) => waiters.push(() => r(false))), exited.then(() => true)]);
      if (gone && lines.length === 0) throw new Error(`linkem (${nsA} <-> ${nsB}) exited: ${stderr}`);
    }
    return lines.shift()!;
  };
  const ready = await nextLine();
  if (ready !== 'ready') throw new Error(`linkem did not start: ${ready} ${stderr}`);
  return {
    async command(c) {
      proc.stdin!.write(`${c}\n`);
      const answer = await nextLine();
      if (answer.startsWith('error')) throw new Error(`linkem: ${answer}`);
      return answer;
    },
    close() {
      proc.stdin!.end();
    },
  };
}

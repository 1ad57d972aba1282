// Child processes for the interop tier: every command has a timeout, and on timeout we kill the process
// group we created (never anything by name).
import { spawn, type ChildProcess, type SpawnOptions } from 'node:child_process';
import * as net from 'node:net';

export interface CmdResult {
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
  timedOut: boolean;
  ms: number;
}

export interface CmdOptions {
  timeoutMs: number;
  cwd?: string;
  env?: NodeJS.ProcessEnv;
  /** Called with each stdout chunk (for progress logs). */
  onStdout?: (chunk: string) => void;
}

/** Kills the process group led by child (spawned with detached: true), then the child itself. */
export function killTree(child: ChildProcess, signal: NodeJS.Signals = 'SIGKILL'): void {
  if (child.pid === undefined || child.exitCode !== null || child.signalCode !== null) return;
  try {
    process.kill(-child.pid, signal);
  } catch {
    try {
      child.kill(signal);
    } catch {
      /* already gone */
    }
  }
}

/** Runs a command to completion (or timeout) and collects its output. Never rejects. */
export function runCmd(cmd: string, args: string[], opts: CmdOptions): Promise<CmdResult> {
  const t0 = Date.now();
  return new Promise((resolve) => {
    const spawnOpts: SpawnOptions = {
      cwd: opts.cwd,
      env: opts.env ?? process.env,
      stdio: ['ignore', 'pipe', 'pipe'],
      detached: true,
    };
    let child: ChildProcess;
    try {
      child = spawn(cmd, args, spawnOpts);
    } catch (e) {
      resolve({ code: null, signal: null, stdout: '', stderr: String(e), timedOut: false, ms: 0 });
      return;
    }
    let stdout = '';
    let stderr = '';
    let timedOut = false;
    child.stdout!.setEncoding('utf8').on('data', (d: string) => {
      stdout += d;
      opts.onStdout?.(d);
    });
    child.stderr!.setEncoding('utf8').on('data', (d: string) => (stderr += d));
    const timer = setTimeout(() => {
      timedOut = true;
      killTree(child);
    }, opts.timeoutMs);
    child.on('error', (e) => {
      stderr += String(e);
    });
    child.on('close', (code, signal) => {
      clearTimeout(timer);
      resolve({ code, signal, stdout, stderr, timedOut, ms: Date.now() - t0 });
    });
  });
}

/** A long-running child (probe, tcpdump) we wait on for a line and later for its exit. */
export class Background {
  readonly child: ChildProcess;
  stdout = '';
  stderr = '';
  readonly exited: Promise<CmdResult>;
  private readonly t0 = Date.now();
  private waiters: Array<() => void> = [];
  private timer: NodeJS.Timeout;
  private timedOut = false;

  constructor(cmd: string, args: string[], opts: CmdOptions) {
    this.child = spawn(cmd, args, {
      cwd: opts.cwd,
      env: opts.env ?? process.env,
      stdio: ['ignore', 'pipe', 'pipe'],
      detached: true,
    });
    this.child.stdout!.setEncoding('utf8').on('data', (d: string) => {
      this.stdout += d;
      this.wake();
    });
    this.child.stderr!.setEncoding('utf8').on('data', (d: string) => {
      this.stderr += d;
      this.wake();
    });
    this.timer = setTimeout(() => {
      this.timedOut = true;
      killTree(this.child);
    }, opts.timeoutMs);
    this.exited = new Promise((resolve) => {
      this.child.on('error', (e) => {
        this.stderr += String(e);
      });
      this.child.on('close', (code, signal) => {
        clearTimeout(this.timer);
        this.wake();
        resolve({
          code,
          signal,
          stdout: this.stdout,
          stderr: this.stderr,
          timedOut: this.timedOut,
          ms: Date.now() - this.t0,
        });
      });
    });
  }

  private wake(): void {
    const w = this.waiters;
    this.waiters = [];
    for (const f of w) f();
  }

  private get done(): boolean {
    return this.child.exitCode !== null || this.child.signalCode !== null;
  }

  /** Resolves when re matches stdout or stderr; rejects on exit or timeout. */
  waitFor(re: RegExp, timeoutMs: number, what: string): Promise<void> {
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`timeout (${timeoutMs} ms) waiting for ${what}\n${this.tail()}`)), timeoutMs);
      const check = (): void => {
        if (re.test(this.stdout) || re.test(this.stderr)) {
          clearTimeout(timer);
          resolve();
        } else if (this.done) {
          clearTimeout(timer);
          reject(new Error(`process exited before ${what}\n${this.tail()}`));
        } else {
          this.waiters.push(check);
        }
      };
      check();
    });
  }

  /** Sends a signal to the process group and waits for the exit (SIGKILL after graceMs). */
  async stop(signal: NodeJS.Signals = 'SIGTERM', graceMs = 5000): Promise<CmdResult> {
    if (!this.done) {
      killTree(this.child, signal);
      const t = setTimeout(() => killTree(this.child, 'SIGKILL'), graceMs);
      const r = await this.exited;
      clearTimeout(t);
      return r;
    }
    return this.exited;
  }

  tail(n = 2000): string {
    return `--- stdout (tail)\n${this.stdout.slice(-n)}\n--- stderr (tail)\n${this.stderr.slice(-n)}`;
  }
}

/** True when an executable of that name is on PATH. */
export async function haveCommand(name: string): Promise<boolean> {
  const r = await runCmd('bash', ['-c', `command -v "$1" >/dev/null 2>&1`, 'x', name], { timeoutMs: 5000 });
  return r.code === 0;
}

/** A TCP port that is free on 127.0.0.1 right now (the kernel picks it). */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.once('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const port = (srv.address() as net.AddressInfo).port;
      srv.close(() => resolve(port));
    });
  });
}

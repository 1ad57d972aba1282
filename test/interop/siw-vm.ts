// The siw-vm helper for the interop tier: a qemu guest running Linux soft-iWARP (siw) and rdma-core's tools
// (the repo's test/interop/siw-vm/, README.md there). Builds the guest if needed, boots it once per
// test run, runs guest commands through the tools' `run`, reloads siw with other compile-time constants,
// and stops the guest. Every step has a timeout.
//
// NETDIRECT_INTEROP=1 demands the tier (missing prerequisites fail the run), NETDIRECT_INTEROP=0 skips it,
// unset runs it when the machine can (root, qemu, tcpdump, tshark, a C++ compiler, the siw-vm tools).
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { haveCommand, runCmd, type CmdResult } from './proc';

export const repoRoot = path.resolve(__dirname, '..', '..');

/** Host address the guest sees the host's 127.0.0.1 as (slirp gateway). */
export const GUEST_HOST_IP = '10.0.2.2';
/** The guest's own address (siw0 on eth0). */
export const GUEST_IP = '10.0.2.15';

/**
 * The host port that reaches guest TCP port `guestPort` (qemu forwards 127.0.0.1:<port + SIW_VM_PORT_OFFSET>,
 * test/interop/siw-vm/common.sh; default offset 10000). Tests must use it, not a fixed number: a guest booted
 * with another offset would otherwise leave the host's connection refused, or reach someone else's guest.
 */
export function hostPortFor(guestPort: number): number {
  return guestPort + Number(process.env.SIW_VM_PORT_OFFSET ?? 10000);
}

/** The siw-vm tools: the repo's own test/interop/siw-vm/ (undefined if that copy is incomplete). */
export function siwVmTools(): string | undefined {
  const dir = path.join(repoRoot, 'test', 'interop', 'siw-vm');
  return fs.existsSync(path.join(dir, 'run')) && fs.existsSync(path.join(dir, 'start')) ? dir : undefined;
}

export type InteropMode = 'required' | 'auto' | 'off';

export function interopMode(): InteropMode {
  const v = (process.env.NETDIRECT_INTEROP ?? '').trim().toLowerCase();
  if (v === '1' || v === 'true' || v === 'yes' || v === 'required') return 'required';
  if (v === '0' || v === 'false' || v === 'no' || v === 'off') return 'off';
  return 'auto';
}

/** What this machine lacks for the tier; empty when it can run it. */
export async function missingPrerequisites(): Promise<string[]> {
  const missing: string[] = [];
  if (os.platform() !== 'linux') missing.push(`Linux host (this is ${os.platform()})`);
  if (typeof process.getuid === 'function' && process.getuid() !== 0) missing.push('root (siw-vm build/start and tcpdump)');
  if (!siwVmTools()) missing.push('test/interop/siw-vm (run and start)');
  for (const cmd of ['qemu-system-x86_64', 'tcpdump', 'tshark', process.env.CXX || 'g++']) {
    if (!(await haveCommand(cmd))) missing.push(cmd);
  }
  return missing;
}

/** Guest kernel log lines that are known to be harmless (test/interop/siw-vm/README.md, Gotchas). */
const HARMLESS_KLOG = [
  /speed is unknown, defaulting to/,
  /iwpm_register_pid: Unable to send a nlmsg/,
  /module verification failed/,
  /loading out-of-tree module taints kernel/,
  /SoftiWARP attached/,
];

export interface GuestResult {
  code: number;
  output: string;
}

export type SiwParams = 'pristine' | Record<string, string | number | boolean>;

export class SiwVm {
  private startedByUs = false;
  private siwState = 'unknown';
  bootMs = 0;
  buildMs = 0;

  constructor(
    readonly tools: string,
    readonly log: (msg: string) => void = () => {},
  ) {}

  private env(extra: Record<string, string> = {}): NodeJS.ProcessEnv {
    return { ...process.env, ...extra };
  }

  private async tool(name: string, args: string[], timeoutMs: number): Promise<CmdResult> {
    return runCmd('bash', [path.join(this.tools, name), ...args], {
      timeoutMs,
      env: this.env({ SIW_VM_RUN_TIMEOUT: String(Math.ceil(timeoutMs / 1000)) }),
    });
  }

  /** True when the guest's qemu (of this cache) is running. */
  async isRunning(): Promise<boolean> {
    const r = await runCmd(
      'bash',
      ['-c', '. "$1/common.sh" >/dev/null && siw_vm_pid >/dev/null', 'x', this.tools],
      { timeoutMs: 10_000 },
    );
    return r.code === 0;
  }

  /** Builds the guest (kernel, initramfs, siw.ko) unless the cache has it; returns at once when cached. */
  async build(timeoutMs = 20 * 60_000): Promise<void> {
    const t0 = Date.now();
    const r = await this.tool('build', [], timeoutMs);
    this.buildMs = Date.now() - t0;
    if (r.code !== 0) {
      throw new Error(`siw-vm build failed (${r.timedOut ? 'timeout' : `exit ${r.code}`}):\n${(r.stdout + r.stderr).slice(-4000)}`);
    }
    this.log(`siw-vm build: ${(this.buildMs / 1000).toFixed(1)} s`);
  }

  /** Boots the guest unless it is already running (then it is reused and left running at stop()). */
  async start(timeoutMs = 5 * 60_000): Promise<void> {
    if (await this.isRunning()) {
      this.log('siw-vm: reusing the running guest');
      this.startedByUs = false;
      return;
    }
    const t0 = Date.now();
    const r = await runCmd('bash', [path.join(this.tools, 'start')], {
      timeoutMs,
      env: this.env({ SIW_VM_BOOT_TIMEOUT: String(Math.ceil(timeoutMs / 1000)) }),
    });
    this.bootMs = Date.now() - t0;
    if (r.code !== 0) {
      throw new Error(`siw-vm start failed (${r.timedOut ? 'timeout' : `exit ${r.code}`}):\n${(r.stdout + r.stderr).slice(-4000)}`);
    }
    this.startedByUs = true;
    this.log(`siw-vm: guest up in ${(this.bootMs / 1000).toFixed(1)} s`);
  }

  /** Stops the guest if this helper booted it. */
  async stop(timeoutMs = 60_000): Promise<void> {
    if (!this.startedByUs) return;
    const r = await this.tool('stop', [], timeoutMs);
    if (r.code !== 0) this.log(`siw-vm stop: exit ${r.code}: ${(r.stdout + r.stderr).trim()}`);
    this.startedByUs = false;
  }

  get ownsGuest(): boolean {
    return this.startedByUs;
  }

  /** Runs a bash command line in the guest; output is stdout+stderr, byte-exact. */
  async run(cmd: string, timeoutMs = 60_000): Promise<GuestResult> {
    const r = await this.tool('run', [cmd], timeoutMs);
    if (r.timedOut) throw new Error(`guest command timed out after ${timeoutMs} ms: ${cmd}\n${r.stdout.slice(-2000)}`);
    if (r.code === 255 && /run: (guest not running|no exit status)/.test(r.stderr)) {
      throw new Error(`guest unreachable running: ${cmd}\n${r.stderr}`);
    }
    return { code: r.code ?? -1, output: r.stdout };
  }

  /** Runs a guest command and throws unless it exits 0. */
  async check(cmd: string, timeoutMs = 60_000): Promise<string> {
    const r = await this.run(cmd, timeoutMs);
    if (r.code !== 0) throw new Error(`guest command failed (exit ${r.code}): ${cmd}\n${r.output}`);
    return r.output;
  }

  /** Starts a detached guest command; its output goes to /tmp/NAME.log, followed by "NAME-exit=<status>". */
  async background(name: string, cmd: string): Promise<void> {
    const inner = `${cmd}; echo ${name}-exit=$?`.replace(/'/g, `'\\''`);
    await this.check(`rm -f /tmp/${name}.log; bgrun ${name} bash -c '${inner}' >/dev/null`);
  }

  /** Waits (in the guest, polling the file) until the background job NAME has exited; returns its log. */
  async waitBackground(name: string, timeoutMs = 30_000): Promise<{ exit: number | null; log: string }> {
    const tries = Math.ceil(timeoutMs / 100);
    const out = await this.run(
      `for i in $(seq ${tries}); do grep -q '^${name}-exit=' /tmp/${name}.log 2>/dev/null && break; sleep 0.1; done; cat /tmp/${name}.log`,
      timeoutMs + 15_000,
    );
    const m = out.output.match(new RegExp(`^${name}-exit=(\\d+)`, 'm'));
    return { exit: m ? Number(m[1]) : null, log: out.output };
  }

  /** Kills a background job started with background() if it is still running. */
  async killBackground(name: string): Promise<void> {
    await this.run(`[ -f /tmp/${name}.pid ] && kill -9 $(cat /tmp/${name}.pid) 2>/dev/null; true`, 15_000);
  }

  /** Waits until a TCP port listens in the guest. */
  async waitListening(port: number, timeoutMs = 15_000): Promise<void> {
    const tries = Math.ceil(timeoutMs / 100);
    const r = await this.run(
      `for i in $(seq ${tries}); do netstat -tln | grep -q ':${port} ' && exit 0; sleep 0.1; done; exit 1`,
      timeoutMs + 15_000,
    );
    if (r.code !== 0) throw new Error(`nothing listens on guest port ${port} after ${timeoutMs} ms`);
  }

  /** Kills every rping left in the guest (by pid, guest side). */
  async killGuestRping(): Promise<void> {
    await this.run('for p in $(pidof rping); do kill -9 $p; done; true', 15_000);
  }

  /**
   * Reloads siw: 'pristine' (the unmodified module, the boot default) or the build whose compile-time
   * constants are module parameters, with the given values. No-op when already in that state.
   */
  async reloadSiw(params: SiwParams): Promise<void> {
    const state =
      params === 'pristine'
        ? 'pristine'
        : 'params ' +
          Object.entries(params)
            .map(([k, v]) => `${k}=${typeof v === 'boolean' ? (v ? 1 : 0) : v}`)
            .join(' ');
    if (this.siwState === 'unknown') {
      // Only the parameter build exposes /sys/module/siw/parameters (test/interop/siw-vm/README.md).
      const r = await this.run('test -d /sys/module/siw/parameters', 15_000);
      if (r.code !== 0) this.siwState = 'pristine';
    }
    if (state === this.siwState) return;
    await this.killGuestRping();
    await this.check(`siw-reload ${state}`, 60_000);
    this.siwState = state;
    this.log(`siw: ${state}`);
  }

  /** Clears the guest kernel log (busybox dmesg -c). */
  async clearKernelLog(): Promise<void> {
    await this.check('dmesg -c >/dev/null', 15_000);
  }

  /** siw / iw_cm / rdma_cm kernel messages since the last clear that are not known to be harmless. */
  async kernelProblems(): Promise<string[]> {
    return kernelProblems(await this.check('dmesg', 15_000));
  }
}

/** Guest shell snippet: kill leftover rping processes and clear the kernel log. */
export const GUEST_RESET = 'for p in $(pidof rping); do kill -9 $p; done; dmesg -c >/dev/null';

/** Guest shell snippet: print a marker line, then the kernel log (split with splitKernelLog). */
export const GUEST_DMESG = 'echo @@DMESG@@; dmesg';

/** Splits guest output produced with GUEST_DMESG into what came before and the kernel log. */
export function splitKernelLog(output: string): { before: string; klog: string } {
  const i = output.indexOf('@@DMESG@@\n');
  if (i < 0) return { before: output, klog: '' };
  return { before: output.slice(0, i), klog: output.slice(i + '@@DMESG@@\n'.length) };
}

/** siw / iw_cm / rdma_cm kernel messages that are not known to be harmless. */
export function kernelProblems(klog: string): string[] {
  return klog
    .split('\n')
    .filter((l) => /siw|iw_cm|rdma|iwarp|mpa|terminate|crc/i.test(l) && !HARMLESS_KLOG.some((re) => re.test(l)));
}

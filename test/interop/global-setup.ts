// Global setup of the interop tier: decides whether the tier runs, builds the siw-vm guest if needed and
// boots it once for all interop test files; teardown stops it (only if this run booted it).
import type { TestProject } from 'vitest/node';
import { interopMode, missingPrerequisites, siwVmTools, SiwVm } from './siw-vm';

export interface SiwVmContext {
  ready: boolean;
  reason: string;
  tools: string;
  buildMs: number;
  bootMs: number;
}

declare module 'vitest' {
  export interface ProvidedContext {
    siwVm: SiwVmContext;
  }
}

const log = (m: string): void => {
  process.stderr.write(`[interop] ${m}\n`);
};

export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  const mode = interopMode();
  const skip = (reason: string): (() => Promise<void>) => {
    log(`SKIPPING the siw interop tier: ${reason}`);
    project.provide('siwVm', { ready: false, reason, tools: '', buildMs: 0, bootMs: 0 });
    return async () => {};
  };
  if (mode === 'off') return skip('NETDIRECT_INTEROP=0');
  const missing = await missingPrerequisites();
  if (missing.length > 0) {
    const reason = `missing: ${missing.join(', ')}`;
    if (mode === 'required') throw new Error(`NETDIRECT_INTEROP=1 but the siw interop tier cannot run here (${reason})`);
    return skip(`${reason} (set NETDIRECT_INTEROP=1 to make this an error)`);
  }
  const vm = new SiwVm(siwVmTools()!, log);
  await vm.build();
  await vm.start();
  project.provide('siwVm', { ready: true, reason: '', tools: vm.tools, buildMs: vm.buildMs, bootMs: vm.bootMs });
  return async () => {
    await vm.stop();
  };
}

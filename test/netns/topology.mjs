// The namespace topology that test/job-netns.test.ts and scripts/bench-netns.mjs share (docs/job.md, "The
// namespace tier"): "hosts" that are Linux network namespaces, joined by veth pairs to a bridge in the root
// namespace, and MPICH's mpiexec (Hydra) launching into them through test/netns/nsexec. Plain JavaScript so that
// the benchmark script runs under node without a build step; the test imports it as it is.
import { execFileSync, spawnSync } from 'node:child_process';
import * as path from 'node:path';
import { fileURLToPath } from 'node:url';

/** Hydra's launcher for the namespaces: given as `-launcher ssh -launcher-exec <nsexec>`. */
export const nsexec = path.join(path.dirname(fileURLToPath(import.meta.url)), 'nsexec');

// System tools run without the sanitizer tier's preloaded ASan runtime: they are not ours, and ASan finds faults of
// their own (iproute2's `ip route show` trips its strncpy-overlap check).
const toolEnv = Object.fromEntries(Object.entries(process.env).filter(([k]) => k !== 'LD_PRELOAD'));

/** Runs a system tool; its stdout, or throws with its stderr. */
export function run(cmd, args) {
  return execFileSync(cmd, args, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'], env: toolEnv });
}

/** Runs a system tool; null when it succeeded, else the first line of what it said. */
export function tryRun(cmd, args) {
  try {
    run(cmd, args);
    return null;
  } catch (err) {
    return String(err?.stderr || err?.message || err).trim().split('\n')[0];
  }
}

/** Runs a system tool; its stdout, or null when it failed. */
export function tryRunOut(cmd, args) {
  try {
    return run(cmd, args);
  } catch {
    return null;
  }
}

/** MPICH's Hydra mpiexec on PATH (`mpiexec.hydra` or `mpiexec`), or undefined. */
export function findHydra() {
  return ['mpiexec.hydra', 'mpiexec'].find((c) => /HYDRA/.test(spawnSync(c, ['--version'], { encoding: 'utf8' }).stdout ?? ''));
}

/** Why this machine cannot build the topology (root, namespaces, a bridge, Hydra), or null. */
export function netnsUnavailable(tag) {
  if (process.platform !== 'linux') return 'network namespaces are Linux-only';
  if (process.getuid?.() !== 0) return 'needs root (creates network namespaces, veth pairs and a bridge)';
  if (findHydra() === undefined) return "MPICH's mpiexec (Hydra) not found (apt-get install mpich)";
  const probe = `ndjprobe${tag}`;
  const failed = tryRun('ip', ['netns', 'add', probe]);
  if (failed !== null) return `cannot create a network namespace (ip netns add: ${failed})`;
  tryRun('ip', ['netns', 'del', probe]);
  const br = `ndjpb${tag}`;
  const noBridge = tryRun('ip', ['link', 'add', br, 'type', 'bridge']);
  if (noBridge !== null) return `cannot create a bridge (ip link add type bridge: ${noBridge})`;
  tryRun('ip', ['link', 'del', br]);
  return null;
}

/** A /24 in 10.200.0.0-10.249.255.0 that no interface or route here uses (nor one in `taken`), picked from `seed`. */
export function freeSubnet(taken, seed = process.pid) {
  const inUse = run('ip', ['-4', '-o', 'addr', 'show']) + run('ip', ['-4', 'route', 'show', 'table', 'all']);
  for (let k = 0; k < 12800; k++) {
    const x = (seed + k * 7919) % 12800;
    const prefix = `10.${200 + Math.floor(x / 256)}.${x % 256}`;
    if (!inUse.includes(`${prefix}.`) && !taken.includes(prefix)) return prefix;
  }
  throw new Error('no free 10.x.y.0/24 for the namespace topology');
}

/**
 * What one run made (namespaces, bridges, and anything with a close(), such as test/netfault/linkem.ts's links),
 * so that teardown() removes all of it, also after a failure. Names start with `ndj<tag>`.
 */
export class NetnsLab {
  constructor(tag) {
    this.tag = tag;
    this.namespaces = [];
    this.bridges = [];
    this.links = [];
  }

  addNamespace(name) {
    run('ip', ['netns', 'add', name]);
    this.namespaces.push(name);
    run('ip', ['-n', name, 'link', 'set', 'lo', 'up']);
  }

  /** A bridge in the root namespace holding `prefix`.126/25 (the first half of the /24 is the bridged segment). */
  addBridge(name, prefix) {
    run('ip', ['link', 'add', name, 'type', 'bridge']);
    this.bridges.push(name);
    run('ip', ['addr', 'add', `${prefix}.126/25`, 'dev', name]);
    run('ip', ['link', 'set', name, 'up']);
    return `${prefix}.126`;
  }

  /** A veth pair from the bridge into namespace `ns` (device nd0 there, addressed `address`/25). */
  plugIn(bridge, rootEnd, ns, address) {
    run('ip', ['link', 'add', rootEnd, 'type', 'veth', 'peer', 'name', 'nd0', 'netns', ns]);
    run('ip', ['link', 'set', rootEnd, 'master', bridge, 'up']);
    run('ip', ['-n', ns, 'addr', 'add', `${address}/25`, 'dev', 'nd0']);
    run('ip', ['-n', ns, 'link', 'set', 'nd0', 'up']);
  }

  /**
   * `count` hosts h0..h(count-1) on one bridge, host i at prefix.(1+i). Returns { hosts (namespace names, also the
   * host names given to mpiexec), addresses, rootAddress (the bridge's: mpiexec's control port listens there with
   * -localhost), links: [], describe }.
   */
  bridgedHosts(name, prefix, count) {
    const bridge = `ndjb${this.tag}${name}`;
    const rootAddress = this.addBridge(bridge, prefix);
    const hosts = [];
    const addresses = [];
    for (let i = 0; i < count; i++) {
      const ns = `ndj${this.tag}${name}h${i}`;
      this.addNamespace(ns);
      this.plugIn(bridge, `ndj${this.tag}${name}v${i}`, ns, `${prefix}.${1 + i}`);
      hosts.push(ns);
      addresses.push(`${prefix}.${1 + i}`);
    }
    return { hosts, addresses, rootAddress, links: [], describe: `${count} namespaces on bridge ${bridge} (${prefix}.0/25)` };
  }

  /** Ends what still runs in our namespaces, then removes them and the bridges (their veth ends go with them). */
  teardown() {
    for (const l of this.links.splice(0)) l.close();
    for (const pid of pidsIn(this.namespaces)) {
      try {
        process.kill(Number(pid), 'SIGKILL');
      } catch {}
    }
    for (const ns of this.namespaces.splice(0)) tryRun('ip', ['netns', 'del', ns]);
    for (const br of this.bridges.splice(0)) tryRun('ip', ['link', 'del', br]);
  }
}

/** Process ids running in these namespaces. */
export function pidsIn(namespaces) {
  return namespaces.flatMap((ns) => (tryRunOut('ip', ['netns', 'pids', ns]) ?? '').split(/\s+/).filter(Boolean));
}

/** mpiexec's arguments for one rank per host of `t` (host file `hostfile`, written here), launched through nsexec. */
export function hydraArgs(t, hostfile, controlAddress = t.rootAddress) {
  return ['-f', hostfile, '-localhost', controlAddress, '-launcher', 'ssh', '-launcher-exec', nsexec];
}

/** The host file for `t`: one slot per namespace, so that Hydra puts rank i on host i. */
export function hostfileText(t) {
  return t.hosts.map((h) => `${h}:1\n`).join('');
}

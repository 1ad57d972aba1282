// What `netdirect doctor` reads and reports: the facts gatherDoctorFacts() collects (plain JSON, the shape
// `netdirect doctor --facts` prints and test/fixtures/doctor/*.json hold) and the report diagnose() makes of them.

import { type ProviderInfo } from '../discovery.js';

export type CheckStatus = 'ok' | 'warn' | 'fail' | 'skip';

export interface DoctorCheck {
  id: string;
  title: string;
  status: CheckStatus;
  detail: string;
  fix?: string;
}

export interface DoctorReport {
  platform: string;
  checks: DoctorCheck[];
  summary: { ok: number; warn: number; fail: number; skip: number };
}

/** The keys doctor() accepts (strict option checking: validate.ts checkOptions). */
export const DOCTOR_KEYS = ['peers', 'selfTest', 'selfTestTimeoutMs', 'powershell', 'powershellTimeoutMs', 'platform'] as const;

export interface DoctorOptions {
  /** Hosts this machine will connect to: a blocked NetworkDirectAcrossIPSubnets fails when one is on another subnet. */
  peers?: string[];
  /** Run the loopback RDMA Write self-test (platforms other than Windows). Default true. */
  selfTest?: boolean;
  /** Bound of the self-test, in milliseconds. Default 5000. */
  selfTestTimeoutMs?: number;
  /** The PowerShell executable (Windows). Default: %SystemRoot%\System32\WindowsPowerShell\v1.0\powershell.exe. */
  powershell?: string;
  /** Bound of the PowerShell run, in milliseconds. Default 60000. */
  powershellTimeoutMs?: number;
  /** @internal Gather as if on this platform (tests: the Windows path on Linux). */
  platform?: string;
}

export type SelfTestFact =
  | { ok: true; bytes: number; ms: number; port: number; /** the completion mode 'auto' chose (absent in older fact files) */ completion?: string }
  | { ok: false; error: string; code?: string };

export interface RdmaDeviceFact {
  name: string;
  driver?: string;
  nodeType?: string;
  parent?: string;
  /** Port 1's state (ports/1/state, e.g. "4: ACTIVE") and link layer ("InfiniBand" | "Ethernet"). */
  portState?: string;
  linkLayer?: string;
}

export interface PeerFact {
  host: string;
  address?: string;
  error?: string;
}

export interface LocalNetworkFact {
  interface: string;
  address: string;
  cidr: string;
  internal: boolean;
}

/** What gatherDoctorFacts() found; plain JSON. Fields absent on a platform are not gathered there. */
export interface DoctorFacts {
  platform: string;
  arch?: string;
  node?: string;
  addonVersion?: string;
  providers: ProviderInfo[] | { error: string };
  /** Windows: each system provider's DLL path → whether the file exists. */
  providerFiles?: Record<string, boolean>;
  env: { NETDIRECT_PROVIDER?: string; NETDIRECT_SOFT_CRC?: string };
  /** Windows: the JSON object printed by POWERSHELL_SCRIPT (a key per cmdlet, {error} where one failed), or why it could not run. */
  powershell?: Record<string, unknown>;
  peers?: PeerFact[];
  localNetworks?: LocalNetworkFact[];
  /** Other platforms: */
  addresses?: string[] | { error: string };
  hardwareCrc32c?: boolean;
  /** 'avx512-vpclmulqdq' | 'pclmulqdq' | 'sse4.2' | 'table' (absent from older addons and fact files). */
  crc32cImplementation?: string;
  selfTest?: SelfTestFact;
  rdmaDevices?: RdmaDeviceFact[] | { error: string };
  /**
   * The verbs provider (docs/verbs.md): built (compiled into this addon: rdma-core's headers were there), listed
   * (rdma-core loads and reports a device), the addresses it serves, and why it is not listed (the provider's own
   * words: rdma-core could not be loaded, or it reports no device).
   */
  verbsProvider?: { built?: boolean; listed: boolean; addresses: string[]; error?: string };
  kernelModules?: { siw: boolean; rdma_rxe: boolean };
}

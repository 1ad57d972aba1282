// When a test fails by timing out, say what it was waiting for: the requests still pending on every adapter the
// helpers opened (test/helpers.ts openLocal) and the calls still pending on every peer process (startPeer), with
// the peer's last stderr. A hang then leaves evidence in the CI log instead of only "Test timed out".
import { afterEach } from 'vitest';
import type { Adapter } from '../lib/index';

interface Tracked {
  label: string;
  describe(): string;
}

const live = new Set<Tracked>();

/** Tracks `item` until `untrack()` (or for the rest of the file). */
export function track(label: string, describe: () => string): () => void {
  const t: Tracked = { label, describe };
  live.add(t);
  return () => live.delete(t);
}

/** What an adapter is still waiting for: its state, its counters and its pending requests by operation. */
export function describeAdapter(adapter: Adapter): string {
  const a = adapter as any;
  const state: string = a._ctx?.state;
  if (state === 'closed') return 'closed';
  const counts = new Map<string, number>();
  for (const e of a._ctx?.requests?.pending?.() ?? []) counts.set(e.operation, (counts.get(e.operation) ?? 0) + 1);
  let stats = '';
  try {
    stats = JSON.stringify(a._native.stats());
  } catch (err) {
    stats = `(stats failed: ${(err as Error).message})`;
  }
  const pending = [...counts].map(([op, n]) => `${op} x${n}`).join(', ') || 'none';
  return `${state}, ${a._native?.completion} mode; native ${stats}; pending requests: ${pending}`;
}

afterEach((ctx) => {
  const errors = ctx.task.result?.errors ?? [];
  if (!errors.some((e) => /timed out/i.test(String(e?.message)))) return;
  const lines = [...live].map((t) => {
    let what: string;
    try {
      what = t.describe();
    } catch (err) {
      what = `(could not describe: ${(err as Error).message})`;
    }
    return what === 'closed' ? '' : `  ${t.label}: ${what}`;
  }).filter(Boolean);
  process.stderr.write(`hang report for "${ctx.task.name}" (${new Date().toISOString()}):\n${lines.join('\n') || '  nothing tracked'}\n`);
});

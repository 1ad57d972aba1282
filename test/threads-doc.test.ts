// docs/threads.md against the code, statically: every thread it names is named so in binding/, every lock it lists
// (Class::member) is a member of that class there, and every `*_locked` function begins by asserting its lock
// (CheckedMutex::assert_held: "_locked" always means the caller holds it). A lock renamed or removed in the code,
// or a thread added to the doc only, fails here.
import { readdirSync, readFileSync, statSync } from 'node:fs';
import * as path from 'node:path';
import { describe, expect, it } from 'vitest';

const ROOT = path.resolve(__dirname, '..');
const BINDING = path.join(ROOT, 'binding');
const DOC = readFileSync(path.join(ROOT, 'docs', 'threads.md'), 'utf8');

function filesUnder(dir: string): string[] {
  const out: string[] = [];
  for (const name of readdirSync(dir)) {
    const full = path.join(dir, name);
    if (statSync(full).isDirectory()) out.push(...filesUnder(full));
    else if (/\.(cc|h)$/.test(name)) out.push(full);
  }
  return out;
}

const SOURCES = new Map(filesUnder(BINDING).map((f) => [path.relative(ROOT, f), readFileSync(f, 'utf8')]));

describe('docs/threads.md names what the code has', () => {
  it('every thread it names (`nd-…`) is given that name in binding/', () => {
    const names = [...new Set([...DOC.matchAll(/`(nd-[a-z]+)`/g)].map((m) => m[1]))];
    expect(names).toEqual(expect.arrayContaining(['nd-poller', 'nd-engine', 'nd-verbs']));
    const all = [...SOURCES.values()].join('\n');
    for (const name of names) expect(all.includes(`"${name}"`), `no thread is named "${name}" in binding/`).toBe(true);
  });

  it('every lock it lists (Class::member) is a member of that class', () => {
    const locks = [...new Set([...DOC.matchAll(/\b([A-Z][A-Za-z]*)::([a-z_]*mu_?)\b/g)].map((m) => `${m[1]}::${m[2]}`))];
    expect(locks.length).toBeGreaterThan(10);
    const missing: string[] = [];
    for (const lock of locks) {
      const [cls, member] = lock.split('::');
      // The class's declaration (its body up to the closing brace at the start of a line) declares the member.
      const declared = [...SOURCES.values()].some((src) => {
        for (const m of src.matchAll(new RegExp(`^(class|struct) ${cls}\\b[^;{]*\\{`, 'gm'))) {
          const body = src.slice(m.index!, src.indexOf('\n};', m.index!));
          if (new RegExp(`[\\s>]${member}\\s*(;|\\{|=)`).test(body)) return true;
        }
        return false;
      });
      if (!declared) missing.push(lock);
    }
    expect(missing, 'listed in docs/threads.md, not declared in binding/').toEqual([]);
  });

  it('covers both providers', () => {
    expect(DOC).toMatch(/binding\/soft\//);
    expect(DOC).toMatch(/binding\/verbs\//);
    expect(DOC).toMatch(/VerbsAdapter::progress_mu_/);
  });
});

describe('every *_locked function asserts its lock', () => {
  // binding/nd/ is the exception: the ND v2 ABI and its off-Windows compat layer include nothing of ours
  // (docs/architecture.md), so the compat port's two *_locked helpers guard a std::mutex (nd/nd_compat.h Port::mu).
  it('begins with assert_held()', () => {
    const bad: string[] = [];
    for (const [file, src] of SOURCES) {
      if (file.startsWith(path.join('binding', 'nd') + path.sep)) continue;
      // A definition starts its line (a member defined in its class: indented two spaces), with its return type, and
      // ends its signature with '{' (a declaration ends with ';'; a call sits inside a statement, indented deeper).
      for (const m of src.matchAll(/^ {0,2}[A-Za-z][\w:<>*&, ]*?\b(\w+_locked)\(([^;{}]*?)\)\s*(const\s*)?(override\s*)?\{/gm)) {
        if (/^\s*(return|if|while|for|else)\b/.test(m[0])) continue;
        const body = src.slice(m.index! + m[0].length, m.index! + m[0].length + 200);
        const first = body.trim().split('\n')[0];
        if (!/assert_held\(\)/.test(first)) bad.push(`${file}: ${m[1]} begins with "${first.trim()}"`);
      }
    }
    expect(bad).toEqual([]);
  });
});

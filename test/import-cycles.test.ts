// lib/ must have no runtime import cycle: a module read while another is still loading sees undefined exports
// (CommonJS), so the class modules share helpers through leaf modules (records.ts, validate.ts, errors.ts)
// instead of importing each other for them. `import type` and imports of types only are erased by tsc and
// do not count. A static scan of the import lines, no dependency.
import { readdirSync, readFileSync } from 'node:fs';
import * as path from 'node:path';
import { describe, expect, it } from 'vitest';

const LIB = path.resolve(__dirname, '..', 'lib');

/** Relative modules `source` imports at runtime (resolved to .ts paths relative to its directory). */
function runtimeImports(source: string): string[] {
  const out: string[] = [];
  // import x from './a.js'; import { a, type B } from './a.js'; import * as a from ...; export { a } from ...;
  // export * from ...; import './a.js'. Multi-line braces are matched too; comments are stripped first.
  const code = source.replace(/\/\*[\s\S]*?\*\//g, '').replace(/^\s*\/\/.*$/gm, '');
  const re = /^\s*(import|export)\s+(?:(type)\s+)?(?:([\s\S]*?)\s+from\s+)?['"](\.{1,2}\/[^'"]+)['"]/gm;
  for (const m of code.matchAll(re)) {
    const [, , typeOnly, clause, spec] = m;
    if (typeOnly) continue;
    if (clause !== undefined) {
      const braces = /^\{([\s\S]*)\}$/.exec(clause.trim());
      if (braces) {
        const names = braces[1].split(',').map((s) => s.trim()).filter(Boolean);
        // tsc drops an import whose every name is a type (no verbatimModuleSyntax); an export list it keeps.
        if (m[1] === 'import' && names.length > 0 && names.every((n) => n.startsWith('type '))) continue;
      }
    }
    out.push(spec.replace(/\.(m?js|ts)$/, '') + '.ts');
  }
  return out;
}

function libFiles(dir: string, rel = ''): string[] {
  const files: string[] = [];
  for (const e of readdirSync(path.join(dir, rel), { withFileTypes: true })) {
    const r = rel ? `${rel}/${e.name}` : e.name;
    if (e.isDirectory()) files.push(...libFiles(dir, r));
    else if (e.name.endsWith('.ts') && !e.name.endsWith('.d.ts')) files.push(r);
  }
  return files;
}

/** One cycle per strongly connected component of more than one module (or a module importing itself). */
function findCycles(graph: Map<string, string[]>): string[][] {
  const cycles: string[][] = [];
  const state = new Map<string, 'active' | 'done'>();
  const stack: string[] = [];
  const visit = (v: string): void => {
    state.set(v, 'active');
    stack.push(v);
    for (const w of graph.get(v) ?? []) {
      if (!graph.has(w)) continue;
      if (state.get(w) === 'active') cycles.push([...stack.slice(stack.indexOf(w)), w]);
      else if (!state.has(w)) visit(w);
    }
    stack.pop();
    state.set(v, 'done');
  };
  for (const v of [...graph.keys()].sort()) if (!state.has(v)) visit(v);
  return cycles;
}

function libGraph(): Map<string, string[]> {
  const graph = new Map<string, string[]>();
  for (const f of libFiles(LIB)) {
    const deps = runtimeImports(readFileSync(path.join(LIB, f), 'utf8')).map((d) => path.posix.normalize(path.posix.join(path.posix.dirname(f), d)));
    graph.set(f, deps);
  }
  return graph;
}

describe('lib/ import graph', () => {
  it('has no runtime import cycle', () => {
    const cycles = findCycles(libGraph()).map((c) => c.join(' -> '));
    expect(cycles, 'runtime import cycles in lib/ (move the shared helper into a leaf module)').toEqual([]);
  });

  it('sees the imports it should (the scan is not vacuous)', () => {
    const graph = libGraph();
    expect(graph.get('adapter.ts')).toEqual(expect.arrayContaining(['queue-pair.ts', 'connector.ts', 'validate.ts', 'records.ts']));
    expect(graph.get('listener.ts')).toContain('connector.ts');
    expect(graph.get('bench/nd.ts')).not.toContain('index.ts'); // import type only
    expect(graph.get('records.ts')).toEqual([]);
    expect(graph.get('validate.ts')).toEqual(['errors.ts']);
    expect(graph.get('errors.ts')).toEqual([]);
  });

  it('detects a cycle and ignores type-only imports', () => {
    const a = "import { b } from './b.js';\nimport type { C } from './c.js';\n";
    const b = "import {\n  type A,\n  a,\n} from './a.js';\n";
    const c = "import { type A } from './a.js';\nexport * from './b.js';\n";
    expect(runtimeImports(a)).toEqual(['./b.ts']);
    expect(runtimeImports(b)).toEqual(['./a.ts']);
    expect(runtimeImports(c)).toEqual(['./b.ts']);
    const graph = new Map([
      ['a.ts', ['b.ts']],
      ['b.ts', ['a.ts']],
      ['c.ts', ['b.ts']],
    ]);
    expect(findCycles(graph)).toEqual([['a.ts', 'b.ts', 'a.ts']]);
    expect(findCycles(new Map([['a.ts', ['b.ts']], ['b.ts', []]]))).toEqual([]);
  });
});

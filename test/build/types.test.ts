// The package's declarations as a TypeScript user meets them: a consumer project compiled with the oldest TypeScript
// we support (5.0, the devDependency `typescript-5.0`) and the current one, `strict` and `skipLibCheck: false`
// (so our .d.ts files are checked too), as ESM (.mts) and CommonJS (.cts). `// @ts-expect-error` lines prove the
// types refuse what they should (an unused one is an error): a misspelt status name, `new QueuePair()`, an internal
// member. dist/ comes from `npm run build:ts` (tsconfig.json: stripInternal; scripts/build-ts.js: private
// constructors for factory-made classes).
// Also: every exported class, function and public member of the main entry has a doc comment, and every
// `@example` in the declarations compiles in a strict consumer (so the examples cannot rot).
import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { createRequire } from 'node:module';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

const root = path.resolve(__dirname, '..', '..');
let consumer: string;
// The compiler API, for reading the declarations: TypeScript 7 (the current one, native) has no JavaScript API.
const ts: typeof import('typescript-5.0') = createRequire(__filename)('typescript-5.0');

const COMPILERS = {
  'TypeScript 5.0': path.join(root, 'node_modules', 'typescript-5.0', 'bin', 'tsc'),
  'TypeScript (current)': path.join(root, 'node_modules', 'typescript', 'bin', 'tsc'),
};

const USE = (imports: string) => `${imports}
async function main(): Promise<void> {
  const adapter = await openAdapter('127.0.0.1', { completion: 'auto' });
  const cq = adapter.createCompletionQueue({ depth: 64 });
  const qp = adapter.createQueuePair({ receiveCq: cq, initiatorDepth: 16 });
  const region = await adapter.allocateMemory(4096, { remoteWrite: true });
  const remote: RemoteMemory = decodeRemote(encodeRemote(region.remote()));
  try {
    const done = await qp.write(region.slice(0, 8), remote);
    const bytes: number = done.bytes;
    console.log(bytes);
  } catch (err) {
    if (err instanceof NdError) {
      const code: NdErrorCode = err.code;
      if (err.code === 'ND_CANCELED' || err.code === 'ERR_ND_CLOSED') console.log(code, err.status, err.operation);
      // @ts-expect-error a misspelt status name is not an NdErrorCode
      if (err.code === 'ND_CANCELLED') console.log(code);
    }
  }
  const connector = adapter.createConnector();
  const state: ConnectorState = connector.state;
  // @ts-expect-error connector.state is one of the ConnectorState names
  if (state === 'open') console.log(state);
  // @ts-expect-error queue pairs come from adapter.createQueuePair()
  new QueuePair();
  // @ts-expect-error internal members are not in the declarations
  console.log(adapter._native);
  await adapter.close();
}
void main();
`;

const ESM = USE(
  `import { openAdapter, decodeRemote, encodeRemote, NdError, QueuePair, type ConnectorState, type NdErrorCode, type RemoteMemory } from 'netdirect';
import { parseArgs } from 'netdirect/bench';
void parseArgs;`,
);
const CJS = USE(
  `import nd = require('netdirect');
import bench = require('netdirect/bench');
const { openAdapter, decodeRemote, encodeRemote, NdError, QueuePair } = nd;
type ConnectorState = nd.ConnectorState;
type NdErrorCode = nd.NdErrorCode;
type RemoteMemory = nd.RemoteMemory;
void bench.parseArgs;`,
);

// The Windows tier (node.exe under Wine) cannot make the consumer's symlink (ENOTSUP); the declarations are the
// same files on every platform and this file runs on Linux.
const onWindows = process.platform === 'win32';

beforeAll(() => {
  if (onWindows) return;
  consumer = mkdtempSync(path.join(tmpdir(), 'netdirect-types-'));
  mkdirSync(path.join(consumer, 'node_modules'));
  symlinkSync(root, path.join(consumer, 'node_modules', 'netdirect'), 'junction');
  writeFileSync(path.join(consumer, 'package.json'), '{ "name": "consumer", "private": true }\n');
  writeFileSync(path.join(consumer, 'use.mts'), ESM);
  writeFileSync(path.join(consumer, 'use.cts'), CJS);
  writeFileSync(path.join(consumer, 'examples.mts'), examplesConsumer(collectExamples()));
});

afterAll(() => {
  if (consumer) rmSync(consumer, { recursive: true, force: true });
});

function compile(tsc: string, file: string) {
  const config = {
    compilerOptions: {
      strict: true,
      skipLibCheck: false,
      module: 'node16',
      moduleResolution: 'node16',
      target: 'ES2022',
      noEmit: true,
      types: ['node'],
      typeRoots: [path.join(root, 'node_modules', '@types')],
    },
    files: [file],
  };
  const name = `tsconfig.${path.basename(file)}.json`;
  writeFileSync(path.join(consumer, name), JSON.stringify(config));
  const r = spawnSync(process.execPath, [tsc, '-p', name], { cwd: consumer, encoding: 'utf8', timeout: 120_000 });
  return { status: r.status, out: `${r.stdout}${r.stderr}` };
}

describe.skipIf(onWindows)('the declarations compile in a strict consumer', () => {
  for (const [compiler, tsc] of Object.entries(COMPILERS)) {
    for (const file of ['use.mts', 'use.cts']) {
      it(`${compiler}, ${file.endsWith('.mts') ? 'ESM' : 'CommonJS'}`, { timeout: 240_000 }, () => {
        const r = compile(tsc, file);
        expect(r.out).toBe('');
        expect(r.status).toBe(0);
      });
    }
  }

  it('no internal member reaches a .d.ts', () => {
    const leaks: string[] = [];
    const walk = (dir: string): void => {
      for (const e of readdirSync(dir, { withFileTypes: true })) {
        const file = path.join(dir, e.name);
        if (e.isDirectory()) walk(file);
        else if (/\.d\.m?ts$/.test(e.name)) {
          readFileSync(file, 'utf8')
            .split('\n')
            .forEach((line, i) => {
              // A public or protected member whose name starts with '_' (the convention for lib-internal members).
              if (/^\s+(?:readonly\s+|static\s+|get\s+|set\s+)*_\w+[?(:]/.test(line)) leaks.push(`${path.relative(root, file)}:${i + 1}: ${line.trim()}`);
              if (/@internal/.test(line)) leaks.push(`${path.relative(root, file)}:${i + 1}: ${line.trim()}`);
            });
        }
      }
    };
    walk(path.join(root, 'dist'));
    expect(leaks).toEqual([]);
  });
});

// Every entry point has types under each module resolution a consumer may use. `node` (node10) knows no
// "exports": package.json's typesVersions points it at the subpaths' declarations (TS2307 without it). TypeScript 7
// dropped node10, so that row runs with 5.0 only; the others with the current one (5.0 under node16 is the
// strict-consumer block above).
const RESOLUTIONS: Array<{ name: string; module: string; file: string; compilers: Array<keyof typeof COMPILERS> }> = [
  { name: 'node', module: 'commonjs', file: 'res-node.ts', compilers: ['TypeScript 5.0'] },
  { name: 'node16', module: 'node16', file: 'res-node16.ts', compilers: ['TypeScript (current)'] },
  { name: 'nodenext', module: 'nodenext', file: 'res-nodenext.mts', compilers: ['TypeScript (current)'] },
  { name: 'bundler', module: 'esnext', file: 'res-bundler.ts', compilers: ['TypeScript (current)'] },
];
const ENTRIES = `import { openAdapter, type NdErrorCode } from 'netdirect';
import { join, type Job } from 'netdirect/job';
import { parseArgs } from 'netdirect/bench';
const code: NdErrorCode = 'ND_CANCELED';
export async function use(): Promise<Job> {
  void openAdapter;
  void parseArgs;
  void code;
  return join();
}
`;

describe.skipIf(onWindows)('every entry point has types under node, node16, nodenext and bundler resolution', () => {
  for (const r of RESOLUTIONS) {
    for (const compiler of r.compilers) {
      it(`${r.name}, ${compiler}`, { timeout: 240_000 }, () => {
        writeFileSync(path.join(consumer, r.file), ENTRIES);
        const config = {
          compilerOptions: {
            strict: true,
            skipLibCheck: false,
            module: r.module,
            moduleResolution: r.name,
            target: 'ES2022',
            noEmit: true,
            types: ['node'],
            typeRoots: [path.join(root, 'node_modules', '@types')],
          },
          files: [r.file],
        };
        const name = `tsconfig.${r.name}.json`;
        writeFileSync(path.join(consumer, name), JSON.stringify(config));
        const ran = spawnSync(process.execPath, [COMPILERS[compiler], '-p', name], { cwd: consumer, encoding: 'utf8', timeout: 120_000 });
        expect(`${ran.stdout}${ran.stderr}`).toBe('');
        expect(ran.status).toBe(0);
      });
    }
  }
});

/** Every .d.ts under dist/cjs (the ESM entries re-export these). */
function declarationFiles(dir = path.join(root, 'dist', 'cjs')): string[] {
  const out: string[] = [];
  for (const e of readdirSync(dir, { withFileTypes: true })) {
    const file = path.join(dir, e.name);
    if (e.isDirectory()) out.push(...declarationFiles(file));
    else if (e.name.endsWith('.d.ts')) out.push(file);
  }
  return out.sort();
}

interface Example {
  where: string;
  code: string;
}

/** The `@example` blocks of every doc comment in the declarations (a ``` fence around the code is dropped). */
function collectExamples(): Example[] {
  const examples: Example[] = [];
  for (const file of declarationFiles()) {
    const text = readFileSync(file, 'utf8');
    for (const comment of text.matchAll(/\/\*\*([\s\S]*?)\*\//g)) {
      const lines = comment[1].split('\n').map((l) => l.replace(/^\s*\* ?/, ''));
      const line = text.slice(0, comment.index).split('\n').length;
      for (let i = 0; i < lines.length; i++) {
        if (!/^@example\b/.test(lines[i])) continue;
        const body: string[] = [];
        for (i++; i < lines.length && !/^@\w+/.test(lines[i]); i++) body.push(lines[i]);
        i--;
        const code = body.filter((l) => !/^\s*```/.test(l)).join('\n').trim();
        examples.push({ where: `${path.relative(root, file)}:${line}`, code });
      }
    }
  }
  return examples;
}

/**
 * One ESM consumer with each example in its own async function. Examples write their imports as a user would;
 * they are hoisted to the top and merged per module (import declarations cannot sit in a function).
 */
function examplesConsumer(examples: Example[]): string {
  const names = new Map<string, Set<string>>();
  const functions = examples.map((ex, n) => {
    const body = ex.code.replace(/^import\s+(type\s+)?\{([^}]*)\}\s+from\s+'([^']+)';?\s*$/gm, (_, type: string | undefined, list: string, from: string) => {
      const set = names.get(from) ?? new Set<string>();
      for (const name of list.split(',').map((s) => s.trim()).filter(Boolean)) set.add(type ? `type ${name}` : name);
      names.set(from, set);
      return '';
    });
    return `// ${ex.where}\nasync function example${n}(): Promise<void> {\n${body}\n}\nvoid example${n};\n`;
  });
  // A name imported as a value by one example and as a type by another is imported once, as a value.
  const imports = [...names].map(([from, set]) => {
    const list = [...set].filter((n) => !(n.startsWith('type ') && set.has(n.slice(5))));
    return `import { ${list.join(', ')} } from '${from}';`;
  });
  return `${imports.join('\n')}\n\n${functions.join('\n')}`;
}

describe.skipIf(onWindows)('the documentation in the declarations', () => {
  it('every @example compiles (current TypeScript, strict, ESM)', { timeout: 240_000 }, () => {
    const examples = collectExamples();
    expect(examples.length).toBeGreaterThan(0);
    const r = compile(COMPILERS['TypeScript (current)'], 'examples.mts');
    // Name the declaration an error's example comes from (the comment above each example's function).
    const lines = readFileSync(path.join(consumer, 'examples.mts'), 'utf8').split('\n');
    const out = r.out.replace(/examples\.mts\((\d+),/g, (m, n: string) => {
      for (let i = Number(n) - 1; i >= 0; i--) if (lines[i].startsWith('// dist/')) return `${lines[i].slice(3)}, ${m}`;
      return m;
    });
    expect(out).toBe('');
    expect(r.status).toBe(0);
  });

  it('every exported class has an @example', () => {
    const missing = documentedExports().filter((d) => d.kind === 'class' && !d.tags.includes('example')).map((d) => d.name);
    expect(missing).toEqual([]);
  });

  it('every exported class, function and public member of the main entry has a doc comment', () => {
    const missing = documentedExports()
      .filter((d) => !d.documented)
      .map((d) => d.name);
    expect(missing).toEqual([]);
  });
});

interface DocEntry {
  name: string;
  kind: 'class' | 'function' | 'member';
  documented: boolean;
  tags: string[];
}

/** The exported classes and functions of dist/cjs/index.d.ts and the public members of the classes, with their docs. */
function documentedExports(): DocEntry[] {
  const entry = path.join(root, 'dist', 'cjs', 'index.d.ts');
  const program = ts.createProgram([entry], { noEmit: true, skipLibCheck: true, types: [] });
  const checker = program.getTypeChecker();
  const moduleSymbol = checker.getSymbolAtLocation(program.getSourceFile(entry)!)!;
  const out: DocEntry[] = [];
  const describeSymbol = (symbol: import('typescript-5.0').Symbol, name: string, kind: DocEntry['kind']): void => {
    const documented = symbol.getDocumentationComment(checker).length > 0;
    const tags = symbol.getJsDocTags(checker).map((t) => t.name);
    out.push({ name, kind, documented, tags });
  };
  for (const exported of checker.getExportsOfModule(moduleSymbol)) {
    const symbol = exported.flags & ts.SymbolFlags.Alias ? checker.getAliasedSymbol(exported) : exported;
    if (symbol.flags & ts.SymbolFlags.Class) {
      describeSymbol(symbol, symbol.name, 'class');
      const decl = symbol.declarations!.find(ts.isClassDeclaration)!;
      for (const member of decl.members) {
        const modifiers = ts.getCombinedModifierFlags(member);
        if (modifiers & (ts.ModifierFlags.Private | ts.ModifierFlags.Protected)) continue;
        if (ts.isConstructorDeclaration(member) || member.name === undefined) continue;
        const memberSymbol = checker.getSymbolAtLocation(member.name);
        if (memberSymbol === undefined) continue;
        const memberName = ts.isComputedPropertyName(member.name) ? member.name.getText() : memberSymbol.name;
        describeSymbol(memberSymbol, `${symbol.name}.${memberName}`, 'member');
      }
    } else if (symbol.flags & ts.SymbolFlags.Function) {
      describeSymbol(symbol, symbol.name, 'function');
    }
  }
  // A member with a getter and a setter, or several overloads, appears once per declaration.
  return out.filter((d, i) => out.findIndex((o) => o.name === d.name) === i);
}

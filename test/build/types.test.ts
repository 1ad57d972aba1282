// The package's declarations as a TypeScript user meets them: a consumer project compiled with the oldest TypeScript
// we support (5.0, the devDependency `typescript-5.0`) and the current one, `strict` and `skipLibCheck: false`
// (so our .d.ts files are checked too), as ESM (.mts) and CommonJS (.cts). `// @ts-expect-error` lines prove the
// types refuse what they should (an unused one is an error): a misspelt status name, `new QueuePair()`, an internal
// member. dist/ comes from `npm run build:ts` (tsconfig.json: stripInternal; scripts/build-ts.js: private
// constructors for factory-made classes).
import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

const root = path.resolve(__dirname, '..', '..');
let consumer: string;

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

beforeAll(() => {
  consumer = mkdtempSync(path.join(tmpdir(), 'netdirect-types-'));
  mkdirSync(path.join(consumer, 'node_modules'));
  symlinkSync(root, path.join(consumer, 'node_modules', 'netdirect'), 'junction');
  writeFileSync(path.join(consumer, 'package.json'), '{ "name": "consumer", "private": true }\n');
  writeFileSync(path.join(consumer, 'use.mts'), ESM);
  writeFileSync(path.join(consumer, 'use.cts'), CJS);
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

describe('the declarations compile in a strict consumer', () => {
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

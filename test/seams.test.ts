// Every layer reaches the next one only through its seam (docs/architecture.md): a static scan of the includes of
// binding/ and of lib/bench's imports, no build. The build enforces one of these rules itself (the providers get no
// Node include path, CMakeLists.txt); the others only this test does. A rule that fails names the file, the line it
// includes and the folders that layer may include.
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import * as path from 'node:path';
import { describe, expect, it } from 'vitest';

const ROOT = path.resolve(__dirname, '..');
const BINDING = path.join(ROOT, 'binding');

function filesUnder(dir: string, exts: RegExp): string[] {
  const out: string[] = [];
  for (const name of readdirSync(dir)) {
    const full = path.join(dir, name);
    if (statSync(full).isDirectory()) out.push(...filesUnder(full, exts));
    else if (exts.test(name)) out.push(full);
  }
  return out;
}

/** C/C++ source without its comments (line breaks kept, so line numbers stay). */
function stripComments(code: string): string {
  return code.replace(/\/\*[\s\S]*?\*\//g, (c) => c.replace(/[^\n]/g, '')).replace(/\/\/.*$/gm, '');
}

/** binding/-relative path -> the quoted and the angle-bracket includes it makes (comments stripped). */
function includes(): Map<string, { quoted: string[]; system: string[] }> {
  const map = new Map<string, { quoted: string[]; system: string[] }>();
  for (const file of filesUnder(BINDING, /\.(cc|h)$/)) {
    const code = stripComments(readFileSync(file, 'utf8'));
    // A quoted include resolves next to the file first (nd/'s headers name each other so), then from binding/.
    const here = path.dirname(file);
    const quoted = [...code.matchAll(/^\s*#\s*include\s+"([^"]+)"/gm)].map((m) =>
      existsSync(path.join(here, m[1])) ? path.relative(BINDING, path.join(here, m[1])).split(path.sep).join('/') : m[1],
    );
    const system = [...code.matchAll(/^\s*#\s*include\s+<([^>]+)>/gm)].map((m) => m[1]);
    map.set(path.relative(BINDING, file).split(path.sep).join('/'), { quoted, system });
  }
  return map;
}

// The ND faces of the software provider: its IND2* objects at the root of soft/.
const SOFT_FACES = ['adapter', 'completion_queue', 'connector', 'listener', 'memory_region', 'memory_window', 'provider',
  'queue_pair', 'shared_receive_queue'].map((n) => `soft/${n}.h`);
// The queue pair's units that stand on byte buffers (test/native/rx_stream_test.cc, the fuzzers).
const QP_UNITS = /^soft\/qp\/(rx_stream|tx_context)\.(cc|h)$/;
// The queue pair's state machine: all of soft/qp/ (qp.h/.cc, qp_tx.cc, qp_rx.cc, ports.h, and the units above).
// Its ND face is soft/queue_pair.h, which derives from it; the machine reaches the CQs and the SRQ through
// qp/ports.h, and names none of the faces.
const QP_MACHINE = /^soft\/qp\//;
const SOFT_FACE_CLASSES =
  /\bSoft(Adapter|CompletionQueue|Connector|Listener|MemoryRegion|MemoryWindow|Provider|QueuePair|SharedReceiveQueue)\b/;

interface Rule {
  /** Which files (binding/-relative) the rule covers. */
  files: RegExp;
  /** What they may include ("quoted", binding/-relative): a folder prefix ending in '/' or a whole path. */
  may: string[];
  why: string;
}

const RULES: Rule[] = [
  { files: /^nd\//, may: ['nd/'], why: 'the ND v2 ABI stands alone' },
  { files: /^ndkit\//, may: ['nd/', 'ndkit/'], why: 'what any provider needs; knows no provider' },
  { files: /^soft\/wire\//, may: ['nd/', 'soft/wire/'], why: 'codecs on byte buffers' },
  { files: /^soft\/net\//, may: ['nd/', 'ndkit/', 'soft/net/'], why: 'the socket seam' },
  { files: /^soft\/memory\//, may: ['nd/', 'ndkit/', 'soft/memory/', 'soft/limits.h'], why: 'STag table and local SGEs' },
  { files: /^soft\/engine\//, may: ['nd/', 'ndkit/', 'soft/engine/', 'soft/net/', 'soft/trace.h', 'soft/env.h'], why: 'progress over a poll set' },
  {
    files: QP_UNITS,
    may: ['nd/', 'ndkit/', 'soft/wire/', 'soft/net/', 'soft/memory/', 'soft/qp/', 'soft/limits.h', 'soft/trace.h', 'soft/env.h'],
    why: 'the receive stream and transmit context are testable on byte buffers: no ND face, engine or adapter',
  },
  {
    files: QP_MACHINE,
    may: ['nd/', 'ndkit/', 'soft/wire/', 'soft/net/', 'soft/memory/', 'soft/engine/', 'soft/shm/', 'soft/cm/connection.h',
      'soft/qp/', 'soft/limits.h', 'soft/trace.h', 'soft/env.h'],
    why: "the queue pair's state machine sees the engine, the memory and its connection, never an ND face (qp/ports.h)",
  },
  {
    files: /^soft\/cm\/.*\.h$/,
    may: ['nd/', 'ndkit/', 'soft/wire/', 'soft/net/', 'soft/engine/', 'soft/shm/', 'soft/cm/', 'soft/limits.h'],
    why: "connection management's interfaces name no ND face (the .cc files drive them)",
  },
  {
    files: /^soft\//,
    may: ['nd/', 'ndkit/', 'soft/'],
    why: 'the software provider knows ND v2 and sockets, never the addon, discovery or another provider',
  },
  { files: /^verbs\//, may: ['nd/', 'ndkit/', 'verbs/'], why: 'the verbs provider knows ND v2 and rdma-core only' },
  {
    files: /^providers\//,
    may: ['nd/', 'ndkit/', 'providers/', 'soft/provider.h', 'verbs/provider.h'],
    why: "discovery reaches a provider through its entry header only",
  },
  { files: /^delivery\//, may: ['nd/', 'ndkit/', 'delivery/'], why: 'delivery sits below the wrappers' },
  {
    files: /^addon\//,
    may: ['nd/', 'ndkit/', 'addon/', 'delivery/', 'providers/providers.h', 'bench/bench.h'],
    why: "the wrappers see only ND v2 interfaces, never which provider is behind them; ndbench's loops by their entry header",
  },
  {
    files: /^bench\//,
    may: ['nd/', 'ndkit/', 'addon/', 'delivery/', 'bench/', 'soft/net/socket.h'],
    why: "ndbench's loops drive the wrappers' ND objects, its TCP baseline the provider's socket seam",
  },
];

const NODE_HEADERS = /^(napi\.h|node_api\.h|node\.h|uv\.h|js_native_api\.h)$/;
const NODE_FOLDERS = /^(addon|delivery|bench)\//;

const allowed = (may: string[], inc: string) => may.some((m) => (m.endsWith('/') ? inc.startsWith(m) : inc === m));

describe('binding/: each layer includes only what is below its seam', () => {
  const all = includes();

  it('finds the tree (a rename that empties a layer must fail here, not pass silently)', () => {
    for (const folder of ['addon/', 'delivery/', 'providers/', 'bench/', 'ndkit/', 'nd/', 'soft/qp/', 'soft/cm/', 'verbs/']) {
      expect([...all.keys()].some((f) => f.startsWith(folder)), folder).toBe(true);
    }
  });

  for (const rule of RULES) {
    it(`${rule.files.source}: ${rule.why}`, () => {
      const bad: string[] = [];
      for (const [file, { quoted }] of all) {
        // A file follows the first rule that covers it (the qp units and cm headers before the rest of soft/).
        if (RULES.find((r) => r.files.test(file)) !== rule) continue;
        for (const inc of quoted) if (!allowed(rule.may, inc)) bad.push(`${file} includes "${inc}"`);
      }
      expect(bad, `may include only ${rule.may.join(', ')}`).toEqual([]);
    });
  }

  it('soft/qp/ includes no ND face of the software provider', () => {
    const bad: string[] = [];
    for (const [file, { quoted }] of all) {
      if (QP_MACHINE.test(file)) for (const inc of quoted) if (SOFT_FACES.includes(inc)) bad.push(`${file} includes "${inc}"`);
    }
    expect(bad).toEqual([]);
  });

  it('soft/qp/ names no ND face class either (a forward declaration would reach past its ports)', () => {
    const bad: string[] = [];
    for (const file of filesUnder(path.join(BINDING, 'soft', 'qp'), /\.(cc|h)$/)) {
      const lines = stripComments(readFileSync(file, 'utf8')).split('\n');
      lines.forEach((line, i) => {
        const m = SOFT_FACE_CLASSES.exec(line);
        if (m) bad.push(`${path.relative(BINDING, file)}:${i + 1} names ${m[0]}`);
      });
    }
    expect(bad).toEqual([]);
  });

  it("soft/cm/ (headers and sources) drives the queue pair's state machine, never its ND face", () => {
    // As siw_cm.c drives siw_qp: the connector holds a QueuePairCore (soft/qp/qp.h), not the SoftQueuePair over it.
    const bad: string[] = [];
    for (const [file, { quoted }] of all) {
      if (file.startsWith('soft/cm/')) for (const inc of quoted) if (inc === 'soft/queue_pair.h') bad.push(`${file} includes "${inc}"`);
    }
    for (const file of filesUnder(path.join(BINDING, 'soft', 'cm'), /\.(cc|h)$/)) {
      stripComments(readFileSync(file, 'utf8')).split('\n').forEach((line, i) => {
        if (/\bSoftQueuePair\b/.test(line)) bad.push(`${path.relative(BINDING, file)}:${i + 1} names SoftQueuePair`);
      });
    }
    expect(bad).toEqual([]);
  });

  it('the ND face of the queue pair derives from the state machine (the split is there to be held)', () => {
    const face = stripComments(readFileSync(path.join(BINDING, 'soft', 'queue_pair.h'), 'utf8'));
    expect(face).toMatch(/class\s+SoftQueuePair\s+final\s*:[^{]*\bpublic\s+QueuePairCore\b/);
    expect(all.get('soft/queue_pair.h')?.quoted).toContain('soft/qp/qp.h');
  });

  it('only the addon (addon/, delivery/, bench/) includes Node-API or libuv', () => {
    const bad: string[] = [];
    for (const [file, { system }] of all) {
      if (NODE_FOLDERS.test(file)) continue;
      for (const inc of system) if (NODE_HEADERS.test(inc)) bad.push(`${file} includes <${inc}>`);
    }
    expect(bad).toEqual([]);
  });

  it('every file is covered by a rule', () => {
    expect([...all.keys()].filter((f) => !RULES.some((r) => r.files.test(f)))).toEqual([]);
  });
});

describe('binding/bench/ is a library of its own (CMakeLists.txt)', () => {
  const cmake = readFileSync(path.join(ROOT, 'CMakeLists.txt'), 'utf8').replace(/#.*$/gm, '');
  const glob = (name: string) => new RegExp(`file\\(GLOB[^)]*\\b${name}\\b([^)]*)\\)`).exec(cmake)?.[1] ?? '';

  it("the addon's sources are addon/ and delivery/, not bench/", () => {
    expect(glob('NETDIRECT_ADDON_SOURCES')).toMatch(/addon\//);
    expect(glob('NETDIRECT_ADDON_SOURCES')).not.toMatch(/bench/);
  });

  it('netdirect_bench builds bench/ and the addon links it', () => {
    expect(glob('NETDIRECT_BENCH_SOURCES')).toMatch(/bench\/\*\.cc/);
    expect(cmake).toMatch(/add_library\(netdirect_bench STATIC \$\{NETDIRECT_BENCH_SOURCES\}\)/);
    expect(cmake).toMatch(/target_link_libraries\(netdirect PRIVATE[^)]*\bnetdirect_bench\b/);
  });

  it("the bench's entry points are declared in bench/bench.h alone (the addon includes it, declares none by hand)", () => {
    const bad: string[] = [];
    for (const file of filesUnder(BINDING, /\.(cc|h)$/)) {
      const rel = path.relative(BINDING, file).split(path.sep).join('/');
      if (rel === 'bench/bench.h') continue;
      stripComments(readFileSync(file, 'utf8')).split('\n').forEach((line, i) => {
        if (/^\s*void\s+InitBench\w*\s*\([^)]*\)\s*;/.test(line)) bad.push(`${rel}:${i + 1} declares ${line.trim()}`);
      });
    }
    expect(bad).toEqual([]);
    expect(includes().get('addon/addon.cc')?.quoted).toContain('bench/bench.h');
  });

  it('no wrapper names the bench (its seam is delivery/poller.h CqState::HandBack)', () => {
    const bad: string[] = [];
    for (const file of filesUnder(path.join(BINDING, 'addon'), /\.(cc|h)$/)) {
      const code = stripComments(readFileSync(file, 'utf8'));
      if (/\bSetAside\b|\bbench_/i.test(code)) bad.push(path.relative(BINDING, file));
    }
    expect(bad).toEqual([]);
  });
});

describe('lib/bench/ reaches the addon through lib/native.ts only', () => {
  it('no lib/bench module imports or requires lib/binding', () => {
    const bad: string[] = [];
    for (const file of filesUnder(path.join(ROOT, 'lib', 'bench'), /\.ts$/)) {
      const code = readFileSync(file, 'utf8').replace(/\/\*[\s\S]*?\*\//g, '').replace(/^\s*\/\/.*$/gm, '');
      if (/(from\s+|require\(\s*|import\(\s*)['"]\.\.\/binding(\.js)?['"]/.test(code)) {
        bad.push(path.relative(ROOT, file));
      }
    }
    expect(bad).toEqual([]);
  });
});

describe("docs/architecture.md's map names every folder of binding/ and lib/, and only those", () => {
  /** The folders the map's first code block names, each under the one above it that is indented less. */
  function mapped(): string[] {
    const doc = readFileSync(path.join(ROOT, 'docs', 'architecture.md'), 'utf8');
    const block = /^```\n([\s\S]*?)^```/m.exec(doc)?.[1] ?? '';
    const stack: Array<{ indent: number; name: string }> = [];
    const out: string[] = [];
    for (const line of block.split('\n')) {
      const m = /^( *)([\w-]+)\/(\s|$)/.exec(line);
      if (!m) continue;
      while (stack.length > 0 && stack[stack.length - 1].indent >= m[1].length) stack.pop();
      stack.push({ indent: m[1].length, name: m[2] });
      out.push(stack.map((s) => s.name).join('/'));
    }
    return out.sort();
  }
  const folders = (dir: string): string[] =>
    readdirSync(path.join(ROOT, dir))
      .filter((n) => statSync(path.join(ROOT, dir, n)).isDirectory())
      .flatMap((n) => [`${dir}/${n}`, ...folders(`${dir}/${n}`)]);

  it('one line per folder, matching the tree', () => {
    expect(mapped()).toEqual(['binding', 'lib', ...folders('binding'), ...folders('lib')].sort());
  });
});

// The repository stands on its own: what the code relies on is in its own docs/, comments cite repository paths
// or public specs, and no file names a place on the machine it was written on.
import { spawnSync } from 'node:child_process';
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import * as path from 'node:path';
import { describe, expect, it } from 'vitest';

const root = path.resolve(__dirname, '..', '..');

/** The repository's files: git's list in a clone, else a walk that skips what is built or installed. */
function repositoryFiles(): string[] {
  const git = spawnSync('git', ['ls-files', '-z'], { cwd: root, encoding: 'utf8' });
  if (git.status === 0 && git.stdout.length > 0) return git.stdout.split('\0').filter((f) => f !== '');
  const out: string[] = [];
  const skip = new Set(['.git', 'node_modules', 'build', 'build-asan', 'build-win', 'dist', 'prebuilds']);
  const walk = (dir: string) => {
    for (const name of readdirSync(path.join(root, dir))) {
      const rel = dir === '' ? name : `${dir}/${name}`;
      if (skip.has(name)) continue;
      if (statSync(path.join(root, rel)).isDirectory()) walk(rel);
      else out.push(rel);
    }
  };
  walk('');
  return out;
}

/** Text files only: the fuzz corpus and captures are bytes from the wire, not prose. */
function textFiles(): Array<{ file: string; text: string }> {
  return repositoryFiles()
    .filter((f) => !f.startsWith('test/fuzz/corpus/') && !/\.(png|pcap|pcapng|bin|gz|tgz|ico)$/.test(f))
    .filter((f) => existsSync(path.join(root, f)))
    .map((file) => ({ file, text: readFileSync(path.join(root, file), 'utf8') }))
    .filter(({ text }) => !text.includes('\0'));
}

/** Lines of `files` that match `re`, as "file:line: text". */
function hits(files: Array<{ file: string; text: string }>, re: RegExp): string[] {
  const out: string[] = [];
  for (const { file, text } of files) {
    text.split('\n').forEach((line, i) => {
      if (re.test(line)) out.push(`${file}:${i + 1}: ${line.trim().slice(0, 160)}`);
    });
  }
  return out;
}

// The Windows tier runs a staged copy of the package, not the repository: the Linux tier checks the tree.
describe.skipIf(process.env.NETDIRECT_UNDER_WINE === '1')('the repository stands on its own', () => {
  const files = textFiles();

  it('lists its files', () => {
    expect(files.length).toBeGreaterThan(100);
    expect(files.map((f) => f.file)).toContain('binding/soft/qp/qp_rx.cc');
  });

  it('names no absolute path on a developer\'s or a CI machine', () => {
    // A path into a home or work directory means a file depends on something outside the checkout. Paths inside
    // the siw guest (/opt/nd), system files (/proc, /sys, /dev, /usr) and temporary files stay allowed.
    const machinePath = /(^|[\s'"`(=:,[])(\/(work|home|root|Users|check)\/|[A-Za-z]:\\{1,2}(Users|work)\\)/;
    // This file spells the patterns out; it names no such path.
    expect(hits(files.filter((f) => f.file !== 'test/build/self-contained.test.ts'), machinePath)).toEqual([]);
  });

  it('cites no document outside the repository (the team\'s reference notes are not shipped)', () => {
    const outside = /\.\.\/shared\b|\b(iwarp-facts|nd2-facts|windows-under-wine|siw-under-qemu)\.md\b|\banchors §/;
    expect(hits(files.filter((f) => f.file !== 'test/build/self-contained.test.ts'), outside)).toEqual([]);
  });

  it('every docs/*.md a file cites exists (the ND SDK\'s own docs/IND2*.md are cited as the SDK\'s)', () => {
    const cited = new Set<string>();
    for (const { text } of files) for (const m of text.matchAll(/\bdocs\/([A-Za-z0-9_.-]+\.md)\b/g)) cited.add(m[1]);
    const missing = [...cited].filter((name) => !name.startsWith('IND2') && !existsSync(path.join(root, 'docs', name)));
    expect(missing).toEqual([]);
    expect(cited.size).toBeGreaterThan(5);
  });

  it('every repository path a comment in binding/ or lib/ cites exists', () => {
    // A path from the repository's root (binding/..., lib/..., docs/..., test/..., scripts/...) in a // or /* */
    // comment, up to the first character no path has (':' of file:line, '*' of a glob, a space); a trailing '.' ends
    // the sentence. A stem (binding/soft/wire/mpa for mpa.h and mpa.cc) counts when a file of that stem exists. The ND
    // SDK's docs/IND2*.md are the SDK's, as above.
    const cite = /(?<![\w./-])((?:binding|lib|docs|test|scripts)\/[\w./-]*[\w/])/g;
    const exists = (p: string) => ['', '.h', '.cc', '.ts'].some((ext) => existsSync(path.join(root, p + ext)));
    const sources = files.filter(({ file }) => /^(binding|lib)\//.test(file) && /\.(cc|h|c|cpp|ts|mts|js|mjs|cjs)$/.test(file));
    const cited: string[] = [];
    const missing: string[] = [];
    for (const { file, text } of sources) {
      for (const c of text.matchAll(/\/\*[\s\S]*?\*\/|\/\/[^\n]*/g)) {
        const line = text.slice(0, c.index).split('\n').length;
        for (const m of c[0].matchAll(cite)) {
          const p = m[1].replace(/\.+$/, '');
          if (/^docs\/IND2/.test(p)) continue;
          cited.push(p);
          if (!exists(p)) missing.push(`${file}:${line}: ${p}`);
        }
      }
    }
    expect(missing).toEqual([]);
    expect(sources.length).toBeGreaterThan(100);
    expect(cited.length).toBeGreaterThan(100);
  });
});

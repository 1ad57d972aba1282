// The completion-record layout is declared once per language: lib/records.ts and binding/delivery/records.h. The addon
// exports its table (binding.recordKinds, binding.recordWords); these tests fail when one side changes alone.
import { describe, expect, it } from 'vitest';
import { binding } from '../lib/binding';
import type { NativeBinding } from '../lib/native';
import { K_SILENT, RECORD_KINDS, RECORD_WORDS, REQUEST_TYPES } from '../lib/records';

const native = binding as NativeBinding;

describe('completion records: lib/records.ts and binding/delivery/records.h agree', () => {
  it('has the same words per record', () => {
    expect(native.recordWords).toBe(RECORD_WORDS);
  });

  it('marks a silent request\'s record with the same bit, above every kind', () => {
    expect(native.recordSilent).toBe(K_SILENT);
    for (const k of Object.values(RECORD_KINDS)) expect(k & K_SILENT).toBe(0);
  });

  it('has the same kinds, names and values', () => {
    expect({ ...native.recordKinds }).toEqual({ ...RECORD_KINDS });
  });

  it('gives kinds 0..5 the ND2_REQUEST_TYPE order that REQUEST_TYPES (Completion.type) follows', () => {
    REQUEST_TYPES.forEach((type, kind) => expect(RECORD_KINDS[type]).toBe(kind));
    const posted = Object.values(RECORD_KINDS).filter((k) => k < 16);
    expect(posted.sort((a, b) => a - b)).toEqual([0, 1, 2, 3, 4, 5]);
  });

  it('declares every kind value once', () => {
    const values = Object.values(RECORD_KINDS);
    expect(new Set(values).size).toBe(values.length);
  });
});

// binding/ is not staged for the Windows tier (scripts/wine-test.sh): the sources are compared on Linux.
describe.skipIf(process.platform === 'win32')('misuse codes: what the addon raises, lib/errors.ts declares', () => {
  it('every ERR_ND_* code in the addon (binding/addon, delivery, bench) is an exported constant (so NdErrorCode covers it)', async () => {
    const { readdirSync, readFileSync } = await import('node:fs');
    const path = await import('node:path');
    const nd = await import('../lib/index');
    const codes = new Set<string>();
    for (const folder of ['addon', 'delivery', 'bench']) {
      const dir = path.join(__dirname, '..', 'binding', folder);
      for (const f of readdirSync(dir).filter((n) => n.endsWith('.cc') || n.endsWith('.h'))) {
        for (const m of readFileSync(path.join(dir, f), 'utf8').matchAll(/"(ERR_ND_[A-Z_]+)"/g)) codes.add(m[1]);
      }
    }
    expect(codes.size).toBeGreaterThan(0);
    for (const code of codes) expect((nd as Record<string, unknown>)[code], code).toBe(code);
  });
});

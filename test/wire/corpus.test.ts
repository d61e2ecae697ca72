// Replays the committed fuzz corpus (test/wire/corpus/*.bin, made by make-corpus.mjs) through
// every decoder: nothing throws, every answer is well-formed, and each file's own decoder
// accepts the -ok- files and rejects the -bad- ones.
import { describe, expect, it } from 'vitest';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { DECODERS, wellFormed } from './helpers.js';

const dir = join(import.meta.dirname, 'corpus');
const files = readdirSync(dir).filter((f) => f.endsWith('.bin')).sort();

describe('wire fuzz corpus', () => {
  it('has a few dozen files', () => {
    expect(files.length).toBeGreaterThanOrEqual(36);
  });

  it.each(files)('%s', (file) => {
    const bytes = new Uint8Array(readFileSync(join(dir, file)));
    for (const [name, dec] of Object.entries(DECODERS)) {
      // Also inside a larger buffer at an odd offset, as segments sit in shared memory.
      const shifted = new Uint8Array(bytes.length + 7);
      shifted.set(bytes, 3);
      for (const [buf, off] of [[bytes, 0], [shifted, 3]] as const) {
        const end = off + bytes.length;
        let r!: ReturnType<typeof dec>;
        expect(() => (r = dec(buf, off, end)), `${name} threw`).not.toThrow();
        expect(wellFormed(r, off, end), `${name} answer malformed: ${JSON.stringify(r, (_, v) => (typeof v === 'bigint' ? String(v) : v))}`).toBe(true);
      }
    }
    const m = /^([A-Za-z0-9]+)-(ok|bad)-/.exec(file);
    if (m && m[1]! in DECODERS) {
      const r = DECODERS[m[1]!]!(bytes, 0, bytes.length);
      expect(r.ok, `${m[1]} on ${file}: ${r.ok ? 'accepted' : r.error}`).toBe(m[2] === 'ok');
    }
  });
});

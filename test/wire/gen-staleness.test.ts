// Generated files must be what the generator makes from the current spec: a stale
// assembly/wire.gen.ts, TypeScript accessor file or docs/wire.md (spec edited, `npm run gen`
// forgotten) fails here.
import { describe, expect, it } from 'vitest';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const root = join(import.meta.dirname, '../..');
const GENERATED = [
  'assembly/wire.gen.ts', 'docs/wire.md',
  'src/wire/fields.gen.ts', 'src/wire/host-fields.gen.ts', 'src/wire/dedup-fields.gen.ts', 'src/wire/channel-fields.gen.ts',
  'src/wire/files-fields.gen.ts',
];
/** The specs the generator reads: the RDMA layers' and each feature's. */
const SPECS = ['spec', 'layout', 'udp-spec', 'dataplane-spec', 'nic-spec', 'tcp-spec', 'inproc-spec', 'dedup-spec', 'channel-spec', 'files-spec'];

describe('generated wire files', () => {
  it.each(SPECS)('the generator reads a compiled %s at least as new as its source', (name) => {
    // The generator imports dist/wire/*.js; comparing against an older build would hide staleness.
    expect(statSync(join(root, `dist/wire/${name}.js`)).mtimeMs).toBeGreaterThanOrEqual(statSync(join(root, `src/wire/${name}.ts`)).mtimeMs);
  });

  it.each(GENERATED)('%s is byte-identical to a fresh generation', (rel) => {
    const out = mkdtempSync(join(tmpdir(), 'sabre-gen-wire-'));
    try {
      execFileSync(process.execPath, [join(root, 'scripts/gen-wire.mjs'), out], { stdio: 'pipe' });
      const fresh = readFileSync(join(out, rel));
      const committed = readFileSync(join(root, rel));
      expect(committed.equals(fresh), `${rel} is stale: run \`npm run gen\``).toBe(true);
    } finally {
      rmSync(out, { recursive: true, force: true });
    }
  });
});

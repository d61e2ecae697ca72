// Which script a NIC thread runs: the one-file bundle (scripts/bundle-nic.mjs) when it was
// linked from the current build, else the module graph it was linked from.
import { existsSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { openDevice } from '../../src/index.js';
import { pickThreadScript, THREAD_BUNDLE, threadScript } from '../../src/nic/thread-start.js';

const dir = '/x/dist/nic';
const main = join(dir, 'thread-main.js');
const bundle = join(dir, THREAD_BUNDLE);
const times = (t: Record<string, number>) => (p: string): number | undefined => t[p];

describe('the NIC thread script', () => {
  it('is the bundle when it is as new as thread-main.js or newer', () => {
    expect(pickThreadScript(dir, times({ [main]: 10, [bundle]: 10 }))).toBe(bundle);
    expect(pickThreadScript(dir, times({ [main]: 10, [bundle]: 11 }))).toBe(bundle);
  });

  it('is thread-main.js when tsc wrote it after the bundle was linked (a stale bundle never runs)', () => {
    expect(pickThreadScript(dir, times({ [main]: 12, [bundle]: 11 }))).toBe(main);
  });

  it('is thread-main.js without a bundle, or when asked for the module graph', () => {
    expect(pickThreadScript(dir, times({ [main]: 10 }))).toBe(main);
    expect(pickThreadScript(dir, times({ [main]: 10, [bundle]: 11 }), false)).toBe(main);
  });

  it('in this run is the bundle the global setup linked, and a device on it works', async () => {
    const script = threadScript();
    expect(script.endsWith(THREAD_BUNDLE)).toBe(true);
    expect(statSync(script).mtimeMs).toBeGreaterThanOrEqual(statSync(join(script, '..', 'thread-main.js')).mtimeMs);
    expect(existsSync(script)).toBe(true);
    const a = await openDevice({ transport: 'udp', host: '127.0.0.1', port: 0 });
    const b = await openDevice({ transport: 'tcp', host: '127.0.0.1', port: 0 });
    try {
      expect(a.address.port).toBeGreaterThan(0);
      expect(b.address.port).toBeGreaterThan(0);
    } finally {
      await a.close();
      await b.close();
    }
  });
});

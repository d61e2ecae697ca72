// What an idle channel end keeps on the application's heap, counted in a heap snapshot of a
// process of its own (test/channel/idle-heap-child.mjs, on the built package): no lifecycle
// record and no action queue of its own once open and idle (made again at the first close() or
// action), and no heap number — the times it keeps are whole milliseconds, the peer's addresses
// decoded as small integers, no Infinity for "no deadline" — in its objects or epoch records.
import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';

async function idleHeap(n: number, workers: number): Promise<{ counts: Record<string, number>; heapNumbers: number }> {
  const child = spawn(process.execPath, [join(import.meta.dirname, 'idle-heap-child.mjs'), String(n), String(workers)], { stdio: ['ignore', 'pipe', 'inherit'] });
  let out = '';
  child.stdout.on('data', (d: Buffer) => (out += d.toString()));
  const killer = setTimeout(() => child.kill('SIGKILL'), 60_000);
  const code = await new Promise<number | null>((r) => child.on('exit', r));
  clearTimeout(killer);
  expect(code).toBe(0);
  return JSON.parse(out.trim().split('\n').pop()!);
}

describe('an idle channel end on the application heap', () => {
  for (const workers of [1, 0]) {
    it(`holds no lifecycle, no action queue and no heap number of its own (workers: ${workers})`, { timeout: 90_000 }, async () => {
      const n = 24;
      const r = await idleHeap(n, workers);
      // Both ends of every channel are in the snapshot.
      expect(r.counts.ChannelCore).toBe(2 * n);
      expect(r.counts.Inbound).toBe(2 * n);
      expect(r.counts.Outbound).toBe(2 * n);
      // The device's and listener's own, not one per channel end.
      expect(r.counts.Lifecycle).toBeLessThan(n / 4);
      expect(r.counts.Outbox).toBeLessThan(n / 4);
      expect(r.heapNumbers).toBe(0);
    });
  }
});

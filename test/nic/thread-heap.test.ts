// The NIC thread's heap reading the memory benches take (bench/lib/gc.mjs settleDevice): an
// internal request of the device's port, answered with the thread's V8 heap figures, after a
// full collection when the process allows one.
import { describe, expect, it } from 'vitest';
import { openDevice } from '../../src/index.js';
import type { ThreadPort } from '../../src/nic/thread-port.js';

describe('NIC thread heap reading', () => {
  it('answers used / total / young-generation heap bytes, collecting first only when asked', { timeout: 30_000 }, async () => {
    const dev = await openDevice({ transport: 'udp', host: '127.0.0.1', port: 0, workers: 1 });
    try {
      const port = dev.nic as ThreadPort;
      const plain = port.call('heap', {}) as { used: number; total: number; external: number; young: number; collected: boolean };
      expect(plain.collected).toBe(false);
      expect(plain.young).toBeGreaterThan(0);
      expect(plain.total).toBeGreaterThanOrEqual(plain.young);
      expect(plain.used).toBeGreaterThan(0);
      expect(plain.total).toBeGreaterThanOrEqual(plain.used);
      const asked = port.call('heap', { gc: true }) as { collected: boolean; used: number };
      // Whether gc is reachable depends on the process's flags (vitest may expose it): either way a number.
      expect(typeof asked.collected).toBe('boolean');
      expect(asked.used).toBeGreaterThan(0);
    } finally {
      await dev.close();
    }
  });
});

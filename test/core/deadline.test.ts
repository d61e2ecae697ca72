// A peer deadline that fires late because this process's own event loop was blocked lets the
// I/O queued during the block in before it expires the wait: what the peer sent in time wins.
import dgram from 'node:dgram';
import { describe, expect, it } from 'vitest';
import { peerDeadline } from '../../src/core/deadline.js';

function blockLoop(ms: number): void {
  const end = performance.now() + ms;
  while (performance.now() < end);
}

describe('peerDeadline', () => {
  it('after a stall of this process, a datagram that arrived during it is seen before the deadline expires', async () => {
    const rx = dgram.createSocket('udp4');
    const tx = dgram.createSocket('udp4');
    await new Promise<void>((r) => rx.bind(0, '127.0.0.1', r));
    await new Promise<void>((r) => tx.bind(0, '127.0.0.1', r));
    let arrived = false;
    rx.on('message', () => (arrived = true));
    try {
      const seen = await new Promise<boolean>((resolve) => {
        peerDeadline(20, () => resolve(arrived));
        tx.send(new Uint8Array(8), (rx.address() as { port: number }).port, '127.0.0.1', () => blockLoop(300));
      });
      expect(seen, 'the deadline expired before the datagram queued during the stall was read').toBe(true);
    } finally {
      rx.close();
      tx.close();
    }
  });

  it('without a stall it expires on time, and clear() cancels it', async () => {
    let n = 0;
    const t0 = performance.now();
    await new Promise<void>((resolve) => peerDeadline(30, () => {
      n++;
      resolve();
    }));
    expect(performance.now() - t0).toBeGreaterThanOrEqual(29);
    const d = peerDeadline(10, () => n++);
    d.clear();
    await new Promise((r) => setTimeout(r, 40));
    expect(n).toBe(1);
  });
});

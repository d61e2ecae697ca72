import { Worker } from 'node:worker_threads';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { Ring, RING_HEADER_BYTES } from '../../src/dataplane/ring.js';

const peer = fileURLToPath(new URL('./fixtures/ring-peer.mjs', import.meta.url));
const value = (seq: number) => Math.imul(seq ^ 0x9e3779b9, 0x85ebca6b) >>> 0;
const expectedSum = (total: number) => {
  let s = 0;
  for (let i = 0; i < total; i++) s = (s + value(i)) >>> 0;
  return s;
};

interface PeerResult { role: string; sum: number; done: number; error: string | null; sleeps: number; stalls: number }

function runPeer(data: Record<string, unknown>): Promise<PeerResult> {
  return new Promise((resolve, reject) => {
    const w = new Worker(peer, { workerData: data });
    w.once('message', (m) => resolve(m as PeerResult));
    w.once('error', reject);
    w.once('exit', (c) => c !== 0 && reject(new Error(`peer exited ${c}`)));
  });
}

/** A ring at a non-zero, 64-aligned offset of a SharedArrayBuffer, with guard bytes after it. */
function makeRing(slots: number, slotBytes: number, startIndex = 0) {
  const addr = 128;
  const size = Ring.bytesFor(slots, slotBytes);
  const buffer = new SharedArrayBuffer(addr + size + 128);
  const ring = Ring.init(buffer, addr, slots, slotBytes);
  if (startIndex !== 0) {
    // Start both indices just below the Int32 overflow so the run crosses it.
    const hdr = new Int32Array(buffer, addr, RING_HEADER_BYTES / 4);
    hdr[0] = startIndex | 0;
    hdr[16] = startIndex | 0;
  }
  return { buffer, addr, ring };
}

describe('SPSC ring across real worker threads', () => {
  for (const [name, slots, slotBytes, start] of [
    ['64 slots × 32 B', 64, 32, 0],
    ['8 slots × 16 B, indices crossing 2^31', 8, 16, 0x7fff_ff00],
    ['256 slots × 64 B, indices crossing 2^32', 256, 64, -300],
  ] as const) {
    it(`moves 1e5 slots in order with a matching checksum (${name})`, async () => {
      const total = 100_000;
      const { buffer, addr } = makeRing(slots, slotBytes, start);
      const guard = new Uint8Array(buffer, addr + Ring.bytesFor(slots, slotBytes));
      guard.fill(0x5a);
      const deadline = Date.now() + 20_000;
      const [p, c] = await Promise.all([
        runPeer({ buffer, addr, role: 'producer', total, seed: 1 + slots, deadline }),
        runPeer({ buffer, addr, role: 'consumer', total, seed: 7 + slotBytes, deadline }),
      ]);
      expect(p.error).toBeNull();
      expect(c.error).toBeNull();
      expect(p.done).toBe(total);
      expect(c.done).toBe(total);
      expect(p.sum).toBe(expectedSum(total));
      expect(c.sum).toBe(expectedSum(total));
      expect(guard.every((b) => b === 0x5a)).toBe(true);
      // Both sides did sleep (the wake-up path was exercised) and no sleep hit its timeout.
      expect(p.sleeps + c.sleeps).toBeGreaterThan(0);
      expect(p.stalls + c.stalls).toBe(0);
      // The indices advanced by exactly `total` and the ring is empty.
      const hdr = new Int32Array(buffer, addr, 32);
      expect(hdr[0]).toBe((start + total) | 0);
      expect(hdr[16]).toBe((start + total) | 0);
    });
  }

  it('event-loop consumer (Atomics.waitAsync) keeps up with a worker producer', async () => {
    const total = 50_000;
    const { buffer, addr, ring } = makeRing(32, 32);
    const producer = runPeer({ buffer, addr, role: 'producer', total, seed: 99, deadline: Date.now() + 20_000 });
    let sum = 0;
    let seq = 0;
    const w = ring.u32;
    while (seq < total) {
      const n = ring.available();
      if (n === 0) {
        await ring.waitReadableAsync(1000);
        continue;
      }
      for (let k = 0; k < n; k++) {
        const o = ring.peekWord(k);
        expect(w[o]).toBe(seq + k);
        sum = (sum + w[o + 1]!) >>> 0;
      }
      ring.release(n);
      seq += n;
    }
    const p = await producer;
    expect(p.error).toBeNull();
    expect(sum).toBe(expectedSum(total));
  });

  it('single-thread semantics: full, empty, batch reserve/publish, tryPush', () => {
    const { ring } = makeRing(4, 16);
    expect(ring.available()).toBe(0);
    expect(ring.reserve(10)).toBe(4);
    for (let k = 0; k < 3; k++) ring.u32[ring.wordOf(k)] = 100 + k;
    ring.publish(3);
    expect(ring.available()).toBe(3);
    expect(ring.tryPush([103, 0, 0, 0])).toBe(true);
    expect(ring.tryPush([104, 0, 0, 0])).toBe(false);
    expect(ring.reserve(1)).toBe(0);
    expect(ring.waitWritable(1, 1)).toBe(false);
    expect([0, 1, 2, 3].map((k) => ring.u32[ring.peekWord(k)])).toEqual([100, 101, 102, 103]);
    ring.release(2);
    expect(ring.reserve(4)).toBe(2);
    expect(ring.addrOf(0)).toBe(ring.slotBase + 0); // slot 4 & 3 = 0: wrapped
  });
});

// The sans-I/O transport between two endpoints over a seeded lossy network: every payload is
// delivered exactly once with its bytes intact, every send is acked, nothing fails, and once
// the traffic stops every context is reclaimed and no timer is left. Bare endpoints on the
// network the whole-driver simulation uses (test/sim/net.ts), on purpose: exactly-once delivery
// and context reclaim are the transport's promises, and an engine above it would mask a
// duplicate or an idle context kept alive by its own traffic.
import { describe, expect, it } from 'vitest';
import { crc32c as nodeCrc32c } from '@node-rs/crc32';
import { SimNet, clean, type Impairment } from '../../sim/net.js';
import { makePayload, payloadIndex, sameBytes, seededIds } from '../../sim/random.js';
import type { PollResult } from '../../../src/transport/udp/endpoint.js';

interface Flow {
  sent: Map<number, number>; // payload id -> index
  acked: Set<number>;
  got: Map<number, number>; // index -> count
  bytesOk: number;
  bad: number;
  failed: number;
}

function flow(): Flow {
  return { sent: new Map(), acked: new Set(), got: new Map(), bytesOk: 0, bad: 0, failed: 0 };
}

function sizeFor(i: number, max: number): number {
  // Mostly full datagrams, some small ones (control messages), a few odd sizes.
  const k = (i * 7919) % 10;
  return k < 7 ? max : k < 9 ? 4 + ((i * 131) % 200) : 4 + ((i * 977) % (max - 4));
}

function runTransfer(imp: Impairment, seed: number, bytesAB: number, bytesBA: number, mtu: number) {
  const net = new SimNet(imp, seed);
  const A = { host: '10.0.0.1', port: 4791 };
  const B = { host: '10.0.0.2', port: 4791 };
  const ab = flow();
  const ba = flow();
  const observe = (rx: Flow, tx: Flow, ep: () => { release(c: number, n: number): void }) => (r: PollResult) => {
    for (const d of r.delivered) {
      const idx = payloadIndex(d.payload);
      rx.got.set(idx, (rx.got.get(idx) ?? 0) + 1);
      const want = makePayload(idx, sizeFor(idx, maxPayload));
      if (sameBytes(d.payload, want)) rx.bytesOk += d.payload.length;
      else rx.bad++;
      ep().release(d.ctx, 1);
    }
    for (const id of r.acked) tx.acked.add(id);
    tx.failed += r.failed.length;
  };
  const opts = (s: number) => ({ mtu, idleMs: 5000, randomId: seededIds(s) });
  const a = net.add(A, opts(seed * 3 + 1), observe(ba, ab, () => a.ep));
  const b = net.add(B, opts(seed * 3 + 2), observe(ab, ba, () => b.ep));
  const maxPayload = a.ep.maxPayload;

  // Feed the senders a bounded amount at a time, as an engine bounded by maxSendWr would.
  let nextA = 0;
  let nextB = 0;
  let sentA = 0;
  let sentB = 0;
  const feed = () => {
    while (sentA < bytesAB && nextA - ab.acked.size < 2000) {
      const len = sizeFor(nextA, maxPayload);
      ab.sent.set(a.ep.send(B, makePayload(nextA, len), net.now), nextA);
      sentA += len;
      nextA++;
    }
    while (sentB < bytesBA && nextB - ba.acked.size < 2000) {
      const len = sizeFor(nextB, maxPayload);
      ba.sent.set(b.ep.send(A, makePayload(nextB, len), net.now), nextB);
      sentB += len;
      nextB++;
    }
  };
  const done = () => {
    feed();
    return sentA >= bytesAB && sentB >= bytesBA && ab.acked.size === ab.sent.size && ba.acked.size === ba.sent.size;
  };
  const steps = net.run(done, 2_000_000);
  // Let the delayed ACKs go out and the idle contexts be reclaimed.
  const tail = net.run(() => a.ep.contexts === 0 && b.ep.contexts === 0, 100_000);
  return { net, a, b, ab, ba, nextA, nextB, steps, tail };
}

function checkFlow(f: Flow, n: number, total: number): void {
  expect(f.failed).toBe(0);
  expect(f.bad).toBe(0);
  expect(f.sent.size).toBe(n);
  expect(f.acked.size).toBe(n);
  for (const id of f.sent.keys()) expect(f.acked.has(id)).toBe(true);
  expect(f.got.size).toBe(n);
  for (let i = 0; i < n; i++) expect(f.got.get(i)).toBe(1);
  expect(f.bytesOk).toBe(total);
}

const lossy: Impairment = {
  drop: 0.05, dup: 0.02, corrupt: 0.01, reorder: 0.05, reorderMs: 1, latencyMs: 0.05, jitterMs: 0.02,
  rateBytesPerMs: 300_000, maxQueueMs: 2,
};

describe('UDP transport under a deterministic lossy shim', () => {
  it('clean network: 8 MB each way with 1472-byte datagrams, exact, no retransmissions needed', () => {
    const r = runTransfer(clean, 7, 8 << 20, 1 << 20, 1472);
    checkFlow(r.ab, r.nextA, r.ab.bytesOk);
    checkFlow(r.ba, r.nextB, r.ba.bytesOk);
    expect(r.ab.bytesOk).toBeGreaterThanOrEqual(8 << 20);
    expect(r.a.ep.counters.badCrc + r.b.ep.counters.badCrc).toBe(0);
    expect(r.a.ep.contexts + r.b.ep.contexts).toBe(0);
    expect(r.a.ep.nextDeadline()).toBe(Infinity);
    expect(r.b.ep.nextDeadline()).toBe(Infinity);
  });

  for (const seed of [1, 2, 3]) {
    it(`5% drop + 2% dup + 1% corrupt + reorder, seed ${seed}: 12 MB + 3 MB exact, every send acked, no timers left`, () => {
      const r = runTransfer(lossy, seed, 12 << 20, 3 << 20, 1472);
      checkFlow(r.ab, r.nextA, r.ab.bytesOk);
      checkFlow(r.ba, r.nextB, r.ba.bytesOk);
      expect(r.ab.bytesOk).toBeGreaterThanOrEqual(12 << 20);
      expect(r.ba.bytesOk).toBeGreaterThanOrEqual(3 << 20);
      const s = r.net.stats;
      expect(s.dropped).toBeGreaterThan(0);
      expect(s.duplicated).toBeGreaterThan(0);
      expect(s.corrupted).toBeGreaterThan(0);
      expect(s.reordered).toBeGreaterThan(0);
      // Every corrupted datagram was caught by its trailer (none placed): CRC32C on the handshake's
      // datagrams (dstCtx 0), the context's xxh3 after it — which of them the shim hits is the seed's.
      const caught = r.a.ep.counters.badCrc + r.b.ep.counters.badCrc + r.a.ep.counters.badHash + r.b.ep.counters.badHash;
      expect(caught).toBeGreaterThan(0);
      expect(caught + r.a.ep.counters.malformed + r.b.ep.counters.malformed).toBeLessThanOrEqual(s.corrupted);
      expect(r.a.ep.contexts + r.b.ep.contexts).toBe(0);
      expect(r.a.ep.nextDeadline()).toBe(Infinity);
      expect(r.b.ep.nextDeadline()).toBe(Infinity);
    });
  }

  it('large datagrams (mtu 65000) under loss: 20 MB exact', () => {
    const r = runTransfer({ ...lossy, rateBytesPerMs: 1_000_000 }, 9, 20 << 20, 256 << 10, 65000);
    checkFlow(r.ab, r.nextA, r.ab.bytesOk);
    checkFlow(r.ba, r.nextB, r.ba.bytesOk);
  });

  it('heavy reordering and delay: spurious retransmits are suppressed as duplicates', () => {
    const imp = { ...clean, reorder: 0.3, reorderMs: 3, jitterMs: 0.5, dup: 0.05 };
    const r = runTransfer(imp, 11, 4 << 20, 1 << 20, 1472);
    checkFlow(r.ab, r.nextA, r.ab.bytesOk);
    checkFlow(r.ba, r.nextB, r.ba.bytesOk);
  });

  it('the CRC32C trailer matches an independent implementation', () => {
    const net = new SimNet(clean, 1);
    const a = net.add({ host: 'a', port: 1 }, { mtu: 1472 });
    a.ep.send({ host: 'b', port: 2 }, makePayload(5, 1000), 0);
    const out = a.ep.poll(0).datagrams;
    expect(out.length).toBe(1);
    const whole = Buffer.concat(out[0].parts);
    const body = whole.subarray(0, whole.length - 4);
    expect(whole.readUInt32LE(whole.length - 4)).toBe(nodeCrc32c(body));
  });
});

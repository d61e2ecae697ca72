// dev.stats().dedup: the device's chunk stores (summed) and the totals of every dedup transfer
// its senders and receivers finished, registered through the device's generic stats hook
// (verbs never imports dedup), and exported by SabreMetrics like any other dev.stats() key.
import { randomBytes } from 'node:crypto';
import { afterEach, describe, expect, it } from 'vitest';
import { DedupReceiver, DedupSender } from '../../src/dedup/endpoint.js';
import { dedupMemoryOf } from '../../src/dedup/memory.js';
import { QpLink, regLandingZone } from '../../src/dedup/qp-link.js';
import { qpLinkNode } from './qp-link-node.js';
import type { DedupDeviceStats } from '../../src/dedup/stats.js';
import { ChunkStore } from '../../src/dedup/store.js';
import { SabreError } from '../../src/index.js';
import { SabreMetrics } from '../../src/metrics/index.js';

const cleanup: Array<() => Promise<void> | void> = [];
afterEach(async () => {
  for (const f of cleanup.splice(0).reverse()) await f();
});

const node = () => qpLinkNode(cleanup);

describe('dev.stats().dedup', () => {
  it('the device hook: one source per name, names of dev.stats() keys refused, unregister removes it', async () => {
    const { d } = await node();
    expect(d.stats().dedup).toBeUndefined();
    const off = d.addStatsSource('feature', () => ({ n: 1 }));
    expect(d.stats().feature).toEqual({ n: 1 });
    expect(() => d.addStatsSource('feature', () => ({}))).toThrow(SabreError);
    expect(() => d.addStatsSource('memory', () => ({}))).toThrow(SabreError);
    expect(() => d.addStatsSource('directSegments', () => ({}))).toThrow(SabreError);
    expect(() => d.addStatsSource('Bad name', () => ({}))).toThrow(SabreError);
    off();
    expect(d.stats().feature).toBeUndefined();
  });

  it('counts the store (entries, bytes, hits, misses, evictions past its budget) and every transfer, both ends', async () => {
    const s = await node();
    const c = await node();
    await Promise.all([c.qp.connect({ address: s.d.address, qpn: s.qp.qpn }), s.qp.connect({ address: c.d.address, qpn: c.qp.qpn })]);
    const sLink = QpLink.open(s.qp, s.cq, s.pd);
    const cLink = QpLink.open(c.qp, c.cq, c.pd);
    cleanup.push(() => sLink.close(), () => cLink.close());
    const mem = dedupMemoryOf(s.pd);
    // A budget of 1 MiB: the third object (2 MiB of new chunks) pushes past it.
    const store = new ChunkStore(mem, { budgetBytes: 1 << 20 });
    cleanup.push(() => store.close());
    const zone = regLandingZone(s.pd, 4, 1 << 20);
    const tx = new DedupSender({ pipe: cLink, rdma: cLink, mem: dedupMemoryOf(c.pd) });
    const rx = new DedupReceiver({ pipe: sLink, mem, store, scope: 'client', zone: { addr: zone.addr, rkey: zone.rkey, length: zone.length }, slots: 4, key: new Uint8Array(32).fill(9) });
    cleanup.push(() => tx.close(), () => rx.close());
    await tx.ready();
    const move = async (b: Uint8Array) => {
      const [r, got] = await Promise.all([tx.send(b), rx.next()]);
      expect(Buffer.compare(got.bytes, b)).toBe(0);
      return r;
    };
    const a = new Uint8Array(randomBytes(512 * 1024));
    const r1 = await move(a);
    const r2 = await move(a); // every chunk held: nothing sent
    expect(r2.chunksSent).toBe(0);
    const big = new Uint8Array(randomBytes(2 << 20));
    const r3 = await move(big);

    const rs = s.d.stats().dedup as DedupDeviceStats;
    expect(rs.stores).toBe(1);
    expect(rs.store.entries).toBe(store.stats().entries);
    expect(rs.store.bytes).toBeLessThanOrEqual(1 << 20);
    expect(rs.store.evictions).toBeGreaterThan(0);
    expect(rs.store.hits).toBe(r1.chunks); // the repeat found every chunk
    expect(rs.store.misses).toBe(r1.chunks + r3.chunks);
    expect(rs.store.scopes).toBe(1);
    expect(rs.received).toMatchObject({
      transfers: 3, failed: 0, bytes: a.length * 2 + big.length, chunks: r1.chunks * 2 + r3.chunks,
      chunksFromStore: r1.chunks, chunksReceived: r1.chunks + r3.chunks, bytesReceived: a.length + big.length,
    });
    expect(rs.received.hashedInBand).toBe(rs.received.chunksReceived);
    const cs = c.d.stats().dedup as DedupDeviceStats;
    expect(cs.stores).toBe(0);
    expect(cs.sent).toMatchObject({ transfers: 3, failed: 0, bytes: a.length * 2 + big.length, chunksSent: r1.chunks + r3.chunks, bytesSent: a.length + big.length });

    // Exported by the metrics registry with the other dev.stats() keys.
    const m = new SabreMetrics({ defaultMetrics: false });
    m.addDevice(s.d, 'server');
    const text = await m.registry.metrics();
    expect(text).toMatch(new RegExp(`sabre_device_stat\\{[^}]*stat="dedup_store_entries"[^}]*\\} ${rs.store.entries}`));
    expect(text).toMatch(/stat="dedup_received_hashedInBand"/);

    store.close();
    expect((s.d.stats().dedup as DedupDeviceStats).stores).toBe(0);
  });
});

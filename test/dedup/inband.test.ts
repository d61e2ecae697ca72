// In-band hashing through a real device (docs/dedup.md "Hooking into place()"): the landing
// zone's region table entry names a zone directory, and the engine's own place() advances the
// armed slot's chunk map while RDMA WRITEs land — no test code between the wire and the hash.
//
// 1. Verbs level: one RDMA WRITE per segment (each at most one MTU), each awaited, so segments land
//    one at a time: the chunk's watermark equals the bytes landed so far and its status is
//    pending before its last segment, final at it; in-order, reversed and shuffled arrival give
//    the digest of @node-rs/xxhash; unhooked (setHashDir 0), the same writes hash nothing.
// 2. Transfer level: DedupSender → DedupReceiver over a QpLink: every received chunk was final
//    when its ROUND arrived (hashedInBand === chunksReceived); with inBand: false, none.
// On inproc, udp, udp with data-plane workers, and tcp. With workers the hashing still runs on
// the engine's thread: the workers check CRC32C, placement (and the hook in it) stays on that
// thread in real transfers (docs/dedup.md, "Hooking into place()", point 3, says why).
import { xxh3 } from '@node-rs/xxhash';
import { randomBytes } from 'node:crypto';
import { afterEach, describe, expect, it } from 'vitest';
import { DeviceMemory } from '../../src/dataplane/device-memory.js';
import { ChunkMap, ChunkStatus } from '../../src/dedup/chunk-map.js';
import { DedupReceiver, DedupSender } from '../../src/dedup/endpoint.js';
import { dedupMemoryOf } from '../../src/dedup/memory.js';
import { QpLink, regLandingZone } from '../../src/dedup/qp-link.js';
import { qpLinkNode } from './qp-link-node.js';
import { ChunkStore } from '../../src/dedup/store.js';
import { Access, Opcode, type OpenDeviceOptions } from '../../src/index.js';
import { DEDUP_ZONE_DIR, DEDUP_ZONE_MAGIC } from '../../src/wire/spec.js';
import { closeAll, connectPair, side, take, type Side } from '../verbs/helpers.js';

const cleanup: Array<() => Promise<void> | void> = [];
afterEach(async () => {
  for (const f of cleanup.splice(0).reverse()) await f();
});

const DEVICES: Array<[string, Partial<OpenDeviceOptions>]> = [
  ['inproc', { transport: 'inproc' }],
  ['udp', { transport: 'udp', host: '127.0.0.1', port: 0 }],
  ['udp with data-plane workers (CRC on a worker; place() and the hash on the engine thread)', { transport: 'udp', host: '127.0.0.1', port: 0, workers: 1 } as Partial<OpenDeviceOptions>],
  ['tcp', { transport: 'tcp', host: '127.0.0.1', port: 0 }],
];

async function sides(device: Partial<OpenDeviceOptions>): Promise<[Side, Side]> {
  const [a, b] = await connectPair(await side({ device, depth: 4096 }), await side({ device, depth: 4096 }));
  cleanup.push(() => closeAll(a, b));
  return [a, b];
}

/** A zone directory for `slots` slots of `slotLen` at `zoneBase`, every slot unarmed. */
function zoneDir(mem: DeviceMemory, zoneBase: number, slots: number, slotLen: number): { addr: number; arm: (s: number, map: number) => void } {
  const D = DEDUP_ZONE_DIR.fields;
  const addr = mem.alloc(DEDUP_ZONE_DIR.size + 4 * slots);
  const dv = mem.dataView();
  dv.setUint32(addr + D.slots.offset, slots, true);
  dv.setUint32(addr + D.slotLen.offset, slotLen, true);
  dv.setUint32(addr + D.zoneBase.offset, zoneBase, true);
  for (let s = 0; s < slots; s++) dv.setUint32(addr + DEDUP_ZONE_DIR.size + 4 * s, 0, true);
  dv.setUint32(addr + D.magic.offset, DEDUP_ZONE_MAGIC, true);
  cleanup.push(() => mem.free(addr));
  return { addr, arm: (s, map) => mem.dataView().setUint32(addr + DEDUP_ZONE_DIR.size + 4 * s, map, true) };
}

const shuffled = <T>(xs: T[], seed: number): T[] => {
  const out = xs.slice();
  let x = seed | 1;
  for (let i = out.length - 1; i > 0; i--) {
    x ^= x << 13; x >>>= 0; x ^= x >>> 17; x ^= x << 5; x >>>= 0;
    const j = x % (i + 1);
    [out[i], out[j]] = [out[j]!, out[i]!];
  }
  return out;
};

describe.each(DEVICES)('in-band hashing inside place() over %s', (_name, device) => {
  it('advances the chunk while its segments land, one RDMA WRITE at a time; same digest in every order; nothing when unhooked', async () => {
    const [a, b] = await sides(device);
    const mem = dedupMemoryOf(b.pd) as DeviceMemory;
    const SLOT = 128 * 1024;
    const zone = regLandingZone(b.pd, 2, SLOT);
    const idx = zone.rkey >>> 8;
    const dir = zoneDir(mem, zone.addr, 2, SLOT);
    // Slot 1 is the tracked one (so the directory's slot arithmetic is exercised).
    const slotBase = zone.addr + SLOT;
    const lens = [20_000, 9_000, 31_337];
    const total = lens.reduce((x, y) => x + y, 0);
    const data = new Uint8Array(randomBytes(total));
    const src = a.pd.regMr(total, Access.LocalWrite);
    src.buffer.set(data);
    const expected = (() => {
      let at = 0;
      return lens.map((len) => ({ len, hash: xxh3.xxh128(data.subarray((at += len) - len, at)) }));
    })();
    const map = new ChunkMap(mem, slotBase, SLOT, 16);
    cleanup.push(() => map.free());
    const SEG = 1000; // below every transport's MTU: one write is one segment
    const segs: Array<[number, number]> = [];
    for (let off = 0; off < total; off += SEG) segs.push([off, Math.min(SEG, total - off)]);
    let wr = 0;
    const write = async ([off, len]: [number, number]): Promise<void> => {
      a.qp.postSend({ wrId: ++wr, opcode: Opcode.RdmaWrite, sgList: [{ addr: src.addr + off, length: len, lkey: src.lkey }], remoteAddr: slotBase + off, rkey: zone.rkey });
      const [wc] = await take(a.cq, 1);
      expect(wc!.status).toBe(0);
    };

    mem.regions.setHashDir(idx, dir.addr);
    expect(mem.regions.hashDir(idx)).toBe(dir.addr);
    dir.arm(1, map.addr);
    for (const [order, seq] of [['in order', segs], ['reversed', segs.slice().reverse()], ['shuffled', shuffled(segs, 7)]] as const) {
      map.arm(expected);
      let landed = 0;
      for (const s of seq) {
        await write(s);
        if (order === 'in order' && s[0] < lens[0]!) {
          landed += s[1];
          // The first chunk's hash has advanced over exactly what landed, before its last segment.
          expect(map.mark(0)).toBe(Math.min(landed, lens[0]!));
          expect(map.status(0)).toBe(landed < lens[0]! ? ChunkStatus.Pending : ChunkStatus.Ok);
        }
      }
      const st = map.stats();
      if (st.overflow === 0) {
        expect(st.ok, order).toBe(lens.length); // final as the last segment landed
        expect(map.finish(), order).toBe(0);
      } else {
        // A shuffle can outrun a chunk's 8 remembered intervals: finish() completes those (counted).
        expect(order).toBe('shuffled');
        expect(map.finish() + st.ok, order).toBe(lens.length);
      }
      expect(map.stats().ok, order).toBe(lens.length);
      expect(map.stats().bytesHashed, order).toBe(total); // each byte hashed once
      lens.forEach((_, i) => expect(map.digest(i), `${order}: chunk ${i}`).toBe(expected[i]!.hash));
    }
    // Unhooked: the same writes are placed and not hashed.
    mem.regions.setHashDir(idx, 0);
    map.arm(expected);
    for (const s of segs) await write(s);
    expect(Buffer.compare(zone.buffer.subarray(SLOT, SLOT + total), data)).toBe(0);
    expect(map.stats().bytesHashed).toBe(0);
    expect(map.status(0)).toBe(ChunkStatus.Pending);
    // A new registration of the index starts unhooked (write() zeroes the word).
    mem.regions.setHashDir(idx, dir.addr);
    zone.deregister();
    const again = b.pd.regMr(4096, Access.LocalWrite);
    if (again.rkey >>> 8 === idx) expect(mem.regions.hashDir(idx)).toBe(0);
  });

  it('a dedup transfer finds every received chunk already hashed at its ROUND (hashedInBand === chunksReceived)', async () => {
    const dev = () => qpLinkNode(cleanup, device as OpenDeviceOptions);
    const s = await dev();
    const c = await dev();
    await Promise.all([c.qp.connect({ address: s.d.address, qpn: s.qp.qpn }), s.qp.connect({ address: c.d.address, qpn: c.qp.qpn })]);
    const sLink = QpLink.open(s.qp, s.cq, s.pd);
    const cLink = QpLink.open(c.qp, c.cq, c.pd);
    cleanup.push(() => sLink.close(), () => cLink.close());
    const mem = dedupMemoryOf(s.pd);
    const store = new ChunkStore(mem, { budgetBytes: 32 << 20 });
    cleanup.push(() => store.close());
    const KEY = new Uint8Array(32).fill(3);
    const run = async (inBand: boolean) => {
      const zone = regLandingZone(s.pd, 4, 1 << 20);
      // The sender first: it takes the link's messages before the receiver's HELLO can arrive.
      const tx = new DedupSender({ pipe: cLink, rdma: cLink, mem: dedupMemoryOf(c.pd) });
      const rx = new DedupReceiver({ pipe: sLink, mem, store, scope: `peer-${inBand}`, zone: { addr: zone.addr, rkey: zone.rkey, length: zone.length }, slots: 4, key: KEY, inBand });
      await tx.ready();
      const obj = new Uint8Array(randomBytes(3 << 20));
      const [res, got] = await Promise.all([tx.send(obj), rx.next()]);
      expect(Buffer.compare(got.bytes, obj)).toBe(0);
      expect(rx.inBand).toBe(inBand);
      tx.close();
      rx.close();
      expect((mem as DeviceMemory).regions.hashDir(zone.rkey >>> 8)).toBe(0); // close() unhooks the zone
      zone.deregister();
      return { res, stats: got.stats };
    };
    const hooked = await run(true);
    expect(hooked.stats.chunksReceived).toBe(hooked.res.chunks);
    expect(hooked.stats.chunksReceived).toBeGreaterThan(100);
    expect(hooked.stats.hashedInBand).toBe(hooked.stats.chunksReceived);
    const plain = await run(false);
    expect(plain.stats.chunksReceived).toBeGreaterThan(100);
    expect(plain.stats.hashedInBand).toBe(0);
  });
});

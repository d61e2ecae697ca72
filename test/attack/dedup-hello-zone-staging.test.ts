// A dedup receiver (a hostile client on get --dedup: the server sends the file from a
// DedupSource; a hostile server on put --dedup of a file) sends a HELLO the sender core takes
// (64 slots, slotLen >= max) but whose landing zone is huge: 64 slots of 64 MiB. The windowed
// sender (./src/dedup/source-window.ts) reserved slots * slotLen bytes of its own registered
// memory for staging the needed runs: 4 GiB chosen by the peer, for a 200 KB object — device
// memory the sender's process grows to and never gives back, or a failed send. Checked: the
// sender never asks for more staging than the object's own length (what staging it whole takes)
// and the transfer gets as far as its OFFERs. Failed before the fix (reserve asked 4 GiB). Over a
// real tcp channel an honest receiver with the largest zone its options allow (256 MiB) grew the
// sender's device memory by 260 MiB for a 1 MiB source before the fix (272839744 bytes seen).
import { beforeAll, describe, expect, it } from 'vitest';
import { DeviceMemory } from '../../src/dataplane/device-memory.js';
import { DedupSender, type DedupSource, type MessagePipe, type RdmaWritePath } from '../../src/dedup/endpoint.js';
import { encode } from '../../src/dedup/messages.js';
import { DedupKind } from '../../src/wire/spec.js';

let dm: DeviceMemory;
beforeAll(async () => {
  dm = await DeviceMemory.create({ initialBytes: 16 << 20, maximumBytes: 64 << 20, workerSlots: 0 });
});

function hello(slots: number, slotLen: number): Uint8Array {
  return encode({
    kind: DedupKind.Hello, avg: 4096, min: 1024, max: 16384, normalization: 2, hashAlg: 1, zoneAddr: 0, zoneRkey: 1, slotLen, slots,
    maxEntries: 64, maxChunks: 1 << 20, seed: 0n, key: new Uint8Array(32),
  } as never);
}

describe('a HELLO naming a landing zone far larger than the object', () => {
  for (const [what, slots, slotLen] of [['64 slots of 64 MiB', 64, 64 << 20], ['1 slot of 4 GiB - 1', 1, 2 ** 32 - 1]] as const) {
    it(`${what}: the sender stages no more than the object, and the transfer starts`, async () => {
      let handler: (b: Uint8Array) => void = () => undefined;
      const sent: Uint8Array[] = [];
      const asked: number[] = [];
      const pipe: MessagePipe = { send: (b) => void sent.push(b), onMessage: (h) => void (handler = h) };
      const take = (n: number): number => {
        asked.push(n);
        return dm.alloc(Math.max(n, 1));
      };
      const rdma: RdmaWritePath = {
        stage: (bytes) => {
          const at = take(bytes.length);
          dm.u8().set(bytes, at);
          return at;
        },
        reserve: (n) => {
          const addr = take(n);
          return { addr, view: dm.u8().subarray(addr, addr + n) };
        },
        write: () => Promise.resolve(),
      };
      const obj = new Uint8Array(200_000).map((_, i) => (i * 2654435761) >>> 24);
      const src: DedupSource = { length: obj.length, read: async (into, at) => {
        const n = Math.min(into.length, obj.length - at);
        into.set(obj.subarray(at, at + n));
        return n;
      } };
      const tx = new DedupSender({ pipe, rdma, mem: dm, step: 64 << 10 });
      queueMicrotask(() => handler(hello(slots, slotLen)));
      let err: unknown;
      const p = tx.send(src).catch((e: unknown) => (err = e));
      for (let i = 0; i < 100 && sent.length === 0 && err === undefined; i++) await new Promise((r) => setTimeout(r, 10));
      tx.close(); // no receiver answers: the transfer stays open
      void p;
      expect(err).toBeUndefined();
      expect(Math.max(0, ...asked)).toBeLessThanOrEqual(obj.length);
      expect(sent.length).toBeGreaterThan(0);
    }, 10_000);
  }
});

describe('over a real channel: a receiver with the largest landing zone it may have (256 MiB)', () => {
  it('a 1 MiB source costs the sender about the object, not the peer\'s zone', async () => {
    const { connectChannel, listenChannels, openDevice } = await import('../../src/index.js');
    const a = await openDevice({ transport: 'tcp', host: '127.0.0.1', port: 0 });
    const b = await openDevice({ transport: 'tcp', host: '127.0.0.1', port: 0 });
    try {
      const l = listenChannels(b, { service: 9, dedupZoneBytes: 256 << 20 });
      const [c, s] = await Promise.all([connectChannel(a, b.address, { service: 9 }), l.accept(10_000)]);
      const x = new Uint8Array(1 << 20).map((_, i) => (i * 2654435761) >>> 24);
      const before = a.dataPlane.stats().used;
      let most = before;
      const src: DedupSource = { length: x.length, read: async (into, at) => {
        most = Math.max(most, a.dataPlane.stats().used);
        const n = Math.min(into.length, x.length - at);
        into.set(x.subarray(at, at + n));
        return n;
      } };
      const [got] = await Promise.all([s.next(), c.sendDedupFrom(src)]);
      expect(Buffer.compare(got.value as Uint8Array, x)).toBe(0);
      // The sender held the object's staging and the chunker's state: well under the zone.
      expect(Math.max(most, a.dataPlane.stats().used) - before).toBeLessThan(16 << 20);
      l.close();
    } finally {
      await a.close();
      await b.close();
    }
  }, 30_000);
});

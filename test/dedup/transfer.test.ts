// The dedup transfer cores (src/dedup/transfer.ts), driven deterministically with no sockets:
// messages are handed across in order, and a "write" action copies the object's bytes into the
// receiver's landing zone the way RDMA WRITE placement does (segment by segment, each advancing
// the slot's chunk map — the in-band hookup, simulated at the same kernel call place() will make).
// Shows: exact assembly from store + new chunks, only missing chunks move, a chunk that does not
// match its hash fails both sides, and hostile messages end the transfer with a counted status.
import { randomBytes } from 'node:crypto';
import { beforeAll, describe, expect, it } from 'vitest';
import { DeviceMemory } from '../../src/dataplane/device-memory.js';
import { ChunkHasher } from '../../src/dedup/hash.js';
import { DeviceChunker } from '../../src/dedup/chunker.js';
import { decode, encode } from '../../src/dedup/messages.js';
import { ChunkStore } from '../../src/dedup/store.js';
import { DedupRecvCore, DedupSendCore, type RecvAction, type RecvStats, type SendAction, type SendResult } from '../../src/dedup/transfer.js';
import { ErrorCode, type SabreError } from '../../src/core/errors.js';
import { DedupKind } from '../../src/wire/spec.js';

let dm: DeviceMemory;
beforeAll(async () => {
  dm = await DeviceMemory.create({ initialBytes: 64 << 20, maximumBytes: 256 << 20, workerSlots: 0 });
});

const KEY = new Uint8Array(32).fill(5);
/** Byte equality without vitest's element-by-element deep compare (seconds on megabytes). */
const same = (x: Uint8Array | undefined, y: Uint8Array): boolean => x !== undefined && Buffer.compare(x, y) === 0;
const SLOTS = 3;
const SLOT_LEN = 256 * 1024;

interface Harness {
  tx: DedupSendCore;
  rx: DedupRecvCore;
  store: ChunkStore;
  send(bytes: Uint8Array, opts?: { corrupt?: number; mtu?: number; tamper?: (m: Uint8Array) => Uint8Array; replay?: 'same' | 'flipped' }): { result?: SendResult; error?: SabreError; got?: Uint8Array; stats?: RecvStats; rxError?: SabreError; msgs: number[] };
}

function harness(store = new ChunkStore(dm), o: { maxEntries?: number; maxTotal?: number; maxChunks?: number; scope?: string } = {}): Harness {
  const zoneAddr = dm.alloc(SLOTS * SLOT_LEN);
  const { scope = 'peer', ...lim } = o;
  const rx = new DedupRecvCore({ mem: dm, store, scope, zone: { addr: zoneAddr, rkey: 0x1234, length: SLOTS * SLOT_LEN }, slots: SLOTS, avg: 8192, key: KEY, ...lim });
  const tx = new DedupSendCore({ window: 2 });
  const toTx: Uint8Array[] = [];
  const toRx: Uint8Array[] = [];
  const pushRx = (as: RecvAction[], sink: { got?: Uint8Array; stats?: RecvStats; rxError?: SabreError }): void => {
    for (const a of as) {
      if (a.type === 'send') toTx.push(a.bytes);
      else if (a.type === 'delivered') {
        sink.got = a.bytes;
        sink.stats = a.stats;
      } else sink.rxError = a.error;
    }
  };
  pushRx(rx.start(), {});
  for (const m of toTx.splice(0)) tx.onMessage(m);
  return {
    tx, rx, store,
    send(bytes, opt = {}) {
      const out: ReturnType<Harness['send']> = { msgs: [] };
      const src = dm.alloc(Math.max(1, bytes.length));
      dm.u8().set(bytes, src);
      const h = tx.hello!;
      const chunker = new DeviceChunker(dm, { avg: h.avg, min: h.min, max: h.max, normalization: h.normalization, key: h.key });
      const lens = chunker.chunkAll(src, bytes.length);
      const hashes = new ChunkHasher(dm, 'xxh3-128', h.seed).hashRun(src, lens);
      const writes: Array<Extract<SendAction, { type: 'write' }>> = [];
      const pushTx = (as: SendAction[]): void => {
        for (const a of as) {
          if (a.type === 'send') toRx.push(opt.tamper ? opt.tamper(a.bytes) : a.bytes);
          else if (a.type === 'write') writes.push(a);
          else if (a.type === 'done') out.result = a.result;
          else out.error = a.error;
        }
      };
      tx.begin(bytes.length);
      // The manifest in three steps, as the shell streams it.
      const third = Math.ceil(lens.length / 3);
      for (let i = 0; i < lens.length; i += third) pushTx(tx.addChunks(lens.slice(i, i + third), hashes.subarray(i * 32, (i + third) * 32)));
      pushTx(tx.endChunks());
      const mtu = opt.mtu ?? 1400;
      for (let guard = 0; guard < 100_000 && (toRx.length || toTx.length || writes.length); guard++) {
        const m = toRx.shift();
        if (m) {
          out.msgs.push(decode(m).kind);
          pushRx(rx.onMessage(m), out);
        }
        const b = toTx.shift();
        if (b) pushTx(tx.onMessage(b));
        const w = writes.shift();
        if (w) {
          // RDMA WRITE placement: segments of `mtu`, reversed within each piece (out of order),
          // each placed into the zone and then handed to chunkHashZone(directory, to, len) —
          // the call the engine's place() makes once hooked (docs/dedup.md).
          for (const p of w.pieces) {
            const segs: Array<[number, number]> = [];
            for (let off = 0; off < p.len; off += mtu) segs.push([off, Math.min(mtu, p.len - off)]);
            for (const [off, len] of segs.reverse()) {
              dm.u8().copyWithin(p.remoteAddr + off, src + p.off + off, src + p.off + off + len);
              if (opt.corrupt !== undefined && p.off + off <= opt.corrupt && opt.corrupt < p.off + off + len) dm.u8()[p.remoteAddr + opt.corrupt - p.off]! ^= 1;
              dm.kernels.chunkHashZone(rx.zoneDirectory, p.remoteAddr + off, len);
            }
            // A retransmitted segment placed again after it was hashed: the same bytes (udp
            // retransmit) or, from a hostile peer, different ones.
            if (opt.replay && p.len > 0) {
              if (opt.replay === 'flipped') dm.u8()[p.remoteAddr]! ^= 1;
              dm.kernels.chunkHashZone(rx.zoneDirectory, p.remoteAddr, Math.min(mtu, p.len));
            }
          }
          pushTx(tx.onWriteDone(w.slot));
        }
      }
      chunker.free();
      dm.free(src);
      return out;
    },
  };
}

describe('dedup transfer cores', () => {
  it('assembles exactly, sends only what the store lacks, hashes arrivals in-band', () => {
    const h = harness();
    const a = new Uint8Array(randomBytes(2_000_000));
    const r1 = h.send(a);
    expect(r1.error).toBeUndefined();
    expect(same(r1.got, a)).toBe(true);
    expect(r1.result!.bytesSent).toBe(a.length); // empty store: everything moved
    expect(r1.stats!.chunksReceived).toBe(r1.result!.chunks);
    // Every received chunk was final before its ROUND arrived: hashed as its segments landed.
    expect(r1.stats!.hashedInBand).toBe(r1.stats!.chunksReceived);
    // Half old, half new: only (about) the new half moves.
    const b = new Uint8Array(2_000_000);
    b.set(a.subarray(0, 1_000_000));
    b.set(randomBytes(1_000_000), 1_000_000);
    const r2 = h.send(b);
    expect(same(r2.got, b)).toBe(true);
    expect(r2.result!.bytesSent).toBeGreaterThan(1_000_000);
    expect(r2.result!.bytesSent).toBeLessThan(1_000_000 + 60_000); // + the chunk straddling the seam
    expect(r2.stats!.bytesFromStore + r2.stats!.bytesReceived).toBe(b.length);
    // The same object again: nothing moves but the manifest.
    const r3 = h.send(b);
    expect(same(r3.got, b)).toBe(true);
    expect(r3.result!.bytesSent).toBe(0);
    expect(r3.msgs.filter((k) => k === DedupKind.Round)).toHaveLength(0);
    // A block repeated inside one object moves once (the repeats are copied from the first).
    const block = new Uint8Array(randomBytes(400_000));
    const c = new Uint8Array(1_300_000);
    c.set(block, 0);
    c.set(block, 450_000);
    c.set(randomBytes(50_000), 400_000);
    c.set(block, 900_000);
    const r4 = h.send(c);
    expect(same(r4.got, c)).toBe(true);
    expect(r4.stats!.chunksRepeated).toBeGreaterThan(30);
    expect(r4.result!.bytesSent).toBeLessThan(400_000 + 50_000 + 6 * 32_768);
    // Zero bytes is an object too.
    expect(same(h.send(new Uint8Array(0)).got, new Uint8Array(0))).toBe(true);
  });

  it('scopes per peer: one store, two peers, and a peer never resolves to chunks the other sent', () => {
    const store = new ChunkStore(dm);
    const alice = harness(store, { scope: 'alice' });
    const bob = harness(store, { scope: 'bob' });
    const x = new Uint8Array(randomBytes(600_000));
    expect(alice.send(x).result!.bytesSent).toBe(x.length);
    expect(alice.send(x).result!.bytesSent).toBe(0); // alice's own chunks: held
    const fromBob = bob.send(x);
    expect(fromBob.result!.bytesSent).toBe(x.length); // the same bytes, another scope: all sent
    expect(same(fromBob.got, x)).toBe(true);
    expect(store.stats().scopes).toBe(2);
  });

  it('a chunk that does not match its hash fails the transfer on both sides, nothing delivered', () => {
    const h = harness();
    const a = new Uint8Array(randomBytes(700_000));
    const r = h.send(a, { corrupt: 500_000 });
    expect(r.got).toBeUndefined();
    expect(r.rxError?.code).toBe(ErrorCode.Malformed);
    expect(r.rxError?.message).toMatch(/did not match its hash/);
    expect(r.error?.code).toBe(ErrorCode.Malformed);
    // Nothing of the bad transfer reached the store under a wrong hash: a clean resend works.
    const again = h.send(a);
    expect(same(again.got, a)).toBe(true);
  });

  it('a segment placed twice (a retransmit) is hashed again at ROUND: same bytes pass, changed bytes fail', () => {
    const h = harness();
    const a = new Uint8Array(randomBytes(700_000));
    const r = h.send(a, { replay: 'same' });
    expect(same(r.got, a)).toBe(true);
    expect(r.stats!.rehashedRounds).toBe(r.stats!.rounds); // every round had a rewritten segment
    const b = new Uint8Array(randomBytes(700_000));
    const bad = h.send(b, { replay: 'flipped' });
    expect(bad.got).toBeUndefined();
    expect(bad.rxError?.message).toMatch(/did not match its hash/);
    expect(same(h.send(b).got, b)).toBe(true);
  });

  it('ends the transfer on hostile messages: oversized pages, objects over the limit, a lying ROUND', () => {
    const tooMany = harness(new ChunkStore(dm), { maxEntries: 4 });
    // The sender obeys HELLO's maxEntries, so forge a page past it.
    const page = encode({ kind: DedupKind.Offer, xfer: 9, total: 5 * 8192, last: true, chunks: 5, first: 0, count: 5, lens: new Uint32Array(5).fill(8192), hashes: new Uint8Array(5 * 32) });
    const r1 = tooMany.rx.onMessage(page);
    expect(r1.find((x) => x.type === 'failed')).toMatchObject({ error: { code: ErrorCode.LimitExceeded } });
    const end = r1.find((x) => x.type === 'send')!;
    expect(decode((end as { bytes: Uint8Array }).bytes)).toMatchObject({ kind: DedupKind.End, status: 3 });

    const big = harness(new ChunkStore(dm), { maxTotal: 1 << 20 });
    const r2 = big.rx.onMessage(encode({ kind: DedupKind.Offer, xfer: 1, total: 2 << 20, last: false, chunks: 0, first: 0, count: 0, lens: new Uint32Array(0), hashes: new Uint8Array(0) }));
    expect(r2.find((x) => x.type === 'failed')).toMatchObject({ error: { code: ErrorCode.LimitExceeded } });

    // An honest sender whose object has more chunks than the receiver takes: refused, both sides.
    const few = harness(new ChunkStore(dm), { maxChunks: 3 });
    const r5 = few.send(new Uint8Array(randomBytes(200_000)));
    expect(r5.rxError?.code).toBe(ErrorCode.LimitExceeded);
    expect(r5.error?.code).toBe(ErrorCode.LimitExceeded);
    expect(r5.got).toBeUndefined();

    const liar = harness();
    const r3 = liar.rx.onMessage(encode({ kind: DedupKind.Round, xfer: 1, slot: 0, first: 0, count: 1, bytes: 10 }));
    expect(r3.find((x) => x.type === 'failed')).toMatchObject({ error: { code: ErrorCode.Malformed } });
    // Chunk lengths outside min..max, and bytes that are not a message at all.
    const r4 = liar.rx.onMessage(encode({ kind: DedupKind.Offer, xfer: 2, total: 10, last: true, chunks: 2, first: 0, count: 2, lens: Uint32Array.of(5, 5), hashes: new Uint8Array(64) }));
    expect(r4.find((x) => x.type === 'failed')).toMatchObject({ error: { code: ErrorCode.Malformed } });
    expect(liar.rx.onMessage(new Uint8Array([2, 1, 0])).find((x) => x.type === 'failed')).toBeDefined();
    const truncated = encode({ kind: DedupKind.Offer, xfer: 3, total: 100, last: true, chunks: 1, first: 0, count: 1, lens: Uint32Array.of(100), hashes: new Uint8Array(32) });
    expect(liar.rx.onMessage(truncated.subarray(0, truncated.length - 1)).find((x) => x.type === 'failed')).toBeDefined();
    // A receiver that failed a transfer still serves the next one.
    const ok = liar.send(new Uint8Array(randomBytes(100_000)));
    expect(ok.got?.length).toBe(100_000);
  });

  it('the sender rejects a NEED that answers no page and a GRANT for a slot it does not hold out', () => {
    const h = harness();
    expect(h.tx.onMessage(encode({ kind: DedupKind.Grant, xfer: 1, slot: 0 }))[0]).toMatchObject({ type: 'failed' });
    expect(h.tx.onMessage(encode({ kind: DedupKind.Need, xfer: 1, first: 0, count: 1, bitmap: new Uint8Array(1) }))[0]).toMatchObject({ type: 'failed' });
  });
});

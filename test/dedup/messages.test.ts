// The dedup message codec: every kind round-trips (fast-check), and arbitrary or mutated bytes
// either decode or throw DedupMalformed — never another exception, never a read past the input —
// and a receiver fed them answers with actions instead of throwing.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { feed } from './cores.js';
import { DeviceMemory } from '../../src/dataplane/device-memory.js';
import { decode, DedupMalformed, type DedupMessage, encode } from '../../src/dedup/messages.js';
import { ChunkStore } from '../../src/dedup/store.js';
import { DedupEndStatus, DedupRecvCore } from '../../src/dedup/transfer.js';
import { ErrorCode, SabreError } from '../../src/core/errors.js';
import { DedupKind } from '../../src/wire/spec.js';

const u32 = fc.integer({ min: 0, max: 0xffff_ffff });
const message: fc.Arbitrary<DedupMessage> = fc.oneof(
  fc.record({
    kind: fc.constant(DedupKind.Hello), hashAlg: fc.integer({ min: 0, max: 255 }), normalization: fc.integer({ min: 0, max: 255 }),
    avg: u32, min: u32, max: u32, zoneAddr: fc.integer({ min: 0, max: Number.MAX_SAFE_INTEGER }), zoneRkey: u32, slotLen: u32,
    slots: u32, maxEntries: u32, maxChunks: u32, seed: fc.bigInt({ min: 0n, max: (1n << 64n) - 1n }), key: fc.uint8Array({ minLength: 32, maxLength: 32 }),
  }),
  fc.integer({ min: 0, max: 20 }).chain((count) => fc.record({
    kind: fc.constant(DedupKind.Offer), xfer: u32, total: fc.integer({ min: 0, max: Number.MAX_SAFE_INTEGER }), last: fc.boolean(), chunks: u32,
    first: u32, count: fc.constant(count), lens: fc.uint32Array({ minLength: count, maxLength: count }), hashes: fc.uint8Array({ minLength: count * 32, maxLength: count * 32 }),
  })),
  fc.integer({ min: 0, max: 100 }).chain((count) => fc.record({
    kind: fc.constant(DedupKind.Need), xfer: u32, first: u32, count: fc.constant(count), bitmap: fc.uint8Array({ minLength: (count + 7) >> 3, maxLength: (count + 7) >> 3 }),
  })),
  fc.record({ kind: fc.constant(DedupKind.Round), xfer: u32, slot: u32, first: u32, count: u32, bytes: u32 }),
  fc.record({ kind: fc.constant(DedupKind.Grant), xfer: u32, slot: u32 }),
  fc.record({ kind: fc.constant(DedupKind.End), xfer: u32, status: u32, detail: u32, total: fc.integer({ min: 0, max: Number.MAX_SAFE_INTEGER }) }),
  fc.record({ kind: fc.constant(DedupKind.Abort), xfer: u32, status: u32 }),
) as fc.Arbitrary<DedupMessage>;

const norm = (m: DedupMessage): unknown => JSON.parse(JSON.stringify(m, (_, v) => (typeof v === 'bigint' ? v.toString() : v instanceof Uint8Array || v instanceof Uint32Array ? [...v] : v)));

describe('dedup messages', () => {
  it('every kind round-trips', () => {
    fc.assert(fc.property(message, (m) => {
      expect(norm(decode(encode(m)))).toEqual(norm(m));
    }), { numRuns: 500 });
  });

  it('arbitrary and mutated bytes decode or throw DedupMalformed, and a receiver never throws on them', async () => {
    const dm = await DeviceMemory.create({ initialBytes: 8 << 20, maximumBytes: 64 << 20, workerSlots: 0 });
    const store = new ChunkStore(dm);
    const rx = new DedupRecvCore({ mem: dm, store, scope: 'fuzz', zone: { addr: dm.alloc(1 << 20), rkey: 1, length: 1 << 20 }, slots: 4, avg: 8192, key: new Uint8Array(32), maxTotal: 1 << 20 });
    const mutated = fc.tuple(message, fc.array(fc.tuple(fc.nat(), fc.integer({ min: 0, max: 255 })), { maxLength: 6 }), fc.nat()).map(([m, flips, cut]) => {
      const b = encode(m);
      for (const [at, v] of flips) if (b.length) b[at % b.length] = v;
      return b.subarray(0, b.length ? cut % (b.length + 1) : 0);
    });
    fc.assert(fc.property(fc.oneof(fc.uint8Array({ maxLength: 200 }), mutated), (b) => {
      let malformed = false;
      try {
        decode(b);
      } catch (e) {
        expect(e).toBeInstanceOf(DedupMalformed);
        malformed = true;
      }
      const actions = feed(rx, b);
      // Whatever the receiver answers is well formed: what it sends decodes, a failure is a SabreError.
      for (const a of actions) {
        if (a.kind === 'send') expect(() => decode(a.bytes)).not.toThrow();
        else if (a.kind === 'failed') expect(a.error).toBeInstanceOf(SabreError);
      }
      // Bytes that do not decode end the transfer: an End(Malformed) to the peer, then the failure.
      if (malformed) {
        expect(actions.map((a) => a.kind)).toEqual(['send', 'failed']);
        const [end, failed] = actions;
        expect(end.kind === 'send' && decode(end.bytes)).toMatchObject({ kind: DedupKind.End, status: DedupEndStatus.Malformed });
        expect(failed.kind === 'failed' && failed.error.code).toBe(ErrorCode.Malformed);
      }
    }), { numRuns: 3000 });
  });
});

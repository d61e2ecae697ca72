// The receiver checks what a first OFFER page declares (the object's total, the chunks that total
// needs at the largest chunk, the page's entry count, a last page's chunk count) against its own
// limits before it allocates anything for the object, and counts every transfer ended for going
// past them in dev.stats().dedup.received.overLimit.
import { beforeAll, describe, expect, it } from 'vitest';
import { feed } from './cores.js';
import { DeviceMemory } from '../../src/dataplane/device-memory.js';
import { DedupReceiver } from '../../src/dedup/endpoint.js';
import { decode, encode } from '../../src/dedup/messages.js';
import { dedupTotals } from '../../src/dedup/stats.js';
import { ChunkStore } from '../../src/dedup/store.js';
import { DedupRecvCore, type RecvAction } from '../../src/dedup/transfer.js';
import { ErrorCode } from '../../src/core/errors.js';
import { DedupKind } from '../../src/wire/spec.js';

let dm: DeviceMemory;
beforeAll(async () => {
  dm = await DeviceMemory.create({ initialBytes: 32 << 20, maximumBytes: 64 << 20, workerSlots: 0 });
});

const SLOT = 64 * 1024;
const zone = () => ({ addr: dm.alloc(2 * SLOT), rkey: 0x1234, length: 2 * SLOT });
const core = (lim: { maxTotal?: number; maxChunks?: number; maxEntries?: number }) =>
  new DedupRecvCore({ mem: dm, store: new ChunkStore(dm), scope: 'p', zone: zone(), slots: 2, avg: 8192, key: new Uint8Array(32), ...lim });

/** A first OFFER page: `count` entries of one chunk (the same hash), of `len` bytes each. */
const offer = (total: number, count: number, len: number, o: { last?: boolean; chunks?: number } = {}) =>
  encode({
    kind: DedupKind.Offer, xfer: 1, total, last: o.last ?? false, chunks: o.chunks ?? 0, first: 0, count,
    lens: new Uint32Array(count).fill(len), hashes: new Uint8Array(32 * count).fill(7),
  });

const ended = (as: RecvAction[]) => {
  const end = as.find((a) => a.kind === 'send');
  return { status: end && (decode((end as { bytes: Uint8Array }).bytes) as { status?: number }).status, error: as.find((a) => a.kind === 'failed') };
};

describe('dedup receiver limits, checked before anything is allocated', () => {
  it('refuses 256 MiB of one repeated chunk as the first page when its maximum is 1 MiB: no object allocated', () => {
    const rx = core({ maxTotal: 1 << 20 });
    const r = ended(feed(rx, offer(256 << 20, 1024, 32768)));
    expect(r.status).toBe(3);
    expect(r.error).toMatchObject({ error: { code: ErrorCode.LimitExceeded } });
    expect(rx.assemblyBytes).toBe(0);
  });

  it('refuses a total that needs more chunks than maxChunks, even at the largest chunk, on its first page', () => {
    const rx = core({ maxChunks: 3 });
    // 4 * 32 KiB + 1 bytes cannot be cut into 3 chunks of at most 32 KiB.
    const r = ended(feed(rx, offer(4 * 32768 + 1, 0, 32768)));
    expect(r.status).toBe(3);
    expect(rx.assemblyBytes).toBe(0);
    // Within the limit the page is answered, and the object is allocated then.
    const ok = core({ maxChunks: 3 });
    const a = feed(ok, offer(3 * 32768, 1, 32768));
    expect(a.map((x) => x.kind)).toEqual(['send']);
    expect(ok.assemblyBytes).toBe(3 * 32768);
  });

  it('refuses a first page with more entries than maxEntries, or a last page whose count does not close it, before allocating', () => {
    const wide = core({ maxEntries: 4 });
    expect(ended(feed(wide, offer(5 * 8192, 5, 8192, { last: true, chunks: 5 }))).status).toBe(3);
    expect(wide.assemblyBytes).toBe(0);
    const liar = core({});
    expect(ended(feed(liar, offer(2 * 8192, 2, 8192, { last: true, chunks: 9 }))).status).toBe(2);
    expect(liar.assemblyBytes).toBe(0);
    // The receiver serves the next transfer.
    expect(feed(liar, offer(8192, 1, 8192, { last: true, chunks: 1 })).map((x) => x.kind)).toEqual(['send']);
  });

  it('counts each refusal in dev.stats().dedup.received.overLimit', () => {
    let handler: ((b: Uint8Array) => void) | undefined;
    const sent: Uint8Array[] = [];
    const rx = new DedupReceiver({
      pipe: { send: (b) => void sent.push(b), onMessage: (f) => void (handler = f) },
      mem: dm, store: new ChunkStore(dm), scope: 'p', zone: zone(), slots: 2, avg: 8192, key: new Uint8Array(32), maxTotal: 1 << 20,
      onObject: () => undefined,
    });
    const t = dedupTotals(dm).received;
    const before = { overLimit: t.overLimit, failed: t.failed };
    handler!(offer(256 << 20, 1024, 32768));
    handler!(offer(2 << 20, 0, 32768));
    expect(t.overLimit - before.overLimit).toBe(2);
    expect(t.failed - before.failed).toBe(2);
    rx.close();
  });
});

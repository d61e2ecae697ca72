// A hostile dedup sender opens a transfer (total > 0) and then sends OFFER pages with no entries
// that are not the last. Each passed every check of the receiver's page (no lengths, sum within
// the total, fewest chunks still within maxChunks), was answered with a NEED and grew the
// transfer's page tables; nothing bounded the number of pages (maxChunks bounds chunks,
// maxEntries one page's entries), and on a channel every one of them refreshed the dedup idle
// deadline, holding the transfer and its object (allocated at the first page) indefinitely.
// Checked: an empty page that is not the last ends the transfer as malformed at once (END status
// 2, counted in received.failed), and a transfer takes no more pages than maxChunks allows.
// Failed before the fix (50 000 empty pages were all answered).
import { beforeAll, describe, expect, it } from 'vitest';
import { DeviceMemory } from '../../src/dataplane/device-memory.js';
import { DedupReceiver, type MessagePipe } from '../../src/dedup/endpoint.js';
import { decode, encode } from '../../src/dedup/messages.js';
import { dedupTotals } from '../../src/dedup/stats.js';
import { ChunkStore } from '../../src/dedup/store.js';
import { DedupRecvCore } from '../../src/dedup/transfer.js';
import { DedupEndStatus, DedupKind } from '../../src/wire/dedup-spec.js';
import { pollAll } from '../../src/core/sans-io.js';
import { within } from '../lifecycle/within.js';

let dm: DeviceMemory;
beforeAll(async () => {
  dm = await DeviceMemory.create({ initialBytes: 16 << 20, maximumBytes: 64 << 20, workerSlots: 0 });
});

const page = (first: number, count: number, total: number, last = false): Uint8Array =>
  encode({ kind: DedupKind.Offer, xfer: 7, total, last, chunks: last ? first + count : 0, first, count, lens: new Uint32Array(count).fill(count ? 1024 : 0), hashes: new Uint8Array(32 * count).fill(first + 1) });

describe('dedup receiver: empty OFFER pages', () => {
  it('an empty page that is not the last is malformed: the transfer ends at once (bounded: 50 000 tries)', () => {
    const store = new ChunkStore(dm);
    const zone = dm.alloc(2 * 65536);
    const rx = new DedupRecvCore({ mem: dm, store, scope: 'evil', zone: { addr: zone, rkey: 1, length: 2 * 65536 }, slots: 2, maxChunks: 4, maxTotal: 1 << 20 });
    rx.start();
    pollAll(rx);
    let needs = 0;
    let failed = 0;
    let endStatus = -1;
    const deadline = performance.now() + 10_000;
    for (let i = 0; i < 50_000 && failed === 0 && performance.now() < deadline; i++) {
      rx.handleMessage(page(0, 0, 4096), 0);
      for (const a of pollAll(rx)) {
        if (a.kind === 'send') {
          const m = decode(a.bytes);
          if (m.kind === DedupKind.Need) needs++;
          if (m.kind === DedupKind.End) endStatus = m.status;
        }
        if (a.kind === 'failed') failed++;
      }
    }
    expect(failed).toBe(1);
    expect(needs).toBe(0);
    expect(endStatus).toBe(DedupEndStatus.Malformed);
    expect(rx.active).toBe(false);
    expect(rx.assemblyBytes).toBe(0);
    rx.close();
    store.close();
    dm.free(zone);
  });

  it('through a DedupReceiver: refused and counted in received.failed; the receiver serves the next transfer', async () => {
    let handler: (b: Uint8Array) => void = () => undefined;
    const sent: Uint8Array[] = [];
    const pipe: MessagePipe = { send: (b) => void sent.push(b), onMessage: (h) => void (handler = h) };
    const store = new ChunkStore(dm);
    const zone = { addr: dm.alloc(1 << 18), rkey: 0x99, length: 1 << 18 };
    const rx = new DedupReceiver({ pipe, mem: dm, store, scope: 'evil2', zone, slots: 2, avg: 4096, inBand: false });
    const failedBefore = dedupTotals(dm).received.failed;
    const got = rx.next().then(() => undefined, (e: { code?: string }) => e);
    handler(page(0, 1, 8192)); // a real first page: the transfer begins
    handler(page(1, 0, 8192)); // then an empty one, not the last
    expect((await within(got, 2000))?.code).toBe('ERR_MALFORMED');
    expect(dedupTotals(dm).received.failed - failedBefore).toBe(1);
    expect(rx.busy).toBe(false);
    // Well-formed pages of at most one entry each still work up to the last.
    const pages = sent.length;
    handler(encode({ kind: DedupKind.Offer, xfer: 8, total: 2048, last: false, chunks: 0, first: 0, count: 1, lens: Uint32Array.of(1024), hashes: new Uint8Array(32).fill(3) }));
    handler(encode({ kind: DedupKind.Offer, xfer: 8, total: 2048, last: true, chunks: 2, first: 1, count: 1, lens: Uint32Array.of(1024), hashes: new Uint8Array(32).fill(4) }));
    expect(sent.slice(pages).map((b) => decode(b).kind)).toEqual([DedupKind.Need, DedupKind.Need]);
    rx.close();
    store.close();
    dm.free(zone.addr);
  });
});

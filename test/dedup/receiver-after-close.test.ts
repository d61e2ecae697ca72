// A message that arrives on the receiver's pipe after DedupReceiver.close(). The pipe is the
// caller's and may stay open, and close() frees the core's zone directory and slot maps; the
// shell handed such a message to the closed core, which began a transfer (allocating its
// object), made fresh chunk maps nobody would free, wrote a map address into the freed
// directory (memory the allocator may have handed to someone else) and answered the peer with a
// NEED. Checked: the closed receiver drops it — no answer, no transfer, no write into freed
// memory — and a closed core's handleMessage is a no-op. Failed before the fix.
import { beforeAll, describe, expect, it } from 'vitest';
import { DeviceMemory } from '../../src/dataplane/device-memory.js';
import { DedupReceiver, type MessagePipe } from '../../src/dedup/endpoint.js';
import { encode } from '../../src/dedup/messages.js';
import { ChunkStore } from '../../src/dedup/store.js';
import { DedupRecvCore } from '../../src/dedup/transfer.js';
import { DEDUP_ZONE_DIR, DedupKind } from '../../src/wire/dedup-spec.js';
import { pollAll } from '../../src/core/sans-io.js';

let dm: DeviceMemory;
beforeAll(async () => {
  dm = await DeviceMemory.create({ initialBytes: 32 << 20, maximumBytes: 256 << 20, workerSlots: 0 });
});

const SLOTS = 4;
const offer = (): Uint8Array =>
  encode({ kind: DedupKind.Offer, xfer: 1, total: 20_000, last: true, chunks: 3, first: 0, count: 3, lens: Uint32Array.of(8192, 8192, 20_000 - 16384), hashes: new Uint8Array(3 * 32).fill(1) });

describe('a dedup receiver after close()', () => {
  it('a message on the still-open pipe is dropped: no answer, no transfer, no write into freed memory', () => {
    let handler: (b: Uint8Array) => void = () => undefined;
    const sent: Uint8Array[] = [];
    const pipe: MessagePipe = { send: (b) => void sent.push(b), onMessage: (h) => void (handler = h) };
    const store = new ChunkStore(dm);
    const zone = { addr: dm.alloc(1 << 20), rkey: 0x1234, length: 1 << 20 };
    const rx = new DedupReceiver({ pipe, mem: dm, store, scope: 's', zone, slots: SLOTS, key: new Uint8Array(32).fill(7), avg: 8192, inBand: false });
    const dir = rx.core.zoneDirectory;
    rx.close();
    // Someone else's allocation of the same size (the allocator may hand back the freed block).
    const size = DEDUP_ZONE_DIR.size + 4 * SLOTS;
    const other = dm.alloc(size);
    dm.u8().fill(0xee, other, other + size);
    const snapshot = dm.u8().slice(dir, dir + size);
    const answered = sent.length;
    handler(offer());
    expect(sent.length - answered, 'a closed receiver answered the peer').toBe(0);
    expect(rx.core.active, 'a closed receiver began a transfer').toBe(false);
    expect(Buffer.compare(dm.u8().slice(dir, dir + size), snapshot), 'written into freed device memory').toBe(0);
    dm.free(other);
    store.close();
    dm.free(zone.addr);
  });

  it('a closed DedupRecvCore ignores handleMessage (no actions, no allocation)', () => {
    const store = new ChunkStore(dm);
    const zone = dm.alloc(1 << 20);
    const rx = new DedupRecvCore({ mem: dm, store, scope: 'c', avg: 8192, zone: { addr: zone, rkey: 1, length: 1 << 20 }, slots: SLOTS });
    rx.start();
    pollAll(rx);
    rx.close();
    rx.handleMessage(offer(), 0);
    expect(pollAll(rx)).toEqual([]);
    expect(rx.active).toBe(false);
    expect(rx.assemblyBytes).toBe(0);
    rx.close(); // twice: nothing freed twice
    store.close();
    dm.free(zone);
  });
});

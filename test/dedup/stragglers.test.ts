// What one end still sends of a transfer that has failed — the ROUNDs and OFFER pages a sender
// sent before it heard the receiver's END, a second END — reaches the other end after the
// failure, and on a channel maybe during the next transfer. The receiver answered each such
// straggler with another END and a second error for the application, and the sender took that
// END for its next transfer's and failed it ("END for no transfer"): one bad chunk on a channel
// over tcp failed the dedup sends after it. Now both ends drop what belongs to a transfer that
// has ended.
import { randomBytes } from 'node:crypto';
import { beforeAll, describe, expect, it } from 'vitest';
import { DeviceMemory } from '../../src/dataplane/device-memory.js';
import { decode, encode } from '../../src/dedup/messages.js';
import { DedupEndStatus, DedupKind } from '../../src/wire/dedup-spec.js';
import { feed, harness, same } from './cores.js';

let dm: DeviceMemory;
beforeAll(async () => {
  dm = await DeviceMemory.create({ initialBytes: 64 << 20, maximumBytes: 256 << 20, workerSlots: 0 });
});

describe('dedup transfer cores: stragglers of a failed transfer', () => {
  it('the receiver drops a late ROUND and OFFER page of the transfer it failed: no END, no second error', () => {
    const h = harness(dm);
    const sent: Uint8Array[] = [];
    const a = new Uint8Array(randomBytes(700_000));
    const r = h.send(a, { corrupt: 500_000, tamper: (m) => (sent.push(m.slice()), m) });
    expect(r.rxError?.message).toMatch(/did not match its hash/);
    const round = sent.filter((m) => decode(m).kind === DedupKind.Round).at(-1)!;
    // A later page of it (this object's manifest is one page: the same entries, as its second).
    const first = decode(sent.find((m) => decode(m).kind === DedupKind.Offer)!);
    const page = encode({ ...first, first: (first as { count: number }).count } as Parameters<typeof encode>[0]);
    expect(feed(h.rx, round)).toEqual([]);
    expect(feed(h.rx, page)).toEqual([]);
    // The next transfer is byte-exact.
    expect(same(h.send(a).got, a)).toBe(true);
  });

  it('the sender drops a second END of the transfer that failed, also while its next transfer runs', () => {
    const h = harness(dm);
    const a = new Uint8Array(randomBytes(700_000));
    const r = h.send(a, { corrupt: 500_000 });
    expect(r.error?.message).toMatch(/did not match its hash/);
    // The END the receiver sent for it (its xfer from the receiver's own answers).
    const ends = r.answers.map((m) => decode(m)).filter((m) => m.kind === DedupKind.End);
    expect(ends.length).toBeGreaterThan(0);
    const again = encode(ends[0]!);
    expect(feed(h.tx, again)).toEqual([]);
    h.tx.begin(1000); // the next transfer under way
    expect(feed(h.tx, again).filter((x) => x.kind === 'failed')).toEqual([]);
    expect(feed(h.tx, encode({ kind: DedupKind.End, xfer: (decode(again) as { xfer: number }).xfer, status: DedupEndStatus.Malformed, detail: 0, total: 0 }))).toEqual([]);
  });
});

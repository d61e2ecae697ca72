// OFFER pages fit the pipe's messages: a receiver's HELLO may allow far more entries per page
// (maxEntries) than the pipe carries (a channel: what the peer takes). The sender cut pages by
// maxEntries only, and a channel dropped the message it refused without a word, so the send
// failed much later with a misleading ERR_TIMEOUT. Checked on the sender's core: with
// maxMessage set, every OFFER page fits it; a pipe that cannot carry one entry refuses the
// HELLO at once (and tells the receiver: ABORT status 5).
import { describe, expect, it } from 'vitest';
import { pollAll } from '../../src/core/sans-io.js';
import { decode, encode } from '../../src/dedup/messages.js';
import { DedupSendCore, type SendAction } from '../../src/dedup/transfer.js';
import { DedupEndStatus, DedupKind } from '../../src/wire/dedup-spec.js';

const hello = (maxEntries: number): Uint8Array =>
  encode({ kind: DedupKind.Hello, hashAlg: 1, normalization: 2, avg: 4096, min: 1024, max: 16384, zoneAddr: 0, zoneRkey: 1, slotLen: 1 << 18, slots: 2, maxEntries, maxChunks: 1 << 20, seed: 0n, key: new Uint8Array(32) });

describe('OFFER pages and the pipe\'s message size', () => {
  it('pages are cut to maxMessage whatever maxEntries the HELLO allows', () => {
    const tx = new DedupSendCore({ maxMessage: 1000 });
    tx.handleMessage(hello(1 << 20), 0);
    expect(pollAll(tx)).toEqual([]);
    tx.begin(100 * 4096);
    tx.addChunks(new Array(100).fill(4096), new Uint8Array(100 * 32).fill(5));
    tx.endChunks();
    const pages = pollAll(tx).filter((a): a is Extract<SendAction, { kind: 'send' }> => a.kind === 'send');
    expect(pages.length).toBeGreaterThan(1);
    for (const p of pages) expect(p.bytes.length).toBeLessThanOrEqual(1000);
    const first = decode(pages[0]!.bytes);
    expect(first.kind === DedupKind.Offer && first.count).toBe(Math.floor((1000 - 8 - 20) / 36));
  });

  it('a pipe too small for one entry: the HELLO is refused at once, and the receiver told', () => {
    const tx = new DedupSendCore({ maxMessage: 40 });
    tx.handleMessage(hello(64), 0);
    const as = pollAll(tx);
    expect(as.map((a) => a.kind)).toEqual(['send', 'failed']);
    expect(decode((as[0] as { bytes: Uint8Array }).bytes)).toEqual({ kind: DedupKind.Abort, xfer: 0, status: DedupEndStatus.HelloRefused });
    expect((as[1] as { error: { code: string } }).error.code).toBe('ERR_LIMIT_EXCEEDED');
  });
});

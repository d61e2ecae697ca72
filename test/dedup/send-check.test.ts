// The sender's own check of the lengths its chunker gave (src/dedup/send-core.ts addChunks): a
// chunk below the minimum that is not the object's last can only come from a chunker whose state
// changed under it, and the sender says so itself (InvalidState, ABORT to the receiver) instead of
// offering it, so the receiver's "chunk length outside min..max" is left to lengths the wire changed.
import { describe, expect, it } from 'vitest';
import { ErrorCode } from '../../src/core/errors.js';
import { decode, encode } from '../../src/dedup/messages.js';
import { DedupSendCore, type SendAction } from '../../src/dedup/transfer.js';
import { DedupKind } from '../../src/wire/spec.js';

const hello = encode({
  kind: DedupKind.Hello, avg: 4096, min: 1024, max: 16384, normalization: 2, hashAlg: 1, zoneAddr: 0, zoneRkey: 1, slotLen: 1 << 18, slots: 2,
  maxEntries: 4, maxChunks: 1 << 20, seed: 0n, key: new Uint8Array(32),
} as never);

function drain(tx: DedupSendCore): SendAction[] {
  const out: SendAction[] = [];
  for (let a = tx.pollAction(); a; a = tx.pollAction()) out.push(a);
  return out;
}

const offered = (as: SendAction[]): number[] =>
  as.flatMap((a) => (a.kind === 'send' ? [decode(a.bytes)] : [])).flatMap((m) => (m.kind === DedupKind.Offer ? [...m.lens] : []));

describe('the dedup sender checks its chunker\'s lengths', () => {
  it('a short chunk in the middle of the object: InvalidState naming the chunker, an ABORT, never offered', () => {
    const tx = new DedupSendCore({ window: 4 });
    tx.handleMessage(hello, 0);
    tx.begin(5000 + 300 + 5000 + 5000);
    tx.addChunks([5000, 300], new Uint8Array(64)); // 300 may still be the last chunk: not yet known
    const first = drain(tx);
    expect(first.some((a) => a.kind === 'failed')).toBe(false);
    tx.addChunks([5000, 5000], new Uint8Array(64)); // now it is not
    const as = [...first, ...drain(tx)];
    const failed = as.find((a) => a.kind === 'failed');
    expect(failed?.kind === 'failed' && failed.error.code).toBe(ErrorCode.InvalidState);
    expect(failed?.kind === 'failed' && failed.error.message).toMatch(/sender's chunker gave chunk 1 a length of 300/);
    expect(as.some((a) => a.kind === 'send' && decode(a.bytes).kind === DedupKind.Abort)).toBe(true);
    expect(offered(as)).not.toContain(300);
  });

  it('the newest chunk of a batch is not offered before the next batch shows whether it was the last', () => {
    const tx = new DedupSendCore({ window: 4 });
    tx.handleMessage(hello, 0);
    tx.begin(3 * 5000 + 300 + 5000);
    tx.addChunks([5000, 5000, 5000, 300], new Uint8Array(4 * 32)); // a whole page's worth (maxEntries 4)
    const first = drain(tx);
    expect(offered(first)).not.toContain(300);
    tx.addChunks([5000], new Uint8Array(32));
    const as = [...first, ...drain(tx)];
    expect(as.find((a) => a.kind === 'failed')).toBeDefined();
    expect(offered(as)).not.toContain(300);
  });

  it('a short last chunk is the object\'s end and goes out; a length past max is refused at once', () => {
    const tx = new DedupSendCore({ window: 4 });
    tx.handleMessage(hello, 0);
    tx.begin(5000 + 300);
    tx.addChunks([5000, 300], new Uint8Array(64));
    tx.endChunks();
    const as = drain(tx);
    expect(as.some((a) => a.kind === 'failed')).toBe(false);
    expect(offered(as)).toEqual([5000, 300]);
    const big = new DedupSendCore({ window: 4 });
    big.handleMessage(hello, 0);
    big.begin(20000);
    big.addChunks([20000], new Uint8Array(32));
    expect(drain(big).find((a) => a.kind === 'failed')).toBeDefined();
  });
});

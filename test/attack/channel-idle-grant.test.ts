// A connected channel peer that grants this end big slots it never asked for — in its HELLO
// (phase 0 of 64 KiB slots) or by an unsolicited GRANT — while this end sends nothing. The
// staging for writes above the inline size was registered the moment the grant took effect:
// an idle channel end held maxStageBytes (256 KiB here) besides its ~2 KiB, for as long as
// the peer liked — the M2 idle footprint undone by the peer's word. Staging is registered at
// the first write that needs it now, as the inline stage already was.
import { describe, expect, it } from 'vitest';
import { ctrlImm, encodeCtrl } from '../../src/channel/wire.js';
import { CHAN_HELLO_BUF, ChanType } from '../../src/wire/channel-spec.js';
import { pattern, SimPair } from '../channel/sim.js';

const SMALL = [{ slotSize: 256, slots: 4 }, { slotSize: 4096, slots: 8 }, { slotSize: 32768, slots: 8 }];
/** What an idle end registers: its fixed region (HELLO buffer, mailbox, scratch) and phase 0's slots. */
const idleBytes = (p: SimPair): number => p.a.core.fixed.length;

describe('an idle channel end and the slots its peer grants', () => {
  it('a HELLO granting 4 x 64 KiB slots: the idle end registers no staging; its first big message does, and arrives', () => {
    const p = new SimPair({ a: { ladder: SMALL }, b: { ladder: [{ slotSize: 65536, slots: 4 }] } });
    p.run(p.now + 1000);
    expect(p.a.connected).toBe(true);
    expect(p.a.core.stats().sendEagerSize).toBe(65536);
    expect(p.a.mem.used).toBe(idleBytes(p));
    expect(p.a.core.registeredBytes).toBe(idleBytes(p));
    const m = pattern(50_000, 3);
    p.send(p.a, m);
    p.run(p.now + 100);
    expect(Buffer.from(p.b.received[0] as Uint8Array).equals(Buffer.from(m))).toBe(true);
    expect(p.a.core.stats().eagerSent).toBe(1);
  });

  it('an unsolicited GRANT of 8 x 32 KiB slots to an idle end: the SWITCH goes, no staging is registered', () => {
    const p = new SimPair({ a: { ladder: SMALL }, b: { ladder: SMALL } });
    p.run(p.now + 1000);
    const before = p.a.mem.used;
    const grant = { epoch: 1, slots: 8, slotSize: 32768, addr: 0x5000_0000, rkey: 0x1234, phase: 2 };
    const bytes = encodeCtrl({ type: ChanType.Grant, hdr: { flags: 0, ctrlCredits: 0, epoch: 0, slotCredits: 0, consumed: 0 }, grant });
    // Into a's mailbox, its next slot (nothing came there yet), with the credit b's HELLO had.
    p.a.mem.write(p.a.core.fixed, CHAN_HELLO_BUF, bytes);
    p.a.core.handleImm(ctrlImm(0), bytes.length, p.now);
    expect(p.a.core.failure).toBeUndefined();
    expect(p.a.core.stats()).toMatchObject({ peerEpoch: 1, sendEagerSize: 32768 });
    expect(p.a.mem.used).toBe(before);
    expect(before).toBeLessThan(4096);
  });
});

// A peer whose HELLO places its mailbox so near 2^53 that the later slots' addresses are not
// safe integers. The decoder checked the mailbox address alone, so the HELLO was taken, the
// channel opened, and its third control message would fail at the post (verbs refuses an unsafe
// remoteAddr: the channel then fails ERR_CLOSED, "posting failed", long after the lie). The
// whole mailbox is checked when the HELLO is decoded now (ADDR_RANGE), as a grant's slots are.
import { describe, expect, it } from 'vitest';
import { decodeCtrl, encodeCtrl } from '../../src/channel/wire.js';
import { setChanHelloMboxAddr } from '../../src/wire/channel-fields.gen.js';
import { CHAN_HDR, CHAN_VERSION, ChanType } from '../../src/wire/channel-spec.js';
import { pattern, SimPair } from '../channel/sim.js';

const TOP = Number.MAX_SAFE_INTEGER - 63;

describe('a HELLO whose mailbox runs past 2^53', () => {
  it('is refused when decoded (ADDR_RANGE); one that ends below 2^53 decodes', () => {
    const hello = (mboxAddr: number) => encodeCtrl({
      type: ChanType.Hello, hdr: { flags: 0, ctrlCredits: 0, epoch: 0, slotCredits: 0, consumed: 0 },
      hello: { version: CHAN_VERSION, ctrlSlots: 8, window: 64, maxEager: 256, maxMessage: 1 << 20, mboxRkey: 1, mboxAddr },
      grant: { epoch: 0, slots: 4, slotSize: 256, addr: 0x1000, rkey: 2, phase: 0 },
    });
    expect(decodeCtrl(hello(TOP))).toEqual({ ok: false, error: 'ADDR_RANGE' });
    expect(decodeCtrl(hello(Number.MAX_SAFE_INTEGER - 8 * 32)).ok).toBe(true);
  });

  it('fails the channel at the HELLO (protocol), before anything is posted to it', () => {
    const p = new SimPair({
      filter: (i) => {
        if (i.from === 'b' && i.ctrl === ChanType.Hello && i.w.kind === 'send') setChanHelloMboxAddr(i.w.bytes, CHAN_HDR.size, TOP);
        return 'deliver';
      },
    });
    p.run(p.now + 1);
    for (let k = 0; k < 20; k++) p.send(p.a, pattern(3000, k));
    p.run(p.now + 1000);
    expect(p.a.connected).toBe(false);
    expect(p.a.failed?.kind).toBe('protocol');
    expect(p.a.failed?.message).toMatch(/HELLO \(ADDR_RANGE\)/);
  });
});

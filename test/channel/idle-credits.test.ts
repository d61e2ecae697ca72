// An idle channel end posts only the receives its HELLO granted credits for: a few mailbox slots
// and a few of phase 0's slots; the rest are posted (and their credits returned) once the peer
// first uses each pool. Driven through the sans-I/O core (test/channel/sim.ts), where every
// receive a write consumes must have been posted (a missing one is an RNR failure there).
import { describe, expect, it } from 'vitest';
import { IDLE_MBOX_CREDITS } from '../../src/channel/core.js';
import { IDLE_SLOT_CREDITS } from '../../src/channel/inbound.js';
import { encodeCtrl, type CtrlMsg } from '../../src/channel/wire.js';
import { CHAN_HELLO_BUF, CHAN_MBOX_SLOT, CHAN_VERSION, ChanType } from '../../src/wire/channel-spec.js';
import { pattern, SimEnd, SimPair } from './sim.js';

describe('idle channel: receives posted only for the credits granted', () => {
  it('with default options each idle end keeps 2 + 2 receives posted (not 8 + 4), and 1,408 B registered', () => {
    expect(IDLE_MBOX_CREDITS).toBe(2);
    expect(IDLE_SLOT_CREDITS).toBe(2);
    const p = new SimPair();
    p.run(p.now + 100);
    expect(p.a.connected && p.b.connected).toBe(true);
    for (const e of [p.a, p.b]) {
      expect(e.posted.length, `${e.name}: receives posted`).toBe(IDLE_MBOX_CREDITS + IDLE_SLOT_CREDITS);
      expect(e.core.stats().ctrlCredits, `${e.name}: mailbox credits from the peer's HELLO`).toBe(IDLE_MBOX_CREDITS);
      expect(e.core.stats().registeredBytes).toBe(CHAN_HELLO_BUF + 8 * CHAN_MBOX_SLOT + CHAN_HELLO_BUF + 4 * 256);
      expect(e.core.stats().ctrlSent, `${e.name}: nothing said after HELLO`).toBe(0);
    }
  });

  it('writes above the scratch (64 B) register a one-slot stage at the first of them, reused after; an idle end has none', () => {
    const p = new SimPair();
    p.run(p.now + 100);
    const idle = CHAN_HELLO_BUF + 8 * CHAN_MBOX_SLOT + CHAN_HELLO_BUF + 4 * 256;
    expect(p.a.core.stats().registeredBytes).toBe(idle);
    p.send(p.a, pattern(CHAN_HELLO_BUF, 1));
    p.run(p.now + 100);
    expect(p.a.core.stats().registeredBytes, 'a write the scratch holds').toBe(idle);
    const big = [pattern(CHAN_HELLO_BUF + 1, 2), pattern(256, 3), pattern(200, 4)];
    for (const m of big) {
      p.send(p.a, m);
      p.run(p.now + 100);
      expect(p.a.core.stats().registeredBytes, 'one 256-byte stage, made once').toBe(idle + 256);
    }
    expect(p.b.received.map((m) => Buffer.from(m as Uint8Array).toString('hex'))).toEqual([pattern(CHAN_HELLO_BUF, 1), ...big].map((m) => Buffer.from(m).toString('hex')));
  });

  it('the first message opens both pools: all receives posted, all credits back, and traffic past the idle credits flows', () => {
    const p = new SimPair();
    p.run(p.now + 100);
    const first = pattern(10, 1);
    p.send(p.a, first);
    p.run(p.now + 100);
    expect(p.b.received.length).toBe(1);
    // b: its slots opened by the data, its mailbox by the CREDIT it sent back.
    expect(p.b.posted.length).toBe(8 + 4);
    // a: its mailbox opened by that CREDIT; its own slots stay withheld (b sent no data).
    expect(p.a.posted.length).toBe(8 + IDLE_SLOT_CREDITS);
    // b's CREDIT returned its 6 withheld mailbox credits; opening a's mailbox made 7 owed to b,
    // which a returned at once in a CREDIT of its own (b may hold a single credit by then).
    expect(p.a.core.stats().ctrlCredits).toBe(8 - 1);
    expect(p.a.core.stats().creditOnly).toBe(1);
    expect(p.b.core.stats().ctrlCredits).toBe(IDLE_MBOX_CREDITS - 1 + 7);
    // More messages than the idle credits, one at a time (no packing), and a control-heavy
    // rendezvous, both ways: nothing missing, in order.
    const sent: Uint8Array[] = [];
    for (let i = 0; i < 12; i++) {
      const m = pattern(200, 10 + i);
      sent.push(m);
      p.send(p.a, m);
      p.send(p.b, m);
    }
    const big = pattern(100_000, 7);
    p.send(p.a, big);
    p.send(p.b, big);
    p.run(p.now + 2000);
    expect(p.a.failed).toBeUndefined();
    expect(p.b.failed).toBeUndefined();
    expect(p.b.received.length).toBe(1 + 13);
    expect(p.a.received.length).toBe(13);
    expect((p.a.received[12] as Uint8Array).length).toBe(big.length);
  });

  it('a HELLO that grants 1 mailbox credit, more than its mailbox, or more slot credits than slots is refused', () => {
    for (const hdr of [
      { ctrlCredits: 1, slotCredits: 0 },
      { ctrlCredits: 9, slotCredits: 0 },
      { ctrlCredits: 0, slotCredits: 5 },
    ]) {
      const e = new SimEnd('a', {}, 0);
      const hello = encodeCtrl({
        type: ChanType.Hello, hdr: { flags: 0, epoch: 0, consumed: 0, ...hdr },
        hello: { version: CHAN_VERSION, ctrlSlots: 8, window: 64, maxEager: 32768, maxMessage: 1 << 26, mboxRkey: 1, mboxAddr: 0x1000 },
        grant: { epoch: 0, slots: 4, slotSize: 256, addr: 0x2000, rkey: 2, phase: 0 },
      } as CtrlMsg);
      e.mem.write(e.core.fixed, 0, hello);
      e.core.handleRecv(hello.length, 0);
      expect(e.core.failure?.message, JSON.stringify(hdr)).toMatch(/HELLO refused: .*credits/);
    }
  });

  it('a version-1 HELLO (an end that takes the whole pool at once) is refused at connect, by its version', () => {
    const e = new SimEnd('a', {}, 0);
    const hello = encodeCtrl({
      type: ChanType.Hello, hdr: { flags: 0, epoch: 0, consumed: 0, ctrlCredits: 0, slotCredits: 0 },
      hello: { version: 1, ctrlSlots: 8, window: 64, maxEager: 32768, maxMessage: 1 << 26, mboxRkey: 1, mboxAddr: 0x1000 },
      grant: { epoch: 0, slots: 4, slotSize: 256, addr: 0x2000, rkey: 2, phase: 0 },
    } as CtrlMsg);
    e.mem.write(e.core.fixed, 0, hello);
    e.core.handleRecv(hello.length, 0);
    expect(e.core.failure?.message).toMatch(/HELLO refused: version 1/);
  });
});

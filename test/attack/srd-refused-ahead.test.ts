// A connected srd peer whose message found no posted receive (its turn refused: srd-refusal.ts)
// then sends segments of forged later ssns. Each was remembered (the flow's `asked` map) to be
// asked for again in its turn, up to SSN_WINDOW (2^20) per flow, outside the out-of-order
// budget and counted nowhere: 20 000 such segments left 19 999 entries (a flow can be made to
// hold a million, and a QP 1024 such flows). A flow now keeps one range of refused ssns (two
// numbers, srd-refusal.ts), whatever is forged; nothing is charged to the shared budget, so a
// real sender's deep pipeline that meets one refusal still completes (the second case).
import { describe, expect, it } from 'vitest';
import { Opcode, WcStatus } from '../../src/core/enums.js';
import type { Frame, SegFrame } from '../../src/core/frame.js';
import { clean } from '../sim/net.js';
import { Sim } from '../sim/sim.js';
import { piece, recv, wr } from '../sim/work.js';

describe('srd: later messages refused while the flow\'s turn is refused', () => {
  it('20 000 forged later ssns cost the flow one range, nothing of the shared budget, and the flow\'s refused turn still lands', async () => {
    const sim = new Sim(7, clean);
    const a = await sim.node({ bounds: { maxOooEntries: 256 } });
    const b = await sim.node({ bounds: { maxOooEntries: 256 } });
    // No RNR retries: the refusal of message 1 fails it and the flow, which restarts at ssn 1.
    const qa = a.qp(1, 'srd', { rnrRetry: 0 });
    const qb = b.qp(1, 'srd');
    const src = a.regMr(32);
    const dst = b.regMr(32);
    a.link.held = [];
    a.postTo(qa, b.addr, qb.qpn, wr({ wrId: 1, opcode: Opcode.Send }, [piece(src, 0, 16)]));
    const first = a.link.held.map((o) => o.frame)[0] as SegFrame;
    a.link.held = undefined;
    // No receive posted: message 1 is refused, its turn is asked for again.
    b.inject(a.addr, [first]);
    for (let s = 2; s < 20_000; s += 1000) {
      const fs: Frame[] = [];
      for (let k = s; k < Math.min(20_000, s + 1000); k++) fs.push({ ...first, env: { ...first.env, ssn: k } });
      b.inject(a.addr, fs);
    }
    const flow = [...qb.flows.values()][0]!;
    expect([flow.askedLo, flow.askedHi]).toEqual([1, 19_999]);
    expect(qb.oooEntries).toBe(0);
    // The sender gives up on message 1 and starts again at ssn 1, the flow's refused turn: it
    // lands, though the forged ssns fill the budget (the entry its ssn held is its own).
    await sim.settle();
    expect(a.cq.take().map((c) => c.status)).toEqual([WcStatus.RnrRetryExcErr]);
    b.postRecv(qb, recv(100, [piece(dst, 0, 16)]));
    a.bytes(src, 16, 16).fill(0x5a);
    a.postTo(qa, b.addr, qb.qpn, wr({ wrId: 2, opcode: Opcode.Send }, [piece(src, 16, 16)]));
    await sim.settle();
    expect(a.cq.take().map((c) => [c.wrId, c.status])).toEqual([[2, WcStatus.Success]]);
    expect(b.cq.take().map((c) => [c.wrId, c.status])).toEqual([[100, WcStatus.Success]]);
    expect([...b.bytes(dst, 0, 16)]).toEqual(new Array(16).fill(0x5a));
    // Nothing pending, nothing charged.
    expect(flow.pending.size).toBe(0);
    expect(qb.oooEntries).toBe(0);
  });

  it('a sender\'s 200 Sends in flight meet one refusal with a budget of 64 entries: every one completes', async () => {
    const sim = new Sim(9, clean);
    const a = await sim.node({ mss: 1024 });
    const b = await sim.node({ mss: 1024, bounds: { maxOooEntries: 64 } });
    const qa = a.qp(1, 'srd', { rnrRetry: 7, rnrTimeoutMs: 1, maxSendWr: 1024 });
    const qb = b.qp(1, 'srd', { maxRecvWr: 1024 });
    const src = a.regMr(4096);
    const dst = b.regMr(64 * 1024);
    // One receive posted: the second Send finds none, and every later one is refused with it.
    b.postRecv(qb, recv(0, [piece(dst, 0, 256)]));
    for (let i = 0; i < 200; i++) a.postTo(qa, b.addr, qb.qpn, wr({ wrId: i, opcode: Opcode.Send }, [piece(src, 0, 100)]));
    await sim.advance(0.5);
    for (let i = 1; i < 200; i++) b.postRecv(qb, recv(i, [piece(dst, i * 256, 256)]));
    await sim.run(() => a.cq.wcs.length >= 200, { ms: 600_000 });
    expect(a.cq.take().filter((c) => c.status === WcStatus.Success).length).toBe(200);
    expect(b.cq.take().filter((c) => c.status === WcStatus.Success).length).toBe(200);
    expect(qb.oooEntries).toBe(0);
  });
});

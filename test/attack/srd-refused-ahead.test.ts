// A connected srd peer whose message found no posted receive (its turn refused: srd-refusal.ts)
// then sends segments of forged later ssns. Each was remembered (the flow's `asked` map) to be
// asked for again in its turn, up to SSN_WINDOW (2^20) per flow, outside the out-of-order
// budget and counted nowhere: 20 000 such segments left 19 999 entries (a flow can be made to
// hold a million, and a QP 1024 such flows). They are charged to the QP's out-of-order budget
// now (one entry each): past it the segment is dropped and counted (oooRefused); the turn's own
// message takes the entry its ssn held, and a flow restarted or dropped gives them all back.
import { describe, expect, it } from 'vitest';
import { Opcode, WcStatus } from '../../src/core/enums.js';
import type { Frame, SegFrame } from '../../src/core/frame.js';
import { clean } from '../sim/net.js';
import { Sim } from '../sim/sim.js';
import { piece, recv, wr } from '../sim/work.js';

describe('srd: later messages refused while the flow\'s turn is refused', () => {
  it('20 000 forged later ssns are held to maxOooEntries (counted), and the flow\'s refused turn still lands', async () => {
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
    const before = b.engine.counters.oooRefused;
    for (let s = 2; s < 20_000; s += 1000) {
      const fs: Frame[] = [];
      for (let k = s; k < Math.min(20_000, s + 1000); k++) fs.push({ ...first, env: { ...first.env, ssn: k } });
      b.inject(a.addr, fs);
    }
    const flow = [...qb.flows.values()][0]!;
    expect(flow.asked!.size).toBeLessThanOrEqual(256);
    expect(qb.oooEntries).toBeLessThanOrEqual(256);
    expect(b.engine.counters.oooRefused - before).toBeGreaterThanOrEqual(20_000 - 2 - 256);
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
    // What the flow still holds is what it is charged: its remembered ssns, nothing pending.
    expect(flow.pending.size).toBe(0);
    expect(qb.oooEntries).toBe(flow.asked?.size ?? 0);
    expect(qb.oooEntries).toBeLessThanOrEqual(256);
  });
});

// One peer of a shared srd QP sends messages 2..N of a flow and never message 1. The QP's
// out-of-order budget is shared by all its flows, and a gap is never given up (such a flow is
// not idle: it holds pending messages), so the hostile flow held the whole budget for good and
// every other peer's message to the QP was refused from then on — a write from another peer
// failed RetryExcErr, and again ten minutes later (the CM agent's srd QP is such a QP: no
// connect would get in). The message a flow waits for is now always taken in (one record per
// flow past the budget at most); the gap still holds what it filled.
import { describe, expect, it } from 'vitest';
import type { DeviceAddress } from '../../src/core/address.js';
import { Opcode, WcStatus } from '../../src/core/enums.js';
import { clean } from '../sim/net.js';
import { Sim, srdWriter } from '../sim/sim.js';
import { piece, wr } from '../sim/work.js';
import { taggedWrite } from '../sim/hand-frames.js';

const ghost = (id: string): DeviceAddress => ({ transport: 'ghost', id });

describe('srd: a flow that never sends its next message', () => {
  it('fills the shared out-of-order budget, and another peer\'s writes still land, now and ten minutes later', async () => {
    const sim = new Sim(61, clean);
    const a = await sim.node({ mss: 64 });
    const b = await sim.node({ mss: 64, bounds: { maxOooEntries: 256 } });
    const qa = a.qp(1, 'srd');
    const qb = b.qp(1, 'srd');
    const src = a.regMr(4096);
    const dst = b.regMr(4096);
    for (let s = 2; s < 400; s++) b.inject(ghost('bad'), taggedWrite(9, 1, s, dst.stag, dst.addr + 512, 8));
    expect(qb.oooEntries).toBe(256);
    expect(b.engine.counters.oooRefused).toBeGreaterThan(100);
    const send = srdWriter(sim, a, qa, src, b, qb, dst);
    await send(1, 0x41);
    expect(a.cq.take().map((w) => [w.wrId, w.status])).toEqual([[1, WcStatus.Success]]);
    expect(b.bytes(dst, 0, 1)[0]).toBe(0x41);
    await sim.advance(600_000);
    await send(2, 0x42);
    expect(a.cq.take().map((w) => [w.wrId, w.status])).toEqual([[2, WcStatus.Success]]);
    expect(b.bytes(dst, 0, 1)[0]).toBe(0x42);
    // Past the budget by no more than the records of flows' turns.
    expect(qb.oooEntries).toBeLessThanOrEqual(256 + qb.flows.size);
  });

  it('another peer\'s ten pipelined Writes while the budget is held: each refused one is asked for again in its turn, and all complete', async () => {
    const sim = new Sim(62, clean);
    const a = await sim.node({ mss: 64 });
    const b = await sim.node({ mss: 64, bounds: { maxOooEntries: 256 } });
    const qa = a.qp(1, 'srd', { rnrRetry: 7, rnrTimeoutMs: 1 });
    const qb = b.qp(1, 'srd');
    const src = a.regMr(4096);
    const dst = b.regMr(4096);
    for (let s = 2; s < 400; s++) b.inject(ghost('bad'), taggedWrite(9, 1, s, dst.stag, dst.addr + 3000, 8));
    expect(qb.oooEntries).toBe(256);
    for (let i = 0; i < 10; i++) {
      a.bytes(src, i * 16, 16).fill(0x30 + i);
      a.postTo(qa, b.addr, qb.qpn, wr({ wrId: i, opcode: Opcode.RdmaWrite, remoteAddr: dst.addr + i * 16, rkey: dst.stag }, [piece(src, i * 16, 16)]));
    }
    await sim.run(() => a.cq.wcs.length >= 10, { ms: 20_000 });
    expect(a.cq.take().map((w) => w.status)).toEqual(new Array(10).fill(WcStatus.Success));
    for (let i = 0; i < 10; i++) expect([...b.bytes(dst, i * 16, 16)]).toEqual(new Array(16).fill(0x30 + i));
  });
});

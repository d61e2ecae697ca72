// A peer that sends atomics and never acknowledges the answers (it goes on talking, so no
// watchdog fires). Each answer is held in flight until acked, but the IRD (maxIrd) counted
// reads only: 2,000 atomics on an rc QP with maxIrd 32 left 2,000 answers held, no counter, no
// end (srd the same, per flow). Atomics now count in the IRD as reads do (IB's responder
// resources): past it a Terminate (rc: the QP fails; srd: that flow), readsRefused. Our own
// atomic requests carry our cumulative ack, as reads do, so a conformant requester at the IRD
// is never refused.
import { describe, expect, it } from 'vitest';
import type { DeviceAddress } from '../../src/core/address.js';
import { Opcode, QpState, WcStatus } from '../../src/core/enums.js';
import type { Inbound } from '../../src/core/frame.js';
import { ctlFrame } from '../../src/rdmap/segmenter.js';
import { encodeAtomicRequest, Qn, RdmapOpcode } from '../../src/wire/rdmap.js';
import { clean, lossy } from '../sim/net.js';
import { Sim } from '../sim/sim.js';
import { piece, wr } from '../sim/work.js';

const M64 = (1n << 64n) - 1n;
const atomic = (src: number, dst: number, ssn: number, stag: number, to: number) => ctlFrame({
  srcQpn: src, dstQpn: dst, ssn, opcode: RdmapOpcode.AtomicRequest, qn: Qn.AtomicRequest, msn: ssn, bodyLen: 52,
  body: (b, o) => encodeAtomicRequest({ op: 'fetchAdd', reqId: ssn, stag, to, addOrSwap: 1n, addOrSwapMask: M64, compare: 0n, compareMask: M64 }, b, o),
});
const ghost = (id: string): DeviceAddress => ({ transport: 'ghost', id });

describe('atomics answered and never acknowledged', () => {
  it('rc: 2,000 atomics without an ack stop at maxIrd answers held, then a Terminate (readsRefused)', async () => {
    const sim = new Sim(51, clean);
    const a = await sim.node({ mss: 64 });
    const b = await sim.node({ mss: 64, bounds: { maxIrd: 32 } });
    const [qa, qb] = await sim.connect(a, b);
    const tgt = b.regMr(64);
    const start = qb.flow!.expected;
    let most = 0;
    for (let i = 0; i < 2000 && qb.state !== QpState.Error; i++) {
      b.inject(a.addr, [atomic(qa.qpn, qb.qpn, start + i, tgt.stag, tgt.addr)]);
      most = Math.max(most, qb.flow?.inflight.size ?? 0);
    }
    expect(most).toBeLessThanOrEqual(32);
    expect(qb.state).toBe(QpState.Error);
    expect(b.engine.counters.readsRefused).toBe(1);
    // Each of the 32 answered added 1 before the refusal.
    expect(b.bytes(tgt, 0, 1)[0]).toBe(32);
  });

  it('srd: the same from one peer stops at maxIrd per flow; that flow is dropped (srdFlowsFailed), the QP goes on', async () => {
    const sim = new Sim(52, clean);
    const b = await sim.node({ mss: 64, bounds: { maxIrd: 32 } });
    const qb = b.qp(1, 'srd');
    const tgt = b.regMr(64);
    let most = 0;
    for (let i = 0; i < 2000; i += 100) {
      const batch: Inbound[] = [];
      for (let k = i; k < i + 100; k++) batch.push({ from: ghost('x'), frame: atomic(7, 1, k + 1, tgt.stag, tgt.addr) });
      b.driver.frames(batch);
      for (const f of qb.flows.values()) most = Math.max(most, f.inflight.size, f.readsIn);
    }
    expect(most).toBeLessThanOrEqual(32);
    expect(b.engine.counters.readsRefused).toBeGreaterThan(0);
    expect(b.engine.counters.srdFlowsFailed).toBeGreaterThan(0);
    expect(qb.state).toBe(QpState.Rts);
  });

  it('a conformant requester with maxRdAtomic = maxIrd over a lossy network is never refused: its ack rides on each atomic', async () => {
    const sim = new Sim(53, lossy);
    const a = await sim.node({ mss: 64 });
    const b = await sim.node({ mss: 64, bounds: { maxIrd: 4 } });
    const [qa] = await sim.connect(a, b, { maxRdAtomic: 4 });
    const tgt = b.regMr(64);
    const sink = a.regMr(8 * 400);
    for (let i = 0; i < 400; i++) {
      a.post(qa, wr({ wrId: i, opcode: Opcode.AtomicFetchAdd, remoteAddr: tgt.addr, rkey: tgt.stag, compareAdd: 1n }, [piece(sink, i * 8, 8)]));
    }
    await sim.settle();
    const wcs = a.cq.take();
    expect(wcs.filter((c) => c.status === WcStatus.Success).length).toBe(400);
    expect(b.engine.counters.readsRefused).toBe(0);
    expect(new DataView(b.bytes(tgt).buffer, b.bytes(tgt).byteOffset).getBigUint64(0, true)).toBe(400n);
  });
});

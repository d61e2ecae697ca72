// A peer that sends RDMA Read requests to an srd QP and never acknowledges the answers (it goes
// on talking, so no watchdog fires). The IRD (maxIrd) was enforced on rc only: on srd every
// answer stayed in flight, and zero-length reads (or small ones under maxAnswerBytes) cost the
// answer budget nothing — 2,000 reads left all 2,000 answers held in flight, with no end and
// no counter. Now srd flows keep the IRD too: past it that flow is Terminated and
// dropped (readsRefused), the QP keeps serving others.
import { describe, expect, it } from 'vitest';
import type { DeviceAddress } from '../../src/core/address.js';
import { Opcode, WcStatus } from '../../src/core/enums.js';
import type { Inbound } from '../../src/core/frame.js';
import { ctlFrame } from '../../src/rdmap/segmenter.js';
import { encodeReadRequestV, Qn, RdmapOpcode, readRequestVLength } from '../../src/wire/rdmap.js';
import { clean } from '../sim/net.js';
import { Sim } from '../sim/sim.js';
import { piece, recv, wr } from '../sim/work.js';

/** A peer the link cannot reach: the answers never come back acknowledged. */
const ghost = (id: string): DeviceAddress => ({ transport: 'ghost', id });

describe('srd: reads answered and never acknowledged', () => {
  it.each([0, 64])('%i-byte reads from one peer stop at maxIrd per flow; the flow is Terminated and dropped, another peer is still served', async (len) => {
    const sim = new Sim(41, clean);
    const a = await sim.node({ mss: 64 });
    const b = await sim.node({ mss: 64, bounds: { maxIrd: 32 } });
    const qb = b.qp(1, 'srd');
    const src = b.regMr(4096);
    const readV = (ssn: number) => {
      const v = { srcs: [{ stag: src.stag, to: src.addr, len }], sinks: [{ stag: 9, to: 0, len }] };
      return ctlFrame({ srcQpn: 7, dstQpn: 1, ssn, opcode: RdmapOpcode.ReadRequestV, qn: Qn.ReadRequest, msn: ssn, bodyLen: readRequestVLength(v), body: (bb, o) => encodeReadRequestV(v, bb, o) });
    };
    let most = 0;
    for (let i = 0; i < 2000; i += 100) {
      const batch: Inbound[] = [];
      for (let k = i; k < i + 100; k++) batch.push({ from: ghost('x'), frame: readV(k + 1) });
      b.driver.frames(batch);
      for (const f of qb.flows.values()) most = Math.max(most, f.readsIn, f.inflight.size / 2);
    }
    expect(most).toBeLessThanOrEqual(32);
    expect(b.engine.counters.readsRefused).toBeGreaterThan(0);
    expect(b.engine.counters.srdFlowsFailed).toBeGreaterThan(0);
    // The QP goes on: another peer's Send lands.
    const qa = a.qp(1, 'srd');
    const s = a.regMr(16);
    const d = b.regMr(16);
    a.bytes(s).fill(0x77);
    b.postRecv(qb, recv(5, [piece(d, 0, 16)]));
    a.postTo(qa, b.addr, qb.qpn, wr({ wrId: 1, opcode: Opcode.Send }, [piece(s, 0, 16)]));
    await sim.settle();
    expect(a.cq.take().map((c) => c.status)).toEqual([WcStatus.Success]);
    expect([...b.bytes(d)]).toEqual(new Array(16).fill(0x77));
  });
});

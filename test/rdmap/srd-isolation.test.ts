// srd: one sender's protocol error is that sender's flow's, not the QP's. An srd QP is shared
// by whoever sends to it — listen()'s CM agent is one — so a frame that breaks the stream with
// one peer QP (a Write to an STag that is not granted, a Terminate) must drop that flow alone:
// a Terminate back to it, its work failed, and the QP still RTS for every other peer. Found by
// the udp fuzz campaign once it had an srd pair (docs/fuzzing.md): a validated attacker's frame
// at V's srd QP put it in ERROR and failed the real peer's messages. Whole drivers over a lossy
// simulated network (test/sim); the hostile frames are built by hand and handed to the
// victim's driver as its link would deliver them.
import { describe, expect, it } from 'vitest';
import type { DeviceAddress } from '../../src/core/address.js';
import { Opcode, QpState, WcStatus } from '../../src/core/enums.js';
import type { SegFrame } from '../../src/core/frame.js';
import type { Outbound } from '../../src/core/link.js';
import { ctlFrame, dataFrames } from '../../src/rdmap/segmenter.js';
import { decodeDdp, encodeTerminate, Qn, RdmapOpcode } from '../../src/wire/rdmap.js';
import { TERM } from '../../src/wire/terminate.js';
import { lossy } from '../sim/net.js';
import { Sim, srdWriter } from '../sim/sim.js';
import { piece, wr } from '../sim/work.js';

function write(src: number, dst: number, ssn: number, stag: number, to: number, len: number): SegFrame[] {
  const out: SegFrame[] = [];
  dataFrames({ srcQpn: src, dstQpn: dst, ssn, tagged: true, opcode: RdmapOpcode.RdmaWrite, stag, to, parts: [new Uint8Array(len)], total: len, mss: 1 << 20 }, out);
  return out;
}

const terminate = (src: number, dst: number, ssn: number): SegFrame => ctlFrame({
  srcQpn: src, dstQpn: dst, ssn, opcode: RdmapOpcode.Terminate, qn: Qn.Terminate, msn: 1, bodyLen: 4,
  body: (b, o) => encodeTerminate({ ...TERM.invalidStag, m: false, d: false }, b, o),
});

describe('srd: a protocol error drops the sender\'s flow, not the QP', () => {
  it('a Write to an ungranted STag and a Terminate from a hostile peer: Terminate back, that flow dropped, the QP RTS and a good peer\'s work and messages unaffected', async () => {
    const sim = new Sim(31, lossy);
    const a = await sim.node();
    const b = await sim.node();
    const qa = a.qp(1, 'srd');
    const qb = b.qp(1, 'srd');
    const src = a.regMr(4096);
    const dst = b.regMr(4096);
    const back = b.regMr(4096);
    const send = srdWriter(sim, a, qa, src, b, qb, dst);
    await send(1, 0x11);
    expect(a.cq.take().map((w) => w.status)).toEqual([WcStatus.Success]);
    // The hostile peer: a node of the simulation (so what b answers it has somewhere to go) with no QPs.
    const x = await sim.node();
    const bad: DeviceAddress = x.addr;
    const feed = (frames: SegFrame[]): void => b.inject(bad, frames);
    const sent: Outbound[] = [];
    b.link.tap = (out) => void sent.push(...out);

    // 1. A Write to an STag b never granted, from the hostile peer's QP 7.
    feed(write(7, qb.qpn, 1, 0xdead00, 0, 8));
    const out = sent.filter((o) => o.to === bad && o.frame.kind === 'seg');
    const ops = out.map((o) => (o.frame.kind === 'seg' ? decodeDdp(o.frame.hdr, 0, o.frame.hdr.length) : undefined)).map((d) => (d?.ok ? d.value.opcode : -1));
    expect(ops).toContain(RdmapOpcode.Terminate);
    expect(qb.state).toBe(QpState.Rts);
    expect(b.engine.counters.srdFlowsFailed).toBe(1);
    expect(b.engine.srdFlowCount(qb, bad)).toBe(0);

    // 2. A Terminate from another of its QPs, while b has a Write of its own in flight to a.
    b.postTo(qb, a.addr, qa.qpn, wr({ wrId: 50, opcode: Opcode.RdmaWrite, remoteAddr: src.addr + 1024, rkey: src.stag }, [piece(back, 0, 16)]));
    feed(write(8, qb.qpn, 1, dst.stag, dst.addr + 512, 8));
    feed([terminate(8, qb.qpn, 2)]);
    expect(qb.state).toBe(QpState.Rts);
    expect(b.engine.counters.srdFlowsFailed).toBe(2);
    await sim.settle();
    expect(b.cq.take().map((c) => [c.wrId, c.status])).toEqual([[50, WcStatus.Success]]);

    // The good peer's traffic goes on.
    await send(2, 0x22);
    expect(a.cq.take().map((c) => c.status)).toEqual([WcStatus.Success]);
    expect(b.bytes(dst, 0, 1)[0]).toBe(0x22);
    expect(qa.state).toBe(QpState.Rts);
  });
});

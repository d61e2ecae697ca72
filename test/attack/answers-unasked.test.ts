// A connected rc peer answers what it was never asked: a Read Response into a region of ours
// (RemoteWrite granted) with no read outstanding, or into a region that is not the sink of the
// read we have out; a ReadComplete or an AtomicResponse naming a request we never made. Each is
// refused before anything is placed (arrival.ts isReadSink; responder.ts readComplete /
// atomicResponse): a Terminate, the QP in ERROR. Passed on the code it was written against (an
// audit's regression test).
import { describe, expect, it } from 'vitest';
import { Opcode, QpState } from '../../src/core/enums.js';
import type { SegFrame } from '../../src/core/frame.js';
import { ctlFrame, dataFrames } from '../../src/rdmap/segmenter.js';
import { encodeAtomicResponse, encodeReadComplete, Qn, RdmapOpcode } from '../../src/wire/rdmap.js';
import { clean } from '../sim/net.js';
import { Sim } from '../sim/sim.js';
import { piece, wr } from '../sim/work.js';

describe('rc: answers to requests never made', () => {
  it.each(['readResponse-none', 'readResponse-other', 'readComplete', 'atomicResponse'] as const)('%s: nothing placed, a Terminate, the QP in ERROR', async (kind) => {
    const sim = new Sim(61, clean);
    const a = await sim.node({ mss: 64 });
    const b = await sim.node({ mss: 64 });
    const [qa, qb] = await sim.connect(a, b);
    const victim = a.regMr(64);
    const sink = a.regMr(64);
    const src = b.regMr(64);
    if (kind === 'readResponse-other') {
      // A read of ours outstanding: the forged answer lands before b's.
      a.post(qa, wr({ wrId: 1, opcode: Opcode.RdmaRead, remoteAddr: src.addr, rkey: src.stag }, [piece(sink, 0, 64)]));
    }
    const ssn = qa.flow!.expected;
    const frames: SegFrame[] = [];
    const payload = new Uint8Array(64).fill(0xee);
    if (kind.startsWith('readResponse')) {
      dataFrames({ srcQpn: qb.qpn, dstQpn: qa.qpn, ssn, tagged: true, opcode: RdmapOpcode.ReadResponse, stag: victim.stag, to: victim.addr, parts: [payload], total: 64, mss: 64 }, frames);
    } else if (kind === 'readComplete') {
      frames.push(ctlFrame({ srcQpn: qb.qpn, dstQpn: qa.qpn, ssn, opcode: RdmapOpcode.ReadComplete, qn: Qn.Send, msn: 77, bodyLen: 8, body: (bb, o) => encodeReadComplete({ imm: 77, len: 64 }, bb, o) }));
    } else {
      frames.push(ctlFrame({ srcQpn: qb.qpn, dstQpn: qa.qpn, ssn, opcode: RdmapOpcode.AtomicResponse, qn: Qn.AtomicResponse, msn: 1, bodyLen: 12, body: (bb, o) => encodeAtomicResponse({ reqId: 999, value: 5n }, bb, o) }));
    }
    const before = a.engine.counters.terminatesSent;
    a.inject(b.addr, frames);
    await sim.settle();
    expect([...a.bytes(victim)].every((x) => x === 0)).toBe(true);
    expect(a.engine.counters.terminatesSent).toBeGreaterThan(before);
    expect(qa.state).toBe(QpState.Error);
  });
});

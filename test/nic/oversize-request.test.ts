// A Read Request is one control message, never cut across datagrams: one with many remote
// entries (the verbs layer accepts up to maxSge, at most 1024) can be larger than what a udp
// datagram carries at a small MTU (the link accepts 256..65507). The udp core then cannot hand
// it to the endpoint and reports the whole peer lost, so every QP connected to that peer fails,
// not only the one whose work could not be carried. Whole drivers in test/sim, MTU 1472.
//
// The engine now fails such a read alone (a local length error: its QP goes to ERROR, as a
// completion error does in ibverbs); verbs refuses it at post before that (test/verbs/read-request-size).
import { describe, expect, it } from 'vitest';
import { Opcode, QpState, WcStatus } from '../../src/core/enums.js';
import { clean } from '../sim/net.js';
import { Sim } from '../sim/sim.js';
import { piece, wr } from '../sim/work.js';

describe('a work request the link cannot carry', () => {
  it('a Read Request larger than a datagram fails that work alone: another QP to the same peer keeps working', async () => {
    const sim = new Sim(1, clean);
    const a = await sim.node({ mtu: 1472 });
    const b = await sim.node({ mtu: 1472 });
    const [qa] = await sim.connect(a, b, { maxSge: 128 }, 1);
    const [qa2] = await sim.connect(a, b, { maxSge: 128 }, 2);
    const src = b.regMr(4096);
    const sink = a.regMr(4096);
    // 100 remote entries: 1.6 KB of Read Request body alone.
    const remote = Array.from({ length: 100 }, (_, i) => ({ addr: src.addr + i * 16, length: 8, rkey: src.stag }));
    a.post(qa, wr({ wrId: 1, opcode: Opcode.RdmaRead, remoteSgList: remote }, [piece(sink, 0, 800)]));
    await sim.settle();
    expect(a.cq.take().map((w) => w.wrId)).toEqual([1]);
    expect(a.events.some((e) => e.kind === 'peerLost')).toBe(false);
    expect(qa2.state).toBe(QpState.Rts);
    a.post(qa2, wr({ wrId: 2, opcode: Opcode.RdmaWrite, remoteAddr: src.addr, rkey: src.stag }, [piece(sink, 0, 64)]));
    await sim.settle();
    expect(a.cq.take().map((w) => [w.wrId, w.status])).toEqual([[2, WcStatus.Success]]);
  });
});

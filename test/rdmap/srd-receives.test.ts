// srd: messages that arrive ahead of their turn may take posted receives, but never all of them
// at the expense of the message their flow waits for. Found under a connect storm (70 dialers
// at a file server): the CM QP's 32 receives were all held by messages queued behind ones that
// had found none, every retry of those was refused (RNR), the sender's flow failed and the
// server answered no connect again. Whole drivers (test/sim): the sender's first frames are
// held at its link and handed to the receiver's driver in a chosen order; everything after
// them (acks, RNR NAKs, retries) crosses the simulated network.
import { describe, expect, it } from 'vitest';
import { Opcode, WcOpcode, WcStatus } from '../../src/core/enums.js';
import type { Frame } from '../../src/core/frame.js';
import { clean } from '../sim/net.js';
import type { SimNode } from '../sim/node.js';
import { Sim } from '../sim/sim.js';
import { piece, recv, wr } from '../sim/work.js';

/** Run `post` with `n`'s link holding its frames; returns them, in the order they were sent. */
function held(n: SimNode, post: () => void): Frame[] {
  n.link.held = [];
  post();
  const out = n.link.held.map((o) => o.frame);
  n.link.held = undefined;
  return out;
}

describe('srd receives and out-of-order messages', () => {
  it('three sends over two receives, the first arriving last: it takes the receive the last one held, 1 and 2 complete in order, 3 alone fails its RNR retries', async () => {
    const sim = new Sim(5, clean);
    const a = await sim.node();
    const b = await sim.node();
    const qa = a.qp(1, 'srd');
    const qb = b.qp(1, 'srd');
    const src = a.regMr(3 * 16);
    const dst = b.regMr(3 * 16);
    for (let i = 0; i < 3; i++) a.bytes(src, i * 16, 16).fill(0x11 * (i + 1));
    b.postRecv(qb, recv(100, [piece(dst, 0, 16)]));
    b.postRecv(qb, recv(101, [piece(dst, 16, 16)]));
    const out = held(a, () => {
      for (let i = 0; i < 3; i++) a.postTo(qa, b.addr, qb.qpn, wr({ wrId: i, opcode: Opcode.Send }, [piece(src, i * 16, 16)]));
    });
    // Messages 2 and 3 arrive first and take both receives; then message 1.
    expect(out).toHaveLength(3);
    b.inject(a.addr, [out[1]!, out[2]!]);
    b.inject(a.addr, [out[0]!]);
    await sim.settle();
    // Messages 1 and 2 completed, in order, into the two receives (srd binds a receive when a
    // message arrives, not in posting order); 3 waits for a receive.
    const at = new Map([[100, 0], [101, 16], [102, 32]]);
    const first = b.cq.take();
    expect(first.map((c) => [c.status, c.opcode, c.byteLen])).toEqual([[WcStatus.Success, WcOpcode.Recv, 16], [WcStatus.Success, WcOpcode.Recv, 16]]);
    expect(first.map((c) => b.bytes(dst, at.get(Number(c.wrId))!, 16)[0])).toEqual([0x11, 0x22]);
    // Message 3 found no receive within its RNR retries: it alone fails, as it would on a NIC.
    expect(a.cq.take().map((c) => [c.wrId, c.status])).toEqual([[0, WcStatus.Success], [1, WcStatus.Success], [2, WcStatus.RnrRetryExcErr]]);
    // The QPs go on: a receive posted, the next send lands in it.
    b.postRecv(qb, recv(102, [piece(dst, 32, 16)]));
    a.postTo(qa, b.addr, qb.qpn, wr({ wrId: 3, opcode: Opcode.Send }, [piece(src, 32, 16)]));
    await sim.settle();
    expect(a.cq.take().map((c) => [c.wrId, c.status])).toEqual([[3, WcStatus.Success]]);
    expect(b.cq.take().map((c) => [c.wrId, c.status])).toEqual([[102, WcStatus.Success]]);
    expect([...b.bytes(dst, 32, 16)]).toEqual(new Array(16).fill(0x33));
  });
  it('a sender that gives up on a refused message restarts its flow at ssn 1: the new messages land, never an old one\'s bytes in their place', async () => {
    const sim = new Sim(6, clean);
    const a = await sim.node();
    const b = await sim.node();
    // No RNR retries: the first refusal fails the message and the flow (the rest flushed).
    const qa = a.qp(1, 'srd', { rnrRetry: 0 });
    const qb = b.qp(1, 'srd');
    const src = a.regMr(5 * 16);
    const dst = b.regMr(3 * 16);
    for (let i = 0; i < 5; i++) a.bytes(src, i * 16, 16).fill(0x11 * (i + 1));
    b.postRecv(qb, recv(100, [piece(dst, 0, 16)]));
    const send = (i: number): void => a.postTo(qa, b.addr, qb.qpn, wr({ wrId: i, opcode: Opcode.Send }, [piece(src, i * 16, 16)]));
    const out = held(a, () => {
      for (let i = 0; i < 3; i++) send(i);
    });
    expect(out).toHaveLength(3);
    // Message 2 takes the one receive, 3 finds none, then 1 comes.
    b.inject(a.addr, [out[1]!]);
    b.inject(a.addr, [out[2]!]);
    b.inject(a.addr, [out[0]!]);
    await sim.settle();
    const failed = a.cq.take();
    expect(failed.filter((c) => c.status !== WcStatus.Success).length).toBeGreaterThan(0);
    const before = b.cq.take();
    // The sender starts again at ssn 1 with two new messages; two receives are posted.
    b.postRecv(qb, recv(101, [piece(dst, 16, 16)]));
    b.postRecv(qb, recv(102, [piece(dst, 32, 16)]));
    send(3);
    send(4);
    await sim.settle();
    expect(a.cq.take().map((c) => [c.wrId, c.status])).toEqual([[3, WcStatus.Success], [4, WcStatus.Success]]);
    const at = new Map([[100, 0], [101, 16], [102, 32]]);
    const landed = b.cq.take().map((c) => b.bytes(dst, at.get(Number(c.wrId))!, 1)[0]);
    // Whatever of the old epoch completed before, the new epoch's two messages land as sent.
    expect(landed).toEqual([0x44, 0x55]);
    expect(before.length + landed.length).toBeLessThanOrEqual(3);
  });
});

// srd: messages that arrive ahead of their turn may take posted receives, but never all of them
// at the expense of the message their flow waits for. Found under a connect storm (70 dialers
// at a file server): the CM QP's 32 receives were all held by messages queued behind ones that
// had found none, every retry of those was refused (RNR), the sender's flow failed and the
// server answered no connect again. Sans-I/O engine, frames delivered in a chosen order.
import { describe, expect, it } from 'vitest';
import { Opcode, WcOpcode, WcStatus } from '../../src/core/enums.js';
import type { Inbound } from '../../src/core/frame.js';
import { caps, Harness, piece, recv, wr } from './harness.js';

describe('srd receives and out-of-order messages', () => {
  it('three sends over two receives, the first arriving last: it takes the receive the last one held, 1 and 2 complete in order, 3 alone fails its RNR retries', async () => {
    const h = new Harness({ seed: 5, reorder: 0 });
    const a = await h.node(64);
    const b = await h.node(64);
    const qa = a.eng.createQp(1, 'srd', 1, caps(), a.cq, a.cq);
    const qb = b.eng.createQp(1, 'srd', 1, caps(), b.cq, b.cq);
    const src = a.regMr(3 * 16);
    const dst = b.regMr(3 * 16);
    for (let i = 0; i < 3; i++) a.bytes(src, i * 16, 16).fill(0x11 * (i + 1));
    b.eng.postRecv(qb, recv(100, [piece(b, dst, 0, 16)]), h.now);
    b.eng.postRecv(qb, recv(101, [piece(b, dst, 16, 16)]), h.now);
    const flow = a.eng.srdFlow(qa, b.addr, qb.qpn);
    for (let i = 0; i < 3; i++) {
      const w = wr({ wrId: i, opcode: Opcode.Send }, [piece(a, src, i * 16, 16)]);
      w.flow = flow;
      a.eng.postSend(qa, w, h.now);
    }
    // Messages 2 and 3 arrive first and take both receives; then message 1.
    const out = a.eng.pollTransmit();
    expect(out).toHaveLength(3);
    const seg = (i: number): Inbound => ({ from: a.addr, frame: out[i]!.frame });
    b.eng.handleFrames([seg(1), seg(2)], h.now);
    b.eng.handleFrames([seg(0)], h.now);
    h.run();
    // Messages 1 and 2 completed, in order, into the two receives (srd binds a receive when a
    // message arrives, not in posting order); 3 waits for a receive.
    const at = new Map([[100, 0], [101, 16], [102, 32]]);
    const first = b.cq.take();
    expect(first.map((c) => [c.status, c.opcode, c.byteLen])).toEqual([[WcStatus.Success, WcOpcode.Recv, 16], [WcStatus.Success, WcOpcode.Recv, 16]]);
    expect(first.map((c) => b.bytes(dst, at.get(Number(c.wrId))!, 16)[0])).toEqual([0x11, 0x22]);
    // Message 3 found no receive within its RNR retries: it alone fails, as it would on a NIC.
    expect(a.cq.take().map((c) => [c.wrId, c.status])).toEqual([[0, WcStatus.Success], [1, WcStatus.Success], [2, WcStatus.RnrRetryExcErr]]);
    // The QPs go on: a receive posted, the next send lands in it.
    b.eng.postRecv(qb, recv(102, [piece(b, dst, 32, 16)]), h.now);
    const w = wr({ wrId: 3, opcode: Opcode.Send }, [piece(a, src, 32, 16)]);
    w.flow = a.eng.srdFlow(qa, b.addr, qb.qpn);
    a.eng.postSend(qa, w, h.now);
    h.run();
    expect(a.cq.take().map((c) => [c.wrId, c.status])).toEqual([[3, WcStatus.Success]]);
    expect(b.cq.take().map((c) => [c.wrId, c.status])).toEqual([[102, WcStatus.Success]]);
    expect([...b.bytes(dst, 32, 16)]).toEqual(new Array(16).fill(0x33));
  });
  it('a sender that gives up on a refused message restarts its flow at ssn 1: the new messages land, never an old one\'s bytes in their place', async () => {
    const h = new Harness({ seed: 6, reorder: 0 });
    const a = await h.node(64);
    const b = await h.node(64);
    // No RNR retries: the first refusal fails the message and the flow (the rest flushed).
    const qa = a.eng.createQp(1, 'srd', 1, caps({ rnrRetry: 0 }), a.cq, a.cq);
    const qb = b.eng.createQp(1, 'srd', 1, caps(), b.cq, b.cq);
    const src = a.regMr(5 * 16);
    const dst = b.regMr(3 * 16);
    for (let i = 0; i < 5; i++) a.bytes(src, i * 16, 16).fill(0x11 * (i + 1));
    b.eng.postRecv(qb, recv(100, [piece(b, dst, 0, 16)]), h.now);
    const send = (i: number): void => {
      const w = wr({ wrId: i, opcode: Opcode.Send }, [piece(a, src, i * 16, 16)]);
      w.flow = a.eng.srdFlow(qa, b.addr, qb.qpn);
      a.eng.postSend(qa, w, h.now);
    };
    for (let i = 0; i < 3; i++) send(i);
    const out = a.eng.pollTransmit();
    const seg = (i: number): Inbound => ({ from: a.addr, frame: out[i]!.frame });
    // Message 2 takes the one receive, 3 finds none, then 1 comes.
    b.eng.handleFrames([seg(1)], h.now);
    b.eng.handleFrames([seg(2)], h.now);
    b.eng.handleFrames([seg(0)], h.now);
    h.run();
    const failed = a.cq.take();
    expect(failed.filter((c) => c.status !== WcStatus.Success).length).toBeGreaterThan(0);
    const before = b.cq.take();
    // The sender starts again at ssn 1 with two new messages; two receives are posted.
    b.eng.postRecv(qb, recv(101, [piece(b, dst, 16, 16)]), h.now);
    b.eng.postRecv(qb, recv(102, [piece(b, dst, 32, 16)]), h.now);
    send(3);
    send(4);
    h.run();
    expect(a.cq.take().map((c) => [c.wrId, c.status])).toEqual([[3, WcStatus.Success], [4, WcStatus.Success]]);
    const at = new Map([[100, 0], [101, 16], [102, 32]]);
    const landed = b.cq.take().map((c) => b.bytes(dst, at.get(Number(c.wrId))!, 1)[0]);
    // Whatever of the old epoch completed before, the new epoch's two messages land as sent.
    expect(landed).toEqual([0x44, 0x55]);
    expect(before.length + landed.length).toBeLessThanOrEqual(3);
  });
});

// The requester's watchdog, through the whole driver on the virtual clock (test/sim): requests
// out and a peer engine that stays silent end in RetryExcErr after timeoutMs — never a work
// request that waits forever — and an idle flow leaves no timer behind. The peer's transport
// keeps acknowledging datagrams throughout: it is the engine above it that is silent.
import { describe, expect, it } from 'vitest';
import { Opcode, QpState, WcStatus } from '../../src/core/enums.js';
import { clean, instant, lossy } from '../sim/net.js';
import type { SimNode } from '../sim/node.js';
import { Sim } from '../sim/sim.js';
import { piece, wr } from '../sim/work.js';

/** `n` holds its input (or takes it again) as the NIC thread does: its endpoint, and its engine if `engineToo`. */
function holdInput(n: SimNode, on: boolean, engineToo: boolean): void {
  n.ep.rxHold.held = on;
  if (!on) n.ep.windowOpened();
  if (engineToo) n.driver.run((now) => n.engine.holdReceive(on, now));
}

/** An rc pair (timeoutMs 500, no time on the wire) whose responder's QP then disappears (its process lost it): frames to it are dropped, nothing answers. */
async function silentResponder() {
  const sim = new Sim(1, instant);
  const a = await sim.node();
  const b = await sim.node();
  const [qa, qb] = await sim.connect(a, b, { timeoutMs: 500 });
  const src = a.regMr(4096);
  const dst = b.regMr(4096);
  b.driver.run(() => b.engine.destroyQp(qb));
  return { sim, a, qa, src, dst };
}

describe('requester watchdog', () => {
  it('rc: a responder that takes the request and then goes silent → RetryExcErr at timeoutMs, QP in ERROR, rest flushed', async () => {
    // No time on the wire, so the expiry is exactly timeoutMs after the post.
    const { sim, a, qa, src, dst } = await silentResponder();
    const t0 = sim.now;
    a.post(qa, wr({ wrId: 1, opcode: Opcode.RdmaRead, remoteAddr: dst.addr, rkey: dst.stag }, [piece(src, 0, 64)]));
    a.post(qa, wr({ wrId: 2, opcode: Opcode.RdmaWrite, remoteAddr: dst.addr + 1024, rkey: dst.stag }, [piece(src, 128, 64)]));
    expect(await sim.run(() => a.cq.wcs.length > 0)).toBe(true);
    expect(sim.now - t0).toBe(500);
    await sim.settle();
    const wcs = a.cq.take();
    expect(wcs.map((w) => [w.wrId, w.status])).toEqual([
      [1, WcStatus.RetryExcErr],
      [2, WcStatus.WrFlushErr],
    ]);
    expect(qa.state).toBe(QpState.Error);
    expect(a.engine.counters.timeouts).toBe(1);
  });

  it('a deadline whose difference rounds below timeoutMs still fires (it was armed again at the same instant for ever)', async () => {
    const { sim, a, qa, src, dst } = await silentResponder();
    // Posted at this instant, the deadline is 515.8314795521728, and 515.8314795521728 - 15.831479552172858 is 499.99999999999994.
    const t = 15.831479552172858;
    await sim.advance(t - sim.now);
    expect(sim.now).toBe(t);
    a.post(qa, wr({ wrId: 1, opcode: Opcode.RdmaWrite, remoteAddr: dst.addr, rkey: dst.stag }, [piece(src, 0, 64)]));
    expect(await sim.run(() => a.cq.wcs.length > 0, { steps: 10_000 })).toBe(true);
    expect(a.cq.take().map((w) => [w.wrId, w.status])).toEqual([[1, WcStatus.RetryExcErr]]);
  });

  it('srd: sends to a remote QP that does not exist fail with RetryExcErr; the QP keeps working with a live peer (lossy network)', async () => {
    const sim = new Sim(2, lossy);
    const a = await sim.node();
    const b = await sim.node();
    const qa = a.qp(1, 'srd', { timeoutMs: 300 });
    const qb = b.qp(1, 'srd');
    const src = a.regMr(4096);
    const dst = b.regMr(4096);
    const t0 = sim.now;
    a.postTo(qa, b.addr, 99, wr({ wrId: 'ghost' as never, opcode: Opcode.RdmaWrite, remoteAddr: dst.addr, rkey: dst.stag }, [piece(src, 0, 32)]));
    await sim.settle();
    expect(a.cq.take().map((w) => [w.wrId, w.status])).toEqual([['ghost', WcStatus.RetryExcErr]]);
    expect(sim.now - t0).toBeGreaterThanOrEqual(300);
    expect(qa.state).toBe(QpState.Rts);
    a.bytes(src, 0, 32).fill(7);
    a.postTo(qa, b.addr, qb.qpn, wr({ wrId: 'live' as never, opcode: Opcode.RdmaWrite, remoteAddr: dst.addr, rkey: dst.stag }, [piece(src, 0, 32)]));
    await sim.settle();
    expect(a.cq.take().map((w) => [w.wrId, w.status])).toEqual([['live', WcStatus.Success]]);
    expect([...b.bytes(dst, 0, 32)]).toEqual(new Array(32).fill(7));
  });

  it('a slow but live responder is not timed out, and an idle flow leaves no deadline', async () => {
    const sim = new Sim(3, clean);
    const a = await sim.node();
    const b = await sim.node();
    const [qa, qb] = await sim.connect(a, b, { timeoutMs: 50, rnrTimeoutMs: 20, rnrRetry: 20 });
    const src = a.regMr(4096);
    // A Send with no receive posted: the responder answers RNR every 20 ms (it is alive), for
    // 200 ms of virtual time — four times the watchdog's 50 ms — before a receive appears.
    a.post(qa, wr({ wrId: 1, opcode: Opcode.Send }, [piece(src, 0, 16)]));
    await sim.advance(200);
    expect(a.cq.take()).toEqual([]);
    expect(a.engine.counters.timeouts).toBe(0);
    expect(b.engine.counters.rnrNaksSent).toBeGreaterThan(5);
    const dst = b.regMr(64);
    b.postRecv(qb, { wrId: 9, pieces: [piece(dst, 0, 64)], total: 64, claimed: false });
    await sim.settle();
    expect(a.cq.take().map((w) => [w.wrId, w.status])).toEqual([[1, WcStatus.Success]]);
    expect(a.engine.pollTimeout()).toBeUndefined();
    expect(qa.state).toBe(QpState.Rts);
  });

  // A device whose completion path is backed up holds its input (Link.holdReceive): its udp
  // endpoint drops new DATA behind a shut window, and its engine tells each peer it is alive
  // every NOT_READY_MS (rdmap/not-ready.ts). Its peers wait for it — past their watchdog and past udp's retry budget — and
  // their work completes once it takes frames in again.
  it.each([
    ['the link and the engine hold', true, [[1, WcStatus.Success]]],
    ['only the link holds (the engine silent): the peer gives up', false, [[1, WcStatus.RetryExcErr]]],
  ] as const)('a responder that holds its input: %s', async (_name, engineToo, want) => {
    const sim = new Sim(4, clean);
    const a = await sim.node();
    const b = await sim.node();
    const [qa] = await sim.connect(a, b, { timeoutMs: 1_000 }); // over NOT_READY_MS: a shorter watchdog fires between two words
    const src = a.regMr(4096);
    const dst = b.regMr(4096);
    const hold = (on: boolean): void => holdInput(b, on, engineToo);
    hold(true);
    a.post(qa, wr({ wrId: 1, opcode: Opcode.RdmaWrite, remoteAddr: dst.addr, rkey: dst.stag }, [piece(src, 0, 64)]));
    await sim.advance(10_000);
    hold(false);
    await sim.settle();
    expect(a.cq.take().map((w) => [w.wrId, w.status])).toEqual(want);
    if (!engineToo) return;
    expect(qa.state).toBe(QpState.Rts);
    expect(a.engine.counters.timeouts).toBe(0);
    expect(b.engine.pollTimeout()).toBeUndefined();
  });

  // What the holding device sent itself waits too: the answers it does not take in meanwhile
  // are not its peer's silence.
  it('a device that holds its input does not time out its own requests meanwhile', async () => {
    const sim = new Sim(5, clean);
    const a = await sim.node();
    const b = await sim.node();
    const [qa, qb] = await sim.connect(a, b, { timeoutMs: 1_000 });
    const src = b.regMr(4096);
    const dst = a.regMr(4096);
    const hold = (on: boolean): void => holdInput(b, on, true);
    hold(true);
    b.post(qb, wr({ wrId: 2, opcode: Opcode.RdmaWrite, remoteAddr: dst.addr, rkey: dst.stag }, [piece(src, 0, 64)]));
    await sim.advance(10_000);
    expect(b.cq.take()).toEqual([]);
    hold(false);
    await sim.settle();
    expect(b.cq.take().map((w) => [w.wrId, w.status])).toEqual([[2, WcStatus.Success]]);
    expect(qb.state).toBe(QpState.Rts);
    expect(qa.state).toBe(QpState.Rts);
    expect(b.engine.counters.timeouts).toBe(0);
  });

  // The word is an ack of ssn 0: an srd sender quiet past srdIdleMs starts a new epoch at ssn 1,
  // and a repeat of the old epoch's cumulative ack would complete new messages the holder dropped.
  it('srd: the not-ready word completes nothing, also for a flow that started a new epoch', async () => {
    const sim = new Sim(7, clean);
    const a = await sim.node();
    const b = await sim.node();
    const qa = a.qp(1, 'srd', { timeoutMs: 100_000 });
    const qb = b.qp(1, 'srd');
    const src = a.regMr(4096);
    const dst = b.regMr(4096);
    const write = (id: number): void => a.postTo(qa, b.addr, qb.qpn, wr({ wrId: id as never, opcode: Opcode.RdmaWrite, remoteAddr: dst.addr, rkey: dst.stag }, [piece(src, 0, 32)]));
    for (let i = 0; i < 3; i++) write(i);
    await sim.settle();
    expect(a.cq.take().map((w) => w.status)).toEqual([0, 0, 0]);
    await sim.advance(31_000); // quiescent past srdIdleMs: a's next message starts a new epoch at ssn 1
    holdInput(b, true, true);
    await sim.advance(10);
    for (let i = 10; i < 15; i++) write(i);
    await sim.advance(2_000);
    expect(a.cq.take()).toEqual([]);
    holdInput(b, false, true);
    await sim.settle();
    expect(a.cq.take().map((w) => [w.wrId, w.status])).toEqual([10, 11, 12, 13, 14].map((i) => [i, WcStatus.Success]));
  });
});

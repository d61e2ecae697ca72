// The requester's watchdog, on the virtual clock: requests out and a peer engine that stays
// silent end in RetryExcErr after timeoutMs — never a work request that waits forever — and an
// idle flow leaves no timer behind.
import { describe, expect, it } from 'vitest';
import { Opcode, QpState, WcStatus } from '../../src/core/enums.js';
import { caps, Harness, piece, wr } from './harness.js';

describe('requester watchdog', () => {
  it('rc: a responder that takes the request and then goes silent → RetryExcErr at timeoutMs, QP in ERROR, rest flushed', async () => {
    const h = new Harness({ seed: 1 });
    const a = await h.node(64);
    const b = await h.node(64);
    const [qa, qb] = h.connect(a, b, { timeoutMs: 500 });
    const src = a.regMr(4096);
    const dst = b.regMr(4096);
    // The responder's QP disappears (its process lost it): frames to it are dropped, nothing answers.
    b.eng.destroyQp(qb);
    const t0 = h.now;
    a.eng.postSend(qa, wr({ wrId: 1, opcode: Opcode.RdmaRead, remoteAddr: dst.addr, rkey: dst.stag }, [piece(a, src, 0, 64)]), h.now);
    a.eng.postSend(qa, wr({ wrId: 2, opcode: Opcode.RdmaWrite, remoteAddr: dst.addr + 1024, rkey: dst.stag }, [piece(a, src, 128, 64)]), h.now);
    h.run();
    const wcs = a.cq.take();
    expect(wcs.map((w) => [w.wrId, w.status])).toEqual([
      [1, WcStatus.RetryExcErr],
      [2, WcStatus.WrFlushErr],
    ]);
    expect(h.now - t0).toBe(500);
    expect(qa.state).toBe(QpState.Error);
    expect(a.eng.counters.timeouts).toBe(1);
  });

  it('srd: sends to a remote QP that does not exist fail with RetryExcErr; the QP keeps working with a live peer', async () => {
    const h = new Harness({ seed: 2 });
    const a = await h.node(64);
    const b = await h.node(64);
    const qa = a.eng.createQp(1, 'srd', 1, caps({ timeoutMs: 300 }), a.cq, a.cq);
    const qb = b.eng.createQp(1, 'srd', 1, caps(), b.cq, b.cq);
    const src = a.regMr(4096);
    const dst = b.regMr(4096);
    const ghost = wr({ wrId: 'ghost' as never, opcode: Opcode.RdmaWrite, remoteAddr: dst.addr, rkey: dst.stag }, [piece(a, src, 0, 32)]);
    ghost.flow = a.eng.srdFlow(qa, b.addr, 99);
    a.eng.postSend(qa, ghost, h.now);
    h.run();
    expect(a.cq.take().map((w) => [w.wrId, w.status])).toEqual([['ghost', WcStatus.RetryExcErr]]);
    expect(qa.state).toBe(QpState.Rts);
    a.bytes(src, 0, 32).fill(7);
    const live = wr({ wrId: 'live' as never, opcode: Opcode.RdmaWrite, remoteAddr: dst.addr, rkey: dst.stag }, [piece(a, src, 0, 32)]);
    live.flow = a.eng.srdFlow(qa, b.addr, qb.qpn);
    a.eng.postSend(qa, live, h.now);
    h.run();
    expect(a.cq.take().map((w) => [w.wrId, w.status])).toEqual([['live', WcStatus.Success]]);
    expect([...b.bytes(dst, 0, 32)]).toEqual(new Array(32).fill(7));
  });

  it('a slow but live responder is not timed out, and an idle flow leaves no deadline', async () => {
    const h = new Harness({ seed: 3 });
    const a = await h.node(64);
    const b = await h.node(64);
    const [qa] = h.connect(a, b, { timeoutMs: 50, rnrTimeoutMs: 20, rnrRetry: 20 });
    const src = a.regMr(4096);
    // A Send with no receive posted: the responder answers RNR every 20 ms (it is alive), for
    // 200 ms of virtual time — four times the watchdog's 50 ms — before a receive appears.
    a.eng.postSend(qa, wr({ wrId: 1, opcode: Opcode.Send }, [piece(a, src, 0, 16)]), h.now);
    const until = h.now + 200;
    while (h.now < until) {
      h.collect();
      while (h.inflight.length > 0) {
        h.step();
        h.collect();
      }
      const t = Math.min(a.eng.pollTimeout() ?? Infinity, b.eng.pollTimeout() ?? Infinity);
      h.now = Math.min(until, t);
      a.eng.handleTimeout(h.now);
      b.eng.handleTimeout(h.now);
    }
    expect(a.cq.take()).toEqual([]);
    expect(a.eng.counters.timeouts).toBe(0);
    expect(b.eng.counters.rnrNaksSent).toBeGreaterThan(5);
    const qb = [...b.eng.qps.values()][0]!;
    const dst = b.regMr(64);
    b.eng.postRecv(qb, { wrId: 9, pieces: [piece(b, dst, 0, 64)], total: 64, claimed: false }, h.now);
    h.run();
    expect(a.cq.take().map((w) => [w.wrId, w.status])).toEqual([[1, WcStatus.Success]]);
    expect(a.eng.pollTimeout()).toBeUndefined();
    expect(qa.state).toBe(QpState.Rts);
  });
});

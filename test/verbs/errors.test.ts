// QP ERROR and flush, receiver-not-ready, CQ overrun, and API misuse.
import { describe, expect, it } from 'vitest';
import { ErrorCode, Opcode, QpState, SabreError, WcOpcode, WcStatus, openDevice } from '../../src/index.js';
import { ALL, closeAll, pair, settle, side, take } from './helpers.js';

const code = (f: () => unknown): string | undefined => {
  try {
    f();
  } catch (e) {
    expect(e).toBeInstanceOf(SabreError);
    return (e as SabreError).code;
  }
  return undefined;
};

describe('QP error and flush', () => {
  it('modify to ERROR flushes posted receives and queued sends; later posts complete WrFlushErr', async () => {
    const [a, b] = await pair({ qp: { maxRdAtomic: 1 } });
    const mr = a.pd.regMr(4096, ALL);
    const rmr = b.pd.regMr(4096, ALL);
    a.qp.postRecv([{ wrId: 1, sgList: [{ addr: mr.addr, length: 64, lkey: mr.lkey }] }, { wrId: 2 }]);
    // Two reads with maxRdAtomic 1: the second waits in the send queue.
    a.qp.postSend({ wrId: 3, opcode: Opcode.RdmaRead, sgList: [{ addr: mr.addr, length: 8, lkey: mr.lkey }], remoteAddr: rmr.addr, rkey: rmr.rkey });
    a.qp.postSend({ wrId: 4, opcode: Opcode.RdmaRead, sgList: [{ addr: mr.addr, length: 8, lkey: mr.lkey }], remoteAddr: rmr.addr, rkey: rmr.rkey });
    a.qp.modify({ state: QpState.Error });
    expect(a.qp.state).toBe(QpState.Error);
    const wcs = await take(a.cq, 4);
    expect(wcs.map((w) => [w.wrId, w.status, w.opcode])).toEqual([
      [3, WcStatus.WrFlushErr, WcOpcode.RdmaRead],
      [4, WcStatus.WrFlushErr, WcOpcode.RdmaRead],
      [1, WcStatus.WrFlushErr, WcOpcode.Recv],
      [2, WcStatus.WrFlushErr, WcOpcode.Recv],
    ]);
    a.qp.postSend({ wrId: 5, opcode: Opcode.Send, sgList: [] });
    a.qp.postRecv({ wrId: 6 });
    expect((await take(a.cq, 2)).map((w) => [w.wrId, w.status])).toEqual([[5, WcStatus.WrFlushErr], [6, WcStatus.WrFlushErr]]);
    await closeAll(a, b);
  });
});

describe('receiver not ready', () => {
  it('a Send with no posted receive retries, then succeeds once a receive is posted', async () => {
    const [a, b] = await pair({ qp: { rnrRetry: 1000, rnrTimeoutMs: 1 } });
    const src = a.pd.regMr(64, ALL);
    const dst = b.pd.regMr(64, ALL);
    src.buffer.fill(7, 0, 32);
    a.qp.postSend({ wrId: 1, opcode: Opcode.Send, sgList: [{ addr: src.addr, length: 32, lkey: src.lkey }] });
    await settle();
    expect(b.dev.stats().rnrNaksSent).toBeGreaterThanOrEqual(1);
    b.qp.postRecv({ wrId: 2, sgList: [{ addr: dst.addr, length: 64, lkey: dst.lkey }] });
    expect((await take(b.cq, 1))[0]).toMatchObject({ wrId: 2, status: WcStatus.Success, byteLen: 32 });
    expect((await take(a.cq, 1))[0]).toMatchObject({ wrId: 1, status: WcStatus.Success });
    expect(dst.buffer.subarray(0, 32).every((x) => x === 7)).toBe(true);
    await closeAll(a, b);
  });

  it('exhausting rnrRetry completes RnrRetryExcErr and moves the QP to ERROR', async () => {
    const [a, b] = await pair({ qp: { rnrRetry: 3, rnrTimeoutMs: 1 } });
    const src = a.pd.regMr(64, ALL);
    a.qp.postSend({ wrId: 1, opcode: Opcode.Send, sgList: [{ addr: src.addr, length: 32, lkey: src.lkey }] });
    a.qp.postSend({ wrId: 2, opcode: Opcode.Send, sgList: [{ addr: src.addr, length: 32, lkey: src.lkey }] });
    const r = await take(a.cq, 2);
    expect(r.map((w) => [w.wrId, w.status])).toEqual([[1, WcStatus.RnrRetryExcErr], [2, WcStatus.WrFlushErr]]);
    expect(a.qp.state).toBe(QpState.Error);
    expect(a.dev.stats().rnrRetries).toBe(3);
    await closeAll(a, b);
  });

  it('RdmaWriteWithImm with no receive is RNR too', async () => {
    const [a, b] = await pair({ qp: { rnrRetry: 2, rnrTimeoutMs: 1 } });
    const src = a.pd.regMr(64, ALL);
    const dst = b.pd.regMr(64, ALL);
    a.qp.postSend({ wrId: 1, opcode: Opcode.RdmaWriteWithImm, imm: 1, sgList: [{ addr: src.addr, length: 8, lkey: src.lkey }], remoteAddr: dst.addr, rkey: dst.rkey });
    expect((await take(a.cq, 1))[0]).toMatchObject({ wrId: 1, status: WcStatus.RnrRetryExcErr });
    await closeAll(a, b);
  });
});

describe('CQ overrun', () => {
  it('a completion into a full CQ marks it overrun and moves its QPs to ERROR', async () => {
    const [a, b] = await pair({ depth: 2 });
    const src = a.pd.regMr(64, ALL);
    const dst = b.pd.regMr(64, ALL);
    for (let i = 0; i < 3; i++) a.qp.postSend({ wrId: i, opcode: Opcode.RdmaWrite, sgList: [{ addr: src.addr, length: 8, lkey: src.lkey }], remoteAddr: dst.addr, rkey: dst.rkey });
    await settle();
    expect(a.cq.overrun).toBe(true);
    expect(a.qp.state).toBe(QpState.Error);
    expect(a.cq.dropped).toBeGreaterThanOrEqual(1);
    expect(a.cq.poll(10).map((w) => w.wrId)).toEqual([0, 1]);
    expect(code(() => a.cq.poll())).toBe(ErrorCode.InvalidState);
    await expect(a.cq.wait()).rejects.toMatchObject({ code: ErrorCode.InvalidState });
    await closeAll(a, b);
  });
});

describe('cq.wait', () => {
  it('resolves at once when a completion is held; times out with Timeout otherwise', async () => {
    const s = await side();
    await expect(s.cq.wait(5)).rejects.toMatchObject({ code: ErrorCode.Timeout });
    s.qp.modify({ state: QpState.Error });
    s.qp.postRecv({ wrId: 1 });
    await s.cq.wait(0);
    await s.cq.wait();
    expect(s.cq.poll()).toHaveLength(1);
    await s.dev.close();
  });
});

describe('API misuse throws SabreError with stable codes', () => {
  it('covers the checks', async () => {
    await expect(openDevice({ transport: 'bogus' as never })).rejects.toMatchObject({ code: ErrorCode.InvalidArgument });
    const s = await side({ qp: { maxSendWr: 2, maxRecvWr: 1, maxSge: 2 } });
    const { dev, pd, cq, qp } = s;
    const mr = pd.regMr(4096, ALL);
    expect(code(() => pd.regMr(-1, ALL))).toBe(ErrorCode.InvalidArgument);
    expect(code(() => pd.regMr(64, 0x100))).toBe(ErrorCode.InvalidArgument);
    expect(code(() => dev.createCq({ depth: 0 }))).toBe(ErrorCode.InvalidArgument);
    expect(code(() => pd.createQp({ type: 'xx' as never, sendCq: cq, recvCq: cq, maxSendWr: 1, maxRecvWr: 1, maxSge: 1 }))).toBe(ErrorCode.InvalidArgument);
    expect(code(() => pd.createQp({ type: 'rc', sendCq: cq, recvCq: cq, maxSendWr: 1e9, maxRecvWr: 1, maxSge: 1 }))).toBe(ErrorCode.LimitExceeded);
    // Not connected yet.
    expect(code(() => qp.postSend({ wrId: 1, opcode: Opcode.Send }))).toBe(ErrorCode.InvalidState);
    // Receive queue caps.
    expect(code(() => qp.postRecv({ wrId: 1, sgList: [{ addr: mr.addr, length: 1, lkey: mr.lkey }, { addr: mr.addr, length: 1, lkey: mr.lkey }, { addr: mr.addr, length: 1, lkey: mr.lkey }] }))).toBe(ErrorCode.LimitExceeded);
    expect(code(() => qp.postRecv({ wrId: 1, sgList: [{ addr: mr.addr, length: 1, lkey: mr.lkey ^ 1 }] }))).toBe(ErrorCode.LocalProtection);
    expect(code(() => qp.postRecv({ wrId: 1, sgList: [{ addr: mr.addr + 4090, length: 10, lkey: mr.lkey }] }))).toBe(ErrorCode.LocalProtection);
    const ro = pd.regMr(64, 0);
    expect(code(() => qp.postRecv({ wrId: 1, sgList: [{ addr: ro.addr, length: 8, lkey: ro.lkey }] }))).toBe(ErrorCode.LocalProtection);
    expect(code(() => qp.postRecv({ wrId: 'x' as never }))).toBe(ErrorCode.InvalidArgument);
    qp.postRecv({ wrId: 1 });
    expect(code(() => qp.postRecv({ wrId: 2 }))).toBe(ErrorCode.QueueFull);
    // srd is not connectable; connect to nowhere is Unreachable.
    await expect(qp.connect({ address: { transport: 'inproc', id: 'nowhere:0:0' }, qpn: 1 })).rejects.toMatchObject({ code: ErrorCode.Unreachable });
    const srd = pd.createQp({ type: 'srd', sendCq: cq, recvCq: cq, maxSendWr: 1, maxRecvWr: 1, maxSge: 1 });
    await expect(srd.connect({ address: dev.address, qpn: 1 })).rejects.toMatchObject({ code: ErrorCode.NotSupported });
    expect(code(() => srd.postSend({ wrId: 1, opcode: Opcode.Send }))).toBe(ErrorCode.InvalidArgument);
    await dev.close();
    expect(code(() => dev.allocPd())).toBe(ErrorCode.Closed);
    expect(code(() => qp.postRecv({ wrId: 1 }))).toBe(ErrorCode.Closed);
  });

  it('postSend argument checks on a connected QP', async () => {
    const [a, b] = await pair({ qp: { maxSendWr: 2, maxSge: 2 } });
    const mr = a.pd.regMr(4096, ALL);
    const sg = [{ addr: mr.addr, length: 8, lkey: mr.lkey }];
    const { qp } = a;
    expect(code(() => qp.postSend({ wrId: 1, opcode: 99 as never }))).toBe(ErrorCode.InvalidArgument);
    expect(code(() => qp.postSend({ wrId: 1, opcode: Opcode.SendWithImm }))).toBe(ErrorCode.InvalidArgument);
    expect(code(() => qp.postSend({ wrId: 1, opcode: Opcode.RdmaWrite, sgList: sg }))).toBe(ErrorCode.InvalidArgument);
    expect(code(() => qp.postSend({ wrId: 1, opcode: Opcode.AtomicFetchAdd, sgList: [{ addr: mr.addr, length: 4, lkey: mr.lkey }], remoteAddr: 0, rkey: 1, compareAdd: 1n }))).toBe(ErrorCode.InvalidArgument);
    expect(code(() => qp.postSend({ wrId: 1, opcode: Opcode.AtomicCmpSwap, sgList: sg, remoteAddr: 0, rkey: 1, compareAdd: 1n }))).toBe(ErrorCode.InvalidArgument);
    expect(code(() => qp.postSend({ wrId: 1, opcode: Opcode.RdmaRead, sgList: sg, remoteSgList: [{ addr: 0, length: 4, rkey: 1 }] }))).toBe(ErrorCode.InvalidArgument);
    expect(code(() => qp.postSend({ wrId: 1, opcode: Opcode.RdmaRead, sgList: sg, remoteSgList: [1, 2, 3].map(() => ({ addr: 0, length: 1, rkey: 1 })) }))).toBe(ErrorCode.LimitExceeded);
    expect(code(() => qp.postSend({ wrId: 1, opcode: Opcode.Send, sgList: [{ addr: mr.addr, length: 8, lkey: 12345 }] }))).toBe(ErrorCode.LocalProtection);
    const ro = a.pd.regMr(64, 0);
    expect(code(() => qp.postSend({ wrId: 1, opcode: Opcode.RdmaRead, sgList: [{ addr: ro.addr, length: 8, lkey: ro.lkey }], remoteAddr: 0, rkey: 1 }))).toBe(ErrorCode.LocalProtection);
    expect(code(() => qp.postSend([1, 2, 3].map((i) => ({ wrId: i, opcode: Opcode.Send }))))).toBe(ErrorCode.QueueFull);
    await closeAll(a, b);
  });
});

describe('srd', () => {
  it('sends and writes between srd QPs named by address handle; srcQpn reported', async () => {
    const a = await side();
    const b = await side();
    const qa = a.pd.createQp({ type: 'srd', sendCq: a.cq, recvCq: a.cq, maxSendWr: 64, maxRecvWr: 64, maxSge: 2 });
    const qb = b.pd.createQp({ type: 'srd', sendCq: b.cq, recvCq: b.cq, maxSendWr: 64, maxRecvWr: 64, maxSge: 2 });
    expect(qa.state).toBe(QpState.Rts);
    const ah = a.pd.createAh({ address: JSON.parse(JSON.stringify(b.dev.address)) });
    const src = a.pd.regMr(4096, ALL);
    const dst = b.pd.regMr(4096, ALL);
    src.buffer.set([1, 2, 3, 4, 5]);
    qb.postRecv({ wrId: 1, sgList: [{ addr: dst.addr, length: 100, lkey: dst.lkey }] });
    qa.postSend({ wrId: 2, opcode: Opcode.SendWithImm, imm: 3, ah, remoteQpn: qb.qpn, sgList: [{ addr: src.addr, length: 5, lkey: src.lkey }] });
    qa.postSend({ wrId: 3, opcode: Opcode.RdmaWrite, ah, remoteQpn: qb.qpn, sgList: [{ addr: src.addr, length: 5, lkey: src.lkey }], remoteAddr: dst.addr + 200, rkey: dst.rkey });
    expect((await take(b.cq, 1))[0]).toMatchObject({ wrId: 1, status: WcStatus.Success, byteLen: 5, imm: 3, srcQpn: qa.qpn, qpn: qb.qpn });
    expect((await take(a.cq, 2)).map((w) => w.status)).toEqual([0, 0]);
    expect([...dst.buffer.subarray(0, 5)]).toEqual([1, 2, 3, 4, 5]);
    expect([...dst.buffer.subarray(200, 205)]).toEqual([1, 2, 3, 4, 5]);
    await closeAll(a, b);
  });
});

import { describe, expect, it } from 'vitest';
import { ErrorCode, Opcode, QpState, WcStatus } from '../../src/index.js';
import { ALL, closeAll, side, take } from './helpers.js';

describe('QP states', () => {
  it('INIT → (connect) RTR → RTS → ERROR → RESET → reconnect to another peer', async () => {
    const a = await side();
    const b = await side();
    const c = await side();
    expect(a.qp.state).toBe(QpState.Init);
    const pa = a.qp.connect({ address: b.dev.address, qpn: b.qp.qpn });
    expect(a.qp.state).toBe(QpState.Rtr);
    await Promise.all([pa, b.qp.connect({ address: a.dev.address, qpn: a.qp.qpn })]);
    expect(a.qp.state).toBe(QpState.Rts);
    expect(() => a.qp.modify({ state: QpState.Reset })).toThrow(expect.objectContaining({ code: ErrorCode.InvalidState }));
    a.qp.modify({ state: QpState.Error });
    expect(a.qp.state).toBe(QpState.Error);
    a.qp.modify({ state: QpState.Reset });
    expect(a.qp.state).toBe(QpState.Reset);
    expect(() => a.qp.postRecv({ wrId: 1 })).toThrow(expect.objectContaining({ code: ErrorCode.InvalidState }));
    a.qp.modify({ state: QpState.Init });
    await Promise.all([a.qp.connect({ address: c.dev.address, qpn: c.qp.qpn }), c.qp.connect({ address: a.dev.address, qpn: a.qp.qpn })]);
    const src = a.pd.regMr(64, ALL);
    const dst = c.pd.regMr(64, ALL);
    src.buffer.fill(9);
    a.qp.postSend({ wrId: 1, opcode: Opcode.RdmaWrite, sgList: [{ addr: src.addr, length: 64, lkey: src.lkey }], remoteAddr: dst.addr, rkey: dst.rkey });
    expect((await take(a.cq, 1))[0]).toMatchObject({ wrId: 1, status: WcStatus.Success });
    expect(dst.buffer.every((x) => x === 9)).toBe(true);
    await closeAll(a, b, c);
  });
});

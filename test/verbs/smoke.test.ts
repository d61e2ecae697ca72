import { describe, expect, it } from 'vitest';
import { Opcode, WcOpcode, WcStatus } from '../../src/index.js';
import { ALL, closeAll, fill, pair, take } from './helpers.js';

describe('smoke', () => {
  it('rc write, send/recv, read', async () => {
    const [a, b] = await pair();
    const src = a.pd.regMr(4096, ALL);
    const dst = b.pd.regMr(4096, ALL);
    fill(src.buffer, 7);
    a.qp.postSend({ wrId: 1, opcode: Opcode.RdmaWrite, sgList: [{ addr: src.addr, length: 1000, lkey: src.lkey }], remoteAddr: dst.addr + 10, rkey: dst.rkey });
    const [wc] = await take(a.cq, 1);
    expect(wc).toMatchObject({ wrId: 1, status: WcStatus.Success, opcode: WcOpcode.RdmaWrite, byteLen: 1000 });
    expect(Buffer.from(dst.buffer.subarray(10, 1010)).equals(Buffer.from(src.buffer.subarray(0, 1000)))).toBe(true);

    b.qp.postRecv({ wrId: 9n, sgList: [{ addr: dst.addr + 2000, length: 500, lkey: dst.lkey }] });
    a.qp.postSend({ wrId: 2, opcode: Opcode.Send, sgList: [{ addr: src.addr + 5, length: 300, lkey: src.lkey }] });
    const [rwc] = await take(b.cq, 1);
    expect(rwc).toMatchObject({ wrId: 9n, status: WcStatus.Success, opcode: WcOpcode.Recv, byteLen: 300 });
    expect(Buffer.from(dst.buffer.subarray(2000, 2300)).equals(Buffer.from(src.buffer.subarray(5, 305)))).toBe(true);
    expect((await take(a.cq, 1))[0]).toMatchObject({ wrId: 2, status: WcStatus.Success, opcode: WcOpcode.Send });

    const sink = a.pd.regMr(4096, ALL);
    a.qp.postSend({ wrId: 3, opcode: Opcode.RdmaRead, sgList: [{ addr: sink.addr, length: 1500, lkey: sink.lkey }], remoteAddr: dst.addr, rkey: dst.rkey });
    expect((await take(a.cq, 1))[0]).toMatchObject({ wrId: 3, status: WcStatus.Success, opcode: WcOpcode.RdmaRead, byteLen: 1500 });
    expect(Buffer.from(sink.buffer.subarray(0, 1500)).equals(Buffer.from(dst.buffer.subarray(0, 1500)))).toBe(true);
    await closeAll(a, b);
  });
});

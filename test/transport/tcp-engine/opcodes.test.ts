// Every rc opcode between two devices in two processes over a real TCP connection on
// 127.0.0.1 (iWARP: MPA FPDUs with CRC32C, MULPDU ~64 KB, so anything larger is several
// segments), bytes compared on both sides against an independent expectation (the xorshift
// patterns both sides can make); RNR between sabre peers; protection errors; a killed peer.
import { describe, expect, it } from 'vitest';
import { Opcode, QpState, WcStatus } from '../../../src/index.js';
import { ALL, pattern, same, take } from './helpers.js';
import { rcOpcodeSuite, useRemote } from '../peer/remote.js';

const f = useRemote('tcp');

rcOpcodeSuite(f);


describe('tcp: two processes, errors', () => {
  it('RNR between sabre peers: Sends before the receive is posted wait, then land in order', async () => {
    const { pd, cq, qp, rqp } = await f.rcPair({ rnrRetry: 1000, rnrTimeoutMs: 2 });
    const src = pd.regMr(4 * 100_000, ALL);
    src.buffer.set(pattern(4 * 100_000, 5));
    for (let i = 0; i < 4; i++) qp.postSend({ wrId: i, opcode: Opcode.Send, sgList: [{ addr: src.addr + i * 100_000, length: 100_000, lkey: src.lkey }] });
    const dst = await f.rmr(4 * 100_000);
    // Receives trickle in one by one, each after the previous Send had to be retried.
    for (let i = 0; i < 4; i++) {
      await f.peer.call('postRecv', { qp: rqp, wrs: [{ wrId: 50 + i, sgList: [{ addr: dst.addr + i * 100_000, length: 100_000, lkey: dst.lkey }] }] });
      await new Promise((r) => setTimeout(r, 5));
    }
    expect((await take(cq, 4)).map((w) => [w.wrId, w.status])).toEqual([0, 1, 2, 3].map((i) => [i, WcStatus.Success]));
    const r = await f.peer.call<{ wrId: number; status: number; byteLen: number }[]>('poll', { n: 4 });
    expect(r.map((w) => [w.wrId, w.status, w.byteLen])).toEqual([0, 1, 2, 3].map((i) => [50 + i, WcStatus.Success, 100_000]));
    expect(same(await f.rbytes(dst, 0, 400_000), src.buffer.subarray(0, 400_000))).toBe(true);
    expect((await f.peer.call<{ rnrNaksSent: number }>('stats')).rnrNaksSent).toBeGreaterThan(0);
  });

  it('protection violation: RemAccessErr, Terminate, both QPs ERROR, responder memory untouched', async () => {
    const { pd, cq, qp, rqp } = await f.rcPair();
    const dst = await f.rmr(4096, 0);
    const ro = await f.rmr(4096, 0, 1 /* LocalWrite only */);
    const src = pd.regMr(8192, ALL);
    src.buffer.fill(0xee);
    await f.peer.call('postRecv', { qp: rqp, wrs: [{ wrId: 1, sgList: [] }] });
    qp.postSend({ wrId: 1, opcode: Opcode.RdmaWrite, sgList: [{ addr: src.addr, length: 100, lkey: src.lkey }], remoteAddr: dst.addr, rkey: dst.rkey });
    qp.postSend({ wrId: 2, opcode: Opcode.RdmaWrite, sgList: [{ addr: src.addr, length: 100, lkey: src.lkey }], remoteAddr: ro.addr, rkey: ro.rkey });
    qp.postSend({ wrId: 3, opcode: Opcode.RdmaWrite, sgList: [{ addr: src.addr, length: 100, lkey: src.lkey }], remoteAddr: dst.addr + 200, rkey: dst.rkey });
    expect((await take(cq, 3)).map((w) => [w.wrId, w.status])).toEqual([[1, WcStatus.Success], [2, WcStatus.RemAccessErr], [3, WcStatus.WrFlushErr]]);
    expect(qp.state).toBe(QpState.Error);
    const r = await f.peer.call<{ wrId: number; status: number }[]>('poll', { n: 1 });
    expect(r).toMatchObject([{ wrId: 1, status: WcStatus.WrFlushErr }]);
    expect(await f.peer.call('state', { qp: rqp })).toBe(QpState.Error);
    expect((await f.rbytes(ro, 0, 4096)).every((x) => x === 0)).toBe(true);
    const d = await f.rbytes(dst, 0, 400);
    expect(d.subarray(0, 100).every((x) => x === 0xee)).toBe(true);
    // (Write 3 completed WrFlushErr: as in verbs, whether a flushed write's bytes landed is not
    // defined — here it arrived in the same read as write 2 and was placed in the same batch.)
    expect(d.subarray(100, 200).every((x) => x === 0)).toBe(true);
    expect((await f.peer.call<{ terminatesSent: number }>('stats')).terminatesSent).toBeGreaterThan(0);
    expect(f.dev.stats().terminatesReceived).toBeGreaterThan(0);
    // The device keeps serving: a fresh pair works.
    const again = await f.rcPair();
    const src2 = again.pd.regMr(64, ALL);
    again.qp.postSend({ wrId: 9, opcode: Opcode.RdmaWrite, sgList: [{ addr: src2.addr, length: 64, lkey: src2.lkey }], remoteAddr: dst.addr + 1000, rkey: dst.rkey });
    expect(await take(again.cq, 1)).toMatchObject([{ wrId: 9, status: WcStatus.Success }]);
  });
});

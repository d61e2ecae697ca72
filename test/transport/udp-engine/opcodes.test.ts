// Every opcode between two devices in two processes over real UDP sockets on 127.0.0.1
// (mtu 1500, so anything past ~1.4 KB is several datagrams), rc and srd, bytes compared on
// both sides against an independent expectation (the xorshift patterns both sides can make).
import { describe, expect, it } from 'vitest';
import { Opcode, QpState, WcStatus } from '../../../src/index.js';
import { ALL, pattern, same, take, type RemoteMr } from './helpers.js';
import { rcOpcodeSuite, useRemote } from '../peer/remote.js';

const f = useRemote('udp', { mtu: 1500 });

rcOpcodeSuite(f);

describe('udp: two processes, srd', () => {
  it('Send, Write, WriteWithImm, Read and atomics through address handles, both ways', async () => {
    const pd = f.dev.allocPd();
    const cq = f.dev.createCq({ depth: 1024 });
    const qp = pd.createQp({ type: 'srd', sendCq: cq, recvCq: cq, maxSendWr: 256, maxRecvWr: 256, maxSge: 8 });
    const r = await f.peer.call<{ h: number; qpn: number }>('qp', { type: 'srd' });
    const ah = pd.createAh({ address: { ...f.peer.address } });
    const rah = await f.peer.call<number>('ah', { address: { ...f.dev.address } });
    const src = pd.regMr(100_000, ALL);
    src.buffer.set(pattern(100_000, 41));
    const dst = await f.rmr(100_000);
    await f.peer.call('postRecv', { qp: r.h, wrs: [{ wrId: 1, sgList: [{ addr: dst.addr + 50_000, length: 30_000, lkey: dst.lkey }] }, { wrId: 2, sgList: [] }] });
    const to = { ah, remoteQpn: r.qpn };
    qp.postSend({ wrId: 1, opcode: Opcode.RdmaWrite, sgList: [{ addr: src.addr, length: 40_000, lkey: src.lkey }], remoteAddr: dst.addr, rkey: dst.rkey, ...to });
    qp.postSend({ wrId: 2, opcode: Opcode.Send, sgList: [{ addr: src.addr + 40_000, length: 25_000, lkey: src.lkey }], ...to });
    qp.postSend({ wrId: 3, opcode: Opcode.RdmaWriteWithImm, imm: 7, sgList: [{ addr: src.addr + 70_000, length: 100, lkey: src.lkey }], remoteAddr: dst.addr + 90_000, rkey: dst.rkey, ...to });
    const w1 = await take(cq, 3);
    expect(w1.map((w) => w.status)).toEqual([0, 0, 0]);
    expect(new Set(w1.map((w) => w.wrId))).toEqual(new Set([1, 2, 3]));
    const rr = await f.peer.call<{ wrId: number; status: number; byteLen: number; srcQpn: number; imm?: number }[]>('poll', { n: 2 });
    expect(rr.map((w) => [w.wrId, w.status, w.srcQpn]).sort()).toEqual([[1, 0, qp.qpn], [2, 0, qp.qpn]]);
    const got = await f.rbytes(dst, 0, 100_000);
    expect(same(got.subarray(0, 40_000), src.buffer.subarray(0, 40_000))).toBe(true);
    expect(same(got.subarray(50_000, 75_000), src.buffer.subarray(40_000, 65_000))).toBe(true);
    expect(same(got.subarray(90_000, 90_100), src.buffer.subarray(70_000, 70_100))).toBe(true);
    // Read back what we wrote, and an atomic, through the same handle.
    const sink = pd.regMr(40_000, ALL);
    qp.postSend({ wrId: 4, opcode: Opcode.RdmaRead, sgList: [{ addr: sink.addr, length: 40_000, lkey: sink.lkey }], remoteSgList: [{ addr: dst.addr + 20_000, length: 20_000, rkey: dst.rkey }, { addr: dst.addr, length: 20_000, rkey: dst.rkey }], ...to });
    qp.postSend({ wrId: 5, opcode: Opcode.AtomicFetchAdd, compareAdd: 5n, sgList: [{ addr: src.addr + 99_992, length: 8, lkey: src.lkey }], remoteAddr: dst.addr + 99_992, rkey: dst.rkey, ...to });
    const w2 = await take(cq, 2);
    expect(w2.map((w) => w.status)).toEqual([0, 0]);
    expect(same(sink.buffer.subarray(0, 20_000), src.buffer.subarray(20_000, 40_000))).toBe(true);
    expect(same(sink.buffer.subarray(20_000, 40_000), src.buffer.subarray(0, 20_000))).toBe(true);
    expect(new BigUint64Array(src.buffer.slice(99_992, 100_000).buffer)[0]).toBe(0n);
    expect(new BigUint64Array((await f.rbytes(dst, 99_992, 8)).slice().buffer)[0]).toBe(5n);
    // The child sends to us through its own handle.
    const back = await f.rmr(3000, 43);
    const land = pd.regMr(3000, ALL);
    qp.postRecv({ wrId: 77, sgList: [{ addr: land.addr, length: 3000, lkey: land.lkey }] });
    await f.peer.call('postSend', { qp: r.h, wrs: [{ wrId: 1, opcode: Opcode.SendWithImm, imm: 99, sgList: [{ addr: back.addr, length: 3000, lkey: back.lkey }], ah: rah, remoteQpn: qp.qpn }] });
    const [rw] = await take(cq, 1);
    expect(rw).toMatchObject({ wrId: 77, status: 0, byteLen: 3000, imm: 99, srcQpn: r.qpn });
    expect(same(land.buffer, pattern(3000, 43))).toBe(true);
  });
});

describe('udp: protection over the wire', () => {
  const cases: [string, (m: RemoteMr) => { remoteAddr: number; rkey: number }, number][] = [
    ['wrong rkey', (m) => ({ remoteAddr: m.addr, rkey: (m.rkey ^ 0x5a) >>> 0 }), ALL],
    ['past the end', (m) => ({ remoteAddr: m.addr + m.length - 10, rkey: m.rkey }), ALL],
    ['no RemoteWrite access', (m) => ({ remoteAddr: m.addr, rkey: m.rkey }), ALL & ~2],
  ];
  for (const [name, target, access] of cases) {
    it(`RdmaWrite with ${name} → RemAccessErr, responder memory untouched, QP in ERROR`, async () => {
      const { pd, cq, qp } = await f.rcPair();
      const m = await f.rmr(4096, 51, access);
      const src = pd.regMr(4096, ALL);
      src.buffer.fill(0xee);
      qp.postSend({ wrId: 1, opcode: Opcode.RdmaWrite, sgList: [{ addr: src.addr, length: 100, lkey: src.lkey }], ...target(m) });
      const [wc] = await take(cq, 1);
      expect(wc).toMatchObject({ wrId: 1, status: WcStatus.RemAccessErr });
      expect(same(await f.rbytes(m, 0, 4096), pattern(4096, 51))).toBe(true);
      expect(qp.state).toBe(QpState.Error);
      qp.postSend({ wrId: 2, opcode: Opcode.Send, sgList: [] });
      expect((await take(cq, 1))[0]).toMatchObject({ wrId: 2, status: WcStatus.WrFlushErr });
    });
  }

  it('RdmaRead and atomic with a deregistered key → RemAccessErr', async () => {
    const m = await f.rmr(4096, 52);
    await f.peer.call('dereg', { mr: m.h });
    for (const wr of [
      { opcode: Opcode.RdmaRead, remoteAddr: m.addr, rkey: m.rkey, len: 64 },
      { opcode: Opcode.AtomicFetchAdd, remoteAddr: m.addr, rkey: m.rkey, len: 8, compareAdd: 1n },
    ]) {
      const { pd, cq, qp } = await f.rcPair();
      const sink = pd.regMr(64, ALL);
      const { len, ...rest } = wr;
      qp.postSend({ wrId: 1, sgList: [{ addr: sink.addr, length: len, lkey: sink.lkey }], ...rest });
      expect((await take(cq, 1))[0]).toMatchObject({ wrId: 1, status: WcStatus.RemAccessErr });
      expect(sink.buffer.every((b) => b === 0)).toBe(true);
    }
  });
});

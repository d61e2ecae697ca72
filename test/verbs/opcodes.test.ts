// Every opcode on an rc pair over inproc, bytes compared against an independent expectation.
import { describe, expect, it } from 'vitest';
import { Access, Opcode, WcOpcode, WcStatus } from '../../src/index.js';
import { ALL, closeAll, fill, pair, take } from './helpers.js';

const eq = (a: Uint8Array, b: Uint8Array): boolean => Buffer.from(a).equals(Buffer.from(b));

describe('opcodes (rc, inproc)', () => {
  it('RdmaWrite across several segments and several local sges', async () => {
    const [a, b] = await pair({ mss: 1000 });
    const src = a.pd.regMr(10000, ALL);
    const dst = b.pd.regMr(10000, ALL);
    fill(src.buffer, 1);
    const sg = [
      { addr: src.addr, length: 1234, lkey: src.lkey },
      { addr: src.addr + 5000, length: 3001, lkey: src.lkey },
      { addr: src.addr + 9000, length: 7, lkey: src.lkey },
    ];
    a.qp.postSend({ wrId: 1, opcode: Opcode.RdmaWrite, sgList: sg, remoteAddr: dst.addr + 3, rkey: dst.rkey });
    expect((await take(a.cq, 1))[0]).toMatchObject({ status: WcStatus.Success, opcode: WcOpcode.RdmaWrite, byteLen: 4242 });
    const expected = Buffer.concat(sg.map((s) => Buffer.from(src.buffer.subarray(s.addr - src.addr, s.addr - src.addr + s.length))));
    expect(eq(dst.buffer.subarray(3, 3 + 4242), expected)).toBe(true);
    expect(dst.buffer[2]).toBe(0);
    expect(dst.buffer[3 + 4242]).toBe(0);
    expect(b.dev.stats().directSegments).toBe(5);
    await closeAll(a, b);
  });


  it('Send / SendWithImm / zero-length send', async () => {
    const [a, b] = await pair({ mss: 256 });
    const src = a.pd.regMr(8192, ALL);
    const dst = b.pd.regMr(8192, ALL);
    fill(src.buffer, 2);
    b.qp.postRecv({ wrId: 1, sgList: [{ addr: dst.addr, length: 100, lkey: dst.lkey }, { addr: dst.addr + 1000, length: 2000, lkey: dst.lkey }] });
    b.qp.postRecv({ wrId: 2, sgList: [{ addr: dst.addr + 4000, length: 64, lkey: dst.lkey }] });
    b.qp.postRecv({ wrId: 3, sgList: [] });
    a.qp.postSend({ wrId: 10, opcode: Opcode.Send, sgList: [{ addr: src.addr, length: 1500, lkey: src.lkey }] });
    a.qp.postSend({ wrId: 11, opcode: Opcode.SendWithImm, imm: 0xdeadbeef, sgList: [{ addr: src.addr + 2000, length: 64, lkey: src.lkey }] });
    a.qp.postSend({ wrId: 12, opcode: Opcode.Send, sgList: [] });
    const r = await take(b.cq, 3);
    expect(r.map((w) => [w.wrId, w.status, w.opcode, w.byteLen, w.imm])).toEqual([
      [1, WcStatus.Success, WcOpcode.Recv, 1500, undefined],
      [2, WcStatus.Success, WcOpcode.Recv, 64, 0xdeadbeef],
      [3, WcStatus.Success, WcOpcode.Recv, 0, undefined],
    ]);
    expect(eq(dst.buffer.subarray(0, 100), src.buffer.subarray(0, 100))).toBe(true);
    expect(eq(dst.buffer.subarray(1000, 2400), src.buffer.subarray(100, 1500))).toBe(true);
    expect(dst.buffer[2400]).toBe(0);
    expect(eq(dst.buffer.subarray(4000, 4064), src.buffer.subarray(2000, 2064))).toBe(true);
    const s = await take(a.cq, 3);
    expect(s.map((w) => [w.wrId, w.status, w.opcode])).toEqual([[10, 0, WcOpcode.Send], [11, 0, WcOpcode.Send], [12, 0, WcOpcode.Send]]);
    await closeAll(a, b);
  });

  it('RdmaWriteWithImm consumes a receive (empty sgList) with imm and byteLen = bytes written', async () => {
    const [a, b] = await pair({ mss: 512 });
    const src = a.pd.regMr(4096, ALL);
    const dst = b.pd.regMr(4096, ALL);
    fill(src.buffer, 3);
    b.qp.postRecv({ wrId: 77n, sgList: [] });
    a.qp.postSend({ wrId: 5, opcode: Opcode.RdmaWriteWithImm, imm: 42, sgList: [{ addr: src.addr, length: 2000, lkey: src.lkey }], remoteAddr: dst.addr + 64, rkey: dst.rkey });
    const [r] = await take(b.cq, 1);
    expect(r).toMatchObject({ wrId: 77n, status: WcStatus.Success, opcode: WcOpcode.RecvRdmaWithImm, byteLen: 2000, imm: 42, qpn: b.qp.qpn });
    expect(eq(dst.buffer.subarray(64, 2064), src.buffer.subarray(0, 2000))).toBe(true);
    expect((await take(a.cq, 1))[0]).toMatchObject({ wrId: 5, status: WcStatus.Success, opcode: WcOpcode.RdmaWrite });
    await closeAll(a, b);
  });

  it('RdmaRead single segment and multi-segment', async () => {
    const [a, b] = await pair({ mss: 700 });
    const sink = a.pd.regMr(8192, ALL);
    const src = b.pd.regMr(8192, ALL);
    fill(src.buffer, 4);
    a.qp.postSend({ wrId: 1, opcode: Opcode.RdmaRead, sgList: [{ addr: sink.addr, length: 100, lkey: sink.lkey }], remoteAddr: src.addr + 8, rkey: src.rkey });
    a.qp.postSend({ wrId: 2, opcode: Opcode.RdmaRead, sgList: [{ addr: sink.addr + 200, length: 5000, lkey: sink.lkey }], remoteAddr: src.addr + 1000, rkey: src.rkey });
    const r = await take(a.cq, 2);
    expect(r.map((w) => [w.wrId, w.status, w.opcode, w.byteLen])).toEqual([[1, 0, WcOpcode.RdmaRead, 100], [2, 0, WcOpcode.RdmaRead, 5000]]);
    expect(eq(sink.buffer.subarray(0, 100), src.buffer.subarray(8, 108))).toBe(true);
    expect(eq(sink.buffer.subarray(200, 5200), src.buffer.subarray(1000, 6000))).toBe(true);
    expect(sink.buffer[5200]).toBe(0);
    await closeAll(a, b);
  });

  it('vectored reads (M1) with uneven source/sink splits', async () => {
    const [a, b] = await pair({ mss: 300, qp: { maxSge: 16 } });
    const sink = a.pd.regMr(16384, ALL);
    const src1 = b.pd.regMr(8192, ALL);
    const src2 = b.pd.regMr(8192, ALL);
    fill(src1.buffer, 5);
    fill(src2.buffer, 6);
    const remote = [
      { addr: src1.addr + 1, length: 1000, rkey: src1.rkey },
      { addr: src2.addr + 77, length: 3, rkey: src2.rkey },
      { addr: src1.addr + 4000, length: 2500, rkey: src1.rkey },
      { addr: src2.addr, length: 497, rkey: src2.rkey },
    ]; // 4000 bytes
    const local = [
      { addr: sink.addr + 10, length: 1, lkey: sink.lkey },
      { addr: sink.addr + 100, length: 2999, lkey: sink.lkey },
      { addr: sink.addr + 8000, length: 1000, lkey: sink.lkey },
    ]; // 4000 bytes
    a.qp.postSend({ wrId: 9, opcode: Opcode.RdmaRead, sgList: local, remoteSgList: remote });
    expect((await take(a.cq, 1))[0]).toMatchObject({ wrId: 9, status: WcStatus.Success, opcode: WcOpcode.RdmaRead, byteLen: 4000 });
    const mrs = new Map([[src1.rkey, src1], [src2.rkey, src2]]);
    const want = Buffer.concat(remote.map((r) => { const m = mrs.get(r.rkey)!; return Buffer.from(m.buffer.subarray(r.addr - m.addr, r.addr - m.addr + r.length)); }));
    const got = Buffer.concat(local.map((l) => Buffer.from(sink.buffer.subarray(l.addr - sink.addr, l.addr - sink.addr + l.length))));
    expect(got.equals(want)).toBe(true);
    expect(sink.buffer[11]).toBe(0);
    expect(sink.buffer[99]).toBe(0);
    await closeAll(a, b);
  });

  it('atomics: FetchAdd and CmpSwap on little-endian 8-byte words; old value lands in the sge', async () => {
    const [a, b] = await pair();
    const res = a.pd.regMr(64, ALL);
    const tgt = b.pd.regMr(64, ALL);
    const tv = new DataView(tgt.buffer.buffer, tgt.buffer.byteOffset, 64);
    tv.setBigUint64(8, 0xffff_ffff_ffff_fff0n, true);
    a.qp.postSend({ wrId: 1, opcode: Opcode.AtomicFetchAdd, sgList: [{ addr: res.addr, length: 8, lkey: res.lkey }], remoteAddr: tgt.addr + 8, rkey: tgt.rkey, compareAdd: 0x20n });
    expect((await take(a.cq, 1))[0]).toMatchObject({ wrId: 1, status: WcStatus.Success, opcode: WcOpcode.FetchAdd, byteLen: 8 });
    const rv = new DataView(res.buffer.buffer, res.buffer.byteOffset, 64);
    expect(rv.getBigUint64(0, true)).toBe(0xffff_ffff_ffff_fff0n);
    expect(tv.getBigUint64(8, true)).toBe(0x10n); // wrapped mod 2^64
    // CmpSwap that fails (compare mismatch) then one that succeeds.
    a.qp.postSend({ wrId: 2, opcode: Opcode.AtomicCmpSwap, sgList: [{ addr: res.addr + 8, length: 8, lkey: res.lkey }], remoteAddr: tgt.addr + 8, rkey: tgt.rkey, compareAdd: 5n, swap: 99n });
    a.qp.postSend({ wrId: 3, opcode: Opcode.AtomicCmpSwap, sgList: [{ addr: res.addr + 16, length: 8, lkey: res.lkey }], remoteAddr: tgt.addr + 8, rkey: tgt.rkey, compareAdd: 0x10n, swap: 0x1122334455667788n });
    const r = await take(a.cq, 2);
    expect(r.map((w) => [w.wrId, w.status, w.opcode])).toEqual([[2, 0, WcOpcode.CmpSwap], [3, 0, WcOpcode.CmpSwap]]);
    expect(rv.getBigUint64(8, true)).toBe(0x10n);
    expect(rv.getBigUint64(16, true)).toBe(0x10n);
    expect(tv.getBigUint64(8, true)).toBe(0x1122334455667788n);
    expect([...tgt.buffer.subarray(8, 16)]).toEqual([0x88, 0x77, 0x66, 0x55, 0x44, 0x33, 0x22, 0x11]);
    await closeAll(a, b);
  });

  it('misaligned atomic completes RemInvReqErr and changes nothing', async () => {
    const [a, b] = await pair();
    const res = a.pd.regMr(64, ALL);
    const tgt = b.pd.regMr(64, ALL);
    fill(tgt.buffer, 9);
    const before = tgt.buffer.slice();
    a.qp.postSend({ wrId: 1, opcode: Opcode.AtomicFetchAdd, sgList: [{ addr: res.addr, length: 8, lkey: res.lkey }], remoteAddr: tgt.addr + 4, rkey: tgt.rkey, compareAdd: 1n });
    expect((await take(a.cq, 1))[0]).toMatchObject({ wrId: 1, status: WcStatus.RemInvReqErr });
    expect(eq(tgt.buffer, before)).toBe(true);
    await closeAll(a, b);
  });

  it('indirect path: external Uint8Array regions as write target, send target and read sink', async () => {
    const [a, b] = await pair({ mss: 1024 });
    const src = a.pd.regMr(8192, ALL);
    fill(src.buffer, 10);
    const ext = new Uint8Array(8192);
    const xb = b.pd.regMr(ext, Access.LocalWrite | Access.RemoteWrite | Access.RemoteRead);
    expect(xb.external).toBe(true);
    a.qp.postSend({ wrId: 1, opcode: Opcode.RdmaWrite, sgList: [{ addr: src.addr, length: 3000, lkey: src.lkey }], remoteAddr: xb.addr + 100, rkey: xb.rkey });
    expect((await take(a.cq, 1))[0]).toMatchObject({ status: WcStatus.Success });
    expect(eq(ext.subarray(100, 3100), src.buffer.subarray(0, 3000))).toBe(true);
    b.qp.postRecv({ wrId: 2, sgList: [{ addr: xb.addr + 5000, length: 2000, lkey: xb.lkey }] });
    a.qp.postSend({ wrId: 3, opcode: Opcode.Send, sgList: [{ addr: src.addr + 4000, length: 1500, lkey: src.lkey }] });
    expect((await take(b.cq, 1))[0]).toMatchObject({ wrId: 2, status: WcStatus.Success, byteLen: 1500 });
    expect(eq(ext.subarray(5000, 6500), src.buffer.subarray(4000, 5500))).toBe(true);
    await take(a.cq, 1);
    // Read from the external region into an external sink on a.
    const extA = new Uint8Array(4096);
    const xa = a.pd.regMr(extA, Access.LocalWrite);
    a.qp.postSend({ wrId: 4, opcode: Opcode.RdmaRead, sgList: [{ addr: xa.addr, length: 3000, lkey: xa.lkey }], remoteAddr: xb.addr + 100, rkey: xb.rkey });
    expect((await take(a.cq, 1))[0]).toMatchObject({ wrId: 4, status: WcStatus.Success, byteLen: 3000 });
    expect(eq(extA.subarray(0, 3000), src.buffer.subarray(0, 3000))).toBe(true);
    const sb = b.dev.stats();
    expect(sb.indirectSegments).toBe(3 + 2);
    expect(sb.indirectBytes).toBe(4500);
    expect(sb.directSegments).toBe(0);
    expect(a.dev.stats().indirectBytes).toBe(3000);
    await closeAll(a, b);
  });

  it('unsignaled work completes silently; wrId bigint returned exactly', async () => {
    const [a, b] = await pair();
    const src = a.pd.regMr(256, ALL);
    const dst = b.pd.regMr(256, ALL);
    a.qp.postSend({ wrId: 1, opcode: Opcode.RdmaWrite, signaled: false, sgList: [{ addr: src.addr, length: 8, lkey: src.lkey }], remoteAddr: dst.addr, rkey: dst.rkey });
    a.qp.postSend({ wrId: 2n ** 70n, opcode: Opcode.RdmaWrite, sgList: [{ addr: src.addr, length: 8, lkey: src.lkey }], remoteAddr: dst.addr, rkey: dst.rkey });
    const r = await take(a.cq, 1);
    expect(r[0]!.wrId).toBe(2n ** 70n);
    expect(a.cq.count).toBe(0);
    await closeAll(a, b);
  });
});

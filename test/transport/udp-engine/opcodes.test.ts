// Every opcode between two devices in two processes over real UDP sockets on 127.0.0.1
// (mtu 1500, so anything past ~1.4 KB is several datagrams), rc and srd, bytes compared on
// both sides against an independent expectation (the xorshift patterns both sides can make).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Opcode, QpState, WcOpcode, WcStatus, type Device } from '../../../src/index.js';
import { ALL, openLocal, pattern, same, startPeer, stopPeer, take, type Peer, type RemoteMr } from './helpers.js';

const MTU = 1500;
let peer: Peer;
let dev: Device;

beforeAll(async () => {
  [peer, dev] = await Promise.all([startPeer({ mtu: MTU }), openLocal({ mtu: MTU })]);
}, 30_000);

afterAll(async () => {
  await dev?.close();
  if (peer) await stopPeer(peer);
});

async function rcPair() {
  const pd = dev.allocPd();
  const cq = dev.createCq({ depth: 4096 });
  const qp = pd.createQp({ type: 'rc', sendCq: cq, recvCq: cq, maxSendWr: 1024, maxRecvWr: 1024, maxSge: 16 });
  const r = await peer.call<{ h: number; qpn: number }>('qp', { type: 'rc' });
  await Promise.all([
    qp.connect({ address: { ...peer.address }, qpn: r.qpn }),
    peer.call('connect', { qp: r.h, address: JSON.parse(JSON.stringify(dev.address)), qpn: qp.qpn }),
  ]);
  return { pd, cq, qp, rqp: r.h, rqpn: r.qpn };
}

const rmr = (length: number, seed = 0, access = ALL) => peer.call<RemoteMr>('mr', { length, access, seed });
const rbytes = (mr: RemoteMr, off: number, len: number) => peer.call<Uint8Array>('bytes', { mr: mr.h, off, len });

describe('udp: two processes, rc', () => {
  it('Send / SendWithImm / zero-length / multi-datagram both ways, in order', async () => {
    const { pd, cq, qp, rqp } = await rcPair();
    const src = pd.regMr(200_000, ALL);
    src.buffer.set(pattern(200_000, 11));
    const dst = await rmr(200_000);
    const sizes = [1, 1386, 1387, 10_000, 0, 65_536, 100_000];
    let off = 0;
    const recvs = sizes.map((n, i) => ({ wrId: 100 + i, sgList: [{ addr: dst.addr + off, length: n, lkey: dst.lkey }] , at: (off += n) - n }));
    await peer.call('postRecv', { qp: rqp, wrs: recvs.map(({ wrId, sgList }) => ({ wrId, sgList })) });
    off = 0;
    sizes.forEach((n, i) => {
      qp.postSend({ wrId: i, opcode: i % 2 ? Opcode.SendWithImm : Opcode.Send, imm: 0x1000 + i, sgList: [{ addr: src.addr + off, length: n, lkey: src.lkey }] });
      off += n;
    });
    const s = await take(cq, sizes.length);
    expect(s.map((w) => [w.wrId, w.status, w.opcode])).toEqual(sizes.map((_, i) => [i, WcStatus.Success, WcOpcode.Send]));
    const r = await peer.call<{ wrId: number; status: number; byteLen: number; imm?: number; opcode: number }[]>('poll', { n: sizes.length });
    expect(r.map((w) => [w.wrId, w.status, w.opcode, w.byteLen, w.imm])).toEqual(sizes.map((n, i) => [100 + i, WcStatus.Success, WcOpcode.Recv, n, i % 2 ? 0x1000 + i : undefined]));
    const got = await rbytes(dst, 0, off);
    expect(same(got, src.buffer.subarray(0, off))).toBe(true);

    // And back: the child sends, we receive into two sges.
    const back = await rmr(50_000, 77);
    const land = pd.regMr(60_000, ALL);
    qp.postRecv({ wrId: 0x1_0000_0000_0001n, sgList: [{ addr: land.addr + 10, length: 20_000, lkey: land.lkey }, { addr: land.addr + 30_000, length: 30_000, lkey: land.lkey }] });
    await peer.call('postSend', { qp: rqp, wrs: [{ wrId: 5, opcode: Opcode.Send, sgList: [{ addr: back.addr, length: 45_000, lkey: back.lkey }] }] });
    const [wc] = await take(cq, 1);
    expect(wc).toMatchObject({ wrId: 0x1_0000_0000_0001n, status: WcStatus.Success, opcode: WcOpcode.Recv, byteLen: 45_000 });
    const want = pattern(50_000, 77);
    expect(same(land.buffer.subarray(10, 20_010), want.subarray(0, 20_000))).toBe(true);
    expect(same(land.buffer.subarray(30_000, 55_000), want.subarray(20_000, 45_000))).toBe(true);
    expect(land.buffer[9]).toBe(0);
    expect(land.buffer[20_010]).toBe(0);
    expect((await peer.call<{ status: number }[]>('poll', { n: 1 }))[0]!.status).toBe(WcStatus.Success);
  });

  it('RdmaWrite and RdmaWriteWithImm across many datagrams and several local sges', async () => {
    const { pd, cq, qp, rqp } = await rcPair();
    const src = pd.regMr(300_000, ALL);
    src.buffer.set(pattern(300_000, 21));
    const dst = await rmr(300_000);
    const sg = [
      { addr: src.addr + 5, length: 70_001, lkey: src.lkey },
      { addr: src.addr + 100_000, length: 3, lkey: src.lkey },
      { addr: src.addr + 150_000, length: 129_000, lkey: src.lkey },
    ];
    const total = 70_001 + 3 + 129_000;
    qp.postSend({ wrId: 1, opcode: Opcode.RdmaWrite, sgList: sg, remoteAddr: dst.addr + 1, rkey: dst.rkey });
    await peer.call('postRecv', { qp: rqp, wrs: [{ wrId: 9, sgList: [] }] });
    qp.postSend({ wrId: 2, opcode: Opcode.RdmaWriteWithImm, imm: 0xcafef00d, sgList: [{ addr: src.addr, length: 4000, lkey: src.lkey }], remoteAddr: dst.addr + 290_000, rkey: dst.rkey });
    expect((await take(cq, 2)).map((w) => [w.wrId, w.status, w.opcode, w.byteLen])).toEqual([
      [1, WcStatus.Success, WcOpcode.RdmaWrite, total],
      [2, WcStatus.Success, WcOpcode.RdmaWrite, 4000],
    ]);
    const [rw] = await peer.call<{ wrId: number; status: number; opcode: number; imm: number; byteLen: number }[]>('poll', { n: 1 });
    expect(rw).toMatchObject({ wrId: 9, status: WcStatus.Success, opcode: WcOpcode.RecvRdmaWithImm, imm: 0xcafef00d, byteLen: 4000 });
    const want = Buffer.concat(sg.map((s) => Buffer.from(src.buffer.subarray(s.addr - src.addr, s.addr - src.addr + s.length))));
    const got = await rbytes(dst, 0, 300_000);
    expect(got[0]).toBe(0);
    expect(same(got.subarray(1, 1 + total), want)).toBe(true);
    expect(got[1 + total]).toBe(0);
    expect(same(got.subarray(290_000, 294_000), src.buffer.subarray(0, 4000))).toBe(true);
  });

  it('RdmaRead, single and vectored (uneven source and sink splits)', async () => {
    const { pd, cq, qp } = await rcPair();
    const rsrc = await rmr(200_000, 31);
    const want = pattern(200_000, 31);
    const sink = pd.regMr(200_000, ALL);
    qp.postSend({ wrId: 1, opcode: Opcode.RdmaRead, sgList: [{ addr: sink.addr, length: 100_000, lkey: sink.lkey }], remoteAddr: rsrc.addr + 50_000, rkey: rsrc.rkey });
    const remoteSgList = [
      { addr: rsrc.addr + 7, length: 3001, rkey: rsrc.rkey },
      { addr: rsrc.addr + 190_000, length: 1, rkey: rsrc.rkey },
      { addr: rsrc.addr + 20_000, length: 70_000, rkey: rsrc.rkey },
    ];
    const sgList = [
      { addr: sink.addr + 100_000, length: 5000, lkey: sink.lkey },
      { addr: sink.addr + 110_001, length: 2, lkey: sink.lkey },
      { addr: sink.addr + 120_000, length: 68_000, lkey: sink.lkey },
    ];
    qp.postSend({ wrId: 2, opcode: Opcode.RdmaRead, sgList, remoteSgList });
    expect((await take(cq, 2)).map((w) => [w.wrId, w.status, w.opcode, w.byteLen])).toEqual([
      [1, WcStatus.Success, WcOpcode.RdmaRead, 100_000],
      [2, WcStatus.Success, WcOpcode.RdmaRead, 73_002],
    ]);
    expect(same(sink.buffer.subarray(0, 100_000), want.subarray(50_000, 150_000))).toBe(true);
    const flat = Buffer.concat(remoteSgList.map((r) => Buffer.from(want.subarray(r.addr - rsrc.addr, r.addr - rsrc.addr + r.length))));
    const gotFlat = Buffer.concat(sgList.map((s) => Buffer.from(sink.buffer.subarray(s.addr - sink.addr, s.addr - sink.addr + s.length))));
    expect(gotFlat.equals(flat)).toBe(true);
    expect(sink.buffer[110_000]).toBe(0);
    expect(sink.buffer[110_003]).toBe(0);
  });

  it('AtomicFetchAdd and AtomicCmpSwap (old value lands locally, new value remotely)', async () => {
    const { pd, cq, qp } = await rcPair();
    const word = await rmr(64);
    await peer.call('setBytes', { mr: word.h, off: 8, data: new Uint8Array(new BigUint64Array([0xffff_ffff_ffff_fff0n]).buffer) });
    const out = pd.regMr(64, ALL);
    qp.postSend({ wrId: 1, opcode: Opcode.AtomicFetchAdd, compareAdd: 0x20n, sgList: [{ addr: out.addr, length: 8, lkey: out.lkey }], remoteAddr: word.addr + 8, rkey: word.rkey });
    qp.postSend({ wrId: 2, opcode: Opcode.AtomicCmpSwap, compareAdd: 0x10n, swap: 0x1234_5678_9abc_def0n, sgList: [{ addr: out.addr + 8, length: 8, lkey: out.lkey }], remoteAddr: word.addr + 8, rkey: word.rkey });
    qp.postSend({ wrId: 3, opcode: Opcode.AtomicCmpSwap, compareAdd: 0x99n, swap: 0x1n, sgList: [{ addr: out.addr + 16, length: 8, lkey: out.lkey }], remoteAddr: word.addr + 8, rkey: word.rkey });
    expect((await take(cq, 3)).map((w) => [w.wrId, w.status, w.opcode, w.byteLen])).toEqual([
      [1, WcStatus.Success, WcOpcode.FetchAdd, 8],
      [2, WcStatus.Success, WcOpcode.CmpSwap, 8],
      [3, WcStatus.Success, WcOpcode.CmpSwap, 8],
    ]);
    const olds = new BigUint64Array(out.buffer.slice(0, 24).buffer);
    expect([...olds]).toEqual([0xffff_ffff_ffff_fff0n, 0x10n, 0x1234_5678_9abc_def0n]);
    const now = new BigUint64Array((await rbytes(word, 8, 8)).slice().buffer)[0];
    expect(now).toBe(0x1234_5678_9abc_def0n);
  });

  it('overlapping writes take effect in posting order; sends keep their order', async () => {
    const { pd, cq, qp, rqp } = await rcPair();
    const N = 60;
    const LEN = 8000;
    const src = pd.regMr(N * LEN, ALL);
    for (let i = 0; i < N; i++) src.buffer.set(pattern(LEN, 1000 + i), i * LEN);
    const dst = await rmr(LEN + 4000);
    // Writes i land at offset (i % 3) * 2000: every range overlaps the previous ones.
    const model = new Uint8Array(LEN + 4000);
    for (let i = 0; i < N; i++) {
      const at = (i % 3) * 2000;
      qp.postSend({ wrId: i, opcode: Opcode.RdmaWrite, sgList: [{ addr: src.addr + i * LEN, length: LEN, lkey: src.lkey }], remoteAddr: dst.addr + at, rkey: dst.rkey, signaled: i === N - 1 });
      model.set(src.buffer.subarray(i * LEN, (i + 1) * LEN), at);
    }
    const recv = await rmr(N * 16);
    await peer.call('postRecv', { qp: rqp, wrs: Array.from({ length: N }, (_, i) => ({ wrId: i, sgList: [{ addr: recv.addr + i * 16, length: 16, lkey: recv.lkey }] })) });
    const seq = pd.regMr(N * 16, ALL);
    for (let i = 0; i < N; i++) {
      new DataView(seq.buffer.buffer, seq.buffer.byteOffset).setUint32(i * 16, i);
      qp.postSend({ wrId: 1000 + i, opcode: Opcode.Send, sgList: [{ addr: seq.addr + i * 16, length: 16, lkey: seq.lkey }], signaled: false });
    }
    qp.postSend({ wrId: 999_999, opcode: Opcode.Send, sgList: [], signaled: true });
    await peer.call('postRecv', { qp: rqp, wrs: [{ wrId: N, sgList: [] }] });
    const wcs = await take(cq, 2);
    expect(wcs.map((w) => [w.wrId, w.status])).toEqual([[N - 1, WcStatus.Success], [999_999, WcStatus.Success]]);
    expect(same(await rbytes(dst, 0, LEN + 4000), model)).toBe(true);
    const r = await peer.call<{ wrId: number; status: number }[]>('poll', { n: N + 1 });
    expect(r.map((w) => w.wrId)).toEqual(Array.from({ length: N + 1 }, (_, i) => i));
    expect(r.every((w) => w.status === WcStatus.Success)).toBe(true);
    const rb = await rbytes(recv, 0, N * 16);
    for (let i = 0; i < N; i++) expect(new DataView(rb.buffer, rb.byteOffset).getUint32(i * 16)).toBe(i);
    expect(qp.state).toBe(QpState.Rts);
  });
});

describe('udp: two processes, srd', () => {
  it('Send, Write, WriteWithImm, Read and atomics through address handles, both ways', async () => {
    const pd = dev.allocPd();
    const cq = dev.createCq({ depth: 1024 });
    const qp = pd.createQp({ type: 'srd', sendCq: cq, recvCq: cq, maxSendWr: 256, maxRecvWr: 256, maxSge: 8 });
    const r = await peer.call<{ h: number; qpn: number }>('qp', { type: 'srd' });
    const ah = pd.createAh({ address: { ...peer.address } });
    const rah = await peer.call<number>('ah', { address: { ...dev.address } });
    const src = pd.regMr(100_000, ALL);
    src.buffer.set(pattern(100_000, 41));
    const dst = await rmr(100_000);
    await peer.call('postRecv', { qp: r.h, wrs: [{ wrId: 1, sgList: [{ addr: dst.addr + 50_000, length: 30_000, lkey: dst.lkey }] }, { wrId: 2, sgList: [] }] });
    const to = { ah, remoteQpn: r.qpn };
    qp.postSend({ wrId: 1, opcode: Opcode.RdmaWrite, sgList: [{ addr: src.addr, length: 40_000, lkey: src.lkey }], remoteAddr: dst.addr, rkey: dst.rkey, ...to });
    qp.postSend({ wrId: 2, opcode: Opcode.Send, sgList: [{ addr: src.addr + 40_000, length: 25_000, lkey: src.lkey }], ...to });
    qp.postSend({ wrId: 3, opcode: Opcode.RdmaWriteWithImm, imm: 7, sgList: [{ addr: src.addr + 70_000, length: 100, lkey: src.lkey }], remoteAddr: dst.addr + 90_000, rkey: dst.rkey, ...to });
    const w1 = await take(cq, 3);
    expect(w1.map((w) => w.status)).toEqual([0, 0, 0]);
    expect(new Set(w1.map((w) => w.wrId))).toEqual(new Set([1, 2, 3]));
    const rr = await peer.call<{ wrId: number; status: number; byteLen: number; srcQpn: number; imm?: number }[]>('poll', { n: 2 });
    expect(rr.map((w) => [w.wrId, w.status, w.srcQpn]).sort()).toEqual([[1, 0, qp.qpn], [2, 0, qp.qpn]]);
    const got = await rbytes(dst, 0, 100_000);
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
    expect(new BigUint64Array((await rbytes(dst, 99_992, 8)).slice().buffer)[0]).toBe(5n);
    // The child sends to us through its own handle.
    const back = await rmr(3000, 43);
    const land = pd.regMr(3000, ALL);
    qp.postRecv({ wrId: 77, sgList: [{ addr: land.addr, length: 3000, lkey: land.lkey }] });
    await peer.call('postSend', { qp: r.h, wrs: [{ wrId: 1, opcode: Opcode.SendWithImm, imm: 99, sgList: [{ addr: back.addr, length: 3000, lkey: back.lkey }], ah: rah, remoteQpn: qp.qpn }] });
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
      const { pd, cq, qp } = await rcPair();
      const m = await rmr(4096, 51, access);
      const src = pd.regMr(4096, ALL);
      src.buffer.fill(0xee);
      qp.postSend({ wrId: 1, opcode: Opcode.RdmaWrite, sgList: [{ addr: src.addr, length: 100, lkey: src.lkey }], ...target(m) });
      const [wc] = await take(cq, 1);
      expect(wc).toMatchObject({ wrId: 1, status: WcStatus.RemAccessErr });
      expect(same(await rbytes(m, 0, 4096), pattern(4096, 51))).toBe(true);
      expect(qp.state).toBe(QpState.Error);
      qp.postSend({ wrId: 2, opcode: Opcode.Send, sgList: [] });
      expect((await take(cq, 1))[0]).toMatchObject({ wrId: 2, status: WcStatus.WrFlushErr });
    });
  }

  it('RdmaRead and atomic with a deregistered key → RemAccessErr', async () => {
    const m = await rmr(4096, 52);
    await peer.call('dereg', { mr: m.h });
    for (const wr of [
      { opcode: Opcode.RdmaRead, remoteAddr: m.addr, rkey: m.rkey, len: 64 },
      { opcode: Opcode.AtomicFetchAdd, remoteAddr: m.addr, rkey: m.rkey, len: 8, compareAdd: 1n },
    ]) {
      const { pd, cq, qp } = await rcPair();
      const sink = pd.regMr(64, ALL);
      const { len, ...rest } = wr;
      qp.postSend({ wrId: 1, sgList: [{ addr: sink.addr, length: len, lkey: sink.lkey }], ...rest });
      expect((await take(cq, 1))[0]).toMatchObject({ wrId: 1, status: WcStatus.RemAccessErr });
      expect(sink.buffer.every((b) => b === 0)).toBe(true);
    }
  });
});

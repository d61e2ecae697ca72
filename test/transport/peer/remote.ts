// Two devices in two processes over real sockets on 127.0.0.1 — the fixture (a forked peer
// driven over IPC, a local device) and the rc opcode suite that udp-engine/ and tcp-engine/
// both run: every rc opcode, bytes compared on both sides against an independent expectation
// (the xorshift patterns both sides can make).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Opcode, QpState, WcOpcode, WcStatus, type Device } from '../../../src/index.js';
import { ALL, openLocal, pattern, same, startPeer, stopPeer, take, type Peer, type RemoteMr, type RemoteTransport } from './helpers.js';

export interface Remote {
  transport: RemoteTransport;
  peer: Peer;
  dev: Device;
  rcPair(init?: object): Promise<{ pd: ReturnType<Device['allocPd']>; cq: ReturnType<Device['createCq']>; qp: ReturnType<ReturnType<Device['allocPd']>['createQp']>; rqp: number; rqpn: number }>;
  rmr(length: number, seed?: number, access?: number): Promise<RemoteMr>;
  rbytes(mr: RemoteMr, off: number, len: number): Promise<Uint8Array>;
}

/** Registers beforeAll/afterAll that start the peer process and open the local device. */
export function useRemote(transport: RemoteTransport, opts: { mtu?: number } = {}): Remote {
  const f = { transport } as Remote;
  beforeAll(async () => {
    [f.peer, f.dev] = await Promise.all([startPeer(transport, opts), openLocal(transport, opts)]);
  }, 30_000);
  afterAll(async () => {
    await f.dev?.close();
    if (f.peer) await stopPeer(f.peer);
  });
  f.rcPair = async (init: object = {}) => {
    const pd = f.dev.allocPd();
    const cq = f.dev.createCq({ depth: 4096 });
    const qp = pd.createQp({ type: 'rc', sendCq: cq, recvCq: cq, maxSendWr: 1024, maxRecvWr: 1024, maxSge: 16, ...init });
    const r = await f.peer.call<{ h: number; qpn: number }>('qp', { type: 'rc' });
    await Promise.all([
      qp.connect({ address: { ...f.peer.address }, qpn: r.qpn }),
      f.peer.call('connect', { qp: r.h, address: JSON.parse(JSON.stringify(f.dev.address)), qpn: qp.qpn }),
    ]);
    return { pd, cq, qp, rqp: r.h, rqpn: r.qpn };
  };
  f.rmr = (length: number, seed = 0, access = ALL) => f.peer.call<RemoteMr>('mr', { length, access, seed });
  f.rbytes = (mr: RemoteMr, off: number, len: number) => f.peer.call<Uint8Array>('bytes', { mr: mr.h, off, len });
  return f;
}

/** The rc opcode suite, the same on every remote transport. */
export function rcOpcodeSuite(f: Remote): void {
  describe(`${f.transport}: two processes, rc`, () => {
  it('Send / SendWithImm / zero-length / multi-segment (several datagrams / FPDUs) both ways, in order', async () => {
    const { pd, cq, qp, rqp } = await f.rcPair();
    const src = pd.regMr(200_000, ALL);
    src.buffer.set(pattern(200_000, 11));
    const dst = await f.rmr(200_000);
    const sizes = [1, 1386, 1387, 10_000, 0, 65_536, 100_000];
    let off = 0;
    const recvs = sizes.map((n, i) => ({ wrId: 100 + i, sgList: [{ addr: dst.addr + off, length: n, lkey: dst.lkey }] , at: (off += n) - n }));
    await f.peer.call('postRecv', { qp: rqp, wrs: recvs.map(({ wrId, sgList }) => ({ wrId, sgList })) });
    off = 0;
    sizes.forEach((n, i) => {
      qp.postSend({ wrId: i, opcode: i % 2 ? Opcode.SendWithImm : Opcode.Send, imm: 0x1000 + i, sgList: [{ addr: src.addr + off, length: n, lkey: src.lkey }] });
      off += n;
    });
    const s = await take(cq, sizes.length);
    expect(s.map((w) => [w.wrId, w.status, w.opcode])).toEqual(sizes.map((_, i) => [i, WcStatus.Success, WcOpcode.Send]));
    const r = await f.peer.call<{ wrId: number; status: number; byteLen: number; imm?: number; opcode: number }[]>('poll', { n: sizes.length });
    expect(r.map((w) => [w.wrId, w.status, w.opcode, w.byteLen, w.imm])).toEqual(sizes.map((n, i) => [100 + i, WcStatus.Success, WcOpcode.Recv, n, i % 2 ? 0x1000 + i : undefined]));
    const got = await f.rbytes(dst, 0, off);
    expect(same(got, src.buffer.subarray(0, off))).toBe(true);

    // And back: the child sends, we receive into two sges.
    const back = await f.rmr(50_000, 77);
    const land = pd.regMr(60_000, ALL);
    qp.postRecv({ wrId: 0x1_0000_0000_0001n, sgList: [{ addr: land.addr + 10, length: 20_000, lkey: land.lkey }, { addr: land.addr + 30_000, length: 30_000, lkey: land.lkey }] });
    await f.peer.call('postSend', { qp: rqp, wrs: [{ wrId: 5, opcode: Opcode.Send, sgList: [{ addr: back.addr, length: 45_000, lkey: back.lkey }] }] });
    const [wc] = await take(cq, 1);
    expect(wc).toMatchObject({ wrId: 0x1_0000_0000_0001n, status: WcStatus.Success, opcode: WcOpcode.Recv, byteLen: 45_000 });
    const want = pattern(50_000, 77);
    expect(same(land.buffer.subarray(10, 20_010), want.subarray(0, 20_000))).toBe(true);
    expect(same(land.buffer.subarray(30_000, 55_000), want.subarray(20_000, 45_000))).toBe(true);
    expect(land.buffer[9]).toBe(0);
    expect(land.buffer[20_010]).toBe(0);
    expect((await f.peer.call<{ status: number }[]>('poll', { n: 1 }))[0]!.status).toBe(WcStatus.Success);
  });

  it('RdmaWrite and RdmaWriteWithImm across many segments (datagrams / FPDUs) and several local sges', async () => {
    const { pd, cq, qp, rqp } = await f.rcPair();
    const src = pd.regMr(300_000, ALL);
    src.buffer.set(pattern(300_000, 21));
    const dst = await f.rmr(300_000);
    const sg = [
      { addr: src.addr + 5, length: 70_001, lkey: src.lkey },
      { addr: src.addr + 100_000, length: 3, lkey: src.lkey },
      { addr: src.addr + 150_000, length: 129_000, lkey: src.lkey },
    ];
    const total = 70_001 + 3 + 129_000;
    qp.postSend({ wrId: 1, opcode: Opcode.RdmaWrite, sgList: sg, remoteAddr: dst.addr + 1, rkey: dst.rkey });
    await f.peer.call('postRecv', { qp: rqp, wrs: [{ wrId: 9, sgList: [] }] });
    qp.postSend({ wrId: 2, opcode: Opcode.RdmaWriteWithImm, imm: 0xcafef00d, sgList: [{ addr: src.addr, length: 4000, lkey: src.lkey }], remoteAddr: dst.addr + 290_000, rkey: dst.rkey });
    expect((await take(cq, 2)).map((w) => [w.wrId, w.status, w.opcode, w.byteLen])).toEqual([
      [1, WcStatus.Success, WcOpcode.RdmaWrite, total],
      [2, WcStatus.Success, WcOpcode.RdmaWrite, 4000],
    ]);
    const [rw] = await f.peer.call<{ wrId: number; status: number; opcode: number; imm: number; byteLen: number }[]>('poll', { n: 1 });
    expect(rw).toMatchObject({ wrId: 9, status: WcStatus.Success, opcode: WcOpcode.RecvRdmaWithImm, imm: 0xcafef00d, byteLen: 4000 });
    const want = Buffer.concat(sg.map((s) => Buffer.from(src.buffer.subarray(s.addr - src.addr, s.addr - src.addr + s.length))));
    const got = await f.rbytes(dst, 0, 300_000);
    expect(got[0]).toBe(0);
    expect(same(got.subarray(1, 1 + total), want)).toBe(true);
    expect(got[1 + total]).toBe(0);
    expect(same(got.subarray(290_000, 294_000), src.buffer.subarray(0, 4000))).toBe(true);
  });

  it('RdmaRead, single and vectored (uneven source and sink splits)', async () => {
    const { pd, cq, qp } = await f.rcPair();
    const rsrc = await f.rmr(200_000, 31);
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
    const { pd, cq, qp } = await f.rcPair();
    const word = await f.rmr(64);
    await f.peer.call('setBytes', { mr: word.h, off: 8, data: new Uint8Array(new BigUint64Array([0xffff_ffff_ffff_fff0n]).buffer) });
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
    const now = new BigUint64Array((await f.rbytes(word, 8, 8)).slice().buffer)[0];
    expect(now).toBe(0x1234_5678_9abc_def0n);
  });

  it('overlapping writes take effect in posting order; sends keep their order', async () => {
    const { pd, cq, qp, rqp } = await f.rcPair();
    const N = 60;
    const LEN = 8000;
    const src = pd.regMr(N * LEN, ALL);
    for (let i = 0; i < N; i++) src.buffer.set(pattern(LEN, 1000 + i), i * LEN);
    const dst = await f.rmr(LEN + 4000);
    // Writes i land at offset (i % 3) * 2000: every range overlaps the previous ones.
    const model = new Uint8Array(LEN + 4000);
    for (let i = 0; i < N; i++) {
      const at = (i % 3) * 2000;
      qp.postSend({ wrId: i, opcode: Opcode.RdmaWrite, sgList: [{ addr: src.addr + i * LEN, length: LEN, lkey: src.lkey }], remoteAddr: dst.addr + at, rkey: dst.rkey, signaled: i === N - 1 });
      model.set(src.buffer.subarray(i * LEN, (i + 1) * LEN), at);
    }
    const recv = await f.rmr(N * 16);
    await f.peer.call('postRecv', { qp: rqp, wrs: Array.from({ length: N }, (_, i) => ({ wrId: i, sgList: [{ addr: recv.addr + i * 16, length: 16, lkey: recv.lkey }] })) });
    const seq = pd.regMr(N * 16, ALL);
    for (let i = 0; i < N; i++) {
      new DataView(seq.buffer.buffer, seq.buffer.byteOffset).setUint32(i * 16, i);
      qp.postSend({ wrId: 1000 + i, opcode: Opcode.Send, sgList: [{ addr: seq.addr + i * 16, length: 16, lkey: seq.lkey }], signaled: false });
    }
    qp.postSend({ wrId: 999_999, opcode: Opcode.Send, sgList: [], signaled: true });
    await f.peer.call('postRecv', { qp: rqp, wrs: [{ wrId: N, sgList: [] }] });
    const wcs = await take(cq, 2);
    expect(wcs.map((w) => [w.wrId, w.status])).toEqual([[N - 1, WcStatus.Success], [999_999, WcStatus.Success]]);
    expect(same(await f.rbytes(dst, 0, LEN + 4000), model)).toBe(true);
    const r = await f.peer.call<{ wrId: number; status: number }[]>('poll', { n: N + 1 });
    expect(r.map((w) => w.wrId)).toEqual(Array.from({ length: N + 1 }, (_, i) => i));
    expect(r.every((w) => w.status === WcStatus.Success)).toBe(true);
    const rb = await f.rbytes(recv, 0, N * 16);
    for (let i = 0; i < N; i++) expect(new DataView(rb.buffer, rb.byteOffset).getUint32(i * 16)).toBe(i);
    expect(qp.state).toBe(QpState.Rts);
  });
  });
}

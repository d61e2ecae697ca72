// A work request is copied at post time (as ibverbs providers do): the caller may change or
// reuse its SendWr object — wrId, remote address and key, immediate, remote segment list, the
// sgList array — as soon as postSend returns, even for work the device has not transmitted yet
// (held by the rc fence or the read depth), and neither the wire nor the completion sees it.
import { describe, expect, it } from 'vitest';
import { Opcode, WcOpcode, WcStatus, type SendWr } from '../../src/index.js';
import { ALL, closeAll, fill, pair, take } from './helpers.js';

describe('work requests are copied at post', () => {
  it('a fenced write and write-with-immediate: the caller rewrites its objects at once; data, imm and wrId are the posted ones', async () => {
    const [a, b] = await pair();
    const src = a.pd.regMr(1 << 16, ALL);
    const dst = b.pd.regMr(1 << 16, ALL);
    const decoy = b.pd.regMr(1 << 16, ALL);
    fill(src.buffer, 3);
    b.qp.postRecv({ wrId: 50, sgList: [] });
    // The first write is in flight when the next ones are posted: they overlap it, so the fence
    // holds them back until it completes — they are transmitted after postSend returned.
    a.qp.postSend({ wrId: 1, opcode: Opcode.RdmaWrite, sgList: [{ addr: src.addr, length: 4096, lkey: src.lkey }], remoteAddr: dst.addr, rkey: dst.rkey });
    const sg = [{ addr: src.addr + 8192, length: 1024, lkey: src.lkey }];
    const w2: SendWr = { wrId: 2, opcode: Opcode.RdmaWrite, sgList: sg, remoteAddr: dst.addr + 100, rkey: dst.rkey };
    a.qp.postSend(w2);
    // Reused right away, as a program with one WR object per loop iteration does.
    w2.wrId = 99;
    w2.remoteAddr = decoy.addr;
    w2.rkey = decoy.rkey;
    sg[0]!.addr = src.addr + 20_000;
    sg.push({ addr: src.addr, length: 8, lkey: src.lkey });
    const w3: SendWr = { wrId: 3, opcode: Opcode.RdmaWriteWithImm, imm: 0xabcd, sgList: [{ addr: src.addr + 30_000, length: 512, lkey: src.lkey }], remoteAddr: dst.addr + 200, rkey: dst.rkey };
    a.qp.postSend(w3);
    w3.imm = 7;
    w3.wrId = 98;
    w3.remoteAddr = decoy.addr + 4096;
    const wcs = await take(a.cq, 3);
    expect(wcs.map((w) => [w.wrId, w.status, w.opcode])).toEqual([[1, WcStatus.Success, WcOpcode.RdmaWrite], [2, WcStatus.Success, WcOpcode.RdmaWrite], [3, WcStatus.Success, WcOpcode.RdmaWrite]]);
    expect(await take(b.cq, 1)).toMatchObject([{ wrId: 50, status: WcStatus.Success, opcode: WcOpcode.RecvRdmaWithImm, imm: 0xabcd, byteLen: 512 }]);
    const want = new Uint8Array(4096);
    want.set(src.buffer.subarray(0, 4096));
    want.set(src.buffer.subarray(8192, 8192 + 1024), 100);
    want.set(src.buffer.subarray(30_000, 30_512), 200);
    expect(Buffer.from(dst.buffer.subarray(0, 4096)).equals(Buffer.from(want))).toBe(true);
    expect(decoy.buffer.every((x) => x === 0)).toBe(true);
    await closeAll(a, b);
  });

  it('reads beyond maxRdAtomic wait in the send queue; their remoteSgList, sgList and wrId are the posted ones', async () => {
    const [a, b] = await pair({ qp: { maxRdAtomic: 1 } });
    const back = a.pd.regMr(1 << 16, ALL);
    const remote = b.pd.regMr(1 << 16, ALL);
    fill(remote.buffer, 11);
    const reads: SendWr[] = [];
    for (let i = 0; i < 4; i++) {
      const w: SendWr = {
        wrId: i, opcode: Opcode.RdmaRead,
        sgList: [{ addr: back.addr + i * 1000, length: 300, lkey: back.lkey }],
        remoteSgList: [{ addr: remote.addr + i * 5000, length: 100, rkey: remote.rkey }, { addr: remote.addr + i * 5000 + 2000, length: 200, rkey: remote.rkey }],
      };
      a.qp.postSend(w);
      reads.push(w);
    }
    // Only the first read is out (depth 1); the caller scribbles over all four objects now.
    for (const w of reads) {
      w.wrId = -1;
      w.remoteSgList![0]!.addr = remote.addr + 60_000;
      w.remoteSgList!.pop();
      w.sgList![0]!.addr = back.addr + 50_000;
    }
    const wcs = await take(a.cq, 4);
    expect(wcs.map((w) => [w.wrId, w.status, w.byteLen])).toEqual([0, 1, 2, 3].map((i) => [i, WcStatus.Success, 300]));
    for (let i = 0; i < 4; i++) {
      const want = new Uint8Array(300);
      want.set(remote.buffer.subarray(i * 5000, i * 5000 + 100));
      want.set(remote.buffer.subarray(i * 5000 + 2000, i * 5000 + 2200), 100);
      expect(Buffer.from(back.buffer.subarray(i * 1000, i * 1000 + 300)).equals(Buffer.from(want))).toBe(true);
    }
    expect(back.buffer.subarray(50_000, 50_300).every((x) => x === 0)).toBe(true);
    await closeAll(a, b);
  });
});

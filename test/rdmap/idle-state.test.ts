// What an idle QP keeps on the NIC's side (src/rdmap/state.ts): tables it has not written yet
// are one shared empty Map that refuses writes, made its own at the first write; a receive of
// one segment keeps the piece itself, not a list of one. Each is checked here through the whole
// driver on the virtual clock (test/sim): first use after idling works, and one QP's first
// write never shows in another's tables.
import { describe, expect, it } from 'vitest';
import { Opcode, WcStatus } from '../../src/core/enums.js';
import { newRecvWork, noEntries } from '../../src/rdmap/state.js';
import { clean } from '../sim/net.js';
import { Sim } from '../sim/sim.js';
import { piece, recv, wr } from '../sim/work.js';

describe('idle QP state', () => {
  it('the shared empty table refuses writes; an idle connected rc pair holds no table of its own for reads, atomics or srd flows', async () => {
    expect(() => noEntries<number, number>().set(1, 1)).toThrow(/shared empty table/);
    noEntries().clear();
    expect(noEntries().size).toBe(0);
    const sim = new Sim(11, clean);
    const a = await sim.node();
    const b = await sim.node();
    const [qa, qb] = await sim.connect(a, b);
    for (const q of [qa, qb]) {
      expect(q.flows).toBe(noEntries());
      expect(q.peerFlows).toBe(noEntries());
      expect(q.hostFlows).toBe(noEntries());
      expect(q.recvHolders).toBe(noEntries());
      expect(q.flow!.reads).toBe(noEntries());
      expect(q.flow!.atomics).toBe(noEntries());
    }
  });

  it('reads and atomics after idling: own tables, right results, and the other QP still shares the empty one; a flush empties them', async () => {
    const sim = new Sim(12, clean);
    const a = await sim.node();
    const b = await sim.node();
    const [qa] = await sim.connect(a, b, {}, 1);
    const [qc, qd] = await sim.connect(a, b, {}, 2);
    const src = b.regMr(4096);
    const sink = a.regMr(4096);
    b.bytes(src, 0, 64).set(Array.from({ length: 64 }, (_, i) => i + 1));
    new DataView(b.bytes(src).buffer, b.bytes(src).byteOffset).setBigUint64(1024, 40n, true);
    a.post(qa, wr({ wrId: 1, opcode: Opcode.RdmaRead, remoteAddr: src.addr, rkey: src.stag }, [piece(sink, 0, 64)]));
    a.post(qa, wr({ wrId: 2, opcode: Opcode.AtomicFetchAdd, remoteAddr: src.addr + 1024, rkey: src.stag, compareAdd: 2n }, [piece(sink, 512, 8)]));
    expect(qa.flow!.reads).not.toBe(noEntries());
    expect(qa.flow!.atomics).not.toBe(noEntries());
    expect(qc.flow!.reads).toBe(noEntries());
    await sim.settle();
    expect(a.cq.take().map((w) => [w.wrId, w.status])).toEqual([
      [1, WcStatus.Success],
      [2, WcStatus.Success],
    ]);
    expect([...a.bytes(sink, 0, 64)]).toEqual(Array.from({ length: 64 }, (_, i) => i + 1));
    expect(new DataView(a.bytes(sink).buffer, a.bytes(sink).byteOffset).getBigUint64(512, true)).toBe(40n);
    expect(qa.flow!.reads.size + qa.flow!.atomics.size).toBe(0);
    // The second pair's first read, after the first pair's: its own table, its own result.
    a.post(qc, wr({ wrId: 3, opcode: Opcode.RdmaRead, remoteAddr: src.addr + 8, rkey: src.stag }, [piece(sink, 128, 8)]));
    expect(qc.flow!.reads).not.toBe(qa.flow!.reads);
    await sim.settle();
    expect(a.cq.take().map((w) => [w.wrId, w.status])).toEqual([[3, WcStatus.Success]]);
    expect([...a.bytes(sink, 128, 8)]).toEqual([9, 10, 11, 12, 13, 14, 15, 16]);
    expect(qd.flow!.reads).toBe(noEntries());
    // A read left outstanding when the QP is moved to ERROR is flushed; its table emptied.
    b.driver.run(() => b.engine.destroyQp(qd));
    a.post(qc, wr({ wrId: 4, opcode: Opcode.RdmaRead, remoteAddr: src.addr, rkey: src.stag }, [piece(sink, 0, 8)]));
    a.driver.run((now) => a.engine.toError(qc, now));
    expect(a.cq.take().map((w) => [w.wrId, w.status])).toEqual([[4, WcStatus.WrFlushErr]]);
    expect(qc.flow!.reads.size).toBe(0);
  });

  it('srd: flows made on first use are the QP\'s own; reset gives the shared empty table back', async () => {
    const sim = new Sim(13, clean);
    const a = await sim.node();
    const b = await sim.node();
    const qa = a.qp(1, 'srd');
    const qb = b.qp(1, 'srd');
    const qx = a.qp(2, 'srd');
    const src = a.regMr(4096);
    const dst = b.regMr(4096);
    a.postTo(qa, b.addr, qb.qpn, wr({ wrId: 1, opcode: Opcode.RdmaWrite, remoteAddr: dst.addr, rkey: dst.stag }, [piece(src, 0, 32)]));
    await sim.settle();
    expect(a.cq.take().map((w) => w.status)).toEqual([WcStatus.Success]);
    expect(qa.flows.size).toBe(1);
    expect(qa.peerFlows.size).toBe(1);
    expect(qa.hostFlows.size).toBe(1);
    expect(qb.flows.size).toBe(1);
    expect(qx.flows).toBe(noEntries());
    a.driver.run((now) => a.engine.toError(qa, now));
    a.engine.reset(qa);
    expect(qa.flows).toBe(noEntries());
    expect(qa.peerFlows).toBe(noEntries());
    expect(qa.hostFlows).toBe(noEntries());
    expect(qa.recvHolders).toBe(noEntries());
  });

  it('a receive of one segment keeps the piece itself and takes a Send of many segments at the right offsets; two segments and none as before', async () => {
    const sim = new Sim(14, clean);
    const a = await sim.node();
    const b = await sim.node();
    const [qa, qb] = await sim.connect(a, b);
    const src = a.regMr(16384);
    const dst = b.regMr(16384);
    const one = piece(dst, 100, 6000);
    const r1 = recv(1, [one]);
    expect(r1.pieces).toBe(one);
    // Receives without a segment share one empty list.
    expect(newRecvWork(9, [], 0).pieces).toEqual([]);
    expect(newRecvWork(9, [], 0).pieces).toBe(newRecvWork(10, [], 0).pieces);
    b.postRecv(qb, r1);
    b.postRecv(qb, recv(2, [piece(dst, 8000, 1000), piece(dst, 12000, 4000)]));
    b.postRecv(qb, recv(3, []));
    const data = a.bytes(src, 0, 5000);
    for (let i = 0; i < data.length; i++) data[i] = (i * 7 + 3) & 0xff;
    a.post(qa, wr({ wrId: 11, opcode: Opcode.Send }, [piece(src, 0, 5000)]));
    a.post(qa, wr({ wrId: 12, opcode: Opcode.Send }, [piece(src, 0, 3000)]));
    a.post(qa, wr({ wrId: 13, opcode: Opcode.Send }, []));
    await sim.settle();
    expect(b.cq.take().map((w) => [w.wrId, w.status, w.byteLen])).toEqual([
      [1, WcStatus.Success, 5000],
      [2, WcStatus.Success, 3000],
      [3, WcStatus.Success, 0],
    ]);
    expect(b.bytes(dst, 100, 5000)).toEqual(a.bytes(src, 0, 5000));
    expect(b.bytes(dst, 8000, 1000)).toEqual(a.bytes(src, 0, 1000));
    expect(b.bytes(dst, 12000, 2000)).toEqual(a.bytes(src, 1000, 2000));
  });
});

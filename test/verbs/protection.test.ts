// The protection matrix: every remote access is checked for key, PD, bounds and access flag
// before a byte is written; a violation completes the requester with RemAccessErr, the QP goes
// to ERROR (as RC does), and the responder's memory is untouched.
import { describe, expect, it } from 'vitest';
import { Access, Opcode, QpState, WcStatus, type MemoryRegion } from '../../src/index.js';
import { ALL, closeAll, fill, pair, take, type Side } from './helpers.js';

type Case = { name: string; setup: (b: Side, mr: MemoryRegion) => { rkey: number; addr: number; len?: number } };

const cases: Case[] = [
  { name: 'wrong key byte', setup: (_b, mr) => ({ rkey: (mr.rkey & ~0xff) | ((mr.rkey + 1) & 0xff), addr: mr.addr }) },
  { name: 'unknown index', setup: (_b, mr) => ({ rkey: mr.rkey + 0x10000, addr: mr.addr }) },
  { name: 'out of bounds (end)', setup: (_b, mr) => ({ rkey: mr.rkey, addr: mr.addr + mr.length }) },
  { name: 'out of bounds (before)', setup: (_b, mr) => ({ rkey: mr.rkey, addr: mr.addr - 8 }) },
  { name: 'deregistered', setup: (_b, mr) => { const k = { rkey: mr.rkey, addr: mr.addr }; mr.deregister(); return k; } },
  { name: 'wrong PD', setup: (b) => { const other = b.dev.allocPd().regMr(4096, ALL); return { rkey: other.rkey, addr: other.addr }; } },
];

const ops = [
  { op: 'RdmaWrite', flag: Access.RemoteWrite },
  { op: 'RdmaRead', flag: Access.RemoteRead },
  { op: 'AtomicFetchAdd', flag: Access.RemoteAtomic },
] as const;

async function attempt(op: (typeof ops)[number]['op'], a: Side, k: { rkey: number; addr: number }): Promise<number> {
  const loc = a.pd.regMr(4096, ALL);
  fill(loc.buffer, 99);
  const wr = op === 'AtomicFetchAdd'
    ? { wrId: 1, opcode: Opcode.AtomicFetchAdd, sgList: [{ addr: loc.addr, length: 8, lkey: loc.lkey }], remoteAddr: k.addr, rkey: k.rkey, compareAdd: 1n }
    : { wrId: 1, opcode: Opcode[op], sgList: [{ addr: loc.addr, length: 64, lkey: loc.lkey }], remoteAddr: k.addr, rkey: k.rkey };
  a.qp.postSend(wr);
  a.qp.postSend({ wrId: 2, opcode: Opcode.RdmaWrite, sgList: [{ addr: loc.addr, length: 8, lkey: loc.lkey }], remoteAddr: k.addr, rkey: k.rkey });
  const r = await take(a.cq, 2);
  expect(r[1]).toMatchObject({ wrId: 2, status: WcStatus.WrFlushErr });
  return r[0]!.status;
}

describe('protection matrix', () => {
  for (const { op, flag } of ops) {
    for (const c of cases) {
      it(`${op}: ${c.name} → RemAccessErr, memory untouched`, async () => {
        const [a, b] = await pair();
        const mr = b.pd.regMr(4096, ALL);
        fill(mr.buffer, 5);
        const snapshot = b.dev.engineMemory.dm.u8().slice();
        const k = c.setup(b, mr);
        const snap2 = c.name === 'deregistered' || c.name === 'wrong PD' ? b.dev.engineMemory.dm.u8().slice() : snapshot;
        expect(await attempt(op, a, k)).toBe(WcStatus.RemAccessErr);
        expect(a.qp.state).toBe(QpState.Error);
        // The responder's whole device memory except the engine's own staging area is unchanged.
        const now = b.dev.engineMemory.dm.u8();
        const em = b.dev.engineMemory;
        const skip = (i: number): boolean => (i >= em.stageBase && i < em.stageBase + em.stageBytes) || (i >= em.descBase && i < em.outBase + 1024 * 16);
        let diff = -1;
        for (let i = 0; i < snap2.length; i++) if (now[i] !== snap2[i] && !skip(i)) { diff = i; break; }
        expect(diff).toBe(-1);
        expect(b.qp.state).toBe(QpState.Error);
        expect(b.dev.stats().terminatesSent).toBe(1);
        expect(a.dev.stats().terminatesReceived).toBe(1);
        await closeAll(a, b);
      });
    }
    it(`${op}: missing ${Object.entries(Access).find(([, v]) => v === flag)![0]} flag → RemAccessErr`, async () => {
      const [a, b] = await pair();
      const mr = b.pd.regMr(4096, ALL & ~flag);
      fill(mr.buffer, 5);
      const before = mr.buffer.slice();
      expect(await attempt(op, a, { rkey: mr.rkey, addr: mr.addr })).toBe(WcStatus.RemAccessErr);
      expect(Buffer.from(mr.buffer).equals(Buffer.from(before))).toBe(true);
      await closeAll(a, b);
    });
  }

  it('keys: unguessable key byte, rotates on re-registration of the same index, lkey == rkey', async () => {
    const [a, b] = await pair();
    const m1 = a.pd.regMr(64, ALL);
    const k1 = m1.rkey;
    m1.deregister();
    const m2 = a.pd.regMr(64, ALL);
    expect(m2.rkey >>> 8).toBe(k1 >>> 8);
    expect(m2.rkey & 0xff).toBe(((k1 & 0xff) + 1) & 0xff);
    expect(m2.lkey).toBe(m2.rkey);
    expect(m2.addr % 64).toBe(0);
    await closeAll(a, b);
  });

  it('a send into a receive whose region was deregistered fails locally (LocProtErr) and remotely', async () => {
    const [a, b] = await pair();
    const src = a.pd.regMr(256, ALL);
    const dst = b.pd.regMr(256, ALL);
    b.qp.postRecv({ wrId: 1, sgList: [{ addr: dst.addr, length: 256, lkey: dst.lkey }] });
    dst.deregister();
    a.qp.postSend({ wrId: 2, opcode: Opcode.Send, sgList: [{ addr: src.addr, length: 16, lkey: src.lkey }] });
    expect((await take(b.cq, 1))[0]).toMatchObject({ wrId: 1, status: WcStatus.LocProtErr });
    expect((await take(a.cq, 1))[0]!.status).not.toBe(WcStatus.Success);
    await closeAll(a, b);
  });

  it('a send longer than the receive: LocLenErr at the receiver, RemInvReqErr at the sender', async () => {
    const [a, b] = await pair();
    const src = a.pd.regMr(256, ALL);
    const dst = b.pd.regMr(256, ALL);
    b.qp.postRecv({ wrId: 1, sgList: [{ addr: dst.addr, length: 16, lkey: dst.lkey }] });
    a.qp.postSend({ wrId: 2, opcode: Opcode.Send, sgList: [{ addr: src.addr, length: 17, lkey: src.lkey }] });
    expect((await take(b.cq, 1))[0]).toMatchObject({ wrId: 1, status: WcStatus.LocLenErr });
    expect((await take(a.cq, 1))[0]).toMatchObject({ wrId: 2, status: WcStatus.RemInvReqErr });
    expect(dst.buffer.every((x) => x === 0)).toBe(true);
    await closeAll(a, b);
  });
});

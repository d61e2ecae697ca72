// When the completion ring is full (the application's thread is away and does not poll), the NIC
// thread holds the rest of the completions back and waits for room — a wait, not a loop: before,
// it asked for room for the smallest record, which a ring full of CQEs still had, so it went
// round through setImmediate turn after turn (27,000 flushed receives: 1.5 s of CPU for each
// second the application was away). And a QP created on a reused control slot, or reset, while
// completions were held back read its predecessor's retired counts: its queue caps did not hold.
import { describe, expect, it } from 'vitest';
import { Access, type Device, openDevice, QpState } from '../../src/index.js';

const blockFor = (ms: number): void => void Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ms);
const cpuMs = (c: NodeJS.CpuUsage): number => (c.user + c.system) / 1000;

/** A CQ and a QP on `dev` with `n` receives posted (to be flushed). */
function postReceives(dev: Device, n: number) {
  const pd = dev.allocPd();
  const cq = dev.createCq({ depth: 1 << 16 });
  const qp = pd.createQp({ type: 'rc', sendCq: cq, recvCq: cq, maxSendWr: 1, maxRecvWr: 1 << 16, maxSge: 1 });
  const mr = pd.regMr(64, Access.LocalWrite);
  for (let i = 0; i < n; i++) qp.postRecv({ wrId: i, sgList: [{ addr: mr.addr, length: 64, lkey: mr.lkey }] });
  return { cq, qp };
}

describe('a full completion ring', () => {
  it('the NIC thread waits for room without spinning while the application is away, and hands over every completion after', { timeout: 60_000 }, async () => {
    const dev = await openDevice({ transport: 'udp', host: '127.0.0.1', port: 0, workers: 1 });
    try {
      const n = 27_000; // more flushes than the completion ring holds
      const { cq, qp } = postReceives(dev, n);
      await new Promise((r) => setTimeout(r, 100));
      const c0 = process.cpuUsage();
      qp.modify({ state: QpState.Error });
      // This thread blocked for a second: it takes nothing from the ring. The flushes fill it
      // in a few ms; a NIC thread that spins spends the rest of the second on CPU.
      blockFor(1000);
      expect(cpuMs(process.cpuUsage(c0))).toBeLessThan(400);
      let got = 0;
      for (let tries = 0; got < n && tries < 200; tries++) {
        await cq.wait(1000).catch(() => undefined);
        got += cq.poll(4096).length;
      }
      expect(got).toBe(n);
    } finally {
      await dev.close();
    }
  });

  it('a QP on a reused slot, and a reset QP, keep their own queue caps while completions are held back', { timeout: 60_000 }, async () => {
    const dev = await openDevice({ transport: 'udp', host: '127.0.0.1', port: 0, workers: 1 });
    try {
      const pd = dev.allocPd();
      const cq = dev.createCq({ depth: 1 << 16 });
      const mr = pd.regMr(64, Access.LocalWrite);
      const sge = [{ addr: mr.addr, length: 64, lkey: mr.lkey }];
      const caps = { type: 'rc' as const, sendCq: cq, recvCq: cq, maxSendWr: 1, maxSge: 1 };
      const retire = async (qp: ReturnType<typeof pd.createQp>): Promise<void> => {
        for (let i = 0; i < 5000; i++) qp.postRecv({ wrId: i, sgList: sge });
        qp.modify({ state: QpState.Error });
        for (let got = 0, tries = 0; got < 5000 && tries < 100; tries++) {
          await cq.wait(1000).catch(() => undefined);
          got += cq.poll(4096).length;
        }
      };
      // a and r retire 5000 receives each (their slots' words say so); a goes.
      const a = pd.createQp({ ...caps, maxRecvWr: 8192 });
      const r = pd.createQp({ ...caps, maxRecvWr: 8192 });
      await retire(a);
      await retire(r);
      // b's 30,000 flushes overfill the ring; nothing is taken from here on.
      const b = pd.createQp({ ...caps, maxRecvWr: 1 << 16 });
      for (let i = 0; i < 30_000; i++) b.postRecv({ wrId: i, sgList: sge });
      a.destroy();
      b.modify({ state: QpState.Error });
      const posts = (qp: typeof a, max: number): { posted: number; code: unknown } => {
        let posted = 0;
        try {
          for (; posted < max; posted++) qp.postRecv({ wrId: posted, sgList: sge });
        } catch (e) {
          return { posted, code: (e as { code?: unknown }).code };
        }
        return { posted, code: undefined };
      };
      // c takes a's slot.
      const c = pd.createQp({ ...caps, maxRecvWr: 4 });
      expect(posts(c, 100)).toEqual({ posted: 4, code: 'ERR_QUEUE_FULL' });
      // r, reset: a fresh queue of its own size.
      r.modify({ state: QpState.Reset });
      r.modify({ state: QpState.Init });
      expect(posts(r, 20_000)).toEqual({ posted: 8192, code: 'ERR_QUEUE_FULL' });
    } finally {
      await dev.close();
    }
  });

  it('a close hands over every completion held back, as the inline NIC does', { timeout: 60_000 }, async () => {
    const dev = await openDevice({ transport: 'udp', host: '127.0.0.1', port: 0, workers: 1 });
    const n = 65_000; // more than twice what the ring holds
    const { cq } = postReceives(dev, n);
    await dev.close();
    const seen = new Set<number>();
    // A closed CQ hands out what it holds, then says it is closed.
    const take = (): number[] => {
      try {
        return cq.poll(4096).map((w) => Number(w.wrId));
      } catch {
        return [];
      }
    };
    for (let ws = take(); ws.length > 0; ws = take()) for (const id of ws) seen.add(id);
    expect(seen.size).toBe(n);
  });
});

// The NIC thread's heap reading the memory benches take (bench/lib/gc.mjs settleDevice): an
// internal request of the device's port, answered with the thread's V8 heap figures, after a
// full collection when the process allows one.
import { describe, expect, it } from 'vitest';
import { Access, Opcode, openDevice, WcStatus } from '../../src/index.js';
import type { ThreadPort } from '../../src/nic/thread-port.js';

describe('NIC thread heap reading', () => {
  it('answers used / total / young-generation heap bytes, collecting first only when asked', { timeout: 30_000 }, async () => {
    const dev = await openDevice({ transport: 'udp', host: '127.0.0.1', port: 0, workers: 1 });
    try {
      const port = dev.nic as ThreadPort;
      const plain = port.call('heap', {}) as { used: number; total: number; external: number; young: number; collected: boolean };
      expect(plain.collected).toBe(false);
      expect(plain.young).toBeGreaterThan(0);
      expect(plain.total).toBeGreaterThanOrEqual(plain.young);
      expect(plain.used).toBeGreaterThan(0);
      expect(plain.total).toBeGreaterThanOrEqual(plain.used);
      const asked = port.call('heap', { gc: true }) as { collected: boolean; used: number };
      // Whether gc is reachable depends on the process's flags (vitest may expose it): either way a number.
      expect(typeof asked.collected).toBe('boolean');
      expect(asked.used).toBeGreaterThan(0);
    } finally {
      await dev.close();
    }
  });
});

// Why the NIC thread runs with a small young generation (src/nic/thread-heap.ts): node:dgram's
// Buffer per datagram is external memory, freed only at a scavenge; with V8's default young
// generation they piled up to the limit of a small heap, a full mark-compact every 30–50 ms.
describe('NIC thread heap configuration', () => {
  it('a NIC thread receiving a 256 MiB stream of 64 KiB udp writes runs (almost) no full collection, on a small young generation', { timeout: 60_000 }, async () => {
    const ALL = Access.LocalWrite | Access.RemoteWrite;
    const open = async () => {
      const dev = await openDevice({ transport: 'udp', host: '127.0.0.1', port: 0, workers: 1 });
      const pd = dev.allocPd();
      const cq = dev.createCq({ depth: 256 });
      const qp = pd.createQp({ type: 'rc', sendCq: cq, recvCq: cq, maxSendWr: 64, maxRecvWr: 8, maxSge: 1 });
      return { dev, cq, qp, mr: pd.regMr(1 << 20, ALL) };
    };
    const a = await open();
    const b = await open();
    try {
      await Promise.all([a.qp.connect({ address: b.dev.address, qpn: b.qp.qpn }), b.qp.connect({ address: a.dev.address, qpn: a.qp.qpn })]);
      const target = b.dev.nic as ThreadPort;
      const before = (target.call('heap', {}) as { majorGcs: number }).majorGcs;
      const N = 4096;
      let posted = 0;
      let done = 0;
      const deadline = Date.now() + 45_000;
      while (done < N) {
        if (Date.now() > deadline) throw new Error(`stream stalled at ${done} of ${N}`);
        while (posted < N && posted - done < 32) {
          a.qp.postSend({ wrId: posted++, opcode: Opcode.RdmaWrite, sgList: [{ addr: a.mr.addr, length: 64 << 10, lkey: a.mr.lkey }], remoteAddr: b.mr.addr + ((posted % 16) << 16), rkey: b.mr.rkey });
        }
        await a.cq.wait(10_000);
        for (const wc of a.cq.poll(64)) {
          expect(wc.status).toBe(WcStatus.Success);
          done++;
        }
      }
      // PerformanceObserver entries arrive after the collection: give the last ones a turn.
      await new Promise((r) => setTimeout(r, 100));
      const reading = target.call('heap', {}) as { majorGcs: number; young: number };
      const after = reading.majorGcs;
      // With V8's default young generation: 5-12 full collections over this stream.
      expect(after - before).toBeLessThanOrEqual(2);
      // The thread's young generation is its own 3 MiB (Worker resourceLimits), not V8's default 16+ MiB.
      expect(reading.young).toBeLessThanOrEqual(3 << 20);
    } finally {
      await a.dev.close();
      await b.dev.close();
    }
  });
});

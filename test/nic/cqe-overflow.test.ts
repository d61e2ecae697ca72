// The completion ring between a NIC thread and the application is bounded (1 MiB). A step that
// completes more than it holds — here 30,000 receives flushed at once when their QP is moved
// to ERROR — keeps the rest in order on the NIC side and hands them over as the application
// drains: every completion arrives once, in order, with its own values (the NIC writes each
// from one reused record, so a kept one must be a copy).
import { describe, expect, it } from 'vitest';
import { Access, openDevice, QpState, WcStatus } from '../../src/index.js';

describe('completion ring overflow (NIC thread)', () => {
  it('30,000 flushed receives: all arrive once, in order, each with its own wrId', async () => {
    const dev = await openDevice({ transport: 'udp', host: '127.0.0.1', port: 0, workers: 1 });
    try {
      expect(dev.workers).toBe(1);
      const pd = dev.allocPd();
      const N = 30_000;
      const cq = dev.createCq({ depth: 1 << 16 });
      const qp = pd.createQp({ type: 'rc', sendCq: cq, recvCq: cq, maxSendWr: 1, maxRecvWr: 1 << 16, maxSge: 1 });
      const mr = pd.regMr(64, Access.LocalWrite);
      for (let i = 0; i < N; i++) qp.postRecv({ wrId: i + 1, sgList: [{ addr: mr.addr, length: 64, lkey: mr.lkey }] });
      qp.modify({ state: QpState.Error });
      const got: number[] = [];
      const deadline = Date.now() + 20_000;
      while (got.length < N && Date.now() < deadline) {
        await cq.wait(Math.max(1, deadline - Date.now())).catch(() => {});
        for (const wc of cq.poll(4096)) {
          expect(wc.status).toBe(WcStatus.WrFlushErr);
          got.push(Number(wc.wrId));
        }
      }
      expect(got.length).toBe(N);
      let inOrder = true;
      for (let i = 0; i < N; i++) if (got[i] !== i + 1) inOrder = false;
      expect(inOrder).toBe(true);
    } finally {
      await dev.close();
    }
  }, 30_000);
});

// The CM agent keeps 128 receive slots of 1 KiB posted on its CM QP, which anyone may Send to. A
// Send longer than a slot completes that receive in error (LocLenErr): if the agent only posts a
// slot again after a good receive, 128 oversized Sends leave the CM QP with no receive at all,
// and every later REQ to the device — anybody's — waits in RNR until its deadline. The device's
// cm is then dead for good.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Access, connect, type Device, listen, openDevice, Opcode } from '../../src/index.js';
import type { CmListener } from '../../src/cm/index.js';
import { CM_QPN } from '../../src/verbs/reserved.js';
import { agentOf } from '../../src/cm/agent.js';

const SERVICE = 91;

describe('oversized Sends to the CM QP', () => {
  let srv: Device;
  let l: CmListener;
  beforeAll(async () => {
    srv = await openDevice({ transport: 'udp', host: '127.0.0.1', port: 0 });
    l = listen(srv, { service: SERVICE });
    void (async () => {
      for await (const qp of l) qp.destroy();
    })().catch(() => {});
  }, 30_000);
  afterAll(async () => {
    l?.close();
    await srv?.close();
  });

  it('200 Sends of 2 KiB to the CM QP, each from its own srd QP, from 127.0.0.6: a connect from 127.0.0.1 still gets in', async () => {
    const bad = await openDevice({ transport: 'udp', host: '127.0.0.6', port: 0 });
    const good = await openDevice({ transport: 'udp', host: '127.0.0.1', port: 0 });
    try {
      const pd = bad.allocPd();
      const cq = bad.createCq({ depth: 1024 });
      const mr = pd.regMr(2048, Access.LocalWrite);
      mr.buffer.fill(0x7b);
      const ah = pd.createAh({ address: srv.address });
      // One Send per srd QP (a refused message fails its QP). Bounded: 200 QPs, then wait for them.
      const N = 200;
      for (let i = 0; i < N; i++) {
        const qp = pd.createQp({ type: 'srd', sendCq: cq, recvCq: cq, maxSendWr: 1, maxRecvWr: 1, maxSge: 1 });
        qp.postSend({ wrId: i, opcode: Opcode.Send, sgList: [{ addr: mr.addr, length: 2048, lkey: mr.lkey }], ah, remoteQpn: CM_QPN, signaled: true });
      }
      let done = 0;
      const statuses = new Map<number, number>();
      for (let t = 0; t < 250 && done < N; t++) {
        for (const wc of cq.poll(64)) {
          done++;
          statuses.set(wc.status, (statuses.get(wc.status) ?? 0) + 1);
        }
        await new Promise((r) => setTimeout(r, 20));
      }
      // Each reached the CM QP and was refused there (RemInvReqErr), the later ones found no receive (RNR).
      expect(statuses.get(9) ?? 0).toBeGreaterThan(0);
      expect(agentOf(srv).dropped).toBeGreaterThanOrEqual(128);
      expect((srv.stats() as unknown as { cm: { dropped: number } }).cm.dropped).toBe(agentOf(srv).dropped);
      const c = await connect(good, srv.address, { service: SERVICE, timeoutMs: 4000 });
      expect(c.qpn).toBeGreaterThan(0);
      c.destroy();
    } finally {
      await bad.close();
      await good.close();
    }
  }, 30_000);
});

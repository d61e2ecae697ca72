// The device a client dials answers its REQ: what that answer holds is the listener's word, and
// the client's CM must survive any of it. A REJ whose reason is not a string (JSON's
// {"toString": 1}: String() of it throws) threw out of the CM agent's completion loop, which
// ends on a throw: the connect waited for its timeout, and the device's cm was deaf from then on —
// every later connect timed out and its listeners heard no REQ.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Access, connect, type Device, listen, openDevice, Opcode, WcOpcode } from '../../src/index.js';
import type { CmListener } from '../../src/cm/index.js';
import { type CmAction, CmCore } from '../../src/cm/core.js';
import { pollAll } from '../../src/core/sans-io.js';
import { CM_QPN } from '../../src/verbs/reserved.js';

const enc = new TextEncoder();
const dec = new TextDecoder();
const A = { transport: 'udp', host: '127.0.0.1', port: 4791 } as const;

/** Answers whose fields are JSON but not what the CM writes. */
const HOSTILE: ((id: number) => unknown)[] = [
  (id) => ({ t: 'rej', id, reason: { toString: 1 } }),
  (id) => ({ t: 'rej', id, reason: { toString: 1, valueOf: 1 }, busy: { toString: 1 } }),
  (id) => ({ t: 'rej', id, reason: ['a', { toString: 1 }] }),
  (id) => ({ t: 'rep', id, qpn: 5, pd: { toString: 1 } }),
  (id) => ({ t: 'rep', id, qpn: 1e300 }),
  (id) => ({ t: 'rep', id, qpn: -7, pd: 42 }),
];

describe('answers a hostile listener writes', () => {
  it('sans-I/O: each settles its request with a clear error or a value, never a throw', () => {
    for (const make of HOSTILE) {
      const c = new CmCore();
      c.request(A, 7, 100, undefined, 5000, 0);
      const req = pollAll(c).find((a): a is Extract<CmAction, { kind: 'send' }> => a.kind === 'send')!;
      const id = (JSON.parse(dec.decode(req.bytes)) as { id: number }).id;
      expect(() => c.handleMessage(enc.encode(JSON.stringify(make(id))), A, 1)).not.toThrow();
      const settled = pollAll(c).filter((a) => a.kind === 'settled');
      expect(settled.length + c.dropped).toBe(1);
    }
  });

  it('sans-I/O: 20 000 REQs, REPs and REJs with fields of every JSON shape (objects whose String() throws among them) never throw', () => {
    let seed = 1;
    const r = (): number => (seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31;
    const c = new CmCore({ ports: [1000, 1001] });
    c.listen(7, true);
    c.listen(0, true);
    for (let i = 0; i < 20_000; i++) {
      const id = c.request(A, 7, 100, undefined, 5000, 0);
      const shapes: unknown[] = [id, 'x', 1, -1, 1.5, 1e300, null, true, [], [1, 2, 3], [70_000, 1], { toString: 1 }, { valueOf: 1, toString: 1 }, ['a', { toString: 1 }], {}, 'AAAA', Array.from({ length: 20 }, (_, k) => 1024 + k)];
      const m: Record<string, unknown> = { t: ['req', 'rep', 'rej', 'x'][Math.floor(r() * 4)] };
      for (const k of ['id', 'qpn', 'service', 'pd', 'ports', 'routes', 'reason', 'busy', 'port']) if (r() < 0.8) m[k] = k === 'id' && r() < 0.7 ? id : shapes[Math.floor(r() * shapes.length)];
      expect(() => c.handleMessage(enc.encode(JSON.stringify(m)), A, i)).not.toThrow();
      pollAll(c);
    }
  });

  describe('over udp', () => {
    let evil: Device;
    let good: Device;
    let client: Device;
    let l: CmListener;
    beforeAll(async () => {
      evil = await openDevice({ transport: 'udp', host: '127.0.0.1', port: 0 });
      good = await openDevice({ transport: 'udp', host: '127.0.0.1', port: 0 });
      client = await openDevice({ transport: 'udp', host: '127.0.0.1', port: 0 });
      l = listen(good, { service: 93 });
      void (async () => {
        for await (const qp of l) qp.destroy();
      })().catch(() => {});
    }, 30_000);
    afterAll(async () => {
      l?.close();
      for (const d of [evil, good, client]) await d?.close();
    });

    it('a REJ whose reason String() throws fails that connect with ERR_UNREACHABLE; the client device connects elsewhere afterwards', async () => {
      // The hostile listener: its own CM QP, answering each REQ with the REJ above.
      const pd = evil.allocPd();
      const cq = evil.createCq({ depth: 64 });
      const qp = pd.createCmQp({ sendCq: cq, recvCq: cq, maxSendWr: 16, maxRecvWr: 4, maxSge: 1, maxInline: 512 });
      const mr = pd.regMr(4 * 1024 + 1024, Access.LocalWrite);
      for (let i = 0; i < 4; i++) qp.postRecv({ wrId: i, sgList: [{ addr: mr.addr + i * 1024, length: 1024, lkey: mr.lkey }] });
      let answered = 0;
      const serve = (async () => {
        while (answered < 1) {
          await cq.wait(10_000);
          for (const wc of cq.poll(16) as (ReturnType<typeof cq.poll>[number] & { src?: { transport: string } })[]) {
            if (wc.opcode !== WcOpcode.Recv) continue;
            const at = Number(wc.wrId) * 1024;
            const req = JSON.parse(dec.decode(mr.buffer.slice(at, at + wc.byteLen))) as { id: number };
            const rej = enc.encode(JSON.stringify(HOSTILE[0]!(req.id)));
            mr.buffer.set(rej, 4096);
            qp.postSend({ wrId: 0, opcode: Opcode.Send, sgList: [{ addr: mr.addr + 4096, length: rej.length, lkey: mr.lkey }], ah: pd.createAh({ address: wc.src! as never }), remoteQpn: CM_QPN, signaled: false });
            answered++;
          }
        }
      })();
      await expect(connect(client, evil.address, { service: 1, timeoutMs: 3000 })).rejects.toMatchObject({ code: 'ERR_UNREACHABLE' });
      await serve;
      // The client's cm still hears answers.
      const c = await connect(client, good.address, { service: 93, timeoutMs: 3000 });
      expect(c.qpn).toBeGreaterThan(0);
      c.destroy();
    }, 30_000);
  });
});

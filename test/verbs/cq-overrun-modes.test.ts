// A CQ overrun looks the same with the NIC inline and on a NIC thread (docs/nic.md: "CQ overrun
// works as inline"; errors.test.ts checks it on inproc): the CQ is marked overrun, poll() returns
// what came before and then throws, wait() rejects, ERR_INVALID_STATE. With workers: 1 the NIC
// thread refused the completion and moved the QP to ERROR, but the application's CompletionQueue
// was never told: overrun stayed false, poll() returned [] for good and a wait() without a
// timeout never settled (found by an audit; the workers: 1 cases failed then).
import { describe, expect, it } from 'vitest';
import { Access, ErrorCode, Opcode, openDevice, QpState, type DeviceEvent } from '../../src/index.js';

const ALL = Access.LocalWrite | Access.RemoteRead | Access.RemoteWrite | Access.RemoteAtomic;

describe.each([0, 1])('workers %i', (workers) => {
  it.each(['udp', 'tcp'] as const)('%s: a completion into a full CQ marks it overrun; once drained poll throws and wait rejects ERR_INVALID_STATE', { timeout: 30_000 }, async (transport) => {
    const a = await openDevice({ transport, host: '127.0.0.1', port: 0, workers });
    const b = await openDevice({ transport, host: '127.0.0.1', port: 0, workers });
    try {
      const events: DeviceEvent[] = [];
      a.on('event', (ev) => events.push(ev));
      const pdA = a.allocPd();
      const pdB = b.allocPd();
      const cqA = a.createCq({ depth: 2 });
      const cqB = b.createCq({ depth: 16 });
      const init = { type: 'rc' as const, maxSendWr: 8, maxRecvWr: 8, maxSge: 1 };
      const qpA = pdA.createQp({ ...init, sendCq: cqA, recvCq: cqA });
      const qpB = pdB.createQp({ ...init, sendCq: cqB, recvCq: cqB });
      await Promise.all([qpA.connect({ address: b.address, qpn: qpB.qpn }), qpB.connect({ address: a.address, qpn: qpA.qpn })]);
      const src = pdA.regMr(64, ALL);
      const dst = pdB.regMr(64, ALL);
      for (let i = 0; i < 3; i++) qpA.postSend({ wrId: i, opcode: Opcode.RdmaWrite, sgList: [{ addr: src.addr, length: 8, lkey: src.lkey }], remoteAddr: dst.addr, rkey: dst.rkey });
      // Bounded: until the QP is in ERROR (the overrun moved it there) or 3 s.
      for (let i = 0; i < 300 && qpA.state !== QpState.Error; i++) await new Promise((r) => setTimeout(r, 10));
      expect(qpA.state).toBe(QpState.Error);
      expect(events.some((e) => e.type === 'cq-error')).toBe(true);
      expect(cqA.poll(10).map((w) => w.wrId)).toEqual([0, 1]);
      expect.soft(cqA.overrun, 'cq.overrun').toBe(true);
      expect.soft(cqA.dropped, 'cq.dropped').toBeGreaterThanOrEqual(1);
      let code: string | undefined;
      try {
        cqA.poll();
      } catch (e) {
        code = (e as { code?: string }).code;
      }
      expect.soft(code, 'poll once drained').toBe(ErrorCode.InvalidState);
      // wait() has no deadline of its own: race it against 2 s.
      const waited = await Promise.race([
        cqA.wait().then(() => 'resolved', (e: { code?: string }) => e.code),
        new Promise((r) => setTimeout(() => r('still pending after 2 s'), 2000)),
      ]);
      expect.soft(waited, 'wait() once drained').toBe(ErrorCode.InvalidState);
    } finally {
      await a.close();
      await b.close();
    }
  });
});

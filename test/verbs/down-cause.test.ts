// Why a QP went down is readable on the QP (qp.downCause, @internal) by the time the work it
// flushed can be polled — not only later, when its 'qp-fatal' / 'disconnected' event comes. A NIC
// thread posts its events apart from its completion ring, so the application could poll the
// flushed completions first and know only "flushed"; the channels (src/channel/verbs-map.ts)
// read the cause here to give a flush the code of its cause (issue #26). A peer process killed
// with SIGKILL over tcp (the kernel resets the connection: cause 'lost' at once), NIC inline
// and threaded; the CQ is polled before any event can be heard. A reset clears the cause; the
// application's own modify to ERROR gives none.
import { spawn, type ChildProcess } from 'node:child_process';
import { createInterface } from 'node:readline';
import { afterEach, describe, expect, it } from 'vitest';
import { type Device, type DeviceEvent, openDevice, QpState, WcStatus, type WorkCompletion } from '../../src/index.js';

const devs: Device[] = [];
const children: ChildProcess[] = [];
afterEach(async () => {
  for (const c of children.splice(0)) c.kill('SIGKILL');
  for (const d of devs.splice(0)) await d.close();
});

for (const workers of [0, undefined]) {
  describe(`qp.downCause (tcp, workers ${workers ?? 'default'})`, () => {
    it('is the cause (lost) when the first flushed completion is polled, whatever the event did; a reset clears it', async () => {
      const a = await openDevice({ transport: 'tcp', host: '127.0.0.1', port: 0, ...(workers === undefined ? {} : { workers }) });
      devs.push(a);
      const pd = a.allocPd();
      const cq = a.createCq({ depth: 64 });
      const qp = pd.createQp({ type: 'rc', sendCq: cq, recvCq: cq, maxSendWr: 8, maxRecvWr: 8, maxSge: 1 });
      const child = spawn(process.execPath, ['test/verbs/kill-peer.mjs', 'tcp'], { stdio: ['pipe', 'pipe', 'inherit'] });
      children.push(child);
      const lines = createInterface({ input: child.stdout! })[Symbol.asyncIterator]();
      const peer = JSON.parse((await lines.next()).value as string) as { address: { transport: 'tcp'; host: string; port: number }; qpn: number };
      child.stdin!.write(`${JSON.stringify({ address: a.address, qpn: qp.qpn })}\n`);
      await qp.connect({ address: peer.address, qpn: peer.qpn });
      expect((await lines.next()).value).toBe('ready');
      qp.postRecv([{ wrId: 1 }, { wrId: 2 }]);
      expect(qp.downCause).toBeUndefined();
      const events: DeviceEvent['type'][] = [];
      a.on('event', (ev) => events.push(ev.type));
      child.kill('SIGKILL');
      // Poll until the flush shows (bounded: 5 s); the cause is read in the same turn as the
      // completion. With a NIC thread the loop is synchronous: no message from that thread (its
      // events) can come in while it spins, so the flush is polled before any event is heard.
      let seen: { wc: WorkCompletion; cause: unknown; eventsThen: number } | undefined;
      for (const t0 = performance.now(); !seen && performance.now() - t0 < 5000;) {
        const wcs = cq.poll(8);
        if (wcs.length > 0) seen = { wc: wcs[0]!, cause: qp.downCause, eventsThen: events.length };
        else if (a.workers === 0) await new Promise((r) => setImmediate(r));
      }
      expect(seen?.wc).toMatchObject({ wrId: 1, status: WcStatus.WrFlushErr });
      if (a.workers > 0) expect(seen?.eventsThen).toBe(0);
      expect(seen?.cause).toBe('lost');
      expect(qp.state).toBe(QpState.Error);
      qp.modify({ state: QpState.Reset });
      expect(qp.downCause).toBeUndefined();
      // The application's own act: ERROR without a cause.
      qp.modify({ state: QpState.Init });
      qp.modify({ state: QpState.Error });
      expect(qp.downCause).toBeUndefined();
    }, 20_000);
  });
}

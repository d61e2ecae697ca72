// Closing a device acknowledges what it received: a receiver that takes the last Send and
// closes at once must not leave the sender retrying into a closed port (RetryExcErr) — the
// acks it owes leave before the link closes, on every transport.
import { afterEach, describe, expect, it } from 'vitest';
import { WcStatus, type Device } from '../../src/index.js';
import { rcSide } from './helpers.js';

const devs: Device[] = [];
afterEach(async () => {
  for (const d of devs.splice(0)) if (!d.closed) await d.close();
});


describe.each(['udp', 'tcp', 'inproc'] as const)('close after the last receive over %s', (transport) => {
  it('the sender sees Success, not RetryExcErr', async () => {
    for (let run = 0; run < 3; run++) {
      const a = await rcSide(transport, devs, { timeoutMs: 8000 });
      const b = await rcSide(transport, devs, { timeoutMs: 8000 });
      await Promise.all([a.qp.connect({ address: b.dev.address, qpn: b.qp.qpn }), b.qp.connect({ address: a.dev.address, qpn: a.qp.qpn })]);
      const got = b.qp.recv({ sgList: [{ addr: b.mr.addr, length: 64, lkey: b.mr.lkey }] });
      const sent = a.qp.send({ sgList: [{ addr: a.mr.addr, length: 64, lkey: a.mr.lkey }] });
      expect((await got).status).toBe(WcStatus.Success);
      await b.dev.close();
      const t0 = performance.now();
      const wc = await sent.catch((e: { status?: number }) => ({ status: e.status }));
      expect(wc.status).toBe(WcStatus.Success);
      expect(performance.now() - t0).toBeLessThan(2000);
      await a.dev.close();
    }
  }, 30_000);
});

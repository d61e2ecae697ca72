// A listener closed while requests it answered are still connecting: release() only let go of
// the service, so the QPs made for those requests lived on until their own connect deadline
// (10 s) — and one that connected meanwhile was disposed of only then, after its peer had been
// told the connection was made. They go with the close now.
import { afterAll, describe, expect, it } from 'vitest';
import { type Device, listen, openDevice } from '../../src/index.js';
import { rawCm } from '../attack/cm-raw.js';

const SERVICE = 79;

describe('listener closed while requests are connecting', () => {
  const devs: Device[] = [];
  afterAll(async () => {
    for (const d of devs) await d.close();
  });

  it('the QPs made for answered REQs go with listener.close(), not at their connect deadline', async () => {
    const srv = await openDevice({ transport: 'udp', host: '127.0.0.1', port: 0 });
    const peer = await openDevice({ transport: 'udp', host: '127.0.0.1', port: 0 });
    devs.push(srv, peer);
    const l = listen(srv, { service: SERVICE, backlog: 8 });
    const cm = rawCm(peer);
    // REQs for QPs that never connect: each answered QP waits, half-open.
    for (let i = 0; i < 4; i++) cm.send(srv.address, { t: 'req', id: 5000 + i, service: SERVICE, qpn: 100 + i });
    await cm.pump(3000, () => cm.inbox.length >= 4);
    const qpns = cm.inbox.filter((m) => m.msg?.t === 'rep').map((m) => m.msg.qpn as number);
    expect(qpns.length).toBe(4);
    expect(qpns.every((q) => srv.nic.hasQpn(q))).toBe(true);
    l.close();
    // Bounded wait (the destroy may go through a NIC thread): 2 s at most, well under the 10 s deadline.
    for (let i = 0; i < 200 && qpns.some((q) => srv.nic.hasQpn(q)); i++) await new Promise((r) => setTimeout(r, 10));
    expect(qpns.filter((q) => srv.nic.hasQpn(q))).toEqual([]);
  }, 20_000);
});

// REQs past a listener's backlog are refused busy, REQs for a service nobody listens to are
// refused, and half-open requests are evicted for newer ones — all bounded, but none of it was
// in dev.stats(): its `cm` held only `dropped`, and halfOpenEvicted only a listener's own
// counters. A REQ flood left no trace in the device's stats.
import { afterAll, describe, expect, it } from 'vitest';
import { type Device, listen, openDevice } from '../../src/index.js';
import { rawCm } from './cm-raw.js';

const SERVICE = 80;
type CmStats = { refusedBusy: number; refusedNoListener: number; halfOpenEvicted: number };
const cmStats = (d: Device): CmStats => (d.stats() as unknown as { cm: CmStats }).cm;

describe('refused and evicted requests in dev.stats().cm', () => {
  const devs: Device[] = [];
  afterAll(async () => {
    for (const d of devs) await d.close();
  });

  it('20 REQs against backlog 2 and 3 for no listener: counted as refused', async () => {
    const srv = await openDevice({ transport: 'udp', host: '127.0.0.1', port: 0 });
    const evil = await openDevice({ transport: 'udp', host: '127.0.0.1', port: 0 });
    devs.push(srv, evil);
    const l = listen(srv, { service: SERVICE, backlog: 2 });
    const cm = rawCm(evil);
    for (let i = 0; i < 20; i++) cm.send(srv.address, { t: 'req', id: 7000 + i, service: SERVICE, qpn: 100 + i });
    for (let i = 0; i < 3; i++) cm.send(srv.address, { t: 'req', id: 7100 + i, service: SERVICE + 1, qpn: 200 + i });
    await cm.pump(3000, () => cm.inbox.length >= 23);
    const busy = cm.inbox.filter((m) => m.msg?.t === 'rej' && m.msg.busy === true).length;
    expect(busy).toBe(18);
    expect(cmStats(srv)).toMatchObject({ refusedBusy: 18, refusedNoListener: 3, halfOpenEvicted: 0 });
    l.close();
  }, 20_000);

  it('a half-open request evicted for another source\'s shows in dev.stats().cm as in listener.counters', async () => {
    const srv = await openDevice({ transport: 'udp', host: '127.0.0.1', port: 0 });
    const evil = await openDevice({ transport: 'udp', host: '127.0.0.1', port: 0 });
    const other = await openDevice({ transport: 'udp', host: '127.0.0.2', port: 0 });
    devs.push(srv, evil, other);
    const l = listen(srv, { service: SERVICE, backlog: 2 });
    const cm = rawCm(evil);
    for (let i = 0; i < 2; i++) cm.send(srv.address, { t: 'req', id: 7200 + i, service: SERVICE, qpn: 300 + i });
    await cm.pump(3000, () => cm.inbox.length >= 2);
    const cm2 = rawCm(other);
    cm2.send(srv.address, { t: 'req', id: 7300, service: SERVICE, qpn: 400 });
    await cm2.pump(3000, () => cm2.inbox.length >= 1);
    expect(cm2.inbox[0]?.msg?.t).toBe('rep');
    expect(l.counters.halfOpenEvicted).toBe(1);
    expect(cmStats(srv).halfOpenEvicted).toBe(1);
    l.close();
  }, 20_000);
});

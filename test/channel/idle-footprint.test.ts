// What every idle channel's QP would otherwise hold a copy of: its caps (the verbs QP's and the
// engine's) are one object for all QPs made alike, and the QP has no listener table until its
// first listener. Each is checked here with the sharing in place and with the first use after
// it: a QP made with other caps gets its own, a listener added later hears its events.
import { afterEach, describe, expect, it } from 'vitest';
import { connectChannel, listenChannels, openDevice, type Device, type DeviceEvent } from '../../src/index.js';
import { clean } from '../sim/net.js';
import { Sim } from '../sim/sim.js';
import { newRecvWork } from '../../src/rdmap/state.js';

const devs: Device[] = [];
afterEach(async () => {
  for (const d of devs.splice(0)) await d.close();
});

describe('idle QP footprint', () => {
  it('verbs QPs made alike share one frozen caps object; other caps get their own; no listener table until the first listener, which then hears', async () => {
    const d = await openDevice({ transport: 'inproc' });
    devs.push(d);
    const pd = d.allocPd();
    const cq = d.createCq({ depth: 16 });
    const init = { type: 'rc' as const, sendCq: cq, recvCq: cq, maxSendWr: 8, maxRecvWr: 8, maxSge: 1 };
    const a = pd.createQp(init);
    const b = pd.createQp(init);
    const c = pd.createQp({ ...init, maxRecvWr: 9 });
    expect(b.caps).toBe(a.caps);
    expect(Object.isFrozen(a.caps)).toBe(true);
    expect(c.caps).not.toBe(a.caps);
    expect(c.caps.maxRecvWr).toBe(9);
    expect(a.caps.maxRecvWr).toBe(8);
    expect((a as unknown as { _events: unknown })._events).toBeUndefined();
    expect(a.listenerCount('event')).toBe(0);
    expect(a.emit('event', { type: 'established', qpn: a.qpn })).toBe(false);
    const heard: DeviceEvent[] = [];
    a.on('event', (e) => heard.push(e));
    expect(a.emit('event', { type: 'established', qpn: a.qpn })).toBe(true);
    expect(heard.length).toBe(1);
    expect(b.listenerCount('event')).toBe(0);
  });

  it('engine QPs made alike share caps', async () => {
    const sim = new Sim(21, clean);
    const x = await sim.node();
    const y = await sim.node();
    const [q1] = await sim.connect(x, y, {}, 1);
    const [q2] = await sim.connect(x, y, {}, 2);
    const [q3] = await sim.connect(x, y, { maxRecvWr: 3 }, 3);
    expect(q2.caps).toBe(q1.caps);
    expect(q3.caps).not.toBe(q1.caps);
    expect(q3.caps.maxRecvWr).toBe(3);
  });

  it('a posted receive keeps its total whether claimed or not, and is claimed and released again', () => {
    for (const total of [0, 1, 100, 2 ** 32 - 1]) {
      const r = newRecvWork(7, [], total);
      expect([r.wrId, r.total, r.claimed]).toEqual([7, total, false]);
      r.claimed = true;
      r.claimed = true;
      expect([r.total, r.claimed]).toEqual([total, true]);
      r.claimed = false;
      expect([r.total, r.claimed]).toEqual([total, false]);
    }
  });

  it('idle channels to one peer, then traffic on each: sends queued beyond highWaterMark and messages both ways still arrive', { timeout: 30_000 }, async () => {
    for (let i = 0; i < 2; i++) devs.push(await openDevice({ transport: 'udp', host: '127.0.0.1', port: 0 }));
    const [a, b] = devs as [Device, Device];
    const l = listenChannels(b, { service: 7 });
    const pairs = [];
    for (let i = 0; i < 3; i++) pairs.push(await Promise.all([connectChannel(a, b.address, { service: 7, highWaterMark: 1 }), l.accept(10_000)]));
    await new Promise((r) => setTimeout(r, 50));
    for (const [c, s] of pairs) {
      const got: unknown[] = [];
      const reading = (async () => {
        for await (const m of s) if (got.push(m) === 4) break;
      })();
      await Promise.all([c.send('one'), c.send('two'), c.send('three'), c.send('four')]);
      await reading;
      expect(got).toEqual(['one', 'two', 'three', 'four']);
    }
    for (const [c, s] of pairs) {
      await c.close();
      await s.close();
    }
    l.close();
  });
});

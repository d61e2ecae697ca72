// A REQ's `ports` (the requester's NIC threads' ports, ./src/cm/core.ts) are the requester's word,
// checked only in that the REQ came from the one it gives its CM QP. A requester listing
// [its own port, VICTIM] and a QPN on "thread 1" had the listener's new QP greet VICTIM — another
// socket of the requester's host: another service, another client behind the same NAT — its
// link resending probe after probe until its retries ran out (11 datagrams in 10 s). The
// listener now sends nothing to a port the requester has not shown it owns: its QP waits for
// the requester's QP to greet it from there. A genuine requester of several threads still
// connects (test/cm/multi-thread.test.ts).
import dgram from 'node:dgram';
import { afterAll, describe, expect, it } from 'vitest';
import { type Device, listen, openDevice } from '../../src/index.js';
import { rawCm } from './cm-raw.js';

const SERVICE = 77;

describe('REQ ports aimed at another port of the requester\'s host', () => {
  const devs: Device[] = [];
  afterAll(async () => {
    for (const d of devs) await d.close();
  });

  it('the listener answers the REQ and sends nothing to the listed victim port', async () => {
    const srv = await openDevice({ transport: 'udp', host: '127.0.0.1', port: 0 });
    const evil = await openDevice({ transport: 'udp', host: '127.0.0.1', port: 0 });
    devs.push(srv, evil);
    const l = listen(srv, { service: SERVICE });
    const victim = dgram.createSocket('udp4');
    let got = 0;
    victim.on('message', () => got++);
    await new Promise<void>((r) => victim.bind(0, '127.0.0.1', () => r()));
    try {
      const cm = rawCm(evil);
      // QPN 1 is on thread 1 of 2: ports[1], the victim's.
      cm.send(srv.address, { t: 'req', id: 4242, service: SERVICE, qpn: 1, ports: [evil.address.port, victim.address().port], routes: true });
      await cm.pump(3000, () => cm.inbox.length > 0);
      expect(cm.inbox[0]?.msg?.t).toBe('rep');
      // Before, the first probes reached the victim within a second; give it three.
      await new Promise((r) => setTimeout(r, 3000));
      expect(got).toBe(0);
    } finally {
      l.close();
      victim.close();
    }
  }, 30_000);
});

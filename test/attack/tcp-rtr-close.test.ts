// A peer-to-peer MPA Request for a cm service (the listener must wait for the initiator's RTR
// before the connection is up), then the initiator closes its socket instead of sending the RTR.
// The connection was closed without a word to whoever waited for it to come up: the cm listener
// kept the QP it had made for the request and its backlog slot for good, so a handful of such
// requests left their source refused ('backlog full') for as long as the listener lived. Now the
// close fails the wait, and the QP and the slot go.
import net from 'node:net';
import { describe, expect, it } from 'vitest';
import { listen, openDevice } from '../../src/index.js';
import { encodeSabrePd } from '../../src/transport/tcp/private-data.js';
import { cat } from '../transport/tcp/raw-mpa.js';
import { until } from '../files/helpers.js';

/** An enhanced MPA Request (CRC, IRD/ORD 16) asking for peer-to-peer with a zero-length Write RTR, for cm `service`. */
function rtrRequest(service: number, qpn: number): Uint8Array {
  const block = encodeSabrePd({ kind: 'connect', initiatorQpn: qpn, responderQpn: 0, nonce: qpn * 7919, service });
  const pd = cat(Uint8Array.of(0x80, 0x10, 0x80, 0x10), block);
  return cat(new TextEncoder().encode('MPA ID Req Frame'), Uint8Array.of(0x50, 0x02, pd.length >> 8, pd.length & 0xff), pd);
}

describe('an initiator that closes instead of sending its RTR', () => {
  it('12 in turn from 127.0.0.2 against a backlog of 4: each gets a Reply, and each QP made for one is destroyed', async () => {
    const dev = await openDevice({ transport: 'tcp', host: '127.0.0.1', port: 0, workers: 0 });
    let made = 0;
    let destroyed = 0;
    const l = listen(dev, {
      service: 9, backlog: 4,
      setup: (qp) => {
        made++;
        const destroy = qp.destroy.bind(qp);
        qp.destroy = () => {
          destroyed++;
          destroy();
        };
      },
    });
    try {
      for (let i = 0; i < 12; i++) {
        const s = net.connect({ host: '127.0.0.1', port: dev.address.port as number, localAddress: '127.0.0.2' });
        s.on('error', () => {});
        await new Promise<void>((r) => s.once('connect', () => r()));
        s.write(rtrRequest(9, 100 + i));
        const reply = await new Promise<Buffer>((r) => s.once('data', r));
        s.destroy();
        // Before: the fifth was a busy reject (flags R), the backlog full of the first four.
        expect(reply[16]! & 0x20).toBe(0);
        await until(() => destroyed === made, 5000, 'the QP made for the request to go');
      }
      expect(made).toBe(12);
    } finally {
      l.close();
      await dev.close();
    }
  }, 60_000);
});

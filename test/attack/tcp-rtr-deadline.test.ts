// A tcp initiator that asks for peer-to-peer mode (RFC 6581) must send the zero-length RDMA Write
// RTR before anything else, and the responder waits for it after its MPA Reply. If that wait has
// no deadline, a peer that never sends the RTR holds the connection — its socket, its receive
// staging in device memory, a slot of its host's and of the device's connection caps — for as
// long as it keeps the socket open: 128 such connections lock a host out for good, 1024 the device.
import net from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Device, listen, openDevice } from '../../src/index.js';
import type { CmListener } from '../../src/cm/index.js';
import { encodeSabrePd } from '../../src/transport/tcp/private-data.js';
import { cat } from '../transport/tcp/raw-mpa.js';
import { until } from '../files/helpers.js';

const SERVICE = 77;

/** MPA Request (CRC, enhanced), IRD/ORD 16 with peer-to-peer and a zero-length Write RTR, a sabre connect block for `service`. */
function p2pRequest(service: number, qpn: number): Uint8Array {
  const block = encodeSabrePd({ kind: 'connect', initiatorQpn: qpn, responderQpn: 0, nonce: qpn * 7919, service });
  const pd = cat(Uint8Array.of(0x80, 0x10, 0x80, 0x10), block);
  return cat(new TextEncoder().encode('MPA ID Req Frame'), Uint8Array.of(0x50, 0x02, pd.length >> 8, pd.length & 0xff), pd);
}

/** A standard iWARP peer-to-peer Request (no sabre block: service 0). */
function p2pForeign(): Uint8Array {
  const pd = Uint8Array.of(0x80, 0x10, 0x80, 0x10);
  return cat(new TextEncoder().encode('MPA ID Req Frame'), Uint8Array.of(0x50, 0x02, 0, pd.length), pd);
}

describe('a peer-to-peer initiator that never sends its RTR', () => {
  let dev: Device;
  let l: CmListener;
  let l0: CmListener;
  beforeAll(async () => {
    dev = await openDevice({ transport: 'tcp', host: '127.0.0.1', port: 0, limits: { handshakeTimeoutMs: 400, maxConnectionsPerHost: 4 } });
    l = listen(dev, { service: SERVICE });
    l0 = listen(dev, { service: 0 });
  }, 30_000);
  afterAll(async () => {
    l?.close();
    l0?.close();
    await dev?.close();
  });

  for (const [what, req] of [['sabre connect', () => p2pRequest(SERVICE, 9)], ['standard iWARP', p2pForeign]] as const) {
    it(`${what}: the Reply comes, the RTR never does; the connection is closed at the handshake deadline, and the host's slots come back`, async () => {
      const port = dev.address.port as number;
      const socks: net.Socket[] = [];
      const closed: Promise<void>[] = [];
      let replied = 0;
      try {
        // The host's cap (4), all stalled after the Reply.
        for (let i = 0; i < 4; i++) {
          const s = net.connect({ host: '127.0.0.1', port, localAddress: '127.0.0.5' });
          s.on('error', () => {});
          closed.push(new Promise((r) => s.once('close', () => r())));
          s.on('connect', () => s.write(req()));
          s.once('data', () => replied++);
          socks.push(s);
        }
        await until(() => replied === 4, 5000, 'four MPA Replies');
        // Bounded by the test's own deadline: each is closed by the device, not by us.
        await Promise.race([Promise.all(closed), new Promise((_, j) => setTimeout(() => j(new Error('stalled connections still open after 5 s')), 5000))]);
        const link = dev.stats().link as unknown as Record<string, number>;
        expect(link.handshakeTimeouts).toBeGreaterThan(0);
        await until(() => (dev.stats().link as unknown as Record<string, number>).endpointConnections === 0, 5000, 'the device to let go of them');
      } finally {
        for (const s of socks) s.destroy();
      }
    }, 30_000);
  }
});

// A connection this device closes in order (its QP destroyed: an application that let go of it, a
// file server that timed out or evicted an unauthenticated client, a listener closing) sends its
// FIN and waits for the peer's. A peer that keeps its end open and never answers that FIN (a
// half-open socket) must not hold the connection — its socket and its slot of the host's and the
// device's connection caps — for as long as it likes: maxConnectionsPerHost of them would lock
// its host out for good, maxConnections the device.
import net from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Device, listen, openDevice } from '../../src/index.js';
import type { CmListener } from '../../src/cm/index.js';
import { sabreMpaRequest } from '../transport/tcp/raw-mpa.js';
import { until } from '../files/helpers.js';

const SERVICE = 78;

/** A sabre MPA Request with a connect block for `service`. */
const request = (service: number, qpn: number): Uint8Array => sabreMpaRequest({ kind: 'connect', initiatorQpn: qpn, responderQpn: 0, nonce: qpn * 7919, service });

const link = (dev: Device): Record<string, number> => dev.stats().link as unknown as Record<string, number>;

describe('a peer that never answers the FIN of a connection this device closed', () => {
  let dev: Device;
  let l: CmListener;
  beforeAll(async () => {
    dev = await openDevice({ transport: 'tcp', host: '127.0.0.1', port: 0, limits: { maxConnectionsPerHost: 4 } });
    l = listen(dev, { service: SERVICE });
  }, 30_000);
  afterAll(async () => {
    l?.close();
    await dev?.close();
  });

  it('holds no slot past a deadline: the connections go, and the host can connect again', async () => {
    const port = dev.address.port as number;
    const socks: net.Socket[] = [];
    let fins = 0;
    try {
      // The host's cap (4): each connection is accepted, then let go of by the application.
      for (let i = 0; i < 4; i++) {
        // allowHalfOpen: the peer's FIN is read and never answered; the socket stays open.
        const s = net.connect({ host: '127.0.0.1', port, localAddress: '127.0.0.6', allowHalfOpen: true });
        s.on('error', () => {});
        s.on('data', () => {});
        s.on('end', () => fins++);
        s.on('connect', () => s.write(request(SERVICE, 20 + i)));
        socks.push(s);
        const qp = await l.accept();
        qp.destroy();
      }
      await until(() => fins === 4, 5000, 'the device to close all four (its FIN)');
      // The peer still holds its end open: the device lets go of them all the same.
      await until(() => link(dev).endpointConnections === 0, 20_000, 'the device to let go of the half-closed connections');
      // And the host's slots came back: a fifth connection is accepted.
      const s = net.connect({ host: '127.0.0.1', port, localAddress: '127.0.0.6' });
      s.on('error', () => {});
      s.on('connect', () => s.write(request(SERVICE, 40)));
      socks.push(s);
      const qp = await l.accept();
      expect(qp.qpn).toBeGreaterThan(0);
      qp.destroy();
      expect(link(dev).connectionsRefusedHost).toBe(0);
    } finally {
      for (const s of socks) s.destroy();
    }
  }, 60_000);
});

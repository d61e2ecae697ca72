// The tcp device's cap on accepted connections (maxConnections) counts connections still in their
// MPA handshake: a few sources, each within maxConnectionsPerHost, that open sockets and say
// nothing fill it, and until their handshake deadline every other host was refused — a client
// with a real connect among them. Now a connection from a source holding fewer handshaking ones
// closes the oldest handshaking one of the source holding the most (counted), as the cm listener
// and the file server make room; established connections are never closed for it.
import net from 'node:net';
import { describe, expect, it } from 'vitest';
import { connect, type Device, listen, openDevice, QpState, type QueuePair } from '../../src/index.js';
import { until } from '../files/helpers.js';

const link = (dev: Device): Record<string, number> => dev.stats().link as unknown as Record<string, number>;

function silent(port: number, from: string): Promise<net.Socket> {
  return new Promise((resolve) => {
    const s = net.connect({ host: '127.0.0.1', port, localAddress: from });
    s.on('error', () => {});
    s.once('connect', () => resolve(s));
    s.once('close', () => resolve(s));
  });
}

describe('sockets that never start their MPA handshake, from a few sources', () => {
  it('127.0.0.2 and 127.0.0.3 fill maxConnections (8) with silent sockets, and keep opening more: clients from 127.0.0.1 still connect', async () => {
    const server = await openDevice({ transport: 'tcp', host: '127.0.0.1', port: 0, workers: 0, limits: { maxConnections: 8, maxConnectionsPerHost: 4, handshakeTimeoutMs: 60_000 } });
    const client = await openDevice({ transport: 'tcp', host: '127.0.0.1', port: 0, workers: 0 });
    const port = server.address.port as number;
    const l = listen(server, { service: 7 });
    const socks: net.Socket[] = [];
    const qps: QueuePair[] = [];
    try {
      for (let i = 0; i < 4; i++) socks.push(await silent(port, '127.0.0.2'), await silent(port, '127.0.0.3'));
      await until(() => link(server).connectionsAccepted === 8, 5000, 'the server to hold all eight');
      // Before: ERR_UNREACHABLE ('too many connections to this device') for the next 60 s.
      qps.push(await connect(client, server.address, { service: 7, timeoutMs: 5000 }));
      qps.push(await l.accept(5000));
      // The crowd keeps coming, from a third source too: it churns its own share, the client's
      // established connection stays, and another client connect gets in.
      for (let i = 0; i < 12; i++) socks.push(await silent(port, `127.0.0.${2 + (i % 3)}`));
      qps.push(await connect(client, server.address, { service: 7, timeoutMs: 5000 }));
      qps.push(await l.accept(5000));
      expect(link(server).handshakesEvicted).toBeGreaterThanOrEqual(2);
      expect(server.stats().link!.endpointConnections).toBeLessThanOrEqual(8);
      expect(qps[1]!.state).toBe(QpState.Rts);
      expect(qps[3]!.state).toBe(QpState.Rts);
    } finally {
      for (const s of socks) s.destroy();
      for (const qp of qps) qp.destroy();
      l.close();
      await client.close();
      await server.close();
    }
  }, 60_000);
});

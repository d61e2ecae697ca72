// The tcp device's per-host connection cap (maxConnectionsPerHost) counts connections by source.
// Every other per-source bound (the cm listener's, the file server's admission) takes an IPv6 /64
// as one host — a peer holding a prefix has 2^64 addresses to spread over — but the connector
// keyed its count by the full address: a peer with a /64 was held to maxConnections alone.
// Loopback has one IPv6 address, so the accepted sockets are relabelled as 2001:db8::/64 ones
// before the connector sees them (workers: 0, so the connector runs on this thread).
import net from 'node:net';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { type Device, openDevice } from '../../src/index.js';
import { until } from '../files/helpers.js';

const link = (dev: Device): Record<string, number> => dev.stats().link as unknown as Record<string, number>;

describe('the tcp per-host cap and IPv6', () => {
  afterEach(() => vi.restoreAllMocks());

  it('10 connections from 10 addresses of one /64 against maxConnectionsPerHost 4: 4 held, 6 refused', async () => {
    const servers: net.Server[] = [];
    const real = net.createServer.bind(net);
    vi.spyOn(net, 'createServer').mockImplementation(((...a: Parameters<typeof net.createServer>) => {
      const s = real(...a);
      servers.push(s);
      return s;
    }) as typeof net.createServer);
    const dev = await openDevice({ transport: 'tcp', host: '127.0.0.1', port: 0, workers: 0, limits: { maxConnectionsPerHost: 4 } });
    vi.restoreAllMocks();
    const socks: net.Socket[] = [];
    try {
      let n = 0;
      for (const s of servers) s.prependListener('connection', (c: net.Socket) => Object.defineProperty(c, 'remoteAddress', { value: `2001:db8::${(++n).toString(16)}`, configurable: true }));
      for (let i = 0; i < 10; i++) {
        const s = net.connect({ host: '127.0.0.1', port: dev.address.port as number });
        s.on('error', () => {});
        socks.push(s);
      }
      await until(() => link(dev).connectionsAccepted + link(dev).connectionsRefusedHost === 10, 5000, 'the device to take all ten');
      expect(n).toBe(10);
      expect(link(dev).connectionsRefusedHost).toBe(6);
      expect(link(dev).connectionsAccepted).toBe(4);
    } finally {
      for (const s of socks) s.destroy();
      await dev.close();
    }
  }, 30_000);
});

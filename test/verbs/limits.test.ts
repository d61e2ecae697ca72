// openDevice({ limits }): the bounds of docs/resource-bounds.md set per device. Each limit is
// checked before anything binds, reaches the layer that keeps it, and is pushed past here
// through the public API (the bounds' own tests push past the defaults).
import net from 'node:net';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { ErrorCode, openDevice, type Device } from '../../src/index.js';
import { side } from './helpers.js';

const devs: Device[] = [];
afterEach(async () => {
  for (const d of devs.splice(0)) await d.close();
});

describe('openDevice limits', () => {
  it.each([
    [{ maxContexts: 0 }, /limits.maxContexts must be a positive integer/],
    [{ maxOooBytes: 1.5 }, /limits.maxOooBytes must be a positive integer/],
    [{ maxIrd: -1 }, /limits.maxIrd/],
    [{ maxConections: 3 }, /unknown limit 'maxConections'/],
  ])('%o is refused with ERR_INVALID_ARGUMENT before anything binds', async (limits, msg) => {
    await expect(openDevice({ transport: 'udp', limits: limits as never })).rejects.toMatchObject({ code: ErrorCode.InvalidArgument, message: expect.stringMatching(msg) });
  });

  it('engine limits reach the engine on every transport', async () => {
    for (const transport of ['inproc', 'udp', 'tcp'] as const) {
      const dev = await openDevice({ transport, limits: { maxOooEntries: 77, maxSrdFlowsPerPeer: 5, maxIrd: 9 } });
      devs.push(dev);
      expect(dev.nic.bounds).toMatchObject({ maxOooEntries: 77, maxSrdFlowsPerPeer: 5, maxIrd: 9, maxOooBytes: 4 << 20 });
    }
  });

  it('tcp maxConnectionsPerHost: the third connection from this host is refused and counted', async () => {
    const dev = await openDevice({ transport: 'tcp', limits: { maxConnectionsPerHost: 2, handshakeTimeoutMs: 5000 } });
    devs.push(dev);
    const socks: net.Socket[] = [];
    try {
      for (let i = 0; i < 6; i++) {
        const s = net.connect(Number(dev.address.port), '127.0.0.1');
        s.on('error', () => {});
        socks.push(s);
      }
      await vi.waitFor(() => expect((dev.stats().link as Record<string, number>).connectionsRefusedHost).toBe(4), { timeout: 5000 });
      expect((dev.stats().link as Record<string, number>).connectionsAccepted).toBe(2);
    } finally {
      for (const s of socks) s.destroy();
    }
  });

  it('udp maxContexts: a second peer finds no room (counted), the first keeps working', async () => {
    const server = await side({ device: { transport: 'udp', limits: { maxContexts: 1 } } });
    const a = await side({ device: { transport: 'udp' } });
    const b = await side({ device: { transport: 'udp' }, qp: { timeoutMs: 500 } as never });
    const srvB = server.pd.createQp({ type: 'rc', sendCq: server.cq, recvCq: server.cq, maxSendWr: 8, maxRecvWr: 8, maxSge: 1 });
    devs.push(server.dev, a.dev, b.dev);
    await Promise.all([a.qp.connect({ address: server.dev.address, qpn: server.qp.qpn }), server.qp.connect({ address: a.dev.address, qpn: a.qp.qpn })]);
    void srvB.connect({ address: b.dev.address, qpn: b.qp.qpn }).catch(() => {});
    void b.qp.connect({ address: server.dev.address, qpn: srvB.qpn }).catch(() => {});
    await vi.waitFor(() => expect((server.dev.stats().link as Record<string, number>).contextLimit).toBeGreaterThan(0), { timeout: 5000 });
    expect((server.dev.stats().link as Record<string, number>).contexts).toBe(1);
  });
});

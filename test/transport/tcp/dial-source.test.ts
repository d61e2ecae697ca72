// A tcp device dials from its own address, as rdma_cm binds a connection's source to the
// device's: a device opened on 127.0.0.2 reaches a peer from 127.0.0.2 (a server counting
// connections per source host sees the device's host), not from whatever address the kernel
// picks for the route (127.0.0.1 on loopback). A device on the wildcard address lets the
// kernel choose. Before, every dial came from the kernel's pick.
import net from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { openDevice, type Device } from '../../../src/index.js';
import { closeNet } from '../../net-fixture.js';

const devs: Device[] = [];
const servers: net.Server[] = [];
const sockets: net.Socket[] = [];
afterEach(async () => {
  for (const d of devs.splice(0)) await d.close();
  await closeNet(sockets.splice(0), servers.pop());
});

/** Where a qp.connect from a tcp device on `host` comes from, seen by a plain listener on 127.0.0.1. */
async function dialFrom(host: string): Promise<string> {
  const seen = new Promise<string>((resolve) => {
    const srv = net.createServer((s) => {
      sockets.push(s);
      resolve(s.remoteAddress ?? '');
    });
    servers.push(srv);
    srv.listen(0, '127.0.0.1');
  });
  await new Promise((r) => servers[0]!.once('listening', r));
  const port = (servers[0]!.address() as net.AddressInfo).port;
  const dev = await openDevice({ transport: 'tcp', host, port: 0 });
  devs.push(dev);
  const pd = dev.allocPd();
  const cq = dev.createCq({ depth: 8 });
  const qp = pd.createQp({ type: 'rc', sendCq: cq, recvCq: cq, maxSendWr: 4, maxRecvWr: 4, maxSge: 1 });
  // Not a sabre peer: the connect fails; where it came from is all this looks at.
  void qp.connect({ address: { transport: 'tcp', host: '127.0.0.1', port }, qpn: 1, timeoutMs: 2000 }).catch(() => undefined);
  return seen;
}

describe('a tcp device dials from its own address', () => {
  it('a device on 127.0.0.2 connects from 127.0.0.2', async () => {
    expect(await dialFrom('127.0.0.2')).toBe('127.0.0.2');
  });
  it('a device on 0.0.0.0 lets the kernel choose (127.0.0.1 to a loopback peer)', async () => {
    expect(await dialFrom('0.0.0.0')).toBe('127.0.0.1');
  });
});

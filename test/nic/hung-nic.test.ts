// A NIC thread that hangs (its event loop blocked, ./hang-nic.mjs) fails what waits on it with a
// clear error after a deadline, never a wait forever: a slow-path call at the mailbox's deadline
// (ERR_TIMEOUT), the calls after it at once (ERR_CLOSED), and a dial the NIC thread had taken
// (a cm connect over tcp) once the NIC thread has overrun its own deadline for it. Before, the
// dial's answer was awaited as a message with no deadline of this thread's: a NIC thread that
// hung after taking it left the connect pending for good.
import { createServer, type Server, type Socket } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { Access, connect, type Device } from '../../src/index.js';
import { hang, nicThreads, openHangable } from './hang.js';

const cleanup: Array<() => unknown> = [];
afterEach(async () => {
  for (const f of cleanup.splice(0).reverse()) await f();
});

async function hungDevice(transport: 'udp' | 'tcp'): Promise<Device> {
  const dev = await openHangable({ transport, host: '127.0.0.1', port: 0, workers: 1 });
  dev.on('event', () => {});
  cleanup.push(() => dev.close().catch(() => undefined));
  return dev;
}

describe('a NIC thread that hangs', () => {
  it.each(['udp', 'tcp'] as const)('%s: a slow-path call fails ERR_TIMEOUT at its deadline, later calls ERR_CLOSED at once', { timeout: 20_000 }, async (transport) => {
    const dev = await hungDevice(transport);
    const pd = dev.allocPd();
    cleanup.push(await hang(nicThreads(dev)[0]!));
    expect(() => pd.regMr(4096, Access.LocalWrite)).toThrow(expect.objectContaining({ code: 'ERR_TIMEOUT' }));
    const t0 = performance.now();
    expect(() => pd.regMr(4096, Access.LocalWrite)).toThrow(expect.objectContaining({ code: 'ERR_CLOSED' }));
    expect(() => dev.createCq({ depth: 4 })).toThrow(expect.objectContaining({ code: 'ERR_CLOSED' }));
    expect(performance.now() - t0).toBeLessThan(500);
  });

  it('tcp: a cm connect whose dial the NIC thread took rejects ERR_TIMEOUT, not never', { timeout: 20_000 }, async () => {
    // A listener that takes the connection and never answers its MPA request.
    const sockets: Socket[] = [];
    let took!: () => void;
    const connected = new Promise<void>((r) => (took = r));
    const server: Server = createServer((s) => {
      sockets.push(s);
      took();
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    cleanup.push(() => new Promise((r) => (sockets.forEach((s) => s.destroy()), server.close(r))));
    const port = (server.address() as { port: number }).port;
    const dev = await hungDevice('tcp');
    const t0 = performance.now();
    const connecting = connect(dev, { transport: 'tcp', host: '127.0.0.1', port }, { timeoutMs: 1_000 }).catch((e: unknown) => e);
    // The NIC thread has taken the dial (its connection is in): it hangs before its own deadline.
    await connected;
    cleanup.push(await hang(nicThreads(dev)[0]!));
    expect(await connecting).toMatchObject({ code: 'ERR_TIMEOUT' });
    // Its timeoutMs, and the grace the NIC thread gets past it before it is taken as hung.
    expect(performance.now() - t0).toBeLessThan(10_000);
  });
});

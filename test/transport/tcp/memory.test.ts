// Device memory running out under tcp connections (issue #11 audit): every established MPA
// connection stages its receive stream in device memory (the deframer, ~512 KiB). A device
// whose memory is exhausted must refuse the next connection — Terminate, close it, count it in
// dev.stats().link.connectionsRefusedMemory — never throw out of a socket callback (an uncaught
// exception takes the whole process down: one peer opening connections could crash the device).
// Real sockets on 127.0.0.1: raw MPA peers (./raw-mpa.ts) and a second sabre device.
import { afterEach, describe, expect, it } from 'vitest';
import { DeviceMemory } from '../../../src/dataplane/device-memory.js';
import { connect, listen, openDevice, type Device as ApiDevice } from '../../../src/index.js';
import { TcpLink } from '../../../src/transport/tcp/link.js';
import { Device } from '../../../src/verbs/device.js';
import { parseFpdus, rawConnect, replyLength, type RawPeer } from './raw-mpa.js';

const cleanup: (() => Promise<void> | void)[] = [];
const uncaught: unknown[] = [];
const onUncaught = (e: unknown): void => {
  uncaught.push(e);
};
afterEach(async () => {
  process.off('uncaughtException', onUncaught);
  for (const f of cleanup.splice(0).reverse()) await f();
});

/** A tcp device whose memory cannot grow past `arenaBytes` of arena: room for a few connections' staging. */
async function smallDevice(arenaBytes: number): Promise<{ dev: Device; port: number }> {
  const probe = await DeviceMemory.create({ initialBytes: 0, maximumBytes: 64 << 20, workerSlots: 0 });
  const size = probe.map.arenaBase + arenaBytes;
  const mem = await DeviceMemory.create({ initialBytes: size, maximumBytes: size, workerSlots: 0 });
  const t = await TcpLink.open({ dp: mem, host: '127.0.0.1', port: 0 });
  const dev = new Device(mem, t);
  cleanup.push(() => dev.close());
  return { dev, port: t.address.port };
}

const link = (d: Device | ApiDevice): Record<string, number> => d.stats().link!;

async function until(what: string, cond: () => boolean, ms = 10_000): Promise<void> {
  const end = Date.now() + ms;
  while (!cond()) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

const QP_INIT = { maxSendWr: 4, maxRecvWr: 4, maxSge: 1 };

describe('tcp: device memory exhausted by connections', () => {
  it("a peer opening 24 connections to a listener on an 8 MiB device (half of it the engine's): those past memory are refused, closed and counted; the device serves again once they go", async () => {
    process.on('uncaughtException', onUncaught);
    const { dev, port } = await smallDevice(8 << 20);
    const pd = dev.allocPd();
    const cq = dev.createCq({ depth: 64 });
    const l = listen(dev, { pd, backlog: 64, qpInit: { sendCq: cq, recvCq: cq, ...QP_INIT } });
    cleanup.push(() => l.close());
    const peers: RawPeer[] = [];
    let closed = 0;
    for (let i = 0; i < 24; i++) {
      const p = await rawConnect(port);
      cleanup.push(() => void p.s.destroy());
      void p.closed.then(() => closed++);
      peers.push(p);
      await until(`the MPA Reply of connection ${i}`, () => p.received().length >= 20);
    }
    await until('the refusals', () => (link(dev).connectionsRefusedMemory ?? 0) > 0 && closed >= link(dev).connectionsRefusedMemory!);
    const refused = link(dev).connectionsRefusedMemory!;
    // Some fit (the ~4 MiB the engine leaves holds a few 512 KiB stagings), the rest were refused — and closed, not held.
    expect(refused).toBeGreaterThan(0);
    expect(refused).toBeLessThan(24);
    expect(closed).toBe(refused);
    // The peer may see its close before the device has counted the connection gone.
    await until('the refused connections to be gone', () => link(dev).endpointConnections === 24 - refused);
    // Each refused one was told why: a Terminate (RDMAP, catastrophic) right after the MPA Reply.
    const told = peers.filter((p) => parseFpdus(p.received().subarray(replyLength(p.received()))).some((f) => (f.hdr[1]! & 0x0f) === 7));
    expect(told.length).toBe(refused);
    const held: number[] = [];
    for (let i = 0; i < 24 - refused; i++) held.push((await l.accept(2000)).qpn);
    expect(held.length).toBe(24 - refused);
    // The peer leaves: the memory comes back and a new connection is served.
    for (const p of peers) p.s.destroy();
    await until('the connections to go', () => link(dev).endpointConnections === 0);
    const again = await rawConnect(port);
    cleanup.push(() => void again.s.destroy());
    await until('a new MPA Reply', () => again.received().length >= 20);
    await l.accept(2000);
    expect(link(dev).connectionsRefusedMemory).toBe(refused);
    expect(uncaught.map(String)).toEqual([]);
  }, 60_000);

  it('a device on 8 MiB connecting out 16 times: the connections past memory fail with ERR_NO_MEMORY inside the socket callback that finishes the handshake, nothing thrown out of it', async () => {
    process.on('uncaughtException', onUncaught);
    const { dev } = await smallDevice(8 << 20);
    const P = await openDevice({ transport: 'tcp' });
    cleanup.push(() => P.close());
    const lp = listen(P, { backlog: 64, qpInit: QP_INIT });
    cleanup.push(() => lp.close());
    const results = await Promise.allSettled(Array.from({ length: 16 }, () => connect(dev, P.address, { qpInit: QP_INIT, timeoutMs: 5000 })));
    const ok = results.filter((r) => r.status === 'fulfilled').length;
    const failed = results.filter((r): r is PromiseRejectedResult => r.status === 'rejected');
    // Before: 'device memory exhausted' thrown out of the socket's read callback, once per connection past memory.
    expect(uncaught.map(String)).toEqual([]);
    expect(ok).toBeGreaterThan(0);
    expect(failed.length).toBeGreaterThan(0);
    for (const f of failed) expect((f.reason as { code?: string }).code).toBe('ERR_NO_MEMORY');
    expect(link(dev).connectionsRefusedMemory).toBe(failed.length);
  }, 60_000);
});

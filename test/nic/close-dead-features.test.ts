// dev.close() with features above verbs open (channels, a cm listener) right after its NIC
// thread was ended, or while it hangs. Their close hooks run inside dev.close() and used to
// call the NIC thread synchronously (a region's deregister as a channel is torn down, a
// listener's service off): a thread ended a moment ago (its 'exit' not yet seen, which this
// thread cannot see while it blocks) or one that hangs held such a call for the mailbox's
// deadline, and the first to fail threw out of the close, which then rejected and left the
// device half closed (its CQs open, its waits pending).
import { afterEach, describe, expect, it } from 'vitest';
import { Access, connectChannel, type Device, listen, listenChannels } from '../../src/index.js';
import { hang, nicThreads, openHangable } from './hang.js';

const open: Device[] = [];
afterEach(async () => void (await Promise.all(open.splice(0).map((d) => d.close().catch(() => undefined)))));

/** A device with a channel listener, a cm listener, and a close hook that does what a feature's does. */
async function withFeatures(transport: 'udp' | 'tcp', workers: number): Promise<{ dev: Device; waiting: Promise<unknown> }> {
  const dev = await openHangable({ transport, host: '127.0.0.1', port: 0, workers });
  open.push(dev);
  dev.on('event', () => {});
  listenChannels(dev, { service: 7 });
  const pd = dev.allocPd();
  const cq = dev.createCq({ depth: 8 });
  const qpInit = { sendCq: cq, recvCq: cq, maxSendWr: 4, maxRecvWr: 4, maxSge: 1 };
  listen(dev, { service: 9, pd, qpInit });
  // What a feature's hook does as it lets go (a channel torn down by its listener's close):
  // its regions deregistered, its QP destroyed.
  const mr = pd.regMr(4096, Access.LocalWrite);
  const qp = pd.createQp({ type: 'rc', ...qpInit });
  dev.onClose(() => {
    mr.deregister();
    qp.destroy();
  });
  // A wait the close settles: a close that stops half way leaves it pending.
  const waiting = dev.createCq({ depth: 4 }).wait(20_000).catch((e: unknown) => e);
  return { dev, waiting };
}

describe('dev.close() with features open', () => {
  it.each([
    ['udp', 1],
    ['tcp', 1],
    ['udp', 2],
  ] as const)('%s, workers %d, its NIC thread just ended: resolves at once', { timeout: 20_000 }, async (transport, workers) => {
    const { dev, waiting } = await withFeatures(transport, workers);
    for (const t of nicThreads(dev)) void t.worker.terminate();
    const t0 = performance.now();
    await expect(dev.close()).resolves.toBeUndefined();
    // Generous: before, a hook's call waited out the mailbox's 5 s deadline.
    expect(performance.now() - t0).toBeLessThan(2_000);
    expect(dev.closed).toBe(true);
    expect(await waiting).toMatchObject({ code: 'ERR_CLOSED' });
  });

  it.each([
    ['udp', 1],
    ['tcp', 1],
  ] as const)('%s, workers %d, its NIC thread hung: resolves once the close finds it hung', { timeout: 20_000 }, async (transport, workers) => {
    const { dev, waiting } = await withFeatures(transport, workers);
    const release = await hang(nicThreads(dev)[0]!);
    try {
      const t0 = performance.now();
      await expect(dev.close()).resolves.toBeUndefined();
      // One deadline (5 s) to find it hung, not one per call.
      expect(performance.now() - t0).toBeLessThan(8_000);
      expect(dev.closed).toBe(true);
      expect(await waiting).toMatchObject({ code: 'ERR_CLOSED' });
    } finally {
      release();
    }
  });

  // tcp: a peer's connection is no datagram reaching a thread being ended (docs/nic.md).
  it('tcp: channels accepted and connected, one not taken, the NIC thread just ended: resolves at once', { timeout: 20_000 }, async () => {
    const dev = await openHangable({ transport: 'tcp', host: '127.0.0.1', port: 0, workers: 1 });
    open.push(dev);
    dev.on('event', () => {});
    const peer = await openHangable({ transport: 'tcp', host: '127.0.0.1', port: 0, workers: 0 });
    open.push(peer);
    const l = listenChannels(dev, { service: 7 });
    const a = connectChannel(peer, dev.address, { service: 7 });
    const b = connectChannel(peer, dev.address, { service: 7 });
    const taken = await l.accept(10_000);
    await Promise.all([a, b]);
    const reading = taken.next().catch((e: unknown) => e);
    for (const t of nicThreads(dev)) void t.worker.terminate();
    const t0 = performance.now();
    await expect(dev.close()).resolves.toBeUndefined();
    expect(performance.now() - t0).toBeLessThan(2_000);
    // The channel ends with its device: its iteration settles.
    await reading;
  });
});

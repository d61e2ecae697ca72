// A NIC thread that ends on its own (a crash, a thread killed) is the NIC gone: the device
// raises 'device-fatal' (ibverbs' IBV_EVENT_DEVICE_FATAL) and closes — outstanding work is
// flushed (WrFlushErr), its waits, connects and accepts settle with ERR_CLOSED at once — and the
// application's process goes on. Before, nothing listened to the thread: its error was thrown in
// the application, and every verbs call after it blocked for the mailbox's 5 s deadline; then,
// with a QP, the close stopped at its destroy (a call to the dead thread threw), leaving connects
// and accepts pending and the work unflushed.
import { describe, expect, it, vi } from 'vitest';
import { Access, type DeviceEvent, listen, Opcode, openDevice, WcStatus } from '../../src/index.js';
import { MailboxClient } from '../../src/nic/mailbox.js';
import type { ThreadPort } from '../../src/nic/thread-port.js';

describe('a NIC thread that ends on its own', () => {
  it.each(['udp', 'tcp'] as const)('%s: device-fatal, the device closes, a waiting cq.wait rejects ERR_CLOSED at once', { timeout: 30_000 }, async (transport) => {
    const dev = await openDevice({ transport, host: '127.0.0.1', port: 0, workers: 1 });
    const events: DeviceEvent[] = [];
    dev.on('event', (ev: DeviceEvent) => events.push(ev));
    const pd = dev.allocPd();
    pd.regMr(4096, Access.LocalWrite);
    const cq = dev.createCq({ depth: 8 });
    const waiting = cq.wait(20_000).catch((e: unknown) => e);
    const t0 = performance.now();
    await (dev.nic as unknown as ThreadPort).worker.terminate();
    expect(await waiting).toMatchObject({ code: 'ERR_CLOSED' });
    expect(performance.now() - t0).toBeLessThan(5_000);
    expect(events.map((e) => e.type)).toEqual(['device-fatal']);
    expect(dev.closed).toBe(true);
    expect(() => pd.regMr(4096, Access.LocalWrite)).toThrow(expect.objectContaining({ code: 'ERR_CLOSED' }));
    await dev.close(); // again: resolves
  });
});

describe('a NIC thread that ends on its own, with QPs', () => {
  it.each(['udp', 'tcp'] as const)('%s: outstanding work is flushed (WrFlushErr, pollable), a pending connect and accept reject ERR_CLOSED, the device closes', { timeout: 30_000 }, async (transport) => {
    const dev = await openDevice({ transport, host: '127.0.0.1', port: 0, workers: 1 });
    const peer = await openDevice({ transport, host: '127.0.0.1', port: 0, workers: 0 });
    try {
      const events: DeviceEvent[] = [];
      dev.on('event', (ev: DeviceEvent) => events.push(ev));
      const pd = dev.allocPd();
      const mr = pd.regMr(4096, Access.LocalWrite);
      const cq = dev.createCq({ depth: 32 });
      const init = { sendCq: cq, recvCq: cq, maxSendWr: 8, maxRecvWr: 8, maxSge: 1 };
      // It keeps retrying the Send the peer has no receive for (RNR) for a long time — seldom:
      // a datagram the NIC thread is taking in as it is terminated can abort node itself (a node
      // bug: worker.terminate() during a native receive callback; the NIC's own close never
      // terminates a live thread).
      const qp = pd.createQp({ type: 'rc', ...init, rnrRetry: 1000, rnrTimeoutMs: 3000 });
      const ppd = peer.allocPd();
      const pcq = peer.createCq({ depth: 32 });
      const pqp = ppd.createQp({ type: 'rc', sendCq: pcq, recvCq: pcq, maxSendWr: 8, maxRecvWr: 8, maxSge: 1 });
      await Promise.all([qp.connect({ address: peer.address, qpn: pqp.qpn }), pqp.connect({ address: dev.address, qpn: qp.qpn })]);
      // Receives nobody sends to, and a Send the peer has no receive for (it waits, RNR): all
      // outstanding when the NIC goes.
      qp.postRecv([1, 2, 3].map((wrId) => ({ wrId, sgList: [{ addr: mr.addr, length: 64, lkey: mr.lkey }] })));
      qp.postSend({ wrId: 4, opcode: Opcode.Send, sgList: [{ addr: mr.addr, length: 64, lkey: mr.lkey }] });
      // A connect to the peer's QP that nobody answers (the peer's other QP is never connected
      // back), and an accept nobody dials.
      const q2 = pd.createQp({ type: 'rc', ...init });
      const lone = ppd.createQp({ type: 'rc', sendCq: pcq, recvCq: pcq, maxSendWr: 8, maxRecvWr: 8, maxSge: 1 });
      const connecting = q2.connect({ address: peer.address, qpn: lone.qpn, timeoutMs: 20_000 }).catch((e: unknown) => e);
      const l = listen(dev, { pd, qpInit: init });
      const accepting = l.accept(20_000).catch((e: unknown) => e);
      await new Promise((r) => setTimeout(r, 100));
      const t0 = performance.now();
      await (dev.nic as unknown as ThreadPort).worker.terminate();
      expect(await connecting).toMatchObject({ code: 'ERR_CLOSED' });
      expect(await accepting).toMatchObject({ code: 'ERR_CLOSED' });
      await vi.waitFor(() => expect(dev.closed).toBe(true), { timeout: 5_000 });
      expect(performance.now() - t0).toBeLessThan(5_000);
      expect(events.map((e) => e.type)).toContain('device-fatal');
      const wcs = cq.poll(32);
      expect(wcs.map((w) => [w.wrId, w.status]).sort((x, y) => Number(x[0]) - Number(y[0]))).toEqual([1, 2, 3, 4].map((id) => [id, WcStatus.WrFlushErr]));
      expect(() => cq.poll()).toThrow(expect.objectContaining({ code: 'ERR_CLOSED' }));
      await dev.close(); // again: resolves
    } finally {
      await peer.close();
      await dev.close().catch(() => undefined);
    }
  });
});

/** A NIC-thread device with receive `wrId` posted on a QP, its NIC thread being ended (not awaited). */
async function receiveThenEndNic(wrId: number) {
  const dev = await openDevice({ transport: 'udp', host: '127.0.0.1', port: 0, workers: 1 });
  dev.on('event', () => {});
  const pd = dev.allocPd();
  const cq = dev.createCq({ depth: 8 });
  const qp = pd.createQp({ type: 'rc', sendCq: cq, recvCq: cq, maxSendWr: 8, maxRecvWr: 8, maxSge: 1 });
  const mr = pd.regMr(4096, Access.LocalWrite);
  qp.postRecv({ wrId, sgList: [{ addr: mr.addr, length: 64, lkey: mr.lkey }] });
  void (dev.nic as unknown as ThreadPort).worker.terminate();
  return { dev, pd, cq, qp };
}

describe('a NIC thread that ends while a verbs call blocks on it', () => {
  // This thread cannot see the thread's 'exit' while it blocks in a mailbox call: the call fails
  // at its deadline, and then the device fails as for a crash. Before, every later call (the
  // close's destroys and stop) waited out the same deadline again and dev.close() rejected with
  // ERR_TIMEOUT, leaving the work unflushed.
  it('the call fails, and dev.close() resolves and flushes the outstanding work', { timeout: 30_000 }, async () => {
    const { dev, pd, cq } = await receiveThenEndNic(1);
    let code: unknown;
    try {
      for (let i = 0; i < 10; i++) pd.regMr(4096, Access.LocalWrite);
    } catch (e) {
      code = (e as { code?: unknown }).code;
    }
    expect(['ERR_TIMEOUT', 'ERR_CLOSED']).toContain(code);
    await expect(dev.close()).resolves.toBeUndefined();
    expect(dev.closed).toBe(true);
    // The receive it held is flushed, as for any NIC gone.
    expect(cq.poll(8).map((w) => [w.wrId, w.status])).toEqual([[1, WcStatus.WrFlushErr]]);
  });
});

describe('a QP destroyed right after a call found the NIC thread gone', () => {
  it('its outstanding work is flushed into its CQ before it goes', { timeout: 30_000 }, async () => {
    const { dev, pd, cq, qp } = await receiveThenEndNic(7);
    expect(() => pd.regMr(4096, Access.LocalWrite)).toThrow(expect.objectContaining({ code: 'ERR_TIMEOUT' }));
    qp.destroy();
    expect(cq.poll(8).map((w) => [w.wrId, w.status])).toEqual([[7, WcStatus.WrFlushErr]]);
    await dev.close();
  });
});

describe('allocations through a NIC thread that is gone', () => {
  // The application's allocations in device memory (features above verbs, a multi-thread
  // deregister's fence word) are calls to the NIC thread too: one nobody answers fails the device
  // as a verbs call does, so later calls fail at once and the work outstanding is flushed.
  it('an allocation that finds the NIC thread gone fails, and the device with it', { timeout: 30_000 }, async () => {
    const { dev, cq } = await receiveThenEndNic(3);
    const port = dev.nic as unknown as ThreadPort;
    expect(() => port.dataPlane.alloc(64, 8)).toThrow(expect.objectContaining({ code: expect.stringMatching(/^ERR_(TIMEOUT|CLOSED)$/) }));
    expect(port.callable).toBe(false);
    expect(cq.poll(8).map((w) => [w.wrId, w.status])).toEqual([[3, WcStatus.WrFlushErr]]);
    await dev.close();
  });

  it('workers: 2, the first thread (whose memory the others allocate from) ended: their allocations fail at once', { timeout: 30_000 }, async () => {
    const dev = await openDevice({ transport: 'udp', host: '127.0.0.1', port: 0, workers: 2 });
    dev.on('event', () => {});
    const [first] = (dev.nic as unknown as { threads: ThreadPort[] }).threads;
    const exited = new Promise((r) => first!.worker.once('exit', r));
    await first!.worker.terminate();
    await exited;
    // The second thread's allocation mailbox, as it would call it: refused, not waited out.
    const client = new MailboxClient(first!.arenas[0]!);
    expect(() => client.call('memStats', {}, 2000)).toThrow(expect.objectContaining({ code: 'ERR_CLOSED' }));
    await dev.close();
  });
});

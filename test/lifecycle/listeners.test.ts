// The lifecycle every listener shares (src/verbs/listener.ts: cm's listen() and listenChannels())
// on every transport: close once (a second close does no work: it must not unregister a newer
// listener's service), a pending accept() and a pending for-await settle at once when the
// listener or its device closes, accept() after either rejects with ERR_CLOSED; then what each
// holds that was never accepted: a connected QP is destroyed and its peer learns it, a channel
// is closed and its peer's iteration ends, a channel still waiting for its peer's HELLO ends.
import { afterEach, describe, expect, it } from 'vitest';
import {
  Access, channelStats, connect, connectChannel, listen, listenChannels, Opcode, openDevice, WcStatus, type Device,
} from '../../src/index.js';
import { within } from './within.js';

const devs: Device[] = [];
afterEach(async () => {
  for (const d of devs.splice(0)) await d.close();
});

type Transport = 'udp' | 'tcp' | 'inproc';

async function dev(t: Transport): Promise<Device> {
  const d = await openDevice(t === 'inproc' ? { transport: t } : { transport: t, host: '127.0.0.1', port: 0 });
  devs.push(d);
  return d;
}

/** What the tests use of either listener. */
type AnyListener = AsyncIterable<unknown> & { accept(timeoutMs?: number): Promise<unknown>; close(): void };

/** Each listener with a connect that its accept() answers, and how to let go of either end. */
const kinds = {
  cm: {
    listen: (d: Device, service: number): AnyListener => listen(d, { service }),
    connect: async (d: Device, to: Device, service: number) => {
      const qp = await connect(d, to.address, { service, timeoutMs: 5000 });
      return () => qp.destroy();
    },
    drop: (x: { destroy(): void }) => x.destroy(),
  },
  channel: {
    listen: (d: Device, service: number): AnyListener => listenChannels(d, { service }),
    connect: async (d: Device, to: Device, service: number) => {
      const ch = await connectChannel(d, to.address, { service, connectTimeoutMs: 5000 });
      return () => void ch.close();
    },
    drop: (x: { close(): Promise<void> }) => void x.close(),
  },
} as const;

describe.each(['udp', 'tcp', 'inproc'] as const)('listeners over %s', (t) => {
  describe.each(['cm', 'channel'] as const)('%s listener', (kind) => {
    const k = kinds[kind];

    it('close twice: the second does nothing (a newer listener on the service keeps it)', async () => {
      const [a, b] = [await dev(t), await dev(t)];
      const l1 = k.listen(b, 5);
      expect(l1.close()).toBeUndefined();
      const l2 = k.listen(b, 5);
      expect(l1.close()).toBeUndefined();
      const [drop, got] = await Promise.all([k.connect(a, b, 5), l2.accept(5000)]);
      drop();
      (k.drop as (x: unknown) => void)(got);
      l2.close();
    });

    it('close while accept() and for-await wait: both settle at once, accept with ERR_CLOSED; accept after close rejects at once', async () => {
      const b = await dev(t);
      const l = k.listen(b, 6);
      const pending = l.accept(60_000);
      let iterated = 0;
      const loop = (async () => {
        for await (const _ of l) iterated++;
      })();
      await new Promise((r) => setTimeout(r, 10));
      l.close();
      await expect(within(pending, 200)).rejects.toMatchObject({ code: 'ERR_CLOSED' });
      await within(loop, 200);
      expect(iterated).toBe(0);
      await expect(within(l.accept(60_000), 50)).rejects.toMatchObject({ code: 'ERR_CLOSED' });
    });

    it('the device closing closes the listener: waits settle, accept after rejects with ERR_CLOSED', async () => {
      const b = await dev(t);
      const l = k.listen(b, 7);
      const pending = l.accept();
      const loop = (async () => {
        for await (const _ of l) void _;
      })();
      await b.close();
      await expect(within(pending, 200)).rejects.toMatchObject({ code: 'ERR_CLOSED' });
      await within(loop, 200);
      await expect(within(l.accept(), 50)).rejects.toMatchObject({ code: 'ERR_CLOSED' });
      expect(l.close()).toBeUndefined();
    });
  });

  it('cm: a QP connected and never accepted is destroyed at close, and the peer learns it', async () => {
    const [a, b] = [await dev(t), await dev(t)];
    const bpd = b.allocPd();
    const l = listen(b, { service: 8, pd: bpd });
    const pd = a.allocPd();
    const cq = a.createCq({ depth: 64 });
    const mr = pd.regMr(64, Access.LocalWrite);
    const qp = await connect(a, b.address, { service: 8, pd, qpInit: { sendCq: cq, recvCq: cq, timeoutMs: 1000 }, timeoutMs: 5000 });
    // Connected on this side; the listener holds its QP until an accept() that never comes.
    await new Promise((r) => setTimeout(r, 50));
    expect(bpd.qps.size).toBe(1);
    l.close();
    expect(bpd.qps.size, 'the unaccepted QP is destroyed').toBe(0);
    // A Send to it no longer succeeds: the peer learns (at once, or when its retries run out).
    qp.postSend({ wrId: 1n, opcode: Opcode.Send, sgList: [{ addr: mr.addr, length: 8, lkey: mr.lkey }] });
    const deadline = Date.now() + 10_000;
    let status: number | undefined;
    while (status === undefined && Date.now() < deadline) {
      await cq.wait(deadline - Date.now());
      status = cq.poll(1)[0]?.status;
    }
    expect(status).toBeDefined();
    expect(status).not.toBe(WcStatus.Success);
  });

  it('channel: a channel connected and never accepted is closed at close, and the peer learns it', async () => {
    const [a, b] = [await dev(t), await dev(t)];
    const l = listenChannels(b, { service: 8 });
    const c = await connectChannel(a, b.address, { service: 8, connectTimeoutMs: 5000 });
    // Connected on this side; the listener holds its end until an accept() that never comes.
    await new Promise((r) => setTimeout(r, 50));
    l.close();
    // The peer's iteration ends (or fails): it is not left waiting for messages that cannot come.
    await within(c.next().catch(() => undefined), 5000);
    await expect(within(c.send('x'), 5000)).rejects.toMatchObject({ code: expect.stringMatching(/^ERR_/) });
  });

  it('channel: one whose QP is connected but whose peer never sent HELLO is ended at close', async () => {
    const [a, b] = [await dev(t), await dev(t)];
    const l = listenChannels(b, { service: 9 });
    // A client that connects a bare QP through cm and never says HELLO; its receives take ours.
    const pd = a.allocPd();
    const cq = a.createCq({ depth: 64 });
    const mr = pd.regMr(1 << 16, Access.LocalWrite);
    const qp = await connect(a, b.address, {
      service: 9, pd, qpInit: { sendCq: cq, recvCq: cq },
      setup: (q) => {
        for (let i = 0; i < 8; i++) q.postRecv({ wrId: BigInt(i), sgList: [{ addr: mr.addr + i * 8192, length: 8192, lkey: mr.lkey }] });
      },
    });
    const deadline = Date.now() + 2000;
    while (channelStats(b).channels === 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 5));
    expect(channelStats(b).channels, 'the listener made a channel for the QP').toBe(1);
    l.close();
    const ended = Date.now() + 1000;
    while (channelStats(b).channels > 0 && Date.now() < ended) await new Promise((r) => setTimeout(r, 5));
    expect(channelStats(b).channels, 'the half-open channel is ended with its listener').toBe(0);
    qp.destroy();
  });
});

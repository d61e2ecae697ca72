// Strangers that completed the cookie handshake (they receive at their real source address, so
// the handshake admits them) fill a udp device's context table and keep their contexts busy
// with valid traffic — ACKs inside the context, and DATA carrying a Send to a QP number the
// device does not have — at five datagrams a second each. No QP of the device is connected to
// any of them. Reclaim for a newcomer took only contexts quiet for 1 s, so the crowd held every
// slot for good: a real device connecting a QP afterwards was refused (contextLimit) at each
// handshake echo and its first Send never completed. Now a context no rc QP of ours is
// connected through, past unownedContextMs, is taken for a newcomer whatever its traffic
// (unownedReclaimed); the taken stranger's next datagram draws the owed RESET. The connected
// peers' contexts are never taken: idle past the 1 s guard and past the grace while strangers
// keep asking for slots, their Sends still go through the contexts they had (no RESET ever
// reached them).
import { afterEach, describe, expect, it } from 'vitest';
import { type Device, QpState } from '../../src/index.js';
import { Qn, RdmapOpcode } from '../../src/wire/rdmap.js';
import { UdpType } from '../../src/wire/udp.js';
import { ctlFrame } from '../../src/rdmap/segmenter.js';
import { frameBytes } from '../../src/transport/udp/frame-codec.js';
import { RawPeer, seal } from '../transport/udp/raw-peer.js';
import { side } from '../verbs/helpers.js';

const devs: Device[] = [];
const peers: RawPeer[] = [];
afterEach(async () => {
  for (const p of peers.splice(0)) p.close();
  for (const d of devs.splice(0)) await d.close();
});

const link = (d: Device): Record<string, number> => d.stats().link as Record<string, number>;
const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/** A receive whose rejection at the device's close (a failing run) is not an unhandled error. */
const quiet = <T>(p: Promise<T>): Promise<T> => {
  p.catch(() => {});
  return p;
};

/** A Send (ssn `ssn`, never 1: a flow's first message draws a Terminate) to QPN 0xdead, which the device does not have. */
const strayedSend = (ssn: number): Uint8Array => frameBytes(ctlFrame({
  srcQpn: 0x77, dstQpn: 0xdead, ssn, opcode: RdmapOpcode.Send, qn: Qn.Send, msn: ssn, bodyLen: 16, body: () => 16,
}));

/**
 * A stranger on `host`: `admitted` is called once it completes the handshake (it keeps trying
 * while refused, every 250 ms, until its socket closes). Resolves with it if that took at most `ms`.
 */
async function stranger(to: { host: string; port: number }, host: string, ctx: number, ms: number, admitted: (p: RawPeer) => void): Promise<RawPeer | undefined> {
  const p = await RawPeer.open(ctx, host);
  peers.push(p);
  const done = p.handshake(to, new Uint8Array(8)).then(() => {
    admitted(p);
    return true;
  }, () => false);
  return (await Promise.race([done, sleep(ms).then(() => false)])) ? p : undefined;
}

/**
 * Device b (maxContexts `slots`, the grace 400 ms) with a QP connected to one on device a, a
 * Send through it seen, and a second QP of b's left for a newcomer; `to` is b's address.
 */
async function connectedPeer(slots: number) {
  const b = await side({ device: { transport: 'udp', host: '127.0.0.1', integrity: 'crc32c', limits: { maxContexts: slots, maxContextsPerHost: slots, unownedContextMs: 400 } } });
  const a = await side({ device: { transport: 'udp', host: '127.0.0.1', integrity: 'crc32c' } });
  devs.push(b.dev, a.dev);
  const bq2 = b.pd.createQp({ type: 'rc', sendCq: b.cq, recvCq: b.cq, maxSendWr: 16, maxRecvWr: 16, maxSge: 1 });
  await Promise.all([a.qp.connect({ address: b.dev.address, qpn: b.qp.qpn }), b.qp.connect({ address: a.dev.address, qpn: a.qp.qpn })]);
  const to = { host: '127.0.0.1', port: Number(b.dev.address.port) };
  const first = b.qp.recv();
  await a.qp.send({ imm: 1 });
  expect((await first).imm).toBe(1);
  return { a, b, bq2, to };
}

describe('udp: strangers that completed the handshake and keep their contexts busy', () => {
  it('a newcomer device still gets a context and its QP works; the connected peers\' contexts are never taken', async () => {
    const { a, b, bq2, to } = await connectedPeer(4);

    // Every stranger admitted sends every 200 ms: even ones ACKs inside the context (both ids,
    // an acceptable ack), odd ones DATA at the next PSN carrying a Send to QPN 0xdead.
    const crowd: { p: RawPeer; n: number }[] = [];
    const join = (p: RawPeer): void => void crowd.push({ p, n: 0 });
    const ping = setInterval(() => {
      for (const [i, s] of crowd.entries()) {
        const p = s.p;
        s.n++;
        if (i % 2 === 0) p.send(to, seal({ type: UdpType.Ack, srcCtx: p.ctx, dstCtx: p.peerCtx, psn: 1, ackPsn: 0 }));
        else p.send(to, seal({ type: UdpType.Data, srcCtx: p.ctx, dstCtx: p.peerCtx, psn: s.n, ackPsn: 0, dstQpn: 0xdead, srcQpn: 0x77 }, strayedSend(s.n + 1)));
      }
    }, 200);
    const dropsBefore = b.dev.stats().drops as number;
    try {
      for (let i = 0; i < 3; i++) {
        expect(await stranger(to, '127.0.0.2', 0x5eed0300 + i, 2000, join)).toBeDefined();
      }
      expect(link(b.dev).contexts).toBe(4);
      // The strangers age past the grace (400 ms), never quiet for the 1 s guard.
      await sleep(600);

      // A real device connects a QP to b's second QP and sends: it needs a context.
      const c = await side({ device: { transport: 'udp', host: '127.0.0.1', integrity: 'crc32c' } });
      devs.push(c.dev);
      const t0 = performance.now();
      await Promise.all([c.qp.connect({ address: b.dev.address, qpn: bq2.qpn }), bq2.connect({ address: c.dev.address, qpn: c.qp.qpn })]);
      const got = quiet(bq2.recv());
      const sent = await Promise.race([
        c.qp.send({ imm: 3 }).then(() => 'Success', (e: { status?: number }) => `status ${e.status}`),
        sleep(3000).then(() => 'no completion in 3 s'),
      ]);
      const st1 = link(b.dev);
      // Before: b's connect to c rejected at once ('no answer … the link's retries ran out': b
      // had no context to give c, every slot a stranger's), nothing reclaimed.
      expect({ sent, reclaimed: st1.contextsReclaimed, unowned: st1.unownedReclaimed }).toEqual({ sent: 'Success', reclaimed: 1, unowned: 1 });
      expect((await got).imm).toBe(3);
      const connectMs = performance.now() - t0;
      expect(connectMs).toBeLessThan(2000);
      // The stranger taken hears the RESET it is owed at its next datagram.
      await sleep(300);
      expect(crowd.filter((s) => s.p.heard.some((h) => h.hdr.type === UdpType.Reset && h.hdr.dstCtx === s.p.ctx)).length).toBe(1);

      // a and c idle past the 1 s guard and past the grace while strangers from another host
      // keep asking for slots; only strangers' contexts may go.
      // (Each that is admitted, however late, joins the crowd's traffic.)
      await Promise.all(Array.from({ length: 4 }, (_, i) => stranger(to, '127.0.0.3', 0x5eed0400 + i, 900, join)));
      await sleep(400);
      await Promise.all(Array.from({ length: 2 }, (_, i) => stranger(to, '127.0.0.3', 0x5eed0500 + i, 900, join)));

      const gotA = quiet(b.qp.recv());
      const gotC = quiet(bq2.recv());
      const both = await Promise.all([a.qp.send({ imm: 2 }), c.qp.send({ imm: 4 })].map((s) => s.then(() => 'Success', (e: { status?: number }) => `status ${e.status}`)));
      expect(both).toEqual(['Success', 'Success']);
      expect([(await gotA).imm, (await gotC).imm]).toEqual([2, 4]);
      const st = link(b.dev);
      // Every context taken was a stranger's, taken while it kept sending.
      expect(st.contextsReclaimed).toBe(st.unownedReclaimed);
      expect(st.unownedReclaimed).toBeGreaterThanOrEqual(3);
      // a's and c's contexts at b are the ones they had: b never dropped them, so no RESET came back.
      expect([link(a.dev).resetsReceived, link(c.dev).resetsReceived, link(a.dev).peerRestarts, link(c.dev).peerRestarts]).toEqual([0, 0, 0, 0]);
      expect([a.qp.state, b.qp.state, c.qp.state, bq2.state]).toEqual([QpState.Rts, QpState.Rts, QpState.Rts, QpState.Rts]);
      // The DATA into QPN 0xdead: dropped by the engine (one counter, no answer: not a flow's first message).
      const drops = (b.dev.stats().drops as number) - dropsBefore;
      expect(drops).toBeGreaterThan(0);
      expect(b.dev.stats().terminatesSent).toBe(0);
      console.log(`udp-unowned-crowd: newcomer's first Send ${connectMs.toFixed(0)} ms; reclaimed ${st.contextsReclaimed} (unowned ${st.unownedReclaimed}), contextLimit ${st.contextLimit}; engine drops ${drops}`);
    } finally {
      clearInterval(ping);
    }
  }, 20_000);

  it('a stranger that never acks what it drew from the device (a Terminate), holding a zero window, is taken too: the newcomer\'s QP works', async () => {
    const { a, b, bq2, to } = await connectedPeer(2);
    const p = await stranger(to, '127.0.0.2', 0x5eed0600, 2000, () => {});
    expect(p).toBeDefined();
    // A flow's first Send into QPN 0xdead: b's engine answers with a Terminate (DATA to the stranger).
    p!.send(to, seal({ type: UdpType.Data, srcCtx: p!.ctx, dstCtx: p!.peerCtx, psn: 1, ackPsn: 0, dstQpn: 0xdead, srcQpn: 0x77 }, strayedSend(1)));
    await p!.waitFor((h) => h.hdr.type === UdpType.Data, 2000);
    // Never acked: ACKs that ack nothing, window 0, every 200 ms (the retry count restarts at each).
    const ping = setInterval(() => p!.send(to, seal({ type: UdpType.Ack, srcCtx: p!.ctx, dstCtx: p!.peerCtx, psn: 2, ackPsn: 0, window: 0 })), 200);
    try {
      await sleep(500);
      const c = await side({ device: { transport: 'udp', host: '127.0.0.1', integrity: 'crc32c' } });
      devs.push(c.dev);
      const got = quiet(bq2.recv());
      const sent = await Promise.race([
        Promise.all([c.qp.connect({ address: b.dev.address, qpn: bq2.qpn }), bq2.connect({ address: c.dev.address, qpn: c.qp.qpn })])
          .then(() => c.qp.send({ imm: 3 })).then(() => 'Success', (e: { status?: number; message?: string }) => `failed: ${e.status ?? e.message}`),
        sleep(3000).then(() => 'no completion in 3 s'),
      ]);
      const st = link(b.dev);
      // Before (only quiescent contexts taken): b's connect to c failed, the stranger kept its slot.
      expect({ sent, reclaimed: st.contextsReclaimed, unowned: st.unownedReclaimed, terminates: b.dev.stats().terminatesSent }).toEqual({ sent: 'Success', reclaimed: 1, unowned: 1, terminates: 1 });
      expect((await got).imm).toBe(3);
      await sleep(250);
      expect(p!.heard.some((h) => h.hdr.type === UdpType.Reset && h.hdr.dstCtx === p!.ctx)).toBe(true);
      const gotA = quiet(b.qp.recv());
      await a.qp.send({ imm: 2 });
      expect((await gotA).imm).toBe(2);
      expect(link(a.dev).resetsReceived).toBe(0);
    } finally {
      clearInterval(ping);
    }
  }, 20_000);
});


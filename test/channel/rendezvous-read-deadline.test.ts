// A rendezvous READ that never completes. The receiver of a message above the largest slot
// pulls it with one RDMA READ of the sender's buffer; until the read completes its iteration
// waits on that message, and the sink (the message's size of device memory) is held against the
// peer's and the device's rendezvous budgets. The channel bounded none of it: the DONE deadline
// (rendezvousTimeoutMs) is the sender's. Below the channel, the verbs watchdog fails a request
// only while the peer is silent (any frame from it is a sign of life, src/rdmap/requester.ts),
// so a peer that leaves the read unanswered and goes on talking — a hostile peer, a stack that
// lost the request — held the receiver for ever: the model below (a responder that answers
// everything but that read) still had it waiting after 10 virtual minutes, sink held.
//
// The receiver now fails the channel ERR_TIMEOUT once no read of it has completed for
// rendezvousReadTimeoutMs (default 60 s) while one is in flight, releases the sink and its
// budget, tells the peer (abort) and counts it (rendezvousReadTimeouts).
//
// Over real sockets (two tcp devices through the tcp campaign's MPA-aware proxy on 127.0.0.1,
// dropping the FPDUs of the read's answer) a sabre peer cannot go on talking past the lost
// answer — it numbers its messages and the receiver waits for the missing one — so there the
// watchdog ended it after the QP's 8 s (ERR_UNREACHABLE, "rendezvous read failed:
// RetryExcErr"); the channel's own deadline now ends it first, with its own code and count.
import { describe, expect, it } from 'vitest';
import { channelStats, connectChannel, listenChannels, openDevice, type Channel, type Device } from '../../src/index.js';
import { RdmapOpcode } from '../../src/wire/rdmap.js';
import { startTcpProxy } from '../fuzz/tcp-proxy.js';
import { within } from '../lifecycle/within.js';
import { until } from './raw.js';
import { pattern, SimPair, type SimEnd } from './sim.js';

/**
 * An FPDU (MPA length, then the DDP and RDMAP control bytes) of the answer to a read: a tagged
 * Read Response segment, or the ReadComplete that ends a sabre peer's answer (docs/wire.md).
 */
const isReadAnswer = (f: Uint8Array): boolean => f.length > 4 && (((f[2]! & 0x80) !== 0 && (f[3]! & 0x0f) === RdmapOpcode.ReadResponse) || (f[3]! & 0x0f) === RdmapOpcode.ReadComplete);

function released(e: SimEnd): void {
  expect(e.torn, `${e.name} torn down`).toBe(true);
  expect(e.mem.used, `${e.name} bytes still registered`).toBe(0);
  expect(e.mem.regs).toBe(e.mem.deregs);
}

describe('a rendezvous read the peer never answers while it goes on talking (model)', () => {
  it('the receiver fails timeout after rendezvousReadTimeoutMs, releases the sink, and the sender is told', () => {
    const O = { rendezvousTimeoutMs: 0, shrinkAfterMs: 0 };
    const p = new SimPair({ a: O, b: { ...O, rendezvousReadTimeoutMs: 5000 }, filter: (i) => (i.from === 'b' && i.w.kind === 'read' ? 'hold' : 'deliver') });
    p.run(p.now + 1);
    p.send(p.a, pattern(100_000, 1));
    // The peer keeps talking: a small message a second, each taken, for ten minutes.
    let t = 0;
    for (; t < 600 && !p.b.failed; t++) {
      p.send(p.a, pattern(10, t));
      p.advance(1000);
    }
    expect(p.b.failed?.kind).toBe('timeout');
    expect(p.b.failed?.message).toMatch(/rendezvous read/);
    expect(t).toBeLessThanOrEqual(7);
    expect(p.b.core.stats().rendezvousReadTimeouts).toBe(1);
    released(p.b);
    p.run(p.now + 1000);
    expect(p.a.failed?.kind).toBe('aborted');
    released(p.a);
  });
});

describe('reads that progress are not cut short (model)', () => {
  it('the deadline counts from the last read that completed: two reads of 4 s and 8 s under a 5 s deadline both land', () => {
    let n = 0;
    const p = new SimPair({
      a: { rendezvousTimeoutMs: 0 }, b: { rendezvousReadTimeoutMs: 5000, maxReads: 2 },
      filter: (i) => (i.from === 'b' && i.w.kind === 'read' ? { delayMs: ++n === 1 ? 4000 : 8000 } : 'deliver'),
    });
    p.run(p.now + 1);
    // A first message and its CREDIT open the mailbox past the HELLO's two credits: both OFFERs go at once.
    p.send(p.a, pattern(10, 0));
    p.run(p.now + 100);
    p.send(p.a, pattern(100_000, 1));
    p.send(p.a, pattern(100_000, 2));
    p.run(p.now + 20_000);
    expect(n).toBe(2);
    expect(p.b.failed, JSON.stringify([p.b.failed, p.b.events])).toBeUndefined();
    expect(p.b.received.map((m) => (m as Uint8Array).length)).toEqual([10, 100_000, 100_000]);
    expect(p.b.core.stats().rendezvousReadTimeouts).toBe(0);
  });
});

describe('a rendezvous read whose answer never comes (tcp, real sockets)', () => {
  it('the receiving channel fails ERR_TIMEOUT after rendezvousReadTimeoutMs, releases the sink and its budget, and counts it', async () => {
    const devs: Device[] = [];
    const b = await openDevice({ transport: 'tcp', host: '127.0.0.1', port: 0 });
    devs.push(b);
    const a = await openDevice({ transport: 'tcp', host: '127.0.0.1', port: 0 });
    devs.push(a);
    let dropped = 0;
    const proxy = await startTcpProxy({
      target: { host: '127.0.0.1', port: b.address.port as number }, seed: 7, modeFor: () => 'mutate',
      mutate: (f) => {
        if (!isReadAnswer(f)) return [f];
        dropped++;
        return [];
      },
    });
    const l = listenChannels(b, { service: 61, rendezvousReadTimeoutMs: 1000, shrinkAfterMs: 0 });
    try {
      // The sender waits for its DONE for ever (0): only the receiver's own deadline can end this.
      const c = await connectChannel(a, proxy.address, { service: 61, rendezvousTimeoutMs: 0 });
      const s: Channel = await l.accept(5000);
      const small = pattern(100, 1);
      await c.send(small);
      const sent = c.send(pattern(1 << 20, 2));
      sent.catch(() => {});
      const it = s[Symbol.asyncIterator]();
      expect((await it.next()).value).toEqual(small);
      // The read is under way and stuck: its sink is held against the budgets.
      await until(() => dropped > 0 && channelStats(b).rendezvousHeldBytes === 1 << 20, 5000);
      // The sender keeps talking (a message every 250 ms, inside the window): the peer is alive.
      let talk = true;
      void (async () => {
        for (let i = 0; talk && i < 50; i++) {
          await new Promise((r) => setTimeout(r, 250));
          if (talk) await c.send(pattern(10, 3)).catch(() => (talk = false));
        }
      })();
      const out = await within(it.next().then(() => 'delivered', (e: { code?: string; message?: string }) => `${e.code} ${e.message}`), 12_000).catch((e: Error) => e.message);
      talk = false;
      expect(out).toMatch(/^ERR_TIMEOUT /);
      expect(s.stats().state).toBe('failed');
      expect(channelStats(b)).toMatchObject({ rendezvousReadTimeouts: 1, rendezvousHeldBytes: 0, channels: 0, registeredBytes: 0 });
      // The sender is told (the abort travels the direction that still flows).
      await expect(within(sent, 5000)).rejects.toMatchObject({ code: 'ERR_CLOSED' });
    } finally {
      l.close();
      await proxy.close();
      for (const d of devs) await d.close();
    }
  }, 30_000);
});

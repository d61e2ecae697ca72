// A channel end's send queue holds what this end allows itself in flight, never what its peer
// grants. The sender's QP was sized from its OWN ladder (3 × its largest slot count + …: 112
// work requests by default) while it posted one data write per slot credit of the PEER's (up to
// 256 per epoch): between two honest ends — a receiver with one phase of 256 slots of 256 B and
// window 512, a sender with highWaterMark 256 — the 113th post threw "send queue full" and the
// channel failed ERR_CLOSED ("posting failed"), rejecting every send. Both checks below failed
// before the fix: the real devices rejected all 250 sends; the model threw "send queue full".
// Now a write past the end's own cap (dataWrCap) waits as one without a slot credit does, and
// the queue is sized for that cap plus the control writes (src/channel/hub.ts).
import { afterEach, describe, expect, it } from 'vitest';
import { type Channel, connectChannel, type Device, listenChannels, openDevice } from '../../src/index.js';
import { dataWrCap } from '../../src/channel/outbound.js';
import { resolveOptions } from '../../src/channel/options.js';
import { pattern, SimPair } from './sim.js';

const N = 250;
const SLOT = 256;

const devs: Device[] = [];
afterEach(async () => {
  for (const d of devs.splice(0)) await d.close();
});

const same = (a: Uint8Array, b: Uint8Array): boolean => Buffer.from(a).equals(Buffer.from(b));

for (const transport of ['udp', 'tcp'] as const) {
  for (const workers of [0, undefined]) {
    describe(`a receiver granting 256 slots over ${transport} (workers ${workers ?? 'default'})`, () => {
      it(`${N} slot-sized sends from a sender with highWaterMark 256 all resolve and arrive in order`, async () => {
        const a = await openDevice({ transport, host: '127.0.0.1', port: 0, ...(workers === undefined ? {} : { workers }) });
        const b = await openDevice({ transport, host: '127.0.0.1', port: 0, ...(workers === undefined ? {} : { workers }) });
        devs.push(a, b);
        const l = listenChannels(b, { service: 41, ladder: [{ slotSize: SLOT, slots: 256 }], window: 512 });
        const acc = l[Symbol.asyncIterator]().next();
        const c = await connectChannel(a, b.address, { service: 41, highWaterMark: 256 });
        const s = (await acc).value as Channel;
        // Unlock all of phase 0's credits (an idle end grants a few until its first message).
        await c.send(pattern(SLOT, 0));
        expect(await s[Symbol.asyncIterator]().next()).toMatchObject({ done: false });
        // Slot-sized messages (no two pack into one slot), each sent in its own task.
        const msgs = Array.from({ length: N }, (_, i) => pattern(SLOT, i + 1));
        const sends: Promise<void>[] = [];
        for (const m of msgs) {
          sends.push(c.send(m));
          await Promise.resolve();
        }
        // All fit the receiver's 256 slots: each resolves once placed, none waits for a read.
        const results = await Promise.allSettled(sends);
        const rejected = results.filter((r) => r.status === 'rejected') as PromiseRejectedResult[];
        expect(rejected.map((r) => `${r.reason?.code} ${r.reason?.message}`).slice(0, 1)).toEqual([]);
        const got: Uint8Array[] = [];
        const it = s[Symbol.asyncIterator]();
        for (let i = 0; i < N; i++) got.push((await it.next()).value as Uint8Array);
        expect(got.every((g, i) => same(g, msgs[i]!))).toBe(true);
        expect(c.stats().state).toBe('open');
        await c.close();
        l.close();
      });
    });
  }
}

describe('the sender\'s data writes in flight (model)', () => {
  it('stay within its own cap when the peer grants more slots than it: the rest wait for completions, all arrive', () => {
    const p = new SimPair({ b: { ladder: [{ slotSize: SLOT, slots: 256 }], window: 512 } });
    p.run(p.now + 1);
    // The model queues past highWaterMark (it drives the core, not the shell): only the core's
    // own cap holds the posts back. The send queue check in the model throws past its depth.
    let peak = 0;
    const watch = (): boolean => {
      peak = Math.max(peak, p.a.core.stats().inFlight);
      return false;
    };
    // Bounded: 5 rounds of N sends, the peer's slots (256) well above the cap (64 by default).
    for (let round = 0; round < 5; round++) {
      for (let i = 0; i < N; i++) p.send(p.a, pattern(SLOT, round * N + i));
      watch();
      p.run(p.now + 1000, watch);
    }
    expect(p.a.failed).toBeUndefined();
    expect(p.b.received.length).toBe(5 * N);
    expect(p.a.placed.size).toBe(5 * N);
    const cap = dataWrCap(resolveOptions({}));
    // The cap bound: never more writes outstanding than it, though the peer's credits allowed more.
    expect(peak).toBe(cap);
    expect(p.a.sqPeak).toBeLessThanOrEqual(p.a.sqDepth);
  });
});

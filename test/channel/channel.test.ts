// Channels over real devices on every transport (inproc; udp and tcp on 127.0.0.1): every size
// across the ladder's thresholds, 64 KiB and 16 MiB, both directions at once, in order and
// intact; values through msgpack; enlargement and shrink while messages are in flight; close;
// the device-side totals; one PD per channel; memory back to zero.
import { afterEach, describe, expect, it, vi } from 'vitest';
import {
  channelStats, connectChannel, listenChannels, openDevice, SabreError, type Channel, type Device,
} from '../../src/index.js';
import { pattern } from './sim.js';

const devs: Device[] = [];
afterEach(async () => {
  for (const d of devs.splice(0)) await d.close();
});

async function dev(transport: 'inproc' | 'udp' | 'tcp'): Promise<Device> {
  const d = await openDevice(transport === 'inproc' ? { transport } : { transport, host: '127.0.0.1', port: 0 });
  devs.push(d);
  return d;
}

async function pairOf(transport: 'inproc' | 'udp' | 'tcp', o: Parameters<typeof connectChannel>[2] = {}): Promise<{ a: Device; b: Device; c: Channel; s: Channel; close: () => void }> {
  const a = await dev(transport);
  const b = await dev(transport);
  const l = listenChannels(b, { ...o, service: 9 });
  const [c, s] = await Promise.all([connectChannel(a, b.address, { ...o, service: 9 }), l.accept(10_000)]);
  return { a, b, c, s, close: () => l.close() };
}

/** Take n messages from a channel. */
async function take(ch: Channel, n: number): Promise<unknown[]> {
  const out: unknown[] = [];
  if (n === 0) return out;
  for await (const m of ch) {
    out.push(m);
    if (out.length === n) break;
  }
  return out;
}

const SIZES = [0, 1, 255, 256, 257, 4095, 4096, 4097, 32767, 32768, 32769, 65536, 16 * 1024 * 1024];

function same(got: unknown, want: Uint8Array, what: string): void {
  expect(got, what).toBeInstanceOf(Uint8Array);
  const g = got as Uint8Array;
  expect(g.length, what).toBe(want.length);
  expect(Buffer.from(g.buffer, g.byteOffset, g.length).equals(Buffer.from(want)), `${what} intact`).toBe(true);
}

describe.each(['inproc', 'udp', 'tcp'] as const)('channels over %s', (transport) => {
  it('every size across the thresholds, 64 KiB and 16 MiB, both directions at once: once, intact, in order', async () => {
    const { a, b, c, s, close } = await pairOf(transport);
    const ab = SIZES.map((n, i) => pattern(n, i + 1));
    const ba = SIZES.map((n, i) => pattern(n, 100 + i));
    const [gotB, gotA] = await Promise.all([
      take(s, ab.length),
      take(c, ba.length),
      c.sendv(ab),
      s.sendv(ba),
    ]);
    ab.forEach((m, i) => same(gotB[i], m, `a->b #${i} (${m.length} B)`));
    ba.forEach((m, i) => same(gotA[i], m, `b->a #${i} (${m.length} B)`));
    const cs = c.stats();
    const ss = s.stats();
    // Sent together, the messages make one ENLARGE for the largest that fits (straight to the
    // last phase, 32 KiB): 1 enlargement per direction, the rest of the waiting ones ride it.
    expect(ss.enlargements).toBe(1);
    expect(cs.enlargements).toBe(1);
    expect(cs.rendezvousSent).toBe(3);
    expect(ss.rendezvousReceived).toBe(3);
    expect(cs.messagesSent).toBe(SIZES.length);
    expect(ss.messagesReceived).toBe(SIZES.length);
    // Device side: both channels' memory is visible in the totals.
    expect(channelStats(a).channels).toBe(1);
    expect(channelStats(b).registeredBytes).toBe(ss.registeredBytes);
    await c.close();
    expect(await take(s, 0)).toEqual([]);
    const end = await s[Symbol.asyncIterator]().next();
    expect(end.done).toBe(true);
    await s.close();
    close();
    expect(channelStats(a)).toMatchObject({ channels: 0, registeredBytes: 0, closed: 1, failed: 0 });
    expect(channelStats(b)).toMatchObject({ channels: 0, registeredBytes: 0, closed: 1, enlargements: 1 });
  });

  it('values go through msgpack; Uint8Arrays stay bytes', async () => {
    const { c, s, close } = await pairOf(transport);
    const vals = [null, 0, -1, 2 ** 40, 'héllo', [1, 'two', { three: 3 }], { nested: { deep: [true, false] } }, new Uint8Array([9, 8, 7]), { bytes: new Uint8Array([1, 2]) }, 'x'.repeat(50_000)];
    const [got] = await Promise.all([take(s, vals.length), c.sendv(vals)]);
    expect(got.slice(0, 7)).toEqual(vals.slice(0, 7));
    expect(got[7]).toBeInstanceOf(Uint8Array);
    expect([...(got[7] as Uint8Array)]).toEqual([9, 8, 7]);
    expect([...((got[8] as { bytes: Uint8Array }).bytes)]).toEqual([1, 2]);
    expect(got[9]).toBe(vals[9]);
    await c.close();
    await s.close();
    close();
  });

  it('enlargements and shrinks while messages are in flight: a random mix over several idle periods', async () => {
    const o = { shrinkAfterMs: 30 };
    const { b, c, s, close } = await pairOf(transport, o);
    let x = 7;
    const rnd = (): number => ((x = (x * 1103515245 + 12345) >>> 0) / 2 ** 32);
    const sent: Uint8Array[] = [];
    const got: unknown[] = [];
    const reader = (async () => {
      for await (const m of s) if (got.push(m) === 150) break;
    })();
    for (let round = 0; round < 5; round++) {
      const burst: Promise<void>[] = [];
      for (let i = 0; i < 30; i++) {
        const r = rnd();
        const n = r < 0.5 ? Math.floor(rnd() * 300) : r < 0.75 ? 200 + Math.floor(rnd() * 4000) : r < 0.95 ? 4000 + Math.floor(rnd() * 29000) : 33000 + Math.floor(rnd() * 70000);
        const m = pattern(n, round * 100 + i);
        sent.push(m);
        burst.push(c.send(m));
      }
      await Promise.all(burst);
      // A send completes once the peer's NIC has it, not once its application took it in:
      // the round is over when the reader has every message of it.
      await vi.waitFor(() => expect(got.length).toBe((round + 1) * 30), { timeout: 10_000, interval: 5 });
      // Idle until the receiver has shrunk back to phase 0 (a fixed 80 ms sleep was too short on
      // a loaded machine: the next round then started enlarged and counted one enlargement less).
      await vi.waitFor(() => expect(s.stats().phase).toBe(0), { timeout: 10_000, interval: 10 });
    }
    await reader;
    sent.forEach((m, i) => same(got[i], m, `#${i}`));
    const st = s.stats();
    expect(st.enlargements).toBeGreaterThanOrEqual(5);
    expect(st.shrinks).toBeGreaterThanOrEqual(4);
    expect(st.phase).toBe(0);
    // Back at phase 0 the receiver holds what it held at the start.
    expect(channelStats(b).registeredBytes).toBe(st.registeredBytes);
    await c.close();
    await s.close();
    close();
  });
});

describe('channels: API edges', () => {
  it('each accepted channel has a PD of its own (a peer\'s keys never reach another channel)', async () => {
    const a = await dev('inproc');
    const b = await dev('inproc');
    const l = listenChannels(b, { service: 3 });
    const cs = await Promise.all([0, 1, 2].map(() => connectChannel(a, b.address, { service: 3 })));
    const ss = await Promise.all([0, 1, 2].map(() => l.accept(5000)));
    expect(new Set(ss.map((s) => s.pd)).size).toBe(3);
    expect(new Set(cs.map((c) => c.pd)).size).toBe(3);
    for (const s of ss) expect(s.pd.qps.size).toBe(1);
    for (const c of cs) await c.close();
    for (const s of ss) await s.close();
    l.close();
  });

  it('send after close rejects with ERR_CLOSED; a message above the peer\'s maxMessage with ERR_LIMIT_EXCEEDED', async () => {
    const { c, s, close } = await pairOf('inproc', { maxMessage: 100_000 });
    await expect(c.send(new Uint8Array(100_001))).rejects.toMatchObject({ code: 'ERR_LIMIT_EXCEEDED' });
    await c.send(new Uint8Array(100_000));
    await c.close();
    await expect(c.send(new Uint8Array(1))).rejects.toMatchObject({ code: 'ERR_CLOSED' });
    const got = await take(s, 1);
    expect((got[0] as Uint8Array).length).toBe(100_000);
    await s.close();
    close();
  });

  it('sends beyond highWaterMark wait in order; beyond maxQueued they reject with ERR_QUEUE_FULL', async () => {
    const { c, s, close } = await pairOf('inproc', { highWaterMark: 4, maxQueued: 10 });
    const ps = Array.from({ length: 14 }, (_, i) => c.send(pattern(10, i)));
    expect(c.stats().outstanding).toBe(14);
    expect(c.stats().queued + c.stats().inFlight).toBe(4);
    const extra = c.send(new Uint8Array(1));
    await expect(extra).rejects.toMatchObject({ code: 'ERR_QUEUE_FULL' });
    const got = await take(s, 14);
    await Promise.all(ps);
    got.forEach((m, i) => same(m, pattern(10, i), `#${i}`));
    await c.close();
    await s.close();
    close();
  });

  it('the peer closing ends iteration after its last message; sends still outstanding reject with ERR_CLOSED', async () => {
    const { c, s, close } = await pairOf('udp', { window: 4 });
    // s never reads: c's window fills, the rest wait.
    const ps = Array.from({ length: 10 }, (_, i) => c.send(pattern(10, i)));
    const all = Promise.allSettled(ps);
    await ps[3];
    await s.close();
    const settled = await all;
    expect(settled.slice(0, 4).every((r) => r.status === 'fulfilled')).toBe(true);
    const rejected = settled.filter((r) => r.status === 'rejected') as PromiseRejectedResult[];
    expect(rejected.length).toBe(6);
    expect(rejected.every((r) => r.reason instanceof SabreError && r.reason.code === 'ERR_CLOSED')).toBe(true);
    const it = c[Symbol.asyncIterator]();
    expect((await it.next()).done).toBe(true);
    close();
  });

  it('closing the device fails open channels cleanly: sends and iteration reject with ERR_CLOSED', async () => {
    const { a, c, close } = await pairOf('tcp');
    const it = c[Symbol.asyncIterator]();
    const next = it.next();
    await a.close();
    await expect(next).rejects.toMatchObject({ code: 'ERR_CLOSED' });
    await expect(c.send(new Uint8Array(1))).rejects.toMatchObject({ code: 'ERR_CLOSED' });
    expect(channelStats(a).channels).toBe(0);
    close();
  });
});

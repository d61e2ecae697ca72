// A channel's lists of work in flight (data writes, epochs retired under writes, offers waiting
// for a read, reads in flight, control messages waiting for credit) are made at their first
// use: an idle channel holds none. Each is used for the first time here on a channel that has
// idled, then emptied and used again, and the channel ends back at its idle footprint.
import { afterEach, describe, expect, it } from 'vitest';
import { channelStats, connectChannel, listenChannels, openDevice, type Channel, type Device } from '../../src/index.js';
import { pattern } from './sim.js';

const devs: Device[] = [];
afterEach(async () => {
  for (const d of devs.splice(0)) await d.close();
});

async function take(ch: Channel, n: number): Promise<unknown[]> {
  const out: unknown[] = [];
  for await (const m of ch) if (out.push(m) === n) break;
  return out;
}

describe('lists a channel makes on first use', () => {
  it('after idling: small writes, an enlargement, rendezvous reads, twice over; then back to the idle footprint', { timeout: 30_000 }, async () => {
    for (let i = 0; i < 2; i++) devs.push(await openDevice({ transport: 'udp', host: '127.0.0.1', port: 0 }));
    const [a, b] = devs as [Device, Device];
    const l = listenChannels(b, { service: 5 });
    const [c, s] = await Promise.all([connectChannel(a, b.address, { service: 5 }), l.accept(10_000)]);
    const idle = channelStats(a).registeredBytes;
    await new Promise((r) => setTimeout(r, 100));
    for (let round = 0; round < 2; round++) {
      const msgs = [pattern(16, round), pattern(3000, round + 1), pattern(1 << 20, round + 2), pattern(40, round + 3), pattern(1 << 20, round + 4)];
      const got = take(s, msgs.length);
      await Promise.all(msgs.map((m) => c.send(m)));
      const back = await got;
      expect(back.length).toBe(msgs.length);
      back.forEach((m, k) => expect(Buffer.from(m as Uint8Array).equals(Buffer.from(msgs[k]!)), `round ${round} message ${k}`).toBe(true));
    }
    expect(channelStats(b).messagesReceived).toBe(10);
    await c.close();
    await s.close();
    l.close();
    expect(channelStats(a).registeredBytes).toBeLessThanOrEqual(idle);
  });
});

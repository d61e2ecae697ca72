// A listener's accept queue: channels whose HELLOs crossed and that the application has not taken
// yet, at most `backlog`. Past it the newest was closed gracefully, counted nowhere: its dialer
// had a channel that ended as if the listener had taken it and hung up, and a message it had sent
// meanwhile resolved (placed at the peer) and was read by no one. Now each one past the queue is
// refused with an abort, so the dialer's channel fails at once (ERR_CLOSED), and counted
// (`acceptRefused` in dev.stats().channels). Real udp devices on 127.0.0.1.
import { describe, expect, it } from 'vitest';
import { channelStats, connectChannel, listenChannels, type Channel } from '../../src/index.js';
import { within } from '../lifecycle/within.js';
import { udpDevices } from './devices.js';
import { until } from './raw.js';
import { pattern } from './sim.js';

const dev = udpDevices();

/** What the dialer's iteration does first: a message, the end (a graceful close), or the error's code. */
async function firstOf(c: Channel): Promise<string> {
  try {
    const r = await c[Symbol.asyncIterator]().next();
    return r.done ? 'ended' : 'message';
  } catch (e) {
    return (e as { code?: string }).code ?? 'failed';
  }
}

describe('a listener\'s accept queue (backlog)', () => {
  it('channels past it are refused and counted, their dialers fail at once; the queued ones are intact and room comes back', async () => {
    const a = await dev();
    const b = await dev();
    const l = listenChannels(b, { service: 31, backlog: 2 });
    const queued = [await connectChannel(a, b.address, { service: 31 }), await connectChannel(a, b.address, { service: 31 })];
    await until(() => channelStats(b).peers === 1 && channelStats(b).channels === 2);
    // Three more while nobody accepts: each dialer's channel opens (the HELLOs cross), then is refused.
    const over: Channel[] = [];
    for (let i = 0; i < 3; i++) over.push(await connectChannel(a, b.address, { service: 31 }));
    for (const c of over) expect(await within(firstOf(c), 3000)).toBe('ERR_CLOSED');
    expect(channelStats(b)).toMatchObject({ acceptRefused: 3, channels: 2 });
    expect(channelStats(a).channels).toBe(2);
    // The two in the queue were not touched: taken in order, they carry messages both ways.
    for (let i = 0; i < 2; i++) {
      const s = await l.accept(5000);
      await queued[i]!.send(pattern(100, i));
      expect(((await s[Symbol.asyncIterator]().next()).value as Uint8Array)).toEqual(pattern(100, i));
    }
    // Taken: the queue has room again.
    const c = await connectChannel(a, b.address, { service: 31 });
    const s = await l.accept(5000);
    await c.send(pattern(10, 9));
    expect(((await s[Symbol.asyncIterator]().next()).value as Uint8Array).length).toBe(10);
    expect(channelStats(b).acceptRefused).toBe(3);
    l.close();
  }, 30_000);
});

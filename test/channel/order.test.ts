// Control messages reach the peer's mailbox in the order the core numbered them, even when a
// send's completion feeds the next waiting sends from inside the shell's own flush. The shell
// used to run a second flush nested in the first (a 'placed' action resolves a send, which
// feeds the next ones and flushed at once): the nested flush posted the next OFFER before the
// CREDIT the outer flush still held, and the peer failed the channel ("control message in
// mailbox slot 0, the next is 7") — the dedup transfers' flake.
import { afterEach, describe, expect, it } from 'vitest';
import { connectChannel, listenChannels, openDevice, type Channel, type Device } from '../../src/index.js';
import { pattern } from './sim.js';

const devs: Device[] = [];
afterEach(async () => {
  for (const d of devs.splice(0)) await d.close();
});

async function pair(transport: 'inproc' | 'tcp', o: Parameters<typeof connectChannel>[2]): Promise<{ c: Channel; s: Channel }> {
  const a = await openDevice(transport === 'inproc' ? { transport } : { transport, host: '127.0.0.1', port: 0 });
  const b = await openDevice(transport === 'inproc' ? { transport } : { transport, host: '127.0.0.1', port: 0 });
  devs.push(a, b);
  const l = listenChannels(b, { ...o, service: 9 });
  const [c, s] = await Promise.all([connectChannel(a, b.address, { ...o, service: 9 }), l.accept(10_000)]);
  l.close();
  return { c, s };
}

describe.each(['inproc', 'tcp'] as const)('control-message order over %s', (transport) => {
  it('rendezvous sends fed one at a time by their completions arrive, all of them, in order', async () => {
    // Every message is a rendezvous (OFFER, the peer reads, DONE). With a few in flight, one
    // batch brings several DONEs: each places a send and feeds the next (an OFFER) from inside
    // the flush, while the same flush owes the peer a CREDIT for the DONEs (4 mailbox slots:
    // a CREDIT is due at 2 owed).
    const o = { highWaterMark: 4, ctrlSlots: 4, ladder: [{ slotSize: 256, slots: 4 }], maxMessage: 1 << 20 };
    const { c, s } = await pair(transport, o);
    const msgs = Array.from({ length: 400 }, (_, i) => pattern(1024 + i, i + 1));
    const got: Uint8Array[] = [];
    const reader = (async () => {
      for await (const m of s) {
        got.push(m as Uint8Array);
        if (got.length === msgs.length) break;
      }
    })();
    reader.catch(() => {}); // awaited below; a failure shows there
    await Promise.all(msgs.map((m) => c.send(m)));
    await reader;
    expect(got.length).toBe(msgs.length);
    for (const [i, m] of msgs.entries()) expect(Buffer.from(got[i]!).equals(Buffer.from(m)), `message ${i}`).toBe(true);
    expect(c.stats().state).toBe('open');
    expect(s.stats().state).toBe('open');
  });
});

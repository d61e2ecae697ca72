// Many idle channels on devices opened with default options (udp on 127.0.0.1, a NIC thread
// each): more than a default device held before (a 4095-region table, two regions per idle
// channel end: 2047 channels, then ERR_NO_MEMORY), the first and the last still carrying a
// message; and a device whose memory has grown to maximumMemoryBytes refusing the next channel
// with ERR_NO_MEMORY.
import { describe, expect, it, vi } from 'vitest';
import { channelStats, connectChannel, listenChannels, type Channel } from '../../src/index.js';
import { udpDevices } from './devices.js';

const dev = udpDevices();

/** Past what 4095 regions hold (2047 channels), and cheap enough to open in a few seconds. */
const MANY = 2300;
const BATCH = 32;

describe('channels at scale, default device options', () => {
  it(`opens ${MANY} idle channels between two devices, and the first and the last carry a message`, async () => {
    const [a, b] = [await dev(), await dev()];
    const listener = listenChannels(b, { service: 7, backlog: MANY, maxChannelsPerPeer: MANY });
    const accepted: Channel[] = [];
    const taking = (async () => {
      for await (const ch of listener) if (accepted.push(ch) === MANY) break;
    })();
    const dialed: Channel[] = [];
    for (let i = 0; i < MANY; i += BATCH) {
      dialed.push(...(await Promise.all(Array.from({ length: Math.min(BATCH, MANY - i) }, () => connectChannel(a, b.address, { service: 7 })))));
    }
    await taking;
    expect(channelStats(a).channels).toBe(MANY);
    expect(channelStats(b).channels).toBe(MANY);
    // Every end holds only its idle footprint: one region, the fixed one with phase 0's slots in
    // it; and the default region table has room for 10,000 such channels, not just these.
    expect(channelStats(a).registeredBytes / MANY).toBeLessThanOrEqual(2048);
    expect(dialed[0]!.pd.mrs.size).toBe(1);
    expect(accepted[MANY - 1]!.pd.mrs.size).toBe(1);
    expect(a.dataPlane.regions.capacity - 1).toBeGreaterThanOrEqual(10_000 + 64);
    // The first and the last channel opened both carry a message (send resolves once it is
    // placed at the peer; the peer's application thread counts it when its completion comes).
    await dialed[0]!.send('first');
    await dialed[MANY - 1]!.send('last');
    await vi.waitFor(() => expect(channelStats(b).messagesReceived).toBe(2), { timeout: 10_000 });
    listener.close();
  }, 60_000);

  it('device memory grows on demand up to maximumMemoryBytes, then a channel is refused ERR_NO_MEMORY', async () => {
    const { openDevice } = await import('../../src/index.js');
    const max = 48 * 1024 * 1024;
    const small = await openDevice({ transport: 'udp', host: '127.0.0.1', port: 0, maximumMemoryBytes: max });
    try {
      const b = await dev();
      const listener = listenChannels(b, { service: 8 });
      void (async () => {
        for await (const _ of listener);
      })();
      // 4 MiB of phase-0 slots per channel on the small device: its memory must grow past the
      // initial 16 MiB of arena, and at most 11 of them fit in 48 MiB.
      const ladder = [{ slotSize: 1 << 20, slots: 4 }];
      const capacity0 = small.stats().memory.capacity;
      const opened: Channel[] = [];
      let refused: unknown;
      for (let i = 0; i < 16 && !refused; i++) {
        try {
          opened.push(await connectChannel(small, b.address, { service: 8, ladder }));
        } catch (e) {
          refused = e;
        }
      }
      expect(refused).toMatchObject({ code: 'ERR_NO_MEMORY' });
      const m = small.stats().memory;
      expect(m.grows).toBeGreaterThan(0);
      expect(m.capacity).toBeGreaterThan(capacity0);
      expect(opened.length).toBeGreaterThan(capacity0 / (4 << 20));
      expect(m.capacity).toBeLessThanOrEqual(max);
      listener.close();
    } finally {
      await small.close();
    }
  }, 30_000);
});

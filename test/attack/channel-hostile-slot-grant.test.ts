// A peer that grants as much as the protocol lets it — a HELLO with window 32768 and 256 slots
// (CHAN_MAX_SLOTS), then an unasked GRANT of another 256 — must not make this end's own posts
// fail. The sender sized its send queue from its own ladder (112 work requests by default) and
// posted one data write per slot credit the peer gave, so the peer's HELLO alone made the 113th
// post throw "send queue full": the channel failed ERR_CLOSED ("posting failed") and every send
// rejected. This failed before the fix (all 250 sends rejected); now the sender holds writes past
// its own cap (min(highWaterMark, 256)) until completions free room, whatever the peer grants.
import { afterEach, describe, expect, it } from 'vitest';
import { Access, connectChannel, type Device, openDevice } from '../../src/index.js';
import { ChanType } from '../../src/wire/channel-spec.js';
import { rawListener, until } from '../channel/raw.js';

const N = 250;
const SLOT = 256;
const RW = Access.LocalWrite | Access.RemoteWrite;

const devs: Device[] = [];
afterEach(async () => {
  for (const d of devs.splice(0)) await d.close();
});

for (const workers of [0, undefined]) {
  describe(`a peer granting 256 slots and window 32768 (udp, workers ${workers ?? 'default'})`, () => {
    it(`${N} slot-sized sends, then ${N} more after an unasked GRANT: all resolve, none lost`, async () => {
      const a = await openDevice({ transport: 'udp', host: '127.0.0.1', port: 0, ...(workers === undefined ? {} : { workers }) });
      const b = await openDevice({ transport: 'udp', host: '127.0.0.1', port: 0, ...(workers === undefined ? {} : { workers }) });
      devs.push(a, b);
      // The raw peer keeps a receive posted for every write it was granted to take.
      const { raw, accepted } = await rawListener(b, 42, false, { slots: 256, slotSize: SLOT, window: 32768, recvs: 600, repost: true });
      // highWaterMark above 256: the peer's credits, not the sender's backlog, would decide.
      const c = await connectChannel(a, b.address, { service: 42, highWaterMark: 1024 });
      await accepted;
      const send = async (from: number): Promise<void> => {
        const sends: Promise<void>[] = [];
        for (let i = 0; i < N; i++) sends.push(c.send(new Uint8Array(SLOT).fill((from + i) & 0xff)));
        const results = await Promise.allSettled(sends);
        const rejected = results.filter((r) => r.status === 'rejected') as PromiseRejectedResult[];
        expect(rejected.map((r) => `${r.reason?.code} ${r.reason?.message}`).slice(0, 1)).toEqual([]);
      };
      await send(0);
      await until(() => raw.data.length === N);
      expect(raw.data.map((d) => d.slot)).toEqual(Array.from({ length: N }, (_, i) => i));
      // Unasked: another 256 slots (epoch 1). The sender fences the old epoch (SWITCH) and goes on.
      const more = raw.pd.regMr(256 * SLOT, RW);
      raw.sendCtrl({ type: ChanType.Grant, grant: { epoch: 1, slots: 256, slotSize: SLOT, addr: more.addr, rkey: more.rkey, phase: 1 } }, 0);
      await until(() => raw.ctrl.some((m) => m.type === ChanType.Switch));
      await send(N);
      await until(() => raw.data.length === 2 * N);
      expect(raw.data.slice(N).map((d) => d.slot)).toEqual(Array.from({ length: N }, (_, i) => i));
      expect(more.buffer[(N - 1) * SLOT]).toBe((2 * N - 1) & 0xff);
      expect(c.stats().state).toBe('open');
    });
  });
}

// A channel accepted by a listener is made (its QP, its receives, its registered slots) before
// the peer's HELLO, and waits up to timeoutMs for it. The per-peer caps (maxChannelsPerPeer,
// preauth.maxPerPeer) count a channel only once its HELLO came, and the cm backlog only while its
// QP connects: a peer that connects QPs with cm's connect() and never sends a HELLO is held to
// neither. Each such channel holds device memory and a share of the channels' completion queue
// for the HELLO deadline; a peer connecting fast enough holds as many as it can make in it.
import { describe, expect, it } from 'vitest';
import { Access, channelStats, connect, connectChannel, listenChannels, type QueuePair } from '../../src/index.js';
import { udpDevices } from '../channel/devices.js';
import { until } from '../files/helpers.js';

const dev = udpDevices();

describe('channels waiting for their HELLO', () => {
  it('200 QPs connected to a channel service without a HELLO hold at most backlog channels; a genuine client still gets in', async () => {
    const server = await dev();
    const attacker = await dev();
    const client = await dev();
    const backlog = 16;
    const l = listenChannels(server, { service: 40, preauth: {}, backlog, timeoutMs: 60_000 });
    const qps: QueuePair[] = [];
    let peak = 0;
    try {
      // One after another, as fast as the listener connects them: each is accepted, then silent.
      for (let i = 0; i < 200; i++) {
        // Receives posted for the listener's HELLO and first messages, so its sends complete: then silence.
        qps.push(await connect(attacker, server.address, {
          service: 40, timeoutMs: 5000, qpInit: { maxRecvWr: 64 },
          setup: (qp) => {
            const mr = qp.pd.regMr(64 * 4096, Access.LocalWrite);
            for (let j = 0; j < 64; j++) qp.postRecv({ wrId: j, sgList: [{ addr: mr.addr + j * 4096, length: 4096, lkey: mr.lkey }] });
          },
        }));
        peak = Math.max(peak, channelStats(server).channels);
      }
      // Every one past the backlog is closed for a newer one, once the listener has taken them all.
      await until(() => channelStats(server).helloEvicted === 200 - backlog, 10_000, 'the listener to take every QP');
      // Before: one channel (QP, receives, registered slots) per QP, 200 held for the HELLO deadline.
      // At most backlog wait for their HELLO, and at most backlog more are made for QPs still connecting.
      expect(peak).toBeLessThanOrEqual(2 * backlog);
      expect(channelStats(server).channels).toBeLessThanOrEqual(backlog);
      // A client of the same host still gets a channel.
      const c = await connectChannel(client, server.address, { service: 40 });
      const ch = await l.accept(5000);
      await c.send(new Uint8Array([1, 2, 3]));
      const got = await ch[Symbol.asyncIterator]().next();
      expect(Array.from(got.value as Uint8Array)).toEqual([1, 2, 3]);
      await c.close();
    } finally {
      for (const qp of qps) qp.destroy();
      l.close();
    }
  }, 120_000);
});

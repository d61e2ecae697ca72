// Validated peers on other hosts (each completes the cookie handshake, so each may hold a
// transport context) crowd a udp device's context table while a peer it keeps an rc QP connected
// to is idle between keepalives. The reclaim that makes room for a newcomer took any quiescent
// context idle for 1 s — the connected peer's too — though docs/resource-bounds.md says a context
// carrying connected rc QPs is not idle in that sense. The crowd, keeping its own contexts fresh,
// then kept the evicted peer out: its next Send failed RetryExcErr and its QP went to ERROR
// (contextsReclaimed 1, then contextLimit for each of its handshake echoes). Now a kept context
// is never reclaimed: the newcomer is refused (contextLimit) and the connected pair goes on.
import { afterEach, describe, expect, it } from 'vitest';
import { type Device, QpState } from '../../src/index.js';
import { UdpType } from '../../src/wire/udp.js';
import { RawPeer, seal } from '../transport/udp/raw-peer.js';
import { side } from '../verbs/helpers.js';

const devs: Device[] = [];
const peers: RawPeer[] = [];
afterEach(async () => {
  for (const p of peers.splice(0)) p.close();
  for (const d of devs.splice(0)) await d.close();
});

/** A raw peer whose socket is bound on another loopback host. */
async function rawOn(host: string, ctx: number): Promise<RawPeer> {
  const p = await RawPeer.open(ctx, host);
  peers.push(p);
  return p;
}

const link = (d: Device): Record<string, number> => d.stats().link as Record<string, number>;

describe('udp: a crowd of validated peers from other hosts and a connected, idle peer', () => {
  it.each([0, 1])('the connected peer\'s context is not reclaimed for a newcomer: the newcomer is refused, the peer\'s next Send succeeds (workers: %i)', async (workers) => {
    const b = await side({ device: { transport: 'udp', host: '127.0.0.1', integrity: 'crc32c', workers, limits: { maxContexts: 4, maxContextsPerHost: 4 } } });
    const a = await side({ device: { transport: 'udp', host: '127.0.0.1', integrity: 'crc32c' } });
    devs.push(b.dev, a.dev);
    await Promise.all([a.qp.connect({ address: b.dev.address, qpn: b.qp.qpn }), b.qp.connect({ address: a.dev.address, qpn: a.qp.qpn })]);
    const to = { host: '127.0.0.1', port: Number(b.dev.address.port) };
    const first = b.qp.recv();
    await a.qp.send({ imm: 1 });
    expect((await first).imm).toBe(1);

    // Three from 127.0.0.2 fill the table (a's context is the fourth); each keeps its own
    // context fresh with an ACK every 200 ms (inside the context: both ids, an acceptable ack).
    const crowd: RawPeer[] = [];
    const ping = setInterval(() => {
      for (const p of crowd) if (p.peerCtx !== 0) p.send(to, seal({ type: UdpType.Ack, srcCtx: p.ctx, dstCtx: p.peerCtx, psn: 1, ackPsn: 0 }));
    }, 200);
    try {
      for (let i = 0; i < 3; i++) {
        const p = await rawOn('127.0.0.2', 0x5eed0100 + i);
        await p.handshake(to, new Uint8Array(8));
        crowd.push(p);
      }
      expect(link(b.dev).contexts).toBe(4);
      // a idles past the reclaim guard (1 s); a newcomer from 127.0.0.3 asks for a context.
      await new Promise((r) => setTimeout(r, 1300));
      const late = await rawOn('127.0.0.3', 0x5eed0200);
      const admitted = await Promise.race([late.handshake(to, new Uint8Array(8)).then(() => true, () => false), new Promise<boolean>((r) => setTimeout(() => r(false), 2500))]);
      if (admitted) crowd.push(late);

      // Before: a's context was the one taken, the crowd kept a out, and this Send failed RetryExcErr.
      const second = b.qp.recv();
      const sent = await a.qp.send({ imm: 2 }).then(() => 'Success', (e: { status?: number }) => `status ${e.status}`);
      const st = link(b.dev);
      expect({ sent, admitted, reclaimed: st.contextsReclaimed }).toEqual({ sent: 'Success', admitted: false, reclaimed: 0 });
      expect(st.contextLimit).toBeGreaterThan(0);
      expect((await second).imm).toBe(2);
      expect([a.qp.state, b.qp.state]).toEqual([QpState.Rts, QpState.Rts]);
    } finally {
      clearInterval(ping);
    }
  }, 40_000);
});

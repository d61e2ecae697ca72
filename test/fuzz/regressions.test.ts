// Inputs the live-device fuzz campaign found mishandled, each kept as a regression test
// (docs/fuzzing.md "What it found").
import { afterEach, describe, expect, it, vi } from 'vitest';
import { openDevice, type Device } from '../../src/index.js';
import { frameBytes } from '../../src/transport/udp/frame-codec.js';
import { ValidatedPeer } from './udp-campaign.js';
import { seal, UdpAttackSocket } from './udp-attack.js';

const devs: Device[] = [];
const socks: UdpAttackSocket[] = [];
afterEach(async () => {
  for (const s of socks.splice(0)) s.close();
  for (const d of devs.splice(0)) await d.close();
});

describe('udp: refused DATA counted in dev.stats()', () => {
  // Found by the on-path class "on/data-behind" / "on/data-past-window" (udp seed 24301): a DATA
  // datagram with both context ids right, at a PSN already received or past the receive window,
  // was dropped by the transport context and counted only in that context's private counters,
  // so dev.stats() showed no refusal for it (the campaign's refusal check failed).
  it('a PSN already received and one past the window move rxDuplicate / rxOutOfWindow', async () => {
    const dev = await openDevice({ transport: 'udp', mtu: 1500 });
    devs.push(dev);
    const to = dev.address as unknown as { host: string; port: number };
    const s = await UdpAttackSocket.open();
    socks.push(s);
    const vp = new ValidatedPeer(s, to, 0x5eed0042);
    expect(await vp.handshake(0x5eed0042)).toBe(true);
    const link = () => dev.stats().link as Record<string, number>;
    const before = { dup: link().rxDuplicate ?? 0, oow: link().rxOutOfWindow ?? 0 };
    const payload = frameBytes({ kind: 'ack', srcQpn: 1, dstQpn: 0x7ffffff0, ssn: 0 });
    // PSN 0 came with the handshake's echo: a replay of it, and one 1024 + 5 past the window.
    s.send(to, seal({ srcCtx: vp.ctx, dstCtx: vp.peerCtx, psn: 0, ackPsn: vp.rcvNxt, dstQpn: 0x7ffffff0, srcQpn: 1 }, payload));
    s.send(to, seal({ srcCtx: vp.ctx, dstCtx: vp.peerCtx, psn: vp.sndNxt + 1024 + 5, ackPsn: vp.rcvNxt, dstQpn: 0x7ffffff0, srcQpn: 1 }, payload));
    await vi.waitFor(() => {
      expect((link().rxDuplicate ?? 0) - before.dup).toBe(1);
      expect((link().rxOutOfWindow ?? 0) - before.oow).toBe(1);
    }, { timeout: 5000 });
  });
});

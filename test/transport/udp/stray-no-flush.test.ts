// A datagram that changes nothing — refused at its trailer, a COOKIE or RESET naming no context
// of ours, a stale id — owes the socket shell no flush. A flush is endpoint.poll() and
// nextDeadline(), a visit of every context: before, every datagram read scheduled one, so strays
// paced one per event-loop wake-up bought a visit of every context each (an audit measured
// 45 µs of CPU per stray with no peers and 135–141 µs with 1024). Counted, not timed: strays
// leave `flushes` where it was and count `rxIdle`; a real peer's datagram still flushes. Failed
// before the fix (2000 strays, 2000 flushes).
import dgram from 'node:dgram';
import { describe, expect, it } from 'vitest';
import { UdpSockets } from '../../../src/transport/udp/socket.js';
import { UdpType } from '../../../src/wire/udp.js';
import { seal, ZERO_COOKIE } from './raw-peer.js';

describe('datagrams that change nothing at the udp socket shell', () => {
  it('2000 strays paced over ~0.5 s (bad CRC; a RESET and a COOKIE for no context of ours) flush nothing; a peer\'s datagram still does', async () => {
    const s = await UdpSockets.open({ host: '127.0.0.1', integrity: 'crc32c', mtu: 1472 });
    const atk = dgram.createSocket('udp4');
    try {
      await new Promise<void>((r) => atk.bind(0, '127.0.0.1', () => r()));
      const badCrc = seal({ type: UdpType.Ack, srcCtx: 5, dstCtx: 0 });
      badCrc[badCrc.length - 1]! ^= 1;
      const strays = [badCrc, seal({ type: UdpType.Reset, srcCtx: 7, dstCtx: 0x1234567, token: new Uint8Array(8) }), seal({ type: UdpType.Cookie, srcCtx: 9, dstCtx: 0x7654321, cookie: { time: 9, mac: new Uint8Array(8) } })];
      await new Promise((r) => setTimeout(r, 50));
      const f0 = s.counters.flushes;
      for (let i = 0; i < 2000; i++) {
        atk.send(strays[i % 3]!, s.address.port, '127.0.0.1');
        if (i % 4 === 3) await new Promise((r) => setTimeout(r, 1));
      }
      for (let i = 0; i < 100 && s.counters.rxIdle < 2000; i++) await new Promise((r) => setTimeout(r, 20));
      expect(s.counters.rxIdle).toBe(2000);
      expect(s.counters.flushes - f0).toBe(0);
      // A first contact from a peer changes something (a COOKIE is owed): it flushes.
      atk.send(seal({ type: UdpType.Data, srcCtx: 11, cookie: ZERO_COOKIE, integ: 0 }, new Uint8Array(16)), s.address.port, '127.0.0.1');
      for (let i = 0; i < 100 && s.counters.flushes === f0; i++) await new Promise((r) => setTimeout(r, 10));
      expect(s.counters.flushes).toBeGreaterThan(f0);
    } finally {
      atk.close();
      await s.close(0);
    }
  }, 30_000);
});

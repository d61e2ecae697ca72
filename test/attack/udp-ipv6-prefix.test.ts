// The udp endpoint's per-host caps — contexts a source host's peers may make us keep
// (maxContextsPerHost) and the RESETs one destination host gets (resetRatePerHost /
// resetBurstPerHost) — counted a host by its full address. Every other per-source bound
// (the cm listener's, the file server's admission, the tcp connector's: core/address hostKey)
// takes an IPv6 /64 as one host: a peer holding a prefix has 2^64 addresses, each of which it
// can receive at, so it passed the cookie handshake from 64 of them and more and was held to
// maxContexts alone (every genuine newcomer then refused, contextLimit), and a flood spoofed
// from a victim's /64 drew the device's whole RESET rate at that victim, not one host's.
// Sans-I/O: the endpoint on a hand-cranked wire, the peer's datagrams written by hand.
import { describe, expect, it } from 'vitest';
import { UdpEndpoint, type OutDatagram, type PeerAddress } from '../../src/transport/udp/endpoint.js';
import { UdpIntegrity } from '../../src/wire/spec.js';
import { UdpType, decodeUdpHdr, type UdpHdr } from '../../src/wire/udp.js';
import { seal, ZERO_COOKIE } from '../transport/udp/raw-peer.js';

const hdrOf = (d: OutDatagram): UdpHdr => {
  const b = new Uint8Array(Buffer.concat(d.parts));
  const r = decodeUdpHdr(b, 0, b.length - 4);
  if (!r.ok) throw new Error(r.error);
  return r.value;
};

describe('udp per-host caps and IPv6 /64s', () => {
  it('handshakes from 50 addresses of one /64 against maxContextsPerHost 8: 8 contexts, 42 refused; another /64 still gets one', () => {
    const ep = new UdpEndpoint({ mtu: 1472, maxContextsPerHost: 8, maxContexts: 64 });
    const token = new Uint8Array(8);
    const open = (from: PeerAddress, id: number, now: number): void => {
      ep.receive(seal({ srcCtx: id, cookie: ZERO_COOKIE }), from, now);
      const d = ep.poll(now).datagrams.find((x) => x.to.host === from.host && x.to.port === from.port);
      if (d === undefined) throw new Error('no cookie');
      ep.receive(seal({ srcCtx: id, cookie: hdrOf(d).cookie!, token, integ: UdpIntegrity.Xxh3 }), from, now);
      for (const x of ep.poll(now).delivered) ep.release(x.ctx);
    };
    for (let i = 0; i < 50; i++) open({ host: `2001:db8:0:1::${(i + 1).toString(16)}`, port: 4791 }, 100 + i, 0);
    expect(ep.contexts).toBe(8);
    expect(ep.counters.hostLimit).toBe(42);
    expect(ep.stats().hostsWithContexts).toBe(1);
    // Written another way (leading zeros, upper case, no "::"), the same /64.
    open({ host: '2001:DB8:0000:1:0:0:0:ff', port: 4791 }, 999, 0);
    expect(ep.contexts).toBe(8);
    expect(ep.counters.hostLimit).toBe(43);
    // Another /64 is not locked out; IPv4 hosts are what they were.
    open({ host: '2001:db8:0:2::1', port: 4791 }, 1000, 0);
    open({ host: '10.0.0.1', port: 1 }, 1001, 0);
    open({ host: '::ffff:10.0.0.2', port: 1 }, 1002, 0);
    expect(ep.contexts).toBe(11);
    expect(ep.stats().hostsWithContexts).toBe(4);
  });

  it('RESETs answering a flood spoofed from 1000 addresses of one /64: that /64 gets one host\'s burst', () => {
    const ep = new UdpEndpoint({ mtu: 1472, resetBurstPerHost: 20, resetRatePerHost: 50, resetBurst: 1000, resetRate: 1000 });
    let sent = 0;
    for (let i = 0; i < 1000; i++) {
      ep.receive(seal({ type: UdpType.Ack, srcCtx: 1, dstCtx: 77 }), { host: `2001:db8:0:1::${(i + 1).toString(16)}`, port: 9 }, 0);
      sent += ep.poll(0).datagrams.length;
    }
    expect(sent).toBe(20);
    expect(ep.counters.resetsSuppressed).toBe(980);
    expect(ep.stats().resetHosts).toBe(1);
  });
});

// Off-path forgeries against a udp rc pair, both directions, during the handshake and during a
// transfer: an attacker that knows both addresses (and the QPNs) but not a context id, a cookie
// or a reset token, sending from each peer's exact source address (a forwarder stands between
// the devices, so the attacker can send from the very sockets each device sees the other at).
// RESETs naming random ids, COOKIEs, ACKs with absurd acks and SACKs, DATA for unknown contexts,
// first contacts and restart claims with zero or made-up cookies, all with valid CRCs, every 2 ms
// from before the connect to the end of the transfer. Passed on the code it was written against
// (an audit's regression test; test/transport/udp/attack.test.ts hole 1 covers restart claims
// to the server during a transfer).
import dgram from 'node:dgram';
import { afterEach, describe, expect, it } from 'vitest';
import { type Device, openDevice, QpState } from '../../src/index.js';
import { UdpType } from '../../src/wire/udp.js';
import { seal, ZERO_COOKIE } from '../transport/udp/raw-peer.js';

const devs: Device[] = [];
const socks: dgram.Socket[] = [];
afterEach(async () => {
  for (const d of devs.splice(0)) await d.close();
  for (const s of socks.splice(0)) s.close();
});

async function bound(): Promise<dgram.Socket> {
  const s = dgram.createSocket('udp4');
  await new Promise<void>((r) => s.bind(0, '127.0.0.1', () => r()));
  s.on('error', () => {});
  socks.push(s);
  return s;
}

const link = (d: Device): Record<string, number> => d.stats().link as Record<string, number>;
const rnd = (): number => (Math.random() * 0xffff_ffff) >>> 0 || 1;

/** Every kind of datagram an off-path sender can make without a context id, a cookie or a token. */
function forgeries(dstQpn: number, srcQpn: number): Uint8Array[] {
  const q = { dstQpn, srcQpn };
  const tok = () => Uint8Array.from({ length: 8 }, () => rnd() & 0xff);
  return [
    seal({ type: UdpType.Reset, srcCtx: rnd(), dstCtx: rnd(), window: 0, token: tok() }),
    seal({ type: UdpType.Reset, srcCtx: rnd(), dstCtx: 0, window: 0, token: tok() }),
    seal({ type: UdpType.Cookie, srcCtx: rnd(), dstCtx: rnd(), window: 0, cookie: { time: rnd(), mac: tok() } }),
    seal({ type: UdpType.Ack, srcCtx: rnd(), dstCtx: 0, ackPsn: rnd(), sack: [{ start: 1, end: 0x7fff_ffff }] }),
    seal({ type: UdpType.Ack, srcCtx: rnd(), dstCtx: rnd(), ackPsn: rnd(), ackReq: true }),
    seal({ srcCtx: rnd(), dstCtx: rnd(), psn: rnd(), ...q }, new Uint8Array(64)),
    seal({ srcCtx: rnd(), dstCtx: 0, psn: 0, cookie: ZERO_COOKIE, ...q }, new Uint8Array(64)),
    seal({ srcCtx: rnd(), dstCtx: 0, psn: 0, cookie: { time: Date.now() >>> 0, mac: tok() }, token: tok(), ...q }, new Uint8Array(64)),
  ];
}

describe('udp: off-path forgeries from each peer\'s own address', () => {
  it('during the handshake and a transfer, both ways: the pair connects, every byte lands, nothing fails or restarts', async () => {
    const server = await openDevice({ transport: 'udp', host: '127.0.0.1', integrity: 'crc32c' });
    const client = await openDevice({ transport: 'udp', host: '127.0.0.1', integrity: 'crc32c' });
    devs.push(server, client);
    const sPort = Number(server.address.port);
    // client <-> front | up <-> server
    const front = await bound();
    const up = await bound();
    let cAddr: { port: number; host: string } | undefined;
    front.on('message', (m, r) => {
      cAddr = { host: r.address, port: r.port };
      up.send(m, sPort, '127.0.0.1');
    });
    up.on('message', (m) => {
      if (cAddr) front.send(m, cAddr.port, cAddr.host);
    });
    const mk = (d: Device) => {
      const pd = d.allocPd();
      const cq = d.createCq({ depth: 256 });
      const qp = pd.createQp({ type: 'rc', sendCq: cq, recvCq: cq, maxSendWr: 64, maxRecvWr: 64, maxSge: 1 });
      return { pd, cq, qp, mr: pd.regMr(1 << 20, 7) };
    };
    const s = mk(server);
    const c = mk(client);
    const cPort = Number(client.address.port);
    const flood = setInterval(() => {
      // To the server, from where it sees the client; to the client, from where it sees the server.
      for (const f of forgeries(s.qp.qpn, c.qp.qpn)) up.send(f, sPort, '127.0.0.1');
      for (const f of forgeries(c.qp.qpn, s.qp.qpn)) front.send(f, cPort, '127.0.0.1');
    }, 2);
    try {
      const fa = front.address();
      const ua = up.address();
      await Promise.all([
        c.qp.connect({ address: { transport: 'udp', host: fa.address, port: fa.port }, qpn: s.qp.qpn }),
        s.qp.connect({ address: { transport: 'udp', host: ua.address, port: ua.port }, qpn: c.qp.qpn }),
      ]);
      for (let i = 0; i < c.mr.buffer.length; i++) c.mr.buffer[i] = (i * 7 + 3) & 0xff;
      for (let i = 0; i < s.mr.buffer.length; i++) s.mr.buffer[i] = (i * 13 + 5) & 0xff;
      const dstS = s.pd.regMr(1 << 20, 7);
      const dstC = c.pd.regMr(1 << 20, 7);
      for (let round = 0; round < 8; round++) {
        const off = round * (128 << 10);
        await Promise.all([
          c.qp.write({ sgList: [{ addr: c.mr.addr + off, length: 128 << 10, lkey: c.mr.lkey }], remoteAddr: dstS.addr + off, rkey: dstS.rkey }),
          s.qp.write({ sgList: [{ addr: s.mr.addr + off, length: 128 << 10, lkey: s.mr.lkey }], remoteAddr: dstC.addr + off, rkey: dstC.rkey }),
        ]);
      }
      expect(Buffer.from(dstS.buffer).equals(Buffer.from(c.mr.buffer))).toBe(true);
      expect(Buffer.from(dstC.buffer).equals(Buffer.from(s.mr.buffer))).toBe(true);
    } finally {
      clearInterval(flood);
    }
    expect([c.qp.state, s.qp.state]).toEqual([QpState.Rts, QpState.Rts]);
    for (const d of [server, client]) {
      const st = link(d);
      // The forgeries arrived and were refused where they should be (not vacuous).
      expect(st.unknownContext).toBeGreaterThan(0);
      expect(st.restartClaims).toBeGreaterThan(0);
      expect(st.cookiesIgnored).toBeGreaterThan(0);
      expect([st.peerRestarts, st.contextsFailed, st.contexts]).toEqual([0, 0, 1]);
    }
  }, 60_000);
});

// Hostile datagrams at a device's UDP port, from a raw node:dgram socket on 127.0.0.1:
// garbage, truncated, bad CRC, a well-sealed datagram that is not an engine frame, a
// well-formed frame for an unknown QP, a segment with a garbage DDP header. Each is a counted
// drop at the layer that can tell; the device keeps working with a real peer in another process.
// The frames meant for the engine come from a raw peer that completed the cookie handshake
// (nothing from an unvalidated address reaches the engine at all).
import dgram from 'node:dgram';
import { crc32c as nodeCrc32c } from '@node-rs/crc32';
import { afterAll, describe, expect, it } from 'vitest';
import { DeviceMemory } from '../../../src/dataplane/device-memory.js';
import { Opcode, WcStatus } from '../../../src/index.js';
import { frameBytes } from '../../../src/transport/udp/frame-codec.js';
import { UdpLink } from '../../../src/transport/udp/link.js';
import { Device } from '../../../src/verbs/device.js';
import { encodeUdpHdr, udpHeaderLength, UdpType, type UdpHdr } from '../../../src/wire/udp.js';
import { ALL, pattern, same, startPeer, stopPeer, take, type Peer, type RemoteMr } from './helpers.js';
import { RawPeer } from '../udp/raw-peer.js';

let peer: Peer | undefined;
let dev: Device | undefined;
let raw: dgram.Socket | undefined;
let validated: RawPeer | undefined;

afterAll(async () => {
  raw?.close();
  validated?.close();
  await dev?.close();
  if (peer) await stopPeer(peer);
});

/** A datagram with a valid reliability header and trailer (CRC by an independent implementation). */
function seal(h: Partial<UdpHdr>, payload: Uint8Array): Uint8Array {
  const hdr: UdpHdr = {
    type: UdpType.Data, ackReq: false, retx: false, window: 16, srcCtx: 0x5eed, dstCtx: 0, psn: 0, ackPsn: 0,
    tsVal: 1, tsEcr: 0, dstQpn: 1, srcQpn: 1, sack: [], ...h,
  };
  const hl = udpHeaderLength(hdr);
  const buf = Buffer.alloc(hl + payload.length + 4);
  encodeUdpHdr(hdr, buf, 0);
  buf.set(payload, hl);
  buf.writeUInt32LE(nodeCrc32c(buf.subarray(0, hl + payload.length)), hl + payload.length);
  return buf;
}

describe('udp device under hostile datagrams', () => {
  it('garbage, truncated, bad CRC, non-frames, unknown QPs: counted drops; the device keeps working', async () => {
    const t = await UdpLink.open({ host: '127.0.0.1', port: 0, mtu: 1500, integrity: 'crc32c' });
    dev = new Device(await DeviceMemory.create({ maximumBytes: 256 << 20, workerSlots: 0 }), t, { mss: t.mss });
    peer = await startPeer({ mtu: 1500 });
    const pd = dev.allocPd();
    const cq = dev.createCq({ depth: 256 });
    const qp = pd.createQp({ type: 'rc', sendCq: cq, recvCq: cq, maxSendWr: 64, maxRecvWr: 64, maxSge: 4 });
    const r = await peer.call<{ h: number; qpn: number }>('qp', { type: 'rc' });
    await Promise.all([qp.connect({ address: peer.address, qpn: r.qpn }), peer.call('connect', { qp: r.h, address: dev.address, qpn: qp.qpn })]);

    raw = dgram.createSocket('udp4');
    await new Promise<void>((res) => raw!.bind(0, '127.0.0.1', () => res()));
    const port = (dev.address as unknown as { port: number }).port;
    const ep = t.udp.endpoint.counters;
    const before = { ...ep };
    const sends: Uint8Array[] = [];
    // 1. random garbage of many lengths (deterministic xorshift bytes)
    for (let n = 0; n < 200; n++) sends.push(pattern(1 + ((n * 37) % 1400), 900 + n));
    // 2. truncated: shorter than header + trailer
    for (let n = 0; n < 40; n++) sends.push(pattern(n, 3));
    // 3. a valid datagram with one bit flipped (bad CRC)
    const good = seal({ srcCtx: 0xbad1 }, frameBytes({ kind: 'ack', srcQpn: 1, dstQpn: qp.qpn, ssn: 1 }));
    for (let bit = 0; bit < 64; bit++) {
      const c = Uint8Array.from(good);
      c[bit >> 3]! ^= 1 << (bit & 7);
      c[(bit * 7) % c.length]! ^= 0x10;
      sends.push(c);
    }
    for (const d of sends) raw.send(d, port, '127.0.0.1');
    // 4. sealed, but the payload is not an engine frame (unknown kind), then a QPN-0 frame
    // 5. a well-formed hello / segment for a QP that does not exist
    // 6. a segment with a garbage DDP header to our live QP, from an address that is not its peer
    const seg = frameBytes({ kind: 'seg', env: { srcQpn: 3, dstQpn: qp.qpn, ssn: 1, msgLen: 4, off: 0 }, hdr: Uint8Array.of(0xff, 0xff, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12), payload: [Uint8Array.of(1, 2, 3, 4)] });
    const forged = [
      Uint8Array.of(0x7f, 0, 0, 0, 0, 0, 0, 1),
      frameBytes({ kind: 'ack', srcQpn: 1, dstQpn: 1, ssn: 1 }),
      frameBytes({ kind: 'hello', srcQpn: 9, dstQpn: 4242, reply: false }),
      frameBytes({ kind: 'seg', env: { srcQpn: 9, dstQpn: 4243, ssn: 1, msgLen: 4, off: 0 }, hdr: new Uint8Array(14), payload: [Uint8Array.of(1, 2, 3, 4)] }),
      seg,
    ];
    const qpnOf = (i: number) => (i === 1 ? 0 : i === 4 ? qp.qpn : 4242 + i);
    validated = await RawPeer.open(0x5eed);
    const to = { host: '127.0.0.1', port };
    // The first forged frame rides the handshake (probe and echo carry it; it is delivered once).
    await validated.handshake(to, forged[0]!, { dstQpn: qpnOf(0), srcQpn: 9 });
    forged.forEach((p, i) => {
      if (i > 0) validated!.send(to, seal({ srcCtx: validated!.ctx, dstCtx: validated!.peerCtx, psn: i, dstQpn: qpnOf(i), srcQpn: 9 }, p));
    });
    // Wait (bounded) until every datagram has been seen by the endpoint.
    const total = sends.length + forged.length + 1;
    // (rxDatagrams also counts the real peer's datagrams, so wait for the forged frames' own
    // counter too: on a loaded machine the count can be reached before they are decoded.)
    for (let i = 0; i < 300 && (ep.rxDatagrams - before.rxDatagrams < total || t.counters.badFrames < 2); i++) await new Promise((res) => setTimeout(res, 10));
    expect(ep.rxDatagrams - before.rxDatagrams).toBeGreaterThanOrEqual(total);
    expect(ep.truncated - before.truncated).toBeGreaterThanOrEqual(40);
    expect(ep.badCrc - before.badCrc).toBeGreaterThanOrEqual(64);
    expect(t.counters.badFrames).toBeGreaterThanOrEqual(2);
    // The segment for a QP that does not exist and the one from an address that is not the
    // live QP's peer are engine drops (a hello to an unknown QP is ignored silently).
    for (let i = 0; i < 20 && dev.stats().drops < 2; i++) await new Promise((res) => setTimeout(res, 10));
    expect(dev.stats().drops).toBeGreaterThanOrEqual(2);

    // Still working: a multi-datagram write and a read with the real peer.
    const dst = await peer.call<RemoteMr>('mr', { length: 20_000, access: ALL });
    const src = pd.regMr(20_000, ALL);
    src.buffer.set(pattern(20_000, 5));
    qp.postSend({ wrId: 1, opcode: Opcode.RdmaWrite, sgList: [{ addr: src.addr, length: 20_000, lkey: src.lkey }], remoteAddr: dst.addr, rkey: dst.rkey });
    const back = pd.regMr(20_000, ALL);
    qp.postSend({ wrId: 2, opcode: Opcode.RdmaRead, sgList: [{ addr: back.addr, length: 20_000, lkey: back.lkey }], remoteAddr: dst.addr, rkey: dst.rkey });
    expect((await take(cq, 2)).map((w) => [w.wrId, w.status])).toEqual([[1, WcStatus.Success], [2, WcStatus.Success]]);
    expect(same(back.buffer, src.buffer)).toBe(true);
  }, 30_000);
});

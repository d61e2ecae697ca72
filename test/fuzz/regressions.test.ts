// Inputs the live-device fuzz campaign found mishandled, each kept as a regression test
// (docs/fuzzing.md "What it found").
import net from 'node:net';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { listen, openDevice, QpState, WcStatus, type Device } from '../../src/index.js';
import { frameBytes } from '../../src/transport/udp/frame-codec.js';
import { ValidatedPeer } from './udp-campaign.js';
import { seal, UdpAttackSocket } from './udp-attack.js';
import { cat, fpdu } from './tcp-attack.js';
import { ALL } from './transfer.js';

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
    const dev = await openDevice({ transport: 'udp', mtu: 1500, integrity: 'crc32c' });
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

/** A raw MPA v2 initiator (standard, CRC on) to `port`; resolves once the reply is in. */
async function rawMpa(port: number, request?: Uint8Array): Promise<{ s: net.Socket; rx: () => Buffer; closed: () => boolean }> {
  const s = net.connect(port, '127.0.0.1');
  s.on('error', () => {});
  let rx = Buffer.alloc(0);
  let closed = false;
  s.on('data', (d: Buffer) => {
    rx = Buffer.concat([rx, d]);
  });
  s.on('close', () => {
    closed = true;
  });
  await new Promise((r) => s.once('connect', r));
  s.write(request ?? cat(new TextEncoder().encode('MPA ID Req Frame'), Uint8Array.of(0x50, 0x02, 0x00, 0x04, 0x00, 0x10, 0x00, 0x10)));
  return { s, rx: () => rx, closed: () => closed };
}

/** Run `fn` with uncaught exceptions collected into the array it gets (the bugs these inputs found threw out of socket handlers). */
async function catchingUncaught(fn: (errors: unknown[]) => Promise<void>): Promise<void> {
  const errors: unknown[] = [];
  const onErr = (e: unknown): void => {
    errors.push(e);
  };
  process.on('uncaughtException', onErr);
  try {
    await fn(errors);
  } finally {
    process.off('uncaughtException', onErr);
  }
}

/** Untagged Send (QN 0) with the given MSN, last segment, MO 0. */
function send(msn: number, data: Uint8Array): Uint8Array {
  const h = new Uint8Array(18);
  h[0] = 0x41;
  h[1] = 0x43;
  new DataView(h.buffer).setUint32(10, msn);
  return fpdu(cat(h, data));
}

describe('tcp: hostile streams found by the campaign', () => {
  // Found by the tcp campaign (seed 24301, class fpdu/op3/data): two Sends naming the same MSN,
  // both complete in one read, were each checked against the same posted receive at arrival;
  // the second then found no receive at completion and the engine threw a TypeError out of the
  // socket's data handler (an uncaught exception: a remote peer could crash the process).
  it('two Sends with the same MSN in one read: a Terminate (invalid MSN), no exception, the device keeps serving', async () => {
    const dev = await openDevice({ transport: 'tcp' });
    devs.push(dev);
    await catchingUncaught(async (errors) => {
      const pd = dev.allocPd();
      const cq = dev.createCq({ depth: 64 });
      const mr = pd.regMr(65536, ALL);
      const l = listen(dev, {
        pd, qpInit: { sendCq: cq, recvCq: cq, maxSendWr: 4, maxRecvWr: 8, maxSge: 1 },
        setup: (qp) => {
          for (let i = 0; i < 4; i++) qp.postRecv({ wrId: i, sgList: [{ addr: mr.addr + i * 4096, length: 4096, lkey: mr.lkey }] });
        },
      });
      const port = (dev.address as unknown as { port: number }).port;
      const before = dev.stats().terminatesSent;
      const a = await rawMpa(port);
      await vi.waitFor(() => expect(a.rx().length).toBeGreaterThanOrEqual(24));
      const qp = await l.accept(5000);
      a.s.write(cat(send(1, Uint8Array.of(1, 2, 3, 4)), send(1, Uint8Array.of(5, 6, 7, 8))));
      await vi.waitFor(() => expect(a.closed()).toBe(true), { timeout: 5000 });
      expect(errors).toEqual([]);
      expect(dev.stats().terminatesSent - before).toBe(1);
      expect(qp.state).toBe(QpState.Error);
      // The first Send completed; the rest flushed.
      const wcs = cq.poll(16);
      expect(wcs[0]).toMatchObject({ wrId: 0, status: WcStatus.Success, byteLen: 4 });
      // Still serving: another raw initiator is accepted.
      const b = await rawMpa(port);
      await l.accept(5000);
      b.s.destroy();
      l.close();
    });
  });

  // Found by the tcp campaign (seed 5, 2026-11-26, at input 353,825): a Read Request whose sink
  // TO lies just under 2^53 was answered; the answer's later segments carry sink TO + offset
  // past Number.MAX_SAFE_INTEGER, and encodeDdp threw out of the socket's data handler — an
  // uncaught exception any peer past the MPA handshake could cause.
  it('a Read Request whose sink range passes 2^53: a Terminate, no exception, the device keeps serving', async () => {
    const dev = await openDevice({ transport: 'tcp' });
    devs.push(dev);
    await catchingUncaught(async (errors) => {
      const pd = dev.allocPd();
      const cq = dev.createCq({ depth: 64 });
      const mr = pd.regMr(1 << 20, ALL);
      const l = listen(dev, { pd, qpInit: { sendCq: cq, recvCq: cq, maxSendWr: 4, maxRecvWr: 8, maxSge: 1 } });
      const port = (dev.address as unknown as { port: number }).port;
      const before = { term: dev.stats().terminatesSent, refused: dev.stats().readsRefused };
      const a = await rawMpa(port);
      await vi.waitFor(() => expect(a.rx().length).toBeGreaterThanOrEqual(24));
      const qp = await l.accept(5000);
      // Untagged DDP header (L, DV 1), RDMAP v1 opcode 1 (Read Request), QN 1, MSN 1, MO 0;
      // then sink STag, sink TO (2^53 - 4096), size (1 MiB), source STag, source TO (RFC 5040 §4.4).
      const h = new Uint8Array(18 + 28);
      const v = new DataView(h.buffer);
      h[0] = 0x41;
      h[1] = 0x41;
      v.setUint32(6, 1);
      v.setUint32(10, 1);
      v.setUint32(18, 0x1234);
      v.setBigUint64(22, 2n ** 53n - 4096n);
      v.setUint32(30, 1 << 20);
      v.setUint32(34, mr.rkey);
      v.setBigUint64(38, BigInt(mr.addr));
      a.s.write(fpdu(h));
      await vi.waitFor(() => expect(a.closed()).toBe(true), { timeout: 5000 });
      expect(errors).toEqual([]);
      expect(dev.stats().terminatesSent - before.term).toBe(1);
      expect(dev.stats().readsRefused - before.refused).toBe(1);
      expect(qp.state).toBe(QpState.Error);
      // Still serving: another raw initiator is accepted.
      const b = await rawMpa(port);
      await l.accept(5000);
      b.s.destroy();
      l.close();
    });
  });

  // Found by the tcp campaign (seed 24301, classes mpa/bad-key, mpa/bad-rev, mpa/pd-too-long):
  // an incoming connection whose MPA request was refused was closed with nothing counted in
  // dev.stats() (the campaign's check "refusal counters moved >= sessions V refused" failed).
  it('a refused MPA request moves link.handshakesRefused', async () => {
    const dev = await openDevice({ transport: 'tcp' });
    devs.push(dev);
    const port = (dev.address as unknown as { port: number }).port;
    const before = (dev.stats().link as Record<string, number>).handshakesRefused ?? 0;
    const bad = cat(new TextEncoder().encode('MPA ID Req FramE'), Uint8Array.of(0x50, 0x02, 0x00, 0x00));
    const a = await rawMpa(port, bad);
    await vi.waitFor(() => expect(a.closed()).toBe(true), { timeout: 5000 });
    await vi.waitFor(() => expect(((dev.stats().link as Record<string, number>).handshakesRefused ?? 0) - before).toBe(1));
  });
});

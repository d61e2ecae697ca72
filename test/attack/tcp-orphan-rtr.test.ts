// A QP connect without a secret answers every peer-to-peer Request for its pairing
// (connector.ts #route -> #acceptFor), and the first to complete wins. Only the latest answered
// was remembered: when one completed, the settle closed that one (if another) and nothing else.
// An earlier one left waiting for its RTR, whose RTR came afterwards, became an established
// connection nobody owned — the link never adopted it, so every ULPDU its sender streamed was
// buffered without bound or deadline (208 MB sent, arrayBuffers 209 MB higher, still open 3 s
// later; found by an audit, this test failed then). Now the settle closes every Request the QP
// answered but the winner, and one completing after the settle is closed at once.
import net from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { openDevice, type Device } from '../../src/index.js';
import { encodeSabrePd } from '../../src/transport/tcp/private-data.js';
import { cat, fpdu } from '../transport/tcp/raw-mpa.js';

const cleanup: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const f of cleanup.splice(0).reverse()) await f();
});

/** Peer-to-peer (write RTR) MPA Request with a sabre block for the QP pair. */
function p2pRequest(initiatorQpn: number, responderQpn: number): Uint8Array {
  const block = encodeSabrePd({ kind: 'connect', initiatorQpn, responderQpn, nonce: 0 });
  const pd = cat(Uint8Array.of(0x80, 0x10, 0x80, 0x10), block);
  return cat(new TextEncoder().encode('MPA ID Req Frame'), Uint8Array.of(0x50, 0x02, pd.length >> 8, pd.length & 0xff), pd);
}
const RTR = fpdu(Uint8Array.of(0xc1, 0x40, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0));

async function raw(port: number): Promise<{ s: net.Socket; got: () => Buffer; closed: () => boolean }> {
  const s = net.connect({ host: '127.0.0.1', port, localAddress: '127.0.0.2' });
  s.on('error', () => {});
  let closed = false;
  s.on('close', () => { closed = true; });
  const chunks: Buffer[] = [];
  s.on('data', (d: Buffer) => { if (chunks.reduce((n, c) => n + c.length, 0) < 4096) chunks.push(d); });
  await new Promise<void>((r, j) => { s.once('connect', () => r()); s.once('close', () => j(new Error('closed'))); });
  return { s, got: () => Buffer.concat(chunks), closed: () => closed };
}

async function until(what: string, cond: () => boolean, ms = 5000): Promise<void> {
  const end = Date.now() + ms;
  while (!cond()) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

describe('a peer-to-peer Request answered for a raw connect that another Request won', () => {
  it('a second peer-to-peer Request for a pairing, completed after the first won, is closed (not held with unbounded buffering)', async () => {
    const dev: Device = await openDevice({ transport: 'tcp', host: '127.0.0.1', port: 0, workers: 0 });
    cleanup.push(() => dev.close());
    // The "real peer" is a silent socket at a lower port, so this device waits as the responder.
    const held: net.Socket[] = [];
    const silent = net.createServer((s) => { s.on('error', () => {}); held.push(s); });
    // A port below the device's (so the device is the responder); bounded tries.
    const devPort = dev.address.port as number;
    for (let p = devPort - 1, i = 0; i < 200 && p > 1024; p--, i++) {
      const ok = await new Promise<boolean>((r) => {
        silent.once('error', () => r(false));
        silent.listen(p, '127.0.0.1', () => r(true));
      });
      if (ok) break;
    }
    cleanup.push(() => { for (const s of held) s.destroy(); return new Promise<void>((r) => silent.close(() => r())); });
    const silentPort = (silent.address() as net.AddressInfo).port;
    const pd = dev.allocPd();
    const cq = dev.createCq({ depth: 16 });
    const qp = pd.createQp({ type: 'rc', sendCq: cq, recvCq: cq, maxSendWr: 4, maxRecvWr: 4, maxSge: 1 });
    const port = dev.address.port as number;
    expect(silentPort).not.toBe(port);
    const peerQpn = 0x42;
    const peer = { transport: 'tcp' as const, host: '127.0.0.1', port: silentPort };
    // Make this device the responder: its tuple must sort higher than the peer's.
    const responder = port > silentPort;
    expect(responder).toBe(true);
    const connected = qp.connect({ address: peer, qpn: peerQpn, timeoutMs: 8000 });
    connected.catch(() => {});
    await new Promise((r) => setTimeout(r, 50));
    const a = await raw(port);
    cleanup.push(() => void a.s.destroy());
    a.s.write(p2pRequest(peerQpn, qp.qpn));
    await until('reply a', () => a.got().length >= 20);
    const b = await raw(port);
    cleanup.push(() => void b.s.destroy());
    b.s.write(p2pRequest(peerQpn, qp.qpn));
    await until('reply b', () => b.got().length >= 20);
    expect(a.got()[16]! & 0x20).toBe(0); // both accepted
    expect(b.got()[16]! & 0x20).toBe(0);
    // b completes: the QP connects over b.
    b.s.write(RTR);
    await connected;
    // a completes afterwards: nobody owns it.
    a.s.write(RTR);
    await new Promise((r) => setTimeout(r, 200));
    const ab0 = process.memoryUsage().arrayBuffers;
    const ulpdu = cat(Uint8Array.of(0xc1, 0x40, 0x11, 0x22, 0x33, 0x44, 0, 0, 0, 0, 0, 0, 0, 0), new Uint8Array(65000));
    const chunk = Buffer.from(cat(...Array.from({ length: 16 }, () => fpdu(ulpdu))));
    // Bounded flood: 200 rounds of ~1 MiB, at most 5 s.
    const end = Date.now() + 5000;
    let sent = 0;
    for (let i = 0; i < 200 && Date.now() < end && !a.closed(); i++) {
      if (!a.s.write(chunk)) await new Promise((r) => a.s.once('drain', r));
      sent += chunk.length;
    }
    await new Promise((r) => setTimeout(r, 300));
    const grown = process.memoryUsage().arrayBuffers - ab0;
    expect(sent).toBeGreaterThanOrEqual(0);
    await until('the late one closed', () => a.closed(), 3000).catch(() => {});
    expect(a.closed()).toBe(true);
    expect((dev.stats().link as unknown as Record<string, number>).endpointConnections).toBe(1);
    expect(grown).toBeLessThan(32 << 20);
  }, 40_000);
});

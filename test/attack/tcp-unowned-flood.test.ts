// FPDUs that arrive on an established MPA connection before the link has set its ULPDU handler
// were copied without any bound (connection.ts #onUlpdus). On a cm listener of a device with a NIC
// thread the handler is set only once the application thread has seen the accept and called
// qp.connect (openQp -> #attach): a round trip through the main thread. While the main thread was
// busy, a client that had read the MPA Reply pushed as much as it liked and the NIC thread kept a
// copy of every ULPDU (332–399 MB in 1.5 s; found by an audit, this test failed then). Now what a
// connection nobody took keeps is bounded (./src/transport/tcp/unowned.ts: the socket pauses past
// 1 MiB), and one nobody takes within the handshake's deadline is closed (NO_OWNER, counted
// connectionsUnowned: the second case).
import { Worker } from 'node:worker_threads';
import { afterEach, describe, expect, it } from 'vitest';
import { crc32c as refCrc } from '@node-rs/crc32';
import { listen, openDevice, type Device } from '../../src/index.js';
import type { ThreadPort } from '../../src/nic/thread-port.js';
import { encodeSabrePd } from '../../src/transport/tcp/private-data.js';
import { cat } from '../transport/tcp/raw-mpa.js';
import { DeviceMemory } from '../../src/dataplane/device-memory.js';
import { MpaConnector } from '../../src/transport/tcp/connector.js';
import net from 'node:net';

const cleanup: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const f of cleanup.splice(0).reverse()) await f();
});

function fpdu(ulpdu: Uint8Array): Uint8Array {
  const pad = (4 - ((2 + ulpdu.length) & 3)) & 3;
  const body = cat(Uint8Array.of(ulpdu.length >> 8, ulpdu.length & 0xff), ulpdu, new Uint8Array(pad));
  const crc = refCrc(Buffer.from(body)) >>> 0;
  return cat(body, Uint8Array.of(crc & 0xff, (crc >>> 8) & 0xff, (crc >>> 16) & 0xff, crc >>> 24));
}

/** A sabre MPA Request (CRC, enhanced, IRD/ORD 16, no p2p) for an rdma_cm-style connect to `service`. */
function cmRequest(service: number, qpn: number): Uint8Array {
  const block = encodeSabrePd({ kind: 'connect', initiatorQpn: qpn, responderQpn: 0, nonce: 12345, service });
  const pd = cat(Uint8Array.of(0x00, 0x10, 0x00, 0x10), block);
  return cat(new TextEncoder().encode('MPA ID Req Frame'), Uint8Array.of(0x50, 0x02, pd.length >> 8, pd.length & 0xff), pd);
}

const ATTACKER = `
const { parentPort, workerData } = require('node:worker_threads');
const net = require('node:net');
const { port, req, chunk, ms } = workerData;
const buf = Buffer.from(chunk);
const s = net.connect({ host: '127.0.0.1', port });
let got = Buffer.alloc(0), replied = false, end = 0;
s.on('error', (e) => parentPort.postMessage({ error: e.message }));
s.on('connect', () => s.write(Buffer.from(req)));
s.on('close', () => parentPort.postMessage({ closed: true, written: s.bytesWritten }));
s.on('data', (d) => {
  if (replied) return;
  got = Buffer.concat([got, d]);
  if (got.length < 20) return;
  const pdl = got.readUInt16BE(18);
  if (got.length < 20 + pdl) return;
  replied = true;
  if (got[16] & 0x20) { parentPort.postMessage({ rejected: true }); s.destroy(); return; }
  end = Date.now() + ms;
  pump();
});
function pump() {
  while (Date.now() < end && !s.destroyed) {
    if (!s.write(buf)) { s.once('drain', pump); return; }
  }
  parentPort.postMessage({ done: true, written: s.bytesWritten, pending: s.writableLength, destroyed: s.destroyed });
  setTimeout(() => s.destroy(), 200);
}
`;

function spin(ms: number): void {
  const end = Date.now() + ms;
  while (Date.now() < end) { /* the application's own work on the main thread */ }
}

describe('ULPDUs of a tcp connection nobody has taken yet', () => {
  it('a cm client flooding right after the MPA Reply, while the application thread is busy, is bounded', async () => {
    const dev: Device = await openDevice({ transport: 'tcp', host: '127.0.0.1', port: 0, workers: 1 });
    cleanup.push(() => dev.close());
    let spun = false;
    let duringSpin: { used: number; external: number } | undefined;
    const nic = dev.nic as ThreadPort;
    // The application's main thread is busy right after the request was answered (modelled with a
    // microtask queued from setup: it runs once the listener has accepted, i.e. the MPA Reply is out).
    const l = listen(dev, { service: 7, backlog: 4, setup: () => { if (!spun) { spun = true; queueMicrotask(() => { spin(1500); duringSpin = nic.call('heap', {}) as { used: number; external: number }; }); } } });
    cleanup.push(() => l.close());
    const port = dev.address.port as number;
    const ulpdu = cat(Uint8Array.of(0xc1, 0x40, 0x11, 0x22, 0x33, 0x44, 0, 0, 0, 0, 0, 0, 0, 0), new Uint8Array(65000));
    const one = fpdu(ulpdu);
    const chunk = cat(...Array.from({ length: 16 }, () => one)); // ~1 MiB
    const heap0 = nic.call('heap', {}) as { used: number; external: number };
    const rss0 = process.memoryUsage().rss;
    const w = new Worker(ATTACKER, { eval: true, workerData: { port, req: cmRequest(7, 0x1234), chunk, ms: 2500 } });
    cleanup.push(() => void w.terminate());
    const msgs: unknown[] = [];
    w.on('message', (m) => msgs.push(m));
    let peakExternal = 0;
    const heapAt = (h: { external: number }) => h.external - heap0.external;
    let peakRss = 0;
    // The application thread: busy 600 ms at a time, yielding briefly in between (bounded: 8 rounds).
    for (let i = 0; i < 8; i++) {
      await new Promise((r) => setTimeout(r, 300));
      const h = nic.call('heap', {}) as { used: number; external: number };
      peakExternal = Math.max(peakExternal, h.external - heap0.external);
      peakRss = Math.max(peakRss, process.memoryUsage().rss - rss0);
    }
    await new Promise((r) => setTimeout(r, 500));
    if (duringSpin) peakExternal = Math.max(peakExternal, heapAt(duringSpin));
    const done = msgs.find((m) => (m as { done?: boolean }).done) as { written: number; pending: number } | undefined;
    const accepted = done ? done.written - done.pending : 0;
    expect(accepted).toBeGreaterThanOrEqual(0);
    // What the NIC thread held for it: the 1 MiB kept and the staging area, not what was sent.
    expect(peakExternal).toBeLessThan(16 << 20);
  }, 60_000);

  it('a connection established and never taken is closed at the handshake deadline, counted', async () => {
    const dm = await DeviceMemory.create({ initialBytes: 8 << 20, maximumBytes: 64 << 20, regionEntries: 16, workerSlots: 0 });
    const ep = await MpaConnector.listen({ dp: dm, connection: { mpa: { timeoutMs: 400 } } });
    cleanup.push(() => ep.close());
    // Accepted (an MPA Reply without Reject), and then nobody calls onUlpdus.
    ep.onConnectRequest((r) => void r.accept(5).catch(() => {}));
    const s = net.connect({ host: '127.0.0.1', port: ep.address.port });
    let closed = false;
    s.on('error', () => {});
    s.on('close', () => (closed = true));
    s.on('data', () => {});
    cleanup.push(() => void s.destroy());
    await new Promise<void>((r) => s.once('connect', () => r()));
    s.write(cmRequest(7, 0x99));
    for (let i = 0; i < 100 && !closed; i++) await new Promise((r) => setTimeout(r, 20));
    expect(closed).toBe(true);
    expect(ep.counters.connectionsUnowned).toBe(1);
  }, 20_000);
});

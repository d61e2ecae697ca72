// A peer that claims to be sabre (its MPA Request carries sabre's block) and never reads its
// socket, while it sends the same Send again and again (a sequence note naming ssn 1 before
// each copy) to a QP with no receive posted. Every copy drew an RNR NAK, and with the socket
// blocked each NAK waited in the connection's queue — which a sabre peer is not paused for
// (pausing both ends of a sabre pair could deadlock) — so the queue grew by what the peer sent,
// without bound. An RNR NAK that repeats one already waiting tells the peer nothing new: now it
// is dropped and counted (`rnrCoalesced`), and the queue stays flat.
import { afterEach, describe, expect, it } from 'vitest';
import { DeviceMemory } from '../../src/dataplane/device-memory.js';
import { Worker } from 'node:worker_threads';
import { Access, listen, Opcode } from '../../src/index.js';
import { TcpLink } from '../../src/transport/tcp/link.js';
import { encodeSabrePd } from '../../src/transport/tcp/private-data.js';
import { encodeSabreControl, SabreControlKind } from '../../src/transport/tcp/sabre-control.js';
import { Device } from '../../src/verbs/device.js';
import { cat, fpdu, untagged } from '../transport/tcp/raw-mpa.js';

const cleanup: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const f of cleanup.splice(0).reverse()) await f();
});

async function until(what: string, cond: () => boolean, ms = 10_000): Promise<void> {
  const end = Date.now() + ms;
  while (!cond()) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

/** A sabre MPA Request (CRC, enhanced, IRD/ORD 16, no p2p) for an rdma_cm-style connect to `service`. */
function cmRequest(service: number, qpn: number): Uint8Array {
  const block = encodeSabrePd({ kind: 'connect', initiatorQpn: qpn, responderQpn: 0, nonce: 4242, service });
  const pd = cat(Uint8Array.of(0x00, 0x10, 0x00, 0x10), block);
  return cat(new TextEncoder().encode('MPA ID Req Frame'), Uint8Array.of(0x50, 0x02, pd.length >> 8, pd.length & 0xff), pd);
}

const TRICKLE = `
const { parentPort, workerData } = require('node:worker_threads');
const net = require('node:net');
const { port, req, pair, ms } = workerData;
const s = net.connect({ host: '127.0.0.1', port, noDelay: true });
let got = 0, started = false;
s.on('error', () => {});
s.on('connect', () => s.write(Buffer.from(req)));
s.on('data', (d) => {
  got += d.length;
  if (started || got < 20) return;
  started = true;
  s.pause(); // never reads again
  parentPort.postMessage({ replied: true });
});
parentPort.on('message', () => {
  const buf = Buffer.from(pair);
  const end = Date.now() + ms;
  let n = 0;
  // One copy per write: each tends to be a socket read (an engine step) of its own over there.
  const go = () => {
    for (let i = 0; i < 4 && Date.now() < end; i++) { s.write(buf); n++; }
    if (Date.now() < end) setImmediate(go); else parentPort.postMessage({ done: true, n });
  };
  go();
});
`;

describe('a sabre peer that never reads, provoking RNR NAKs', () => {
  it('copies of one Send to a QP without receives, one per write, behind a blocked socket: the queue stays bounded', async () => {
    const mem = await DeviceMemory.create({ maximumBytes: 256 << 20, workerSlots: 0 });
    const t = await TcpLink.open({ dp: mem, host: '127.0.0.1', port: 0 });
    const dev = new Device(mem, t);
    cleanup.push(() => dev.close());
    const stats = (): Record<string, number> => dev.stats().link!;
    const pd = dev.allocPd();
    const cq = dev.createCq({ depth: 64 });
    const l = listen(dev, { service: 0, pd, qpInit: { sendCq: cq, recvCq: cq, maxSendWr: 16, maxRecvWr: 16, maxSge: 1 } });
    cleanup.push(() => l.close());
    // [Seq ssn 1][zero-length Send, MSN 1]: 56 bytes on the wire per copy.
    const pair = cat(fpdu(encodeSabreControl(SabreControlKind.Seq, 1)), fpdu(untagged(true, 3, 0, 1, 0)));
    const w = new Worker(TRICKLE, { eval: true, workerData: { port: t.address.port, req: cmRequest(0, 0x77), pair, ms: 3000 } });
    cleanup.push(() => void w.terminate());
    const msgs: { replied?: boolean; done?: boolean; n?: number }[] = [];
    w.on('message', (m) => msgs.push(m));
    await until('the MPA Reply', () => msgs.some((m) => m.replied));
    const qp = await l.accept(5000);
    // The application's own 32 MiB Write, which the peer never reads: the socket blocks.
    const mr = pd.regMr(32 << 20, Access.LocalWrite);
    qp.postSend({ wrId: 1, opcode: Opcode.RdmaWrite, sgList: [{ addr: mr.addr, length: mr.length, lkey: mr.lkey }], remoteAddr: 0, rkey: 0x1234 });
    await new Promise((r) => setTimeout(r, 200));
    const q0 = stats().queuedBytes ?? 0;
    w.postMessage('go');
    let peak = 0;
    while (!msgs.some((m) => m.done)) {
      await new Promise((r) => setTimeout(r, 50));
      peak = Math.max(peak, (stats().queuedBytes ?? 0) - q0);
    }
    await new Promise((r) => setTimeout(r, 300));
    peak = Math.max(peak, (stats().queuedBytes ?? 0) - q0);
    const naks = dev.stats().rnrNaksSent;
    expect(naks).toBeGreaterThan(50);
    // Before: 26 bytes (and a frame's bookkeeping, ~200 bytes of heap) queued per NAK, as many as
    // the peer cares to provoke (59 KB for 2,265 NAKs in one run). Now: one NAK waits.
    expect(peak).toBeLessThan(256);
    expect(stats().rnrCoalesced).toBeGreaterThan(naks / 2);
  }, 60_000);
});

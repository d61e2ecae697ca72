// Edges of tcp's send-side fence to a standard iWARP peer (no acks: our Writes complete once the
// kernel has taken their bytes, docs/resource-bounds.md): a peer that reads one long message
// slowly but steadily is alive; a socket destroyed under queued writes completes none of them
// Success; frames waiting in the link's own queue for a blocked stream are detached when their
// region over the caller's buffer is deregistered.
import { afterEach, expect, it } from 'vitest';
import { Access, listen, Opcode, openDevice, WcStatus } from '../../src/index.js';
import { parseFpdus, rawConnect, replyLength } from '../transport/tcp/raw-mpa.js';

const cleanup: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const f of cleanup.splice(0).reverse()) await f();
});

async function until(what: string, cond: () => boolean, ms = 20_000): Promise<void> {
  const end = Date.now() + ms;
  while (!cond()) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 5));
  }
}

const N = 12;
const SIZE = 1 << 20;

/** A tcp device and a raw standard peer connected to one of its QPs. */
async function standardPeer(workers: number, qpInit: { timeoutMs?: number } = {}) {
  const dev = await openDevice({ transport: 'tcp', host: '127.0.0.1', port: 0, workers });
  cleanup.push(() => dev.close());
  const pd = dev.allocPd();
  const cq = dev.createCq({ depth: 2 * N });
  const l = listen(dev, { pd, qpInit: { sendCq: cq, recvCq: cq, maxSendWr: N, maxRecvWr: 4, maxSge: 1, ...qpInit } });
  cleanup.push(() => l.close());
  const raw = await rawConnect((dev.address as { port: number }).port);
  cleanup.push(() => void raw.s.destroy());
  await until('the MPA Reply', () => raw.received().length >= 20);
  const qp = await l.accept(5000);
  return { dev, pd, cq, qp, raw };
}

/** Payload bytes of the tagged FPDUs (Writes) the peer got, and how many of them were a Write's last segment. */
function writesAtPeer(got: Uint8Array): { bytes: number; whole: number; frames: ReturnType<typeof parseFpdus> } {
  const frames = parseFpdus(got.subarray(replyLength(got))).filter((f) => f.hdr.length === 14);
  return { bytes: frames.reduce((n, f) => n + f.payload.length, 0), whole: frames.filter((f) => (f.hdr[0]! & 0x40) !== 0).length, frames };
}

it('one 12 MiB Write to a peer reading about 4 MB/s, timeoutMs 1000: alive all along, it completes Success', async () => {
  const { pd, cq, qp, raw } = await standardPeer(0, { timeoutMs: 1000 });
  // At most 64 KiB per 15 ms, never silent for long.
  let tick = 0;
  raw.s.on('data', (d: Buffer) => {
    tick += d.length;
    if (tick >= 64 << 10) raw.s.pause();
  });
  const iv = setInterval(() => {
    tick = 0;
    raw.s.resume();
  }, 15);
  cleanup.push(() => clearInterval(iv));
  const src = pd.regMr(12 * SIZE, Access.LocalWrite);
  qp.postSend({ wrId: 1, opcode: Opcode.RdmaWrite, sgList: [{ addr: src.addr, length: 12 * SIZE, lkey: src.lkey }], remoteAddr: 0, rkey: 0x1234 });
  const wcs: { status: number }[] = [];
  await until('the completion', () => (wcs.push(...cq.poll(4)), wcs.length > 0), 30_000);
  expect(wcs[0]!.status).toBe(WcStatus.Success);
}, 40_000);

it.each([0, 1])('the peer ends its side (FIN) with our Writes backed up (workers %i): no Write completes Success unless its last byte reached the peer', async (workers) => {
  const { pd, cq, qp, raw } = await standardPeer(workers);
  raw.s.pause();
  const src = pd.regMr(N * SIZE, Access.LocalWrite);
  for (let i = 0; i < N; i++) qp.postSend({ wrId: i, opcode: Opcode.RdmaWrite, sgList: [{ addr: src.addr + i * SIZE, length: SIZE, lkey: src.lkey }], remoteAddr: i * SIZE, rkey: 0x1234 });
  await new Promise((r) => setTimeout(r, 300));
  const wcs: { status: number }[] = [...cq.poll(2 * N)];
  raw.s.end();
  await until('every completion', () => (wcs.push(...cq.poll(2 * N)), wcs.length === N));
  raw.s.resume();
  await raw.closed;
  expect(wcs.filter((w) => w.status === WcStatus.Success).length).toBeLessThanOrEqual(writesAtPeer(raw.received()).whole);
}, 60_000);

// What node's own write queue holds (up to the connection's high-water mark, 1 MiB, and one
// flush) cannot be copied and still goes with the caller's next bytes: docs/resource-bounds.md.
it('a region over the caller\'s buffer deregistered with Writes in the link\'s queue of a blocked stream: what the link held reaches the peer as it was', async () => {
  const { dev, pd, qp, raw } = await standardPeer(0);
  raw.s.pause();
  const own = new Uint8Array(N * SIZE).fill(0x11);
  const src = pd.regMr(own, Access.LocalWrite);
  for (let i = 0; i < N; i++) qp.postSend({ wrId: i, opcode: Opcode.RdmaWrite, sgList: [{ addr: src.addr + i * SIZE, length: SIZE, lkey: src.lkey }], remoteAddr: i * SIZE, rkey: 0x1234 });
  await until('a backlog in the link', () => ((dev.stats().link as { queuedBytes?: number }).queuedBytes ?? 0) > 4 * SIZE);
  src.deregister();
  own.fill(0xee);
  raw.s.resume();
  await until('every payload byte', () => writesAtPeer(raw.received()).bytes >= N * SIZE, 30_000);
  let marker = 0;
  for (const f of writesAtPeer(raw.received()).frames) for (const b of f.payload) if (b !== 0x11) marker++;
  // Before the link's queue was detached: ~8.4 MB of the 12 MiB.
  expect(marker).toBeLessThanOrEqual(2 * SIZE);
}, 60_000);

// The send side of the deregister fence on tcp. Payloads of our Writes and Sends go to the
// socket as views of device memory, and node reads a view when the kernel takes it, which for
// a peer that is not reading is later. Two ways those views outlived their work request:
// - to a standard iWARP peer (no acks) a Write completed when handed to the link, before the
//   socket took its bytes: the application, told Success, reused the buffer (as it may) and
//   the old request sent the new bytes;
// - a QP destroyed with views still in the socket's queue: its work is flushed, which lets
//   the memory go to the next regMr, and the graceful close then sent the new region's bytes.
// A raw iWARP peer (no acks) that stops reading backs the socket up; the marker written into
// the memory after the completion (or after the destroy) must never reach it.
import { afterEach, describe, expect, it } from 'vitest';
import { Access, listen, Opcode, openDevice, WcStatus } from '../../src/index.js';
import type { Device } from '../../src/verbs/device.js';
import { parseFpdus, rawConnect, replyLength, sabreMpaRequest, type RawPeer } from '../transport/tcp/raw-mpa.js';

const cleanup: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const f of cleanup.splice(0).reverse()) await f();
});

const ORIGINAL = 0x11;
const MARKER = 0xee;
const SIZE = 1 << 20;
const N = 32;

async function until(what: string, cond: () => boolean, ms = 20_000): Promise<void> {
  const end = Date.now() + ms;
  while (!cond()) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 5));
  }
}

/**
 * A sabre device with a listener, and a raw peer connected to it whose socket is paused: a
 * standard iWARP peer, or one that says it is sabre (then our work waits for its acks, which
 * never come).
 */
async function setup(workers: number, peer: 'iwarp' | 'sabre' = 'iwarp', timeoutMs?: number) {
  const dev: Device = await openDevice({ transport: 'tcp', host: '127.0.0.1', port: 0, workers });
  cleanup.push(() => dev.close());
  const pd = dev.allocPd();
  const cq = dev.createCq({ depth: 2 * N });
  const l = listen(dev, { pd, qpInit: { sendCq: cq, recvCq: cq, maxSendWr: N, maxRecvWr: 4, maxSge: 1, ...(timeoutMs ? { timeoutMs } : {}) } });
  cleanup.push(() => l.close());
  const raw = await rawConnect((dev.address as { port: number }).port, { request: peer === 'iwarp' });
  if (peer === 'sabre') raw.s.write(sabreMpaRequest({ kind: 'connect', initiatorQpn: 77, responderQpn: 0, nonce: 77 * 7919, service: 0 }));
  cleanup.push(() => void raw.s.destroy());
  await until('the MPA Reply', () => raw.received().length >= 20);
  const qp = await l.accept(5000);
  raw.s.pause();
  return { dev, pd, cq, qp, raw };
}

/** Payload bytes of every tagged FPDU (RDMA Write) the raw peer got, and how many are not ORIGINAL. */
function tally(raw: RawPeer): { bytes: number; marker: number } {
  const got = raw.received();
  let bytes = 0;
  let marker = 0;
  for (const f of parseFpdus(got.subarray(replyLength(got)))) {
    if (f.hdr.length !== 14) continue;
    bytes += f.payload.length;
    for (const b of f.payload) if (b !== ORIGINAL) marker++;
  }
  return { bytes, marker };
}

const backlog = (dev: Device): number => (dev.stats().link as { queuedBytes?: number } | undefined)?.queuedBytes ?? 0;

/**
 * The socket backs up (the link queues what it cannot take), then the peer reads again:
 * `reap` (taking completions and acting on them, returning how many so far) runs throughout,
 * until all N Writes completed; the peer must then hold every payload byte and no marker.
 */
async function backedUpThenDrained(dev: Device, raw: RawPeer, reap: () => number): Promise<void> {
  await until('a backlog', () => (reap(), backlog(dev) > 4 * SIZE));
  reap();
  raw.s.resume();
  await until('every Write completed', () => reap() === N);
  await until('every payload byte', () => tally(raw).bytes >= N * SIZE, 30_000);
  expect(tally(raw)).toEqual({ bytes: N * SIZE, marker: 0 });
}

describe.each([0, 1])('tcp send fence, a standard iWARP peer that stops reading (workers: %i)', (workers) => {
  it(`${N} Writes of 1 MiB: each source overwritten as soon as its Write completes Success; no overwritten byte reaches the peer`, async () => {
    const { dev, pd, cq, qp, raw } = await setup(workers);
    const src = pd.regMr(N * SIZE, Access.LocalWrite);
    src.buffer.fill(ORIGINAL);
    for (let i = 0; i < N; i++) {
      qp.postSend({ wrId: i, opcode: Opcode.RdmaWrite, sgList: [{ addr: src.addr + i * SIZE, length: SIZE, lkey: src.lkey }], remoteAddr: i * SIZE, rkey: 0x1234 });
    }
    let done = 0;
    const reap = (): void => {
      for (const wc of cq.poll(2 * N)) {
        expect(wc.status).toBe(WcStatus.Success);
        // The verbs contract: the buffer is the application's again.
        const i = Number(wc.wrId);
        src.buffer.fill(MARKER, i * SIZE, (i + 1) * SIZE);
        done++;
      }
    };
    await backedUpThenDrained(dev, raw, () => (reap(), done));
  }, 60_000);

  it(`${N} Writes of 1 MiB from regions of their own: each region deregistered as soon as its Write completes Success, its memory registered again and overwritten; no marker byte reaches the peer`, async () => {
    const { dev, pd, cq, qp, raw } = await setup(workers);
    const srcs = Array.from({ length: N }, () => pd.regMr(SIZE, Access.LocalWrite));
    for (const [i, m] of srcs.entries()) {
      m.buffer.fill(ORIGINAL);
      qp.postSend({ wrId: i, opcode: Opcode.RdmaWrite, sgList: [{ addr: m.addr, length: SIZE, lkey: m.lkey }], remoteAddr: i * SIZE, rkey: 0x1234 });
    }
    const fresh: { buffer: Uint8Array }[] = [];
    let done = 0;
    const reap = (): void => {
      for (const wc of cq.poll(2 * N)) {
        expect(wc.status).toBe(WcStatus.Success);
        srcs[Number(wc.wrId)]!.deregister();
        done++;
      }
      // Whatever memory the device hands out now is overwritten.
      while (fresh.length < done) fresh.push(pd.regMr(SIZE, Access.LocalWrite));
      for (const m of fresh) m.buffer.fill(MARKER);
    };
    await backedUpThenDrained(dev, raw, () => (reap(), done));
  }, 60_000);

  it('a peer that takes none of our bytes for timeoutMs: the QP fails (the oldest Write not written RetryExcErr, the rest flushed); what the kernel took completed Success first, and nothing else', async () => {
    const { cq, pd, qp, raw } = await setup(workers, 'iwarp', 300);
    const src = pd.regMr(N * SIZE, Access.LocalWrite);
    for (let i = 0; i < N; i++) {
      qp.postSend({ wrId: i, opcode: Opcode.RdmaWrite, sgList: [{ addr: src.addr + i * SIZE, length: SIZE, lkey: src.lkey }], remoteAddr: i * SIZE, rkey: 0x1234 });
    }
    const wcs: { wrId: bigint | number; status: number }[] = [];
    await until('every completion', () => {
      wcs.push(...cq.poll(2 * N));
      return wcs.length === N;
    });
    const ok = wcs.filter((w) => w.status === WcStatus.Success).length;
    // In posting order: those the kernel took, then the one the watchdog failed, then the flushed.
    expect(wcs.map((w) => Number(w.wrId))).toEqual([...Array(N).keys()]);
    expect(ok).toBeLessThan(N);
    expect(wcs[ok]!.status).toBe(WcStatus.RetryExcErr);
    expect(wcs.slice(ok + 1).every((w) => w.status === WcStatus.WrFlushErr)).toBe(true);
    raw.s.resume();
  }, 30_000);

  it.each(['iwarp', 'sabre'] as const)(`the QP destroyed while its Writes wait in the socket (a %s peer); the region deregistered, its memory registered again and overwritten: no marker byte reaches the peer`, async (peer) => {
    const { dev, pd, qp, raw } = await setup(workers, peer);
    const src = pd.regMr(N * SIZE, Access.LocalWrite);
    src.buffer.fill(ORIGINAL);
    for (let i = 0; i < N; i++) {
      qp.postSend({ wrId: i, opcode: Opcode.RdmaWrite, sgList: [{ addr: src.addr + i * SIZE, length: SIZE, lkey: src.lkey }], remoteAddr: i * SIZE, rkey: 0x1234 });
    }
    await until('a backlog', () => backlog(dev) > 4 * SIZE);
    qp.destroy();
    // The flushed work lets the memory go (once the NIC thread, if any, has the destroy): the
    // next region of that size lies over it (not always at the same address: memory the
    // connection held may be freed with it).
    const addr = src.addr;
    src.deregister();
    const over = (a: number): boolean => a < addr + N * SIZE && a + N * SIZE > addr;
    let again = pd.regMr(N * SIZE, Access.LocalWrite);
    for (const end = Date.now() + 5000; !over(again.addr) && Date.now() < end; ) {
      await new Promise((r) => setTimeout(r, 10));
      again.deregister();
      again = pd.regMr(N * SIZE, Access.LocalWrite);
    }
    expect(over(again.addr)).toBe(true);
    again.buffer.fill(MARKER);
    raw.s.resume();
    await raw.closed;
    expect(tally(raw).marker).toBe(0);
  }, 60_000);
});

// srd's refused ssns kept as one range per flow (srd-refusal.ts): the range must follow the
// turn. A range left behind the turn (its low end at an ssn taken while another was refused)
// was stretched by the next refusal over a turn never refused, and the flow took its next
// batch for a restart: every batch after one that met refusals failed again (RetryExcErr,
// 40-48 of 60). One sender over a lossy network, 6 batches of 60 Sends, receives posted slowly.
// The first batch failed too (the watchdog, RetryExcErr, 40-48 of 60): a turn held in part —
// segments of its first copy refused before it was the turn, the rest taken after — was never
// asked for again, and the flow waited for the refused segments for ever (srd-refusal.ts
// turnRefused). With three senders that failed most Sends (429 and 147 of 450).
import { describe, expect, it } from 'vitest';
import { Opcode, WcStatus } from '../../src/core/enums.js';
import { clean, lossy, reordering } from '../sim/net.js';
import type { SimNode } from '../sim/node.js';
import { Sim } from '../sim/sim.js';
import type { DeviceAddress } from '../../src/core/address.js';
import type { Outbound } from '../../src/core/link.js';
import { taggedWrite } from '../sim/hand-frames.js';
import { piece, recv, wr } from '../sim/work.js';

describe('srd: the refused range follows the turn', () => {
  for (const seed of [1, 4]) it(`lossy, seed ${seed}: every batch completes, and no restart is seen`, async () => {
    const sim = new Sim(seed, lossy);
    const b = await sim.node({ mss: 1024 });
    const a = await sim.node({ mss: 1024 });
    const qb = b.qp(1, 'srd', { maxRecvWr: 4096 });
    const qa = a.qp(1, 'srd', { rnrRetry: 7, rnrTimeoutMs: 1, maxSendWr: 4096 });
    const src = a.regMr(4096);
    const dst = b.regMr(4096 * 64);
    let rid = 0;
    const failed: number[] = [];
    for (let batch = 0; batch < 6; batch++) {
      for (let i = 0; i < 60; i++) a.postTo(qa, b.addr, qb.qpn, wr({ wrId: batch * 1000 + i, opcode: Opcode.Send }, [piece(src, 0, 1 + ((i * 977) % 2500))]));
      let posted = 0;
      const post = () => b.postRecv(qb, recv(rid, [piece(dst, (rid++ % 64) * 4096, 4096)]));
      for (; posted < 4; posted++) post();
      while (posted < 60) {
        await sim.advance(0.3);
        for (let k = 0; k < 2 && posted < 60; k++, posted++) post();
      }
      await sim.run(() => a.cq.wcs.length >= 60, { ms: 60_000 });
      failed.push(a.cq.take().filter((c) => c.status !== WcStatus.Success).length);
      b.cq.take();
      await sim.advance(0.2);
    }
    expect(failed).toEqual([0, 0, 0, 0, 0, 0]);
    expect(a.engine.counters.srdEpochs + b.engine.counters.srdEpochs).toBe(0);
  }, 60_000);
});

describe('srd: a turn held in part is asked for again', () => {
  for (const [name, imp] of [['reordering', reordering], ['lossy', lossy]] as const) it(`${name}: three senders, 150 Sends each, receives posted slowly: every Send completes and is delivered once`, async () => {
    const sim = new Sim(1, imp);
    const b = await sim.node({ mss: 1024 });
    const qb = b.qp(1, 'srd', { maxRecvWr: 4096 });
    const PER = 150;
    const dst = b.regMr(3 * PER * 4096);
    const senders: SimNode[] = [];
    for (let s = 0; s < 3; s++) {
      const a = await sim.node({ mss: 1024 });
      const qa = a.qp(1, 'srd', { rnrRetry: 7, rnrTimeoutMs: 1, maxSendWr: 4096 });
      const src = a.regMr(PER * 4096);
      for (let i = 0; i < PER; i++) {
        a.bytes(src, i * 4096, 3).set([s, i & 0xff, i >> 8]);
        a.postTo(qa, b.addr, qb.qpn, wr({ wrId: i, opcode: Opcode.Send }, [piece(src, i * 4096, Math.max(4, 1 + ((i * 7919 + s * 31) % 3000)))]));
      }
      senders.push(a);
    }
    let posted = 0;
    const post = () => b.postRecv(qb, recv(posted, [piece(dst, posted++ * 4096, 4096)]));
    while (posted < 4) post();
    while (posted < 3 * PER) {
      await sim.advance(0.3);
      for (let k = 0; k < 3 && posted < 3 * PER; k++) post();
    }
    await sim.run(() => senders.every((a) => a.cq.wcs.length >= PER), { ms: 600_000 });
    await sim.advance(50);
    const failed = senders.flatMap((a) => a.cq.take().filter((c) => c.status !== WcStatus.Success));
    expect(failed.length).toBe(0);
    const tags = new Set(b.cq.take().filter((c) => c.status === WcStatus.Success).map((c) => [...b.bytes(dst, Number(c.wrId) * 4096, 3)].join(':')));
    expect(tags.size).toBe(3 * PER);
  }, 120_000);
});

describe('srd: a message that needs no receive, behind a refused turn, is asked for again too', () => {
  it('a Send that finds no receive, then a Write and a Read: all complete once a receive is posted, the Write placed', async () => {
    const sim = new Sim(3, clean);
    const b = await sim.node();
    const a = await sim.node();
    const qb = b.qp(1, 'srd');
    const qa = a.qp(1, 'srd', { rnrRetry: 7, rnrTimeoutMs: 1, timeoutMs: 1000 });
    const src = a.regMr(4096);
    const dst = b.regMr(4096);
    a.bytes(src, 0, 16).fill(0x5a);
    b.bytes(dst, 2048, 16).fill(0x33);
    a.postTo(qa, b.addr, qb.qpn, wr({ wrId: 1, opcode: Opcode.Send }, [piece(src, 0, 16)]));
    a.postTo(qa, b.addr, qb.qpn, wr({ wrId: 2, opcode: Opcode.RdmaWrite, remoteAddr: dst.addr + 1024, rkey: dst.stag }, [piece(src, 0, 16)]));
    a.postTo(qa, b.addr, qb.qpn, wr({ wrId: 3, opcode: Opcode.RdmaRead, remoteAddr: dst.addr + 2048, rkey: dst.stag }, [piece(src, 512, 16)]));
    await sim.advance(3);
    b.postRecv(qb, recv(9, [piece(dst, 0, 64)]));
    await sim.run(() => a.cq.wcs.length >= 3, { ms: 5_000 });
    expect(a.cq.take().map((c) => [c.wrId, c.status])).toEqual([[1, WcStatus.Success], [2, WcStatus.Success], [3, WcStatus.Success]]);
    expect([...b.bytes(dst, 1024, 16)]).toEqual(new Array(16).fill(0x5a));
    expect([...a.bytes(src, 512, 16)]).toEqual(new Array(16).fill(0x33));
  });
});

describe('srd: an answer to our read behind a refused turn', () => {
  it('is asked for again and sent again: the read completes once the refused Send before it is received', async () => {
    const sim = new Sim(5, clean);
    const a = await sim.node();
    const b = await sim.node();
    const qa = a.qp(1, 'srd', { rnrRetry: 7, rnrTimeoutMs: 1, timeoutMs: 1000 });
    const qb = b.qp(1, 'srd', { rnrRetry: 7, rnrTimeoutMs: 1, timeoutMs: 1000 });
    const ra = a.regMr(4096);
    const rb = b.regMr(4096);
    b.bytes(rb, 2048, 16).fill(0x77);
    // b's Send to a (no receive posted at a: refused), then a's Read of b, answered after it.
    b.postTo(qb, a.addr, qa.qpn, wr({ wrId: 1, opcode: Opcode.Send }, [piece(rb, 0, 16)]));
    await sim.advance(0.2);
    a.postTo(qa, b.addr, qb.qpn, wr({ wrId: 2, opcode: Opcode.RdmaRead, remoteAddr: rb.addr + 2048, rkey: rb.stag }, [piece(ra, 512, 16)]));
    await sim.advance(3);
    a.postRecv(qa, recv(9, [piece(ra, 0, 64)]));
    await sim.run(() => a.cq.wcs.length >= 2 && b.cq.wcs.length >= 1, { ms: 5_000 });
    expect(b.cq.take().map((c) => [c.wrId, c.status])).toEqual([[1, WcStatus.Success]]);
    expect(a.cq.take().map((c) => [c.wrId, c.status]).sort()).toEqual([[2, WcStatus.Success], [9, WcStatus.Success]]);
    expect([...a.bytes(ra, 512, 16)]).toEqual(new Array(16).fill(0x77));
  });
});

/**
 * b reads `n` × `size` bytes of a over srd (a's timeoutMs 300) with its engine output held from
 * the post on: the reads reach a and are answered; no ack comes back until `held` is released.
 */
async function unackedReads(seed: number, n: number, size: number) {
  const sim = new Sim(seed, clean);
  const a = await sim.node();
  const b = await sim.node();
  const qa = a.qp(1, 'srd', { timeoutMs: 300 });
  const qb = b.qp(1, 'srd', { timeoutMs: 60_000 });
  const ra = a.regMr(n * size);
  const rb = b.regMr(n * size);
  const held: Outbound[] = [];
  b.link.held = held;
  for (let i = 0; i < n; i++) b.postTo(qb, a.addr, qa.qpn, wr({ wrId: i, opcode: Opcode.RdmaRead, remoteAddr: ra.addr + i * size, rkey: ra.stag }, [piece(rb, i * size, size)]));
  b.link.core.transmit(held.splice(0));
  return { sim, a, b, qa, qb, ra, rb, held };
}

describe('srd: answers kept for an RNR NAK', () => {
  it('an answer refused while another peer holds the out-of-order budget is sent again: the read and the Sends complete', async () => {
    const sim = new Sim(6, clean);
    const a = await sim.node({ bounds: { maxOooEntries: 8 } });
    const b = await sim.node();
    const qa = a.qp(1, 'srd', { rnrRetry: 7, rnrTimeoutMs: 50, timeoutMs: 1000 });
    const qb = b.qp(1, 'srd', { rnrRetry: 7, rnrTimeoutMs: 50, timeoutMs: 1000 });
    const ra = a.regMr(8192);
    const rb = b.regMr(8192);
    b.bytes(rb, 4096, 3000).fill(0x61);
    // Another peer fills a's budget with a gap it never closes (its message 1 never comes).
    const c: DeviceAddress = { transport: 'ghost', id: 'c' };
    for (let s = 2; s <= 20; s++) a.inject(c, taggedWrite(9, qa.qpn, s, ra.stag, ra.addr + 7000, 8));
    expect(a.engine.counters.oooRefused).toBeGreaterThan(0);
    // b's Send finds no receive (the turn refused), a's Read of b is answered behind it, b sends again.
    b.postTo(qb, a.addr, qa.qpn, wr({ wrId: 1, opcode: Opcode.Send }, [piece(rb, 0, 16)]));
    await sim.advance(0.2);
    a.postTo(qa, b.addr, qb.qpn, wr({ wrId: 2, opcode: Opcode.RdmaRead, remoteAddr: rb.addr + 4096, rkey: rb.stag }, [piece(ra, 4096, 3000)]));
    await sim.advance(0.5);
    b.postTo(qb, a.addr, qa.qpn, wr({ wrId: 3, opcode: Opcode.Send }, [piece(rb, 0, 16)]));
    for (let i = 0; i < 4; i++) a.postRecv(qa, recv(10 + i, [piece(ra, i * 64, 64)]));
    await sim.run(() => a.cq.wcs.length >= 3 && b.cq.wcs.length >= 2, { ms: 3_000 });
    expect(b.cq.take().map((c) => [c.wrId, c.status])).toEqual([[1, WcStatus.Success], [3, WcStatus.Success]]);
    expect(a.cq.take().filter((c) => c.wrId === 2).map((c) => c.status)).toEqual([WcStatus.Success]);
    expect([...a.bytes(ra, 4096, 3000)].every((x) => x === 0x61)).toBe(true);
  });

  it('a requester gone silent does not hold them for good: the watchdog ends the flow and lets them go', async () => {
    const { sim, a, qa } = await unackedReads(7, 16, 65536);
    await sim.advance(50);
    const flow = [...qa.flows.values()][0]!;
    expect(flow.inflight.size).toBeGreaterThan(0);
    await sim.advance(500);
    expect(a.engine.counters.timeouts).toBe(1);
    expect(flow.inflight.size).toBe(0);
  });

  it('a requester silent for a while, then back: its answers went, but its next Send is not failed by a new epoch', async () => {
    const { sim, a, b, qa, qb, ra, rb, held } = await unackedReads(8, 4, 4096);
    a.postRecv(qa, recv(20, [piece(ra, 0, 64)]));
    await sim.advance(500);
    expect(a.engine.counters.timeouts).toBe(1);
    b.link.held = undefined;
    b.link.core.transmit(held.splice(0));
    await sim.run(() => b.cq.wcs.length >= 4, { ms: 1_000 });
    b.postTo(qb, a.addr, qa.qpn, wr({ wrId: 10, opcode: Opcode.Send }, [piece(rb, 0, 16)]));
    await sim.run(() => b.cq.wcs.length >= 5 && a.cq.wcs.length >= 1, { ms: 2_000 });
    expect(b.cq.take().map((c) => [c.wrId, c.status])).toEqual([[0, 0], [1, 0], [2, 0], [3, 0], [10, WcStatus.Success]]);
    expect(a.cq.take().map((c) => [c.wrId, c.status])).toEqual([[20, WcStatus.Success]]);
  });
});

// srd flow epochs (src/rdmap/srd-epoch.ts): a flow that starts again at ssn 1 — its work failed
// (RNR retries spent, the watchdog) — does so in a new epoch that every frame carries, and an
// ack from before the restart acknowledges nothing of the new epoch's messages. Before, the
// restart was guessed from the ssn: after a failure the new epoch's first messages, arriving
// below the receiver's old turn (a lossy network reorders), were taken for copies and acked, and
// their Sends completed Success without being delivered (312 Success, 300 received). Whole
// drivers over the simulated network (test/sim); every Send carries its own tag, so a message
// delivered twice or not at all is seen.
import { describe, expect, it } from 'vitest';
import { Opcode, WcStatus } from '../../src/core/enums.js';
import type { Outbound } from '../../src/core/link.js';
import { clean, lossy } from '../sim/net.js';
import { Sim } from '../sim/sim.js';
import type { SimNode } from '../sim/node.js';
import { piece, recv, wr } from '../sim/work.js';
import type { MrRecord } from '../../src/rdmap/memory.js';
import type { EngineQp } from '../../src/rdmap/state.js';

const SLOT = 4096;
const SLOTS = 512;

/** Receives into slots of `dst`, each Send's tag read back as it completes. */
function receiver(b: SimNode, qb: EngineQp, dst: MrRecord) {
  let rid = 0;
  const tags: number[] = [];
  return {
    post: () => b.postRecv(qb, recv(rid, [piece(dst, (rid++ % SLOTS) * SLOT, SLOT)])),
    collect: () => {
      for (const c of b.cq.take()) {
        if (c.status !== WcStatus.Success) continue;
        const v = b.bytes(dst, (Number(c.wrId) % SLOTS) * SLOT, 2);
        tags.push(v[0]! | (v[1]! << 8));
      }
    },
    tags,
  };
}

/** Send `tag` from slot `i` of `src`, `len` bytes. */
function sendTagged(a: SimNode, qa: EngineQp, src: MrRecord, b: SimNode, qb: EngineQp, i: number, tag: number, len: number): void {
  a.bytes(src, i * SLOT, 2).set([tag & 0xff, tag >> 8]);
  a.postTo(qa, b.addr, qb.qpn, wr({ wrId: tag, opcode: Opcode.Send }, [piece(src, i * SLOT, len)]));
}

/** The tags of `a`'s Sends that completed Success, and how many failed. */
function outcome(a: SimNode): { ok: number[]; failed: number } {
  const ok: number[] = [];
  let failed = 0;
  for (const c of a.cq.take()) {
    if (c.status === WcStatus.Success) ok.push(Number(c.wrId));
    else failed++;
  }
  return { ok, failed };
}

describe('srd epochs', () => {
  for (const seed of [1, 4, 5]) it(`lossy, seed ${seed}: a sender whose Sends failed starts again, and every Send it reports Success was delivered, once`, async () => {
    const sim = new Sim(seed, lossy);
    const b = await sim.node({ mss: 1024 });
    const a = await sim.node({ mss: 1024 });
    const qb = b.qp(1, 'srd', { maxRecvWr: 4096 });
    // No RNR retry: the slow receives make the sender give up on Sends.
    const qa = a.qp(1, 'srd', { rnrRetry: 0, rnrTimeoutMs: 1, maxSendWr: 4096 });
    const src = a.regMr(60 * SLOT);
    const dst = b.regMr(SLOTS * SLOT);
    const r = receiver(b, qb, dst);
    const ok: number[] = [];
    let failed = 0;
    for (let batch = 0; batch < 6; batch++) {
      for (let i = 0; i < 60; i++) sendTagged(a, qa, src, b, qb, i, batch * 60 + i, 2 + ((i * 977) % 2500));
      // Receives come slowly: the first batch meets refusals, and some of its Sends fail.
      let posted = 0;
      for (; posted < 4; posted++) r.post();
      while (posted < 60) {
        await sim.advance(0.3);
        for (let k = 0; k < 2 && posted < 60; k++, posted++) r.post();
      }
      await sim.run(() => a.cq.wcs.length >= 60, { ms: 60_000 });
      const o = outcome(a);
      ok.push(...o.ok);
      failed += o.failed;
      r.collect();
      await sim.advance(0.2);
    }
    for (let i = 0; i < 64; i++) r.post();
    await sim.advance(200);
    r.collect();
    // Every Success was delivered; nothing was delivered twice.
    const got = new Set(r.tags);
    expect(got.size).toBe(r.tags.length);
    expect(ok.filter((t) => !got.has(t))).toEqual([]);
    // Sends failed (the point of the scenario), so the flow started again.
    expect(failed).toBeGreaterThan(0);
    expect(a.engine.counters.srdEpochs).toBeGreaterThan(0);
  }, 60_000);

  it('a peer that evicted our idle flow and sends first: our next Send starts our direction again at ssn 1, and both complete', async () => {
    const sim = new Sim(3, lossy);
    const bounds = { srdIdleMs: 100 };
    const a = await sim.node({ bounds: { ...bounds, maxSrdFlows: 1 } });
    const b = await sim.node({ bounds });
    const c = await sim.node({ bounds });
    const qa = a.qp(1, 'srd', { timeoutMs: 1000 });
    const qb = b.qp(1, 'srd', { timeoutMs: 1000 });
    const qc = c.qp(1, 'srd', { timeoutMs: 1000 });
    const ra = a.regMr(4096);
    const rb = b.regMr(4096);
    const rc = c.regMr(4096);
    for (let i = 0; i < 4; i++) a.postRecv(qa, recv(i, [piece(ra, i * 64, 64)]));
    b.postRecv(qb, recv(0, [piece(rb, 0, 64)]));
    b.postTo(qb, a.addr, qa.qpn, wr({ wrId: 1, opcode: Opcode.Send }, [piece(rb, 1024, 8)]));
    await sim.run(() => b.cq.wcs.length >= 1, { ms: 1_000 });
    await sim.advance(250);
    // c's Send makes a evict b's flow (a table of one, b's idle past 2×srdIdleMs).
    c.postTo(qc, a.addr, qa.qpn, wr({ wrId: 2, opcode: Opcode.Send }, [piece(rc, 0, 8)]));
    await sim.run(() => c.cq.wcs.length >= 1, { ms: 1_000 });
    expect(a.engine.counters.srdFlowsEvicted).toBe(1);
    // a sends first on its new flow (epoch 0, ssn 1), then b sends its second message.
    a.postTo(qa, b.addr, qb.qpn, wr({ wrId: 3, opcode: Opcode.Send }, [piece(ra, 1024, 8)]));
    await sim.run(() => b.cq.wcs.length >= 2, { ms: 1_000 });
    b.postTo(qb, a.addr, qa.qpn, wr({ wrId: 4, opcode: Opcode.Send }, [piece(rb, 1024, 8)]));
    await sim.run(() => a.cq.wcs.length >= 4 && b.cq.wcs.length >= 3, { ms: 3_000 });
    expect([...b.cq.take(), ...c.cq.take()].map((w) => [w.wrId, w.status])).toEqual([[1, WcStatus.Success], [0, WcStatus.Success], [4, WcStatus.Success], [2, WcStatus.Success]]);
  }, 30_000);

  it('a late copy after the last ack does not keep the receiver from taking the sender\'s idle restart: the next Sends are delivered', async () => {
    const sim = new Sim(4, clean);
    const bounds = { srdIdleMs: 100 };
    const b = await sim.node({ mss: 1024, bounds });
    const a = await sim.node({ mss: 1024, bounds });
    const qb = b.qp(1, 'srd', { maxRecvWr: 4096 });
    const qa = a.qp(1, 'srd', { maxSendWr: 4096, rnrTimeoutMs: 1 });
    const src = a.regMr(60 * SLOT);
    const dst = b.regMr(SLOTS * SLOT);
    const r = receiver(b, qb, dst);
    for (let i = 0; i < 10; i++) r.post();
    for (let i = 0; i < 10; i++) sendTagged(a, qa, src, b, qb, i, i, 100);
    await sim.run(() => a.cq.wcs.length >= 10, { ms: 1_000 });
    // Send 11, two segments: the first arrives with no receive posted (refused, RNR NAK), the
    // second is held back; the resend completes it, and the held copy arrives after the ack.
    const held: Outbound[] = [];
    a.link.held = held;
    sendTagged(a, qa, src, b, qb, 10, 10, 1500);
    a.link.held = undefined;
    expect(held.length).toBe(2);
    a.link.core.transmit([held[0]!]);
    await sim.advance(0.5);
    r.post();
    await sim.run(() => a.cq.wcs.length >= 11, { ms: 1_000 });
    await sim.advance(20);
    a.link.core.transmit([held[1]!]);
    await sim.advance(85);
    // a has been idle past srdIdleMs since the ack: its next Sends start again at ssn 1.
    for (let i = 0; i < 20; i++) r.post();
    for (let i = 0; i < 15; i++) sendTagged(a, qa, src, b, qb, 20 + i, 100 + i, 100);
    await sim.run(() => a.cq.wcs.length >= 26, { ms: 2_000 });
    await sim.advance(20);
    r.collect();
    const o = outcome(a);
    const got = new Set(r.tags);
    expect(o.failed).toBe(0);
    expect(o.ok.filter((t) => !got.has(t))).toEqual([]);
    expect(got.size).toBe(r.tags.length);
  }, 30_000);

  it('the watchdog gives up while the receiver\'s answers are held back: those answers, arriving late, acknowledge nothing of the next epoch', async () => {
    const sim = new Sim(2, lossy);
    const b = await sim.node({ mss: 1024 });
    const a = await sim.node({ mss: 1024 });
    const qb = b.qp(1, 'srd', { maxRecvWr: 4096 });
    const qa = a.qp(1, 'srd', { maxSendWr: 4096, timeoutMs: 50 });
    const src = a.regMr(60 * SLOT);
    const dst = b.regMr(SLOTS * SLOT);
    const r = receiver(b, qb, dst);
    for (let i = 0; i < 100; i++) r.post();
    // b takes and delivers 20 Sends, but its acks are held: a hears nothing and gives up.
    const held: Outbound[] = [];
    b.link.held = held;
    for (let i = 0; i < 20; i++) sendTagged(a, qa, src, b, qb, i, i, 100);
    await sim.run(() => a.cq.wcs.length >= 20, { ms: 5_000 });
    const first = outcome(a);
    expect(first.failed).toBe(20);
    r.collect();
    expect(r.tags.length).toBe(20);
    // The next epoch's 30 Sends; b's old acks (every one of the 20 taken) arrive before them.
    b.link.held = undefined;
    b.link.core.transmit(held);
    for (let i = 0; i < 30; i++) sendTagged(a, qa, src, b, qb, i, 100 + i, 100);
    await sim.run(() => a.cq.wcs.length >= 30, { ms: 5_000 });
    await sim.advance(20);
    r.collect();
    const next = outcome(a);
    const got = new Set(r.tags);
    expect(got.size).toBe(r.tags.length);
    expect(next.ok.filter((t) => !got.has(t))).toEqual([]);
    expect(next.ok.length).toBe(30);
  }, 30_000);
});

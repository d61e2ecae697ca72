// What a device that holds its input (RdmapEngine.holdReceive) sends to keep its peers'
// watchdogs waiting: one not-ready word per peer device each NOT_READY_MS, read by that peer for
// every flow it has to this device — not one per flow, which at many QPs was the bulk of the
// traffic of a device that takes nothing in.
import { describe, expect, it } from 'vitest';
import type { DeviceAddress } from '../../src/core/address.js';
import { Opcode, QpState, WcStatus } from '../../src/core/enums.js';
import { DEVICE_QPN, type Inbound } from '../../src/core/frame.js';
import type { Outbound } from '../../src/core/link.js';
import { NOT_READY_MS } from '../../src/rdmap/not-ready.js';
import { clean } from '../sim/net.js';
import type { SimNode } from '../sim/node.js';
import { Sim } from '../sim/sim.js';
import { piece, wr } from '../sim/work.js';

function holdInput(n: SimNode, on: boolean): void {
  n.ep.rxHold.held = on;
  if (!on) n.ep.windowOpened();
  n.driver.run((now) => n.engine.holdReceive(on, now));
}

/** A source the link cannot reach. */
const ghost = (id: string): DeviceAddress => ({ transport: 'ghost', id });

/** The device-wide not-ready word, from each of `from`. */
const words = (from: readonly DeviceAddress[]): Inbound[] => from.map((f) => ({ from: f, frame: { kind: 'ack', srcQpn: DEVICE_QPN, dstQpn: DEVICE_QPN, ssn: 0 } }));

const notReadyWords = (out: readonly Outbound[]): number => out.filter((o) => o.frame.kind === 'ack' && o.frame.ssn === 0).length;

describe('not-ready words while a device holds its input', () => {
  it('one per peer device each NOT_READY_MS, however many flows; every flow of those peers waits', async () => {
    const sim = new Sim(11, clean);
    const a = await sim.node();
    const c = await sim.node();
    const b = await sim.node();
    const N = 24;
    const pairs = [];
    for (let q = 1; q <= N; q++) pairs.push({ from: q % 3 === 0 ? c : a, qps: await sim.connect(q % 3 === 0 ? c : a, b, { timeoutMs: 1_000 }, q) });
    const mrs = new Map<SimNode, ReturnType<SimNode['regMr']>>([[a, a.regMr(4096)], [c, c.regMr(4096)]]);
    const dst = b.regMr(4096);
    let sent = 0;
    b.link.tap = (out) => void (sent += notReadyWords(out));
    holdInput(b, true);
    for (const [i, { from, qps: [qa] }] of pairs.entries()) {
      from.post(qa, wr({ wrId: i + 1, opcode: Opcode.RdmaWrite, remoteAddr: dst.addr + 16 * i, rkey: dst.stag }, [piece(mrs.get(from)!, 0, 16)]));
    }
    const ticks = 20;
    await sim.advance(ticks * NOT_READY_MS);
    // Two peers, each told once per tick (and once when the hold began).
    expect(sent).toBeLessThanOrEqual(2 * (ticks + 1));
    expect(sent).toBeGreaterThanOrEqual(2 * ticks);
    expect(b.engine.counters.notReadySent).toBe(sent);
    holdInput(b, false);
    await sim.settle();
    for (const { from, qps: [qa] } of pairs) expect(qa.state).toBe(QpState.Rts);
    const done = [...a.cq.take(), ...c.cq.take()];
    expect(done.length).toBe(N);
    expect(done.every((w) => w.status === WcStatus.Success)).toBe(true);
    expect(a.engine.counters.timeouts + c.engine.counters.timeouts).toBe(0);
  });
});

// The table of peer ends heard saying they hold: a source this device has no flow to is not
// remembered (a table anyone could fill would let forged words push a real peer out, and its
// flows' watchdogs would fire while it holds); past 4096 real peer ends the least recently heard
// goes, and a peer still holding is back with its next word.
describe('the peer ends remembered as not ready', () => {
  it('forged words from 5,000 sources without a flow each 100 ms are ignored: the real peer that holds still keeps its flow waiting', async () => {
    const sim = new Sim(12, clean);
    const a = await sim.node();
    const b = await sim.node();
    const [qa] = await sim.connect(a, b, { timeoutMs: 1_000 });
    const src = a.regMr(4096);
    const dst = b.regMr(4096);
    holdInput(b, true);
    a.post(qa, wr({ wrId: 1, opcode: Opcode.RdmaWrite, remoteAddr: dst.addr, rkey: dst.stag }, [piece(src, 0, 16)]));
    const forged = words(Array.from({ length: 5000 }, (_, i) => ghost(`forged${i}`)));
    const ticks = 40;
    for (let t = 0; t < ticks; t++) {
      a.driver.frames(forged);
      await sim.advance(100);
    }
    expect(a.engine.counters.timeouts).toBe(0);
    expect(qa.state).toBe(QpState.Rts);
    expect(a.engine.counters.notReadyRefused).toBe(ticks * forged.length);
    expect(a.engine.notReadyPeers).toBe(1);
    holdInput(b, false);
    await sim.settle();
    expect(a.cq.take().map((w) => [w.wrId, w.status])).toEqual([[1, WcStatus.Success]]);
  });

  it('past 4096 peer ends with flows the least recently heard goes (notReadyEvicted); a QP destroyed takes its peers\' entries', async () => {
    const sim = new Sim(13, clean);
    const a = await sim.node();
    const qa = a.qp(1, 'srd');
    const peers = Array.from({ length: 4096 + 100 }, (_, i) => ghost(`peer${i}`));
    a.driver.run(() => {
      for (const p of peers) a.engine.srdFlow(qa, p, 1);
    });
    a.driver.frames(words(peers));
    expect(a.engine.notReadyPeers).toBe(4096);
    expect(a.engine.counters.notReadyEvicted).toBe(100);
    expect(a.engine.counters.notReadyRefused).toBe(0);
    // The last heard is still there; the first heard went, and comes back with its next word.
    a.driver.frames(words([peers[peers.length - 1]!]));
    expect(a.engine.counters.notReadyEvicted).toBe(100);
    a.driver.frames(words([peers[0]!]));
    expect(a.engine.counters.notReadyEvicted).toBe(101);
    expect(a.engine.notReadyPeers).toBe(4096);
    a.driver.run(() => a.engine.destroyQp(qa));
    expect(a.engine.notReadyPeers).toBe(0);
    a.driver.frames(words([peers[1]!]));
    expect(a.engine.notReadyPeers).toBe(0);
    expect(a.engine.counters.notReadyRefused).toBe(1);
  });
});

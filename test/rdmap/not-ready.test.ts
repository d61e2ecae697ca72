// What a device that holds its input (RdmapEngine.holdReceive) sends to keep its peers'
// watchdogs waiting: one not-ready word per peer device each NOT_READY_MS, read by that peer for
// every flow it has to this device — not one per flow, which at many QPs was the bulk of the
// traffic of a device that takes nothing in.
import { describe, expect, it } from 'vitest';
import { Opcode, QpState, WcStatus } from '../../src/core/enums.js';
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

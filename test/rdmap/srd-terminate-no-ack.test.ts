// A peer's Terminate on an srd flow without an ack (AckPresent clear) made the responder look for
// "the failed work" with a search of the QP's whole send queue (responder.ts 'terminate'), then
// restart the flow: one such Terminate per epoch (ssn 1 each time) made every frame cost the
// send queue's length — 2,000 of them with 60,000 Writes to another peer queued took 1,558 ms
// against 51 ms with an ack (found by an audit; this test failed then). srd now looks at the
// flow's own work (oldestOf): the send queue is not searched at all, whatever it holds.
import { describe, expect, it } from 'vitest';
import type { DeviceAddress } from '../../src/core/address.js';
import { Opcode } from '../../src/core/enums.js';
import type { SegFrame } from '../../src/core/frame.js';
import { ctlFrame } from '../../src/rdmap/segmenter.js';
import { encodeTerminate, Qn, RdmapOpcode } from '../../src/wire/rdmap.js';
import { TERM } from '../../src/wire/terminate.js';
import { clean } from '../sim/net.js';
import { Sim } from '../sim/sim.js';
import { piece, wr } from '../sim/work.js';

const ghost = (id: string): DeviceAddress => ({ transport: 'ghost', id });

function term(src: number, dst: number, epoch: number, withAck: boolean): SegFrame {
  const f = ctlFrame({
    srcQpn: src, dstQpn: dst, ssn: 1, opcode: RdmapOpcode.Terminate, qn: Qn.Terminate, msn: 1, bodyLen: 4,
    ...(withAck ? { ack: 0 } : {}),
    body: (b, o) => encodeTerminate({ ...TERM.invalidStag, m: false, d: false }, b, o),
  });
  f.env.epoch = epoch & 63;
  return f;
}

/** Terminates for an srd QP with `queued` Writes to another peer out; returns the send-queue searches they made. */
async function run(withAck: boolean, queued: number, n: number): Promise<number> {
  const sim = new Sim(5, clean);
  const a = await sim.node();
  const b = await sim.node();
  const qb = b.qp(1, 'srd', { maxSendWr: 1 << 16 });
  const src = b.regMr(64);
  // Writes to another peer, sent and never acknowledged (the link holds them): not done.
  b.link.held = [];
  for (let i = 0; i < queued; i++) b.postTo(qb, a.addr, 1, wr({ wrId: i, opcode: Opcode.RdmaWrite, remoteAddr: 0, rkey: 1, signaled: false }, [piece(src, 0, 8)]));
  b.link.held = [];
  const x = ghost('x');
  const sq = (qb as unknown as { sq: { find: (...a: unknown[]) => unknown } }).sq;
  const find = sq.find.bind(sq);
  let searches = 0;
  sq.find = (...a: unknown[]) => (searches++, find(...a));
  for (let k = 0; k < n; k++) b.inject(x, [term(9, qb.qpn, k, withAck)]);
  expect(b.engine.counters.srdFlowsFailed).toBe(n);
  return searches;
}

describe('srd: Terminates without an ack, one per epoch', () => {
  it('2,000 of them, 60,000 Writes to another peer queued: each restarts its flow, none searches the send queue', async () => {
    expect(await run(false, 60_000, 2000)).toBe(0);
    expect(await run(true, 60_000, 2000)).toBe(0);
  }, 120_000);
});

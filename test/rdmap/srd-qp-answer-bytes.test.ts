// maxAnswerBytes (and the IRD) are per srd flow, and an srd QP holds up to maxSrdFlows (1024)
// flows, 64 per peer address. A peer holding one rkey with RemoteRead that read from many source
// QPNs (and a few source ports) and never acknowledged made the QP keep a copy of every answer
// (the deregister fence) per flow: flows × maxAnswerBytes per QP (64 GiB at the defaults; here
// 512 MiB held with a 2 MiB flow budget — found by an audit, this test failed then). Now
// maxQpAnswerBytes bounds a QP's flows together: a read past it fails its flow (readsRefused).
import { describe, expect, it } from 'vitest';
import type { DeviceAddress } from '../../src/core/address.js';
import type { Inbound } from '../../src/core/frame.js';
import { ctlFrame } from '../../src/rdmap/segmenter.js';
import { encodeReadRequestV, Qn, RdmapOpcode, readRequestVLength } from '../../src/wire/rdmap.js';
import { clean } from '../sim/net.js';
import { Sim } from '../sim/sim.js';

const ghost = (id: string): DeviceAddress => ({ transport: 'ghost', id });

describe('srd: read answers held by one QP over its flows', () => {
  it('one peer (4 source addresses × 64 source QPNs) that never acks: answer copies held by one QP stay within a per-QP bound', async () => {
    const sim = new Sim(41, clean);
    const LEN = 1 << 20;
    // Per flow: 2 MiB of answers (the default is 64 MiB).
    const b = await sim.node({ bounds: { maxAnswerBytes: 2 << 20, maxQpAnswerBytes: 16 << 20 } });
    const qb = b.qp(1, 'srd', { timeoutMs: 60_000 });
    const src = b.regMr(LEN);
    const readV = (srcQpn: number, ssn: number) => {
      const v = { srcs: [{ stag: src.stag, to: src.addr, len: LEN }], sinks: [{ stag: 9, to: 0, len: LEN }] };
      const f = ctlFrame({ srcQpn, dstQpn: 1, ssn, opcode: RdmapOpcode.ReadRequestV, qn: Qn.ReadRequest, msn: ssn, bodyLen: readRequestVLength(v), body: (bb, o) => encodeReadRequestV(v, bb, o) });
      f.env.epoch = 0;
      return f;
    };
    const ab0 = process.memoryUsage().arrayBuffers;
    for (let h = 0; h < 4; h++) {
      const from = ghost(`h${h}`);
      for (let q = 0; q < 64; q++) {
        const batch: Inbound[] = [];
        for (let ssn = 1; ssn <= 4; ssn++) batch.push({ from, frame: readV(100 + q, ssn) });
        b.driver.frames(batch);
      }
    }
    let held = 0;
    let flows = 0;
    for (const f of qb.flows.values()) {
      held += f.answerBytes;
      flows++;
    }
    expect(process.memoryUsage().arrayBuffers - ab0).toBeLessThan(64 << 20);
    expect(flows).toBeGreaterThan(1);
    for (const f of qb.flows.values()) expect(f.answerBytes).toBeLessThanOrEqual(2 << 20);
    // The QP's flows together: within maxQpAnswerBytes, its running total the flows' sum.
    expect(held).toBeLessThanOrEqual(16 << 20);
    expect(held).toBeGreaterThanOrEqual(8 << 20);
    expect((qb as unknown as { answers: { bytes: number } }).answers.bytes).toBe(held);
    expect(b.engine.counters.readsRefused).toBeGreaterThan(0);
  }, 120_000);
});

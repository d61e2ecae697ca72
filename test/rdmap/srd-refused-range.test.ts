// srd's refused ssns kept as one range per flow (srd-refusal.ts): the range must follow the
// turn. A range left behind the turn (its low end at an ssn taken while another was refused)
// was stretched by the next refusal over a turn never refused, and the flow took its next
// batch for a restart: every batch after one that met refusals failed again (RetryExcErr,
// 40-48 of 60). One sender over a lossy network, 6 batches of 60 Sends, receives posted slowly.
// The first batch still loses Sends to RNR exhaustion under loss: an open problem of srd
// (docs/resource-bounds.md), not what this pins.
import { describe, expect, it } from 'vitest';
import { Opcode, WcStatus } from '../../src/core/enums.js';
import { lossy } from '../sim/net.js';
import { Sim } from '../sim/sim.js';
import { piece, recv, wr } from '../sim/work.js';

describe('srd: the refused range follows the turn', () => {
  for (const seed of [1, 4]) it(`lossy, seed ${seed}: after the first batch every batch completes, and no restart is seen`, async () => {
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
    expect(failed.slice(1)).toEqual([0, 0, 0, 0, 0]);
    expect(b.engine.counters.srdEpochs).toBe(0);
  }, 60_000);
});

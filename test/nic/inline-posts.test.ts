// The inline port (workers: 0, inproc devices): the posts of one run of JavaScript join one
// driver step, so the engine's output for all of them reaches the link in one hand-off, when
// that run ends — not one step (and one poll of output, events and timers) per post.
import { describe, expect, it } from 'vitest';
import { Opcode, WcStatus } from '../../src/index.js';
import type { Outbound } from '../../src/core/link.js';
import { InlinePort } from '../../src/nic/inline-port.js';
import { ALL, closeAll, pair, take } from '../verbs/helpers.js';

describe('inline port: posts in one run of JavaScript', () => {
  it('reach the link in one hand-off after the run, and all complete', async () => {
    const [a, b] = await pair();
    try {
      const nic = a.dev.nic;
      expect(nic).toBeInstanceOf(InlinePort);
      const link = (nic as InlinePort).link;
      const handoffs: number[] = [];
      const transmit = link.transmit.bind(link);
      link.transmit = (out: readonly Outbound[]) => {
        handoffs.push(out.length);
        transmit(out);
      };
      const src = a.pd.regMr(4096, ALL);
      const dst = b.pd.regMr(4096, ALL);
      for (let i = 0; i < 8; i++) {
        a.qp.postSend({ wrId: i, opcode: Opcode.RdmaWrite, sgList: [{ addr: src.addr + i * 64, length: 64, lkey: src.lkey }], remoteAddr: dst.addr + i * 64, rkey: dst.rkey });
      }
      // Nothing yet: the run that posted has not ended.
      expect(handoffs).toEqual([]);
      await Promise.resolve();
      expect(handoffs).toEqual([8]);
      const wcs = await take(a.cq, 8);
      expect(wcs.map((w) => [Number(w.wrId), w.status])).toEqual([...Array(8).keys()].map((i) => [i, WcStatus.Success]));
    } finally {
      await closeAll(a, b);
    }
  });
});

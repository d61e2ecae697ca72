// QpLink's queue of sends waiting for a send slot is bounded (maxQueued): a peer that takes
// nothing could otherwise grow it without limit. Past it send() rejects with ERR_QUEUE_FULL,
// counted in link.counters.sendsRefused; what was queued still goes, in order. Real devices (inproc).
import { afterEach, describe, expect, it } from 'vitest';
import { QpLink } from '../../src/dedup/qp-link.js';
import { qpLinkNode } from './qp-link-node.js';
import { within } from '../lifecycle/within.js';

const cleanup: Array<() => unknown> = [];
afterEach(async () => {
  for (const f of cleanup.splice(0).reverse()) await f();
});

const node = () => qpLinkNode(cleanup);

describe('QpLink send queue', () => {
  it('rejects sends past maxQueued with ERR_QUEUE_FULL, counted; the queued ones arrive in order', async () => {
    const s = await node();
    const c = await node();
    await Promise.all([c.qp.connect({ address: s.d.address, qpn: s.qp.qpn }), s.qp.connect({ address: c.d.address, qpn: c.qp.qpn })]);
    const sLink = QpLink.open(s.qp, s.cq, s.pd, { recvBuffers: 32 });
    const cLink = QpLink.open(c.qp, c.cq, c.pd, { sendSlots: 2, maxQueued: 16 });
    cleanup.push(() => sLink.close(), () => cLink.close());
    const got: number[] = [];
    sLink.onMessage((b) => void got.push(b[0]!));
    // One synchronous burst: 2 go into the send slots, 16 wait, the other 22 are refused.
    const results = await Promise.all(Array.from({ length: 40 }, (_, i) => cLink.send(Uint8Array.of(i)).then(() => 'ok', (e: { code?: string }) => e.code)));
    expect(results.filter((r) => r === 'ok')).toHaveLength(18);
    expect(results.slice(18).every((r) => r === 'ERR_QUEUE_FULL')).toBe(true);
    expect(cLink.counters.sendsRefused).toBe(22);
    await within((async () => {
      while (got.length < 18) await new Promise((r) => setTimeout(r, 5));
    })(), 5000);
    expect(got).toEqual(Array.from({ length: 18 }, (_, i) => i));
  });
});

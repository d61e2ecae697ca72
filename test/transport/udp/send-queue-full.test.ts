// The engine emits what is posted at once, so a deep send queue (maxSendWr up to 65,536, and
// several QPs to one peer) hands the udp core more payloads for one peer than that peer's
// transport context queues (maxSendQueue). Those were lost and the peer failed: a posting
// within the QP's caps completed RetryExcErr. Now the core holds what the queue has no room
// for, in order, and sends it as the queue drains. Driven through the whole driver (test/sim).
import { describe, expect, it } from 'vitest';
import { Opcode, WcStatus } from '../../../src/core/enums.js';
import { clean, lossy } from '../../sim/net.js';
import { Sim } from '../../sim/sim.js';
import { piece, wr } from '../../sim/work.js';

describe('a send queue deeper than the transport queue for its peer', () => {
  it.each([['clean', clean], ['lossy', lossy]] as const)('%s: 600 writes through a queue of 16 all complete, in order, none lost', async (_, imp) => {
    const sim = new Sim(31, imp);
    const a = await sim.node({ context: { maxSendQueue: 16 } });
    const b = await sim.node();
    const [qa] = await sim.connect(a, b, { maxSendWr: 1024 });
    const src = a.regMr(1 << 16);
    const dst = b.regMr(1 << 16);
    for (let i = 0; i < 600; i++) a.bytes(src, i * 64, 64).fill(i & 255);
    for (let i = 0; i < 600; i++) a.post(qa, wr({ wrId: i, opcode: Opcode.RdmaWrite, remoteAddr: dst.addr + i * 64, rkey: dst.stag }, [piece(src, i * 64, 64)]));
    await sim.settle();
    const wcs = a.cq.take();
    expect(wcs.map((w) => w.status)).toEqual(new Array(600).fill(WcStatus.Success));
    expect(wcs.map((w) => w.wrId)).toEqual([...Array(600).keys()]);
    expect(a.link.core.counters.undeliverable).toBe(0);
    expect(a.link.core.counters.txHeld).toBeGreaterThan(0);
    expect(b.bytes(dst, 0, 600 * 64)).toEqual(a.bytes(src, 0, 600 * 64));
  });

  it('a peer that stops answering: the held payloads go with its context, every write completes in error, nothing stays held', async () => {
    const sim = new Sim(32, clean);
    const a = await sim.node({ context: { maxSendQueue: 16 } });
    const b = await sim.node();
    const [qa] = await sim.connect(a, b, { maxSendWr: 1024 });
    const src = a.regMr(1 << 18);
    const dst = b.regMr(1 << 18);
    sim.net.filter = (_from, to) => to.port !== (b.addr.port as number);
    // 1 KiB each: one payload per write, past the queue of 16.
    for (let i = 0; i < 200; i++) a.post(qa, wr({ wrId: i, opcode: Opcode.RdmaWrite, remoteAddr: dst.addr + i * 1024, rkey: dst.stag }, [piece(src, i * 1024, 1024)]));
    await sim.settle();
    const wcs = a.cq.take();
    expect(wcs).toHaveLength(200);
    expect(wcs.every((w) => w.status !== WcStatus.Success)).toBe(true);
    expect(a.link.core.counters.txHeld).toBeGreaterThan(0);
    expect(a.link.core.waiting).toBe(0);
  });
});

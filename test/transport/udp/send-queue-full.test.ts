// The engine emits what is posted at once, so a deep send queue (maxSendWr up to 65,536, and
// several QPs to one peer) hands the udp core more payloads for one peer than that peer's
// transport context queues (maxSendQueue). Those were lost and the peer failed: a posting
// within the QP's caps completed RetryExcErr. Now the core holds what the queue has no room
// for, in order, and sends it as the queue drains. Driven through the whole driver (test/sim).
import { describe, expect, it } from 'vitest';
import type { DeviceAddress } from '../../../src/core/address.js';
import { Opcode, WcStatus } from '../../../src/core/enums.js';
import { TransportContext } from '../../../src/transport/udp/context.js';
import { UdpCore } from '../../../src/transport/udp/core.js';
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

  it('held payloads go to the context that refused them, not to the one of a peer that restarted meanwhile', () => {
    const to: DeviceAddress = { transport: 'udp', host: '127.0.0.1', port: 4791 };
    let room = 0;
    let ctx = 7;
    const sent: number[] = [];
    const core = new UdpCore(1200, { send: (_p, _b, dst) => void sent.push(dst), release: () => {}, room: () => room, incarnationOf: () => ctx });
    core.start({ frames: () => {}, peerLost: () => {} } as never);
    // Acks of 60 QPs, each its own payload (a payload carries one QP pair): none fits.
    const ack = (q: number) => ({ to, frame: { kind: 'ack' as const, srcQpn: q, dstQpn: q, ssn: 1 } });
    core.transmit(Array.from({ length: 60 }, (_, q) => ack(q + 1)));
    core.seal();
    expect(sent).toEqual([]);
    const held = core.waiting;
    expect(held).toBeGreaterThan(0);
    // Room again in the same context: they go, in order.
    room = 10;
    core.seal();
    expect(sent).toEqual(Array.from({ length: 10 }, (_, i) => i + 1));
    // The peer restarted: a new context, all the room it wants — the rest are not its.
    ctx = 8;
    room = 1000;
    const before = core.counters.undeliverable;
    core.seal();
    expect(sent).toHaveLength(10);
    expect(core.waiting).toBe(0);
    expect(core.counters.undeliverable - before).toBe(held - 10);
  });

  it('a context keeps its incarnation through a restart that keeps its payloads (requeue), not through one that fails them, and a new one has its own', () => {
    const c = new TransportContext(5, 0);
    const first = c.incarnation;
    c.restart(6, 9, 'requeue', 0);
    expect(c.incarnation).toBe(first);
    c.restart(7, 9, 'fail', 0);
    expect(c.incarnation).not.toBe(first);
    expect(new TransportContext(5, 0).incarnation).not.toBe(c.incarnation);
  });
});

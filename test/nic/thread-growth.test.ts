// A NIC thread owns its device's arena: a registration it serves may grow the shared memory.
// The application's view of that memory (dev.dataPlane.u8(), which features above verbs such
// as the dedup sender copy through with copyWithin, a call that clamps silently at the view's
// end) must cover every region regMr hands back, or bytes copied into a new region go nowhere
// and the region's zeros go out on the wire instead.
import { afterEach, describe, expect, it } from 'vitest';
import { Access, Opcode, WcStatus } from '../../src/index.js';
import { ALL, type Side, closeAll, connectPair, fill, side, take } from '../verbs/helpers.js';

const open: Side[] = [];
afterEach(async () => {
  await closeAll(...open.splice(0));
});

describe('NIC thread: a registration that grows device memory', () => {
  it('udp, workers 1: the application view covers the new region, and bytes copied into it through that view are the bytes a write sends', async () => {
    const [a, b] = await connectPair(await side({ device: { transport: 'udp', workers: 1 } }), await side({ device: { transport: 'udp', workers: 1 } }));
    open.push(a, b);
    const n = 1 << 20;
    const src = a.pd.regMr(n, Access.LocalWrite);
    fill(src.buffer, 7);
    // Past the default arena (16 MiB): the NIC thread grows the memory to place it.
    const before = a.dev.dataPlane.u8().length;
    const big = a.pd.regMr(before + (8 << 20), Access.LocalWrite);
    expect(big.addr + big.length).toBeGreaterThan(before); // it did grow
    const u8 = a.dev.dataPlane.u8();
    expect(u8.length).toBeGreaterThanOrEqual(big.addr + big.length);
    // The dedup sender's copy: from one region into another, inside device memory.
    const at = big.addr + big.length - n;
    u8.copyWithin(at, src.addr, src.addr + n);
    const dst = b.pd.regMr(n, ALL);
    a.qp.postSend({ wrId: 1n, opcode: Opcode.RdmaWrite, sgList: [{ addr: at, length: n, lkey: big.lkey }], remoteAddr: dst.addr, rkey: dst.rkey });
    const [wc] = await take(a.cq, 1, 10_000);
    expect(wc!.status).toBe(WcStatus.Success);
    expect(Buffer.compare(dst.buffer, src.buffer)).toBe(0);
  });
});

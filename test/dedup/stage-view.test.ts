// A dedup sender's stage is a block of device memory it keeps (stage-pool.ts), registered per send
// as a view (regMr of a Uint8Array over dev.dataPlane). The NIC registers such a view as the
// device memory it is — not as an external region reached through the view — so its CRC and hash
// kernels read the frames in place (an external region's view goes stale at the memory's next
// growth, and every frame then takes the copy path), and a deregister leaves the block to its owner.
import { afterEach, describe, expect, it } from 'vitest';
import { Access, Opcode, WcStatus } from '../../src/index.js';
import { ALL, type Side, closeAll, connectPair, fill, side, take } from '../verbs/helpers.js';

const open: Side[] = [];
afterEach(async () => {
  await closeAll(...open.splice(0));
});

describe('a view of device memory registered with regMr', () => {
  for (const transport of ['tcp', 'udp'] as const) {
    for (const workers of [0, 1]) {
      it(`${transport}, workers ${workers}: is device memory (not external), sends its bytes after the memory grew, and its deregister frees nothing`, async () => {
        const [a, b] = await connectPair(await side({ device: { transport, workers } }), await side({ device: { transport, workers } }));
        open.push(a, b);
        const n = 1 << 20;
        const dp = a.dev.dataPlane;
        const addr = dp.alloc(n);
        const mr = a.pd.regMr(dp.u8().subarray(addr, addr + n), Access.LocalWrite);
        expect(mr.external).toBe(false);
        expect(mr.addr).toBe(addr);
        // Grow the memory past the view's buffer (a later allocation of the same process).
        const before = dp.u8().length;
        const big = a.pd.regMr(before + (8 << 20), Access.LocalWrite);
        const want = fill(new Uint8Array(n), 11);
        dp.u8().set(want, addr);
        const dst = b.pd.regMr(n, ALL);
        a.qp.postSend({ wrId: 1n, opcode: Opcode.RdmaWrite, sgList: [{ addr, length: n, lkey: mr.lkey }], remoteAddr: dst.addr, rkey: dst.rkey });
        const [wc] = await take(a.cq, 1, 10_000);
        expect(wc!.status).toBe(WcStatus.Success);
        expect(Buffer.compare(dst.buffer, want)).toBe(0);
        mr.deregister();
        big.deregister();
        expect(dp.sizeOf(addr)).toBeGreaterThanOrEqual(n); // still the registrant's
        dp.free(addr);
        expect(dp.sizeOf(addr)).toBeUndefined();
      });
    }
  }
});

// Where a tagged segment's payload is copied from (src/rdmap/placement.ts). A payload outside the
// responder's device memory — over inproc, the requester's own region — aligned as its target is
// copied once, after the kernel's checks (PLACE_SRC_CALLER); a misaligned one is staged (V8 would
// copy it into shared memory byte by byte). Either way the bytes, the bounds and the counters
// must come out the same, into a device-memory region and into an external one.
import { afterEach, describe, expect, it } from 'vitest';
import { Access, WcStatus } from '../../src/index.js';
import { closeAll, fill, pair, type Side } from './helpers.js';

const open: Side[] = [];
afterEach(async () => {
  await closeAll(...open.splice(0));
});

const RW = Access.LocalWrite | Access.RemoteWrite;
const N = 40_000;

describe('tagged placement from outside device memory (inproc)', () => {
  it.each([
    ['aligned: copied once, nothing staged', 0, 0, false],
    ['source misaligned by 3: staged', 3, 0, true],
    ['both at odd offsets, equally aligned: copied once', 5, 13, false],
  ])('%s', async (_name, srcOff, dstOff, staged) => {
    const [a, b] = await pair();
    open.push(a, b);
    const src = a.pd.regMr(N + 64, RW);
    fill(src.buffer, 11);
    const dst = b.pd.regMr(N + 64, RW);
    const ext = b.pd.regMr(new Uint8Array(N + 64), RW);
    const before = b.dev.stats();
    for (const target of [dst, ext]) {
      const wc = await a.qp.write({ sgList: [{ addr: src.addr + srcOff, length: N, lkey: src.lkey }], remoteAddr: target.addr + dstOff, rkey: target.rkey });
      expect(wc.status).toBe(WcStatus.Success);
      expect(Buffer.compare(target.buffer.subarray(dstOff, dstOff + N), src.buffer.subarray(srcOff, srcOff + N))).toBe(0);
      // Nothing around the target range was touched.
      expect(target.buffer.subarray(0, dstOff).every((x) => x === 0)).toBe(true);
      expect(target.buffer.subarray(dstOff + N).every((x) => x === 0)).toBe(true);
    }
    const after = b.dev.stats();
    expect(after.directBytes - before.directBytes).toBe(N);
    expect(after.indirectBytes - before.indirectBytes).toBe(N);
    if (staged) expect(after.stagedBytes - before.stagedBytes).toBe(2 * N);
    else expect(after.stagedBytes - before.stagedBytes).toBe(0);
  });

  it('a write past the end of its target is refused with nothing written, on the copy-once path too', async () => {
    const [a, b] = await pair();
    open.push(a, b);
    const src = a.pd.regMr(4096, RW);
    fill(src.buffer, 5);
    const dst = b.pd.regMr(4096, RW);
    const wc = await a.qp.write({ sgList: [{ addr: src.addr, length: 4096, lkey: src.lkey }], remoteAddr: dst.addr + 8, rkey: dst.rkey }).catch((e: { wc?: { status: number } }) => e.wc);
    expect(wc?.status).not.toBe(WcStatus.Success);
    expect(dst.buffer.every((x) => x === 0)).toBe(true);
  });
});

// core/detach.ts: the predicates that pick the views a link must copy before memory is reused.
import { describe, expect, it } from 'vitest';
import { detachPayload, ownsPieces, ownsShared, ownsViewsOf } from '../../src/core/detach.js';

describe('ownsPieces', () => {
  it('claims exactly the views that meet a piece, against a plain scan, for 2000 random pieces and views', () => {
    const dm = new Uint8Array(new SharedArrayBuffer(1 << 16));
    // A plain buffer: a shared one would also meet the device ranges by number (a harmless extra copy).
    const ext = new Uint8Array(1 << 12).subarray(100);
    const extRec = { addr: 1 << 20, ext };
    let seed = 7;
    const rnd = (n: number) => ((seed = (seed * 1103515245 + 12345) >>> 0) % n);
    const pieces = Array.from({ length: 2000 }, (_, i) => {
      if (i % 5 === 0) return { rec: extRec, addr: extRec.addr + rnd(3000), len: rnd(64) };
      return { rec: { addr: 0 }, addr: rnd(60_000), len: rnd(32) };
    });
    const owns = ownsPieces(pieces);
    for (let k = 0; k < 2000; k++) {
      const onExt = k % 3 === 0;
      const lo = onExt ? rnd(3900) : rnd(65_000);
      const v = onExt ? ext.subarray(lo, lo + 1 + rnd(40)) : dm.subarray(lo, lo + 1 + rnd(40));
      const naive = pieces.some((p) => {
        if (p.len === 0) return false;
        const pe = 'ext' in p.rec;
        if (pe !== onExt) return false;
        const plo = pe ? ext.byteOffset + (p.addr - extRec.addr) : p.addr;
        return v.byteOffset < plo + p.len && v.byteOffset + v.byteLength > plo;
      });
      expect(owns(v)).toBe(naive);
    }
  });

  it('a view of a plain (non-shared) buffer at a device address is not device memory', () => {
    const owns = ownsPieces([{ rec: { addr: 0 }, addr: 0, len: 1 << 20 }]);
    expect(owns(new Uint8Array(64))).toBe(false);
  });
});

describe('detachPayload', () => {
  it('copies only the claimed parts, keeps the list when none is, and the copies keep the bytes', () => {
    const mem = new Uint8Array(new SharedArrayBuffer(256)).fill(1);
    const other = new Uint8Array(32).fill(2);
    const parts = [other, mem.subarray(0, 64), mem.subarray(128, 192)];
    const owns = ownsShared(0, 100);
    const out = detachPayload(parts, owns);
    expect(out).not.toBe(parts);
    expect(out[0]).toBe(other);
    expect(out[1]!.buffer).not.toBe(mem.buffer);
    expect(out[2]).toBe(parts[2]);
    mem.fill(9);
    expect(out[1]!.every((x) => x === 1)).toBe(true);
    expect(detachPayload(parts, ownsViewsOf(new Uint8Array(8)))).toBe(parts);
  });
});

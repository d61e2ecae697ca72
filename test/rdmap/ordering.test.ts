// RC ordering over a reordering link, deterministically (virtual clock, seeded link), across
// many seeds with fast-check: later writes to the same bytes win, sends consume receives in
// order, reads see every earlier write, and the final memory equals a sequential model.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { Opcode, WcOpcode, WcStatus } from '../../src/core/enums.js';
import { Harness, piece, recv, wr } from './harness.js';

const WINDOW = 512;

describe('rc ordering over a reordering link', () => {
  it('overlapping writes take effect in posting order (many seeds)', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.integer({ min: 1, max: 2 ** 31 }),
        fc.array(fc.record({ off: fc.nat(WINDOW - 1), len: fc.integer({ min: 1, max: 300 }), byte: fc.integer({ min: 1, max: 255 }) }), { minLength: 2, maxLength: 25 }),
        async (seed, writes) => {
          const h = new Harness({ seed });
          const a = await h.node(32);
          const b = await h.node(32);
          const [qa] = h.connect(a, b);
          const src = a.regMr(64 * 1024);
          const dst = b.regMr(WINDOW + 300);
          const model = new Uint8Array(dst.length);
          writes.forEach((w, i) => {
            const so = i * 512;
            a.bytes(src, so, w.len).fill(w.byte);
            // Vary the bytes inside a write too, so a misplaced segment shows.
            for (let j = 0; j < w.len; j += 7) a.bytes(src, so + j, 1)[0] = (w.byte + j) & 0xff;
            model.set(a.bytes(src, so, w.len), w.off);
            a.eng.postSend(qa, wr({ wrId: i, opcode: Opcode.RdmaWrite, remoteAddr: dst.addr + w.off, rkey: dst.stag }, [piece(a, src, so, w.len)]), h.now);
          });
          h.run();
          const wcs = a.cq.take();
          expect(wcs.map((w) => [w.wrId, w.status])).toEqual(writes.map((_, i) => [i, WcStatus.Success]));
          expect(Buffer.from(b.bytes(dst)).equals(Buffer.from(model))).toBe(true);
        },
      ),
      { numRuns: 120 },
    );
  });

  it('sends match posted receives in order and land intact (many seeds)', async () => {
    await fc.assert(
      fc.asyncProperty(fc.integer({ min: 1, max: 2 ** 31 }), fc.array(fc.integer({ min: 0, max: 400 }), { minLength: 1, maxLength: 30 }), async (seed, lens) => {
        const h = new Harness({ seed, maxBatch: 12 });
        const a = await h.node(48);
        const b = await h.node(48);
        const [qa, qb] = h.connect(a, b);
        const src = a.regMr(lens.length * 512);
        const dst = b.regMr(lens.length * 512);
        lens.forEach((len, i) => {
          const s = a.bytes(src, i * 512, 512);
          for (let j = 0; j < 512; j++) s[j] = (i * 31 + j * 7) & 0xff;
          // Each receive has two pieces so segments get cut along the scatter list.
          b.eng.postRecv(qb, recv(i, [piece(b, dst, i * 512, 100), piece(b, dst, i * 512 + 100, 412)]), h.now);
          const imm = i % 2 === 0 ? Opcode.Send : Opcode.SendWithImm;
          a.eng.postSend(qa, wr({ wrId: i, opcode: imm, imm: i + 1000 }, len ? [piece(a, src, i * 512, len)] : []), h.now);
        });
        h.run();
        const r = b.cq.take();
        expect(r.map((w) => [w.wrId, w.status, w.opcode, w.byteLen, w.imm])).toEqual(
          lens.map((len, i) => [i, WcStatus.Success, WcOpcode.Recv, len, i % 2 ? i + 1000 : undefined]),
        );
        lens.forEach((len, i) => {
          expect(Buffer.from(b.bytes(dst, i * 512, len)).equals(Buffer.from(a.bytes(src, i * 512, len)))).toBe(true);
        });
        expect(a.cq.take().every((w) => w.status === WcStatus.Success)).toBe(true);
      }),
      { numRuns: 80 },
    );
  });

  it('mixed writes, vectored reads and atomics equal a sequential model (many seeds)', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.integer({ min: 1, max: 2 ** 31 }),
        fc.array(
          fc.oneof(
            fc.record({ t: fc.constant('w' as const), off: fc.nat(255), len: fc.integer({ min: 1, max: 200 }) }),
            fc.record({ t: fc.constant('r' as const), parts: fc.array(fc.record({ off: fc.nat(255), len: fc.integer({ min: 0, max: 120 }) }), { minLength: 1, maxLength: 4 }), sinks: fc.integer({ min: 1, max: 4 }) }),
            fc.record({ t: fc.constant('a' as const), word: fc.nat(31), add: fc.bigInt({ min: 0n, max: (1n << 64n) - 1n }) }),
          ),
          { minLength: 1, maxLength: 20 },
        ),
        async (seed, ops) => {
          const h = new Harness({ seed });
          const a = await h.node(40);
          const b = await h.node(40);
          const [qa] = h.connect(a, b);
          const src = a.regMr(256 * 1024);
          const sink = a.regMr(256 * 1024);
          const dst = b.regMr(512);
          const model = new Uint8Array(512);
          const mdv = new DataView(model.buffer);
          const expectReads: { at: number; bytes: Uint8Array }[] = [];
          const expectOld: { at: number; v: bigint }[] = [];
          ops.forEach((op, i) => {
            const base = i * 4096;
            if (op.t === 'w') {
              const s = a.bytes(src, base, op.len);
              for (let j = 0; j < op.len; j++) s[j] = (i * 13 + j) & 0xff;
              model.set(s, op.off);
              a.eng.postSend(qa, wr({ wrId: i, opcode: Opcode.RdmaWrite, remoteAddr: dst.addr + op.off, rkey: dst.stag }, [piece(a, src, base, op.len)]), h.now);
            } else if (op.t === 'r') {
              const total = op.parts.reduce((s, p) => s + p.len, 0);
              const want = new Uint8Array(total);
              let o = 0;
              for (const p of op.parts) { want.set(model.subarray(p.off, p.off + p.len), o); o += p.len; }
              // Split the sink side unevenly into op.sinks pieces with gaps between them.
              const pieces = [];
              let left = total;
              let at = base;
              for (let k = 0; k < op.sinks; k++) {
                const n = k === op.sinks - 1 ? left : Math.floor(left / 2);
                if (n > 0) pieces.push(piece(a, sink, at, n));
                at += n + 3;
                left -= n;
              }
              let got = 0;
              const parts = [];
              for (const p of pieces) parts.push({ at: p.addr - sink.addr, n: p.len });
              expectReads.push(...(() => {
                const out: { at: number; bytes: Uint8Array }[] = [];
                for (const p of parts) { out.push({ at: p.at, bytes: want.slice(got, got + p.n) }); got += p.n; }
                return out;
              })());
              a.eng.postSend(qa, wr({ wrId: i, opcode: Opcode.RdmaRead, remoteSgList: op.parts.map((p) => ({ addr: dst.addr + p.off, length: p.len, rkey: dst.stag })) }, pieces), h.now);
            } else {
              const old = mdv.getBigUint64(op.word * 8, true);
              mdv.setBigUint64(op.word * 8, (old + op.add) & ((1n << 64n) - 1n), true);
              expectOld.push({ at: base, v: old });
              a.eng.postSend(qa, wr({ wrId: i, opcode: Opcode.AtomicFetchAdd, remoteAddr: dst.addr + op.word * 8, rkey: dst.stag, compareAdd: op.add }, [piece(a, sink, base, 8)]), h.now);
            }
          });
          h.run();
          const wcs = a.cq.take();
          expect(wcs.map((w) => [w.wrId, w.status])).toEqual(ops.map((_, i) => [i, WcStatus.Success]));
          expect(Buffer.from(b.bytes(dst)).equals(Buffer.from(model))).toBe(true);
          for (const r of expectReads) expect(Buffer.from(a.bytes(sink, r.at, r.bytes.length)).equals(Buffer.from(r.bytes))).toBe(true);
          for (const e of expectOld) expect(new DataView(a.bytes(sink, e.at, 8).slice().buffer).getBigUint64(0, true)).toBe(e.v);
        },
      ),
      { numRuns: 80 },
    );
  });

  it('RNR under the virtual clock: exact retry count, then success when a receive appears', async () => {
    const h = new Harness({ seed: 7 });
    const a = await h.node(64);
    const b = await h.node(64);
    const [qa, qb] = h.connect(a, b, { rnrRetry: 5, rnrTimeoutMs: 10 });
    const src = a.regMr(1024);
    const dst = b.regMr(1024);
    a.eng.postSend(qa, wr({ wrId: 1, opcode: Opcode.Send }, [piece(a, src, 0, 300)]), h.now);
    // Deliver without letting timers fire: exactly one NAK.
    h.collect();
    while (h.inflight.length) { h.step(); h.collect(); }
    expect(b.eng.counters.rnrNaksSent).toBe(1);
    expect(a.eng.pollTimeout()).toBe(h.now + 10);
    b.eng.postRecv(qb, recv(5, [piece(b, dst, 0, 1024)]), h.now);
    h.run();
    expect(a.eng.counters.rnrRetries).toBe(1);
    expect(b.cq.take()).toMatchObject([{ wrId: 5, status: WcStatus.Success, byteLen: 300 }]);
    expect(h.now).toBe(10);
    // Now without a receive at all: 5 retries 10 ms apart, then RnrRetryExcErr.
    a.cq.take();
    const t0 = h.now;
    a.eng.postSend(qa, wr({ wrId: 2, opcode: Opcode.Send }, [piece(a, src, 0, 10)]), h.now);
    h.run();
    expect(a.cq.take()).toMatchObject([{ wrId: 2, status: WcStatus.RnrRetryExcErr }]);
    expect(a.eng.counters.rnrRetries).toBe(1 + 5);
    expect(h.now - t0).toBe(50);
  });
});

// RC ordering through the whole driver over a network that drops, duplicates, corrupts and
// reorders datagrams (test/sim: virtual clock, seeded impairments), across many seeds with
// fast-check: later writes to the same bytes win, sends consume receives in order, reads see
// every earlier write, and the final memory equals a sequential model. Small datagrams cut each
// message into several, so the reordering reaches inside messages as well as between them.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { Opcode, WcOpcode, WcStatus } from '../../src/core/enums.js';
import { instant, lossy } from '../sim/net.js';
import { Sim } from '../sim/sim.js';
import { piece, recv, wr } from '../sim/work.js';

const WINDOW = 512;

/** What the runs of one property did to their datagrams: checked to be more than nothing. */
const seen = { reordered: 0, dropped: 0, duplicated: 0 };
/** Late segments of earlier writes placed around later writes' bytes (the writes are not fenced). */
let lateWrites = 0;

/** Two nodes whose datagrams carry at most a few segments of `mss` bytes. */
async function pair(seed: number, mss: number, mtu = 200) {
  const sim = new Sim(seed, lossy);
  const a = await sim.node({ mtu, mss });
  const b = await sim.node({ mtu, mss });
  return { sim, a, b };
}

function tally(sim: Sim): void {
  seen.reordered += sim.net.stats.reordered;
  seen.dropped += sim.net.stats.dropped;
  seen.duplicated += sim.net.stats.duplicated;
}

function impaired(): void {
  expect(seen.reordered).toBeGreaterThan(0);
  expect(seen.dropped).toBeGreaterThan(0);
  expect(seen.duplicated).toBeGreaterThan(0);
  seen.reordered = seen.dropped = seen.duplicated = 0;
}

describe('rc ordering through the driver over an impaired network', () => {
  it('overlapping writes take effect in posting order (many seeds)', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.integer({ min: 1, max: 2 ** 31 }),
        fc.array(fc.record({ off: fc.nat(WINDOW - 1), len: fc.integer({ min: 1, max: 300 }), byte: fc.integer({ min: 1, max: 255 }) }), { minLength: 2, maxLength: 25 }),
        async (seed, writes) => {
          const { sim, a, b } = await pair(seed, 32);
          const [qa] = await sim.connect(a, b);
          const src = a.regMr(64 * 1024);
          const dst = b.regMr(WINDOW + 300);
          const model = new Uint8Array(dst.length);
          writes.forEach((w, i) => {
            const so = i * 512;
            a.bytes(src, so, w.len).fill(w.byte);
            // Vary the bytes inside a write too, so a misplaced segment shows.
            for (let j = 0; j < w.len; j += 7) a.bytes(src, so + j, 1)[0] = (w.byte + j) & 0xff;
            model.set(a.bytes(src, so, w.len), w.off);
            a.post(qa, wr({ wrId: i, opcode: Opcode.RdmaWrite, remoteAddr: dst.addr + w.off, rkey: dst.stag }, [piece(src, so, w.len)]));
          });
          await sim.settle();
          tally(sim);
          lateWrites += b.engine.counters.lateWrites;
          const wcs = a.cq.take();
          expect(wcs.map((w) => [w.wrId, w.status])).toEqual(writes.map((_, i) => [i, WcStatus.Success]));
          expect(Buffer.from(b.bytes(dst)).equals(Buffer.from(model))).toBe(true);
        },
      ),
      { numRuns: Number(process.env.SABRE_ORDERING_RUNS ?? 120) },
    );
    impaired();
    expect(lateWrites).toBeGreaterThan(0);
  });

  it('sends match posted receives in order and land intact (many seeds)', async () => {
    await fc.assert(
      fc.asyncProperty(fc.integer({ min: 1, max: 2 ** 31 }), fc.array(fc.integer({ min: 0, max: 400 }), { minLength: 1, maxLength: 30 }), async (seed, lens) => {
        const { sim, a, b } = await pair(seed, 48);
        const [qa, qb] = await sim.connect(a, b);
        const src = a.regMr(lens.length * 512);
        const dst = b.regMr(lens.length * 512);
        lens.forEach((len, i) => {
          const s = a.bytes(src, i * 512, 512);
          for (let j = 0; j < 512; j++) s[j] = (i * 31 + j * 7) & 0xff;
          // Each receive has two pieces so segments get cut along the scatter list.
          b.postRecv(qb, recv(i, [piece(dst, i * 512, 100), piece(dst, i * 512 + 100, 412)]));
          const imm = i % 2 === 0 ? Opcode.Send : Opcode.SendWithImm;
          a.post(qa, wr({ wrId: i, opcode: imm, imm: i + 1000 }, len ? [piece(src, i * 512, len)] : []));
        });
        await sim.settle();
        tally(sim);
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
    impaired();
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
          // A vectored Read Request is one control message, never cut: up to 4 + 4 SGEs fit mtu 300.
          const { sim, a, b } = await pair(seed, 40, 300);
          const [qa] = await sim.connect(a, b);
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
              a.post(qa, wr({ wrId: i, opcode: Opcode.RdmaWrite, remoteAddr: dst.addr + op.off, rkey: dst.stag }, [piece(src, base, op.len)]));
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
                if (n > 0) pieces.push(piece(sink, at, n));
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
              a.post(qa, wr({ wrId: i, opcode: Opcode.RdmaRead, remoteSgList: op.parts.map((p) => ({ addr: dst.addr + p.off, length: p.len, rkey: dst.stag })) }, pieces));
            } else {
              const old = mdv.getBigUint64(op.word * 8, true);
              mdv.setBigUint64(op.word * 8, (old + op.add) & ((1n << 64n) - 1n), true);
              expectOld.push({ at: base, v: old });
              a.post(qa, wr({ wrId: i, opcode: Opcode.AtomicFetchAdd, remoteAddr: dst.addr + op.word * 8, rkey: dst.stag, compareAdd: op.add }, [piece(sink, base, 8)]));
            }
          });
          await sim.settle();
          tally(sim);
          const wcs = a.cq.take();
          expect(wcs.map((w) => [w.wrId, w.status])).toEqual(ops.map((_, i) => [i, WcStatus.Success]));
          expect(Buffer.from(b.bytes(dst)).equals(Buffer.from(model))).toBe(true);
          for (const r of expectReads) expect(Buffer.from(a.bytes(sink, r.at, r.bytes.length)).equals(Buffer.from(r.bytes))).toBe(true);
          for (const e of expectOld) expect(new DataView(a.bytes(sink, e.at, 8).slice().buffer).getBigUint64(0, true)).toBe(e.v);
        },
      ),
      { numRuns: 80 },
    );
    impaired();
  });

  it('RNR under the virtual clock: exact retry count, then success when a receive appears', async () => {
    // No time on the wire: the retries' spacing is the RNR timeout and nothing else.
    const sim = new Sim(7, instant);
    const a = await sim.node();
    const b = await sim.node();
    const [qa, qb] = await sim.connect(a, b, { rnrRetry: 5, rnrTimeoutMs: 10 });
    const src = a.regMr(1024);
    const dst = b.regMr(1024);
    const t = sim.now;
    a.post(qa, wr({ wrId: 1, opcode: Opcode.Send }, [piece(src, 0, 300)]));
    // Everything due now, and no timer: exactly one NAK, and the retry armed 10 ms out.
    await sim.advance(0);
    expect(b.engine.counters.rnrNaksSent).toBe(1);
    expect(a.engine.pollTimeout()).toBe(t + 10);
    b.postRecv(qb, recv(5, [piece(dst, 0, 1024)]));
    expect(await sim.run(() => b.cq.wcs.length > 0)).toBe(true);
    expect(sim.now).toBe(t + 10);
    await sim.settle();
    expect(a.engine.counters.rnrRetries).toBe(1);
    expect(b.cq.take()).toMatchObject([{ wrId: 5, status: WcStatus.Success, byteLen: 300 }]);
    // Now without a receive at all: 5 retries 10 ms apart, then RnrRetryExcErr.
    a.cq.take();
    const t0 = sim.now;
    a.post(qa, wr({ wrId: 2, opcode: Opcode.Send }, [piece(src, 0, 10)]));
    expect(await sim.run(() => a.cq.wcs.length > 0)).toBe(true);
    expect(sim.now - t0).toBe(50);
    await sim.settle();
    expect(a.cq.take()).toMatchObject([{ wrId: 2, status: WcStatus.RnrRetryExcErr }]);
    expect(a.engine.counters.rnrRetries).toBe(1 + 5);
  });

  it('a zero-length Send before its receive is NAKed RNR like any other, then takes the receive posted later', async () => {
    const sim = new Sim(8, instant);
    const a = await sim.node();
    const b = await sim.node();
    const [qa, qb] = await sim.connect(a, b, { rnrRetry: 5, rnrTimeoutMs: 10 });
    const src = a.regMr(64);
    const dst = b.regMr(64);
    a.post(qa, wr({ wrId: 1, opcode: Opcode.Send }, []));
    await sim.advance(0);
    expect(b.engine.counters.rnrNaksSent).toBe(1);
    expect(b.engine.counters.terminatesSent).toBe(0);
    // Later traffic of the flow before the receive is there: the Send keeps waiting.
    a.post(qa, wr({ wrId: 2, opcode: Opcode.RdmaWrite, remoteAddr: dst.addr, rkey: dst.stag }, [piece(src, 0, 8)]));
    await sim.advance(0);
    expect(b.engine.counters.terminatesSent).toBe(0);
    b.postRecv(qb, recv(6, []));
    await sim.settle();
    expect(b.cq.take()).toMatchObject([{ wrId: 6, status: WcStatus.Success, byteLen: 0 }]);
    expect(a.cq.take()).toMatchObject([{ wrId: 1, status: WcStatus.Success }, { wrId: 2, status: WcStatus.Success }]);
  });
});

// Bad input at the engine boundary: random and mutated segments, handed to a whole driver as its
// link would deliver them (test/sim), never throw, never write outside a granted region, and end
// as counted drops or Terminates. The network runs between inputs, so what the victim answers
// reaches its peer and the peer's answers come back.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import type { Frame, SegFrame } from '../../src/core/frame.js';
import type { Outbound } from '../../src/core/link.js';
import { Opcode, QpState } from '../../src/core/enums.js';
import { decodeDdp, decodeReadComplete, encodeDdp, encodeReadRequest, Qn, RdmapOpcode, UNTAGGED_HDR_LEN } from '../../src/wire/rdmap.js';
import { lossy } from '../sim/net.js';
import { Sim } from '../sim/sim.js';
import { piece, recv, wr } from '../sim/work.js';

async function setup(seed: number) {
  const sim = new Sim(seed, lossy);
  const a = await sim.node({ mss: 64 });
  const b = await sim.node({ mss: 64 });
  const [qa, qb] = await sim.connect(a, b);
  const src = a.regMr(4096);
  const dst = b.regMr(4096);
  const sink = a.regMr(4096);
  // Capture a realistic corpus of frames A sends (they go on to b as well).
  const corpus: SegFrame[] = [];
  a.link.tap = (out) => {
    for (const o of out) if (o.frame.kind === 'seg') corpus.push(o.frame);
  };
  for (let i = 0; i < 4; i++) b.postRecv(qb, recv(i, [piece(dst, 1024 * i, 512)]));
  a.post(qa, wr({ wrId: 1, opcode: Opcode.RdmaWrite, remoteAddr: dst.addr + 100, rkey: dst.stag }, [piece(src, 0, 200)]));
  a.post(qa, wr({ wrId: 2, opcode: Opcode.Send }, [piece(src, 0, 150)]));
  a.post(qa, wr({ wrId: 3, opcode: Opcode.RdmaRead, remoteSgList: [{ addr: dst.addr, length: 100, rkey: dst.stag }] }, [piece(sink, 0, 100)]));
  a.post(qa, wr({ wrId: 4, opcode: Opcode.AtomicCmpSwap, remoteAddr: dst.addr + 8, rkey: dst.stag, compareAdd: 0n, swap: 5n }, [piece(sink, 512, 8)]));
  a.post(qa, wr({ wrId: 5, opcode: Opcode.RdmaWriteWithImm, imm: 9, remoteAddr: dst.addr, rkey: dst.stag }, [piece(src, 0, 10)]));
  a.link.tap = undefined;
  return { sim, a, b, qa, qb, src, dst, sink, corpus };
}

const flatten = (f: SegFrame): Uint8Array => {
  const n = f.hdr.length + f.payload.reduce((s, p) => s + p.length, 0);
  const out = new Uint8Array(n);
  out.set(f.hdr);
  let o = f.hdr.length;
  for (const p of f.payload) { out.set(p, o); o += p.length; }
  return out;
};

describe('fuzzing the responder', () => {
  it('mutated and random segments: no throw, no write outside granted regions', async () => {
    const { sim, a, b, dst, corpus } = await setup(1);
    const dm = b.mem.dm;
    const em = b.mem;
    const outside = (i: number): boolean =>
      !(i >= dst.addr && i < dst.addr + dst.length) && !(i >= em.stageBase && i < em.stageBase + em.stageBytes) && !(i >= em.descBase && i < em.descBase + 32 * 1024) && !(i >= em.outBase && i < em.outBase + 16 * 1024);
    const before = dm.u8().slice();
    let fed = 0;
    let resets = 0;
    await fc.assert(
      fc.asyncProperty(
        fc.nat(corpus.length - 1),
        fc.array(fc.tuple(fc.nat(80), fc.integer({ min: 0, max: 255 })), { maxLength: 6 }),
        fc.integer({ min: -2, max: 40 }),
        fc.integer({ min: 0, max: 300 }),
        fc.integer({ min: -1, max: 300 }),
        fc.uint8Array({ maxLength: 200 }),
        fc.boolean(),
        async (ci, flips, ssnDelta, msgLen, off, junk, useJunk) => {
          const base = corpus[ci]!;
          const bytes = useJunk ? junk : flatten(base);
          for (const [at, v] of flips) if (at < bytes.length) bytes[at] = v;
          const d = decodeDdp(bytes, 0, bytes.length);
          const hl = d.ok ? d.length : Math.min(bytes.length, UNTAGGED_HDR_LEN);
          const ctl = d.ok && !d.value.tagged && d.value.opcode !== RdmapOpcode.Send && d.value.opcode !== RdmapOpcode.SendWithImm;
          const frame: Frame = {
            kind: 'seg',
            env: { srcQpn: 1, dstQpn: 1, ssn: Math.max(0, b.engine.qps.get(1)!.flow!.expected + ssnDelta), msgLen, off: off < 0 ? 0 : off },
            hdr: ctl ? bytes : bytes.subarray(0, hl),
            payload: ctl ? [] : [bytes.subarray(hl)],
          };
          fed++;
          expect(() => b.inject(a.addr, [frame])).not.toThrow();
          // Frames of other kinds and to other QPs as well.
          expect(() => b.driver.frames([
            { from: a.addr, frame: { kind: 'ack', srcQpn: 1, dstQpn: 1, ssn: msgLen } },
            { from: a.addr, frame: { kind: 'rnr', srcQpn: 1, dstQpn: 1, ssn: msgLen } },
            { from: { transport: 'x' }, frame: { ...frame, env: { ...frame.env, dstQpn: 77 } } },
            { from: a.addr, frame: { kind: 'bogus' } as never },
          ])).not.toThrow();
          // What b answered crosses the network every few inputs; what a answers comes back.
          if (fed % 8 === 0) await sim.advance(0.5);
          // Keep fuzzing a live QP: replace one that a Terminate put in ERROR.
          const q = b.engine.qps.get(1)!;
          if (q.state === QpState.Error) {
            resets++;
            b.driver.run((now) => {
              b.engine.destroyQp(q);
              const nq = b.engine.createQp(1, 'rc', 1, q.caps, b.cq, b.cq);
              b.engine.connect(nq, a.addr, 1, now);
              nq.state = QpState.Rts;
              for (let i = 0; i < 4; i++) b.engine.postRecv(nq, recv(i, [piece(dst, 1024 * i, 512)]), now);
            });
          }
        },
      ),
      { numRuns: 3000 },
    );
    expect(fed).toBe(3000);
    const now = dm.u8();
    let bad = -1;
    for (let i = 0; i < before.length; i++) if (now[i] !== before[i] && outside(i)) { bad = i; break; }
    expect(bad).toBe(-1);
    const c = b.engine.counters;
    expect(c.drops).toBeGreaterThan(0);
    expect(c.terminatesSent).toBeGreaterThan(10);
    expect(resets).toBeGreaterThan(10);
    // It ends in ERROR after the first protocol violation (a Terminate), or stays usable.
    expect([QpState.Rts, QpState.Error]).toContain(b.engine.qps.get(1)!.state);
  });

  it('a standard RFC 5040 ReadRequest is answered with tagged ReadResponse writes and a ReadComplete', async () => {
    const { sim, a, b, dst, sink } = await setup(2);
    await sim.settle();
    a.cq.take();
    b.cq.take();
    for (let i = 0; i < 300; i++) b.bytes(dst, i, 1)[0] = (i * 5) & 0xff;
    const flow = b.engine.qps.get(1)!.flow!;
    const hdr = new Uint8Array(UNTAGGED_HDR_LEN + 28);
    encodeDdp({ tagged: false, last: true, opcode: RdmapOpcode.ReadRequest, ulp: 0, qn: Qn.ReadRequest, msn: 77, mo: 0 }, hdr, 0);
    encodeReadRequest({ sinkStag: sink.stag, sinkTo: sink.addr + 1000, size: 300, srcStag: dst.stag, srcTo: dst.addr }, hdr, UNTAGGED_HDR_LEN);
    const sent: Outbound[] = [];
    b.link.tap = (o) => void sent.push(...o);
    b.inject(a.addr, [{ kind: 'seg', env: { srcQpn: 1, dstQpn: 1, ssn: flow.expected, msgLen: 28, off: 0 }, hdr, payload: [] }]);
    const out = sent.map((o) => o.frame).filter((f): f is SegFrame => f.kind === 'seg');
    expect(out.length).toBeGreaterThan(1);
    const got = new Uint8Array(300);
    let rc: { imm: number; len: number } | undefined;
    for (const f of out) {
      const d = decodeDdp(f.hdr, 0, f.hdr.length);
      if (!d.ok) throw new Error(d.error);
      if (d.value.tagged) {
        expect(d.value.opcode).toBe(RdmapOpcode.ReadResponse);
        expect(d.value.stag).toBe(sink.stag);
        let o = d.value.to - (sink.addr + 1000);
        for (const p of f.payload) { got.set(p, o); o += p.length; }
      } else {
        expect(d.value.opcode).toBe(RdmapOpcode.ReadComplete);
        const v = decodeReadComplete(f.hdr, d.length, f.hdr.length);
        if (v.ok) rc = v.value;
      }
    }
    expect(rc).toEqual({ imm: 77, len: 300 });
    expect(Buffer.from(got).equals(Buffer.from(b.bytes(dst, 0, 300)))).toBe(true);
  });
});

// A stream of RDMA Writes into one remote buffer (what ib_write_bw does) goes out back to back:
// the rc fence holds a read or atomic behind an unfinished overlapping operation, and a write
// behind an unfinished overlapping read or atomic, but not a write behind a write — the
// responder keeps the later write's bytes instead (rdmap/write-order.ts; the property test in
// ordering.test.ts checks that over an impaired network).
import * as W from '../../src/wire/fields.gen.js';
import { describe, expect, it } from 'vitest';
import type { SegFrame } from '../../src/core/frame.js';
import type { Outbound } from '../../src/core/link.js';
import { Opcode, QpState, WcStatus } from '../../src/core/enums.js';
import { dataFrames } from '../../src/rdmap/segmenter.js';
import { decodeDdp, RdmapOpcode } from '../../src/wire/rdmap.js';
import { clean } from '../sim/net.js';
import type { SimNode } from '../sim/node.js';
import { Sim } from '../sim/sim.js';
import { piece, wr } from '../sim/work.js';

/** Every frame `n`'s driver hands its link from now on. */
function sent(n: SimNode): Outbound[] {
  const out: Outbound[] = [];
  n.link.tap = (o) => void out.push(...o);
  return out;
}

/** The RDMAP opcodes of the first segments of messages among `out`. */
function opcodes(out: Outbound[]): number[] {
  const ops: number[] = [];
  for (const o of out) {
    if (o.frame.kind !== 'seg' || o.frame.env.off !== 0) continue;
    const d = decodeDdp(o.frame.hdr, 0, o.frame.hdr.length);
    if (d.ok) ops.push(d.value.opcode);
  }
  return ops;
}

describe('rc fence: writes after writes stream, reads and atomics still wait', () => {
  it('8 writes of 4 KiB to the same remote bytes are all handed to the link before any ack; the last one wins', async () => {
    const sim = new Sim(3, clean);
    const a = await sim.node({});
    const b = await sim.node({});
    const [qa] = await sim.connect(a, b);
    const src = a.regMr(8 * 4096);
    const dst = b.regMr(4096);
    const out = sent(a);
    for (let i = 0; i < 8; i++) {
      a.bytes(src, i * 4096, 4096).fill(i + 1);
      a.post(qa, wr({ wrId: i, opcode: Opcode.RdmaWrite, remoteAddr: dst.addr, rkey: dst.stag }, [piece(src, i * 4096, 4096)]));
    }
    expect(opcodes(out).filter((op) => op === RdmapOpcode.RdmaWrite)).toHaveLength(8);
    await sim.settle();
    expect(a.cq.take().map((w) => [w.wrId, w.status])).toEqual([0, 1, 2, 3, 4, 5, 6, 7].map((i) => [i, WcStatus.Success]));
    expect(b.bytes(dst).every((x) => x === 8)).toBe(true);
  });

  it('a read of bytes an unfinished write covers waits for the write; a write over an unfinished read waits for the read', async () => {
    const sim = new Sim(4, clean);
    const a = await sim.node({});
    const b = await sim.node({});
    const [qa] = await sim.connect(a, b);
    const src = a.regMr(3 * 4096);
    const dst = b.regMr(4096);
    a.bytes(src, 0, 4096).fill(7);
    a.bytes(src, 8192, 4096).fill(9);
    const out = sent(a);
    a.post(qa, wr({ wrId: 0, opcode: Opcode.RdmaWrite, remoteAddr: dst.addr, rkey: dst.stag }, [piece(src, 0, 4096)]));
    a.post(qa, wr({ wrId: 1, opcode: Opcode.RdmaRead, remoteSgList: [{ addr: dst.addr, length: 4096, rkey: dst.stag }] }, [piece(src, 4096, 4096)]));
    a.post(qa, wr({ wrId: 2, opcode: Opcode.RdmaWrite, remoteAddr: dst.addr, rkey: dst.stag }, [piece(src, 8192, 4096)]));
    // Only the first write went: the read waits for it, the second write for the read.
    expect(opcodes(out)).toEqual([RdmapOpcode.RdmaWrite]);
    await sim.settle();
    expect(a.cq.take().map((w) => [w.wrId, w.status])).toEqual([0, 1, 2].map((i) => [i, WcStatus.Success]));
    // The read saw the first write and not the second.
    expect(a.bytes(src, 4096, 4096).every((x) => x === 7)).toBe(true);
    expect(b.bytes(dst).every((x) => x === 9)).toBe(true);
  });

  it('a late earlier write around 3,000 later one-byte writes (as a hostile peer can send): placed byte-exact past one batch of descriptors, no Terminate', async () => {
    const sim = new Sim(5, clean);
    const a = await sim.node({});
    const b = await sim.node({});
    const [, qb] = await sim.connect(a, b);
    const N = 3000;
    const dst = b.regMr(2 * N);
    const write = (ssn: number, to: number, data: Uint8Array): SegFrame => {
      const out: SegFrame[] = [];
      dataFrames({ srcQpn: 1, dstQpn: 1, ssn, tagged: true, opcode: RdmapOpcode.RdmaWrite, stag: dst.stag, to, parts: [data], total: data.length, mss: 1 << 20 }, out);
      return out[0]!;
    };
    // Writes 2..3001 land first, one byte each at the even offsets; then write 1 over all of it:
    // 3,000 pieces to place around them (more than one placement batch holds).
    const later: SegFrame[] = [];
    for (let i = 0; i < N; i++) later.push(write(2 + i, dst.addr + 2 * i, new Uint8Array([0xbb])));
    b.inject(a.addr, later);
    b.inject(a.addr, [write(1, dst.addr, new Uint8Array(2 * N).fill(0xaa))]);
    const v = b.bytes(dst);
    let wrong = 0;
    for (let i = 0; i < 2 * N; i++) if (v[i] !== (i % 2 === 0 ? 0xbb : 0xaa)) wrong++;
    expect(wrong).toBe(0);
    expect(b.engine.counters.lateWrites).toBe(1);
    expect(b.engine.counters.terminatesSent).toBe(0);
    expect(qb.state).toBe(QpState.Rts);
  });

  it('a Write whose segments put its first byte below TO 0 (TO < offset) is refused with a Terminate, not indexed again per segment', async () => {
    const sim = new Sim(6, clean);
    const a = await sim.node({});
    const b = await sim.node({});
    const [, qb] = await sim.connect(a, b);
    const dst = b.regMr(1 << 16);
    // One Write of unknown length (no L flag yet), then segments at offsets above their TO:
    // before, each one added an entry to the pending-writes index that nothing removed.
    const segs: SegFrame[] = [];
    for (let i = 0; i < 200; i++) {
      const out: SegFrame[] = [];
      dataFrames({ srcQpn: 1, dstQpn: 1, ssn: 1, tagged: true, opcode: RdmapOpcode.RdmaWrite, stag: dst.stag, to: dst.addr + i, parts: [new Uint8Array(1)], total: 1, mss: 1 << 20 }, out);
      const f = out[0]!;
      f.env.off = dst.addr + (1 << 20) + i;
      f.env.msgLen = -1;
      f.hdr[W.TAGGED_DDP_CTRL_OFF] = f.hdr[W.TAGGED_DDP_CTRL_OFF]! & ~W.DDP_CTRL_DDP_L; // not the last segment
      if (f.ddp) f.ddp.last = false;
      segs.push(f);
    }
    b.inject(a.addr, segs);
    expect(b.engine.counters.terminatesSent).toBe(1);
    expect(qb.state).toBe(QpState.Error);
    expect(qb.flow?.writes?.size ?? 0).toBeLessThanOrEqual(1);
  });

  it.each(['stag', 'base'] as const)('a later segment of one Write that names another %s than its first is refused with a Terminate, nothing of it placed', async (what) => {
    const sim = new Sim(7, clean);
    const a = await sim.node({});
    const b = await sim.node({});
    const [, qb] = await sim.connect(a, b);
    const dst = b.regMr(1 << 16);
    const other = b.regMr(1 << 16);
    const seg = (off: number, stag: number, to: number, last: boolean): SegFrame => {
      const out: SegFrame[] = [];
      dataFrames({ srcQpn: 1, dstQpn: 1, ssn: 1, tagged: true, opcode: RdmapOpcode.RdmaWrite, stag, to, parts: [new Uint8Array(16).fill(7)], total: 16, mss: 1 << 20 }, out);
      const f = out[0]!;
      f.env.off = off;
      f.env.msgLen = -1;
      if (!last) {
        f.hdr[W.TAGGED_DDP_CTRL_OFF] = f.hdr[W.TAGGED_DDP_CTRL_OFF]! & ~W.DDP_CTRL_DDP_L;
        if (f.ddp) f.ddp.last = false;
      }
      return f;
    };
    // The first segment (offset 0) names dst at its start; the second (offset 16) names another
    // region, or dst 4 KiB further on: both within regions the peer may write.
    const second = what === 'stag' ? seg(16, other.stag, other.addr + 16, true) : seg(16, dst.stag, dst.addr + 4096 + 16, true);
    b.inject(a.addr, [seg(0, dst.stag, dst.addr, false), second]);
    expect(b.engine.counters.terminatesSent).toBe(1);
    expect(qb.state).toBe(QpState.Error);
    expect(b.bytes(other).every((x) => x === 0)).toBe(true);
    expect(b.bytes(dst, 4096, 64).every((x) => x === 0)).toBe(true);
  });
});

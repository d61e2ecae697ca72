// The NIC's ring records (src/nic/wqe.ts over the layouts of src/wire/nic-spec.ts): every shape
// of send WQE, receive WQEs and CQEs round-trip through a RecordRing, kinds interleave in posting
// order across wraps, a full ring writes nothing, the codec's bytes sit at the spec's offsets,
// and readers refilling a kept object give the same answers as fresh ones.
import { describe, expect, it } from 'vitest';
import { code } from './error-code.js';
import { ErrorCode, SabreError } from '../../src/core/errors.js';
import { Opcode, WcOpcode, WcStatus } from '../../src/core/enums.js';
import { RecordRing } from '../../src/nic/ring.js';
import {
  type Cqe, CQE_KIND, readCqe, readRecvWqe, readSendWqe, recordKind, type RecvWqe, type SendWqe,
  sendWqeBytes, WQE_KIND_RECV, WQE_KIND_SEND, writeCqe, writeRecvWqe, writeSendWqe,
} from '../../src/nic/wqe.js';
import { CQE, LAYOUTS, NIC_LAYOUTS, RECV_WQE, SEND_WQE } from '../../src/wire/spec.js';

const BIG = Number.MAX_SAFE_INTEGER;

const SENDS: SendWqe[] = [
  { qpn: 1, token: 0, opcode: Opcode.Send, signaled: true, sges: [{ addr: 4096, length: 100, lkey: 0x1234 }] },
  { qpn: 0xffffffff, token: 0xffffffff, opcode: Opcode.SendWithImm, signaled: false, imm: 0xdeadbeef, sges: [] },
  { qpn: 7, token: 9, opcode: Opcode.RdmaWrite, signaled: true, remoteAddr: BIG, rkey: 0xabcdef01, sges: [{ addr: 2 ** 40 + 3, length: 1, lkey: 1 }, { addr: 0, length: 0xffffffff, lkey: 2 }] },
  { qpn: 7, token: 10, opcode: Opcode.RdmaWriteWithImm, signaled: true, remoteAddr: 0, rkey: 5, imm: 0, sges: [{ addr: 8, length: 8, lkey: 3 }] },
  {
    qpn: 8, token: 11, opcode: Opcode.RdmaRead, signaled: true, remoteAddr: 2 ** 33, rkey: 6,
    sges: [{ addr: 64, length: 300, lkey: 4 }],
    remoteSges: [{ addr: 2 ** 33, length: 100, rkey: 6 }, { addr: BIG - 7, length: 200, rkey: 0xffffffff }],
  },
  { qpn: 9, token: 12, opcode: Opcode.AtomicCmpSwap, signaled: true, remoteAddr: 128, rkey: 7, compareAdd: 2n ** 64n - 1n, swap: 0x0123456789abcdefn, sges: [{ addr: 16, length: 8, lkey: 5 }] },
  { qpn: 9, token: 13, opcode: Opcode.AtomicFetchAdd, signaled: false, remoteAddr: 136, rkey: 7, compareAdd: 1n, swap: 0n, sges: [{ addr: 24, length: 8, lkey: 5 }] },
  { qpn: 10, token: 14, opcode: Opcode.Send, signaled: true, ah: 3, remoteQpn: 0x00ffffff, sges: [{ addr: 0, length: 10, lkey: 1 }] },
  { qpn: 11, token: 15, opcode: Opcode.Send, signaled: true, inline: new Uint8Array([1, 2, 3, 4, 5, 6, 7]), sges: [] },
  { qpn: 11, token: 16, opcode: Opcode.Send, signaled: true, inline: new Uint8Array(0), sges: [], remoteSges: [] },
];

const RECVS: RecvWqe[] = [
  { qpn: 1, token: 100, sges: [{ addr: 4096, length: 2048, lkey: 9 }] },
  { qpn: 2, token: 0xfffffffe, sges: [] },
  { qpn: 3, token: 101, sges: [{ addr: BIG, length: 1, lkey: 1 }, { addr: 2 ** 32, length: 2, lkey: 2 }, { addr: 2 ** 32 - 1, length: 3, lkey: 3 }] },
];

const CQES: Cqe[] = [
  { cq: 1, token: 0, qpn: 5, status: WcStatus.Success, opcode: WcOpcode.Send, byteLen: 100 },
  { cq: 0xffffffff, token: 7, qpn: 6, status: WcStatus.RemAccessErr, opcode: WcOpcode.RdmaWrite, byteLen: 0 },
  { cq: 2, token: 8, qpn: 7, status: WcStatus.Success, opcode: WcOpcode.RecvRdmaWithImm, byteLen: 0xffffffff, imm: 0x80000001 },
  { cq: 3, token: 9, qpn: 8, status: WcStatus.Success, opcode: WcOpcode.Recv, byteLen: 64, srcQpn: 44, src: new Uint8Array([10, 0, 0, 1, 0x12, 0x34]) },
  { cq: 3, token: 10, qpn: 8, status: WcStatus.WrFlushErr, opcode: WcOpcode.Recv, byteLen: 0, imm: 0, srcQpn: 0, src: new Uint8Array(0) },
];

type Rec = { kind: 'send'; w: SendWqe } | { kind: 'recv'; w: RecvWqe } | { kind: 'cqe'; w: Cqe };

function write(ring: RecordRing, r: Rec): boolean {
  return r.kind === 'send' ? writeSendWqe(ring, r.w) : r.kind === 'recv' ? writeRecvWqe(ring, r.w) : writeCqe(ring, r.w);
}

/** Read the next record as whatever its kind byte says (copying a send's inline view). */
function readNext(ring: RecordRing): Rec | undefined {
  const off = ring.peek();
  if (off < 0) return undefined;
  const k = recordKind(ring.dv, off);
  let r: Rec;
  if (k === WQE_KIND_SEND) {
    const w = readSendWqe(ring.dv, off);
    if (w.inline) w.inline = w.inline.slice();
    r = { kind: 'send', w };
  } else if (k === WQE_KIND_RECV) r = { kind: 'recv', w: readRecvWqe(ring.dv, off) };
  else if (k === CQE_KIND) r = { kind: 'cqe', w: readCqe(ring.dv, off) };
  else throw new Error(`kind ${k}`);
  ring.advance();
  return r;
}

const ALL: Rec[] = [
  ...SENDS.map((w) => ({ kind: 'send', w }) as Rec),
  ...RECVS.map((w) => ({ kind: 'recv', w }) as Rec),
  ...CQES.map((w) => ({ kind: 'cqe', w }) as Rec),
];

describe('NIC ring records', () => {
  it('the layouts are in LAYOUTS and fixed heads are 8-byte multiples', () => {
    for (const l of NIC_LAYOUTS) {
      expect(LAYOUTS).toContain(l);
      expect(l.size % 8).toBe(0);
    }
  });

  it('every shape round-trips exactly (strict: absent optional fields read back absent)', () => {
    const ring = RecordRing.create(8192);
    for (const r of ALL) {
      expect(write(ring, r)).toBe(true);
      ring.commit();
      const got = readNext(ring)!;
      expect(got.kind).toBe(r.kind);
      // Readers set absent optional fields to undefined; compare after dropping them.
      const defined = Object.fromEntries(Object.entries(got.w).filter(([, v]) => v !== undefined));
      expect(defined).toEqual(r.w);
      expect(Object.keys(defined).sort()).toEqual(Object.keys(r.w).sort());
    }
  });

  it('the bytes sit at the offsets of the spec', () => {
    const ring = RecordRing.create(1024);
    writeSendWqe(ring, SENDS[5]!);
    writeRecvWqe(ring, RECVS[0]!);
    writeCqe(ring, CQES[3]!);
    ring.commit();
    const dv = ring.dv;
    let off = ring.peek();
    expect(ring.peekLength()).toBe(sendWqeBytes(SENDS[5]!));
    expect(dv.getUint8(off + SEND_WQE.fields.kind.offset)).toBe(1);
    expect(dv.getUint8(off + SEND_WQE.fields.opcode.offset)).toBe(Opcode.AtomicCmpSwap);
    expect(dv.getUint8(off + SEND_WQE.fields.flags.offset)).toBe(0x01 | 0x20 | 0x40);
    expect(dv.getUint32(off + SEND_WQE.fields.token.offset, true)).toBe(12);
    expect(dv.getBigUint64(off + SEND_WQE.fields.remoteAddr.offset, true)).toBe(128n);
    expect(dv.getBigUint64(off + SEND_WQE.fields.swap.offset, true)).toBe(0x0123456789abcdefn);
    expect(dv.getBigUint64(off + SEND_WQE.size, true)).toBe(16n); // first SGE's addr
    ring.advance();
    off = ring.peek();
    expect(ring.peekLength()).toBe(RECV_WQE.size + 16);
    expect(dv.getUint16(off + RECV_WQE.fields.nSge.offset, true)).toBe(1);
    expect(dv.getUint32(off + RECV_WQE.fields.token.offset, true)).toBe(100);
    ring.advance();
    off = ring.peek();
    expect(ring.peekLength()).toBe(CQE.size + 6);
    expect(dv.getUint8(off + CQE.fields.kind.offset)).toBe(3);
    expect(dv.getUint8(off + CQE.fields.flags.offset)).toBe(0x02 | 0x04);
    expect(dv.getUint16(off + CQE.fields.srcLen.offset, true)).toBe(6);
    expect(dv.getUint8(off + CQE.size)).toBe(10);
  });

  it('kinds interleave in posting order across wraps; a full ring writes nothing', () => {
    const ring = RecordRing.create(1024);
    let posted = 0;
    let read = 0;
    let fulls = 0;
    for (let round = 0; round < 300; round++) {
      for (;;) {
        const r = ALL[posted % ALL.length]!;
        if (ring.free() < 512) ring.commit(); // near full: so a failed write's commit must publish nothing
        const used = ring.used();
        if (!write(ring, r)) {
          ring.commit();
          if (ring.free() < 512) expect(ring.used()).toBe(used);
          fulls++;
          break;
        }
        posted++;
        if (posted % 3 === 0) ring.commit();
      }
      ring.commit();
      for (let n = 0; n < 1 + (round % 9); n++) {
        const got = readNext(ring);
        if (!got) break;
        const want = ALL[read % ALL.length]!;
        expect(got.kind).toBe(want.kind);
        expect(Object.fromEntries(Object.entries(got.w).filter(([, v]) => v !== undefined))).toEqual(want.w);
        read++;
      }
    }
    expect(fulls).toBe(300);
    expect(read).toBeGreaterThan(ALL.length * 20);
  });

  it('readers refill a kept object (SGE objects reused) with the same answers', () => {
    const ring = RecordRing.create(4096);
    const keep: SendWqe = { qpn: 0, token: 0, opcode: 0, signaled: false, sges: [] };
    const keepR: RecvWqe = { qpn: 0, token: 0, sges: [] };
    const keepC: Cqe = { cq: 0, token: 0, qpn: 0, status: 0, opcode: 0, byteLen: 0 };
    for (const r of [...ALL, ...ALL.slice().reverse()]) {
      write(ring, r);
      ring.commit();
      const off = ring.peek();
      const firstSge = keep.sges[0];
      const got = r.kind === 'send' ? readSendWqe(ring.dv, off, keep) : r.kind === 'recv' ? readRecvWqe(ring.dv, off, keepR) : readCqe(ring.dv, off, keepC);
      expect(got).toBe(r.kind === 'send' ? keep : r.kind === 'recv' ? keepR : keepC);
      if (r.kind === 'send' && firstSge && keep.sges.length > 0) expect(keep.sges[0]).toBe(firstSge);
      const fresh = r.kind === 'send' ? readSendWqe(ring.dv, off) : r.kind === 'recv' ? readRecvWqe(ring.dv, off) : readCqe(ring.dv, off);
      expect(got).toEqual(fresh);
      ring.advance();
    }
  });

  it("a CQE's source address is a copy; a send's inline bytes a view until advance", () => {
    const ring = RecordRing.create(1024);
    writeCqe(ring, CQES[3]!);
    writeSendWqe(ring, SENDS[8]!);
    ring.commit();
    let off = ring.peek();
    const c = readCqe(ring.dv, off);
    ring.u8.fill(0xee, off, off + ring.peekLength());
    expect([...c.src!]).toEqual([10, 0, 0, 1, 0x12, 0x34]);
    expect(c.src!.buffer).toBeInstanceOf(ArrayBuffer);
    ring.advance();
    off = ring.peek();
    const w = readSendWqe(ring.dv, off);
    expect(w.inline!.buffer).toBe(ring.sab);
    expect([...w.inline!]).toEqual([1, 2, 3, 4, 5, 6, 7]);
  });

  it('limits: more than 65535 SGEs, or a record the ring can never hold, throw ERR_LIMIT_EXCEEDED', () => {
    const big = RecordRing.create(4 << 20);
    const sges = Array.from({ length: 65536 }, () => ({ addr: 0, length: 1, lkey: 1 }));
    expect(code(() => writeSendWqe(big, { qpn: 1, token: 1, opcode: Opcode.Send, signaled: true, sges }))).toBe(ErrorCode.LimitExceeded);
    expect(code(() => writeRecvWqe(big, { qpn: 1, token: 1, sges }))).toBe(ErrorCode.LimitExceeded);
    const small = RecordRing.create(256);
    expect(code(() => writeSendWqe(small, { qpn: 1, token: 1, opcode: Opcode.Send, signaled: true, sges: [], inline: new Uint8Array(200) }))).toBe(ErrorCode.LimitExceeded);
    expect(code(() => writeCqe(small, { ...CQES[0]!, src: new Uint8Array(70000) }))).toBe(ErrorCode.LimitExceeded);
    expect(small.used()).toBe(0);
    expect(big.used()).toBe(0);
  });
});

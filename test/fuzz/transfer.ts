// The real transfer a campaign keeps running while it attacks: two devices, one rc QP each,
// rounds of RDMA WRITE, RDMA READ and SEND in both directions with seeded patterns, every
// completion Success and every byte checked after each round. A round that fails (a status, a
// wrong byte, a completion missing after `roundMs`) is a campaign failure.
import { Access, Opcode, WcStatus, type CompletionQueue, type Device, type ProtectionDomain, type QueuePair, type WorkCompletion } from '../../src/index.js';
import { Gen, mulberry32 } from './rng.js';

export const ALL = Access.LocalWrite | Access.RemoteRead | Access.RemoteWrite | Access.RemoteAtomic;
const REGION = 64 * 1024;
const MSG = 16 * 1024;

export interface Side {
  dev: Device;
  pd: ProtectionDomain;
  cq: CompletionQueue;
  qp: QueuePair;
}

type Mr = ReturnType<ProtectionDomain['regMr']>;

interface Mrs {
  win: Mr;
  src: Mr;
  out: Mr;
  sink: Mr;
  recv: Mr;
}

function mrs(s: Side): Mrs {
  return {
    win: s.pd.regMr(REGION, ALL), src: s.pd.regMr(REGION, ALL), out: s.pd.regMr(REGION, Access.LocalWrite),
    sink: s.pd.regMr(REGION, Access.LocalWrite), recv: s.pd.regMr(MSG, Access.LocalWrite),
  };
}

async function take(cq: CompletionQueue, n: number, ms: number): Promise<WorkCompletion[]> {
  const got: WorkCompletion[] = [];
  const end = Date.now() + ms;
  while (got.length < n) {
    got.push(...cq.poll(n - got.length));
    if (got.length >= n) break;
    const left = end - Date.now();
    if (left <= 0) break;
    await cq.wait(left).catch(() => {});
  }
  return got;
}

export class Transfer {
  readonly v: Mrs;
  readonly p: Mrs;
  rounds = 0;
  bytes = 0;

  constructor(readonly sv: Side, readonly sp: Side, readonly seed: number, readonly roundMs = 20_000) {
    this.v = mrs(sv);
    this.p = mrs(sp);
    const g = new Gen(mulberry32(seed ^ 0x5a5a));
    this.v.src.buffer.set(g.bytes(REGION));
    this.p.src.buffer.set(g.bytes(REGION));
  }

  /** The STags the real connection uses (what an on-path attacker can learn). */
  get stags(): number[] {
    return [this.v.win.rkey, this.v.src.rkey, this.p.win.rkey, this.p.src.rkey];
  }

  /** One round; throws with what went wrong. */
  async round(): Promise<void> {
    const r = this.rounds++;
    const g = new Gen(mulberry32((this.seed * 31 + r) >>> 0));
    const { sv, sp, v, p } = this;
    const wl = g.range(1, REGION / 2);
    const rl = g.range(1, REGION / 2);
    const ro = g.int(REGION - rl);
    const sl = g.range(0, MSG);
    const pl = g.range(1, REGION / 2);
    const ql = g.range(0, MSG);
    const wo = g.int(REGION - wl);
    const po = g.int(REGION - pl);
    const A = g.bytes(wl);
    const B = g.bytes(sl);
    const C = g.bytes(pl);
    const D = g.bytes(ql);
    v.out.buffer.set(A, 0);
    v.out.buffer.set(B, REGION / 2);
    p.out.buffer.set(C, 0);
    p.out.buffer.set(D, REGION / 2);
    v.sink.buffer.fill(0);
    v.recv.buffer.fill(0);
    p.recv.buffer.fill(0);
    sv.qp.postRecv({ wrId: 1000 + r, sgList: [{ addr: v.recv.addr, length: MSG, lkey: v.recv.lkey }] });
    sp.qp.postRecv({ wrId: 2000 + r, sgList: [{ addr: p.recv.addr, length: MSG, lkey: p.recv.lkey }] });
    sv.qp.postSend({ wrId: 1, opcode: Opcode.RdmaWrite, sgList: [{ addr: v.out.addr, length: wl, lkey: v.out.lkey }], remoteAddr: p.win.addr + wo, rkey: p.win.rkey });
    sv.qp.postSend({ wrId: 2, opcode: Opcode.RdmaRead, sgList: [{ addr: v.sink.addr, length: rl, lkey: v.sink.lkey }], remoteAddr: p.src.addr + ro, rkey: p.src.rkey });
    sv.qp.postSend({ wrId: 3, opcode: Opcode.Send, sgList: sl ? [{ addr: v.out.addr + REGION / 2, length: sl, lkey: v.out.lkey }] : [] });
    sp.qp.postSend({ wrId: 4, opcode: Opcode.RdmaWrite, sgList: [{ addr: p.out.addr, length: pl, lkey: p.out.lkey }], remoteAddr: v.win.addr + po, rkey: v.win.rkey });
    sp.qp.postSend({ wrId: 5, opcode: Opcode.Send, sgList: ql ? [{ addr: p.out.addr + REGION / 2, length: ql, lkey: p.out.lkey }] : [] });
    const [wv, wp] = await Promise.all([take(sv.cq, 4, this.roundMs), take(sp.cq, 3, this.roundMs)]);
    const all = [...wv, ...wp];
    const bad = all.filter((w) => w.status !== WcStatus.Success);
    if (all.length !== 7 || bad.length) {
      throw new Error(`round ${r}: ${all.length}/7 completions, not Success: ${JSON.stringify(bad.map((w) => ({ wrId: String(w.wrId), status: w.status })))}; QP states ${sv.qp.state}/${sp.qp.state}`);
    }
    const recvV = wv.find((w) => w.wrId === 1000 + r);
    const recvP = wp.find((w) => w.wrId === 2000 + r);
    const check = (what: string, got: Uint8Array, want: Uint8Array): void => {
      if (got.length !== want.length || !Buffer.from(got).equals(Buffer.from(want))) throw new Error(`round ${r}: ${what} differs (${want.length} bytes)`);
    };
    check('V→P write', p.win.buffer.subarray(wo, wo + wl), A);
    check('P→V write', v.win.buffer.subarray(po, po + pl), C);
    check('V read of P', v.sink.buffer.subarray(0, rl), p.src.buffer.subarray(ro, ro + rl));
    if (recvP?.byteLen !== sl) throw new Error(`round ${r}: P's receive byteLen ${recvP?.byteLen}, want ${sl}`);
    if (recvV?.byteLen !== ql) throw new Error(`round ${r}: V's receive byteLen ${recvV?.byteLen}, want ${ql}`);
    check('V→P send', p.recv.buffer.subarray(0, sl), B);
    check('P→V send', v.recv.buffer.subarray(0, ql), D);
    this.bytes += wl + rl + sl + pl + ql;
  }
}

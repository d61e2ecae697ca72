// The srd half of the udp campaign's real traffic (issue #11 hole 3's class: srd flows): one
// srd QP on each device, rounds of 1–8 Sends each way through the same path as the rc pair,
// every message checked byte for byte and seen exactly once (srd promises no order). The
// attackers can send to V's srd QP too (any sender can: srd has no connection), so V's side
// keeps its receives posted all the time and sets aside what did not come from P's srd QP
// with the run's tag — those are the attack's, counted as `foreign`. A round that fails (a
// status, a wrong or missing or repeated message, a completion missing after `roundMs`) is a
// campaign failure.
import { Access, Opcode, QpState, WcStatus, type CompletionQueue, type Device, type DeviceAddress, type ProtectionDomain, type QueuePair, type WorkCompletion } from '../../src/index.js';
import { Gen, mulberry32 } from './rng.js';

const SLOT = 2048;
const RECVS = 32;
const HDR = 16;

interface End {
  cq: CompletionQueue;
  qp: QueuePair;
  out: ReturnType<ProtectionDomain['regMr']>;
  recv: ReturnType<ProtectionDomain['regMr']>;
  ah: ReturnType<ProtectionDomain['createAh']>;
}

function end(dev: Device, pd: ProtectionDomain, to: DeviceAddress): End {
  const cq = dev.createCq({ depth: 256 });
  const qp = pd.createQp({ type: 'srd', sendCq: cq, recvCq: cq, maxSendWr: 16, maxRecvWr: RECVS, maxSge: 1, timeoutMs: 20_000 });
  const out = pd.regMr(SLOT * 8, Access.LocalWrite);
  const recv = pd.regMr(SLOT * RECVS, Access.LocalWrite);
  for (let i = 0; i < RECVS; i++) qp.postRecv({ wrId: i, sgList: [{ addr: recv.addr + i * SLOT, length: SLOT, lkey: recv.lkey }] });
  return { cq, qp, out, recv, ah: pd.createAh({ address: to }) };
}

export class SrdTransfer {
  readonly v: End;
  readonly p: End;
  rounds = 0;
  messages = 0;
  bytes = 0;
  /** Receives at V (or P) that were not this run's messages from the other end. */
  foreign = 0;
  /** Receives at V that completed with an error status (a hostile message: length, …). */
  foreignErrors = 0;
  private readonly tag: Uint8Array;
  /** This run's messages received since the last round, copied out as they completed (the slot is reposted at once). */
  private readonly got = { v: [] as Uint8Array[], p: [] as Uint8Array[] };
  private readonly sends = { v: [] as WorkCompletion[], p: [] as WorkCompletion[] };

  /** `vTo`: where V reaches P; `pTo`: where P reaches V (both through the relay). */
  constructor(v: { dev: Device; pd: ProtectionDomain }, p: { dev: Device; pd: ProtectionDomain }, vTo: DeviceAddress, pTo: DeviceAddress, readonly seed: number, readonly roundMs = 20_000) {
    this.v = end(v.dev, v.pd, vTo);
    this.p = end(p.dev, p.pd, pTo);
    this.tag = new Gen(mulberry32(seed ^ 0x5bd5bd)).bytes(8);
  }

  get qpns(): { v: number; p: number } {
    return { v: this.v.qp.qpn, p: this.p.qp.qpn };
  }

  /** Drain both CQs: receives are sorted out and reposted at once (the attack may be using them up). */
  pump(): void {
    for (const [side, e] of [['v', this.v], ['p', this.p]] as const) {
      for (const wc of e.cq.poll(64)) {
        if ((wc.wrId as number) >= 1000) {
          this.sends[side].push(wc);
          continue;
        }
        const slot = wc.wrId as number;
        const from = side === 'v' ? this.p.qp.qpn : this.v.qp.qpn;
        if (wc.status === WcStatus.Success && wc.srcQpn === from && wc.byteLen >= HDR && this.tagged(e, slot)) {
          this.got[side].push(e.recv.buffer.slice(slot * SLOT, slot * SLOT + wc.byteLen));
        } else {
          this.foreign++;
          if (wc.status !== WcStatus.Success) this.foreignErrors++;
        }
        // A flushed receive (the QP failed) is not reposted: the round reports the state.
        if (e.qp.state === QpState.Rts) e.qp.postRecv({ wrId: slot, sgList: [{ addr: e.recv.addr + slot * SLOT, length: SLOT, lkey: e.recv.lkey }] });
      }
    }
  }

  private tagged(e: End, slot: number): boolean {
    const b = e.recv.buffer;
    for (let i = 0; i < 8; i++) if (b[slot * SLOT + i] !== this.tag[i]) return false;
    return true;
  }

  /** One round; throws with what went wrong. */
  async round(): Promise<void> {
    const r = this.rounds++;
    const g = new Gen(mulberry32((this.seed * 131 + r) >>> 0));
    const want = { v: new Map<number, Uint8Array>(), p: new Map<number, Uint8Array>() };
    let posted = { v: 0, p: 0 };
    for (const [from, to] of [['v', 'p'], ['p', 'v']] as const) {
      const e = this[from];
      const n = g.range(1, 8);
      for (let i = 0; i < n; i++) {
        const len = g.range(HDR, SLOT);
        const msg = g.bytes(len);
        msg.set(this.tag, 0);
        new DataView(msg.buffer).setUint32(8, r);
        new DataView(msg.buffer).setUint32(12, i);
        e.out.buffer.set(msg, i * SLOT);
        want[to].set(i, msg);
        e.qp.postSend({ wrId: 1000 + i, opcode: Opcode.Send, sgList: [{ addr: e.out.addr + i * SLOT, length: len, lkey: e.out.lkey }], ah: e.ah, remoteQpn: this[to].qp.qpn });
      }
      posted = { ...posted, [from]: n };
    }
    const deadline = Date.now() + this.roundMs;
    const done = (): boolean => this.sends.v.length >= posted.v && this.sends.p.length >= posted.p && this.got.v.length >= want.v.size && this.got.p.length >= want.p.size;
    while (!done() && Date.now() < deadline) {
      this.pump();
      if (done()) break;
      await new Promise((res) => setTimeout(res, 2));
    }
    const sendsBad = [...this.sends.v, ...this.sends.p].filter((w) => w.status !== WcStatus.Success);
    const state = `srd QP states ${String(this.v.qp.state)}/${String(this.p.qp.state)}`;
    if (!done() || sendsBad.length) {
      throw new Error(`srd round ${r}: sends ${this.sends.v.length}/${posted.v} V, ${this.sends.p.length}/${posted.p} P, not Success ${JSON.stringify(sendsBad.map((w) => w.status))}; received ${this.got.v.length}/${want.v.size} at V, ${this.got.p.length}/${want.p.size} at P; ${state}`);
    }
    for (const side of ['v', 'p'] as const) {
      const seen = new Set<number>();
      for (const b of this.got[side]) {
        const dv = new DataView(b.buffer, b.byteOffset, b.length);
        const round = dv.getUint32(8);
        const i = dv.getUint32(12);
        const m = want[side].get(i);
        if (round !== r || !m || seen.has(i)) throw new Error(`srd round ${r}: at ${side.toUpperCase()} a message of round ${round} index ${i} (${seen.has(i) ? 'twice' : 'unexpected'})`);
        if (!Buffer.from(b).equals(Buffer.from(m))) throw new Error(`srd round ${r}: at ${side.toUpperCase()} message ${i} differs (${m.length} bytes, got ${b.length})`);
        seen.add(i);
        this.bytes += m.length;
      }
      this.messages += seen.size;
      this.got[side] = [];
      this.sends[side] = [];
    }
  }
}

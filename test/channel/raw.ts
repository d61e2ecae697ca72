// A raw end of a channel for hostile tests: raw verbs (cm + QP + regions) speaking the channel's
// wire format by hand (src/channel/wire.ts), so it can do what a channel never would.
import {
  Access, listen, Opcode, WcOpcode, WcStatus,
  type CompletionQueue, type Device, type MemoryRegion, type QueuePair, type WorkCompletion,
} from '../../src/index.js';
import { ctrlImm, dataImm, decodeCtrl, encodeCtrl, parseImm, type Body, type CtrlMsg, type Grant } from '../../src/channel/wire.js';
import { CHAN_HELLO_BUF, CHAN_MBOX_SLOT, CHAN_VERSION, ChanType } from '../../src/wire/channel-spec.js';

const RW = Access.LocalWrite | Access.RemoteWrite;

/**
 * What a raw end grants in its HELLO and keeps posted (defaults: 8 slots of 256 B, window 64,
 * 100 receives after the HELLO's, none posted again).
 */
export interface RawOptions {
  slots?: number;
  slotSize?: number;
  window?: number;
  recvs?: number;
  /** Post a receive again for every write with immediate taken (a peer that keeps up). */
  repost?: boolean;
}

/** One raw end of a channel: its own regions, HELLO, and a hand on every message. */
export class RawEnd {
  readonly pd;
  readonly cq: CompletionQueue;
  readonly fixed: MemoryRegion;
  readonly slots: MemoryRegion;
  readonly scratch: MemoryRegion;
  qp!: QueuePair;
  peerMbox = { addr: 0, rkey: 0, slots: 0 };
  #mboxNext = 0;
  #wr = 1;
  ctrl: CtrlMsg[] = [];
  data: { slot: number; len: number }[] = [];
  statuses: number[] = [];
  onCtrl: (m: CtrlMsg) => void = () => {};

  constructor(readonly dev: Device, readonly ro: RawOptions = {}) {
    this.pd = dev.allocPd();
    this.cq = dev.createCq({ depth: 4096 });
    this.fixed = this.pd.regMr(CHAN_HELLO_BUF + 8 * CHAN_MBOX_SLOT, RW);
    this.slots = this.pd.regMr((ro.slots ?? 8) * (ro.slotSize ?? 256), RW);
    this.scratch = this.pd.regMr(4096, Access.LocalWrite);
  }

  get qpInit() {
    return { sendCq: this.cq, recvCq: this.cq, maxSendWr: 256, maxRecvWr: Math.max(256, (this.ro.recvs ?? 100) + 1), maxSge: 1, maxInline: 4096 };
  }

  setup = (qp: QueuePair): void => {
    qp.postRecv([
      { wrId: 0, sgList: [{ addr: this.fixed.addr, length: CHAN_HELLO_BUF, lkey: this.fixed.lkey }] },
      ...Array.from({ length: this.ro.recvs ?? 100 }, () => ({ wrId: 0 })),
    ]);
  };

  /** `big`: a greedy HELLO — maxEager 2^32 - 1 and 200 slots of 4 MiB (the addresses are not real). */
  start(qp: QueuePair, big = false): void {
    this.qp = qp;
    const hello = encodeCtrl({
      type: ChanType.Hello, hdr: { flags: 0, ctrlCredits: 0, epoch: 0, slotCredits: 0, consumed: 0 },
      hello: {
        version: CHAN_VERSION, ctrlSlots: 8, window: this.ro.window ?? 64, maxEager: big ? 0xffff_ffff : 32768, maxMessage: big ? 0xffff_ffff : 1 << 26,
        mboxRkey: this.fixed.rkey, mboxAddr: this.fixed.addr + CHAN_HELLO_BUF,
      },
      grant: big ? { epoch: 0, slots: 200, slotSize: 4 << 20, addr: this.slots.addr, rkey: this.slots.rkey, phase: 0 }
        : { epoch: 0, slots: this.ro.slots ?? 8, slotSize: this.ro.slotSize ?? 256, addr: this.slots.addr, rkey: this.slots.rkey, phase: 0 },
    });
    this.scratch.buffer.set(hello, 0);
    qp.postSend({ wrId: this.#wr++, opcode: Opcode.Send, sgList: [{ addr: this.scratch.addr, length: hello.length, lkey: this.scratch.lkey }] });
    void this.#loop();
  }

  /** A control message into the peer's mailbox; returns nothing (its completion lands in statuses). */
  sendCtrl(body: Body, credits = 1): void {
    const b = encodeCtrl({ ...body, hdr: { flags: 0, ctrlCredits: credits, epoch: 0, slotCredits: 0, consumed: 0 } } as CtrlMsg);
    this.scratch.buffer.set(b, 0);
    const slot = this.#mboxNext;
    this.#mboxNext = (slot + 1) % this.peerMbox.slots;
    this.qp.postSend({
      wrId: this.#wr++, opcode: Opcode.RdmaWriteWithImm, imm: ctrlImm(slot), remoteAddr: this.peerMbox.addr + slot * CHAN_MBOX_SLOT, rkey: this.peerMbox.rkey,
      sgList: [{ addr: this.scratch.addr, length: b.length, lkey: this.scratch.lkey }],
    });
  }

  /** A data message written wherever we like. */
  writeData(g: Grant, slot: number, seq: number, bytes: Uint8Array): void {
    this.scratch.buffer.set(bytes, 0);
    this.qp.postSend({
      wrId: this.#wr++, opcode: Opcode.RdmaWriteWithImm, imm: dataImm(g.epoch, false, slot, seq), remoteAddr: g.addr + slot * g.slotSize, rkey: g.rkey,
      sgList: bytes.length ? [{ addr: this.scratch.addr, length: bytes.length, lkey: this.scratch.lkey }] : [],
    });
  }

  peerGrant: Grant | undefined;

  async #loop(): Promise<void> {
    for (;;) {
      try {
        await this.cq.wait();
      } catch {
        return;
      }
      let wcs: WorkCompletion[];
      try {
        wcs = this.cq.poll(64);
      } catch {
        return;
      }
      for (const wc of wcs) {
        if (wc.opcode === WcOpcode.Recv && wc.status === WcStatus.Success) {
          const r = decodeCtrl(this.fixed.buffer.slice(0, wc.byteLen));
          if (r.ok && r.msg.type === ChanType.Hello) {
            this.peerMbox = { addr: r.msg.hello.mboxAddr, rkey: r.msg.hello.mboxRkey, slots: r.msg.hello.ctrlSlots };
            this.peerGrant = r.msg.grant;
          }
        } else if (wc.opcode === WcOpcode.RecvRdmaWithImm && wc.status === WcStatus.Success) {
          if (this.ro.repost) this.qp.postRecv({ wrId: 0 });
          const f = parseImm(wc.imm!);
          if (f.ctrl) {
            const at = CHAN_HELLO_BUF + f.slot * CHAN_MBOX_SLOT;
            const r = decodeCtrl(this.fixed.buffer.slice(at, at + wc.byteLen));
            if (r.ok) {
              this.ctrl.push(r.msg);
              this.onCtrl(r.msg);
            }
          } else this.data.push({ slot: f.slot, len: wc.byteLen });
        } else if (wc.opcode !== WcOpcode.Recv && wc.opcode !== WcOpcode.RecvRdmaWithImm) this.statuses.push(wc.status);
      }
    }
  }
}

export async function rawListener(d: Device, service: number, big = false, ro?: RawOptions): Promise<{ raw: RawEnd; accepted: Promise<void> }> {
  const raw = new RawEnd(d, ro);
  const l = listen(d, { pd: raw.pd, qpInit: raw.qpInit, service, setup: raw.setup });
  const accepted = l.accept(10_000).then((qp) => {
    raw.start(qp, big);
    l.close();
  });
  return { raw, accepted };
}

export async function until(pred: () => boolean, ms = 5000): Promise<void> {
  const end = Date.now() + ms;
  while (!pred()) {
    if (Date.now() > end) throw new Error('condition not reached');
    await new Promise((r) => setTimeout(r, 5));
  }
}


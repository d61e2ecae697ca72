// QpLink: a connected rc QP as a dedup MessagePipe (Sends into posted receive buffers) plus an
// RdmaWritePath (RDMA WRITE from a staging region of the sender's device memory into the
// receiver's landing zone). Public verbs API only. The one CQ loop (verbs/cq-driver.ts) drains
// the QP's CQ; receive completions go to the message handler, send and write completions to
// their promises.
//
//   const link = QpLink.open(qp, cq, pd);                  // qp from cm connect()/listen()
//   const tx = new DedupSender({ pipe: link, rdma: link, mem: dedupMemoryOf(pd) });
//
// The landing zone of a receiver is a separate region (DedupLanding below): Access.RemoteWrite,
// in device memory, so the place() kernel writes it directly (and, once hooked, hashes it).
import { Access, Opcode, WcOpcode, WcStatus, wcStatusName } from '../core/enums.js';
import { ErrorCode, SabreError } from '../core/errors.js';
import type { WorkCompletion } from '../core/work.js';
import type { CompletionQueue } from '../verbs/cq.js';
import { driveCq } from '../verbs/cq-driver.js';
import type { MemoryRegion } from '../verbs/mr.js';
import type { ProtectionDomain } from '../verbs/pd.js';
import type { QueuePair } from '../verbs/qp.js';
import type { MessagePipe, RdmaWritePath } from './endpoint.js';

export interface QpLinkOptions {
  /** Receive buffers posted (messages the peer may have in flight: OFFER pages + ROUNDs + a few). Default 32. */
  recvBuffers?: number;
  /** Bytes of each message buffer, the largest message either way. Default 64 KiB. */
  messageBytes?: number;
  /** Sends in flight at once (more are queued). Default 8. */
  sendSlots?: number;
  /**
   * Sends queued beyond those in flight; past it send() rejects with ERR_QUEUE_FULL. The dedup
   * protocol keeps a few messages out at a time (a window of OFFER pages, one ROUND per slot), so
   * a queue this long means the peer stopped taking them. Default 1024.
   */
  maxQueued?: number;
}

/** Queue-pair attributes a QpLink needs (for the cm listen/connect qpInit). */
export const qpLinkQpInit = (cq: CompletionQueue, o: QpLinkOptions = {}): { sendCq: CompletionQueue; recvCq: CompletionQueue; maxSendWr: number; maxRecvWr: number; maxSge: number } => ({
  // Writes: one per run of contiguous needed chunks, so up to slotLen / min per slot.
  sendCq: cq, recvCq: cq, maxSendWr: 4096 + (o.sendSlots ?? 8), maxRecvWr: o.recvBuffers ?? 32, maxSge: 1,
});
/** CQ depth for a QpLink's QP (every send, write and receive signaled). */
export const QP_LINK_CQ_DEPTH = 8192;

const RECV = 0;
const SEND = 1;
const WRITE = 2;

export class QpLink implements MessagePipe, RdmaWritePath {
  readonly qp: QueuePair;
  readonly cq: CompletionQueue;
  readonly pd: ProtectionDomain;
  readonly messageBytes: number;
  readonly #recvMr: MemoryRegion;
  readonly #sendMr: MemoryRegion;
  readonly #recvCount: number;
  readonly #sendSlots: number;
  readonly #maxQueued: number;
  readonly #freeSend: number[] = [];
  readonly #sendQueue: Array<{ bytes: Uint8Array; resolve: () => void; reject: (e: Error) => void }> = [];
  readonly #sends = new Map<number, { resolve: () => void; reject: (e: Error) => void }>();
  readonly #writes = new Map<number, { left: number; resolve: () => void; reject: (e: Error) => void; failed: boolean }>();
  #writeNext = 1;
  #handler: ((b: Uint8Array) => void) | undefined;
  #early: Uint8Array[] = [];
  #onClose: ((e?: Error) => void) | undefined;
  #stage: MemoryRegion | undefined;
  #closed = false;
  /** Counters: messages and bytes each way, writes posted, sends refused (queue full). */
  readonly counters = { messagesSent: 0, messageBytesSent: 0, messagesReceived: 0, writes: 0, writeBytes: 0, sendsRefused: 0 };

  private constructor(qp: QueuePair, cq: CompletionQueue, pd: ProtectionDomain, o: QpLinkOptions) {
    this.qp = qp;
    this.cq = cq;
    this.pd = pd;
    this.messageBytes = o.messageBytes ?? 64 * 1024;
    this.#recvCount = o.recvBuffers ?? 32;
    this.#sendSlots = o.sendSlots ?? 8;
    this.#maxQueued = o.maxQueued ?? 1024;
    this.#recvMr = pd.regMr(this.#recvCount * this.messageBytes, Access.LocalWrite);
    this.#sendMr = pd.regMr(this.#sendSlots * this.messageBytes, Access.LocalWrite);
    for (let i = 0; i < this.#sendSlots; i++) this.#freeSend.push(i);
  }

  /** Post the receive buffers (before the peer can send: call it in the cm `setup` hook, or before connect). */
  static open(qp: QueuePair, cq: CompletionQueue, pd: ProtectionDomain, o: QpLinkOptions = {}): QpLink {
    const link = new QpLink(qp, cq, pd, o);
    for (let i = 0; i < link.#recvCount; i++) link.#postRecv(i);
    void link.#poll();
    return link;
  }

  #postRecv(i: number): void {
    this.qp.postRecv({ wrId: i * 4 + RECV, sgList: [{ addr: this.#recvMr.addr + i * this.messageBytes, length: this.messageBytes, lkey: this.#recvMr.lkey }] });
  }

  // ---- MessagePipe

  send(bytes: Uint8Array): Promise<void> {
    if (this.#closed) return Promise.reject(new SabreError(ErrorCode.Closed, 'link is closed'));
    if (bytes.length > this.messageBytes) return Promise.reject(new SabreError(ErrorCode.InvalidArgument, `message of ${bytes.length} bytes exceeds ${this.messageBytes}`));
    if (this.#sendQueue.length >= this.#maxQueued) {
      this.counters.sendsRefused++;
      return Promise.reject(new SabreError(ErrorCode.QueueFull, `link: ${this.#sendQueue.length} sends already queued (the peer takes none)`));
    }
    return new Promise((resolve, reject) => {
      this.#sendQueue.push({ bytes, resolve, reject });
      this.#pumpSends();
    });
  }

  #pumpSends(): void {
    while (this.#freeSend.length > 0 && this.#sendQueue.length > 0) {
      const slot = this.#freeSend.shift()!;
      const m = this.#sendQueue.shift()!;
      const addr = this.#sendMr.addr + slot * this.messageBytes;
      this.#sendMr.buffer.set(m.bytes, slot * this.messageBytes);
      this.#sends.set(slot, m);
      try {
        this.qp.postSend({ wrId: slot * 4 + SEND, opcode: Opcode.Send, sgList: [{ addr, length: m.bytes.length, lkey: this.#sendMr.lkey }] });
        this.counters.messagesSent++;
        this.counters.messageBytesSent += m.bytes.length;
      } catch (e) {
        this.#sends.delete(slot);
        this.#freeSend.push(slot);
        m.reject(e as Error);
      }
    }
  }

  onMessage(handler: (b: Uint8Array) => void): void {
    this.#handler = handler;
    for (const b of this.#early.splice(0)) handler(b);
  }

  onClose(handler: (e?: Error) => void): void {
    this.#onClose = handler;
  }

  // ---- RdmaWritePath

  stage(bytes: Uint8Array): number {
    const r = this.reserve(bytes.length);
    r.view.set(bytes);
    return r.addr;
  }

  reserve(length: number): { addr: number; view: Uint8Array } {
    const need = Math.max(length, 1);
    if (!this.#stage || this.#stage.length < need) {
      this.#stage?.deregister();
      this.#stage = this.pd.regMr(need, Access.LocalWrite);
    }
    return { addr: this.#stage.addr, view: this.#stage.buffer.subarray(0, length) };
  }

  write(pieces: ReadonlyArray<{ src: number; len: number; remoteAddr: number }>, rkey: number): Promise<void> {
    const st = this.#stage;
    if (!st) return Promise.reject(new SabreError(ErrorCode.InvalidState, 'nothing staged'));
    if (pieces.length === 0) return Promise.resolve();
    const id = this.#writeNext++;
    return new Promise((resolve, reject) => {
      const w = { left: pieces.length, resolve, reject, failed: false };
      this.#writes.set(id, w);
      for (const p of pieces) {
        try {
          this.qp.postSend({ wrId: id * 4 + WRITE, opcode: Opcode.RdmaWrite, sgList: [{ addr: p.src, length: p.len, lkey: st.lkey }], remoteAddr: p.remoteAddr, rkey });
          this.counters.writes++;
          this.counters.writeBytes += p.len;
        } catch (e) {
          this.#writes.delete(id);
          reject(e as Error);
          return;
        }
      }
    });
  }

  // ---- completions

  #poll(): Promise<void> {
    return driveCq(this.cq, 64, {
      onBatch: (wcs) => {
        for (const wc of wcs) this.#complete(wc);
      },
      onEnd: (e) => this.#fail(e instanceof Error ? e : new SabreError(ErrorCode.Closed, String(e))),
    });
  }

  #complete(wc: WorkCompletion): void {
    if (this.#closed) return; // the CQ is the caller's: what completes after close is not ours to act on
    const id = Number(wc.wrId);
    const kind = id & 3;
    const n = id >> 2;
    const ok = wc.status === WcStatus.Success;
    if (kind === RECV && wc.opcode === WcOpcode.Recv) {
      if (!ok) return this.#fail(new SabreError(ErrorCode.Unreachable, `receive completed with ${wcStatusName(wc.status)}`));
      const at = n * this.messageBytes;
      const bytes = this.#recvMr.buffer.slice(at, at + wc.byteLen);
      this.counters.messagesReceived++;
      this.#postRecv(n);
      if (this.#handler) this.#handler(bytes);
      else this.#early.push(bytes);
    } else if (kind === SEND) {
      const m = this.#sends.get(n);
      this.#sends.delete(n);
      this.#freeSend.push(n);
      if (ok) m?.resolve();
      else {
        m?.reject(new SabreError(ErrorCode.Unreachable, `send completed with ${wcStatusName(wc.status)}`));
        return this.#fail(new SabreError(ErrorCode.Unreachable, `send completed with ${wcStatusName(wc.status)}`));
      }
      this.#pumpSends();
    } else if (kind === WRITE) {
      const w = this.#writes.get(n);
      if (!w) return;
      if (!ok && !w.failed) {
        w.failed = true;
        w.reject(new SabreError(ErrorCode.Unreachable, `RDMA WRITE completed with ${wcStatusName(wc.status)}`));
      }
      if (--w.left === 0) {
        this.#writes.delete(n);
        if (!w.failed) w.resolve();
      }
    }
  }

  #fail(e: Error): void {
    if (this.#closed) return;
    this.#closed = true;
    for (const m of this.#sendQueue.splice(0)) m.reject(e);
    for (const m of this.#sends.values()) m.reject(e);
    for (const w of this.#writes.values()) if (!w.failed) w.reject(e);
    this.#onClose?.(e);
  }

  /** Stop polling and free the link's regions (the QP and CQ stay the caller's). */
  close(): void {
    if (!this.#closed) {
      this.#closed = true;
      this.#onClose?.();
    }
    for (const mr of [this.#recvMr, this.#sendMr, this.#stage]) if (mr?.valid) mr.deregister();
  }
}

/** A receiver's landing zone: slots × slotLen bytes of device memory the peer may RDMA WRITE. */
export function regLandingZone(pd: ProtectionDomain, slots: number, slotLen: number): MemoryRegion {
  return pd.regMr(slots * slotLen, Access.LocalWrite | Access.RemoteWrite);
}

// The connection manager agent of a datagram-capable device (udp, inproc): an srd QP at the
// well-known QPN 0xFFFFFFFF (user QPNs count up from 1 and never get there; InfiniBand keeps
// QP1 for its CM the same way; QPN 0 is not used because the UDP link treats it as invalid),
// carrying three small messages as Sends:
//
//   REQ { id, service, qpn, addr, pd? }   client → listener: "connect my rc QP `qpn` at `addr`"
//   REP { id, qpn, pd? }                  listener → client: "use my rc QP `qpn`"
//   REJ { id, reason }                    listener → client
//
// (JSON, at most 1 KiB; `pd` is base64 private data.) After REP both sides call qp.connect on
// their rc QP with the other's address and QPN — the ordinary verbs path, so everything past
// the exchange is what an application exchanging QP info out of band would do. srd is reliable
// (each message exactly once), so the exchange needs no retransmission of its own; a timeout
// bounds a connect to a device nobody answers on.
import { ErrorCode, SabreError } from '../core/errors.js';
import type { QpCaps, QpCtx, RecvCtx, WrCtx } from '../rdmap/context.js';
import { WrKind } from '../rdmap/context.js';
import type { DeviceAddress } from '../core/address.js';
import type { Device } from '../verbs/device.js';
import { Access, Opcode, WcOpcode, WcStatus } from '../core/enums.js';
import type { MemoryRegion } from '../verbs/mr.js';
import type { WorkCompletion } from '../core/work.js';

export const CM_QPN = 0xffff_ffff;
const SLOTS = 32;
const SLOT_BYTES = 1024;

export type CmMessage =
  | { t: 'req'; id: number; service: number; qpn: number; addr: DeviceAddress; pd?: string }
  | { t: 'rep'; id: number; qpn: number; pd?: string }
  | { t: 'rej'; id: number; reason: string };

export interface CmRequest {
  service: number;
  qpn: number;
  addr: DeviceAddress;
  privateData: Uint8Array | undefined;
  reply(qpn: number, privateData?: Uint8Array): void;
  reject(reason: string): void;
}

const enc = new TextEncoder();
const dec = new TextDecoder();
export const b64 = (b: Uint8Array | undefined): string | undefined => (b && b.length ? Buffer.from(b).toString('base64') : undefined);
export const unb64 = (s: unknown): Uint8Array | undefined => (typeof s === 'string' ? new Uint8Array(Buffer.from(s, 'base64')) : undefined);

export class CmAgent {
  readonly dev: Device;
  readonly #ctx: QpCtx;
  readonly #mr: MemoryRegion;
  readonly #services = new Map<number, (r: CmRequest) => void>();
  readonly #pending = new Map<number, { resolve: (m: CmMessage) => void }>();
  #nextId = 1;
  /** Messages that did not parse or named nothing we know. */
  dropped = 0;

  constructor(dev: Device) {
    this.dev = dev;
    const pd = dev.allocPd();
    this.#mr = pd.regMr(SLOTS * SLOT_BYTES, Access.LocalWrite);
    const caps = { maxSendWr: 1 << 16, maxRecvWr: SLOTS, maxSge: 1, maxInline: SLOT_BYTES, rnrRetry: 7, rnrTimeoutMs: 1, maxRdAtomic: 1, timeoutMs: 8000 } as QpCaps;
    const sink = { push: (wc: WorkCompletion) => this.#onWc(wc) };
    if (dev.engine.qps.has(CM_QPN)) throw new SabreError(ErrorCode.InvalidState, 'the CM QPN is taken on this device');
    this.#ctx = dev.engine.createQp(CM_QPN, 'srd', pd.handle, caps, sink, sink);
    for (let i = 0; i < SLOTS; i++) this.#post(i);
  }

  listen(service: number, handler: ((r: CmRequest) => void) | undefined): void {
    if (handler) {
      if (this.#services.has(service)) throw new SabreError(ErrorCode.InvalidState, `service ${service} already has a listener on this device`);
      this.#services.set(service, handler);
    } else this.#services.delete(service);
  }

  /** Send REQ and wait for REP or REJ. */
  request(to: DeviceAddress, service: number, qpn: number, privateData: Uint8Array | undefined, timeoutMs: number): Promise<{ qpn: number; privateData: Uint8Array | undefined }> {
    const id = this.#nextId++;
    return new Promise((resolve, reject) => {
      const t = setTimeout(() => {
        this.#pending.delete(id);
        reject(new SabreError(ErrorCode.Timeout, `no answer from service ${service} at ${JSON.stringify(to)} within ${timeoutMs} ms`));
      }, timeoutMs);
      this.#pending.set(id, {
        resolve: (m) => {
          clearTimeout(t);
          this.#pending.delete(id);
          if (m.t === 'rep') resolve({ qpn: m.qpn, privateData: unb64(m.pd) });
          else if (m.t === 'rej') reject(new SabreError(ErrorCode.Unreachable, `service ${service} at ${JSON.stringify(to)} rejected the connection: ${m.reason}`));
        },
      });
      const pd = b64(privateData);
      this.#send(to, { t: 'req', id, service, qpn, addr: { ...this.dev.address }, ...(pd ? { pd } : {}) });
    });
  }

  #send(to: DeviceAddress, m: CmMessage): void {
    const bytes = enc.encode(JSON.stringify(m));
    if (bytes.length > SLOT_BYTES) throw new SabreError(ErrorCode.InvalidArgument, `CM message of ${bytes.length} bytes exceeds ${SLOT_BYTES} (private data too long)`);
    const dev = this.dev;
    const w: WrCtx = {
      wr: { wrId: 0, opcode: Opcode.Send }, kind: WrKind.Send, signaled: false, pieces: [], total: bytes.length, inline: bytes,
      pending: 0, done: false, status: WcStatus.Success, byteLen: 0, rnrCount: 0, flow: dev.engine.srdFlow(this.#ctx, to, CM_QPN),
    };
    dev.run((now) => dev.engine.postSend(this.#ctx, w, now));
  }

  #post(slot: number): void {
    const dev = this.dev;
    const r: RecvCtx = { wrId: slot, pieces: [{ rec: this.#mr.rec, addr: this.#mr.addr + slot * SLOT_BYTES, len: SLOT_BYTES }], total: SLOT_BYTES, claimed: false };
    dev.run((now) => dev.engine.postRecv(this.#ctx, r, now));
  }

  #onWc(wc: WorkCompletion): boolean {
    if (wc.opcode !== WcOpcode.Recv) return true;
    const slot = Number(wc.wrId);
    if (wc.status !== WcStatus.Success) return true;
    const at = slot * SLOT_BYTES;
    let m: CmMessage | undefined;
    try {
      m = JSON.parse(dec.decode(this.#mr.buffer.subarray(at, at + wc.byteLen))) as CmMessage;
    } catch {
      m = undefined;
    }
    // Repost after the completion step (the engine is mid-step here).
    queueMicrotask(() => {
      if (!this.dev.closed) this.#post(slot);
      if (m) this.#dispatch(m);
      else this.dropped++;
    });
    return true;
  }

  #dispatch(m: CmMessage): void {
    if (!m || typeof m !== 'object' || typeof m.id !== 'number') {
      this.dropped++;
      return;
    }
    if (m.t === 'rep' || m.t === 'rej') {
      const p = this.#pending.get(m.id);
      if (p && (m.t === 'rej' || Number.isInteger(m.qpn))) p.resolve(m);
      else this.dropped++;
      return;
    }
    if (m.t !== 'req' || !Number.isInteger(m.qpn) || !m.addr || typeof m.addr.transport !== 'string') {
      this.dropped++;
      return;
    }
    const addr = m.addr;
    const service = Number.isInteger(m.service) ? m.service : 0;
    const h = this.#services.get(service);
    if (!h) {
      this.#send(addr, { t: 'rej', id: m.id, reason: `no listener for service ${service}` });
      return;
    }
    let answered = false;
    h({
      service, qpn: m.qpn, addr, privateData: unb64(m.pd),
      reply: (qpn, privateData) => {
        if (answered) return;
        answered = true;
        const pd = b64(privateData);
        this.#send(addr, { t: 'rep', id: m.id, qpn, ...(pd ? { pd } : {}) });
      },
      reject: (reason) => {
        if (answered) return;
        answered = true;
        this.#send(addr, { t: 'rej', id: m.id, reason });
      },
    });
  }
}

const agents = new WeakMap<Device, CmAgent>();
export function agentOf(dev: Device): CmAgent {
  let a = agents.get(dev);
  if (!a) {
    a = new CmAgent(dev);
    agents.set(dev, a);
  }
  return a;
}

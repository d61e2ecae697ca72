// The connection manager agent of a device whose link has no connections of its own (udp,
// inproc): the device's CM QP (ProtectionDomain.createCmQp, an srd QP at the reserved QPN
// CM_QPN) carries three small messages as Sends, through the ordinary verbs calls:
//
//   REQ { id, service, qpn, pd? }         client → listener: "connect my rc QP `qpn`"
//   REP { id, qpn, pd? }                  listener → client: "use my rc QP `qpn`"
//   REJ { id, reason }                    listener → client
//
// (JSON, at most 1 KiB; `pd` is base64 private data.) The listener answers, and connects its
// QP, to the address the REQ came from as the link saw it (the CM QP's receive completions
// carry it, like a UD completion's source): a client behind a relay or a NAT cannot know the
// address the listener reaches it at, so it does not write one. After REP both sides call qp.connect on their rc QP with
// the other's address and QPN — the ordinary verbs path, so everything past the exchange is
// what an application exchanging QP info out of band would do. srd is reliable (each message
// exactly once), so the exchange needs no retransmission of its own; a timeout bounds a
// connect to a device nobody answers on.
import { addressKey, type DeviceAddress } from '../core/address.js';
import { Access, Opcode, WcOpcode, WcStatus } from '../core/enums.js';
import { ErrorCode, SabreError } from '../core/errors.js';
import type { CompletionQueue } from '../verbs/cq.js';
import type { Device } from '../verbs/device.js';
import type { MemoryRegion } from '../verbs/mr.js';
import type { ProtectionDomain } from '../verbs/pd.js';
import type { QueuePair } from '../verbs/qp.js';
import { driveCq } from '../verbs/cq-driver.js';
import { CM_QPN } from '../verbs/reserved.js';
import type { SourcedCompletion } from '../verbs/types.js';

/** Receive slots (one message each) kept posted on the CM QP. */
const SLOTS = 32;
const SLOT_BYTES = 1024;

export type CmMessage =
  | { t: 'req'; id: number; service: number; qpn: number; pd?: string }
  | { t: 'rep'; id: number; qpn: number; pd?: string }
  | { t: 'rej'; id: number; reason: string };

export interface CmRequest {
  service: number;
  qpn: number;
  /** Where the REQ came from (as the link observed it): where to answer and connect. */
  from: DeviceAddress;
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
  readonly #pd: ProtectionDomain;
  readonly #cq: CompletionQueue;
  readonly #qp: QueuePair;
  /** SLOTS receive slots, then one send slot (Sends are inlined: the slot is free again at once). */
  readonly #mr: MemoryRegion;
  readonly #services = new Map<number, (r: CmRequest) => void>();
  readonly #pending = new Map<number, { to: string; resolve: (m: CmMessage) => void; reject: (e: Error) => void }>();
  #nextId = 1;
  /** Messages that did not parse or named nothing we know. */
  dropped = 0;

  constructor(dev: Device) {
    this.dev = dev;
    this.#pd = dev.allocPd();
    this.#mr = this.#pd.regMr((SLOTS + 1) * SLOT_BYTES, Access.LocalWrite);
    // Deep enough that failed Sends (unsignaled, but errors complete) never overrun it between polls.
    this.#cq = dev.createCq({ depth: 4096 });
    this.#qp = this.#pd.createCmQp({ sendCq: this.#cq, recvCq: this.#cq, maxSendWr: 1 << 16, maxRecvWr: SLOTS, maxSge: 1, maxInline: SLOT_BYTES });
    for (let i = 0; i < SLOTS; i++) this.#post(i);
    void this.#run();
    // A request waiting for its REP when the device closes settles now, with ERR_CLOSED.
    dev.onClose(() => {
      for (const p of [...this.#pending.values()]) p.reject(new SabreError(ErrorCode.Closed, 'device closed'));
    });
    // udp: a REQ to a port where nothing answers is lost for good when the link's retries run
    // out (path-lost); the request fails then with ERR_UNREACHABLE, not at its timeout.
    dev.on('event', (ev) => {
      if (ev.type !== 'path-lost') return;
      const key = addressKey(ev.peer);
      for (const p of [...this.#pending.values()]) {
        if (p.to === key) p.reject(new SabreError(ErrorCode.Unreachable, `no answer from ${JSON.stringify(ev.peer)} (the link's retries ran out)`));
      }
    });
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
        to: addressKey(to),
        reject: (e) => {
          clearTimeout(t);
          this.#pending.delete(id);
          reject(e);
        },
        resolve: (m) => {
          clearTimeout(t);
          this.#pending.delete(id);
          if (m.t === 'rep') resolve({ qpn: m.qpn, privateData: unb64(m.pd) });
          else if (m.t === 'rej') reject(new SabreError(ErrorCode.Unreachable, `service ${service} at ${JSON.stringify(to)} rejected the connection: ${m.reason}`));
        },
      });
      const pd = b64(privateData);
      try {
        this.#send(to, { t: 'req', id, service, qpn, ...(pd ? { pd } : {}) }, id);
      } catch (e) {
        clearTimeout(t);
        this.#pending.delete(id);
        reject(e);
      }
    });
  }

  /** `req`: the request id a REQ belongs to — its send completes (signaled) only when it fails. */
  #send(to: DeviceAddress, m: CmMessage, req?: number): void {
    const bytes = enc.encode(JSON.stringify(m));
    if (bytes.length > SLOT_BYTES) throw new SabreError(ErrorCode.InvalidArgument, `CM message of ${bytes.length} bytes exceeds ${SLOT_BYTES} (private data too long)`);
    const at = SLOTS * SLOT_BYTES;
    this.#mr.buffer.set(bytes, at);
    this.#qp.postSend({
      opcode: Opcode.Send, sgList: [{ addr: this.#mr.addr + at, length: bytes.length, lkey: this.#mr.lkey }],
      wrId: req ?? 0, signaled: false, ah: this.#pd.createAh({ address: to }), remoteQpn: CM_QPN,
    });
  }

  #post(slot: number): void {
    this.#qp.postRecv({ wrId: slot, sgList: [{ addr: this.#mr.addr + slot * SLOT_BYTES, length: SLOT_BYTES, lkey: this.#mr.lkey }] });
  }

  /** Completions of the CM QP, until the device closes (a message that fails to post ends it too). */
  #run(): Promise<void> {
    return driveCq(this.#cq, SLOTS, {
      onBatch: (wcs) => {
        for (const wc of wcs) this.#onWc(wc as SourcedCompletion);
      },
      onEnd: () => {},
    });
  }

  #onWc(wc: SourcedCompletion): void {
    // A REQ the peer device refused at once: nothing serves its CM QPN (it never listened).
    if (wc.opcode === WcOpcode.Send && wc.status === WcStatus.RemInvReqErr) {
      this.#pending.get(Number(wc.wrId))?.reject(new SabreError(ErrorCode.Unreachable, 'no listener at the peer device (nothing serves its CM QP)'));
    }
    if (wc.opcode !== WcOpcode.Recv || wc.status !== WcStatus.Success) return;
    const slot = Number(wc.wrId);
    const at = slot * SLOT_BYTES;
    let m: CmMessage | undefined;
    try {
      m = JSON.parse(dec.decode(this.#mr.buffer.subarray(at, at + wc.byteLen))) as CmMessage;
    } catch {
      m = undefined;
    }
    if (!this.dev.closed) this.#post(slot);
    if (m && wc.src) this.#dispatch(m, wc.src);
    else this.dropped++;
  }

  #dispatch(m: CmMessage, from: DeviceAddress): void {
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
    if (m.t !== 'req' || !Number.isInteger(m.qpn)) {
      this.dropped++;
      return;
    }
    const service = Number.isInteger(m.service) ? m.service : 0;
    const h = this.#services.get(service);
    if (!h) {
      this.#send(from, { t: 'rej', id: m.id, reason: `no listener for service ${service}` });
      return;
    }
    let answered = false;
    h({
      service, qpn: m.qpn, from, privateData: unb64(m.pd),
      reply: (qpn, privateData) => {
        if (answered) return;
        answered = true;
        const pd = b64(privateData);
        this.#send(from, { t: 'rep', id: m.id, qpn, ...(pd ? { pd } : {}) });
      },
      reject: (reason) => {
        if (answered) return;
        answered = true;
        this.#send(from, { t: 'rej', id: m.id, reason });
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

// The connection manager agent of a device whose link has no connections of its own (udp,
// inproc): the device's CM QP (ProtectionDomain.createCmQp, an srd QP at the reserved QPN
// CM_QPN) carries three small messages as Sends, through the ordinary verbs calls:
//
//   REQ { id, service, qpn, pd?, ports?, routes? }
//                                         client → listener: "connect my rc QP `qpn`" (`ports`: the
//                                         client's NIC threads' ports, when it has several and
//                                         `routes`: it reaches the listener's QPs by the listener's
//                                         ports; without them its QP is on thread 0)
//   REP { id, qpn, pd? }                  listener → client: "use my rc QP `qpn`"
//   REJ { id, reason, busy?, port? }      listener → client (`busy`: ask again later; `port`: the
//                                         client is reached at its CM QP's port only — its ports
//                                         were rewritten on the way — so it asks again with a QP
//                                         on thread 0)
//
// (JSON, at most 1 KiB; `pd` is base64 private data.) The listener answers, and connects its
// QP, to the address the REQ came from as the link saw it (the CM QP's receive completions
// carry it, like a UD completion's source): a client behind a relay or a NAT cannot know the
// address the listener reaches it at, so it does not write one (a client of several NIC threads
// writes its ports, used only when the REQ came from the port they give its CM QP: ./core.ts). After REP both sides call qp.connect on their rc QP with
// the other's address and QPN — the ordinary verbs path, so everything past the exchange is
// what an application exchanging QP info out of band would do. srd is reliable (each message
// exactly once), so the exchange needs no retransmission of its own; a timeout bounds a
// connect to a device nobody answers on.
//
// The exchange itself is the sans-I/O core ./core.ts; this shell owns the QP, its receive
// slots, the one timer, the listeners' handlers and the promises of requests.
import type { DeviceAddress } from '../core/address.js';
import { Access, Opcode, WcOpcode, WcStatus } from '../core/enums.js';
import type { CompletionQueue } from '../verbs/cq.js';
import type { Device } from '../verbs/device.js';
import type { MemoryRegion } from '../verbs/mr.js';
import type { ProtectionDomain } from '../verbs/pd.js';
import type { QueuePair } from '../verbs/qp.js';
import { driveCq } from '../verbs/cq-driver.js';
import { CM_QPN } from '../verbs/reserved.js';
import type { SourcedCompletion } from '../verbs/types.js';
import { ErrorCode, SabreError } from '../core/errors.js';
import { CM_MESSAGE_BYTES, CmCore } from './core.js';
import { type CmCounters, cmCounters } from './counters.js';

/**
 * Receive slots (one message each) kept posted on the CM QP: enough for a burst of connects
 * from many peers at once (a burst past them is refused by RNR and retried, which costs time).
 */
const SLOTS = 128;
const SLOT_BYTES = CM_MESSAGE_BYTES;
/**
 * A REQ past the slots waits in the sender's RNR retries until this device's application
 * thread has handled earlier ones and posted their slots again — which, with the NIC on a
 * thread of its own, can take far longer than an ordinary QP's 7 × 1 ms (a listener making a
 * QP per accepted REQ). Patience of about the default connect deadline; the request's own
 * deadline still bounds each connect.
 */
const RNR_RETRY = 1000;
const RNR_TIMEOUT_MS = 10;

export interface CmRequest {
  /** The REQ's id: with `from`, names the request (a REQ seen again carries both again). */
  id: number;
  service: number;
  qpn: number;
  /** Where the REQ came from (as the link observed it): where to answer. */
  from: DeviceAddress;
  /** Where to connect: `from`, with the requester's NIC threads' ports when it has several (./core.ts). */
  peer: DeviceAddress;
  /** The requester reaches this device's QPs at their own threads' ports; else only at `port` (thread 0). */
  routes: boolean;
  privateData: Uint8Array | undefined;
  reply(qpn: number, privateData?: Uint8Array): void;
  /** `busy`: no room now (backlog full); the requester tries again within its deadline. */
  reject(reason: string, busy?: boolean): void;
}

type Settle = { resolve: (v: { qpn: number; privateData: Uint8Array | undefined }) => void; reject: (e: Error) => void };

export class CmAgent {
  readonly dev: Device;
  readonly #core: CmCore;
  readonly #pd: ProtectionDomain;
  readonly #cq: CompletionQueue;
  readonly #qp: QueuePair;
  /** SLOTS receive slots, then one send slot (Sends are inlined: the slot is free again at once). */
  readonly #mr: MemoryRegion;
  readonly #handlers = new Map<number, (r: CmRequest) => void>();
  readonly #settles = new Map<number, Settle>();
  readonly #counters: CmCounters;
  /** Why the completion loop stopped on a device still open (a CQ overrun): every request fails with it. */
  #stopped: SabreError | undefined;
  #timer: ReturnType<typeof setTimeout> | undefined;
  #timerAt = Infinity;

  constructor(dev: Device) {
    this.dev = dev;
    const ports = dev.address['ports'];
    this.#core = new CmCore(Array.isArray(ports) ? { ports: ports as number[] } : {});
    this.#pd = dev.allocPd();
    this.#mr = this.#pd.regMr((SLOTS + 1) * SLOT_BYTES, Access.LocalWrite);
    // Deep enough that failed Sends (unsignaled, but errors complete) never overrun it between polls.
    this.#cq = dev.createCq({ depth: 4096 });
    this.#qp = this.#pd.createCmQp({
      sendCq: this.#cq, recvCq: this.#cq, maxSendWr: 1 << 16, maxRecvWr: SLOTS, maxSge: 1, maxInline: SLOT_BYTES,
      rnrRetry: RNR_RETRY, rnrTimeoutMs: RNR_TIMEOUT_MS,
    });
    for (let i = 0; i < SLOTS; i++) this.#post(i);
    // dev.stats().cm: what a peer sent the CM QP that served nothing (unparsable, unknown,
    // longer than a slot), REQs refused, handler failures (./counters.ts).
    this.#counters = cmCounters(dev);
    this.#counters.core = this.#core;
    void this.#run();
    // A request waiting for its REP when the device closes settles now, with ERR_CLOSED.
    dev.onClose(() => this.#step((now) => this.#core.handleClose(now)));
    // udp: a REQ to a port where nothing answers is lost for good when the link's retries run
    // out (path-lost); the request fails then with ERR_UNREACHABLE, not at its timeout.
    dev.on('event', (ev) => {
      if (ev.type === 'path-lost') this.#step((now) => this.#core.handlePeerLost(ev.peer, now));
    });
  }

  /** Messages that did not parse or named nothing we know. */
  get dropped(): number {
    return this.#core.dropped;
  }

  listen(service: number, handler: ((r: CmRequest) => void) | undefined): void {
    if (handler && this.#stopped) throw this.#stopped;
    this.#core.listen(service, handler !== undefined);
    if (handler) this.#handlers.set(service, handler);
    else this.#handlers.delete(service);
  }

  /** Send REQ and wait for REP or REJ. */
  request(to: DeviceAddress, service: number, qpn: number, privateData: Uint8Array | undefined, timeoutMs: number, atPort = false, hosts?: readonly string[]): Promise<{ qpn: number; privateData: Uint8Array | undefined }> {
    return new Promise((resolve, reject) => {
      try {
        if (this.#stopped) throw this.#stopped;
        this.#step((now) => this.#settles.set(this.#core.request(to, service, qpn, privateData, timeoutMs, now, atPort, hosts), { resolve, reject }));
      } catch (e) {
        reject(e);
      }
    });
  }

  /** Feed the core, then carry out what it asks, in order. */
  #step(input: (now: number) => void): void {
    input(performance.now());
    for (let a = this.#core.pollAction(); a !== undefined; a = this.#core.pollAction()) {
      switch (a.kind) {
        case 'send':
          try {
            this.#send(a.to, a.bytes, a.req);
          } catch (e) {
            // A request whose REQ cannot be posted fails now (the device closed under it).
            if (a.req !== undefined) {
              this.#core.cancel(a.req);
              this.#take(a.req)?.reject(e as Error);
            }
          }
          break;
        case 'settled': {
          const s = this.#take(a.id);
          if (a.error) s?.reject(a.error);
          else if (a.value) s?.resolve(a.value);
          break;
        }
        case 'request': {
          const h = this.#handlers.get(a.service);
          let answered = false;
          let sent = false;
          const answer = (f: () => void): void => {
            if (answered) return;
            answered = true;
            this.#step(f);
            sent = true;
          };
          try {
            h?.({
              id: a.id, service: a.service, qpn: a.qpn, from: a.from, peer: a.peer, routes: a.routes, privateData: a.privateData,
              reply: (qpn, privateData) => answer(() => this.#core.reply(a.from, a.id, qpn, privateData)),
              reject: (reason, busy) => answer(() => this.#core.reject(a.from, a.id, reason, busy)),
            });
          } catch {
            // A handler that throws (or an answer that cannot be sent) is that request's failure,
            // never the loop's: this loop serves every listener of the device, and ending it would
            // leave the CM deaf for good. The requester hears a REJ instead of waiting out its timeout.
            this.#counters.handlerErrors++;
            if (!sent) this.#core.reject(a.from, a.id, 'the listener failed on this request');
          }
          break;
        }
      }
    }
    this.#arm();
  }

  #take(id: number): Settle | undefined {
    const s = this.#settles.get(id);
    this.#settles.delete(id);
    return s;
  }

  /** One timer, at the core's earliest deadline (a connect waiting for its answer keeps the process alive, as a socket would). */
  #arm(): void {
    const at = this.#core.pollTimeout() ?? Infinity;
    if (at === this.#timerAt) return;
    if (this.#timer) clearTimeout(this.#timer);
    this.#timer = undefined;
    this.#timerAt = at;
    if (at === Infinity) return;
    this.#timer = setTimeout(() => {
      this.#timer = undefined;
      this.#timerAt = Infinity;
      this.#step((now) => this.#core.handleTimeout(now));
    }, Math.max(0, at - performance.now()));
  }

  /** `req`: the request id a REQ belongs to — its send completes (signaled) only when it fails. */
  #send(to: DeviceAddress, bytes: Uint8Array, req?: number): void {
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

  /**
   * Completions of the CM QP, until the device closes. One completion whose handling throws is
   * counted and passed over: the loop is the device's whole CM. Should it end anyway with the
   * device open (the CQ overran), that is said: requests waiting and later ones fail with why,
   * and dev.stats().cm.stopped is 1 — not a CM that silently stops answering.
   */
  #run(): Promise<void> {
    return driveCq(this.#cq, SLOTS, {
      onBatch: (wcs) => {
        for (const wc of wcs) {
          try {
            this.#onWc(wc as SourcedCompletion);
          } catch {
            this.#counters.handlerErrors++;
          }
        }
      },
      onEnd: (e) => {
        if (this.dev.closed) return;
        this.#stopped = new SabreError(ErrorCode.InvalidState, `the device's CM stopped: ${(e as Error)?.message ?? String(e)}`, { cause: e });
        this.#counters.stopped = 1;
        this.#step((now) => this.#core.handleClose(now, this.#stopped));
      },
    });
  }

  #onWc(wc: SourcedCompletion): void {
    // A REQ the peer device refused at once: nothing serves its CM QPN (it never listened).
    if (wc.opcode === WcOpcode.Send && wc.status === WcStatus.RemInvReqErr) {
      this.#step((now) => this.#core.handleRefused(Number(wc.wrId), now));
      return;
    }
    // A REQ the peer's CM had no receive for through every RNR retry, or one flushed behind
    // such a REQ when its flow failed: it goes again.
    if (wc.opcode === WcOpcode.Send && (wc.status === WcStatus.RnrRetryExcErr || wc.status === WcStatus.WrFlushErr)) {
      this.#step((now) => this.#core.handleBusy(Number(wc.wrId), now));
      return;
    }
    if (wc.opcode !== WcOpcode.Recv) return;
    const slot = Number(wc.wrId);
    if (wc.status !== WcStatus.Success) {
      // A Send longer than a slot (anyone may Send here) completes its receive in error: the
      // slot goes back, or a few hundred such Sends would leave no receive for any REQ. Counted
      // as dropped; a flush means the QP is going (the device closes).
      if (wc.status === WcStatus.WrFlushErr || this.dev.closed) return;
      this.#core.dropped++;
      this.#post(slot);
      return;
    }
    const at = slot * SLOT_BYTES;
    // Copied out before the slot is posted again.
    const bytes = this.#mr.buffer.slice(at, at + wc.byteLen);
    if (!this.dev.closed) this.#post(slot);
    this.#step((now) => this.#core.handleMessage(bytes, wc.src, now));
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

// An rdma_cm-like convenience over the verbs API: listen / accept / connect that hand back a
// connected rc QP, for applications that do not exchange QP numbers out of band. Same calls on
// every transport:
//
//   const l = listen(dev, { pd, qpInit, service: 7, setup: (qp) => qp.postRecv(...) });
//   const qp = await l.accept();                  // or: for await (const qp of l) …
//   const qp = await connect(dev, serverDev.address, { pd, qpInit, service: 7, privateData });
//
// The cm speaks verbs only. tcp (a device whose link carries the exchange, Device.linkServices):
// the MPA handshake is the exchange. The client's MPA Request carries sabre's private-data
// block with responderQpn 0 ("any QP of this service") and the service number; the listener
// creates a QP, answers with its QPN in the MPA Reply, and both sides bind that very TCP
// connection to their QPs. A standard iWARP initiator (no sabre block) reaches service 0.
// udp / inproc: a CM agent on the device's CM QP (reserved QPN) exchanges REQ/REP/REJ as srd
// Sends (see ./agent.ts), then both sides qp.connect as usual; the listener connects to the
// address the REQ came from, so a client behind a relay or NAT is reached.
//
// `setup(qp)` runs on the new QP before it connects, so receives are posted before the peer can
// send (as with rdma_cm, where receives go in before rdma_accept / rdma_connect).
import { addressKey, type DeviceAddress, sourceKey } from '../core/address.js';
import { busiestSource, oldestOf } from '../core/busiest.js';
import { timerMs } from '../core/deadline.js';
import { ErrorCode, isListenerBusy, refusalReason, SabreError } from '../core/errors.js';
import { portsOf, routeTo } from '../core/peer-route.js';
import type { ServiceRequest } from '../core/link.js';
import { abortError, checkSignal, onAbort } from '../verbs/abort.js';
import type { CompletionQueue } from '../verbs/cq.js';
import type { Device } from '../verbs/device.js';
import { Listener } from '../verbs/listener.js';
import { checkPeerAddress, resolvePeerHost } from '../verbs/peer-address.js';
import type { ProtectionDomain } from '../verbs/pd.js';
import type { QueuePair } from '../verbs/qp.js';
import type { QpInit } from '../verbs/types.js';
import { agentOf, type CmRequest } from './agent.js';
import { isAtPortOnly, repFits } from './core.js';
import { type CmCounters, cmCounters } from './counters.js';

export interface CmQpOptions {
  /** Default: one protection domain per device, made on first use (defaultPd(dev)). */
  pd?: ProtectionDomain;
  /**
   * rc QP attributes (type is forced to 'rc'). Default: maxSendWr 64, maxRecvWr 64, maxSge 4,
   * and, when sendCq / recvCq are not given, one CQ of the QP's own (qp.sendCq) deep enough
   * for all its work (maxSendWr + maxRecvWr).
   */
  qpInit?: Partial<Omit<QpInit, 'type'>> & { type?: 'rc' };
  /**
   * Runs on the new QP before it connects: post receives here. A listener's gets the requester
   * (`peer`, as the link saw it). Throwing rejects the connect ('cannot create a QP: …'); a
   * listenerRefusal (core/errors.ts) is sent as its reason verbatim, for the dialer's
   * rejectionReason.
   */
  setup?: (qp: QueuePair, request?: { peer: DeviceAddress }) => void;
  /** Service number (rdma_cm's port space within a device). Default 0. */
  service?: number;
  /** Bytes for the peer (at most 486 on tcp, ~700 on udp/inproc). */
  privateData?: Uint8Array;
}

/**
 * How long a listener's new QP waits for its requester's QP to connect (qp.connect's default,
 * named: a REQ's answer is remembered as long, ./index.ts #answered).
 */
const ACCEPT_CONNECT_MS = 10_000;

export interface CmListenOptions extends CmQpOptions {
  /** Connected QPs waiting for accept(); further requests are rejected. Default 16. */
  backlog?: number;
}

export interface CmConnectOptions extends CmQpOptions {
  /** Whole connect deadline. Default 10 000 ms. */
  timeoutMs?: number;
  /** Aborts the connect: rejects with ERR_ABORTED, the new QP is destroyed. */
  signal?: AbortSignal;
}

/** What the peer said when the connection was made. */
export interface CmConnectionInfo {
  /** The peer's private data (undefined when it sent none). */
  privateData: Uint8Array | undefined;
  remoteQpn: number;
  service: number;
  /**
   * The peer device's address the QP is connected to: on the accepting side the address the
   * request came from as the link saw it (a client behind a relay or NAT is named by where it
   * is reached, not by what it thinks its address is); on the connecting side the address given
   * to connect.
   */
  peer: DeviceAddress;
  /** @internal which device the peer is, where `peer` does not say (tcp, accepting side: ServiceRequest.peerKey). */
  peerKey?: string;
}

const infos = new WeakMap<QueuePair, CmConnectionInfo>();

/** What the peer said, and where it is, for a QP made by listen/accept or connect. */
export function connectionInfo(qp: QueuePair): CmConnectionInfo | undefined {
  return infos.get(qp);
}

function serviceOf(s: number | undefined): number {
  const v = s ?? 0;
  if (!Number.isInteger(v) || v < 0 || v > 0xffff_ffff) throw new SabreError(ErrorCode.InvalidArgument, 'service must be a uint32');
  return v;
}

const defaultPds = new WeakMap<Device, ProtectionDomain>();

/** The protection domain listen / connect use when the options name none (one per device). */
export function defaultPd(dev: Device): ProtectionDomain {
  let pd = defaultPds.get(dev);
  if (!pd) {
    pd = dev.allocPd();
    defaultPds.set(dev, pd);
  }
  return pd;
}

function newQp(dev: Device, o: CmQpOptions, peer?: DeviceAddress): QueuePair {
  if (o === null || typeof o !== 'object') throw new SabreError(ErrorCode.InvalidArgument, 'listen/connect options must be an object');
  if (o.qpInit !== undefined && (o.qpInit === null || typeof o.qpInit !== 'object')) throw new SabreError(ErrorCode.InvalidArgument, 'qpInit must be an object');
  if (o.setup !== undefined && typeof o.setup !== 'function') throw new SabreError(ErrorCode.InvalidArgument, 'setup must be a function');
  const pd = o.pd ?? defaultPd(dev);
  if (pd.device !== dev) throw new SabreError(ErrorCode.InvalidArgument, 'pd belongs to another device');
  const init = { maxSendWr: 64, maxRecvWr: 64, maxSge: 4, ...o.qpInit };
  let own: CompletionQueue | undefined;
  if (!init.sendCq || !init.recvCq) {
    const s = typeof init.maxSendWr === 'number' ? init.maxSendWr : 64;
    const r = typeof init.maxRecvWr === 'number' ? init.maxRecvWr : 64;
    own = dev.createCq({ depth: Math.max(1, Math.min(s + r, 1 << 22)) });
  }
  let qp: QueuePair;
  try {
    qp = pd.createQp({ ...init, sendCq: init.sendCq ?? own!, recvCq: init.recvCq ?? own!, type: 'rc' });
  } catch (e) {
    if (own) dev.dropCq(own);
    throw e;
  }
  if (own) qp.ownCq = own;
  try {
    if (peer) o.setup?.(qp, { peer });
    else o.setup?.(qp);
  } catch (e) {
    qp.destroy();
    throw e;
  }
  return qp;
}

/** A failure while the device closed is the close: one code, ERR_CLOSED. */
function asClosed(dev: Device, e: unknown): unknown {
  if (dev.closed && !(e instanceof SabreError && e.code === ErrorCode.Closed)) return new SabreError(ErrorCode.Closed, 'device closed', { cause: e });
  return e;
}

export interface CmListenerCounters {
  /** Requests whose QP was still connecting when the backlog filled: closed for a newer request. */
  halfOpenEvicted: number;
}

/**
 * Connected QPs of one service, in connection order: accept(), for-await, close() (../verbs/listener.ts).
 *
 * A request takes a backlog slot from its REQ on, while its QP connects. A peer can make that
 * wait last (a REQ for a QP it never connects, an MPA Request it never follows): with a full
 * backlog the oldest still-connecting request of a source holding more of them than the new
 * request's source is closed for it (counted), as a SYN cache drops half-open entries, so they cannot
 * keep other sources out; a request finding no such room waits (busy).
 */
export class CmListener extends Listener<QueuePair> {
  readonly service: number;
  readonly #opts: CmListenOptions;
  readonly #backlog: number;
  /** QPs made for a request and still connecting, oldest first, with their source host. */
  readonly #connecting = new Map<QueuePair, string>();
  readonly #counters: CmListenerCounters = { halfOpenEvicted: 0 };
  /** The device's cm counters (dev.stats().cm): refusals and evictions of every listener. */
  readonly #cm: CmCounters;
  /**
   * udp / inproc: the REQs answered with a new QP, by source address and id, oldest first, each
   * until its QP's connect deadline: the same REQ again (the requester's CM resends one its link
   * flushed; anyone may repeat one) gets the same REP and makes no second QP. At most `backlog`
   * entries, as the requests a backlog holds at once.
   */
  readonly #answered = new Map<string, { qpn: number; until: number }>();
  readonly #stop: () => void;

  /** @internal use listen() */
  constructor(dev: Device, opts: CmListenOptions = {}) {
    dev.assertOpen();
    if (opts === null || typeof opts !== 'object') throw new SabreError(ErrorCode.InvalidArgument, 'listen options must be an object');
    super(dev, 'connection');
    this.service = serviceOf(opts.service);
    this.#opts = opts;
    const backlog = opts.backlog ?? 16;
    if (!Number.isInteger(backlog) || backlog < 1 || backlog > 1 << 16) throw new SabreError(ErrorCode.InvalidArgument, 'backlog must be an integer in 1..65536');
    this.#backlog = backlog;
    // A REP carries the private data and echoes the REQ's id and our QPN: one that cannot fit a
    // CM message for the largest of them could never be sent, and every REQ would go unanswered.
    if (!dev.linkServices && !repFits(opts.privateData)) {
      throw new SabreError(ErrorCode.InvalidArgument, `privateData of ${opts.privateData!.length} bytes does not fit a CM reply (at most about 700 bytes on udp / inproc)`);
    }
    this.#cm = cmCounters(dev);
    if (dev.linkServices) {
      dev.listenService(this.service, (r) => this.#onService(r));
      this.#stop = () => dev.listenService(this.service, undefined);
    } else {
      const agent = agentOf(dev);
      agent.listen(this.service, (r) => this.#onDatagram(r));
      this.#stop = () => agent.listen(this.service, undefined);
    }
    this.watchDevice();
  }

  get counters(): CmListenerCounters {
    return { ...this.#counters };
  }

  /**
   * The service goes (a closed device has already let go of it), and with it the QPs made for
   * requests still connecting: nobody will accept them, and they would otherwise hold their
   * resources (and greet their peers) until their connect deadline.
   */
  protected release(): void {
    if (!this.device.closed) this.#stop();
    const half = [...this.#connecting.keys()];
    this.#connecting.clear();
    this.#answered.clear();
    for (const qp of half) qp.destroy();
  }

  /** A connected QP never accepted is destroyed: its peer learns the connection is gone. */
  protected dispose(qp: QueuePair): void {
    qp.destroy();
  }

  /**
   * Room for one more request from `host`: none while closing or while the backlog is all
   * connected QPs. A source never closes its own requests (a crowd of one host's connects waits
   * its turn, busy); it closes the oldest of a source that holds more connecting requests than it.
   */
  #room(host: string): boolean {
    if (this.closing) return false;
    if (this.ready + this.#connecting.size < this.#backlog) return true;
    const { most, count } = busiestSource(this.#connecting);
    if (most === undefined || most === host || count.get(most)! <= (count.get(host) ?? 0)) return false;
    const qp = oldestOf(this.#connecting, most);
    if (qp === undefined) return false;
    this.#connecting.delete(qp);
    this.#counters.halfOpenEvicted++;
    this.#cm.halfOpenEvicted++;
    qp.destroy();
    return true;
  }

  /** A request's QP connected (or failed): delivered unless it was closed for a newer request meanwhile. */
  #settle(qp: QueuePair, info: CmConnectionInfo | undefined): void {
    if (!this.#connecting.delete(qp)) return;
    if (!info) return qp.destroy();
    if (!this.closing) infos.set(qp, info);
    this.offer(qp);
  }

  #onService(r: ServiceRequest): void {
    if (!this.#room(sourceKey(r.from))) {
      // A full backlog refuses for now only (busy): the dialer asks again, as a SYN is resent.
      this.#cm.refusedBusy++;
      r.reject(this.closing ? 'listener closed' : 'backlog full', !this.closing);
      return;
    }
    let qp: QueuePair;
    try {
      qp = newQp(this.device, this.#opts, r.from);
    } catch (e) {
      r.reject(refusalReason(e) ?? `cannot create a QP: ${(e as Error).message}`);
      return;
    }
    this.#connecting.set(qp, sourceKey(r.from));
    r.accept(qp.qpn, this.#opts.privateData)
      // The connection is the QP's; connect binds the QP to it (the peer as the link saw it).
      .then(() => qp.connect({ address: r.from, qpn: r.remoteQpn }))
      .then(
        () => this.#settle(qp, { privateData: r.privateData, remoteQpn: r.remoteQpn, service: this.service, peer: r.from, ...(r.peerKey ? { peerKey: r.peerKey } : {}) }),
        () => this.#settle(qp, undefined),
      );
  }

  #onDatagram(r: CmRequest): void {
    const key = `${addressKey(r.from)}#${r.id}`;
    const now = performance.now();
    const seen = this.#answered.get(key);
    if (seen !== undefined && seen.until > now && !this.closing) {
      this.#cm.repeatedRequests++;
      r.reply(seen.qpn, this.#opts.privateData);
      return;
    }
    if (!this.#room(sourceKey(r.from))) {
      this.#cm.refusedBusy++;
      r.reject(this.closing ? 'listener closed' : 'backlog full', !this.closing);
      return;
    }
    let qp: QueuePair;
    try {
      // A requester that knows only the device's `port` reaches its first NIC thread only.
      qp = r.routes ? newQp(this.device, this.#opts, r.peer) : this.device.onFirstThread(() => newQp(this.device, this.#opts, r.peer));
    } catch (e) {
      r.reject(refusalReason(e) ?? `cannot create a QP: ${(e as Error).message}`);
      return;
    }
    this.#connecting.set(qp, sourceKey(r.from));
    this.#remember(key, qp.qpn, now);
    // The requester's QP is reached where the REQ came from, or at another port its REQ lists
    // (its QP's NIC thread, ./core.ts). That other port is the requester's word only: our QP
    // sends nothing there until the requester's QP greets it from that port (the udp link
    // validates that source with its cookie handshake), so a REQ cannot aim our connect traffic
    // at another socket of its host. Connected before the REP goes, so the QP already waits for
    // the greeting the REP brings.
    const passive = addressKey(routeTo(r.peer, r.qpn)) !== addressKey(r.from);
    qp.connect({ address: r.peer, qpn: r.qpn, timeoutMs: ACCEPT_CONNECT_MS }, { passive }).then(
      () => this.#settle(qp, { privateData: r.privateData, remoteQpn: r.qpn, service: this.service, peer: r.peer }),
      () => this.#settle(qp, undefined),
    );
    try {
      r.reply(qp.qpn, this.#opts.privateData);
    } catch (e) {
      // Not answered: the QP goes, and the agent tells the requester (a REJ).
      this.#connecting.delete(qp);
      this.#answered.delete(key);
      qp.destroy();
      throw e;
    }
  }

  /** Remember REQ `key`'s answer until its QP's connect deadline; expired and (past `backlog`) oldest entries go first. */
  #remember(key: string, qpn: number, now: number): void {
    for (const [k, v] of this.#answered) {
      if (v.until > now && this.#answered.size < this.#backlog) break;
      this.#answered.delete(k);
    }
    this.#answered.set(key, { qpn, until: now + ACCEPT_CONNECT_MS });
  }
}

/** Accept connections for `opts.service` on `dev`, each on a new rc QP made from `opts` (all optional). */
export function listen(dev: Device, opts: CmListenOptions = {}): CmListener {
  return new CmListener(dev, opts);
}

/**
 * Connect a new rc QP to the listener for `opts.service` at `address`; resolves when it can
 * send. Rejects with ERR_INVALID_ARGUMENT (malformed address), ERR_UNREACHABLE (no route, a
 * host that does not resolve, the listener rejected), ERR_REFUSED (tcp: nothing listens at the
 * port), ERR_TIMEOUT (also: the listener's backlog stayed full — a full backlog is asked again
 * until the deadline), ERR_ABORTED, ERR_CLOSED (the device closed meanwhile).
 */
export async function connect(dev: Device, address: DeviceAddress, opts: CmConnectOptions = {}): Promise<QueuePair> {
  dev.assertOpen();
  if (opts === null || typeof opts !== 'object') throw new SabreError(ErrorCode.InvalidArgument, 'connect options must be an object');
  const service = serviceOf(opts.service);
  const asked = opts.timeoutMs ?? 10_000;
  // A deadline already past (a caller's remaining budget) times out, it is not a misuse.
  if (typeof asked !== 'number' || Number.isNaN(asked)) throw new SabreError(ErrorCode.InvalidArgument, 'timeoutMs must be a number');
  const timeoutMs = timerMs(asked);
  checkPeerAddress(dev, address, 'connect');
  const signal = opts.signal;
  checkSignal(signal, 'connect');
  if (signal?.aborted) throw abortError(signal, 'connect');
  const hosts = await resolvePeerHost(address, 'connect');
  const deadline = performance.now() + timeoutMs;
  // A listener whose backlog is full refuses for now (busy): ask again after a pause that
  // grows, until the deadline — many clients connecting at once all get in as it accepts.
  const full = (cause: unknown): SabreError =>
    new SabreError(ErrorCode.Timeout, `service ${service} at ${JSON.stringify(address)} had no room for a connection within ${timeoutMs} ms (its backlog stayed full)`, { cause });
  let atPort = false;
  for (let attempt = 0; ; attempt++) {
    try {
      return await connectOnce(dev, address, service, opts, deadline, atPort, hosts);
    } catch (e) {
      // The listener reaches us at our `port` alone (a NAT or relay rewrote it on the way): ask
      // again, once, with a QP there.
      if (!atPort && isAtPortOnly(e)) {
        atPort = true;
        attempt--;
        continue;
      }
      // The last ask can run out of time before its busy answer comes (a loaded host): the
      // listener has said why already, so that is the error, not "no answer".
      if (attempt > 0 && e instanceof SabreError && e.code === ErrorCode.Timeout) throw full(e);
      if (!isListenerBusy(e)) throw e;
      const pause = busyPause(attempt);
      if (performance.now() + pause >= deadline) throw full(e);
      await pauseFor(dev, pause, signal);
    }
  }
}

/** Pause before asking a busy listener again: 5 ms doubling to 200 ms, jittered so a crowd spreads out. */
function busyPause(attempt: number): number {
  return Math.min(200, 5 * 2 ** attempt) * (0.5 + Math.random());
}

/** Wait `ms`; rejects at once when `signal` aborts (ERR_ABORTED) or the device closes (ERR_CLOSED). */
function pauseFor(dev: Device, ms: number, signal: AbortSignal | undefined): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    let unhookClose = (): void => {};
    let dispose = (): void => {};
    const done = (err?: Error): void => {
      clearTimeout(t);
      unhookClose();
      dispose();
      if (err) reject(err);
      else resolve();
    };
    const t = setTimeout(() => done(), ms);
    unhookClose = dev.onClose(() => done(new SabreError(ErrorCode.Closed, 'device closed')));
    dispose = onAbort(signal, () => done(abortError(signal!, 'connect')));
  });
}

/** What is left of `deadline` (performance.now() time), in whole ms. */
const leftOf = (deadline: number): number => Math.max(0, Math.ceil(deadline - performance.now()));

/**
 * One ask: the exchange, then the QP's connect, both within what is left of connect()'s one
 * `deadline` (each given the whole timeoutMs, a late answer for a QP that never greets let a
 * connect run twice its timeout).
 */
async function connectOnce(dev: Device, address: DeviceAddress, service: number, opts: CmConnectOptions, deadline: number, atPort: boolean, hosts: readonly string[] | undefined): Promise<QueuePair> {
  dev.assertOpen();
  const signal = opts.signal;
  if (signal?.aborted) throw abortError(signal, 'connect');
  // udp: a listener whose address lists no ports (a device of one NIC thread, one reached through
  // a relay or NAT that forwards one port, an older sabre) may reach this device at `port` alone,
  // thread 0's: the QP goes there, and the REQ tells no ports (./core.ts), so the listener
  // connects to where the REQ came from (`atPort`: as a listener that found our ports rewritten
  // asked). tcp: the QP's connection is the path, from any thread.
  const first = !dev.linkServices && (atPort || portsOf(address) === undefined);
  const qp = first ? dev.onFirstThread(() => newQp(dev, opts)) : newQp(dev, opts);
  let dispose = (): void => {};
  try {
    const aborted = new Promise<never>((_, reject) => {
      dispose = onAbort(signal, () => reject(abortError(signal!, 'connect')));
    });
    const steps = (async (): Promise<QueuePair> => {
      let remoteQpn: number;
      let privateData: Uint8Array | undefined;
      if (dev.linkServices) {
        ({ remoteQpn, privateData } = await dev.dialService(qp.qpn, address, service, opts.privateData, leftOf(deadline)));
      } else {
        ({ qpn: remoteQpn, privateData } = await agentOf(dev).request(address, service, qp.qpn, opts.privateData, leftOf(deadline), first, hosts));
      }
      await qp.connect({ address, qpn: remoteQpn, timeoutMs: leftOf(deadline) });
      infos.set(qp, { privateData, remoteQpn, service, peer: { ...address } });
      return qp;
    })();
    steps.catch(() => {});
    return await Promise.race([steps, aborted]);
  } catch (e) {
    qp.destroy();
    throw asClosed(dev, e);
  } finally {
    dispose();
  }
}

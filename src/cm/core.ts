// The CM exchange as a sans-I/O core (src/core/sans-io.ts): REQ / REP / REJ between two
// devices' CM QPs (the wire format and its reasons are in ./agent.ts, the shell that owns the
// QP, the timers' clock and the listeners' handlers). In: a message received and where it came
// from, a REQ of ours the peer device refused, a peer lost for good, the device closing, the
// time. Out, one at a time: a message to send, a request for a listener, a request of ours
// settled.
import { randomInt } from 'node:crypto';
import { addressKey, type DeviceAddress } from '../core/address.js';
import { ErrorCode, listenerBusyError, rejectedCause, SabreError } from '../core/errors.js';
import { Outbox, type HasTimeout, type PollsActions } from '../core/sans-io.js';
import { CM_QPN, portsOf, routeTo, threadOf } from '../core/peer-route.js';

/**
 * Where the listener reaches the requester's QP: the address the REQ came from, with the
 * requester's ports when it told them and the REQ came from the port its CM QP's thread has
 * there (QP q on thread q mod n): the address was not rewritten on the way (a relay or a NAT
 * forwards one port, and then only that port is reached).
 */
function peerOf(from: DeviceAddress, ports: unknown): DeviceAddress {
  if (!Array.isArray(ports) || ports.length < 2 || ports.length > MAX_PORTS || !ports.every((p) => Number.isInteger(p) && p >= 1 && p <= 65535)) return from;
  // The list is the requester's word, checked only at its CM QP's port: the listener's QP waits
  // there for the requester's QP to greet it (./index.ts, passive), else a REQ could aim its
  // connect traffic (a hello the link resends until answered) at another port of the host the
  // REQ came from — another service there, or another client behind the same NAT. A device's
  // threads past the first bind ports the system picks (never a well-known one), each its own:
  // a list otherwise is no device's.
  if (new Set(ports).size !== ports.length || ports.some((p: number, i) => i !== threadOf(CM_QPN, ports.length) && p < 1024)) return from;
  // As the requester's own address has it: `port` its first thread's.
  return ports[threadOf(CM_QPN, ports.length)] === from.port ? { ...from, port: ports[0], ports: [...(ports as number[])] } : from;
}

/** The most ports a REQ may list: a device has at most 16 NIC threads (openDevice `workers`). */
const MAX_PORTS = 16;

/** At most this many bytes of JSON per message (one receive slot). */
export const CM_MESSAGE_BYTES = 1024;

/**
 * REQ ids are drawn in 1..ID_END-1 (48 bits: see the constructor). A REQ naming anything else is
 * no sabre's and is dropped: the REP echoes the id, and a number the requester writes long
 * (-2.2250738585072014e-308) could push the REP past one slot, where it cannot be sent.
 */
const ID_END = 2 ** 48;
const isId = (v: unknown): v is number => Number.isSafeInteger(v) && (v as number) >= 1 && (v as number) < ID_END;

/** A requester's QP: a u32, neither 0 nor the CM QP's own number. */
const isPeerQpn = (v: unknown): v is number => Number.isInteger(v) && (v as number) >= 1 && (v as number) < CM_QPN;

/** A REJ's reason is cut to this many characters: it must fit one slot whatever the listener says. */
const MAX_REASON = 200;

/**
 * Whether a REP carrying `privateData` fits one slot for every id and QPN sabre can name: listen()
 * refuses private data that does not (else every REQ would fail to be answered).
 */
export function repFits(privateData: Uint8Array | undefined): boolean {
  const pd = b64(privateData);
  return json({ t: 'rep', id: ID_END - 1, qpn: CM_QPN - 1, ...(pd ? { pd } : {}) }).length <= CM_MESSAGE_BYTES;
}

export type CmMessage =
  | { t: 'req'; id: number; service: number; qpn: number; pd?: string; ports?: number[]; routes?: boolean }
  | { t: 'rep'; id: number; qpn: number; pd?: string }
  | { t: 'rej'; id: number; reason: string; busy?: boolean; port?: boolean };

const AT_PORT = 'SabreCmAtPort';

/**
 * The listener reaches the requester at its `port` alone (the REQ's source was rewritten: a NAT
 * or relay), and the requesting QP is on another thread: connect asks again with one on thread 0.
 */
export function isAtPortOnly(e: unknown): boolean {
  return e instanceof SabreError && (e.cause as { name?: unknown } | undefined)?.name === AT_PORT;
}

function atPortError(message: string): SabreError {
  const cause = new Error('the listener reaches the requester at its port only');
  cause.name = AT_PORT;
  return new SabreError(ErrorCode.Unreachable, message, { cause });
}

export type CmAction =
  /** Send `bytes` to the CM QP at `to`; `req`: the id of our REQ it carries (its failure is ours to hear). */
  | { kind: 'send'; to: DeviceAddress; bytes: Uint8Array; req?: number }
  /** A REQ for the listener of `service`: answer with reply() or reject() and the same `id` and `from`. */
  | { kind: 'request'; id: number; service: number; qpn: number; from: DeviceAddress; peer: DeviceAddress; routes: boolean; privateData: Uint8Array | undefined }
  /** Our request `id` ended: the peer's QP and private data, or why not. */
  | { kind: 'settled'; id: number; value?: { qpn: number; privateData: Uint8Array | undefined }; error?: SabreError };

/**
 * Where a message came from, as compared with where a REQ went: transport, host (an IPv4 address
 * written IPv4-mapped taken as itself, letters in one case) and port; an inproc device by its id.
 */
function placeOf(a: DeviceAddress, host: unknown = a.host): string {
  if (typeof host !== 'string') return `${String(a.transport)}|id=${String(a['id'])}`;
  const h = host.toLowerCase();
  return `${String(a.transport)}|${h.startsWith('::ffff:') && h.includes('.') ? h.slice(7) : h}|${String(a.port)}`;
}

interface Pending {
  to: string;
  /** Where the answer may come from: the address the REQ went to (placeOf), and its host name's addresses. */
  sources: Set<string>;
  dest: DeviceAddress;
  /** The REQ, kept to send again when the peer's CM had no receive for it (handleBusy). */
  bytes: Uint8Array;
  resent: number;
  service: number;
  where: string;
  deadline: number;
  timeoutMs: number;
}

/** Times a REQ is sent again after the peer's CM had no receive for it. */
const MAX_RESENDS = 8;
const enc = new TextEncoder();
const dec = new TextDecoder();
export const b64 = (b: Uint8Array | undefined): string | undefined => (b && b.length ? Buffer.from(b).toString('base64') : undefined);
export const unb64 = (s: unknown): Uint8Array | undefined => (typeof s === 'string' ? new Uint8Array(Buffer.from(s, 'base64')) : undefined);

export class CmCore implements PollsActions<CmAction>, HasTimeout {
  readonly #out = new Outbox<CmAction>();
  readonly #services = new Set<number>();
  readonly #pending = new Map<number, Pending>();
  readonly #randomId: () => number;
  /** Messages that did not parse, named nothing we know, or carried an id or QPN no sabre sends. */
  dropped = 0;
  /** REQs for a service nobody listens to here (answered with a REJ). */
  refusedNoListener = 0;

  /**
   * `randomId`: a REQ's id. An answer is matched to its request by the id alone, so ids are
   * random (48 bits): a device off the exchange's path that could guess them could fail our
   * connects with forged REJs or point our QPs at a QPN of its choosing with forged REPs.
   */
  /**
   * `ports`: this device's NIC threads' ports when it has several (its address's `ports`), told
   * in each REQ: the listener reaches the requesting QP at the thread its QPN names, not at the
   * CM QP's (src/nic/peer-route.ts).
   */
  constructor(o: { randomId?: () => number; ports?: readonly number[] } = {}) {
    this.#randomId = o.randomId ?? (() => randomInt(1, 2 ** 48));
    this.#ports = o.ports ? [...o.ports] : undefined;
  }

  readonly #ports: number[] | undefined;

  pollAction(): CmAction | undefined {
    return this.#out.poll();
  }

  /** Route REQs for `service` to the shell (`on` false stops). */
  listen(service: number, on: boolean): void {
    if (on) {
      if (this.#services.has(service)) throw new SabreError(ErrorCode.InvalidState, `service ${service} already has a listener on this device`);
      this.#services.add(service);
    } else this.#services.delete(service);
  }

  /**
   * Ask the listener of `service` at `to` for a connection to our rc QP `qpn`; returns the request
   * id (settled later). `atPort`: the QP is on thread 0 whatever its number, and no ports are told.
   * `hosts`: what `to`'s host name resolved to (the answer comes from one of them).
   */
  request(to: DeviceAddress, service: number, qpn: number, privateData: Uint8Array | undefined, timeoutMs: number, now: number, atPort = false, hosts?: readonly string[]): number {
    const pd = b64(privateData);
    let id = this.#randomId();
    // Bounded: the ids of the requests waiting are few against 2^48.
    for (let i = 0; i < 16 && this.#pending.has(id); i++) id = this.#randomId();
    if (this.#pending.has(id)) throw new SabreError(ErrorCode.Internal, 'no free CM request id');
    // `routes`: the requester reaches the listener's QPs by the ports `to` lists (the QP's own
    // thread); without it only `port`, thread 0, is reached, and the listener's QP must be there.
    // Our ports go only with `routes`: a listener that lists none may reach us at our `port`
    // alone (a relay or NAT forwards one port), so our QP is on thread 0 (./index.ts) and the
    // listener connects to it where the REQ came from.
    const routes = portsOf(to) !== undefined;
    const bytes = encode({ t: 'req', id, service, qpn, ...(pd ? { pd } : {}), ...(this.#ports && routes && !atPort ? { ports: this.#ports } : {}), ...(routes ? { routes } : {}) });
    // Keyed by where the REQ goes (the CM QP's thread of a device of several): a lost path names that.
    const dest = routeTo(to, CM_QPN);
    // The link names an answer's source by the address its context was opened with (the host
    // name as written, for ours); a fresh context would name what it resolved to.
    const sources = new Set([placeOf(dest), ...(hosts ?? []).map((h) => placeOf(dest, h))]);
    this.#pending.set(id, { to: addressKey(dest), sources, dest: to, bytes, resent: 0, service, where: JSON.stringify(to), deadline: now + timeoutMs, timeoutMs });
    this.#out.push({ kind: 'send', to, bytes, req: id });
    return id;
  }

  /** The listener's answer to REQ `id` from `from`. */
  reply(from: DeviceAddress, id: number, qpn: number, privateData: Uint8Array | undefined): void {
    const pd = b64(privateData);
    this.#out.push({ kind: 'send', to: from, bytes: encode({ t: 'rep', id, qpn, ...(pd ? { pd } : {}) }) });
  }

  /** `busy`: the listener has no room now (its backlog is full); the requester may ask again. */
  reject(from: DeviceAddress, id: number, reason: string, busy = false): void {
    const r = reason.length > MAX_REASON ? `${reason.slice(0, MAX_REASON)}…` : reason;
    this.#out.push({ kind: 'send', to: from, bytes: encode({ t: 'rej', id, reason: r, ...(busy ? { busy: true } : {}) }) });
  }

  /** A message arrived from `from` (as the link observed it). */
  handleMessage(bytes: Uint8Array, from: DeviceAddress | undefined, _now: number): void {
    let m: CmMessage | undefined;
    try {
      m = JSON.parse(dec.decode(bytes)) as CmMessage;
    } catch {
      m = undefined;
    }
    if (!m || typeof m !== 'object' || !isId(m.id) || !from) {
      this.dropped++;
      return;
    }
    if (m.t === 'rep' || m.t === 'rej') {
      const p = this.#pending.get(m.id);
      // Only from where the REQ went (a relay's or NAT's address is where it went, and answers
      // come back from there): an id learnt (a REQ seen on the path, a log line) is not enough
      // for another device to settle the request with a REP naming a QPN of its choosing.
      if (!p || !p.sources.has(placeOf(from)) || (m.t === 'rep' && !Number.isInteger(m.qpn))) {
        this.dropped++;
        return;
      }
      if (m.t === 'rep') this.#settle(m.id, { value: { qpn: m.qpn, privateData: unb64(m.pd) } });
      else {
        // The listener's word: JSON, but not necessarily a string (String() of {"toString": 1} throws).
        const msg = `service ${p.service} at ${p.where} rejected the connection: ${typeof m.reason === 'string' ? m.reason : '(no reason given)'}`;
        const error = m.busy === true ? listenerBusyError(msg) : m.port === true ? atPortError(msg)
          : new SabreError(ErrorCode.Unreachable, msg, typeof m.reason === 'string' ? { cause: rejectedCause(m.reason) } : undefined);
        this.#settle(m.id, { error });
      }
      return;
    }
    if (m.t !== 'req' || !isPeerQpn(m.qpn)) {
      this.dropped++;
      return;
    }
    const service = Number.isInteger(m.service) ? m.service : 0;
    if (!this.#services.has(service)) {
      this.refusedNoListener++;
      this.reject(from, m.id, `no listener for service ${service}`);
      return;
    }
    const peer = peerOf(from, m.ports);
    // Ports told but not honoured (the REQ's source was rewritten on the way, or the list is no
    // device's): the requester is reached at `from`, its CM QP's thread, so a QP the told ports
    // put on another thread would never hear from the listener — it asks again with one there.
    if (Array.isArray(m.ports) && peer === from && threadOf(m.qpn, Math.max(1, Math.min(m.ports.length, MAX_PORTS))) !== 0) {
      this.#out.push({ kind: 'send', to: from, bytes: encode({ t: 'rej', id: m.id, reason: 'the requester is reached at its port only (a relay or NAT rewrote it)', port: true }) });
      return;
    }
    this.#out.push({ kind: 'request', id: m.id, service, qpn: m.qpn, from, peer, routes: m.routes === true, privateData: unb64(m.pd) });
  }

  /** Our request `id` ends without an answer (its REQ could not be posted): no output. */
  cancel(id: number): void {
    this.#pending.delete(id);
  }

  /** The peer device refused our REQ `id` at once: nothing serves its CM QPN (it never listened). */
  handleRefused(id: number, _now: number): void {
    if (this.#pending.has(id)) this.#settle(id, { error: new SabreError(ErrorCode.Unreachable, 'no listener at the peer device (nothing serves its CM QP)') });
  }

  /**
   * Our REQ `id` found no receive at the peer's CM QP through every RNR retry (a burst of
   * requests there), or was flushed when that failed its flow: it goes again while the request
   * has time — at most MAX_RESENDS times. (A flushed REQ may have arrived after all: the peer
   * then sees it twice, and our request settles on the first answer; the other is dropped.)
   */
  handleBusy(id: number, now: number): void {
    const p = this.#pending.get(id);
    if (!p || now >= p.deadline || p.resent >= MAX_RESENDS) return;
    p.resent++;
    this.#out.push({ kind: 'send', to: p.dest, bytes: p.bytes, req: id });
  }

  /** udp: the link's retries to `peer` ran out: requests to it fail now, not at their timeout. */
  handlePeerLost(peer: DeviceAddress, _now: number): void {
    const key = addressKey(peer);
    for (const [id, p] of [...this.#pending]) {
      if (p.to === key) this.#settle(id, { error: new SabreError(ErrorCode.Unreachable, `no answer from ${p.where} (the link's retries ran out)`) });
    }
  }

  /** The device closes (or its CM stopped: `error`): every request still waiting settles with ERR_CLOSED (or `error`). */
  handleClose(_now: number, error?: SabreError): void {
    for (const id of [...this.#pending.keys()]) this.#settle(id, { error: error ?? new SabreError(ErrorCode.Closed, 'device closed') });
  }

  pollTimeout(): number | undefined {
    let at: number | undefined;
    for (const p of this.#pending.values()) if (at === undefined || p.deadline < at) at = p.deadline;
    return at;
  }

  handleTimeout(now: number): void {
    for (const [id, p] of [...this.#pending]) {
      if (p.deadline <= now) this.#settle(id, { error: new SabreError(ErrorCode.Timeout, `no answer from service ${p.service} at ${p.where} within ${p.timeoutMs} ms`) });
    }
  }

  #settle(id: number, r: { value?: { qpn: number; privateData: Uint8Array | undefined }; error?: SabreError }): void {
    this.#pending.delete(id);
    this.#out.push({ kind: 'settled', id, ...r });
  }
}

function json(m: CmMessage): Uint8Array {
  return enc.encode(JSON.stringify(m));
}

function encode(m: CmMessage): Uint8Array {
  const bytes = json(m);
  if (bytes.length > CM_MESSAGE_BYTES) throw new SabreError(ErrorCode.InvalidArgument, `CM message of ${bytes.length} bytes exceeds ${CM_MESSAGE_BYTES} (private data too long)`);
  return bytes;
}

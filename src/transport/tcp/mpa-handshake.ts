// MPA connection setup (RFC 5044 §7.1, RFC 6581) as a sans-I/O state machine: feed it the
// bytes read from the TCP stream and a clock, get back bytes to write and events. The shell
// (connection.ts) owns the socket; tests drive this directly.
//
// Choices (what siw does by default, siw_cm.c):
// - We offer revision 2 with the enhanced-setup (H) bit and the IRD/ORD word, and accept a
//   revision-1 peer on either side (no IRD/ORD word then; the private data starts at offset 0).
// - Peer-to-peer mode (RFC 6581 RTR): when a peer asks for P2P we accept a zero-length RDMA
//   Write RTR (siw's preferred type) and refuse the other types (LLP ecode 7, no matching RTR).
//   `p2p: true` makes an initiator ask for a Write RTR and insist on it, as siw with its
//   `peer_to_peer` parameter on (interop tests); `p2p: 'offer'` asks for it and goes on without
//   an RTR when the Reply declines P2P (P clear, or revision 1) — a standard responder that does
//   not do P2P does not wait for one. sabre's raw QP-to-QP dials offer it (connector.ts: a
//   responder is then established only when the dialer, still there, sends the RTR).
// - CRC: on unless both sides say off. The reply's C bit decides both directions (RFC 5044:
//   the responder MUST set C when the request did; it MAY set it on its own).
// - Markers: a side sets M when it wants markers in the stream it *receives*; each side inserts
//   markers iff the other side's frame carried M.
// - The responder may send FPDUs right after its reply (siw without P2P does the same); bytes
//   after the request, before our reply, are a protocol violation.
import {
  decodeMpaFrame, decodeMpaV2Private, encodeMpaFrame, encodeMpaV2Private, mpaFrameLength, type MpaFrame,
} from '../../wire/mpa.js';
import { MPA_KEY_REP, MPA_KEY_REQ, MPA_MAX_PRIVATE_DATA, MPA_REQ_REP, MPA_V2_IRD_ORD_MASK, MPA_V2_PRIVATE } from '../../wire/spec.js';
import { decodeSabrePd, encodeSabrePd } from './private-data.js';
import { TERM } from '../../wire/terminate.js';
import { fault, type TcpFault } from './fault.js';
import { copyBytes } from '../../core/bytes.js';

export type MpaRole = 'initiator' | 'responder';

export interface MpaConfig {
  role: MpaRole;
  /** Highest revision we speak (default 2). 1 = RFC 5044 only: no IRD/ORD word. */
  revision?: 1 | 2;
  /** Ask for CRC32C (default true). CRC is off only when both sides leave it off. */
  crc?: boolean;
  /** Ask the peer to insert markers into the stream we receive (default false). */
  markers?: boolean;
  /** Inbound / outbound RDMA Read depth advertised in the IRD/ORD word (default 16 / 16). */
  ird?: number;
  ord?: number;
  /** Initiator only: request peer-to-peer mode with a zero-length RDMA Write RTR; 'offer': without it if the Reply declines P2P. */
  p2p?: boolean | 'offer';
  /** Initiator: the ULP private data carried in the request (after the IRD/ORD word). */
  privateData?: Uint8Array;
  /** Whole handshake deadline, from start() (default 10 s). */
  timeoutMs?: number;
}

export interface MpaResult {
  role: MpaRole;
  revision: number;
  /** RFC 6581 enhanced setup in use (IRD/ORD word exchanged). */
  enhanced: boolean;
  /** CRC32C in both directions. */
  crc: boolean;
  /** We insert markers into what we send / the peer inserts markers into what we receive. */
  markersTx: boolean;
  markersRx: boolean;
  /** Negotiated depths from our side's point of view. */
  ird: number;
  ord: number;
  /** 'write': a zero-length RDMA Write RTR is sent by the initiator and awaited by the responder before anything else. */
  rtr: 'none' | 'write';
  /** The peer's ULP private data (IRD/ORD word removed). */
  peerPrivateData: Uint8Array;
}

/** What a responder learns from the request, to decide accept() or reject(). */
export interface MpaRequestInfo {
  revision: number;
  enhanced: boolean;
  crc: boolean;
  markers: boolean;
  peerIrd: number;
  peerOrd: number;
  p2p: boolean;
  privateData: Uint8Array;
}

export type MpaEvent =
  | { type: 'send'; bytes: Uint8Array }
  | { type: 'request'; info: MpaRequestInfo }
  | { type: 'established'; result: MpaResult; leftover: Uint8Array }
  | { type: 'failed'; fault: TcpFault; rejected: boolean; peerPrivateData?: Uint8Array };

type State = 'idle' | 'awaitReply' | 'awaitRequest' | 'requested' | 'done' | 'failed';

const enc = new TextEncoder();
const KEY_REQ = enc.encode(MPA_KEY_REQ);
const KEY_REP = enc.encode(MPA_KEY_REP);
const KEY_LEN = MPA_REQ_REP.fields.key.size;
const V2 = MPA_V2_PRIVATE.size;
const MAX_FRAME = MPA_REQ_REP.size + MPA_MAX_PRIVATE_DATA;
const EMPTY = new Uint8Array(0);

/** The IRD (and ORD) MPA offers when none is configured. */
export const MPA_DEFAULT_IRD = 16;

function clampDepth(v: number | undefined, dflt: number): number {
  const n = v ?? dflt;
  if (!Number.isInteger(n) || n < 0) return dflt;
  return Math.min(n, MPA_V2_IRD_ORD_MASK);
}

export class MpaHandshake {
  readonly role: MpaRole;
  readonly #revision: number;
  readonly #crc: boolean;
  readonly #markers: boolean;
  readonly #ird: number;
  readonly #ord: number;
  readonly #p2p: boolean;
  /** P2P asked for with `p2p: 'offer'`: a Reply that declines it is taken, without an RTR. */
  readonly #p2pOffer: boolean;
  readonly #pd: Uint8Array;
  readonly #timeoutMs: number;
  #state: State = 'idle';
  #deadline = Infinity;
  #buf: Uint8Array = EMPTY;
  #request: MpaFrame | undefined;
  #requestInfo: MpaRequestInfo | undefined;
  #sentRequest: MpaFrame | undefined;

  constructor(cfg: MpaConfig) {
    this.role = cfg.role;
    this.#revision = cfg.revision ?? 2;
    this.#crc = cfg.crc ?? true;
    this.#markers = cfg.markers ?? false;
    this.#ird = clampDepth(cfg.ird, MPA_DEFAULT_IRD);
    this.#ord = clampDepth(cfg.ord, MPA_DEFAULT_IRD);
    this.#p2p = (cfg.p2p ?? false) !== false && this.#revision === 2;
    this.#p2pOffer = cfg.p2p === 'offer';
    this.#pd = cfg.privateData ?? EMPTY;
    this.#timeoutMs = cfg.timeoutMs ?? 10_000;
  }

  get state(): State {
    return this.#state;
  }

  /** Absolute time (same clock as `now`) at which tick() fails the handshake. */
  get deadline(): number {
    return this.#deadline;
  }

  get requestInfo(): MpaRequestInfo | undefined {
    return this.#requestInfo;
  }

  start(now: number): MpaEvent[] {
    if (this.#state !== 'idle') return [];
    this.#deadline = now + this.#timeoutMs;
    if (this.role === 'responder') {
      this.#state = 'awaitRequest';
      return [];
    }
    const enhanced = this.#revision === 2;
    const pd = enhanced
      ? this.#withV2(this.#pd, { p2p: this.#p2p, zeroLenSendRtr: false, writeRtr: this.#p2p, readRtr: false, ird: this.#ird, ord: this.#ord })
      : this.#pd;
    const frame: MpaFrame = { reply: false, markers: this.#markers, crc: this.#crc, reject: false, enhanced, revision: this.#revision, privateData: pd };
    this.#sentRequest = frame;
    this.#state = 'awaitReply';
    return [{ type: 'send', bytes: this.#encode(frame) }];
  }

  receive(chunk: Uint8Array, now: number): MpaEvent[] {
    if (this.#state === 'done' || this.#state === 'failed' || this.#state === 'idle') return [];
    const timedOut = this.tick(now);
    if (timedOut.length) return timedOut;
    if (this.#state === 'requested') {
      if (chunk.length === 0) return [];
      return this.#fail(fault(TERM.invalidReqResp, 'EARLY_DATA', 'peer sent data after its MPA Request before our Reply'));
    }
    // A copy, never a view: reads land in the socket's one spare Buffer (whose slice() would
    // alias it), and the next read overwrites it.
    this.#buf = this.#buf.length ? concat(this.#buf, chunk) : copyBytes(chunk);
    const key = this.role === 'initiator' ? KEY_REP : KEY_REQ;
    const other = this.role === 'initiator' ? KEY_REQ : KEY_REP;
    const n = Math.min(this.#buf.length, KEY_LEN);
    if (!prefixIs(this.#buf, key, n)) {
      const what = prefixIs(this.#buf, other, n) ? `an MPA ${this.role === 'initiator' ? 'Request' : 'Reply'}` : 'bytes that are not an MPA frame';
      return this.#fail(fault(TERM.invalidReqResp, 'BAD_KEY', `expected "${this.role === 'initiator' ? MPA_KEY_REP : MPA_KEY_REQ}", got ${what}`));
    }
    const r = decodeMpaFrame(this.#buf, 0, this.#buf.length);
    if (!r.ok) {
      if (r.error === 'TRUNCATED') {
        if (this.#buf.length > MAX_FRAME) return this.#fail(fault(TERM.invalidReqResp, 'BAD_LENGTH', 'MPA frame longer than allowed'));
        return [];
      }
      if (r.error === 'BAD_MPA_REVISION') return this.#fail(fault(TERM.invalidReqResp, 'BAD_REVISION', `MPA revision ${this.#buf[17]} is not 1 or 2`));
      if (r.error === 'BAD_LENGTH') return this.#fail(fault(TERM.invalidReqResp, 'BAD_LENGTH', 'MPA private data longer than 512 bytes'));
      return this.#fail(fault(TERM.invalidReqResp, r.error, `malformed MPA frame (${r.error})`));
    }
    const leftover = this.#buf.subarray(r.length);
    this.#buf = EMPTY;
    return this.role === 'initiator' ? this.#onReply(r.value, leftover) : this.#onRequest(r.value, leftover);
  }

  /** Responder: answer the request with a Reply carrying our ULP private data. */
  accept(privateData: Uint8Array = EMPTY): MpaEvent[] {
    if (this.#state !== 'requested') return [];
    const req = this.#request!;
    const info = this.#requestInfo!;
    const revision = Math.min(req.revision, this.#revision);
    const enhanced = revision === 2 && info.enhanced;
    const crc = req.crc || this.#crc;
    const ord = Math.min(this.#ord, info.peerIrd);
    const ird = this.#ird;
    let rtr: MpaResult['rtr'] = 'none';
    let pd = privateData;
    if (enhanced) {
      if (info.p2p) rtr = 'write';
      pd = this.#withV2(privateData, { p2p: info.p2p, zeroLenSendRtr: false, writeRtr: info.p2p, readRtr: false, ird, ord });
    }
    const reply: MpaFrame = { reply: true, markers: this.#markers, crc, reject: false, enhanced, revision, privateData: pd };
    this.#state = 'done';
    return [
      { type: 'send', bytes: this.#encode(reply) },
      {
        type: 'established',
        result: {
          role: 'responder', revision, enhanced, crc, markersTx: req.markers, markersRx: this.#markers,
          ird: enhanced ? ird : this.#ird, ord: enhanced ? ord : this.#ord, rtr, peerPrivateData: info.privateData,
        },
        leftover: EMPTY,
      },
    ];
  }

  /** Responder: refuse with a reason the initiator can read (sabre reject block in the private data). */
  /** `crossingNonce`: a crossing connect's REJECT, with this end's nonce (sabrePdCrossing). */
  reject(reason: string, t: TcpFault | undefined = undefined, busy = false, crossingNonce?: number): MpaEvent[] {
    if (this.#state !== 'requested') return [];
    const req = this.#request!;
    const revision = Math.min(req.revision, this.#revision);
    const enhanced = revision === 2 && this.#requestInfo!.enhanced;
    const block = encodeSabrePd({ kind: 'reject', reason, ...(busy ? { busy } : {}), ...(crossingNonce !== undefined ? { crossingNonce } : {}) });
    const pd = enhanced
      ? this.#withV2(block, { p2p: false, zeroLenSendRtr: false, writeRtr: false, readRtr: false, ird: this.#ird, ord: this.#ord })
      : block;
    const reply: MpaFrame = { reply: true, markers: false, crc: req.crc || this.#crc, reject: true, enhanced, revision, privateData: pd };
    const bytes = this.#encode(reply);
    this.#state = 'failed';
    return [
      { type: 'send', bytes },
      { type: 'failed', fault: t ?? fault(TERM.invalidReqResp, 'REJECTED_LOCALLY', reason), rejected: true },
    ];
  }

  tick(now: number): MpaEvent[] {
    if (this.#state === 'done' || this.#state === 'failed' || this.#state === 'idle') return [];
    if (now < this.#deadline) return [];
    const what = this.#state === 'awaitReply' ? 'MPA Reply' : this.#state === 'awaitRequest' ? 'MPA Request' : 'local accept';
    return this.#fail(fault(TERM.streamLost, 'TIMEOUT', `no ${what} within ${this.#timeoutMs} ms`));
  }

  /** The shell saw the stream end (or fail) before the handshake finished. */
  closed(): MpaEvent[] {
    if (this.#state === 'done' || this.#state === 'failed') return [];
    return this.#fail(fault(TERM.streamLost, 'CLOSED', 'connection closed during the MPA handshake'));
  }

  #onRequest(f: MpaFrame, leftover: Uint8Array): MpaEvent[] {
    if (leftover.length) return this.#fail(fault(TERM.invalidReqResp, 'EARLY_DATA', 'peer sent data after its MPA Request before our Reply'));
    let peerIrd = MPA_V2_IRD_ORD_MASK, peerOrd = MPA_V2_IRD_ORD_MASK, p2p = false, writeRtr = false, ulp = f.privateData;
    const enhanced = f.revision === 2 && f.enhanced;
    if (enhanced) {
      const v = decodeMpaV2Private(f.privateData, 0, f.privateData.length);
      if (!v.ok) return this.#rejectNow(f, 'enhanced MPA Request without the IRD/ORD word', fault(TERM.invalidReqResp, 'BAD_V2', 'enhanced MPA Request without the IRD/ORD word'));
      ({ ird: peerIrd, ord: peerOrd, p2p, writeRtr } = v.value);
      ulp = f.privateData.subarray(V2);
    }
    this.#request = f;
    this.#requestInfo = { revision: f.revision, enhanced, crc: f.crc, markers: f.markers, peerIrd, peerOrd, p2p, privateData: ulp };
    this.#state = 'requested';
    if (p2p && !writeRtr) {
      return this.reject('no matching RTR type: sabre accepts only a zero-length RDMA Write RTR', fault(TERM.noMatchingRtr, 'NO_MATCHING_RTR', 'peer offered no RTR type sabre supports'));
    }
    return [{ type: 'request', info: this.#requestInfo }];
  }

  #rejectNow(f: MpaFrame, reason: string, t: TcpFault): MpaEvent[] {
    this.#request = f;
    this.#requestInfo = { revision: f.revision, enhanced: false, crc: f.crc, markers: f.markers, peerIrd: 0, peerOrd: 0, p2p: false, privateData: EMPTY };
    this.#state = 'requested';
    return this.reject(reason, t);
  }

  #onReply(f: MpaFrame, leftover: Uint8Array): MpaEvent[] {
    const sent = this.#sentRequest!;
    const enhanced = f.revision === 2 && f.enhanced;
    let ulp = f.privateData;
    let v2: ReturnType<typeof decodeMpaV2Private> | undefined;
    if (enhanced) {
      v2 = decodeMpaV2Private(f.privateData, 0, f.privateData.length);
      if (v2.ok) ulp = f.privateData.subarray(V2);
    }
    if (f.reject) {
      const block = decodeSabrePd(ulp);
      const reason = block?.kind === 'reject' ? block.reason : 'connection rejected by peer';
      this.#state = 'failed';
      // BUSY: a listener without room now (its backlog full); the dialer may try again.
      const code = block?.kind === 'reject' && block.busy ? 'BUSY' : 'REJECTED';
      const f = fault(TERM.invalidReqResp, code, reason);
      if (block?.kind === 'reject' && block.crossingNonce !== undefined) f.crossingNonce = block.crossingNonce;
      return [{ type: 'failed', fault: f, rejected: true, peerPrivateData: ulp }];
    }
    if (f.revision > this.#revision) return this.#fail(fault(TERM.invalidReqResp, 'BAD_REVISION', `peer replied with revision ${f.revision}, we offered ${this.#revision}`));
    if (enhanced && (!v2 || !v2.ok)) return this.#fail(fault(TERM.invalidReqResp, 'BAD_V2', 'enhanced MPA Reply without the IRD/ORD word'));
    if (sent.crc && !f.crc) return this.#fail(fault(TERM.invalidReqResp, 'CRC_MISMATCH', 'peer replied without CRC although we asked for it (RFC 5044 §7.1: the responder MUST use CRC when requested)'));
    let rtr: MpaResult['rtr'] = 'none';
    let ord = this.#ord;
    if (enhanced && v2?.ok) {
      ord = Math.min(this.#ord, v2.value.ird);
      if (this.#p2p) {
        const declined = this.#p2pOffer && !v2.value.p2p;
        if (!declined && (!v2.value.p2p || !v2.value.writeRtr)) return this.#fail(fault(TERM.noMatchingRtr, 'NO_MATCHING_RTR', 'peer did not accept the zero-length RDMA Write RTR'));
        if (!declined) rtr = 'write';
      }
    } else if (this.#p2p && !this.#p2pOffer) {
      return this.#fail(fault(TERM.noMatchingRtr, 'NO_MATCHING_RTR', 'peer replied without enhanced setup to a peer-to-peer request'));
    }
    this.#state = 'done';
    return [{
      type: 'established',
      result: {
        role: 'initiator', revision: f.revision, enhanced, crc: f.crc, markersTx: f.markers, markersRx: sent.markers,
        ird: this.#ird, ord, rtr, peerPrivateData: ulp,
      },
      leftover: copyBytes(leftover),
    }];
  }

  #fail(t: TcpFault): MpaEvent[] {
    this.#state = 'failed';
    this.#buf = EMPTY;
    return [{ type: 'failed', fault: t, rejected: false }];
  }

  #withV2(ulp: Uint8Array, v: Parameters<typeof encodeMpaV2Private>[0]): Uint8Array {
    const out = new Uint8Array(V2 + ulp.length);
    encodeMpaV2Private(v, out, 0);
    out.set(ulp, V2);
    return out;
  }

  #encode(f: MpaFrame): Uint8Array {
    const out = new Uint8Array(mpaFrameLength(f));
    encodeMpaFrame(f, out, 0);
    return out;
  }
}

function prefixIs(b: Uint8Array, key: Uint8Array, n: number): boolean {
  for (let i = 0; i < n; i++) if (b[i] !== key[i]) return false;
  return true;
}

function concat(a: Uint8Array, b: Uint8Array): Uint8Array {
  const out = new Uint8Array(a.length + b.length);
  out.set(a, 0);
  out.set(b, a.length);
  return out;
}

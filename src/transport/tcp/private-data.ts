// sabre's own block inside the MPA private data: after the RFC 6581 IRD/ORD word (or at offset
// 0 on a revision-1 connection), length-prefixed so a foreign peer's private data is recognised
// as "not ours" instead of being misread. Its layouts (a head, then a CONNECT body with the
// service of an rdma_cm-style connect and the application's private data, or a REJECT reason)
// are in src/wire/tcp-spec.ts, with the meaning of every field; docs/tcp-framing.md §3 tells the
// handshake around it.
import * as F from '../../wire/host-fields.gen.js';
import { MPA_MAX_PRIVATE_DATA, MPA_V2_PRIVATE, SABRE_PD_VERSION, SabrePdKind } from '../../wire/spec.js';

export { SABRE_PD_VERSION, SabrePdKind };
/** REJECT flags: no room now, try again (older peers send 0 and ignore it). */
export const SABRE_PD_REJECT_BUSY = F.SABRE_PD_FLAGS_BUSY;

export interface SabreConnectInfo {
  kind: 'connect';
  initiatorQpn: number;
  responderQpn: number;
  nonce: number;
  /** A QP-to-QP connect with a secret: the sender's proof that it holds it (connect-proof.ts). */
  proof?: Uint8Array;
  /** rdma_cm-style connect: the listener's service number, and the application's private data. */
  service?: number;
  userData?: Uint8Array;
}

export interface SabreRejectInfo {
  kind: 'reject';
  reason: string;
  /** The listener had no room now (SABRE_PD_REJECT_BUSY). */
  busy?: boolean;
  /** A crossing connect's REJECT: the rejecting end's nonce (sabrePdCrossing, flags.Crossing). */
  crossingNonce?: number;
}

export type SabrePrivateData = SabreConnectInfo | SabreRejectInfo;

const HDR = F.SABRE_PD_SIZE;
const CONNECT = F.SABRE_PD_CONNECT_SIZE;
const SERVICE = F.SABRE_PD_SERVICE_SIZE;
const PROOF = F.SABRE_PD_PROOF_SIZE;
const CROSSING = F.SABRE_PD_CROSSING_SIZE;
/** blockLen counts the bytes after itself: the block ends at this + blockLen. */
const LEN_END = F.SABRE_PD_VERSION_OFF;
const utf8 = new TextEncoder();
const utf8d = new TextDecoder('utf-8', { fatal: false });

/** Largest reason that fits: the MPA maximum less the IRD/ORD word and the block's head. */
export const MAX_REASON_BYTES = MPA_MAX_PRIVATE_DATA - MPA_V2_PRIVATE.size - HDR - F.SABRE_PD_CROSSING_SIZE;
/** Largest application private data on a connect: a reason's room less the QPNs, nonce and service. */
export const MAX_USER_DATA_BYTES = MAX_REASON_BYTES - CONNECT - SERVICE;

export function encodeSabrePd(pd: SabrePrivateData): Uint8Array {
  let out: Uint8Array;
  if (pd.kind === 'connect') {
    const ext = pd.service !== undefined || pd.userData !== undefined;
    const user = pd.userData ?? new Uint8Array(0);
    if (user.length > MAX_USER_DATA_BYTES) throw new RangeError(`private data of ${user.length} bytes exceeds ${MAX_USER_DATA_BYTES}`);
    if (pd.proof && (ext || pd.proof.length !== PROOF)) throw new RangeError(`a proof is ${PROOF} bytes, on a QP-to-QP connect only`);
    out = new Uint8Array(HDR + CONNECT + (pd.proof ? PROOF : ext ? SERVICE + user.length : 0));
    F.setSabrePdConnectInitiatorQpn(out, HDR, pd.initiatorQpn);
    F.setSabrePdConnectResponderQpn(out, HDR, pd.responderQpn);
    F.setSabrePdConnectNonce(out, HDR, pd.nonce);
    if (pd.proof) out.set(pd.proof, HDR + CONNECT);
    else if (ext) {
      F.setSabrePdServiceService(out, HDR + CONNECT, pd.service ?? 0);
      out.set(user, HDR + CONNECT + SERVICE);
    }
  } else {
    let text = utf8.encode(pd.reason);
    if (text.length > MAX_REASON_BYTES) text = text.subarray(0, MAX_REASON_BYTES);
    const crossing = pd.crossingNonce !== undefined;
    out = new Uint8Array(HDR + text.length + (crossing ? CROSSING : 0));
    out.set(text, HDR);
    if (crossing) F.setSabrePdCrossingNonce(out, HDR + text.length, pd.crossingNonce!);
  }
  F.setSabrePdBlockLen(out, 0, out.length - LEN_END);
  F.setSabrePdVersion(out, 0, SABRE_PD_VERSION);
  F.setSabrePdKind(out, 0, pd.kind === 'connect' ? SabrePdKind.Connect : SabrePdKind.Reject);
  F.setSabrePdFlags(out, 0, pd.kind === 'reject'
    ? (pd.busy ? SABRE_PD_REJECT_BUSY : 0) | (pd.crossingNonce !== undefined ? F.SABRE_PD_FLAGS_CROSSING : 0)
    : pd.proof ? F.SABRE_PD_FLAGS_PROOF : 0);
  return out;
}

/** undefined: not a sabre block (a foreign peer, or nothing); never throws. */
export function decodeSabrePd(b: Uint8Array): SabrePrivateData | undefined {
  if (b.length < HDR) return undefined;
  const end = LEN_END + F.getSabrePdBlockLen(b, 0);
  if (end > b.length || end < HDR || F.getSabrePdVersion(b, 0) !== SABRE_PD_VERSION) return undefined;
  const kind = F.getSabrePdKind(b, 0);
  if (kind === SabrePdKind.Connect) {
    if (end < HDR + CONNECT) return undefined;
    const info: SabreConnectInfo = {
      kind: 'connect',
      initiatorQpn: F.getSabrePdConnectInitiatorQpn(b, HDR),
      responderQpn: F.getSabrePdConnectResponderQpn(b, HDR),
      nonce: F.getSabrePdConnectNonce(b, HDR),
    };
    if ((F.getSabrePdFlags(b, 0) & F.SABRE_PD_FLAGS_PROOF) !== 0) {
      if (end !== HDR + CONNECT + PROOF) return undefined;
      info.proof = b.slice(HDR + CONNECT, end);
    } else if (end >= HDR + CONNECT + SERVICE) {
      info.service = F.getSabrePdServiceService(b, HDR + CONNECT);
      info.userData = b.slice(HDR + CONNECT + SERVICE, end);
    }
    return info;
  }
  if (kind === SabrePdKind.Reject) {
    const flags = F.getSabrePdFlags(b, 0);
    const crossing = (flags & F.SABRE_PD_FLAGS_CROSSING) !== 0;
    if (crossing && end < HDR + CROSSING) return undefined;
    const textEnd = crossing ? end - CROSSING : end;
    const info: SabreRejectInfo = { kind: 'reject', reason: utf8d.decode(b.subarray(HDR, textEnd)) };
    if ((flags & SABRE_PD_REJECT_BUSY) !== 0) info.busy = true;
    if (crossing) info.crossingNonce = F.getSabrePdCrossingNonce(b, textEnd);
    return info;
  }
  return undefined;
}

// sabre's own block inside the MPA private data. It sits after the RFC 6581 IRD/ORD word (or
// at offset 0 on a revision-1 connection), length-prefixed so a foreign peer's private data is
// recognised as "not ours" instead of being misread:
//
//   u16 blockLen   bytes that follow (>= 4)
//   u8  version    1
//   u8  kind       1 CONNECT (QPN pairing), 2 REJECT (reason)
//   u16 flags      0 on CONNECT; on REJECT 0x0001 BUSY: the listener has no room now (its
//                  backlog is full), the initiator may try again — a refusal for good has 0
//   kind 1: u32 initiatorQpn, u32 responderQpn, u32 nonce (random per device; breaks crossings)
//           [u32 service, then the application's private data] — present on rdma_cm-style
//           connects (src/cm): responderQpn 0 = "any QP of the listener on this service"
//   kind 2: UTF-8 reason text
//
// All big-endian like every other iWARP field.

export const SABRE_PD_VERSION = 1;
export const SabrePdKind = { Connect: 1, Reject: 2 } as const;
/** REJECT flags: no room now, try again (older peers send 0 and ignore it). */
export const SABRE_PD_REJECT_BUSY = 0x0001;

export interface SabreConnectInfo {
  kind: 'connect';
  initiatorQpn: number;
  responderQpn: number;
  nonce: number;
  /** rdma_cm-style connect: the listener's service number, and the application's private data. */
  service?: number;
  userData?: Uint8Array;
}

export interface SabreRejectInfo {
  kind: 'reject';
  reason: string;
  /** The listener had no room now (SABRE_PD_REJECT_BUSY). */
  busy?: boolean;
}

export type SabrePrivateData = SabreConnectInfo | SabreRejectInfo;

const HDR = 6;
const utf8 = new TextEncoder();
const utf8d = new TextDecoder('utf-8', { fatal: false });

/** Largest reason that fits: 512 (MPA max) - 4 (IRD/ORD) - 6 (block header). */
export const MAX_REASON_BYTES = 502;
/** Largest application private data on a connect: 502 - 12 (QPNs, nonce) - 4 (service). */
export const MAX_USER_DATA_BYTES = 486;

export function encodeSabrePd(pd: SabrePrivateData): Uint8Array {
  let body: Uint8Array;
  if (pd.kind === 'connect') {
    const ext = pd.service !== undefined || pd.userData !== undefined;
    const user = pd.userData ?? new Uint8Array(0);
    if (user.length > MAX_USER_DATA_BYTES) throw new RangeError(`private data of ${user.length} bytes exceeds ${MAX_USER_DATA_BYTES}`);
    body = new Uint8Array(ext ? 16 + user.length : 12);
    const dv = new DataView(body.buffer);
    dv.setUint32(0, pd.initiatorQpn >>> 0);
    dv.setUint32(4, pd.responderQpn >>> 0);
    dv.setUint32(8, pd.nonce >>> 0);
    if (ext) {
      dv.setUint32(12, (pd.service ?? 0) >>> 0);
      body.set(user, 16);
    }
  } else {
    let text = utf8.encode(pd.reason);
    if (text.length > MAX_REASON_BYTES) text = text.subarray(0, MAX_REASON_BYTES);
    body = text;
  }
  const out = new Uint8Array(HDR + body.length);
  const dv = new DataView(out.buffer);
  dv.setUint16(0, out.length - 2);
  out[2] = SABRE_PD_VERSION;
  out[3] = pd.kind === 'connect' ? SabrePdKind.Connect : SabrePdKind.Reject;
  dv.setUint16(4, pd.kind === 'reject' && pd.busy ? SABRE_PD_REJECT_BUSY : 0);
  out.set(body, HDR);
  return out;
}

/** undefined: not a sabre block (a foreign peer, or nothing); never throws. */
export function decodeSabrePd(b: Uint8Array): SabrePrivateData | undefined {
  if (b.length < HDR) return undefined;
  const len = (b[0]! << 8) | b[1]!;
  if (len + 2 > b.length || len < HDR - 2 || b[2] !== SABRE_PD_VERSION) return undefined;
  const body = b.subarray(HDR, len + 2);
  if (b[3] === SabrePdKind.Connect) {
    if (body.length < 12) return undefined;
    const dv = new DataView(body.buffer, body.byteOffset, body.length);
    const info: SabreConnectInfo = { kind: 'connect', initiatorQpn: dv.getUint32(0), responderQpn: dv.getUint32(4), nonce: dv.getUint32(8) };
    if (body.length >= 16) {
      info.service = dv.getUint32(12);
      info.userData = body.slice(16);
    }
    return info;
  }
  if (b[3] === SabrePdKind.Reject) {
    const info: SabreRejectInfo = { kind: 'reject', reason: utf8d.decode(body) };
    if ((((b[4]! << 8) | b[5]!) & SABRE_PD_REJECT_BUSY) !== 0) info.busy = true;
    return info;
  }
  return undefined;
}

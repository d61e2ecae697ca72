// sabre's own block inside the MPA private data. It sits after the RFC 6581 IRD/ORD word (or
// at offset 0 on a revision-1 connection), length-prefixed so a foreign peer's private data is
// recognised as "not ours" instead of being misread:
//
//   u16 blockLen   bytes that follow (>= 4)
//   u8  version    1
//   u8  kind       1 CONNECT (QPN pairing), 2 REJECT (reason)
//   u16 reserved   0
//   kind 1: u32 initiatorQpn, u32 responderQpn, u32 nonce (random per device; breaks crossings)
//   kind 2: UTF-8 reason text
//
// All big-endian like every other iWARP field.

export const SABRE_PD_VERSION = 1;
export const SabrePdKind = { Connect: 1, Reject: 2 } as const;

export interface SabreConnectInfo {
  kind: 'connect';
  initiatorQpn: number;
  responderQpn: number;
  nonce: number;
}

export interface SabreRejectInfo {
  kind: 'reject';
  reason: string;
}

export type SabrePrivateData = SabreConnectInfo | SabreRejectInfo;

const HDR = 6;
const utf8 = new TextEncoder();
const utf8d = new TextDecoder('utf-8', { fatal: false });

/** Largest reason that fits: 512 (MPA max) - 4 (IRD/ORD) - 6 (block header). */
export const MAX_REASON_BYTES = 502;

export function encodeSabrePd(pd: SabrePrivateData): Uint8Array {
  let body: Uint8Array;
  if (pd.kind === 'connect') {
    body = new Uint8Array(12);
    const dv = new DataView(body.buffer);
    dv.setUint32(0, pd.initiatorQpn >>> 0);
    dv.setUint32(4, pd.responderQpn >>> 0);
    dv.setUint32(8, pd.nonce >>> 0);
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
  dv.setUint16(4, 0);
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
    return { kind: 'connect', initiatorQpn: dv.getUint32(0), responderQpn: dv.getUint32(4), nonce: dv.getUint32(8) };
  }
  if (b[3] === SabrePdKind.Reject) return { kind: 'reject', reason: utf8d.decode(body) };
  return undefined;
}

// The file service's keys and proofs: one place for every HMAC the protocol computes, so the
// client and the server cannot drift apart on a label or an order.
//
//   pipe:        client proof  HMAC(token, "sabre-files/1 client"  ‖ Nc ‖ Ns)
//                server proof  HMAC(token, "sabre-files/1 server"  ‖ Nc ‖ Ns)
//                K_session =   HMAC(token, "sabre-files/1 session" ‖ Nc ‖ Ns)
//   negotiate:   K_auth =      HMAC(K_session, "auth" ‖ keyId)           (keyId on the wire, K_auth never)
//   connection:  client proof  HMAC(K_auth, "authenticate"  ‖ resumeKey ‖ keyId ‖ nonce ‖ params)
//                server proof  HMAC(K_auth, "authenticated" ‖ nonce ‖ params')
//
// The token never crosses a wire, nor does anything a listener could replay: both nonces are
// fresh per pipe, K_auth is single-use (the session forgets it at the first attempt, right or
// wrong) and expires. Comparisons are constant-time (crypto.timingSafeEqual).
import { createHmac, timingSafeEqual } from 'node:crypto';

const te = new TextEncoder();

export function hmac(key: Uint8Array | string, ...parts: (Uint8Array | string)[]): Uint8Array {
  const h = createHmac('sha256', typeof key === 'string' ? te.encode(key) : key);
  for (const p of parts) h.update(typeof p === 'string' ? te.encode(p) : p);
  return new Uint8Array(h.digest());
}

/** Constant-time equality; different lengths are simply unequal. */
export function sameBytes(a: Uint8Array, b: Uint8Array): boolean {
  return a.length === b.length && timingSafeEqual(a, b);
}

export const pipeClientProof = (token: string, nc: Uint8Array, ns: Uint8Array): Uint8Array => hmac(token, 'sabre-files/1 client', nc, ns);
export const pipeServerProof = (token: string, nc: Uint8Array, ns: Uint8Array): Uint8Array => hmac(token, 'sabre-files/1 server', nc, ns);
export const sessionKey = (token: string, nc: Uint8Array, ns: Uint8Array): Uint8Array => hmac(token, 'sabre-files/1 session', nc, ns);
export const authKey = (kSession: Uint8Array, keyId: Uint8Array): Uint8Array => hmac(kSession, 'auth', keyId);

export const connectionProof = (kAuth: Uint8Array, resumeKey: Uint8Array, keyId: Uint8Array, nonce: Uint8Array, params: Uint8Array): Uint8Array =>
  hmac(kAuth, 'authenticate', resumeKey, keyId, nonce, params);
export const connectionServerProof = (kAuth: Uint8Array, nonce: Uint8Array, params: Uint8Array): Uint8Array =>
  hmac(kAuth, 'authenticated', nonce, params);

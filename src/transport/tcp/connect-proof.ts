// The secret of a QP-to-QP connect (qp.connect({ address, qpn, secret })). Both ends exchanged
// { address, qpn } out of band, and with it the same secret: each end's MPA frame proves it
// holds the secret (sabrePdProof, docs/wire.md), so a third host that read the QPNs where they
// were exchanged cannot take the pairing with a Request of its own (docs/tcp-framing.md,
// "Guessing the pair"). The proof binds the role, both QPNs and the sender's nonce, and a salt
// drawn for this frame; a Reply's also binds its Request's salt, so an old Reply proves nothing
// to a new Request. The responder adds nothing fresh to a Request's proof (MPA is one round
// trip), so a Request seen on the wire could prove its secret again: a secret pairs once per QP
// (connector.ts refuses one an earlier connect of the QP had), a new attempt has a new one, and
// within an attempt the oldest Request is taken and its copies refused.
import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import { SABRE_PD_PROOF } from '../../wire/spec.js';

const PROOF_LEN = SABRE_PD_PROOF.size;
const SALT = SABRE_PD_PROOF.fields.salt.size;

export interface Pairing {
  initiatorQpn: number;
  responderQpn: number;
  /** The sender's nonce (sabrePdConnect.nonce). */
  nonce: number;
}

function mac(secret: Uint8Array, role: 'request' | 'reply', p: Pairing, salt: Uint8Array, requestSalt?: Uint8Array): Uint8Array {
  const nums = Buffer.alloc(12);
  nums.writeUInt32BE(p.initiatorQpn >>> 0, 0);
  nums.writeUInt32BE(p.responderQpn >>> 0, 4);
  nums.writeUInt32BE(p.nonce >>> 0, 8);
  const h = createHmac('sha256', secret).update(`sabre-tcp-connect ${role}`).update(nums).update(salt);
  if (requestSalt) h.update(requestSalt);
  return new Uint8Array(h.digest().subarray(0, PROOF_LEN - SALT));
}

const withSalt = (salt: Uint8Array, m: Uint8Array): Uint8Array => {
  const out = new Uint8Array(PROOF_LEN);
  out.set(salt, 0);
  out.set(m, SALT);
  return out;
};

const check = (proof: Uint8Array | undefined, want: (salt: Uint8Array) => Uint8Array): boolean => {
  if (!proof || proof.length !== PROOF_LEN) return false;
  return timingSafeEqual(want(proof.subarray(0, SALT)), proof.subarray(SALT));
};

/** A Request's proof: a fresh salt, then the MAC. */
export function requestProof(secret: Uint8Array, p: Pairing): Uint8Array {
  const salt = new Uint8Array(randomBytes(SALT));
  return withSalt(salt, mac(secret, 'request', p, salt));
}

/** A Reply's proof, bound to the Request's (whose first SALT bytes are its salt). */
export function replyProof(secret: Uint8Array, p: Pairing, request: Uint8Array): Uint8Array {
  const salt = new Uint8Array(randomBytes(SALT));
  return withSalt(salt, mac(secret, 'reply', p, salt, request.subarray(0, SALT)));
}

export const provesRequest = (secret: Uint8Array, p: Pairing, proof: Uint8Array | undefined): boolean =>
  check(proof, (salt) => mac(secret, 'request', p, salt));

export const provesReply = (secret: Uint8Array, p: Pairing, proof: Uint8Array | undefined, request: Uint8Array): boolean =>
  check(proof, (salt) => mac(secret, 'reply', p, salt, request.subarray(0, SALT)));

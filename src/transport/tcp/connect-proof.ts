// The secret of a QP-to-QP connect (qp.connect({ address, qpn, secret })). Both ends exchanged
// { address, qpn } out of band, and with it the same secret: each end's MPA frame proves it
// holds the secret (sabrePdProof, docs/wire.md), so a third host that read the QPNs where they
// were exchanged cannot take the pairing with a Request of its own (docs/tcp-framing.md,
// "Guessing the pair"). The proof binds the role, both QPNs and the sender's nonce; a Request
// without it, or with another, is refused and the QP waits on for its peer's.
import { createHmac, timingSafeEqual } from 'node:crypto';
import { SABRE_PD_PROOF } from '../../wire/spec.js';

const PROOF_LEN = SABRE_PD_PROOF.size;

export type ProofRole = 'request' | 'reply';

/** HMAC-SHA256(secret, "sabre-tcp-connect " ‖ role ‖ initiatorQpn ‖ responderQpn ‖ nonce), first 16 bytes. */
export function connectProof(secret: Uint8Array, role: ProofRole, initiatorQpn: number, responderQpn: number, nonce: number): Uint8Array {
  const nums = Buffer.alloc(12);
  nums.writeUInt32BE(initiatorQpn >>> 0, 0);
  nums.writeUInt32BE(responderQpn >>> 0, 4);
  nums.writeUInt32BE(nonce >>> 0, 8);
  const mac = createHmac('sha256', secret).update(`sabre-tcp-connect ${role}`).update(nums).digest();
  return new Uint8Array(mac.subarray(0, PROOF_LEN));
}

/** Whether a CONNECT block's proof is the one `secret` gives (constant time). */
export function proves(secret: Uint8Array, role: ProofRole, c: { initiatorQpn: number; responderQpn: number; nonce: number; proof?: Uint8Array }): boolean {
  if (!c.proof || c.proof.length !== PROOF_LEN) return false;
  return timingSafeEqual(connectProof(secret, role, c.initiatorQpn, c.responderQpn, c.nonce), c.proof);
}

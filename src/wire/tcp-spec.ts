// sabre's own block inside the MPA private data of the tcp transport (docs/tcp-framing.md §3):
// after the RFC 6581 IRD/ORD word (or at offset 0 on a revision-1 connection), length-prefixed
// so that a foreign peer's private data is recognised as "not ours" instead of being misread.
// Big-endian like every other iWARP field. Re-exported by spec.ts, which lists these layouts in
// HOST_LAYOUTS (TypeScript reads them; the data plane never does).
import { layout } from './layout.js';

export const SABRE_PD_VERSION = 1;
export const SabrePdKind = { Connect: 1, Reject: 2 } as const;

export const SABRE_PD = layout({
  name: 'sabrePd',
  title: 'sabre block in the MPA private data (after IRD/ORD, or at 0 on revision 1)',
  size: 6,
  ref: 'sabre tcp transport',
  byteOrder: 'big-endian',
  sabre: true,
  fields: {
    blockLen: { offset: 0, size: 2, type: 'u16', ref: 'sabre', meaning: 'bytes of the block after this field (at least 4)' },
    version: { offset: 2, size: 1, type: 'u8', ref: 'sabre', meaning: 'block version, 1; another value: not a sabre block' },
    kind: { offset: 3, size: 1, type: 'u8', ref: 'sabre', meaning: '1 CONNECT (QPN pairing, sabrePdConnect follows), 2 REJECT (UTF-8 reason follows)' },
    flags: {
      offset: 4, size: 2, type: 'u16', ref: 'sabre', meaning: 'flags',
      bits: {
        Rsvd: { mask: 0xfff8, meaning: 'reserved, 0' },
        Crossing: { mask: 0x0004, meaning: 'REJECT of a crossing connect (both QPs of the pair dialled, this end\'s nonce is the lower): sabrePdCrossing is the block\'s last 4 bytes, after the reason' },
        Proof: { mask: 0x0002, meaning: 'CONNECT: sabrePdProof follows sabrePdConnect (a QP-to-QP connect whose two ends were given the same secret, qp.connect({ secret })); no sabrePdService then' },
        Busy: { mask: 0x0001, meaning: 'REJECT: the listener has no room now (its backlog is full), ask again; 0 refuses for good' },
      },
    },
  },
  tail: 'CONNECT: sabrePdConnect; REJECT: the reason as UTF-8 text (to the end of the block, or to sabrePdCrossing with flags.Crossing)',
});

export const SABRE_PD_CONNECT = layout({
  name: 'sabrePdConnect',
  title: 'CONNECT body of the sabre private-data block: which QPs pair up',
  size: 12,
  ref: 'sabre tcp transport',
  byteOrder: 'big-endian',
  sabre: true,
  fields: {
    initiatorQpn: { offset: 0, size: 4, type: 'u32', ref: 'sabre', meaning: 'QPN of the initiator\'s QP' },
    responderQpn: { offset: 4, size: 4, type: 'u32', ref: 'sabre', meaning: 'QPN of the responder\'s QP; 0 on an rdma_cm-style connect: any QP of the listener on the service' },
    nonce: { offset: 8, size: 4, type: 'u32', ref: 'sabre', meaning: 'QP-to-QP connect, and any Reply: random per device (of two crossing connects for one QP pair, the lower nonce\'s survives). rdma_cm-style Request (responderQpn 0): the first 4 bytes of HMAC-SHA256(a per-device secret, "sabre-tcp-dial " ‖ host ‖ " " ‖ port) of the address dialled, so what a device shows one listener (which counts the device by its host and this value) is shown to no other' },
  },
  tail: 'with flags.Proof, sabrePdProof; on rdma_cm-style connects (src/cm), sabrePdService',
});

export const SABRE_PD_PROOF = layout({
  name: 'sabrePdProof',
  title: 'CONNECT of a QP-to-QP connect with a secret: the sender holds it',
  size: 16,
  ref: 'sabre tcp transport',
  byteOrder: 'big-endian',
  sabre: true,
  fields: {
    salt: { offset: 0, size: 8, type: 'bytes', ref: 'sabre', meaning: 'random, drawn for this frame' },
    mac: {
      offset: 8, size: 8, type: 'bytes', ref: 'sabre',
      meaning: 'the first 8 bytes of HMAC-SHA256(secret, "sabre-tcp-connect " ‖ role ‖ initiatorQpn ‖ responderQpn ‖ nonce ‖ salt [‖ the Request\'s salt, in a Reply]), role "request" in the MPA Request (the initiator\'s nonce), "reply" in the Reply (the responder\'s); the numbers as in sabrePdConnect. A responder refuses a Request whose salt it accepted before (a replay)',
    },
  },
});

export const SABRE_PD_SERVICE = layout({
  name: 'sabrePdService',
  title: 'rdma_cm-style CONNECT: the listener\'s service and the application\'s private data',
  size: 4,
  ref: 'sabre tcp transport',
  byteOrder: 'big-endian',
  sabre: true,
  fields: {
    service: { offset: 0, size: 4, type: 'u32', ref: 'sabre', meaning: 'service number the listener registered' },
  },
  tail: 'the application\'s private data, to the end of the block',
});

export const SABRE_PD_CROSSING = layout({
  name: 'sabrePdCrossing',
  title: 'REJECT of a crossing connect: who won it (the last 4 bytes of the block, after the reason)',
  size: 4,
  ref: 'sabre tcp transport',
  byteOrder: 'big-endian',
  sabre: true,
  fields: {
    nonce: {
      offset: 0, size: 4, type: 'u32', ref: 'sabre',
      meaning: 'the rejecting end\'s nonce (sabrePdConnect): the end that lost the crossing takes the Request parked with it, from whatever address it came (a peer reached at one address may dial from another), and no other. After the reason, so a peer that does not know the flag reads a reason that still starts "crossing connect"',
    },
  },
});

/** The tcp transport's layouts in document order (spec.ts appends them to HOST_LAYOUTS). */
export const TCP_LAYOUTS = [SABRE_PD, SABRE_PD_CONNECT, SABRE_PD_PROOF, SABRE_PD_SERVICE, SABRE_PD_CROSSING] as const;

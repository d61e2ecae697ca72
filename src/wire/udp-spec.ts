// The wire of sabre's udp transport (M5): the reliability header (transport context, PSN,
// ACK/SACK, flags, the cookie handshake), its blocks, and the envelopes that carry RDMAP/DDP
// frames in a datagram. Re-exported by spec.ts, which lists these layouts in LAYOUTS.
import { layout } from './layout.js';

/**
 * 2: COOKIE datagrams, the cookie and token blocks (address validation before any state is
 * kept, reset tokens). A version-1 peer would misread the new blocks, so the byte changes.
 */
export const UDP_VERSION = 2;
export const UdpType = { Data: 1, Ack: 2, Reset: 3, Cookie: 4 } as const;
export const UdpFlag = { Sack: 0x01, AckReq: 0x02, Retx: 0x04, Cookie: 0x08, Token: 0x10, Integ: 0x20 } as const;
/**
 * Integrity of a datagram (docs/integrity.md): the trailer kind in flags bits 6-7, and the wish
 * in a udpInteg block. 0 is CRC32C, what every datagram carried before the field existed.
 */
export const UdpIntegrity = { Crc32c: 0, Xxh3: 1, None: 2 } as const;
/** Trailer bytes per UdpIntegrity code: CRC32C 4, XXH3-64 8, none 0. */
export const UDP_TRAILER_LENS: readonly number[] = [4, 8, 0];
export const UDP_TRAILER_MAX = 8;
export const UDP_TRAILER_SHIFT = 6;
export const UDP_TRAILER_MASK = 0xc0;
export const UDP_MAX_SACK = 8;
export const UDP_CRC_LEN = 4;
/** Same convention as the MPA trailer, so one CRC32C writer serves both transports. */
export const UDP_CRC_LITTLE_ENDIAN = true;

export const UDP_HDR = layout({
  name: 'udpHdr',
  title: 'sabre UDP reliability header (M5), in front of each DDP segment',
  size: 36,
  ref: 'sabre (M5)',
  byteOrder: 'big-endian',
  sabre: true,
  fields: {
    verType: {
      offset: 0, size: 1, type: 'u8', ref: 'sabre', meaning: 'version and datagram type',
      bits: {
        Ver: { mask: 0xf0, meaning: 'version, 2' },
        Type: {
          mask: 0x0f,
          meaning: '1 DATA (a DDP segment follows), 2 ACK (no segment), 3 RESET (the sender lost the context named in srcCtx; carries udpToken), 4 COOKIE (address validation challenge; carries udpCookie, no segment)',
        },
      },
    },
    flags: {
      offset: 1, size: 1, type: 'u8', ref: 'sabre', meaning: 'flags',
      bits: {
        Sack: { mask: 0x01, meaning: 'SACK blocks follow the fixed header (after udpCookie / udpToken)' },
        AckReq: { mask: 0x02, meaning: 'sender asks for an immediate ACK; on an ACK it is a keepalive probe of an idle peer, answered (only inside an established context) with one ACK' },
        Retx: { mask: 0x04, meaning: 'this DATA is a retransmission (excluded from RTT samples)' },
        Cookie: { mask: 0x08, meaning: 'a udpCookie block follows the fixed header' },
        Token: { mask: 0x10, meaning: 'a udpToken block follows (after udpCookie, if any)' },
        Integ: { mask: 0x20, meaning: 'a udpInteg block follows (after udpToken, if any): the sender\'s integrity wish, carried by handshake datagrams' },
        Trailer: { mask: 0xc0, meaning: 'trailer kind: 0 CRC32C (4 bytes, LSB first), 1 XXH3-64 (8 bytes, LSB first), 2 none (no trailer), 3 reserved (dropped); must be CRC32C in COOKIE, RESET and datagrams with dstCtx 0, else the mode the context settled' },
      },
    },
    window: { offset: 2, size: 2, type: 'u16', ref: 'sabre', meaning: 'receive window: datagrams the sender of this header accepts beyond ackPsn (credits); COOKIE/RESET: 0' },
    srcCtx: {
      offset: 4, size: 4, type: 'u32', ref: 'sabre',
      meaning: 'sender\'s transport-context id (random nonzero, new after every restart); RESET: the id of the context the sender lost (echo of the dstCtx that found nothing); COOKIE: nonzero, no context (the sender keeps no state)',
    },
    dstCtx: {
      offset: 8, size: 4, type: 'u32', ref: 'sabre',
      meaning: 'receiver\'s transport-context id as last learned; 0 until learned (first contact: then udpCookie must be present); RESET/COOKIE: echo of the srcCtx of the datagram that triggered them',
    },
    psn: { offset: 12, size: 4, type: 'u32', ref: 'sabre', meaning: 'packet sequence number of this DATA (serial arithmetic mod 2^32); ACK: next PSN to be sent; COOKIE/RESET: 0' },
    ackPsn: { offset: 16, size: 4, type: 'u32', ref: 'sabre', meaning: 'cumulative ACK: every PSN before this one has been received' },
    tsVal: { offset: 20, size: 4, type: 'u32', ref: 'sabre', meaning: 'sender timestamp, microseconds, wrapping' },
    tsEcr: { offset: 24, size: 4, type: 'u32', ref: 'sabre', meaning: 'echo of the tsVal of the datagram that triggered this ACK / COOKIE' },
    dstQpn: { offset: 28, size: 4, type: 'u32', ref: 'sabre', meaning: 'destination QP number (datagrams carry no stream to name the QP); 0xfffffffe (DEVICE_QPN) here and in srcQpn with an ack frame of ssn 0: the device-wide not-ready word' },
    srcQpn: { offset: 32, size: 4, type: 'u32', ref: 'sabre', meaning: 'source QP number' },
  },
  tail: 'if flags.Cookie: udpCookie; if flags.Token: udpToken; if flags.Integ: udpInteg; if flags.Sack: udpSack + count udpSackBlock; then (DATA) the DDP segment; then the trailer flags.Trailer names, over everything before it: CRC32C (4 bytes, LSB first), XXH3-64 seed 0 (8 bytes, LSB first) or nothing',
});

/**
 * Address validation (as QUIC's Retry token / SCTP's state cookie): the receiver of a first
 * contact answers with a COOKIE carrying this block and keeps no state; the initiator repeats
 * the block in every datagram it sends with dstCtx 0 until the receiver answers from a context.
 */
export const UDP_COOKIE = layout({
  name: 'udpCookie',
  title: 'sabre UDP cookie block (address validation)',
  size: 12,
  ref: 'sabre (M5); RFC 9000 §8.1, RFC 9260 §5.1.3',
  byteOrder: 'big-endian',
  sabre: true,
  fields: {
    time: { offset: 0, size: 4, type: 'u32', ref: 'sabre', meaning: 'issuer\'s clock when minted, milliseconds, wrapping; 0 with an all-zero mac: "no cookie yet" (a first contact carries the zero block so that the COOKIE answering it is never longer than it)' },
    mac: { offset: 4, size: 8, type: 'bytes', ref: 'sabre', meaning: 'first 8 bytes of HMAC-SHA256(issuer secret, "cookie", time, initiator srcCtx, initiator address and port)' },
  },
});

/**
 * The reset token of the sender's context (as QUIC's stateless reset token): HMAC of the
 * sender's device secret and its context id, so a device that lost the context recomputes it.
 */
export const UDP_TOKEN = layout({
  name: 'udpToken',
  title: 'sabre UDP reset token block',
  size: 8,
  ref: 'sabre (M5); RFC 9000 §10.3',
  byteOrder: 'big-endian',
  sabre: true,
  fields: {
    token: { offset: 0, size: 8, type: 'bytes', ref: 'sabre', meaning: 'first 8 bytes of HMAC-SHA256(sender secret, "reset", srcCtx): carried by the handshake datagrams (until the peer has it) and by RESET' },
  },
});

/**
 * The sender's integrity wish (docs/integrity.md), in the datagrams that carry the handshake:
 * the initiator's first contact and cookie echo, the responder's datagrams until the initiator
 * names its context. Each side settles on the stronger of its own wish and the peer's (order
 * none < crc32c < xxh3); a peer whose handshake carries no block is taken to want crc32c only.
 */
export const UDP_INTEG = layout({
  name: 'udpInteg',
  title: 'sabre UDP integrity wish block',
  size: 4,
  ref: 'sabre (M5); docs/integrity.md',
  byteOrder: 'big-endian',
  sabre: true,
  fields: {
    wish: { offset: 0, size: 1, type: 'u8', ref: 'sabre', meaning: 'integrity the sender asks for: 0 CRC32C, 1 XXH3-64, 2 none; other values are refused (the datagram is dropped)' },
    rsvd: { offset: 1, size: 3, type: 'bytes', ref: 'sabre', meaning: 'reserved, 0' },
  },
});

export const UDP_SACK = layout({
  name: 'udpSack',
  title: 'sabre UDP SACK block list header',
  size: 4,
  ref: 'sabre (M5)',
  byteOrder: 'big-endian',
  sabre: true,
  fields: {
    count: { offset: 0, size: 1, type: 'u8', ref: 'sabre', meaning: 'number of blocks, 1..8' },
    rsvd: { offset: 1, size: 3, type: 'bytes', ref: 'sabre', meaning: 'reserved, 0 (keeps blocks 4-byte aligned)' },
  },
  tail: 'count udpSackBlock',
});

export const UDP_SACK_BLOCK = layout({
  name: 'udpSackBlock',
  title: 'sabre UDP SACK block',
  size: 8,
  ref: 'sabre (M5)',
  byteOrder: 'big-endian',
  sabre: true,
  fields: {
    start: { offset: 0, size: 4, type: 'u32', ref: 'sabre', meaning: 'first PSN received in this range (after ackPsn)' },
    end: { offset: 4, size: 4, type: 'u32', ref: 'sabre', meaning: 'one past the last PSN received in this range' },
  },
});


/**
 * The engine envelope inside a UDP DATA datagram (between the reliability header / SACK list
 * and the DDP segment). The engine orders and completes messages by it (src/core/frame.ts);
 * the QP numbers already ride in the reliability header (dstQpn / srcQpn), so they are not
 * repeated. ack / rnr / hello frames are the 8-byte udpEnv alone; a seg frame adds udpEnvSeg and
 * then its DDP segment.
 */
export const UdpEnvKind = { Seg: 1, Ack: 2, Rnr: 3, Hello: 4 } as const;
export const UdpEnvFlag = { Reply: 0x01, AckPresent: 0x02 } as const;
/** For docs/wire.md. */
export const UDP_ENV_KINDS = Object.entries(UdpEnvKind).map(([k, v]) => `${v} ${k.toLowerCase()}`).join(', ');

export const UDP_ENV = layout({
  name: 'udpEnv',
  title: 'sabre engine envelope in a UDP DATA payload (every frame)',
  size: 8,
  ref: 'sabre (M5)',
  byteOrder: 'big-endian',
  sabre: true,
  fields: {
    kind: { offset: 0, size: 1, type: 'u8', ref: 'sabre', meaning: 'frame kind: 1 seg (udpEnvSeg + DDP segment follow), 2 ack, 3 rnr, 4 hello' },
    flags: {
      offset: 1, size: 1, type: 'u8', ref: 'sabre', meaning: 'flags',
      bits: {
        Reply: { mask: 0x01, meaning: 'hello: this is the answer to a hello' },
        AckPresent: { mask: 0x02, meaning: 'seg: udpEnvSeg.ack carries a piggy-backed cumulative ack' },
        Epoch: { mask: 0xfc, meaning: 'srd QPs: the flow\'s epoch (mod 64), both directions: a flow starts again at ssn 1 in the next epoch after its work failed, its peer was lost or it idled (src/rdmap/srd-epoch.ts). A frame of a newer epoch restarts the receiver\'s flow too; a segment of an older one is a copy from before a restart: dropped, answered by an ack of ssn 0 in the current epoch; an older ack or rnr is ignored. rc QPs: 0, ignored' },
      },
    },
    len: {
      offset: 2, size: 2, type: 'u16', ref: 'sabre',
      meaning: 'bytes of this frame, udpEnv included, when another frame follows it in the same DATA payload (frame packing); 0: this frame runs to the end of the payload',
    },
    ssn: {
      offset: 4, size: 4, type: 'u32', ref: 'sabre',
      meaning: 'seg: message sequence number of this QP direction (1, 2, …; requests and responses alike); ack: every message <= ssn completed (ssn 0 with both QPNs DEVICE_QPN: the sender holds its input and is alive, for every flow between the two ends: src/rdmap/not-ready.ts); rnr: the message that found no receive; hello: 0',
    },
  },
  tail: 'seg: udpEnvSeg, then the DDP segment (header + payload) up to the end of the frame; other kinds: nothing. Then, if len != 0, the next frame\'s udpEnv',
});

export const UDP_ENV_SEG = layout({
  name: 'udpEnvSeg',
  title: 'sabre engine envelope, seg frames (follows udpEnv)',
  size: 12,
  ref: 'sabre (M5)',
  byteOrder: 'big-endian',
  sabre: true,
  fields: {
    msgLen: { offset: 0, size: 4, type: 'u32', ref: 'sabre', meaning: 'payload bytes of the whole RDMAP message this segment belongs to' },
    off: { offset: 4, size: 4, type: 'u32', ref: 'sabre', meaning: 'this segment\'s payload offset within the message' },
    ack: { offset: 8, size: 4, type: 'u32', ref: 'sabre', meaning: 'piggy-backed cumulative ack when flags.AckPresent, else 0' },
  },
  tail: 'the DDP segment: tagged (14 B) or untagged (18 B) header, then its payload',
});

export const UDP_VER_SHIFT = 4;
export const UDP_TYPE_MASK = UDP_HDR.fields.verType.bits!.Type.mask;

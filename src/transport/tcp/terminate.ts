// What a failure below the engine turns into on the wire: the RFC 5040 §4.8 Terminate
// layer/etype/ecode triple (values from src/wire/spec.ts TERM_TABLES, as siw's iwarp.h), plus
// a human-readable reason for logs and rejected promises.
import type { TermCode } from '../../rdmap/terminate.js';
import { TERM_TABLES, TermLayer } from '../../wire/spec.js';

export type { TermCode };

export interface TcpFault extends TermCode {
  /** Stable machine-readable name: 'CRC', 'MARKER', 'LENGTH', 'TRUNCATED', 'DDP_VERSION', … */
  code: string;
  reason: string;
}

const LLP = TERM_TABLES.llp;
const DDP = TERM_TABLES.ddp;
const RDMAP = TERM_TABLES.rdmap;

export const TERM = {
  /** RFC 5044 §8: MPA CRC error → layer 2 (LLP), etype 0 (MPA), ecode 2. */
  crc: { layer: TermLayer.Llp, etype: LLP.etype.Mpa, ecode: LLP.ecode.ReceivedCrc },
  /** Marker / FPDU framing lost (bad FPDUPTR, impossible length). */
  fpduStart: { layer: TermLayer.Llp, etype: LLP.etype.Mpa, ecode: LLP.ecode.FpduStart },
  /** Stream ended or reset in the middle of an FPDU. */
  streamLost: { layer: TermLayer.Llp, etype: LLP.etype.Mpa, ecode: LLP.ecode.TcpStreamLost },
  /** Bad MPA Request/Reply. */
  invalidReqResp: { layer: TermLayer.Llp, etype: LLP.etype.Mpa, ecode: LLP.ecode.InvalidReqResp },
  insufficientIrd: { layer: TermLayer.Llp, etype: LLP.etype.Mpa, ecode: LLP.ecode.InsufficientIrd },
  noMatchingRtr: { layer: TermLayer.Llp, etype: LLP.etype.Mpa, ecode: LLP.ecode.NoMatchingRtr },
} as const satisfies Record<string, TermCode>;

export function fault(term: TermCode, code: string, reason: string): TcpFault {
  return { ...term, code, reason };
}

/**
 * Map the stable error strings of src/wire/rdmap.ts decodeDdp onto the Terminate the receiver
 * must send (siw_get_hdr does the same checks): a DDP version error is reported by DDP in the
 * tagged or untagged buffer etype, an RDMAP version or opcode error by RDMAP as a remote
 * operation error. `tagged` is the T bit of the offending segment.
 */
export function ddpDecodeFault(error: string, tagged: boolean): TcpFault {
  switch (error) {
    case 'BAD_DDP_VERSION':
      return tagged
        ? fault({ layer: TermLayer.Ddp, etype: DDP.etype.TaggedBuffer, ecode: DDP.taggedEcode.Version }, 'DDP_VERSION', 'DDP version is not 1')
        : fault({ layer: TermLayer.Ddp, etype: DDP.etype.UntaggedBuffer, ecode: DDP.untaggedEcode.Version }, 'DDP_VERSION', 'DDP version is not 1');
    case 'BAD_RDMAP_VERSION':
      return fault({ layer: TermLayer.Rdmap, etype: RDMAP.etype.RemoteOperation, ecode: RDMAP.ecode.Version }, 'RDMAP_VERSION', 'RDMAP version is not 1');
    case 'BAD_OPCODE':
      return fault({ layer: TermLayer.Rdmap, etype: RDMAP.etype.RemoteOperation, ecode: RDMAP.ecode.Opcode }, 'OPCODE', 'unknown RDMAP opcode');
    case 'TRUNCATED':
      return fault(TERM.fpduStart, 'DDP_TRUNCATED', 'ULPDU shorter than its DDP header');
    default:
      return fault({ layer: TermLayer.Rdmap, etype: RDMAP.etype.Catastrophic, ecode: RDMAP.ecode.Unspecified }, error, `malformed segment: ${error}`);
  }
}

// Frames built by hand, as a peer's engine would send them, for tests that feed a victim's
// driver directly (SimNode.inject): what a hostile or broken peer sends.
import type { SegFrame } from '../../src/core/frame.js';
import { dataFrames } from '../../src/rdmap/segmenter.js';
import { RdmapOpcode } from '../../src/wire/rdmap.js';

/** One tagged Write of `len` zero bytes from a peer's QP `src` to QP `dst`, message `ssn`. */
export function taggedWrite(src: number, dst: number, ssn: number, stag: number, to: number, len: number): SegFrame[] {
  const out: SegFrame[] = [];
  dataFrames({ srcQpn: src, dstQpn: dst, ssn, tagged: true, opcode: RdmapOpcode.RdmaWrite, stag, to, parts: [new Uint8Array(len)], total: len, mss: 1 << 20 }, out);
  for (const f of out) f.env.msgLen = len;
  return out;
}

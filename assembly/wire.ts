// Batch DDP header parsing for the packet path: one JS→WASM call validates and extracts the
// headers of many segments (received datagrams or FPDUs already sitting in shared memory), so
// the per-packet cost is loads and stores, not a boundary crossing.
//
// Layouts, offsets and status codes come from wire.gen.ts (generated from src/wire/spec.ts).
// The checks mirror decodeDdp in src/wire/rdmap.ts exactly; test/wire/ts-as-agree.test.ts
// holds the two to the same answers.
import {
  DDP_BATCH_DESC_SIZE, DDP_BATCH_OUT_SIZE, DDP_BATCH_FLAG_LAST, DDP_BATCH_FLAG_TAGGED,
  DDP_CTRL_DDP_DV, DDP_CTRL_DDP_L, DDP_CTRL_DDP_T, DDP_CTRL_RDMAP_OPCODE, DDP_CTRL_RDMAP_RV,
  DDP_STATUS_BAD_DDP_VERSION, DDP_STATUS_BAD_OPCODE, DDP_STATUS_BAD_RDMAP_VERSION, DDP_STATUS_OK,
  DDP_STATUS_TO_RANGE, DDP_STATUS_TRUNCATED, DDP_VERSION, MAX_SAFE_TO, OPCODE_COUNT,
  OPCODE_TAGGED_BITS, RDMAP_RV_SHIFT, RDMAP_VERSION, TAGGED_SIZE, UNTAGGED_SIZE,
  getDdpBatchDescLen, getDdpBatchDescPtr, getDdpCtrlDdp, getDdpCtrlRdmap, getTaggedStag,
  getTaggedTo, getUntaggedMo, getUntaggedMsn, getUntaggedQn, getUntaggedUlp,
  setDdpBatchOutFlags, setDdpBatchOutHdrLen, setDdpBatchOutOpcode, setDdpBatchOutPayloadLen,
  setDdpBatchOutPayloadPtr, setDdpBatchOutRsvd, setDdpBatchOutStagOrQn, setDdpBatchOutStatus,
  setDdpBatchOutToOrMsnMo, setDdpBatchOutUlp,
  getDdpBatchOutFlags, getDdpBatchOutOpcode, getDdpBatchOutPayloadLen, getDdpBatchOutStagOrQn,
  getDdpBatchOutToOrMsnMo, getDdpBatchOutUlp, setDdpBatchDescLen, setDdpCtrlDdp, setDdpCtrlRdmap,
  setTaggedStag, setTaggedTo, setUntaggedMo, setUntaggedMsn, setUntaggedQn, setUntaggedUlp,
} from './wire.gen';

// @ts-ignore: decorator
@inline function reject(out: usize, status: u32): void {
  // Only the status is meaningful on error; zero the rest so records compare exactly.
  store<u64>(out, 0, 0);
  store<u64>(out, 0, 8);
  store<u64>(out, 0, 16);
  store<u64>(out, 0, 24);
  setDdpBatchOutStatus(out, <u8>status);
}

/**
 * Parse `count` DDP segments named by the descriptors at `descPtr` ({ptr u32, len u32}, 8 bytes
 * each, little-endian) into 32-byte records at `outPtr` (layout ddpBatchOut in docs/wire.md).
 * Returns how many segments parsed with status OK.
 */
export function parseDdpBatch(descPtr: usize, count: u32, outPtr: usize): u32 {
  let ok: u32 = 0;
  for (let i: u32 = 0; i < count; i++) {
    const d = descPtr + <usize>i * DDP_BATCH_DESC_SIZE;
    const out = outPtr + <usize>i * DDP_BATCH_OUT_SIZE;
    const p = <usize>getDdpBatchDescPtr(d);
    const len = getDdpBatchDescLen(d);
    if (len < 2) { reject(out, DDP_STATUS_TRUNCATED); continue; }
    const c0 = <u32>getDdpCtrlDdp(p);
    const c1 = <u32>getDdpCtrlRdmap(p);
    if ((c0 & DDP_CTRL_DDP_DV) != DDP_VERSION) { reject(out, DDP_STATUS_BAD_DDP_VERSION); continue; }
    if ((c1 & DDP_CTRL_RDMAP_RV) >> RDMAP_RV_SHIFT != RDMAP_VERSION) { reject(out, DDP_STATUS_BAD_RDMAP_VERSION); continue; }
    const opcode = c1 & DDP_CTRL_RDMAP_OPCODE;
    const tagged: u32 = (c0 & DDP_CTRL_DDP_T) != 0 ? 1 : 0;
    if (opcode >= OPCODE_COUNT || ((OPCODE_TAGGED_BITS >> opcode) & 1) != tagged) { reject(out, DDP_STATUS_BAD_OPCODE); continue; }
    const hdrLen: u32 = tagged ? TAGGED_SIZE : UNTAGGED_SIZE;
    if (len < hdrLen) { reject(out, DDP_STATUS_TRUNCATED); continue; }
    if (tagged) {
      const to = getTaggedTo(p);
      if (to >= MAX_SAFE_TO) { reject(out, DDP_STATUS_TO_RANGE); continue; }
      setDdpBatchOutStagOrQn(out, getTaggedStag(p));
      setDdpBatchOutUlp(out, 0);
      setDdpBatchOutToOrMsnMo(out, to);
    } else {
      setDdpBatchOutStagOrQn(out, getUntaggedQn(p));
      setDdpBatchOutUlp(out, getUntaggedUlp(p));
      setDdpBatchOutToOrMsnMo(out, <u64>getUntaggedMsn(p) | (<u64>getUntaggedMo(p) << 32));
    }
    setDdpBatchOutStatus(out, <u8>DDP_STATUS_OK);
    setDdpBatchOutFlags(out, <u8>((tagged ? DDP_BATCH_FLAG_TAGGED : 0) | ((c0 & DDP_CTRL_DDP_L) != 0 ? DDP_BATCH_FLAG_LAST : 0)));
    setDdpBatchOutOpcode(out, <u8>opcode);
    setDdpBatchOutHdrLen(out, <u8>hdrLen);
    setDdpBatchOutPayloadLen(out, len - hdrLen);
    setDdpBatchOutPayloadPtr(out, <u32>(p + hdrLen));
    setDdpBatchOutRsvd(out, 0);
    ok++;
  }
  return ok;
}

/**
 * The inverse of parseDdpBatch, for the transmit path: for each of `count` records at `recPtr`
 * (ddpBatchOut layout; status, hdrLen, payloadPtr and rsvd are ignored), write the DDP header at
 * the address in the matching descriptor at `descPtr` and set that descriptor's len to header +
 * payloadLen. The caller guarantees room and valid values (opcode < OPCODE_COUNT, model matching
 * the opcode): the engine built them. Returns the total header bytes written.
 */
export function buildDdpBatch(recPtr: usize, count: u32, descPtr: usize): u32 {
  let total: u32 = 0;
  for (let i: u32 = 0; i < count; i++) {
    const r = recPtr + <usize>i * DDP_BATCH_OUT_SIZE;
    const d = descPtr + <usize>i * DDP_BATCH_DESC_SIZE;
    const p = <usize>getDdpBatchDescPtr(d);
    const flags = <u32>getDdpBatchOutFlags(r);
    const tagged = (flags & DDP_BATCH_FLAG_TAGGED) != 0;
    const last: u32 = (flags & DDP_BATCH_FLAG_LAST) != 0 ? DDP_CTRL_DDP_L : 0;
    setDdpCtrlDdp(p, <u8>((tagged ? DDP_CTRL_DDP_T : 0) | last | DDP_VERSION));
    setDdpCtrlRdmap(p, <u8>((RDMAP_VERSION << RDMAP_RV_SHIFT) | (<u32>getDdpBatchOutOpcode(r) & DDP_CTRL_RDMAP_OPCODE)));
    let hdrLen: u32;
    if (tagged) {
      setTaggedStag(p, getDdpBatchOutStagOrQn(r));
      setTaggedTo(p, getDdpBatchOutToOrMsnMo(r));
      hdrLen = TAGGED_SIZE;
    } else {
      const mm = getDdpBatchOutToOrMsnMo(r);
      setUntaggedUlp(p, getDdpBatchOutUlp(r));
      setUntaggedQn(p, getDdpBatchOutStagOrQn(r));
      setUntaggedMsn(p, <u32>mm);
      setUntaggedMo(p, <u32>(mm >> 32));
      hdrLen = UNTAGGED_SIZE;
    }
    setDdpBatchDescLen(d, hdrLen + getDdpBatchOutPayloadLen(r));
    total += hdrLen;
  }
  return total;
}

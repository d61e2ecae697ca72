// The records of the inproc bridge (src/transport/inproc/bridge.ts): two byte rings in one
// SharedArrayBuffer carry frame batches between the devices of two threads of one process.
// Host order (little-endian), in shared memory, not on a wire; both ends are the same build, so
// the version is the code's. Re-exported by spec.ts, which lists these layouts in HOST_LAYOUTS
// (TypeScript reads them; the data plane never does).
import { layout } from './layout.js';

/** inprocSlot.len of the slot that pads the ring's end: the next record starts at offset 0. */
export const INPROC_WRAP = 0xffff_ffff;
export const InprocRecordKind = { Hello: 0, Batch: 1 } as const;
export const InprocFrameKind = { Seg: 0, Ack: 1, Rnr: 2, Hello: 3 } as const;

export const INPROC_RING = layout({
  name: 'inprocRing',
  title: 'Inproc bridge ring header (one per direction; the ring\'s bytes follow)',
  size: 64,
  ref: 'sabre inproc bridge',
  byteOrder: 'little-endian',
  sabre: true,
  fields: {
    write: { offset: 0, size: 4, type: 'u32', ref: 'sabre', meaning: 'bytes ever written (the producer\'s position; Atomics)' },
    read: { offset: 4, size: 4, type: 'u32', ref: 'sabre', meaning: 'bytes ever consumed (the consumer\'s position; Atomics)' },
    notify: { offset: 8, size: 4, type: 'u32', ref: 'sabre', meaning: 'bumped on every record and at close: the word the consumer waits on' },
    closed: { offset: 12, size: 4, type: 'u32', ref: 'sabre', meaning: '1 once either side closed the bridge' },
    rsvd: { offset: 16, size: 48, type: 'bytes', ref: 'sabre', meaning: 'reserved, 0 (keeps the ring\'s bytes on their own cache line)' },
  },
  tail: 'the ring: inprocSlot records, each padded to 4 bytes',
});

export const INPROC_SLOT = layout({
  name: 'inprocSlot',
  title: 'Inproc bridge ring slot: one record, length-prefixed',
  size: 4,
  ref: 'sabre inproc bridge',
  byteOrder: 'little-endian',
  sabre: true,
  fields: {
    len: { offset: 0, size: 4, type: 'u32', ref: 'sabre', meaning: 'bytes of the record that follows; 0xffffffff (or fewer than 4 bytes left): the rest of the ring is padding, the record starts at offset 0' },
  },
  tail: 'an inprocRecord of len bytes, then zero padding to a multiple of 4',
});

export const INPROC_RECORD = layout({
  name: 'inprocRecord',
  title: 'Inproc bridge record: a hello, or a batch of frames to one device',
  size: 12,
  ref: 'sabre inproc bridge',
  byteOrder: 'little-endian',
  sabre: true,
  fields: {
    kind: { offset: 0, size: 1, type: 'u8', ref: 'sabre', meaning: '0 hello (from holds the sending thread\'s address prefix; no frames), 1 batch' },
    rsvd: { offset: 1, size: 1, type: 'u8', ref: 'sabre', meaning: 'reserved, 0' },
    toLen: { offset: 2, size: 2, type: 'u16', ref: 'sabre', meaning: 'bytes of the destination device\'s address id (UTF-8)' },
    fromLen: { offset: 4, size: 2, type: 'u16', ref: 'sabre', meaning: 'bytes of the source device\'s address (JSON, UTF-8), or of the hello\'s prefix' },
    rsvd2: { offset: 6, size: 2, type: 'u16', ref: 'sabre', meaning: 'reserved, 0' },
    count: { offset: 8, size: 4, type: 'u32', ref: 'sabre', meaning: 'frames in the batch' },
  },
  tail: 'toLen bytes of destination, fromLen bytes of source, then count inprocFrame entries',
});

export const INPROC_FRAME = layout({
  name: 'inprocFrame',
  title: 'Inproc bridge frame: which QPs it goes between',
  size: 12,
  ref: 'sabre inproc bridge',
  byteOrder: 'little-endian',
  sabre: true,
  fields: {
    kind: { offset: 0, size: 1, type: 'u8', ref: 'sabre', meaning: '0 segment (inprocSeg follows), 1 ack, 2 rnr, 3 hello (inprocCtrl follows)' },
    epoch: { offset: 1, size: 1, type: 'u8', ref: 'sabre', meaning: 'srd: the flow\'s epoch (udpEnv.flags.Epoch); else 0' },
    rsvd: { offset: 2, size: 2, type: 'bytes', ref: 'sabre', meaning: 'reserved, 0' },
    srcQpn: { offset: 4, size: 4, type: 'u32', ref: 'sabre', meaning: 'sending QP' },
    dstQpn: { offset: 8, size: 4, type: 'u32', ref: 'sabre', meaning: 'receiving QP' },
  },
  tail: 'inprocSeg for a segment, inprocCtrl for the others',
});

export const INPROC_SEG = layout({
  name: 'inprocSeg',
  title: 'Inproc bridge segment: the envelope of one DDP segment, its header and payload',
  size: 32,
  ref: 'sabre inproc bridge',
  byteOrder: 'little-endian',
  sabre: true,
  fields: {
    ssn: { offset: 0, size: 8, type: 'f64', ref: 'sabre', meaning: 'the segment\'s send sequence number' },
    ack: { offset: 8, size: 8, type: 'f64', ref: 'sabre', meaning: 'piggybacked acknowledgement, -1 = none' },
    msgLen: { offset: 16, size: 4, type: 'u32', ref: 'sabre', meaning: 'bytes of the whole message' },
    off: { offset: 20, size: 4, type: 'u32', ref: 'sabre', meaning: 'offset of this segment in the message' },
    hdrLen: { offset: 24, size: 2, type: 'u16', ref: 'sabre', meaning: 'bytes of the DDP/RDMAP header that follows' },
    rsvd: { offset: 26, size: 2, type: 'u16', ref: 'sabre', meaning: 'reserved, 0' },
    payloadLen: { offset: 28, size: 4, type: 'u32', ref: 'sabre', meaning: 'payload bytes after the header' },
  },
  tail: 'hdrLen header bytes, then payloadLen payload bytes',
});

export const INPROC_CTRL = layout({
  name: 'inprocCtrl',
  title: 'Inproc bridge control frame (ack, rnr, hello)',
  size: 8,
  ref: 'sabre inproc bridge',
  byteOrder: 'little-endian',
  sabre: true,
  fields: {
    value: { offset: 0, size: 8, type: 'f64', ref: 'sabre', meaning: 'ack, rnr: the SSN; hello: 1 for a reply, else 0' },
  },
});

/** The inproc bridge's layouts in document order (spec.ts appends them to HOST_LAYOUTS). */
export const INPROC_LAYOUTS = [INPROC_RING, INPROC_SLOT, INPROC_RECORD, INPROC_FRAME, INPROC_SEG, INPROC_CTRL] as const;

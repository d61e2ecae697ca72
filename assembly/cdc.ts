// Content-defined chunking (mechanism M4): FastCDC's Gear rolling hash with normalized chunking
// (Xia et al., USENIX ATC 2016; the two-bytes-per-step form of the 2020 TPDS version), over a
// gear table the caller derives from a key, so chunk boundaries are a secret of whoever holds
// the key and do not fingerprint content (docs/dedup.md: the 2025 attacks on restic, borg,
// tarsnap, kopia). Streaming: the state is a 64-byte record in shared memory, so a stream split
// into buffers at arbitrary points cuts exactly where the whole stream would, and any instance
// over the same memory can continue it.
//
// The rolling hash: fp = (fp << 1) + G[byte]; a cut follows byte i when fp & mask == 0. Bit j of
// fp depends on the last j+1 bytes, so masks sit in bits 62..(63-k): a window of up to 63 bytes,
// and bit 63 stays out of every mask, which is what makes the two-byte step exact:
//   fp' = (fp << 2) + (G[a] << 1) = ((fp << 1) + G[a]) << 1,  so  fp' & (m << 1) == 0  <=>  the
//   one-byte fp after a has fp & m == 0 (bit 63 of it is the only one lost, and m never has it).
// Normalized chunking: no byte of a chunk's first `min` bytes is hashed (fp restarts at 0 at
// `min`), cuts before `normal` need the harder mask (more bits), after it the easier one, and a
// chunk that reaches `max` is cut there.
//
// Table (CDC_TABLE_SIZE = 4096 bytes, 8-aligned): G[256] u64 (written by the caller from its
// key), then G[i] << 1 (written by cdcPrepareTable).
//
// State record (CDC_STATE_SIZE = 64 bytes, 8-aligned, LE):
//   +0  fp        u64   rolling hash of the current chunk (0 until `min` bytes are in)
//   +8  pos       u32   bytes of the current chunk seen so far
//   +12 consumed  u32   bytes of the last cdcChunk input consumed (< len only when out filled)
//   +16 min       u32   minimum chunk size (≥ 64)
//   +20 normal    u32   normalization point (the average size); min ≤ normal ≤ max
//   +24 max       u32   maximum chunk size
//   +28 table     u32   address of the 4096-byte table
//   +32 maskS     u64   mask before `normal` (more bits: fewer cuts)
//   +40 maskL     u64   mask from `normal` on (fewer bits)
//   +48 total     u64   bytes of the stream so far (every call adds what it consumed)
//   +56 chunks    u32   chunks cut so far
//   +60 magic     u32   CDC_STATE_MAGIC, written by the TypeScript side (not checked here)

// @ts-ignore: decorator
@inline const ST_FP: usize = 0;
// @ts-ignore: decorator
@inline const ST_POS: usize = 8;
// @ts-ignore: decorator
@inline const ST_CONSUMED: usize = 12;
// @ts-ignore: decorator
@inline const ST_MIN: usize = 16;
// @ts-ignore: decorator
@inline const ST_NORMAL: usize = 20;
// @ts-ignore: decorator
@inline const ST_MAX: usize = 24;
// @ts-ignore: decorator
@inline const ST_TABLE: usize = 28;
// @ts-ignore: decorator
@inline const ST_MASK_S: usize = 32;
// @ts-ignore: decorator
@inline const ST_MASK_L: usize = 40;
// @ts-ignore: decorator
@inline const ST_TOTAL: usize = 48;
// @ts-ignore: decorator
@inline const ST_CHUNKS: usize = 56;

/** Bytes of the gear table (G, then G << 1). */
export function cdcTableSize(): u32 {
  return 4096;
}

/** Bytes of a chunker state record. */
export function cdcStateSize(): u32 {
  return 64;
}

/** Fill the second half of the table (G[i] << 1) from the first. */
export function cdcPrepareTable(table: usize): void {
  for (let i: usize = 0; i < 256; i++) {
    store<u64>(table + 2048 + (i << 3), load<u64>(table + (i << 3)) << 1);
  }
}

// Per-call results of scan() (AssemblyScript has no multi-value returns).
let scanFp: u64 = 0;
let scanCut: bool = false;

// @ts-ignore: decorator
@inline function cutAt(i: usize): usize {
  scanCut = true;
  return i;
}

/**
 * Run the hash over [p + i, p + end) with mask m, starting from fp. Returns the index just past
 * the byte after which a cut falls (scanCut set; the hash is of no further use, as the next chunk
 * restarts it), or `end` when none does (scanCut clear, the hash left in scanFp).
 * A function of its own, not inlined into cdcChunk: its loop keeps every value in a register,
 * and, called once per chunk range, it runs the engine's optimised code as soon as that exists
 * (a call under way keeps the code it began with, and one cdcChunk call can cover megabytes).
 */
function scan(p: usize, i: usize, end: usize, fp: u64, m: u64, g: usize): usize {
  const m2 = m << 1;
  // Sixteen bytes a turn of the loop, as eight two-byte steps (header): s + a is twice the
  // one-byte fp after the step's first byte (tested with m << 1), s + a + G[second] the fp after
  // its second. The loop's own work (its bound test, the engine's stack check) is paid once per
  // sixteen bytes, the byte loads are constant offsets from one pointer, and the two words are
  // summed before fp is added, so the chain fp -> fp is one shift and one add a step.
  let q = p + i;
  const last = p + end; // differences only: p + end may be 2^32 (memory's end), which wraps to 0
  let s: u64, a: u64;
  while (last - q >= 16) {
    s = fp << 2;
    a = load<u64>(g + (<usize>load<u8>(q, 0) << 3), 2048); // G[byte] << 1 (the table's second half)
    if (((s + a) & m2) == 0) return cutAt(q - p + 1);
    fp = s + (a + load<u64>(g + (<usize>load<u8>(q, 1) << 3)));
    if ((fp & m) == 0) return cutAt(q - p + 2);
    s = fp << 2;
    a = load<u64>(g + (<usize>load<u8>(q, 2) << 3), 2048);
    if (((s + a) & m2) == 0) return cutAt(q - p + 3);
    fp = s + (a + load<u64>(g + (<usize>load<u8>(q, 3) << 3)));
    if ((fp & m) == 0) return cutAt(q - p + 4);
    s = fp << 2;
    a = load<u64>(g + (<usize>load<u8>(q, 4) << 3), 2048);
    if (((s + a) & m2) == 0) return cutAt(q - p + 5);
    fp = s + (a + load<u64>(g + (<usize>load<u8>(q, 5) << 3)));
    if ((fp & m) == 0) return cutAt(q - p + 6);
    s = fp << 2;
    a = load<u64>(g + (<usize>load<u8>(q, 6) << 3), 2048);
    if (((s + a) & m2) == 0) return cutAt(q - p + 7);
    fp = s + (a + load<u64>(g + (<usize>load<u8>(q, 7) << 3)));
    if ((fp & m) == 0) return cutAt(q - p + 8);
    s = fp << 2;
    a = load<u64>(g + (<usize>load<u8>(q, 8) << 3), 2048);
    if (((s + a) & m2) == 0) return cutAt(q - p + 9);
    fp = s + (a + load<u64>(g + (<usize>load<u8>(q, 9) << 3)));
    if ((fp & m) == 0) return cutAt(q - p + 10);
    s = fp << 2;
    a = load<u64>(g + (<usize>load<u8>(q, 10) << 3), 2048);
    if (((s + a) & m2) == 0) return cutAt(q - p + 11);
    fp = s + (a + load<u64>(g + (<usize>load<u8>(q, 11) << 3)));
    if ((fp & m) == 0) return cutAt(q - p + 12);
    s = fp << 2;
    a = load<u64>(g + (<usize>load<u8>(q, 12) << 3), 2048);
    if (((s + a) & m2) == 0) return cutAt(q - p + 13);
    fp = s + (a + load<u64>(g + (<usize>load<u8>(q, 13) << 3)));
    if ((fp & m) == 0) return cutAt(q - p + 14);
    s = fp << 2;
    a = load<u64>(g + (<usize>load<u8>(q, 14) << 3), 2048);
    if (((s + a) & m2) == 0) return cutAt(q - p + 15);
    fp = s + (a + load<u64>(g + (<usize>load<u8>(q, 15) << 3)));
    if ((fp & m) == 0) return cutAt(q - p + 16);
    q += 16;
  }
  // The last 0..15 bytes, a byte at a time.
  while (q != last) {
    fp = (fp << 1) + load<u64>(g + (<usize>load<u8>(q) << 3));
    q++;
    if ((fp & m) == 0) return cutAt(q - p);
  }
  scanFp = fp;
  scanCut = false;
  return end;
}

/**
 * Chunk `len` bytes at `ptr`, continuing the stream in the state record: writes the length of
 * every chunk that ends inside this input (u32 each) at outPtr, at most outCap of them, and
 * returns how many it wrote. Stops early only when outCap lengths are written; the state's
 * `consumed` then says how many input bytes were used (the caller passes the rest next). A chunk
 * still open at the end of the input is carried in the state (cdcFinish closes it).
 */
export function cdcChunk(st: usize, ptr: usize, len: u32, outPtr: usize, outCap: u32): u32 {
  let fp = load<u64>(st + ST_FP);
  let pos = <usize>load<u32>(st + ST_POS);
  const min = <usize>load<u32>(st + ST_MIN);
  const normal = <usize>load<u32>(st + ST_NORMAL);
  const max = <usize>load<u32>(st + ST_MAX);
  const g = <usize>load<u32>(st + ST_TABLE);
  const mS = load<u64>(st + ST_MASK_S);
  const mL = load<u64>(st + ST_MASK_L);
  let n: u32 = 0;
  let i: usize = 0; // input index
  const end = <usize>len;
  while (i < end && n < outCap) {
    // The chunk began `pos` bytes before input[i]; its byte k sits at input[i - pos + k].
    const base = i - pos; // wraps below 0 when the chunk began in an earlier buffer: only sums of it are used
    let k = pos;
    if (k < min) {
      // Skip to `min` without reading a byte (fp restarts there).
      const skip = min - k;
      if (end - i < skip) { pos += end - i; i = end; break; }
      i += skip;
      k = min;
      fp = 0;
    }
    let cut: usize = 0; // chunk length when a cut is found, 0 when the input ran out first
    if (k < normal) {
      const stop = base + normal < end ? base + normal : end;
      const j = scan(ptr, i, stop, fp, mS, g);
      fp = scanFp;
      if (scanCut) cut = j - base;
      i = j;
      k = i - base;
    }
    if (cut == 0 && i < end && k >= normal) {
      const stop = base + max < end ? base + max : end;
      const j = scan(ptr, i, stop, fp, mL, g);
      fp = scanFp;
      if (scanCut) cut = j - base;
      i = j;
      k = i - base;
    }
    if (cut == 0 && k >= max) cut = max;
    if (cut != 0) {
      store<u32>(outPtr + (<usize>n << 2), <u32>cut);
      n++;
      pos = 0;
      fp = 0;
    } else {
      pos = k;
    }
  }
  store<u64>(st + ST_FP, fp);
  store<u32>(st + ST_POS, <u32>pos);
  store<u32>(st + ST_CONSUMED, <u32>i);
  store<u64>(st + ST_TOTAL, load<u64>(st + ST_TOTAL) + <u64>i);
  store<u32>(st + ST_CHUNKS, load<u32>(st + ST_CHUNKS) + n);
  return n;
}

/**
 * End of stream: returns the length of the open chunk (0 when none) and resets the record for a
 * new stream (the configuration and table stay).
 */
export function cdcFinish(st: usize): u32 {
  const pos = load<u32>(st + ST_POS);
  store<u64>(st + ST_FP, 0);
  store<u32>(st + ST_POS, 0);
  store<u32>(st + ST_CONSUMED, 0);
  store<u64>(st + ST_TOTAL, 0);
  store<u32>(st + ST_CHUNKS, 0);
  return pos;
}

/**
 * Batch form: `count` {ptr u32, len u32} descriptors at descPtr, chunked in order as one stream
 * (the pieces of a scatter list, or the buffers of a file). Lengths go to outPtr as in cdcChunk;
 * returns how many were written. When outCap fills, the state's `consumed` holds the bytes used
 * of the descriptor at index (returned through cdcBatchStop) where it stopped.
 */
let batchStop: u32 = 0;
export function cdcChunkBatch(st: usize, descPtr: usize, count: u32, outPtr: usize, outCap: u32): u32 {
  let n: u32 = 0;
  batchStop = count;
  for (let d: u32 = 0; d < count; d++) {
    const dp = descPtr + (<usize>d << 3);
    const len = load<u32>(dp, 4);
    n += cdcChunk(st, <usize>load<u32>(dp), len, outPtr + (<usize>n << 2), outCap - n);
    if (load<u32>(st + ST_CONSUMED) < len) {
      batchStop = d;
      break;
    }
  }
  return n;
}

/** Index of the descriptor where the last cdcChunkBatch stopped (count when it used them all). */
export function cdcBatchStop(): u32 {
  return batchStop;
}

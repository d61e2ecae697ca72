// Object-sized buffers kept for the next transfer. A fresh Uint8Array of tens of MiB costs its
// page faults on first touch (the kernel maps and zeroes every page), more than the copies that
// fill it: a dedup receiver writes each byte of its object once, so that first touch would be
// most of its work. The receiver takes its object here; a caller that is done with an object
// (the file service, once the bytes are in the file) or with a basis gives it back.
//
// Bounded: at most MAX_KEPT buffers of at most MAX_BUFFER bytes each, dropped after IDLE_MS
// without a take. A taken buffer's bytes are whatever its last user left: every taker writes
// each byte before anyone reads it (the receiver delivers an object only once its chunks, which
// tile it, are all in; a basis is read into before its bytes count).

const MAX_KEPT = 2;
const MAX_BUFFER = 256 << 20;
const IDLE_MS = 5000;

const kept: ArrayBuffer[] = [];
/** Buffers takeBuffer handed out (a view of one may be shorter than the buffer). */
const handedOut = new WeakSet<ArrayBuffer>();
let idle: ReturnType<typeof setTimeout> | undefined;

function dropLater(): void {
  if (idle) clearTimeout(idle);
  idle = kept.length > 0 ? setTimeout(() => (kept.length = 0), IDLE_MS) : undefined;
  idle?.unref();
}

/** `n` bytes, from a kept buffer when one is large enough (the smallest such), else fresh. */
export function takeBuffer(n: number): Uint8Array {
  let best = -1;
  for (let i = 0; i < kept.length; i++) if (kept[i]!.byteLength >= n && (best < 0 || kept[i]!.byteLength < kept[best]!.byteLength)) best = i;
  if (best < 0) {
    const fresh = new Uint8Array(n);
    handedOut.add(fresh.buffer);
    return fresh;
  }
  const [buf] = kept.splice(best, 1);
  dropLater();
  return new Uint8Array(buf!, 0, n);
}

/**
 * Keep the memory of `bytes` for a later take. The caller gives up every view of it: the next
 * taker overwrites it. Only a buffer takeBuffer handed out, or one `bytes` covers whole (so
 * nothing else lives in it, as in a pooled Buffer); not shared memory, not past MAX_BUFFER.
 */
export function giveBack(bytes: Uint8Array | undefined): void {
  const buf = bytes?.buffer;
  if (!bytes || !(buf instanceof ArrayBuffer) || buf.byteLength === 0 || buf.byteLength > MAX_BUFFER || kept.includes(buf)) return;
  if (!handedOut.has(buf) && (bytes.byteOffset !== 0 || bytes.byteLength !== buf.byteLength)) return;
  handedOut.add(buf);
  if (kept.length >= MAX_KEPT) {
    // Keep the larger ones: they serve every smaller take as well.
    let small = 0;
    for (let i = 1; i < kept.length; i++) if (kept[i]!.byteLength < kept[small]!.byteLength) small = i;
    if (kept[small]!.byteLength >= buf.byteLength) return;
    kept.splice(small, 1);
  }
  kept.push(buf);
  dropLater();
}

/** Bytes kept now (tests). */
export function keptBytes(): number {
  let n = 0;
  for (const b of kept) n += b.byteLength;
  return n;
}

// Small byte buffers carved from shared 64 KiB chunks. A fresh `new Uint8Array(n)` above V8's
// on-heap limit (64 bytes) is a malloc'd, zero-filled backing store plus an ArrayBuffer, later
// swept by the GC: about ten times dearer than a view of a chunk, and the packer
// builds one such head per DATA payload (envelope, DDP header and the bytes of a short message).
// Chunks are never reused: a view keeps its chunk alive (the reliability layer holds a payload
// until it is acked) and the rest of the chunk stays zero, as a fresh array would be.
const CHUNK = 64 << 10;

export class ByteSlab {
  #chunk = new ArrayBuffer(CHUNK);
  #used = 0;

  /** n zeroed bytes (n > CHUNK / 8 gets an array of its own: no chunk is wasted on it). */
  take(n: number): Uint8Array {
    if (n > CHUNK >>> 3) return new Uint8Array(n);
    if (this.#used + n > CHUNK) {
      this.#chunk = new ArrayBuffer(CHUNK);
      this.#used = 0;
    }
    const v = new Uint8Array(this.#chunk, this.#used, n);
    this.#used = (this.#used + n + 7) & ~7;
    return v;
  }
}

// Writing a dedup transfer's object into its file while the object is still being assembled: the
// receiver reports the prefix that is final (verified and in place, dedup/endpoint.ts
// DedupReceiverInit.onProgress), and the writer writes it out in pieces, one write at a time,
// overlapped with the transfer — as a plain put writes each piece as it arrives — so that once
// the object is complete only its tail is left to write.

/** Smallest piece written while the object is incomplete (fewer, larger writes). */
const MIN_PIECE = 1 << 20;
/** Largest piece per write call (the next starts as soon as it is done). */
const MAX_PIECE = 8 << 20;
/** Writes at once for what is left when the object completes. */
const TAIL_WRITES = 4;

export class PrefixWriter {
  readonly #write: (from: Uint8Array, at: number) => Promise<unknown>;
  #bytes: Uint8Array | undefined;
  #target = 0;
  #written = 0;
  #running: Promise<void> | undefined;
  #failed: unknown;
  #stopped = false;

  /** `write` writes all of `from` at file offset `at`. */
  constructor(write: (from: Uint8Array, at: number) => Promise<unknown>) {
    this.#write = write;
  }

  /** The receiver's onProgress: the first `done` bytes of `bytes` are final. */
  readonly progress = (bytes: Uint8Array, done: number, moved?: boolean): void => {
    if (this.#stopped || this.#failed) return;
    if (moved) this.#bytes = bytes; // the same object in a new place: what is written stays written
    else if (this.#bytes !== bytes) {
      // Another object (a transfer that failed and a new one): start over.
      this.#bytes = bytes;
      this.#written = 0;
    }
    this.#target = Math.min(done, bytes.length);
    this.#kick(false);
  };

  #kick(all: boolean): void {
    if (this.#running || this.#target - this.#written < (all ? 1 : MIN_PIECE)) return;
    this.#running = this.#drain(all).finally(() => (this.#running = undefined));
  }

  async #drain(all: boolean): Promise<void> {
    try {
      while (!this.#stopped && this.#bytes && this.#target - this.#written >= (all ? 1 : MIN_PIECE)) {
        const at = this.#written;
        const end = Math.min(this.#target, at + MAX_PIECE);
        await this.#write(this.#bytes.subarray(at, end), at);
        this.#written = end;
      }
    } catch (e) {
      this.#failed = e;
    }
  }

  /** The object is complete: write what is not written yet; resolves once all of it is. */
  async finish(bytes: Uint8Array): Promise<void> {
    while (this.#running) await this.#running;
    if (this.#failed) throw this.#failed;
    if (this.#bytes !== bytes) {
      this.#bytes = bytes;
      this.#written = 0;
    }
    this.#target = bytes.length;
    // The tail is on the transfer's critical path (the peer waits for the answer): written by up
    // to TAIL_WRITES writes at once (each a call on the thread pool), in pieces of at most MAX_PIECE.
    if (this.#written < bytes.length && !this.#stopped) {
      const piece = Math.min(MAX_PIECE, Math.max(MIN_PIECE, Math.ceil((bytes.length - this.#written) / TAIL_WRITES)));
      let next = this.#written;
      const one = async (): Promise<void> => {
        try {
          while (next < bytes.length && !this.#stopped && !this.#failed) {
            const at = next;
            next = Math.min(bytes.length, at + piece);
            await this.#write(bytes.subarray(at, next), at);
          }
        } catch (e) {
          this.#failed ??= e;
        }
      };
      const all = Promise.all(Array.from({ length: TAIL_WRITES }, one)).then(() => {
        if (!this.#failed && !this.#stopped) this.#written = bytes.length;
      });
      // stop() waits for these writes as for any other.
      this.#running = all.finally(() => (this.#running = undefined));
      await this.#running;
    }
    if (this.#failed) throw this.#failed;
  }

  /** Write nothing more; resolves once no write is in flight (then the object may be reused). */
  async stop(): Promise<void> {
    this.#stopped = true;
    while (this.#running) await this.#running.catch(() => undefined);
  }
}

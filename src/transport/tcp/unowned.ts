// The ULPDUs of an established MPA connection nobody has taken yet (MpaConnection.onUlpdus not
// called): a cm listener's accept hands the connection to the application thread, whose
// qp.connect takes it, so with a NIC thread the gap lasts as long as the application thread is
// busy. Kept as copies up to UNOWNED_MAX_BYTES, past which the socket is paused until the owner
// comes; an owner that never comes closes the connection at the handshake's deadline.
import type { Socket } from 'node:net';
import type { RxUlpdu } from './fpdu.js';

/**
 * Bytes kept for a connection nobody took. Unbounded, a peer that streamed while the application
 * thread was busy grew the NIC thread's memory by what it sent (332–399 MB in 1.5 s; found by
 * an audit).
 */
const UNOWNED_MAX_BYTES = 1 << 20;
/**
 * What one kept ULPDU costs besides its bytes (its copy's typed array and buffer objects, about
 * 130 bytes of heap for a small one), charged against the bound too. Counting the ULPDU bytes
 * alone, a peer sending empty FPDUs (8 bytes each on the wire) made a connection keep ~30 times
 * what it sent (500 MB for 16 MB) without ever reaching the bound (found by an audit).
 */
const ENTRY_COST = 128;

export class UnownedUlpdus {
  #queued: Uint8Array[] = [];
  #bytes = 0;
  /** The socket was paused for them (resumed by take()). */
  #held = false;
  #timer: NodeJS.Timeout | undefined;

  constructor(private readonly socket: Socket) {}

  /** Copies of `batch` (views into `u8`), kept; the socket pauses past UNOWNED_MAX_BYTES. */
  keep(batch: readonly RxUlpdu[], u8: Uint8Array): void {
    for (const u of batch) {
      this.#queued.push(u8.slice(u.ptr, u.ptr + u.len));
      this.#bytes += u.len + ENTRY_COST;
    }
    if (this.#bytes >= UNOWNED_MAX_BYTES && !this.#held) {
      this.#held = true;
      this.socket.pause();
    }
  }

  /** The owner came: what was kept, oldest first; the socket reads on (`open`: still established). */
  take(open: boolean): Uint8Array[] {
    this.#stopTimer();
    if (this.#held) {
      this.#held = false;
      if (open) this.socket.resume();
    }
    const q = this.#queued;
    this.#queued = [];
    this.#bytes = 0;
    return q;
  }

  /** No owner within `ms`: `expire()` (it closes the connection). Once; take() or clear() stops it. */
  awaitOwner(ms: number, expire: () => void): void {
    if (this.#timer !== undefined) return;
    this.#timer = setTimeout(() => {
      this.#timer = undefined;
      expire();
    }, ms);
    this.#timer.unref();
  }

  /** The connection closed: nothing is kept. */
  clear(): void {
    this.#stopTimer();
    this.#queued = [];
    this.#bytes = 0;
  }

  #stopTimer(): void {
    if (this.#timer !== undefined) clearTimeout(this.#timer);
    this.#timer = undefined;
  }
}

// The segment offsets of one incoming message that have been placed (the duplicate check).
// Nearly every message is one segment — a small Send, a Write's one datagram, every control
// message — and a Set per message was the costliest allocation of a ping-pong hop; the first
// offset lives in a field and a Set appears only with a second one.
export class Offsets {
  #first = -1;
  #more: Set<number> | undefined;

  has(off: number): boolean {
    return off === this.#first || (this.#more !== undefined && this.#more.has(off));
  }

  /** `off` is a segment's offset in its message: a non-negative integer. */
  add(off: number): void {
    if (this.#first < 0) this.#first = off;
    else if (off !== this.#first) (this.#more ??= new Set()).add(off);
  }
}

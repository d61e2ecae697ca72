import type * as net from 'node:net';

/** How long a refused socket may stay open for its refusal to be read. */
export const REFUSED_LINGER_MS = 250;

/**
 * Send a refusal on a socket we will not serve, then let it go: what the peer sends meanwhile is
 * read and dropped (closing over unread bytes would reset the connection, and the refusal with
 * it), and the socket is destroyed after a short linger if the peer does not close first. Used
 * for tcp's MPA reject past a cap and the file server's Status(SessionLimit) pipe refusal.
 */
export function refuseAndLinger(s: net.Socket, refusal: Uint8Array): void {
  const t = setTimeout(() => s.destroy(), REFUSED_LINGER_MS);
  t.unref();
  s.once('close', () => clearTimeout(t));
  s.on('error', () => s.destroy());
  s.resume();
  s.end(refusal);
}

/**
 * Refused sockets lingering at once (each for up to REFUSED_LINGER_MS), per listener. The linger
 * is bounded in time, not in number: a stranger connecting as fast as it can (from one host past
 * its cap, or from many evicting each other) kept rate × 250 ms sockets open — 755 pipes against
 * a maxPipes of 256 from one process on loopback (test/attack/files-linger-flood.test.ts). Past
 * the bound a refusal is not written: the socket is destroyed at once (`cut`).
 */
export const REFUSED_LINGER_MAX = 64;

export class Lingering {
  #n = 0;
  /** Refusals past the bound: destroyed at once, untold. */
  cut = 0;

  constructor(readonly max = REFUSED_LINGER_MAX) {}

  /** Sockets lingering now (until their 'close'). */
  get size(): number {
    return this.#n;
  }

  /** refuseAndLinger `s` while fewer than `max` linger (true); else destroy it at once, counted (false). */
  refuse(s: net.Socket, refusal: Uint8Array): boolean {
    // Gone already: nothing to say, and no 'close' may come to count it out.
    if (s.destroyed && s.closed) return true;
    if (this.#n >= this.max) {
      this.cut++;
      s.destroy();
      return false;
    }
    this.#n++;
    s.once('close', () => this.#n--);
    refuseAndLinger(s, refusal);
    return true;
  }
}

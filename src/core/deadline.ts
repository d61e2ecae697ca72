// A deadline on a wait for a peer. Timers run before I/O in an event-loop turn, so when this
// process's own loop was blocked past the deadline, the timer fires first while what the peer
// sent in time still sits in the socket behind it. A deadline that fires late therefore gives
// the I/O that turn brought a short grace of real time before it expires the wait: the peer
// is not blamed for this process's stall.

/**
 * The longest wait a timer takes: setTimeout runs a longer one (Infinity too) after 1 ms. A
 * caller's timeoutMs past it (no deadline asked for) waits this long, ~24.8 days.
 */
export const MAX_TIMER_MS = 2 ** 31 - 1;

/** `ms` as a timer can wait it. */
export const timerMs = (ms: number): number => Math.min(ms, MAX_TIMER_MS);

/** Lateness past which a firing timer is taken as a stall of this process, not of the peer. */
const STALLED_MS = 100;
/** Real time the I/O gets after such a stall before the wait expires. */
const GRACE_MS = 100;

/** Calls `expire` once `ms` have passed (with the grace above after a stall); clear() cancels it. */
export function peerDeadline(ms: number, expire: () => void): { clear(): void } {
  const due = performance.now() + ms;
  let t: ReturnType<typeof setTimeout> | undefined;
  const fire = (graced: boolean): void => {
    if (!graced && performance.now() - due > STALLED_MS) {
      t = setTimeout(() => fire(true), GRACE_MS);
      return;
    }
    t = undefined;
    expire();
  };
  t = setTimeout(() => fire(false), ms);
  return {
    clear: () => {
      if (t !== undefined) clearTimeout(t);
      t = undefined;
    },
  };
}

// The socket shell's deadlines when no NIC driver keeps them (a bare UdpSockets: the shell's
// tests, the udp benchmark, a test's peer process). It is an owner like the driver, plugged
// into the same seam (UdpHandlers.onTimerChanged): one node timer at pollTimeout(), and
// handleTimeout() when it fires, so the shell itself keeps no timer.
//
// Left armed when the deadline moves later (handleTimeout re-checks when it fires), cleared
// when nothing is due at all: a timer left running through idle periods woke the sleeping
// process during a ping-pong, dearer than a timer-list insert and removal per round trip.
// Only outstanding work keeps the process alive; idle reclaim does not.

/** What the timer needs of the shell (./socket.ts UdpSockets). */
export interface TimedShell {
  /** When handleTimeout is next due (Infinity: nothing is; also once closed). */
  pollTimeout(): number;
  handleTimeout(now: number): void;
  /** Outstanding work, not just idle reclaim. */
  readonly busy: boolean;
}

/** Returns the shell's onTimerChanged. */
export function standaloneTimer(shell: TimedShell, now: () => number): () => void {
  let timer: NodeJS.Timeout | undefined;
  let timerAt = Infinity;
  const fire = (): void => {
    timer = undefined;
    timerAt = Infinity;
    shell.handleTimeout(now());
  };
  return () => {
    const at = shell.pollTimeout();
    if (at === Infinity) {
      if (timer !== undefined) clearTimeout(timer);
      timer = undefined;
      timerAt = Infinity;
      return;
    }
    if (timer !== undefined && timerAt <= at) {
      if (shell.busy) timer.ref();
      else timer.unref();
      return;
    }
    if (timer !== undefined) clearTimeout(timer);
    timerAt = at;
    timer = setTimeout(fire, Math.max(0, at - now()));
    if (!shell.busy) timer.unref();
  };
}

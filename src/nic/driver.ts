// The driver of the software NIC: one RDMAP engine and one link, the same loop on whatever
// thread runs them. A step takes the work or the link event that started it, feeds the engine
// with the time, collects what the engine emits — frames, handed to the link in posting order,
// and events, handed to the shell (the verbs device) — and arms one timer at the earlier of the
// engine's and the link's deadlines (quinn's Endpoint/Connection split: neither owns a clock).
// The link reports what its sockets brought as LinkEvents, and the driver is their only sink;
// every engine call that can emit output (work, arrivals, timeouts) runs as a driver step.
import { performance } from 'node:perf_hooks';
import { addressKey, type DeviceAddress } from '../core/address.js';
import { ownsPieces } from '../core/detach.js';
import { QpState } from '../core/enums.js';
import type { Inbound } from '../core/frame.js';
import type { Link, LinkEvents, QpDownCause } from '../core/link.js';
import type { PeerProfile } from '../core/peer.js';
import type { RdmapEngine } from '../rdmap/engine.js';
import type { EngineEvent } from '../rdmap/events.js';

/** What the driver tells its shell, in the order it happened. */
export type NicEvent =
  | Exclude<EngineEvent, { kind: 'qpError' }>
  /**
   * QP `qpn` entered ERROR. `cause`: the link's word when its connection went down; `established`:
   * it had reached RTS (its connection is now over).
   */
  | {
    kind: 'qpError'; qpn: number; fatal: boolean; cause?: QpDownCause; established: boolean;
    /**
     * From before a reset the application made since (a NIC thread's event, which crosses to
     * the application after later requests were made): told, but it fails no connect made after.
     */
    stale?: boolean;
    /** A NIC thread's count of the QP's resets when it happened (what `stale` is decided by). */
    resets?: number;
  }
  /** A link lost `peer` for good, before the engine fails what depended on it. */
  | { kind: 'peerLost'; peer: DeviceAddress }
  /** A connection for `qpn` could not be made: `error` says why (before the engine hears of it). */
  | { kind: 'connectFailed'; qpn: number; error: Error };

/** A timer with nothing left to time is left to run out when it is due this far (ms) ahead or more (#arm). */
const LAZY_CANCEL_MS = 1000;

/** A timer the clock armed: `hold` says whether it keeps the process alive. */
export interface NicTimer {
  hold(yes: boolean): void;
  cancel(): void;
}

/**
 * Where the driver reads the time and arms its one timer: the real clock by default; a
 * simulation gives its own (virtual time, no sleeps).
 */
export interface NicClock {
  now(): number;
  timer(at: number, fire: () => void, hold: boolean): NicTimer;
}

/** A node timer (a class: no closure pair per arming, once or twice per round trip). */
class NodeTimer implements NicTimer {
  readonly #t: NodeJS.Timeout;
  constructor(at: number, fire: () => void, hold: boolean) {
    this.#t = setTimeout(fire, Math.max(0, at - performance.now()));
    if (!hold) this.#t.unref();
  }

  hold(yes: boolean): void {
    if (yes) this.#t.ref();
    else this.#t.unref();
  }

  cancel(): void {
    clearTimeout(this.#t);
  }
}

/** performance.now() and one node timer. */
export const realClock: NicClock = {
  now: () => performance.now(),
  timer: (at, fire, hold) => new NodeTimer(at, fire, hold),
};

export interface NicShell {
  /** Called inside the step that produced `ev`; may start another step (re-entrant). */
  onEvent(ev: NicEvent): void;
  /** After each step's output went out (a NIC thread publishes QP state and completions here). */
  afterStep?(): void;
}

export class NicDriver implements LinkEvents {
  readonly engine: RdmapEngine;
  readonly link: Link;
  readonly #shell: NicShell;
  /** rc QPs that reached RTS (the link keeps probing their peers; their ERROR is a disconnect). */
  readonly #established = new Set<number>();
  /** The link's word on a QP going down, while the engine step it started runs. */
  readonly #downCause = new Map<number, QpDownCause>();
  readonly #clock: NicClock;
  #timer?: NicTimer;
  #timerAt = Infinity;
  /**
   * The engine's deadline as of its last step, and the link's as of its last report
   * (timerChanged): each changes only then, so neither is asked again on the other's account.
   */
  #engineAt = Infinity;
  #linkAt = Infinity;
  #linkHolds = false;
  #stopped = false;

  constructor(engine: RdmapEngine, link: Link, shell: NicShell, clock: NicClock = realClock) {
    this.engine = engine;
    this.link = link;
    this.#shell = shell;
    this.#clock = clock;
    link.start(this);
  }

  /** The driver's clock. */
  now(): number {
    return this.#clock.now();
  }

  /** One step at the current time: `work` feeds the engine, then its output goes where it belongs. */
  run(work: (now: number) => void): void {
    this.step(this.#clock.now(), work);
  }

  step(now: number, work?: (now: number) => void): void {
    try {
      work?.(now);
    } finally {
      // What the work gave the engine before it threw (a list of posts refused part-way: those
      // before the bad one stay posted, as ibverbs' bad_wr) leaves now, not at some later step.
      this.#flush(now);
    }
  }

  /** No more steps from the link or the timer (the device is closing); the link stays open. */
  stop(): void {
    this.#stopped = true;
    this.#timer?.cancel();
    this.#timer = undefined;
  }

  get stopped(): boolean {
    return this.#stopped;
  }

  // ---- LinkEvents: what the sockets brought (bound: links keep them as callbacks) ----------

  readonly frames = (batch: Inbound[]): void => {
    if (this.#stopped) return;
    // A step written out: no closure per batch on the receive path.
    const now = this.#clock.now();
    this.engine.handleFrames(batch, now);
    this.#flush(now);
  };

  readonly peerLost = (peer: DeviceAddress): void => {
    if (this.#stopped) return;
    this.#shell.onEvent({ kind: 'peerLost', peer });
    // The rc QPs it fails were connected to a peer that stopped answering: cause 'lost', as tcp says.
    const key = addressKey(peer);
    const lost: number[] = [];
    for (const qpn of this.#established) if (this.engine.qps.get(qpn)?.flow?.peerKey === key) lost.push(qpn);
    for (const qpn of lost) this.#downCause.set(qpn, 'lost');
    this.run((now) => this.engine.handlePeerLost(peer, now));
    for (const qpn of lost) this.#downCause.delete(qpn);
  };

  /** udp keeps probing an idle peer only while an rc QP here is connected to it (RTR/RTS/SQD). */
  readonly keepsPeer = (peer: DeviceAddress): boolean => {
    if (this.#stopped) return false;
    const key = addressKey(peer);
    for (const qpn of this.#established) {
      const qp = this.engine.qps.get(qpn);
      if (qp?.type === 'rc' && qp.flow?.peerKey === key && qp.state !== QpState.Error && qp.state !== QpState.Reset) return true;
    }
    return false;
  };

  readonly qpUp = (qpn: number, profile: PeerProfile, ord?: number): void => {
    if (!this.#stopped) this.run((now) => this.engine.handleLinkUp(qpn, profile, now, ord));
  };

  readonly qpDown = (qpn: number, cause: QpDownCause, error?: Error): void => {
    if (this.#stopped) return;
    // A connect the link could not make fails with the link's reason (refused, host not
    // found), not the generic 'QP entered ERROR' the engine's qpError would give.
    if (error instanceof Error) this.#shell.onEvent({ kind: 'connectFailed', qpn, error });
    this.#downCause.set(qpn, cause);
    this.run((now) => this.engine.handleLinkDown(qpn, cause, now));
    this.#downCause.delete(qpn);
  };

  /** A peer without acks: the kernel took QP `qpn`'s messages up to `ssn` (its Writes and Sends complete). */
  readonly written = (qpn: number, ssn: number): void => {
    if (!this.#stopped) this.run((now) => this.engine.handleWritten(qpn, ssn, now));
  };

  /** The link's own deadline may be earlier now (it sent or received on its own schedule). */
  readonly timerChanged = (): void => {
    if (this.#stopped) return;
    this.#linkAt = this.link.pollTimeout?.() ?? Infinity;
    this.#linkHolds = this.link.busy === true;
    this.#arm(this.#clock.now());
  };

  // ---- output -------------------------------------------------------------------------------

  /** `now`: the step's time (the timer is armed from it: one clock read per step). */
  #flush(now: number): void {
    const engine = this.engine;
    for (let out = engine.pollTransmit(); out.length > 0; out = engine.pollTransmit()) this.link.transmit(out);
    // Flushed work is the caller's again once its completion is seen (after this step): what
    // the link still holds of its bytes becomes copies first. Views the system's send queue
    // holds cannot be: their regions are marked, and device memory waits for that queue when
    // deregistered (./region-fence.ts); a buffer the caller rewrites cannot wait.
    const flushed = engine.takeFlushed();
    if (flushed !== undefined) {
      const owns = ownsPieces(flushed);
      engine.detach(owns);
      this.link.detach?.(owns);
    }
    for (let ev = engine.pollEvent(); ev !== undefined; ev = engine.pollEvent()) this.#onEngineEvent(ev);
    this.#engineAt = engine.pollTimeout() ?? Infinity;
    if (!this.#stopped) this.#arm(now);
    this.#shell.afterStep?.();
  }

  #onEngineEvent(ev: EngineEvent): void {
    switch (ev.kind) {
      case 'connected':
        this.#established.add(ev.qpn);
        this.#shell.onEvent(ev);
        return;
      case 'qpError': {
        // After the frames above (a Terminate, if any) were handed over: nothing follows them.
        this.link.connections?.closeQp(ev.qpn);
        const cause = this.#downCause.get(ev.qpn) ?? ev.cause;
        const established = this.#established.delete(ev.qpn);
        this.#shell.onEvent({ kind: 'qpError', qpn: ev.qpn, fatal: ev.fatal, established, ...(cause ? { cause } : {}) });
        return;
      }
      default:
        this.#shell.onEvent(ev);
    }
  }

  // ---- the one timer ------------------------------------------------------------------------

  // Left armed when the next deadline moves later (the handler re-checks when it fires).
  // When nothing is due at all, a timer due soon is cleared (left running, it woke the sleeping
  // process during a ping-pong for nothing); one due at least LAZY_CANCEL_MS away is only
  // released (unref) and left to run out: a request's watchdog, seconds long, is armed when
  // it goes out and moot when its answer comes back, and clearing it there made a timer-list
  // insert and removal per message, against one spurious wake per watchdog period.
  // Only the engine's timers and a link with outstanding work keep the process alive.
  #arm(now: number): void {
    const at = Math.min(this.#engineAt, this.#linkAt);
    const hold = this.#engineAt !== Infinity || this.#linkHolds;
    if (at === Infinity) {
      if (this.#timer !== undefined && this.#timerAt - now >= LAZY_CANCEL_MS) {
        this.#timer.hold(false);
        return;
      }
      this.#timer?.cancel();
      this.#timer = undefined;
      this.#timerAt = Infinity;
      return;
    }
    if (this.#timer !== undefined && this.#timerAt <= at) {
      this.#timer.hold(hold);
      return;
    }
    this.#timer?.cancel();
    this.#timerAt = at;
    this.#timer = this.#clock.timer(Math.max(at, now), this.#onTimer, hold);
  }

  #onTimer = (): void => {
    this.#timer = undefined;
    this.#timerAt = Infinity;
    if (this.#stopped) return;
    const now = this.#clock.now();
    // The link's timeout first: its retransmissions and failures (peerLost) reach the engine
    // in steps of their own before the engine's watchdog looks at the same peer.
    this.#linkAt = this.link.pollTimeout?.() ?? Infinity;
    if (this.#linkAt <= now) this.link.handleTimeout?.(now);
    const e = this.engine.pollTimeout();
    if (e !== undefined && e <= now) {
      this.step(now, (t) => this.engine.handleTimeout(t));
      return;
    }
    // Woken early (a timer's granularity) or for nothing left: wait for what is due now.
    this.#engineAt = e ?? Infinity;
    this.#linkAt = this.link.pollTimeout?.() ?? Infinity;
    this.#arm(now);
  };
}

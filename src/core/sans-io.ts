// The one shape of sabre's protocol cores (the RDMAP engine, the channel core, the file service's
// client, server and pipe handshakes, the CM exchange). A core is a pure state machine: it owns no
// socket, QP, timer or clock. Its shell — the code that does own them — drives it like this:
//
//   core.handleX(input, now)      something happened outside (a completion, bytes, a failure);
//                                 every input carries the time, in milliseconds
//   core.send / close / request   what the application asks (plain verbs, as postSend is)
//   core.pollAction()             the next thing to do, tagged `kind`, in the order the core made
//                                 them; undefined when there is nothing left. Poll until undefined
//                                 after every input: carrying one out may feed the core again,
//                                 which only queues more (the shell never re-enters itself).
//   core.pollTimeout()            when handleTimeout is next due (undefined: no timer)
//   core.handleTimeout(now)       that time came
//
// A core whose outputs fall into kinds the shell handles apart may split its poll by kind (the
// engine: pollTransmit for frames, pollEvent for what happened); one queue where their relative
// order matters (a channel posts its work requests in exactly the order the core made them).
// Because nothing inside reads a clock or waits, a test (or a fuzzer) drives a core with a
// virtual clock and a simulated peer, deterministically, with no sleeps.

/** An output of a core: a tagged union on `kind`. */
export interface Tagged {
  readonly kind: string;
}

/** Outputs pulled one at a time. */
export interface PollsActions<A extends Tagged> {
  pollAction(): A | undefined;
}

/** A core with deadlines of its own. */
export interface HasTimeout {
  /** When handleTimeout is next due; undefined: no timer. */
  pollTimeout(): number | undefined;
  handleTimeout(now: number): void;
}

/**
 * The queue a core keeps its outputs in: push while handling an input, poll from the shell. A
 * head index rather than Array.shift, so draining n outputs costs O(n) and no array per step.
 */
export class Outbox<A> {
  #q: (A | undefined)[] = [];
  #head = 0;

  push(a: A): void {
    this.#q.push(a);
  }

  /** Put `a` before everything queued (it must be done first). */
  unshift(a: A): void {
    if (this.#head > 0) this.#q[--this.#head] = a;
    else this.#q.unshift(a);
  }

  poll(): A | undefined {
    const q = this.#q;
    if (this.#head === q.length) return undefined;
    const a = q[this.#head];
    q[this.#head++] = undefined;
    if (this.#head === q.length) {
      q.length = 0;
      this.#head = 0;
    }
    return a;
  }

  get length(): number {
    return this.#q.length - this.#head;
  }

  /** What is queued, oldest first, without taking it (tests and stats). */
  peekAll(): A[] {
    return this.#q.slice(this.#head) as A[];
  }

  clear(): void {
    this.#q.length = 0;
    this.#head = 0;
  }
}

/** Every output a core has now, in order (tests and fuzzers; a shell acts on each as it polls). */
export function pollAll<A extends Tagged>(core: PollsActions<A>): A[] {
  const out: A[] = [];
  for (let a = core.pollAction(); a !== undefined; a = core.pollAction()) out.push(a);
  return out;
}

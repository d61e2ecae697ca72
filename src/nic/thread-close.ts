// The calls a closing device makes to a NIC thread before its close (its QPs' destroys, then
// stop, then what the features' close hooks let go of: regions, CQs), sent with the close and
// awaited rather than blocked on. A NIC thread that was just
// ended (terminate(): no handler of its own says so) is seen to be gone only by its 'exit'
// event, which this thread's event loop cannot take while it blocks in a mailbox call: a device
// closed right after would wait out the mailbox's deadline in its first destroy. Awaited, the
// exit comes in between, the mailbox fails the call at once (markMailboxGone), and the close
// flushes what was posted as for any NIC that is gone.
import { type MailboxClient, wasUnanswered } from './mailbox.js';

/** At most this many calls in one mailbox request (each is a few dozen bytes of its area). */
const PER_BATCH = 1024;

export class CloseCalls {
  #calls: Array<{ op: string; args: Record<string, unknown> }> = [];

  add(op: string, args: Record<string, unknown>): void {
    this.#calls.push({ op, args });
  }

  /**
   * Send them in order, in batches (the NIC thread runs every call of a batch and then throws
   * the first error one threw). Rejects at once on a call nobody answered; a refused call
   * rejects once every batch was sent.
   */
  async send(mailbox: MailboxClient, timeoutMs: number): Promise<void> {
    const calls = this.#calls;
    this.#calls = [];
    let first: unknown;
    for (let i = 0; i < calls.length; i += PER_BATCH) {
      // A batch with a refused call still leaves the later batches (and the stop) to go.
      await mailbox.callAsync('batch', { calls: calls.slice(i, i + PER_BATCH) }, timeoutMs).catch((e: unknown) => {
        if (wasUnanswered(e)) throw e;
        first ??= e;
      });
    }
    if (first !== undefined) throw first;
  }
}

// Frames a link received wait here for the device's next engine step. A link collects what
// arrives in one event-loop turn into one batch — one engine step, one place() call — and
// hands it over after the turn's synchronous work, as a promise job (./job.ts), or earlier when
// it knows the turn's frames are all in (drain()).
import type { DeviceAddress } from '../core/address.js';
import { detachFrame, type Owns } from '../core/detach.js';
import type { Frame, Inbound } from '../core/frame.js';
import { job } from './job.js';

export class Inbox {
  #batch: Inbound[] = [];
  #scheduled = false;
  readonly #deliver: (batch: Inbound[]) => void;
  readonly #after: (() => void) | undefined;

  /** `deliver` gets each non-empty batch; `after` runs after every drain (a link releasing what the batch held). */
  constructor(deliver: (batch: Inbound[]) => void, after?: () => void) {
    this.#deliver = deliver;
    this.#after = after;
  }

  push(from: DeviceAddress, frame: Frame): void {
    this.#batch.push({ from, frame });
    this.schedule();
  }

  /** Make sure a drain follows (also when nothing was pushed: `after` still has to run). */
  schedule(): void {
    if (this.#scheduled) return;
    this.#scheduled = true;
    job(this.drain);
  }

  /** Hand the batch over now; the scheduled job then finds nothing to do. */
  drain = (): void => {
    if (!this.#scheduled) return;
    this.#scheduled = false;
    const b = this.#batch;
    this.#batch = [];
    if (b.length > 0) this.#deliver(b);
    this.#after?.();
  };

  /** Memory is about to be reused: waiting frames copy the views `owns` claims (core/detach.ts). */
  detach(owns: Owns): void {
    for (const b of this.#batch) detachFrame(b.frame, owns);
  }

  /** Drop what waits (the link closed). */
  clear(): void {
    this.#batch = [];
  }
}

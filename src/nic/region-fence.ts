// The local half of the deregister fence: when a deregistered region's memory may go back to
// whoever takes it next. Send work goes out as views of its regions (no copy on the way out),
// and a link keeps them until the peer has them. So memory the device gives back waits until no
// queued send names it (MrRecord.busy), and, if work that named it was flushed (`unsettled`),
// until the engine and the link have copied what they still hold of it (Link.detach); views
// the system's send queue holds cannot be copied, and the memory waits for that queue too.
// Memory the registrant takes back at once (a caller's buffer, a view its registrant frees)
// cannot wait: work still queued gets a copy of the region's bytes, what is held goes as copies.
import { copyOf, ownsShared, ownsViewsOf, type Owns } from '../core/detach.js';
import type { Link } from '../core/link.js';
import type { RdmapEngine } from '../rdmap/engine.js';
import type { EngineMemory, MrRecord } from '../rdmap/memory.js';

/** How often memory waiting for the system's send queue asks again (about a millisecond apart) before it is kept for good rather than handed on. */
const RETRIES = 10_000;

export class RegionFence {
  readonly #engine: RdmapEngine;
  readonly #link: Link;
  readonly #memory: EngineMemory;
  /** Memory waiting for the system's send queue: one list, one timer, asked together; each counts its own asks. */
  #waiting: Array<{ owns: Owns; free: () => void; tries: number }> = [];
  #timer: NodeJS.Timeout | undefined;

  constructor(engine: RdmapEngine, link: Link, memory: EngineMemory) {
    this.#engine = engine;
    this.#link = link;
    this.#memory = memory;
  }

  /**
   * `rec` is deregistered. `free` gives its memory back once nothing can read it; undefined:
   * the registrant has it back now.
   */
  letGo(rec: MrRecord, free: (() => void) | undefined): void {
    if (free === undefined) {
      if (!rec.busy && !rec.unsettled) return;
      const owns = this.#owns(rec);
      // Work still queued reads its bytes through rec when it is cut.
      if (rec.busy) rec.ext = copyOf(rec.ext ?? this.#memory.view(rec, rec.addr, rec.length));
      this.#detach(owns);
      return;
    }
    if (rec.busy) rec.onIdle = () => this.#settle(rec, free);
    else this.#settle(rec, free);
  }

  #settle(rec: MrRecord, free: () => void): void {
    if (!rec.unsettled) {
      free();
      return;
    }
    const owns = this.#owns(rec);
    if (this.#detach(owns)) {
      free();
      return;
    }
    this.#waiting.push({ owns, free, tries: 0 });
    this.#arm();
  }

  /** The engine's frames not yet handed over or kept for a retry, then the link's: true once nothing can read the old views. */
  #detach(owns: Owns): boolean {
    this.#engine.detach(owns);
    return this.#link.detach?.(owns) ?? true;
  }

  #owns(rec: MrRecord): Owns {
    return rec.ext ? ownsViewsOf(rec.ext) : ownsShared(rec.addr, rec.addr + rec.length);
  }

  #arm(): void {
    if (this.#timer !== undefined) return;
    this.#timer = setTimeout(this.#retry, 1);
    this.#timer.unref();
  }

  #retry = (): void => {
    this.#timer = undefined;
    const list = this.#waiting;
    this.#waiting = [];
    if (this.#detach((v) => list.some((w) => w.owns(v)))) {
      for (const w of list) w.free();
      return;
    }
    for (const w of list) {
      // A queue that never drained: the memory stays the device's, unused, rather than leak.
      if (++w.tries >= RETRIES) this.#engine.counters.regionsKept++;
      else this.#waiting.push(w);
    }
    if (this.#waiting.length > 0) this.#arm();
  };
}

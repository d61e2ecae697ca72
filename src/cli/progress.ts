// A live status line for long runs (stress, perf -a sweeps and -D runs): redrawn in place on a
// terminal at most every `intervalMs`, and nothing at all when stderr is a pipe or a file, so
// logs and `--json` consumers never see it.

export interface ProgressSink {
  readonly isTTY?: boolean;
  write(s: string): unknown;
}

export class Progress {
  #last = 0;
  #shown = false;
  readonly enabled: boolean;

  constructor(
    private readonly sink: ProgressSink = process.stderr,
    private readonly intervalMs = 250,
    private readonly now: () => number = () => performance.now(),
    enabled?: boolean,
  ) {
    this.enabled = enabled ?? sink.isTTY === true;
  }

  /** Show `line` (throttled unless `force`). */
  update(line: string, force = false): void {
    if (!this.enabled) return;
    const t = this.now();
    if (!force && this.#shown && t - this.#last < this.intervalMs) return;
    this.#last = t;
    this.#shown = true;
    // \r to the line start, the text, then clear to the end of the line (ESC [ K).
    this.sink.write(`\r${line}\x1b[K`);
  }

  /** Erase the line so the next output starts clean. */
  done(): void {
    if (!this.enabled || !this.#shown) return;
    this.sink.write('\r\x1b[K');
    this.#shown = false;
  }
}

// The completion a perf side reads (what poll returns, as perf uses it) and the observers that
// see each batch reaped: declared apart from completions.ts, which reaps for a side, so a side
// (side.ts) can hold its observer without importing the loop that calls it.
export interface Wc {
  wrId: number | bigint;
  status: number;
  opcode: number;
  byteLen: number;
  imm?: number;
  qpn: number;
}

/** Observers of every completion a perf side reaps (metrics count them); none by default. */
export type WcObserver = (wcs: readonly Wc[]) => void;

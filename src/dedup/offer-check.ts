// The receiver's checks of an OFFER page against its limits (./recv-core.ts calls it first):
// everything a page declares is checked here before work or memory proportional to it, on the
// first page before the object is allocated. One job, apart from assembling.
import { DedupEndStatus } from '../wire/dedup-spec.js';
import type { Offer } from './messages.js';
import { Violation } from './recv-types.js';

export interface PageLimits {
  readonly min: number;
  readonly max: number;
  readonly maxEntries: number;
  readonly maxChunks: number;
  readonly maxTotal: number;
}

/** Where the transfer stands when a page comes (undefined: this page opens it). */
export interface PageState {
  readonly xfer: number;
  /** Entries offered so far (the next page's first), pages taken, bytes they declared, the object's size. */
  readonly entries: number;
  readonly pages: number;
  readonly sum: number;
  readonly total: number;
  readonly lastAnswered: boolean;
}

/** Throws the Violation ending the transfer for a page this receiver must refuse; returns the object's size. */
export function checkPage(m: Offer, o: PageLimits, st: PageState | undefined): number {
  if (!st) {
    if (m.first !== 0) throw new Violation(DedupEndStatus.Malformed, 0, 'first OFFER page must start at entry 0');
    if (m.total > o.maxTotal) throw new Violation(DedupEndStatus.TooLarge, 0, `object of ${m.total} bytes exceeds ${o.maxTotal}`);
  } else if (m.xfer !== st.xfer || m.first !== st.entries || st.lastAnswered) {
    throw new Violation(DedupEndStatus.Malformed, 0, 'OFFER page out of order');
  }
  const total = st ? st.total : m.total;
  if (m.count > o.maxEntries) throw new Violation(DedupEndStatus.TooLarge, 0, `OFFER page of ${m.count} entries exceeds ${o.maxEntries}`);
  // Its lengths, that they fit the total, and that the rest of the total still fits in maxChunks
  // even if every remaining chunk had the largest length.
  let sum = st ? st.sum : 0;
  for (let i = 0; i < m.count; i++) {
    const len = m.lens[i]!;
    const lastChunk = m.last && i === m.count - 1;
    if (len < 1 || len > o.max || (len < o.min && !lastChunk)) throw new Violation(DedupEndStatus.Malformed, 0, `chunk length ${len} outside ${o.min}..${o.max} (entry ${m.first + i}, in the page of ${m.count} from ${m.first}${m.last ? ', the last' : ''}; a sabre sender checks its own chunker's lengths, so from one this changed after it left)`);
    sum += len;
  }
  if (sum > total) throw new Violation(DedupEndStatus.Malformed, 0, 'chunks exceed the announced total');
  if (m.last && (sum !== total || m.chunks !== m.first + m.count)) throw new Violation(DedupEndStatus.Malformed, 0, 'last OFFER page does not close the object');
  const fewest = m.first + m.count + Math.ceil((total - sum) / o.max);
  if (fewest > o.maxChunks) throw new Violation(DedupEndStatus.TooLarge, 0, `an object of ${total} bytes needs more than ${o.maxChunks} chunks`);
  // Every page costs a NEED, a table entry and (on a channel) a fresh idle deadline: a page with
  // no entries says nothing unless it closes the object, so one that does not is malformed, and
  // the pages of a transfer are bounded like its chunks (each but the last has one at least, so
  // this only catches what the rule above already does; it stays as the stated bound).
  if (m.count === 0 && !m.last) throw new Violation(DedupEndStatus.Malformed, 0, 'an empty OFFER page that is not the last');
  if (st && st.pages > o.maxChunks) throw new Violation(DedupEndStatus.TooLarge, 0, `more than ${o.maxChunks + 1} OFFER pages`);
  return total;
}

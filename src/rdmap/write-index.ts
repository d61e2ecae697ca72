// The pending Writes of one rc flow, indexed by where they write (write-order.ts asks): per
// STag, a treap keyed by (TO base, ssn) whose nodes carry the largest extent end below them, so
// "which pending Writes may cover [to, end)" visits O(log k) nodes plus those that overlap —
// not every pending Write. A peer that parks k Writes high in the ssn window (their messages
// incomplete) made each of its lower segments visit all k before; now only the parked ones
// whose bytes it touches. Nodes are removed as their Write completes (in ssn order); the index
// holds at most the flow's pending messages (bounded by the out-of-order budget), plus removed
// entries a compaction drops once they outnumber the live ones. The treap is built only when a
// late segment first asks (PendingWrites): in-order traffic pays a queue's append and head step.
//
// Generic over the message (anything with an ssn): state.ts holds one, and this file needs
// nothing of it.

interface Node<T> {
  item: T;
  ssn: number;
  stag: number;
  base: number;
  /** base + the message length (Infinity while it is not known). */
  end: number;
  /** The largest `end` in this subtree: a subtree entirely below a query's start is skipped. */
  maxEnd: number;
  pri: number;
  l: Node<T> | undefined;
  r: Node<T> | undefined;
}

/**
 * xorshift32 from a per-process seed: a peer chooses the keys and their order, so it must not
 * be able to predict the priorities (a known sequence would let it build a list, not a tree).
 */
let seed = (Math.random() * 0x1_0000_0000) >>> 0 || 1;
function nextPri(): number {
  seed ^= seed << 13;
  seed ^= seed >>> 17;
  seed ^= seed << 5;
  return seed >>> 0;
}

function fix<T>(n: Node<T>): Node<T> {
  let m = n.end;
  if (n.l !== undefined && n.l.maxEnd > m) m = n.l.maxEnd;
  if (n.r !== undefined && n.r.maxEnd > m) m = n.r.maxEnd;
  n.maxEnd = m;
  return n;
}

/** Key order: TO base, then ssn (unique within a flow). */
function before<T>(a: Node<T>, base: number, ssn: number): boolean {
  return a.base < base || (a.base === base && a.ssn < ssn);
}

/** Every key of `a` is below every key of `b`. */
function merge<T>(a: Node<T> | undefined, b: Node<T> | undefined): Node<T> | undefined {
  if (a === undefined) return b;
  if (b === undefined) return a;
  if (a.pri > b.pri) {
    a.r = merge(a.r, b);
    return fix(a);
  }
  b.l = merge(a, b.l);
  return fix(b);
}

/** [keys below (base, ssn), the rest]. */
function split<T>(t: Node<T> | undefined, base: number, ssn: number): [Node<T> | undefined, Node<T> | undefined] {
  if (t === undefined) return [undefined, undefined];
  if (before(t, base, ssn)) {
    const [l, r] = split(t.r, base, ssn);
    t.r = l;
    return [fix(t), r];
  }
  const [l, r] = split(t.l, base, ssn);
  t.l = r;
  return [l, fix(t)];
}

/** The treap of PendingWrites, by STag: built only once a late segment asks. */
class WriteTree<T extends { ssn: number }> {
  walked = 0;
  readonly #bySsn = new Map<number, Node<T>>();
  readonly #stags = new Map<number, Node<T>>();

  /** Write `item` (ssn `ssn`) writes [base, base + len) of STag `stag` (len Infinity: not known yet). */
  add(item: T, stag: number, base: number, len: number): void {
    const ssn = item.ssn;
    if (this.#bySsn.has(ssn)) return;
    const n: Node<T> = { item, ssn, stag, base, end: base + len, maxEnd: base + len, pri: nextPri(), l: undefined, r: undefined };
    this.#bySsn.set(ssn, n);
    const [l, r] = split(this.#stags.get(stag), base, ssn);
    this.#stags.set(stag, merge(merge(l, n), r)!);
  }

  /** `item` left the flow (completed): false when it was not indexed. */
  remove(item: T): boolean {
    const ssn = item.ssn;
    const n = this.#bySsn.get(ssn);
    if (n === undefined || n.item !== item) return false;
    const stag = n.stag;
    this.#bySsn.delete(ssn);
    const [l, rest] = split(this.#stags.get(stag), n.base, ssn);
    const [, r] = split(rest, n.base, ssn + 1);
    const t = merge(l, r);
    if (t === undefined) this.#stags.delete(stag);
    else this.#stags.set(stag, t);
    return true;
  }

  /**
   * Call `visit` with each entry of STag `stag` whose extent may meet [to, end), base order.
   * Visits O(log k) nodes beyond those it reports (expected: treap priorities are random).
   */
  overlapping(stag: number, to: number, end: number, visit: (item: T) => void): void {
    const walk = (t: Node<T> | undefined): void => {
      // Iterative along the right spine: a run of overlapping entries recurses only leftwards.
      while (t !== undefined && t.maxEnd > to) {
        this.walked++;
        walk(t.l);
        if (t.base >= end) return;
        if (t.end > to) visit(t.item);
        t = t.r;
      }
    };
    walk(this.#stags.get(stag));
  }
}

interface Entry<T> {
  item: T;
  stag: number;
  base: number;
  len: number;
}

/**
 * The pending Writes of a flow. The common path (no late segment: every Write arrives and
 * completes in ssn order) costs an append and a head step, as a plain queue; the treap is built
 * from the live entries the first time a late segment asks overlapping(), and kept up to date
 * from then on (until the flow has no pending Write: the owner drops this object).
 */
export class PendingWrites<T extends { ssn: number }> {
  /**
   * The highest ssn added since the index was last empty (0: empty): a segment below it may be
   * late. Exact when Writes complete in ssn order, as they do; an upper bound otherwise.
   */
  maxSsn = 0;
  #q: Entry<T>[] = [];
  #head = 0;
  #live = 0;
  /** Entries removed out of arrival order, still in #q until the head passes them or a compaction. */
  #gone: Set<T> | undefined;
  #tree: WriteTree<T> | undefined;

  get size(): number {
    return this.#live;
  }

  /** Nodes the treap looked at in overlapping(), in all (what late segments cost: tests read it). */
  get walked(): number {
    return this.#tree?.walked ?? 0;
  }

  /** Write `item` writes [base, base + len) of STag `stag` (len Infinity: not known yet). */
  add(item: T, stag: number, base: number, len: number): void {
    this.#q.push({ item, stag, base, len });
    this.#live++;
    if (item.ssn > this.maxSsn) this.maxSsn = item.ssn;
    this.#tree?.add(item, stag, base, len);
  }

  /** `item` (added before) completed. */
  remove(item: T): void {
    const q = this.#q;
    if (this.#head < q.length && q[this.#head]!.item === item) this.#head++;
    else (this.#gone ??= new Set()).add(item);
    if (--this.#live === 0) {
      this.maxSsn = 0;
      this.#q = [];
      this.#head = 0;
      this.#gone = undefined;
      this.#tree = undefined;
      return;
    }
    this.#tree?.remove(item);
    const gone = this.#gone;
    if (gone !== undefined) {
      while (this.#head < q.length && gone.delete(q[this.#head]!.item)) this.#head++;
      // Removed entries never outnumber the live ones by much: O(1) amortised per entry.
      if (gone.size > this.#live + 64) {
        this.#q = q.slice(this.#head).filter((e) => !gone.has(e.item));
        this.#head = 0;
        this.#gone = undefined;
        return;
      }
    }
    if (this.#head > 1024 && this.#head * 2 > q.length) {
      this.#q = q.slice(this.#head);
      this.#head = 0;
    }
  }

  /** Call `visit` with each entry of STag `stag` whose extent may meet [to, end). */
  overlapping(stag: number, to: number, end: number, visit: (item: T) => void): void {
    let t = this.#tree;
    if (t === undefined) {
      t = this.#tree = new WriteTree<T>();
      const gone = this.#gone;
      for (let i = this.#head; i < this.#q.length; i++) {
        const e = this.#q[i]!;
        if (gone === undefined || !gone.has(e.item)) t.add(e.item, e.stag, e.base, e.len);
      }
    }
    t.overlapping(stag, to, end, visit);
  }
}

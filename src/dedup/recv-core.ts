// The receiver's core of the dedup transfer (M4; the protocol is described in ./transfer.ts): fed
// the sender's messages, it queues a NEED for each OFFER page, arms a landing-zone slot's chunk
// map before the sender may write it, verifies every chunk of a ROUND before a byte of it is
// used, and assembles the object from its store, the zone and chunks repeated inside the object.
// Everything a page declares is checked against the receiver's limits before work or memory
// proportional to it.
import { ErrorCode, SabreError } from '../core/errors.js';
import { type Armed, type DedupRecvOptions, helloRefusedError, type LandingZone, type RecvAction, Violation, WRITTEN_MAX, zeroStats } from './recv-types.js';
import { DEDUP_HASH_BYTES, DEDUP_ZONE_DIR, DEDUP_ZONE_MAGIC, DedupEndStatus, DedupKind } from '../wire/dedup-spec.js';
import { ChunkMap, chunkMapBlockBytes, ChunkStatus } from './chunk-map.js';
import { HASH_ALG, type HashAlgName, hashKey } from './hash.js';
import type { RecvStats } from './types.js';
import { decode, DedupMalformed, type DedupMessage, encode, KEY_BYTES, type Offer } from './messages.js';
import { giveBack, takeBuffer } from './buffers.js';
import { WrittenRanges } from './written.js';
import { checkPage } from './offer-check.js';
import { SlotCopy } from './slot-copy.js';
import { cdcParams } from '../kernels/cdc-params.js';
import { type HasTimeout, Outbox, type PollsActions } from '../core/sans-io.js';

export type { DedupRecvOptions, LandingZone, RecvAction } from './recv-types.js';

/**
 * The receiver's core, in the sans-I/O shape of src/core/sans-io.ts: start() queues the HELLO;
 * handleMessage for each message of the sender, handleFailure when the pipe failed; after each,
 * the shell polls pollAction() until undefined. No deadlines of its own.
 */
export class DedupRecvCore implements PollsActions<RecvAction>, HasTimeout {
  readonly #actions = new Outbox<RecvAction>();
  readonly #o: Required<Omit<DedupRecvOptions, 'normalization' | 'progress'>> & { normalization: number; progress: boolean };
  readonly #slotLen: number;
  readonly #maps: Array<ChunkMap | undefined> = [];
  /** The memory of every slot's map (0: none made yet). */
  #mapBlock = 0;
  /**
   * Address of the zone's directory (dedupZoneDir): the chunk map of each armed slot. The
   * placement hook (docs/dedup.md) keeps this address for the zone's region and calls
   * chunkHashZone(dir, to, len) for every segment it places there.
   */
  readonly zoneDirectory: number;
  readonly #hashAlg: HashAlgName;
  // the FIFO of slots the sender may write next (both sides keep the same order)
  readonly #granted: number[] = [];
  readonly #armed = new Map<number, Armed>();
  // current transfer
  #xfer = 0;
  #active = false;
  #total = 0;
  /**
   * The object being assembled. Ordinary memory, not device memory: it is what the application
   * gets, so each byte is copied into it once — from the store (held chunks) or from the landing
   * zone (received ones) — and device memory holds no object-sized buffer. Taken from
   * ./buffers.ts: a buffer a caller gave back has its pages already mapped.
   */
  #out: Uint8Array | undefined;
  /**
   * The basis the object is assembled in (store.takeInPlaceBasis: `#out` is its start), and what of it
   * this transfer has written: a held chunk is copied from its place in the basis to its place
   * in the object, or is there already; one whose basis bytes were written over is asked for.
   */
  #inPlace: Uint8Array | undefined;
  #written = new WrittenRanges();
  /** The object is (still) the start of #inPlace. */
  #inBasisObject = false;
  /** The object left the basis since the last progress action. */
  #moved = false;
  #lens: number[] = [];
  #offs: number[] = [];
  #hashes: Uint8Array[] = []; // per page
  #pageFirst: number[] = [];
  #needed: number[] = [];
  /**
   * A chunk repeated inside the object is requested once: its first needed occurrence by hash,
   * and the later occurrences waiting on it (copied within the object when it has arrived).
   */
  #firstByHash = new Map<string, number>();
  #aliases = new Map<number, number[]>();
  #cursor = 0;
  #lastAnswered = false;
  #sum = 0;
  #assembled = 0;
  /** Which chunks are in the object (1), and (with progress) how many from the start are. */
  #inObject = new Uint8Array(0);
  #prefix = 0;
  #reported = 0;
  #stats: RecvStats = zeroStats(0);
  /** Where slots verified by hashing at ROUND are copied first (./slot-copy.ts). */
  readonly #private: SlotCopy;
  /** close() ran (its memory is freed), or the sender refused our HELLO: messages are ignored. */
  #closed = false;
  #refused = false;

  constructor(o: DedupRecvOptions) {
    // Parameters our own chunker rule refuses are this caller's misuse, said now: sent in the
    // HELLO they would only make the sender refuse it.
    const { avg, min, max } = cdcParams({ avg: o.avg, min: o.min, max: o.max, normalization: o.normalization });
    const key = o.key ?? o.store.chunkKey(o.scope);
    if (!(key instanceof Uint8Array) || key.length !== KEY_BYTES) throw new SabreError(ErrorCode.InvalidArgument, `dedup: key must be ${KEY_BYTES} bytes`);
    if (!Number.isInteger(o.slots) || o.slots < 1 || o.slots > 64) throw new SabreError(ErrorCode.InvalidArgument, 'dedup: slots must be 1..64');
    const slotLen = Math.floor(o.zone.length / o.slots);
    if (slotLen < max) throw new SabreError(ErrorCode.InvalidArgument, `dedup: a slot (${slotLen} bytes) must hold a maximum chunk (${max})`);
    this.#o = {
      ...o, key, avg, min, max, normalization: o.normalization ?? 2,
      maxEntries: o.maxEntries ?? 1024, maxChunks: o.maxChunks ?? 1 << 20, maxTotal: o.maxTotal ?? 256 << 20,
      keepReceived: o.keepReceived ?? true, progress: o.progress ?? false,
    };
    this.#slotLen = slotLen;
    this.#private = new SlotCopy(o.mem, slotLen);
    this.#hashAlg = o.store.hash;
    for (let s = 0; s < o.slots; s++) this.#granted.push(s);
    const D = DEDUP_ZONE_DIR.fields;
    this.zoneDirectory = o.mem.alloc(DEDUP_ZONE_DIR.size + 4 * o.slots);
    const dv = o.mem.dataView();
    dv.setUint32(this.zoneDirectory + D.slots.offset, o.slots, true);
    dv.setUint32(this.zoneDirectory + D.slotLen.offset, slotLen, true);
    dv.setUint32(this.zoneDirectory + D.zoneBase.offset, o.zone.addr, true);
    for (let s = 0; s < o.slots; s++) this.#setDir(s, 0);
    dv.setUint32(this.zoneDirectory + D.magic.offset, DEDUP_ZONE_MAGIC, true);
  }

  /** Point the directory's entry for slot s at a chunk map (0: placed, not hashed). */
  #setDir(s: number, map: number): void {
    this.#o.mem.dataView().setUint32(this.zoneDirectory + DEDUP_ZONE_DIR.size + 4 * s, map, true);
  }

  /** The next action to carry out; undefined when there is none. */
  pollAction(): RecvAction | undefined {
    return this.#actions.poll();
  }

  pollTimeout(): number | undefined {
    return undefined;
  }

  handleTimeout(_now: number): void {}

  #enqueue(as: RecvAction[]): void {
    for (const a of as) this.#actions.push(a);
  }

  /** Queue the HELLO, which goes first. */
  start(): void {
    const o = this.#o;
    this.#actions.push({
      kind: 'send',
      bytes: encode({
        kind: DedupKind.Hello, hashAlg: HASH_ALG[this.#hashAlg], normalization: o.normalization, avg: o.avg, min: o.min, max: o.max,
        zoneAddr: o.zone.addr, zoneRkey: o.zone.rkey, slotLen: this.#slotLen, slots: o.slots, maxEntries: o.maxEntries,
        maxChunks: o.maxChunks, seed: o.store.hasher.seed, key: o.key,
      }),
    });
  }

  /** The chunk map of slot s (the record the placement hook advances), once armed. */
  slotMap(s: number): ChunkMap | undefined {
    return this.#armed.get(s)?.map;
  }

  /** Address and length of slot s in the landing zone. */
  slotRange(s: number): [number, number] {
    return [this.#o.zone.addr + s * this.#slotLen, this.#slotLen];
  }

  /** Bytes allocated for the object being assembled (0 between transfers). */
  get assemblyBytes(): number {
    return this.#out?.length ?? 0;
  }

  /** A transfer is under way (its first OFFER page came, it has not ended). */
  get active(): boolean {
    return this.#active;
  }

  /** A message of the sender. */
  handleMessage(bytes: Uint8Array, _now: number): void {
    // After close() the directory and maps are freed: a message the caller's pipe still brings
    // would arm maps into freed memory. After a refused HELLO the sender runs nothing here.
    if (this.#closed || this.#refused) return;
    this.#enqueue(this.#onMessage(bytes));
  }

  /** The sender refused our HELLO (ABORT, xfer 0, HelloRefused): no transfer will run on this pipe. */
  get refused(): boolean {
    return this.#refused;
  }

  #onMessage(bytes: Uint8Array): RecvAction[] {
    let m: DedupMessage;
    try {
      m = decode(bytes);
    } catch (e) {
      return this.#end(DedupEndStatus.Malformed, 0, e instanceof DedupMalformed ? e.message : String(e));
    }
    // Stragglers of the transfer that ended last (later pages, ROUNDs the sender sent before it
    // heard our END): nothing to answer — an END for them would end the sender's next transfer.
    if ((m.kind === DedupKind.Round || (m.kind === DedupKind.Offer && m.first !== 0)) && !this.#active && m.xfer === this.#xfer && m.xfer !== 0) return [];
    try {
      switch (m.kind) {
        case DedupKind.Offer:
          return this.#onOffer(m);
        case DedupKind.Round:
          return this.#onRound(m.xfer, m.slot, m.first, m.count, m.bytes);
        case DedupKind.Abort:
          if (m.status === DedupEndStatus.HelloRefused && m.xfer === 0) {
            this.#refused = true;
            return [...this.#end(DedupEndStatus.Aborted, 0, 'the sender refused our HELLO', false), { kind: 'refused', error: helloRefusedError() }];
          }
          return this.#end(DedupEndStatus.Aborted, 0, 'the sender aborted', false);
        default:
          return this.#end(DedupEndStatus.Malformed, 0, `unexpected message kind ${m.kind} at the receiver`);
      }
    } catch (e) {
      if (e instanceof Violation) return this.#end(e.status, e.detail, e.message);
      throw e;
    }
  }

  /** The pipe failed: drop the transfer. */
  handleFailure(error: SabreError, _now: number): void {
    if (!this.#active || this.#closed) return;
    if (!this.#inBasisObject) giveBack(this.#out);
    this.#cleanup();
    this.#actions.push({ kind: 'failed', error });
  }

  /** Free the slot maps (the zone itself belongs to the shell). */
  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    this.#cleanup();
    this.#private.free();
    this.#o.mem.dataView().setUint32(this.zoneDirectory + DEDUP_ZONE_DIR.fields.magic.offset, 0, true);
    for (const a of this.#maps) a?.free();
    this.#maps.length = 0;
    if (this.#mapBlock) this.#o.mem.free(this.#mapBlock);
    this.#mapBlock = 0;
    this.#o.mem.free(this.zoneDirectory);
  }

  #onOffer(m: Offer): RecvAction[] {
    const o = this.#o;
    const opening = !this.#active;
    if (opening) this.#xfer = m.xfer; // so an END refusing it names it (the sender matches END to its transfer)
    const total = checkPage(m, o, opening ? undefined : { xfer: this.#xfer, entries: this.#lens.length, pages: this.#pageFirst.length, sum: this.#sum, total: this.#total, lastAnswered: this.#lastAnswered });
    if (opening) this.#begin(m.xfer, total);
    const bitmap = new Uint8Array((m.count + 7) >> 3);
    const u8 = o.mem.u8();
    // Held chunks adjacent in the object and in their memory (a basis read whole: runs of
    // unchanged chunks) are copied as one run: a copy has a fixed cost per call on top of its bytes.
    let run: { buf: ArrayBufferLike; from: number; to: number; len: number } | undefined;
    const flush = (): void => {
      if (run) this.#put(new Uint8Array(run.buf, run.from, run.len), run.to);
      run = undefined;
    };
    for (let i = 0; i < m.count; i++) {
      const len = m.lens[i]!;
      const idx = m.first + i;
      this.#lens.push(len);
      this.#offs.push(this.#sum);
      const key = hashKey(m.hashes, i * DEDUP_HASH_BYTES);
      const ref = o.store.getByKey(o.scope, key);
      const inBasis = ref !== undefined && ref.src !== undefined && ref.src === this.#inPlace;
      if (ref && ref.len === len && inBasis && this.#inBasisObject && ref.off === this.#sum) {
        // The object is assembled in the basis and this chunk is already where it belongs.
        this.#heldIn(idx, len);
        this.#sum += len;
        continue;
      }
      // A chunk of the basis that moved: the object leaves the basis first (a move would write
      // over the basis bytes of chunks still to come, which insertions make the rule). Basis
      // bytes written over while the object was in it are asked for, below.
      if (ref && ref.len === len && inBasis && this.#inBasisObject) {
        flush();
        this.#leaveBasis();
      }
      if (ref && ref.len === len && !(inBasis && this.#written.touches(ref.off!, len))) {
        // Copied within this call, so nothing here depends on the chunk staying in the store.
        // Where its bytes are: the caller's buffer (a basis ingested by reference) or device memory.
        const buf = ref.src ? ref.src.buffer : ref.view ? ref.view.buffer : u8.buffer;
        const from = ref.src ? ref.src.byteOffset + ref.off! : ref.view ? ref.view.byteOffset : ref.addr;
        if (run && run.buf === buf && run.from + run.len === from && run.to + run.len === this.#sum) run.len += len;
        else {
          flush();
          run = { buf, from, to: this.#sum, len };
        }
        this.#heldIn(idx, len);
      } else {
        const first = this.#firstByHash.get(key);
        if (first !== undefined && this.#lens[first] === len) {
          // Already requested in this transfer: not again; filled from the first when it lands,
          // or now if it has (nothing would later: its ROUND is done).
          this.#stats.chunksRepeated++;
          if (this.#inObject[first] === 1) {
            flush();
            this.#put(this.#out!.subarray(this.#offs[first]!, this.#offs[first]! + len), this.#sum);
            this.#placed(idx);
            this.#assembled += len;
          } else {
            const waiting = this.#aliases.get(first);
            if (waiting) waiting.push(idx);
            else this.#aliases.set(first, [idx]);
          }
        } else {
          if (first === undefined) this.#firstByHash.set(key, idx);
          bitmap[i >> 3]! |= 1 << (i & 7);
          this.#needed.push(idx);
        }
      }
      this.#sum += len;
    }
    flush();
    this.#hashes.push(m.hashes);
    this.#pageFirst.push(m.first);
    if (m.last) this.#lastAnswered = true;
    this.#stats.chunks = this.#lens.length;
    this.#arm(); // before the NEED that lets the sender write
    const need: RecvAction = { kind: 'send', bytes: encode({ kind: DedupKind.Need, xfer: this.#xfer, first: m.first, count: m.count, bitmap }) };
    return [need, ...this.#progressed(), ...this.#maybeDone()];
  }

  /** A held chunk is in the object. */
  #heldIn(idx: number, len: number): void {
    this.#placed(idx);
    this.#stats.chunksFromStore++;
    this.#stats.bytesFromStore += len;
    this.#assembled += len;
  }

  #hashRec(idx: number): [Uint8Array, number] {
    // Pages are in order; find the page holding idx (binary search over page starts).
    let lo = 0, hi = this.#pageFirst.length - 1;
    while (lo < hi) {
      const mid = (lo + hi + 1) >> 1;
      if (this.#pageFirst[mid]! <= idx) lo = mid;
      else hi = mid - 1;
    }
    return [this.#hashes[lo]!, (idx - this.#pageFirst[lo]!) * DEDUP_HASH_BYTES];
  }

  /** Arm every granted slot whose run of needed chunks is determined (the sender's rule, mirrored). */
  #arm(): void {
    while (this.#granted.length > 0 && this.#cursor < this.#needed.length) {
      let bytes = 0;
      let j = this.#cursor;
      while (j < this.#needed.length && bytes + this.#lens[this.#needed[j]!]! <= this.#slotLen) bytes += this.#lens[this.#needed[j++]!]!;
      if (j === this.#needed.length && !this.#lastAnswered) return; // not determined yet
      const slot = this.#granted.shift()!;
      const idx = this.#needed.slice(this.#cursor, j);
      this.#cursor = j;
      let map: ChunkMap | undefined;
      if (this.#hashAlg === 'xxh3-128') {
        map = this.#mapOf(slot);
        map.armRecords(idx.length, (k) => this.#lens[idx[k]!]!, (k) => this.#hashRec(idx[k]!));
      }
      this.#armed.set(slot, { idx, bytes, map });
      if (map) this.#setDir(slot, map.addr); // from here on, placement into the slot hashes in-band
    }
  }

  /**
   * Slot s's chunk map. The first one needed makes every slot's, in one block of memory: each
   * allocation is a blocking call to a NIC thread, which is busy placing the transfer's writes.
   */
  #mapOf(s: number): ChunkMap {
    const have = this.#maps[s];
    if (have) return have;
    const o = this.#o;
    const cap = Math.floor(this.#slotLen / o.min) + 1;
    const per = chunkMapBlockBytes(cap);
    try {
      this.#mapBlock = o.mem.alloc(per * o.slots, 64);
    } catch (e) {
      throw e instanceof SabreError && e.code === ErrorCode.NoMemory ? new Violation(DedupEndStatus.TooLarge, 0, `no device memory for the chunk maps (${per * o.slots} bytes)`) : e;
    }
    for (let k = 0; k < o.slots; k++) this.#maps[k] = new ChunkMap(o.mem, ...this.slotRange(k), cap, o.store.hasher.seed, this.#mapBlock + k * per);
    return this.#maps[s]!;
  }

  #onRound(xfer: number, slot: number, first: number, count: number, bytes: number): RecvAction[] {
    const a = this.#armed.get(slot);
    if (!this.#active || xfer !== this.#xfer || !a || a.idx[0] !== first || a.idx.length !== count || a.bytes !== bytes) {
      throw new Violation(DedupEndStatus.Malformed, 0, `ROUND for slot ${slot} is not the run it was armed for`);
    }
    this.#armed.delete(slot);
    this.#setDir(slot, 0);
    const [base] = this.slotRange(slot);
    const o = this.#o;
    // Verify every chunk before using a byte of it. `src`: where the verified bytes are read from.
    //
    // In-band (an XXH3 map: hashed as placed, or by finish() here) the zone itself is read below,
    // after the check, and the zone stays remotely writable: with a NIC thread (workers >= 1) a
    // sender's write can land in between (with workers: 0 placement cannot interleave). That can
    // only change what this sender's own transfer holds, and its own scope's store entries: XXH3
    // stores are never shared (a shared store keys by SHA-256, verified below), entries are per
    // scope, so those bytes serve only this peer — which could have sent them in the first place.
    let verified = false;
    let src = base;
    if (a.map) {
      const before = a.map.stats().done;
      this.#stats.hashedInBand += before;
      a.map.finish(); // hashes only what placement did not already hash in-band
      let bad = -1;
      for (let k = 0; k < count && bad < 0; k++) if (a.map.status(k) !== ChunkStatus.Ok) bad = k;
      if (bad < 0) verified = true;
      // A chunk whose hashed bytes were written again (a retransmitted segment over udp lands
      // twice) is tainted, not necessarily wrong: hash the slot once more, now, over a private
      // copy (below). Only a mismatch of bytes that were never rewritten fails at once.
      else if (!a.map.flags(bad).tainted) throw new Violation(DedupEndStatus.Mismatch, a.idx[bad]!, `chunk ${a.idx[bad]} did not match its hash`);
      else this.#stats.rehashedRounds++;
    }
    // Hashed at ROUND (SHA-256, or a tainted slot): the slot is copied where no peer can write
    // first, that copy is hashed, and only it is read from here on (./slot-copy.ts says why).
    if (!verified) src = this.#private.verify(o.store.hasher, base, a.idx.map((i) => this.#lens[i]!), (k) => this.#hashRec(a.idx[k]!), (k) => a.idx[k]!);
    // Copy into the object, then into the store (under the hashes just verified).
    const u8 = o.mem.u8();
    // What goes into the store: only when it keeps what arrives (a file's basis scope does not).
    const keep = o.keepReceived;
    const refs: Array<{ addr: number; len: number }> = [];
    const recs = new Uint8Array(keep ? count * DEDUP_HASH_BYTES : 0);
    let at = src;
    // Runs of chunks adjacent in the object are adjacent in the slot too: one copy per run
    // (a copy out of shared memory has a fixed cost per call on top of its bytes).
    let runSrc = src, runDst = -1, runLen = 0;
    a.idx.forEach((i, k) => {
      const len = this.#lens[i]!;
      const dst = this.#offs[i]!;
      if (runDst + runLen !== dst) {
        if (runLen) this.#put(u8.subarray(runSrc, runSrc + runLen), runDst);
        runSrc = at;
        runDst = dst;
        runLen = 0;
      }
      runLen += len;
      this.#placed(i);
      if (keep) {
        refs.push({ addr: at, len });
        const [h, off] = this.#hashRec(i);
        recs.set(h.subarray(off, off + DEDUP_HASH_BYTES), k * DEDUP_HASH_BYTES);
      }
      at += len;
    });
    if (runLen) this.#put(u8.subarray(runSrc, runSrc + runLen), runDst);
    if (keep) o.store.putMany(o.scope, recs, refs);
    // Later occurrences of these chunks in the object: copied from the verified first one.
    for (const i of a.idx) {
      const waiting = this.#aliases.get(i);
      if (!waiting) continue;
      this.#aliases.delete(i);
      const from = this.#offs[i]!;
      for (const j of waiting) {
        this.#put(this.#out!.subarray(from, from + this.#lens[i]!), this.#offs[j]!);
        this.#placed(j);
        this.#assembled += this.#lens[i]!;
      }
    }
    this.#assembled += bytes;
    this.#stats.chunksReceived += count;
    this.#stats.bytesReceived += bytes;
    this.#stats.rounds++;
    this.#granted.push(slot);
    this.#arm(); // before the GRANT that lets the sender write into it again
    return [{ kind: 'send', bytes: encode({ kind: DedupKind.Grant, xfer: this.#xfer, slot }) }, ...this.#progressed(), ...this.#maybeDone()];
  }

  /**
   * Copy into the object (remembered while the object is the basis; past WRITTEN_MAX ranges,
   * writes out of order would make each remembering cost as much as all of them, so the object
   * leaves the basis instead). `from` may be a view of the object itself.
   */
  #put(from: Uint8Array, at: number): void {
    this.#out!.set(from, at);
    if (!this.#inBasisObject) return;
    this.#written.add(at, from.length);
    if (this.#written.size > WRITTEN_MAX) this.#leaveBasis(at + from.length, true);
  }

  /**
   * Go on in an object of its own: what is assembled so far (all of it below the chunks offered
   * until now) is copied over, and the basis is written no more. The progress reported so far
   * stays true of the new object (`moved` tells the writer so).
   */
  #leaveBasis(end = this.#sum, ranges = false): void {
    this.#stats.leftBasis++;
    if (ranges) this.#stats.leftBasisRanges++;
    let fresh: Uint8Array;
    try {
      fresh = takeBuffer(this.#total);
    } catch {
      throw new Violation(DedupEndStatus.TooLarge, 0, `no memory for an object of ${this.#total} bytes`);
    }
    fresh.set(this.#out!.subarray(0, Math.max(end, this.#sum)));
    this.#out = fresh;
    this.#inBasisObject = false;
    this.#moved = true;
  }

  /** Chunk `idx` is in the object (only tracked with progress). */
  #placed(idx: number): void {
    if (idx >= this.#inObject.length) {
      const grown = new Uint8Array(Math.max(idx + 1, this.#inObject.length * 2, 1024)); // doubling: linear in all
      grown.set(this.#inObject);
      this.#inObject = grown;
    }
    this.#inObject[idx] = 1;
  }

  /** A progress action when the object's final prefix has grown (before its delivery, if any). */
  #progressed(): RecvAction[] {
    if (!this.#o.progress || !this.#active) return [];
    const n = this.#lens.length;
    while (this.#prefix < n && this.#inObject[this.#prefix]) this.#prefix++;
    const done = this.#prefix < n ? this.#offs[this.#prefix]! : this.#sum;
    if (done <= this.#reported) return [];
    this.#reported = done;
    const moved = this.#moved;
    this.#moved = false;
    return [moved ? { kind: 'progress', bytes: this.#out!, done, moved } : { kind: 'progress', bytes: this.#out!, done }];
  }

  #begin(xfer: number, total: number): void {
    let out: Uint8Array;
    // The scope's basis, when its owner lets the object be assembled in it and it is large
    // enough: no object-sized buffer to fault in, and held chunks in place are not copied.
    const basis = this.#o.store.takeInPlaceBasis(this.#o.scope);
    this.#inPlace = basis && basis.length >= total ? basis : undefined;
    this.#inBasisObject = this.#inPlace !== undefined;
    this.#moved = false;
    this.#written = new WrittenRanges();
    try {
      out = this.#inPlace ? this.#inPlace.subarray(0, total) : takeBuffer(total);
    } catch {
      throw new Violation(DedupEndStatus.TooLarge, 0, `no memory for an object of ${total} bytes`);
    }
    this.#active = true;
    this.#xfer = xfer;
    this.#total = total;
    this.#out = out;
    this.#stats = zeroStats(xfer);
    this.#stats.total = total;
  }

  #maybeDone(): RecvAction[] {
    if (!this.#active || !this.#lastAnswered || this.#assembled !== this.#total) return [];
    const bytes = this.#out!;
    const stats = { ...this.#stats };
    const xfer = this.#xfer;
    this.#cleanup(false);
    return [
      { kind: 'send', bytes: encode({ kind: DedupKind.End, xfer, status: DedupEndStatus.Ok, detail: 0, total: stats.total }) },
      { kind: 'delivered', bytes, stats },
    ];
  }

  #end(status: number, detail: number, why: string, tell = true): RecvAction[] {
    const xfer = this.#xfer;
    const was = this.#active;
    if (!this.#inBasisObject) giveBack(this.#out); // never delivered: nobody else holds it (a basis is its owner's)
    this.#cleanup();
    const out: RecvAction[] = [];
    if (tell) out.push({ kind: 'send', bytes: encode({ kind: DedupKind.End, xfer, status, detail, total: 0 }) });
    const code = status === DedupEndStatus.TooLarge ? ErrorCode.LimitExceeded : ErrorCode.Malformed;
    if (was || tell) out.push({ kind: 'failed', error: new SabreError(code, `dedup: ${why}`) });
    return out;
  }

  #cleanup(failed = true): void {
    // A basis this transfer took holds its object (or part of it) now: its entries name bytes
    // that are no longer there, for any later transfer of the scope.
    if (this.#inPlace) this.#o.store.dropScope(this.#o.scope);
    this.#out = undefined;
    this.#inPlace = undefined;
    this.#inBasisObject = false;
    this.#active = false;
    this.#lens = [];
    this.#offs = [];
    this.#hashes = [];
    this.#pageFirst = [];
    this.#needed = [];
    this.#firstByHash = new Map();
    this.#aliases = new Map();
    this.#cursor = 0;
    this.#lastAnswered = false;
    this.#sum = 0;
    this.#assembled = 0;
    this.#inObject = new Uint8Array(0);
    this.#prefix = 0;
    this.#reported = 0;
    // After a success every slot is already granted again, in the order both ends agree on.
    // After a failure both ends start the slot order afresh (the sender does the same), even
    // when every slot happens to be granted (their order then need not be 0, 1, …); a write
    // still in flight from the failed transfer can only land as a mismatch of the next one.
    if (failed || this.#armed.size > 0 || this.#granted.length !== this.#o.slots) {
      for (const s of this.#armed.keys()) this.#setDir(s, 0);
      this.#armed.clear();
      this.#granted.length = 0;
      for (let s = 0; s < this.#o.slots; s++) this.#granted.push(s);
    }
  }
}

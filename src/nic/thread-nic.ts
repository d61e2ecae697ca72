// The NIC thread's side of a device: the inline port (driver, engine, link, device memory) run
// on this thread, fed from the WQE ring and the slow-path mailbox, reporting into the CQE ring,
// the control table and messages (DESIGN.md §8). Acks, retransmissions, keepalives, read
// responses and atomics happen here while the application's thread does other work.
//
// Order: every mailbox request first takes what the WQE ring holds (a modify or a deregister
// comes after the posts made before it), and every step ends by committing its completions
// before it publishes the queues' retired counts, so an application that reads a count and
// then drains the CQE ring has seen every completion of the work that count retired.
import { performance } from 'node:perf_hooks';
import { receiveMessageOnPort, type MessagePort } from 'node:worker_threads';
import { Packr } from 'msgpackr';
import type { DeviceAddress } from '../core/address.js';
import { addressKey } from '../core/address.js';
import { ErrorCode, SabreError } from '../core/errors.js';
import type { ServiceRequest } from '../core/link.js';
import type { WorkCompletion } from '../core/work.js';
import type { QpCaps } from '../rdmap/state.js';
import type { NicEvent } from './driver.js';
import type { InlinePort } from './inline-port.js';
import { MailboxServer } from './mailbox.js';
import { AH_MAX, validAhId } from './thread-ahs.js';
import type { PortCq } from './port.js';
import { RecordRing } from './ring.js';
import {
  CLOSE_DONE_CQ, CQ_BASE, PLACE_RECORD_CQ, QP_DOWN_CAUSES, QP_FENCE_CQ, QP_FLAG_CAUSE_MASK, QP_FLAG_CAUSE_SHIFT, QP_FLAG_STANDARD_PEER, QP_WORDS, QpWord, toWireError, type NicThreadInit,
} from './thread-proto.js';
import { type Cqe, cqeBodyLength, writeCqe } from './wqe.js';
import { heapReading } from './thread-heap.js';
import { HeldPlacements } from './thread-place.js';
import { type NicAh, type QpEntry, WqeIntake, WQES_PER_TURN } from './thread-wqes.js';
import { adoptRegion, deregisterShared } from './shared-regions.js';

const packr = new Packr({ useRecords: false });

/** A bound on the looks of one poll (a look is an atomic load: far more than this per µs would be needed to reach it before the deadline). */
const POLL_CHECKS_PER_US = 1000;
const clock = (): number => performance.now();

/** A CQ as the engine sees it on this thread: completions become CQE records. */
class RingCq implements PortCq {
  readonly depth: number;
  readonly #nic: NicThread;
  readonly id: number;
  readonly slot: number;
  produced = 0;

  constructor(nic: NicThread, id: number, slot: number, depth: number) {
    this.#nic = nic;
    this.id = id;
    this.slot = slot;
    this.depth = depth;
  }

  offer(wc: WorkCompletion & { src?: unknown }): boolean {
    // Full when the application has not yet taken `depth` of what was produced (ibverbs' overrun).
    if (this.produced - Atomics.load(this.#nic.control, CQ_BASE + this.slot) >= this.depth) return false;
    this.produced++;
    // One record for every completion, written into the ring at once (putCqe copies it only
    // when the ring is full).
    const c = this.#nic.cqeOut;
    c.cq = this.id;
    c.token = Number(wc.wrId);
    c.qpn = wc.qpn;
    c.status = wc.status;
    c.opcode = wc.opcode;
    c.byteLen = wc.byteLen;
    c.imm = wc.imm;
    c.srcQpn = wc.srcQpn;
    c.src = wc.src !== undefined ? packr.pack(wc.src) : undefined;
    this.#nic.putCqe(c);
    return true;
  }
}

export class NicThread {
  readonly port: InlinePort;
  readonly control: Int32Array;
  readonly #wqe: RecordRing;
  readonly #cqe: RecordRing;
  readonly #mailbox: MailboxServer;
  readonly #buffers: MessagePort;
  readonly #post: (msg: unknown) => void;
  readonly #qps = new Map<number, QpEntry>();
  /** QPs whose control words may be stale: only these are written after a step (not every QP). */
  readonly #dirty: QpEntry[] = [];
  readonly #cqs = new Map<number, RingCq>();
  readonly #ahs = new Map<number, NicAh>();
  /** External regions over memory the application keeps (non-shared): placed here, copied there. */
  readonly #shadowed = new Set<number>();
  /** CQEs that found the ring full, in order, ahead of anything later. */
  readonly #overflow: Cqe[] = [];
  readonly #services = new Map<number, ServiceRequest>();
  /**
   * One address object per peer for every QP connected to it, counted by those QPs: each
   * connect brings its own copy from the application's thread, and the engine's flow keeps
   * the address and its key string (about 170 bytes per idle QP, thousands to one peer).
   */
  readonly #peers = new Map<string, { address: DeviceAddress; refs: number }>();
  #serviceNext = 1;
  #stopped = false;
  /** How long an end of turn waits on the WQE ring (µs; 0: never, the default): docs/nic.md. */
  readonly #pollUs: number;
  /** Poll by spinning on the ring instead of a futex wait (nicPollSpin). */
  readonly #pollSpin: boolean;
  #waiting = false;

  readonly #onClosed: () => void;
  readonly #intake: WqeIntake;
  readonly #placed: HeldPlacements;

  constructor(port: InlinePort, init: NicThreadInit, buffers: MessagePort, post: (msg: unknown) => void, onClosed: () => void) {
    this.#onClosed = onClosed;
    this.port = port;
    this.control = new Int32Array(init.control);
    this.#pollUs = typeof init.opts['nicPollUs'] === 'number' ? init.opts['nicPollUs'] : 0;
    this.#pollSpin = init.opts['nicPollSpin'] === true;
    this.#wqe = RecordRing.attach(init.wqe);
    this.#cqe = RecordRing.attach(init.cqe);
    this.#buffers = buffers;
    this.#post = post;
    this.#placed = new HeldPlacements((hold) => {
      port.link.holdReceive?.(hold);
      // The engine's not-ready word to the peers goes in a driver step of its own (this runs inside one).
      queueMicrotask(() => {
        if (!port.driver.stopped) port.driver.run((now) => port.engine.holdReceive(hold, now));
      });
    });
    // Held back behind completions (the ring full), such records merge or are bounded: ./thread-place.ts.
    port.memory.onExtWrite = (rec, addr, len) => {
      if (!this.#shadowed.has(rec.stag)) return;
      this.putCqe({ cq: PLACE_RECORD_CQ, token: rec.stag, qpn: addr - rec.addr, status: 0, opcode: 0, byteLen: len });
      // Committed now, before this step's acks go out: the requester's Success must not reach an
      // application thread that could still find the record unpublished (./place-visible.ts).
      this.#cqe.commit();
    };
    this.#intake = new WqeIntake(port, this.#qps, this.#ahs);
    port.engine.trackChanges();
    port.start((ev) => this.#onEvent(ev), () => this.#afterStep());
    this.#mailbox = new MailboxServer(init.mailbox, (op: string, a: any) => this.#call(op, a));
    this.#mailbox.start();
    this.#watchWqes();
  }

  // ---- the WQE ring -------------------------------------------------------------------------

  #watchWqes(): void {
    if (this.#stopped || this.#waiting) return;
    const w = this.#wqe.waitForRecords();
    if (w === undefined) {
      // At most WQES_PER_TURN: the rest, and what more may come while this turn ends, in the
      // next turn, from the event loop (after its input), not recursively.
      if (!this.#stopped) this.#intake.take(this.#wqe, WQES_PER_TURN);
      setImmediate(() => this.#watchWqes());
      return;
    }
    this.#waiting = true;
    void w.then(() => {
      this.#waiting = false;
      this.#counts.wakes++;
      this.#watchWqes();
    });
  }

  /** Everything the WQE ring holds, in one driver step (checked: ./thread-wqes.ts): what a control call or a poll must see first. */
  #takeWqes(): void {
    if (!this.#stopped) this.#intake.take(this.#wqe);
  }

  // ---- the CQE ring and the control table ---------------------------------------------------

  /** The CQE a completion is written from (RingCq.offer), reused. */
  readonly cqeOut: Cqe = { cq: 0, token: 0, qpn: 0, status: 0, opcode: 0, byteLen: 0, imm: undefined, srcQpn: undefined, src: undefined };

  putCqe(c: Cqe): void {
    this.#counts.cqes++;
    if (this.#overflow.length > 0 || !writeCqe(this.#cqe, c)) {
      // Kept past this call: a copy (the caller's record is reused).
      const kept = c.cq === PLACE_RECORD_CQ ? this.#placed.add(c.token, c.qpn, c.byteLen) : { ...c };
      if (kept !== undefined) this.#overflow.push(kept);
      this.#waitForRoom();
    }
  }

  /**
   * One wait at a time for room for the first completion held back (not for the smallest
   * record: a ring full of CQEs may have room for that and not for a CQE, and the wait would
   * return at once, turn after turn, while the application is away).
   */
  #waitForRoom(): void {
    if (this.#roomWaiting) return;
    this.#roomWaiting = true;
    const w = this.#roomForHeldBack();
    if (w === undefined) setImmediate(this.#roomReady);
    else void w.then(this.#roomReady);
  }

  /** undefined when the first completion held back fits the ring now, else a wait for room (see waitForSpace). */
  #roomForHeldBack(timeoutMs?: number): Promise<void> | undefined {
    const first = this.#overflow[0];
    return this.#cqe.waitForSpace(first === undefined ? 0 : cqeBodyLength(first), timeoutMs);
  }

  #roomWaiting = false;
  readonly #roomReady = (): void => {
    this.#roomWaiting = false;
    this.#afterStep();
  };

  #afterStep(): void {
    let i = 0;
    while (i < this.#overflow.length && writeCqe(this.#cqe, this.#overflow[i]!)) this.#placed.written(this.#overflow[i++]!);
    if (i > 0) this.#overflow.splice(0, i);
    // Retired counts only when no completion waits outside the ring (see the file comment).
    const publish = this.#overflow.length === 0;
    this.port.engine.takeChanged(this.#markQp);
    const ctl = this.control;
    const dirty = this.#dirty;
    // A QP's state before the completions of the step are published: an application that polls
    // a flushed completion reads the QP in ERROR, as after ibv_poll_cq.
    for (let i = 0; i < dirty.length; i++) {
      const e = dirty[i]!;
      if (e.gone) continue;
      const b = e.slot * QP_WORDS;
      Atomics.store(ctl, b + QpWord.state, e.pq.state);
      // The down cause stays as #onEvent wrote it (until a reset clears the word).
      Atomics.store(ctl, b + QpWord.flags, (e.pq.standardPeer ? QP_FLAG_STANDARD_PEER : 0) | (Atomics.load(ctl, b + QpWord.flags) & QP_FLAG_CAUSE_MASK));
    }
    this.#cqe.commit();
    for (let i = 0; i < dirty.length && publish; i++) {
      const e = dirty[i]!;
      if (e.gone) continue;
      const b = e.slot * QP_WORDS;
      Atomics.store(ctl, b + QpWord.sqRetired, e.sqTaken - e.pq.sqLength);
      Atomics.store(ctl, b + QpWord.rqRetired, e.rqTaken - e.pq.rqLength);
      e.dirty = false;
    }
    // Unpublished retired counts keep their QPs listed until the ring has room again.
    if (publish) dirty.length = 0;
    this.#ringLater();
    if (!publish) this.#waitForRoom();
  }

  /**
   * The completion ring's doorbell rings once at the end of this thread's turn, not after each
   * step: waking the application's thread can hand it this thread's core at once (a woken
   * thread preempts its waker), and a wake in the middle of a turn left the sockets that turn
   * still had to read waiting behind the application's whole turn. At the end of the turn this
   * thread has nothing left but to sleep, and the steps of one turn wake the application once.
   */
  #ringLater(): void {
    if (this.#ringQueued) return;
    this.#ringQueued = true;
    setImmediate(this.#ringNow);
  }

  #ringQueued = false;
  /** Polls in a row that found no post, and the turns still to go without one (nicPollUs). */
  #pollMisses = 0;
  #pollSkip = 0;
  /** The completion ring's published position at the last end of turn. */
  #turnHead = 0;
  readonly #ringNow = (): void => {
    this.#ringQueued = false;
    if (this.#cqe.ringDoorbell()) this.#counts.doorbells++;
    const head = this.#cqe.committedHead;
    const fresh = head !== this.#turnHead;
    this.#turnHead = head;
    // Polling (nicPollUs): after a turn that gave the application completions, it is likely to
    // post in answer (the next ping, a write for each one done). Waiting on the WQE ring itself
    // for a while (a futex wait: the doorbell wakes this thread directly, not through its event
    // loop; or a spin, nicPollSpin) takes that post without the event loop's wake-up path; its
    // sockets wait meanwhile, so only a turn that published completions polls, for a bounded time.
    // Not while completions wait for room (the application cannot post until it has taken
    // them), and less often while polls find nothing (a receive-only stream: every turn publishes
    // completions nobody answers): after n misses in a row, the next 2^n - 1 turns do not poll.
    if (!fresh || this.#pollUs <= 0 || this.#stopped || this.#overflow.length > 0) return;
    if (this.#pollSkip > 0) {
      this.#pollSkip--;
      return;
    }
    this.#counts.polls++;
    const found = this.#pollSpin ? this.#wqe.pollRecords(performance.now() + this.#pollUs / 1000, clock, this.#pollUs * POLL_CHECKS_PER_US) : this.#wqe.waitRecordsSync(this.#pollUs / 1000);
    if (!found) {
      this.#pollMisses = Math.min(this.#pollMisses + 1, 6);
      this.#pollSkip = (1 << this.#pollMisses) - 1;
      return;
    }
    this.#pollMisses = 0;
    this.#counts.pollHits++;
    this.#takeWqes();
  };

  /**
   * dev.stats().nic: doorbells rung while the application waited, polls, polls that found a
   * post, this thread's wake-ups by the application's doorbell, completion records written.
   */
  readonly #counts = { doorbells: 0, polls: 0, pollHits: 0, wakes: 0, cqes: 0 };

  readonly #markQp = (qp: { qpn: number }): void => {
    const e = this.#qps.get(qp.qpn);
    if (e) this.#mark(e);
  };

  #mark(e: QpEntry): void {
    if (e.dirty) return;
    e.dirty = true;
    this.#dirty.push(e);
  }

  // ---- events -------------------------------------------------------------------------------

  #onEvent(ev: NicEvent): void {
    // Why a QP went down is in its flags word before the completions it flushed are in the
    // ring: the application may poll them before this event's message reaches it (the
    // channels read the cause of a flush there: PortQp.downCause).
    if (ev.kind === 'qpError' && ev.cause !== undefined) {
      const e = this.#qps.get(ev.qpn);
      const w = e && !e.gone ? e.slot * QP_WORDS + QpWord.flags : -1;
      // The first cause holds (a QP goes down once until reset).
      if (w >= 0 && (Atomics.load(this.control, w) & QP_FLAG_CAUSE_MASK) === 0) Atomics.or(this.control, w, (QP_DOWN_CAUSES.indexOf(ev.cause) + 1) << QP_FLAG_CAUSE_SHIFT);
    }
    // The completions of the step come before the event that follows them.
    this.#afterStep();
    switch (ev.kind) {
      case 'cqError':
        this.#post({ kind: 'event', ev: { kind: 'cqError', cq: (ev.cq as RingCq).id } });
        return;
      case 'connectFailed':
        this.#post({ kind: 'event', ev: { kind: 'connectFailed', qpn: ev.qpn, error: toWireError(ev.error) } });
        return;
      case 'qpError':
        this.#post({ kind: 'event', ev: { ...ev, resets: this.#qps.get(ev.qpn)?.resets ?? 0 } });
        return;
      default:
        this.#post({ kind: 'event', ev });
    }
  }

  // ---- the slow path ------------------------------------------------------------------------

  #call(op: string, a: any): unknown {
    // A drain (the application's ring was full) needs room, not the whole ring in one step: the
    // rest stays in order, for the next turn or the next call, which takes all before its op.
    if (op === 'drain' && !this.#stopped) this.#intake.take(this.#wqe, WQES_PER_TURN);
    else this.#takeWqes();
    try {
      return this.#op(op, a);
    } finally {
      this.#afterStep();
    }
  }

  /** A new (or reset) QP has retired nothing: its words say so before the application's next post. */
  #zeroRetired(e: QpEntry): void {
    const b = e.slot * QP_WORDS;
    Atomics.store(this.control, b + QpWord.sqRetired, 0);
    Atomics.store(this.control, b + QpWord.rqRetired, 0);
    // No down cause either (a reused slot held its last QP's).
    Atomics.store(this.control, b + QpWord.flags, 0);
  }

  #op(op: string, a: any): unknown {
    const port = this.port;
    switch (op) {
      case 'createCq':
        this.#cqs.set(a.id, new RingCq(this, a.id, a.slot, a.depth));
        return null;
      case 'dropCq':
        this.#cqs.delete(a.id);
        return null;
      case 'createQp': {
        const pq = port.createQp(a.qpn, a.type, a.pd, a.caps as QpCaps, this.#cqs.get(a.sendCq)!, this.#cqs.get(a.recvCq)!, a.reportSource);
        const e: QpEntry = { pq, slot: a.slot, pd: a.pd, srd: a.type === 'srd', maxSge: (a.caps as QpCaps).maxSge, sqTaken: 0, rqTaken: 0, resets: 0, dirty: false, peerKey: undefined };
        this.#qps.set(a.qpn, e);
        this.#mark(e);
        // Now, not at the end of the step: a reused slot still holds its last QP's counts, and
        // the end of a step publishes none while completions wait for room in the ring.
        this.#zeroRetired(e);
        return null;
      }
      case 'qp': {
        const e = this.#qps.get(a.qpn)!;
        // Its words are written after this request (init changes the state outside the engine).
        this.#mark(e);
        if (a.act === 'init') e.pq.init();
        else if (a.act === 'connect') e.pq.connect(this.#peerFor(e, a.peer as DeviceAddress), a.rqpn, a.secret instanceof Uint8Array ? a.secret : undefined, a.passive === true);
        else if (a.act === 'toError') e.pq.toError();
        else if (a.act === 'reset') {
          e.pq.reset();
          e.resets++;
          this.#unpeer(e);
          e.sqTaken = 0;
          e.rqTaken = 0;
          this.#zeroRetired(e);
        } else if (a.act === 'destroy') {
          e.pq.destroy(a.deviceOpen);
          this.#unpeer(e);
          this.#qps.delete(a.qpn);
          e.gone = true;
          const b = e.slot * QP_WORDS;
          Atomics.store(this.control, b + QpWord.state, e.pq.state);
        }
        // Behind the flushes it made, held back or not: the application's ids stay theirs until it.
        if (a.fence === true) this.putCqe({ cq: QP_FENCE_CQ, token: 0, qpn: a.qpn, status: 0, opcode: 0, byteLen: 0 });
        return null;
      }
      case 'regDevice': {
        const r = port.regDevice(a.length, a.pd, a.access);
        return { stag: r.stag, addr: r.addr };
      }
      case 'regExternal': {
        const msg = receiveMessageOnPort(this.#buffers)?.message as { buf: Uint8Array } | undefined;
        if (!msg) throw new Error('the region\'s memory did not arrive');
        // A view of device memory (at a.device) is taken through this thread's own view of it,
        // so the port registers it as the device memory it is (the posted view's buffer is
        // another object).
        const own = a.device >= 0 ? port.view(a.device, msg.buf.length) : undefined;
        const r = port.regExternal(own?.length === msg.buf.length ? own : msg.buf, a.pd, a.access);
        if (a.shadow) this.#shadowed.add(r.stag);
        return { stag: r.stag, addr: r.addr };
      }
      case 'adopt':
        adoptRegion(port, a, this.#buffers);
        if (a.shadow) this.#shadowed.add(a.stag);
        return null;
      case 'dereg':
        deregisterShared(port, a);
        this.#shadowed.delete(a.stag);
        this.#placed.forget(a.stag);
        return null;
      case 'ah':
        if (!validAhId(a.id)) throw new SabreError(ErrorCode.InvalidArgument, `address handle id ${String(a.id)} is not in 1..${AH_MAX}`);
        for (const id of (a.forget as number[] | undefined) ?? []) this.#ahs.delete(id);
        this.#ahs.set(a.id, { address: a.address, key: addressKey(a.address) });
        return null;
      case 'stats':
        return { ...port.stats(a.contexts), nic: { ...this.#counts, ...this.#placed.counts(), badWqes: this.#intake.bad + this.#wqe.lost, ahs: this.#ahs.size } };
      case 'reachable':
        return port.reachable(a.address);
      case 'listen':
        port.listenService(a.service, a.on ? (r) => this.#serviceRequest(r) : undefined);
        return null;
      case 'svcAccept': {
        const r = this.#services.get(a.id);
        this.#services.delete(a.id);
        if (!r) throw new Error('no such service request');
        r.accept(a.qpn, a.privateData).then(
          () => this.#post({ kind: 'svcAccepted', id: a.id }),
          (e: unknown) => this.#post({ kind: 'svcAccepted', id: a.id, error: toWireError(e) }),
        );
        return null;
      }
      case 'svcReject':
        this.#services.get(a.id)?.reject(a.reason, a.busy === true);
        this.#services.delete(a.id);
        return null;
      case 'dial':
        port.dialService(a.qpn, a.to, a.service, a.privateData, a.timeoutMs).then(
          (v) => this.#post({ kind: 'dialed', id: a.id, value: v }),
          (e: unknown) => this.#post({ kind: 'dialed', id: a.id, error: toWireError(e) }),
        );
        return null;
      case 'batch': {
        // A closing device's calls before its close (./thread-close.ts): each runs, in order.
        let first: unknown;
        for (const c of a.calls as Array<{ op: string; args: unknown }>) {
          try {
            // Only the synchronous teardown calls: a 'close' or 'dial' here would leave a promise nobody awaits.
            if (c.op !== 'qp' && c.op !== 'dropCq' && c.op !== 'stop' && c.op !== 'dereg') throw new Error(`'${c.op}' is not a close-batch call`);
            this.#op(c.op, c.args);
          } catch (e) {
            first ??= e;
          }
        }
        if (first !== undefined) throw first;
        return null;
      }
      case 'stop':
        this.#stopped = true;
        port.stop();
        return null;
      case 'drain':
        return null;
      case 'heap':
        return heapReading(a.gc === true);
      case 'close':
        // Answered once the link is closed: the application's close ends in one turn.
        return this.close().then(() => null);
      // The application's arena allocations (features above verbs keep their tables in device memory).
      case 'alloc':
        return port.memory.dm.alloc(a.length, a.align);
      case 'free':
        port.memory.dm.free(a.addr);
        return null;
      case 'sizeOf':
        return port.memory.dm.sizeOf(a.addr) ?? null;
      case 'memStats':
        return port.memory.dm.stats();
      case 'freeBlocks':
        return port.memory.dm.freeBlocks();
      default:
        throw new Error(`unknown request ${op}`);
    }
  }

  #peerFor(e: QpEntry, address: DeviceAddress): DeviceAddress {
    this.#unpeer(e);
    const key = addressKey(address);
    let p = this.#peers.get(key);
    if (p === undefined) this.#peers.set(key, (p = { address, refs: 0 }));
    p.refs++;
    e.peerKey = key;
    return p.address;
  }

  #unpeer(e: QpEntry): void {
    if (e.peerKey === undefined) return;
    const p = this.#peers.get(e.peerKey);
    if (p !== undefined && --p.refs === 0) this.#peers.delete(e.peerKey);
    e.peerKey = undefined;
  }

  #serviceRequest(r: ServiceRequest): void {
    const id = this.#serviceNext++;
    this.#services.set(id, r);
    this.#post({ kind: 'serviceRequest', id, service: r.service, remoteQpn: r.remoteQpn, privateData: r.privateData, from: r.from, peerKey: r.peerKey });
  }

  /** Close the link and stop serving: the thread may end. */
  async close(): Promise<void> {
    this.#stopped = true;
    this.port.stop();
    await this.port.close();
    // The last record: the application drains until it sees it.
    this.putCqe({ cq: CLOSE_DONE_CQ, token: 0, qpn: 0, status: 0, opcode: 0, byteLen: 0 });
    this.#afterStep();
    // The reply to the close request goes out now; completions still held back (the ring was
    // full) go as the application takes the ring's, bounded.
    void this.#handOverThenEnd();
  }

  async #handOverThenEnd(): Promise<void> {
    for (const until = Date.now() + 9_000; this.#overflow.length > 0 && Date.now() < until; ) {
      const w = this.#roomForHeldBack(Math.max(1, until - Date.now()));
      if (w !== undefined) await w;
      this.#afterStep();
    }
    // Nothing holds this thread after this.
    this.#mailbox.stop();
    this.#wqe.wakeAll();
    this.#onClosed();
  }
}

// Channel: the verbs shell around one ChannelCore. It owns the QP and the PD, registers memory
// for the core (ChannelPorts over pd.regMr), carries out the core's actions as verbs work
// requests, feeds it the completions the device's hub routes here and a timer, and turns it into
// the API: send() resolving when the peer has the message placed, async iteration in order,
// stats(), close().
import { WcOpcode, WcStatus } from '../core/enums.js';
import { ErrorCode, SabreError } from '../core/errors.js';
import { Lifecycle, type Settle } from '../core/lifecycle.js';
import type { WorkCompletion } from '../core/work.js';
import type { MemoryRegion } from '../verbs/mr.js';
import type { ProtectionDomain } from '../verbs/pd.js';
import type { QueuePair } from '../verbs/qp.js';
import { performance } from 'node:perf_hooks';
import { decodeValue, encodeValue } from './codec.js';
import { ChannelCore, type CoreStats } from './core.js';
import type { ChannelHub, HubMember } from './hub.js';
import type { ResolvedOptions, SendOptions } from './options.js';
import { ChannelDedup, isDedupMessage, isDedupSource } from './dedup.js';
import { WrKind, wrKindOf } from './link.js';
import type { DedupSource, Received } from '../dedup/endpoint.js';
import type { Action, ChannelPorts, Region, RegionUse } from './ports.js';
import { ACCESS, CODE, outcome, postAction } from './verbs-map.js';

type Pending<T = void> = Settle<T>;

interface Waiting extends Pending {
  bytes: Uint8Array;
  value: boolean;
}

export type { SendOptions } from './options.js';

export interface ChannelStats extends CoreStats {
  qpn: number;
  /** Sends accepted by send() and not yet resolved (in the core or waiting beyond highWaterMark). */
  outstanding: number;
}

const END: IteratorResult<unknown> = Object.freeze({ done: true, value: undefined });

/** The closed error of every channel: one function, not a closure per channel. */
const channelClosed = (): Error => new SabreError(ErrorCode.Closed, 'channel is closed');

/** Whole ms: an idle channel's times stay small integers in its fields (a fraction takes a heap number each). */
const clock = (): number => Math.floor(performance.now());

/** The list of every channel no send has waited in: shared, never written (send() makes its own). */
const NO_WAITING: Waiting[] = [];

/** Channel's flags. */
const S = { connected: 1, flushing: 2, flushAgain: 4, closeCalled: 8 } as const;

export class Channel implements AsyncIterable<unknown>, HubMember, ChannelPorts {
  readonly #hub: ChannelHub;
  readonly #qp: QueuePair;
  readonly #pd: ProtectionDomain;
  readonly #core: ChannelCore;
  readonly #reserved: number;
  /** Sends in the core, by seq (made on the first send: an idle channel holds as little as it can). */
  #sends: Map<number, Pending> | undefined;
  /** Sends waiting beyond highWaterMark: the shared empty list until the first one waits. */
  #waiting: Waiting[] = NO_WAITING;
  /** Iteration calls waiting for a message, oldest first. */
  #readers: Pending<IteratorResult<unknown>>[] | undefined;
  #connected: { promise: Promise<void>; settle: Pending } | undefined; // until the peer's HELLO: who waits for it
  #bits = 0; // S.* bits: one field for four flags
  #timer: ReturnType<typeof setTimeout> | undefined;
  #timerAt: number | undefined = undefined; // when #timer fires (undefined with no timer)
  #life: Lifecycle | undefined; // close() once; ended at teardown (the QP destroyed, every region released)
  #error: SabreError | undefined;
  /** Runs once at teardown (the listener forgets a channel it never handed out). */
  onTeardown: (() => void) | undefined;
  /** Dedup sends and receives (made on the first one). */
  #dedup: ChannelDedup | undefined;
  /** Objects dedup receives completed, delivered before the core's next message. */
  #front: Array<Received | Error> | undefined;
  /** While dedup sends are unfinished: the last one, which later sends wait for. */
  #after: Promise<unknown> | undefined;
  #dedupPending = 0;
  /** @internal who the peer is, for the hub's per-peer totals (set once connected). */
  peerKey = '';

  /**
   * @internal made by listenChannels / connectChannel, inside the cm setup hook: the core's
   * first receives are posted before the QP connects. preauthMax > 0: untrusted until authorize().
   */
  constructor(hub: ChannelHub, qp: QueuePair, pd: ProtectionDomain, o: ResolvedOptions, reserved: number, preauthMax = 0) {
    this.#hub = hub;
    this.#qp = qp;
    this.#pd = pd;
    this.#reserved = reserved;
    try {
      this.#core = new ChannelCore(o, this, clock(), preauthMax);
    } catch (e) {
      throw e instanceof RangeError ? new SabreError(ErrorCode.NoMemory, `channel: ${e.message}`) : e;
    }
    hub.add(qp.qpn, this);
    this.#flush();
  }

  get qpn(): number {
    return this.#qp.qpn;
  }

  /** @internal the channel's own protection domain. */
  get pd(): ProtectionDomain {
    return this.#pd;
  }

  /** @internal the QP connected: send HELLO. */
  start(): void {
    this.#core.start(clock());
    this.#flush();
  }

  /** @internal why the channel failed, if it did: connectChannel reports it before its connect's own error. */
  get failure(): SabreError | undefined {
    return this.#error;
  }

  /** @internal resolves when the peer's HELLO arrived (or rejects with why not). */
  get connected(): Promise<void> {
    if (this.#bits & S.connected) return Promise.resolve();
    if (this.#torn) return Promise.reject(this.#error ?? new SabreError(ErrorCode.Closed, 'channel closed before the peer\'s HELLO'));
    this.#connected ??= this.#lc.owe<void>();
    return this.#connected.promise;
  }

  // ---- ChannelPorts: registered memory for the core, in this channel's PD -------------------

  /** @internal */
  reg(length: number, use: RegionUse): Region | undefined {
    try {
      return this.#pd.regMr(length, ACCESS[use]);
    } catch (e) {
      if (e instanceof SabreError && (e.code === ErrorCode.NoMemory || e.code === ErrorCode.LimitExceeded)) return undefined;
      throw e;
    }
  }

  /** @internal */
  dereg(r: Region): void {
    const mr = r as MemoryRegion;
    if (mr.valid) mr.deregister();
  }

  /**
   * @internal A copy out of device memory into memory the application owns. (For big
   * rendezvous messages the cost is the fresh buffer's first touch, not the copy: copying out of
   * the SharedArrayBuffer into a reused buffer is fast.)
   */
  read(r: Region, off: number, len: number): Uint8Array {
    return (r as MemoryRegion).buffer.slice(off, off + len);
  }

  /** @internal */
  write(r: Region, off: number, bytes: Uint8Array): void {
    (r as MemoryRegion).buffer.set(bytes, off);
  }

  /** @internal */
  holdRendezvous(len: number): boolean {
    return this.#hub.holdRendezvous(this, len, this.#core.o);
  }

  /** @internal */
  releaseRendezvous(len: number): void {
    this.#hub.releaseRendezvous(this, len);
  }

  /** @internal the hub released rendezvous budget this channel waited for. */
  onBudget(): void {
    if (this.#torn) return;
    this.#core.retryReads(clock());
    this.#flush();
  }

  // ---- trust --------------------------------------------------------------------------------

  /**
   * False on a channel accepted by a listener with `preauth` until authorize(): it takes only
   * messages up to preauth.maxMessage, no rendezvous and no dedup sends, and registers no more
   * than its first phase's worth.
   */
  get authorized(): boolean {
    return this.#core.authorized;
  }

  /** Lift the channel to the listener's full options (a no-op on a trusted channel). */
  authorize(): void {
    if (this.#core.authorized || this.#torn) return;
    this.#core.authorize(clock());
    this.#hub.authorized(this);
    this.#flush();
  }

  // ---- the API ------------------------------------------------------------------------------

  /**
   * Send one message: a Uint8Array arrives as a Uint8Array, anything else is msgpack-encoded and
   * arrives decoded. Resolves once the peer has it placed (in its slots, or pulled by its READ);
   * rejects with the channel's error if it fails first. Do not modify a Uint8Array until then.
   */
  send(msg: unknown, opts?: SendOptions): Promise<void> {
    if (opts?.dedup) return this.#sendDedup(msg);
    if (this.#after) {
      // Behind an unfinished dedup send: posted once it has finished, in call order.
      return new Promise<void>((resolve, reject) => void this.#after!.then(() => this.#send(msg, false).then(resolve, reject)));
    }
    return this.#send(msg, false);
  }

  /**
   * @internal a dedup send whose bytes the sender reads into its staging memory itself, chunking
   * each piece as it is in (the file service: a file never copied outside device memory). Arrives
   * as a Uint8Array, as send(bytes, { dedup: true }) does.
   */
  sendDedupFrom(source: DedupSource): Promise<void> {
    return this.#sendDedup(source, true);
  }

  #sendDedup(msg: unknown, from = false): Promise<void> {
    if (!(msg instanceof Uint8Array) && !(from && isDedupSource(msg))) return Promise.reject(new SabreError(ErrorCode.InvalidArgument, 'send: a dedup send takes a Uint8Array'));
    if (this.#error) return Promise.reject(this.#error);
    if (this.#life?.closing) return Promise.reject(this.#life.closedError());
    const max = this.#core.maxMessage;
    const length = (msg as Uint8Array | DedupSource).length;
    if (length > max) return Promise.reject(new SabreError(ErrorCode.LimitExceeded, `send: ${length} bytes, the peer takes at most ${max}`));
    const dedup = this.#dedupHalf();
    const p = (this.#after ?? Promise.resolve()).then(() => dedup.send(msg as Uint8Array | DedupSource));
    const mine = p.then(() => undefined, () => undefined);
    this.#after = mine;
    this.#dedupPending++;
    void mine.then(() => {
      if (--this.#dedupPending === 0 && this.#after === mine) this.#after = undefined;
    });
    return p.then(() => undefined);
  }

  #dedupHalf(): ChannelDedup {
    const core = this.#core;
    const o = this.#core.o;
    return (this.#dedup ??= new ChannelDedup({
      // Read at the peer's OPEN: refused until the channel is authorized.
      get accept() {
        return o.dedup && core.authorized;
      },
      qp: this.#qp, pd: this.#pd, zoneBytes: o.dedupZoneBytes, maxMessage: o.maxMessage, store: o.dedupStore, idleMs: o.dedupIdleMs,
      sendRaw: (b) => this.#send(b, true), peerMaxMessage: () => this.#core.maxMessage,
      deliver: (r) => {
        (this.#front ??= []).push(r);
        // Not from inside the dedup receiver's own step: readers run after it has finished.
        queueMicrotask(() => this.#wake());
      },
      fail: (m, kind = 'protocol') => {
        this.#core.fail(kind, m);
        queueMicrotask(() => this.#flush()); // never a flush nested in the one that routed the message
      },
    }));
  }

  /**
   * @internal the scope and chunking key the peer's dedup sends are received under, set before
   * its first one arrives, with the scope pre-filled by `dedupStoreOf(ch.pd).ingest(scope, basis,
   * { key, avg })` (the file service's rsync basis). Default: a scope of this channel, a random
   * key, 16 KiB chunks. `onProgress`: told as the object's verified prefix grows (a file written
   * while the rest arrives; dedup/endpoint.ts DedupReceiverInit.onProgress).
   */
  dedupBasis(scope: string, key: Uint8Array, avg?: number, onProgress?: (bytes: Uint8Array, done: number) => void): void {
    this.#dedupHalf().setBasis(scope, key, avg, onProgress);
  }

  /**
   * While a dedup-kind message is next in order: take it and hand it over (nothing for the
   * application). `flush`: post what that caused now (false inside #flush, which goes on itself:
   * a nested flush would post out of order). An untaken object holds back what follows, as an unread message does.
   */
  #routeDedupHeads(flush: boolean): void {
    let took = false;
    for (let guard = 0; guard < 4096 && !this.#torn && !this.#front?.length; guard++) {
      const d = this.#core.peek();
      if (!d || !d.value || !isDedupMessage(d.bytes)) break;
      this.#core.pollMessage(clock());
      took = true;
      this.#dedupHalf().onMessage(d.bytes);
    }
    if (took && flush) this.#flush();
  }

  /** `raw`: a dedup-kind message (V set, the 0xc1 mark) the channel itself sends. */
  #send(msg: unknown, raw: boolean): Promise<void> {
    if (this.#error) return Promise.reject(this.#error);
    if (this.#life?.closing) return Promise.reject(this.#life.closedError());
    const value = raw || !(msg instanceof Uint8Array);
    let bytes: Uint8Array;
    try {
      bytes = raw ? (msg as Uint8Array) : value ? encodeValue(msg) : (msg as Uint8Array);
    } catch (e) {
      return Promise.reject(new SabreError(ErrorCode.InvalidArgument, `send: the value cannot be encoded (${(e as Error).message})`));
    }
    const max = this.#core.maxMessage;
    if (bytes.length > max) return Promise.reject(new SabreError(ErrorCode.LimitExceeded, `send: ${bytes.length} bytes, the peer takes at most ${max}`));
    return new Promise<void>((resolve, reject) => {
      if (this.#waiting.length === 0 && this.#core.out.outstanding < this.#core.o.highWaterMark) {
        const seq = this.#core.send(bytes, value, clock(), false);
        (this.#sends ??= new Map()).set(seq, { resolve, reject });
        this.#kickSoon();
        return;
      }
      if (this.#waiting.length >= this.#core.o.maxQueued) {
        reject(new SabreError(ErrorCode.QueueFull, `send: ${this.#waiting.length} sends already wait beyond highWaterMark ${this.#core.o.highWaterMark}`));
        return;
      }
      if (this.#waiting === NO_WAITING) this.#waiting = [];
      this.#waiting.push({ bytes, value, resolve, reject });
    });
  }

  #kickScheduled = false;
  /** Post the sends of this JS task together, once it is done queuing them (Nagle without the wait). */
  #kickSoon(): void {
    if (this.#kickScheduled) return;
    this.#kickScheduled = true;
    queueMicrotask(() => {
      this.#kickScheduled = false;
      if (this.#torn) return;
      this.#core.pump(clock());
      this.#flush();
    });
  }

  /** Send a vector of messages (in order, each as send() would); resolves when all are placed. */
  sendv(msgs: readonly unknown[]): Promise<void> {
    return Promise.all(msgs.map((m) => this.send(m))).then(() => undefined);
  }

  /**
   * The next message in order as an iterator result, `done` once the channel ended, an Error
   * when it failed (after the messages already in order), or undefined: nothing yet.
   */
  #poll(): IteratorResult<unknown> | Error | undefined {
    let f = this.#front?.shift(); // taken first: the dedup messages it held back go on now
    this.#routeDedupHeads(true);
    f ??= this.#front?.shift();
    if (f) return f instanceof Error ? f : { done: false, value: f.bytes };
    const d = this.#core.pollMessage(clock());
    if (d) {
      this.#flush();
      this.#routeDedupHeads(true); // a dedup message now next in order goes on without the application
      if (!d.value) return { done: false, value: d.bytes };
      const v = decodeValue(d.bytes, { maxElements: this.#core.o.maxValueElements, maxDepth: this.#core.o.maxValueDepth });
      if (v.ok) return { done: false, value: v.value };
      if (v.limit) this.#core.refuse(`the peer sent a value past this end's limits: ${v.error}`);
      else this.#core.fail('protocol', `the peer sent a value that does not decode (${v.error})`);
      this.#flush();
      return this.#error!;
    }
    if (this.#core.finished) return this.#error ?? END;
    return undefined;
  }

  /**
   * Async iteration: messages in send order, each exactly once; ends after the peer closes (or
   * after close()); rejects with the channel's error. The channel is its own iterator — a
   * waiting reader holds one pending promise, which is what 10,000 idle channels each pay.
   */
  [Symbol.asyncIterator](): AsyncIterator<unknown> {
    return this;
  }

  /** @internal the async iterator protocol (use `for await (const msg of ch)`). */
  next(): Promise<IteratorResult<unknown>> {
    if (!this.#readers?.length) {
      const r = this.#poll();
      if (r instanceof Error) return Promise.reject(r);
      if (r) return Promise.resolve(r);
    }
    return new Promise((resolve, reject) => (this.#readers ??= []).push({ resolve, reject }));
  }

  stats(): ChannelStats {
    return { ...this.#core.stats(), qpn: this.#qp.qpn, outstanding: (this.#sends?.size ?? 0) + this.#waiting.length };
  }

  get registeredBytes(): number {
    return this.#core.registeredBytes;
  }

  /** @internal for the hub's totals. */
  counters() {
    const { enlargements, shrinks, messagesSent, messagesReceived, limitRefusals, rendezvousWaits, rendezvousReadTimeouts } = this.#core.stats();
    return { enlargements, shrinks, messagesSent, messagesReceived, limitRefusals, rendezvousWaits, rendezvousReadTimeouts };
  }

  /**
   * Close gracefully: new sends are refused, the outstanding ones go out and are placed, then
   * the peer is told (its iteration ends after our last message; its own sends still
   * outstanding reject with ERR_CLOSED). Resolves when the QP and every region are released.
   */
  close(): Promise<void> {
    return this.#lc.close(() => this.#feed());
  }

  get #torn(): boolean {
    return this.#life?.ended === true;
  }

  /** Made at the first close(), owed promise or teardown: an idle channel holds none. */
  get #lc(): Lifecycle {
    return (this.#life ??= new Lifecycle(channelClosed));
  }

  // ---- the shell ----------------------------------------------------------------------------

  /** flush false: inside #flush, which posts what this queued after the actions it holds (in the core's order). */
  #feed(flush = true): void {
    const now = clock();
    while (this.#waiting.length > 0 && !this.#torn && this.#core.out.outstanding < this.#core.o.highWaterMark) {
      const w = this.#waiting.shift()!;
      const seq = this.#core.send(w.bytes, w.value, now, false);
      (this.#sends ??= new Map()).set(seq, w);
    }
    if (this.#life?.closing && !(this.#bits & S.closeCalled) && this.#waiting.length === 0 && !this.#torn) {
      this.#bits |= S.closeCalled;
      this.#core.close(now);
    }
    this.#core.pump(now);
    if (flush) this.#flush();
  }

  /** @internal a completion for this channel's QP. */
  onWc(wc: WorkCompletion): void {
    const now = clock();
    const core = this.#core;
    if (wc.opcode !== WcOpcode.Recv && wc.opcode !== WcOpcode.RecvRdmaWithImm && wrKindOf(Number(wc.wrId)) === WrKind.Dedup) {
      this.#dedup?.onWc(wc);
      return;
    }
    if (wc.opcode === WcOpcode.Recv || wc.opcode === WcOpcode.RecvRdmaWithImm) {
      if (wc.status !== WcStatus.Success) core.handleRecvError(outcome(wc, this.#qp), now);
      else if (wc.opcode === WcOpcode.Recv) core.handleRecv(wc.byteLen, now);
      else core.handleImm(wc.imm ?? 0, wc.byteLen, now);
    } else {
      core.handleComplete(Number(wc.wrId), outcome(wc, this.#qp), now);
    }
  }

  /** @internal the hub fed every completion of one poll. */
  afterBatch(): void {
    this.#flush();
  }

  /** @internal */
  onDeviceGone(message: string): void {
    this.#core.handleQpError(message, clock());
    this.#flush();
  }

  /**
   * The core's actions, carried out in the order it made them. Never nested: an action that
   * calls back here (a 'placed' resolves a send, which feeds the next) only marks more to do; a
   * nested flush would post the next control message before those this one still holds.
   */
  #flush(): void {
    if (this.#bits & S.flushing) return void (this.#bits |= S.flushAgain);
    this.#bits |= S.flushing;
    const core = this.#core;
    try {
      let refused = false;
      for (let pass = 0, again = true; again && pass < 1000; pass++, again = (this.#bits & S.flushAgain) !== 0) {
        this.#bits &= ~S.flushAgain;
        core.handleBatchEnd(clock());
        for (let a = core.pollAction(); a; a = core.pollAction()) {
          // After a refused post nothing more goes to the peer (it would arrive out of order).
          if (refused && (a.kind === 'recv' || a.kind === 'send' || a.kind === 'write' || a.kind === 'read')) continue;
          try {
            this.#act(a);
          } catch (e) {
            // A post the verbs layer refused (QP gone, queue full): the channel cannot go on.
            refused = true;
            core.fail('closed', `posting failed: ${(e as Error).message}`);
          }
        }
      }
    } finally {
      this.#bits &= ~S.flushing;
    }
    this.#arm();
  }

  #act(a: Action): void {
    const qp = this.#qp;
    switch (a.kind) {
      case 'recv':
      case 'send':
      case 'write':
      case 'read':
        return postAction(qp, a);
      case 'connected':
        this.#bits |= S.connected;
        this.#connected?.settle.resolve();
        this.#connected = undefined;
        // #connected was its only owed promise: an open channel keeps no lifecycle until close().
        if (this.#life && !this.#life.closing) this.#life = undefined;
        return;
      case 'placed': {
        const p = this.#sends?.get(a.seq);
        this.#sends?.delete(a.seq);
        p?.resolve();
        this.#feed(false);
        return;
      }
      case 'readable':
        this.#routeDedupHeads(false);
        this.#wake();
        return;
      case 'ended':
        this.#wake();
        return;
      case 'failed': {
        const err = (this.#error = new SabreError(CODE[a.cause], `channel: ${a.message}`));
        // At once, not at teardown (which may wait for the abort to reach the peer).
        for (const p of this.#sends?.values() ?? []) p.reject(err);
        this.#sends = undefined;
        for (const w of this.#waiting.splice(0)) w.reject(err);
        return;
      }
      case 'teardown':
        return this.#teardown();
    }
  }

  #teardown(): void {
    if (this.#torn) return;
    const err = this.#error ?? new SabreError(ErrorCode.Closed, 'channel closed before the message was placed');
    // Ended first: whatever the release below sets off finds a channel that is gone. close()'s
    // promise resolves after this turn, when the rest is done.
    this.#lc.end(err);
    if (this.#timer) clearTimeout(this.#timer);
    this.#timer = undefined;
    this.#qp.destroy();
    this.#core.releaseMemory();
    this.#dedup?.close(err);
    for (const p of this.#sends?.values() ?? []) p.reject(err);
    this.#sends = undefined;
    for (const w of this.#waiting.splice(0)) w.reject(err);
    this.#connected = undefined;
    const s = this.counters();
    this.#hub.remove(this.#qp.qpn, this.#error ? 'failed' : 'closed', s);
    this.#hub.unreserve(this.#reserved);
    this.#hub.forget(this);
    this.#hub.returnPd(this.#pd);
    this.#wake();
    this.onTeardown?.();
    this.onTeardown = undefined;
  }

  #wake(): void {
    const rs = this.#readers;
    while (rs?.length) {
      const r = this.#poll();
      if (!r) return;
      const w = rs.shift()!;
      if (r instanceof Error) w.reject(r);
      else w.resolve(r);
    }
  }

  #arm(): void {
    if (this.#torn) return;
    const at = this.#core.pollTimeout();
    if (at === undefined) {
      if (this.#timer) clearTimeout(this.#timer);
      this.#timer = undefined;
      this.#timerAt = undefined;
      return;
    }
    if (this.#timer && this.#timerAt !== undefined && at >= this.#timerAt) return;
    if (this.#timer) clearTimeout(this.#timer);
    this.#timerAt = at;
    // A closure per arming, not one per channel: idle channels have no deadline and no timer.
    this.#timer = setTimeout(() => this.#onTimer(), Math.max(0, at - clock()) + 1);
    this.#timer.unref();
  }

  #onTimer(): void {
    this.#timer = undefined;
    this.#timerAt = undefined;
    if (this.#torn) return;
    this.#core.handleTimeout(clock());
    this.#flush();
  }

  /** @internal tear down now (connect failed after the QP was made; 'limit': refused, the peer is told). */
  abort(message: string, kind: 'closed' | 'limit' = 'closed'): void {
    if (this.#torn) return;
    this.#core.fail(kind, message);
    this.#flush();
  }
}

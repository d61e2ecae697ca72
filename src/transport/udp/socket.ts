// The node:dgram shell around the sans-I/O endpoint: binds one or more sockets, feeds every
// datagram to the endpoint, flushes once per event-loop turn (libuv hands up to 32 datagrams
// per socket per wake-up, so one flush covers a batch), sends with a gathering send
// (header, payload, trailer: no copy of the payload). The shell keeps no timer: the endpoint's
// deadlines are its owner's (the NIC driver's one timer, through the udp link), or, for a bare
// shell, ./standalone-timer.ts's. Several sockets stripe outgoing datagrams (multipath).
import dgram from 'node:dgram';
import { isIP } from 'node:net';
import { performance } from 'node:perf_hooks';
import type { Owns } from '../../core/detach.js';
import { ErrorCode, SabreError } from '../../core/errors.js';
import { afterAnswers, job } from '../job.js';
import type { TxPayload } from './context-options.js';
import type { CrcOffloadLike } from './crc-offload.js';
import { literalLookup } from './literal-lookup.js';
import { UdpIntegrity } from '../../wire/spec.js';
import { udpTrailerKind } from '../../wire/udp.js';
import { noteReceived } from '../../core/heap-reuse.js';
import { UdpEndpoint, type Delivery, type OutDatagram, type PeerAddress } from './endpoint.js';
import type { RxArea, RxWaiting, UdpAddress, UdpHandlers, UdpSocketOptions } from './socket-types.js';
import { standaloneTimer } from './standalone-timer.js';

/**
 * How long close() lingers for its last payloads (close notices, and whatever else is not yet
 * acknowledged) to be acknowledged by their peers, the contexts' timers sending a lost one
 * again meanwhile. Only a peer that stopped answering (or never acknowledges) makes close wait
 * this long; a name still to resolve is dropped at the end of it.
 */
export const CLOSE_GRACE_MS = 500;
/** Bound on close()'s linger loop: it wakes on a timer or a flush, and this many times at most. */
const LINGER_WAKES = 1000;

/**
 * A read burst of at least this many bytes is bandwidth-bound: it is delivered every rxBurst
 * datagrams, not every burst (small datagrams keep the shorter spacing, see rxBurst).
 */
const LARGE_RX_BURST = 256 << 10;
/** Datagrams up to this long are latency-bound (see the receive handler). */
const SHORT_DATAGRAM = 1024;

export type { RxArea, UdpAddress, UdpHandlers, UdpSocketOptions } from './socket-types.js';

export class UdpSockets {
  readonly endpoint: UdpEndpoint;
  readonly address: UdpAddress;
  /** rxIdle: datagrams that changed nothing (refused, strays): no flush owed for them. */
  readonly counters = { sendErrors: 0, flushes: 0, rxIdle: 0, txBySocket: [] as number[], rxOffloaded: 0, rxOffloadedBadCrc: 0, txOffloaded: 0, offloadFailures: 0, offloadBackoffs: 0 };
  /** Until then the CRCs are done on this thread: a batch came back slower than computing it here would have been (no spare core). */
  private offloadOffUntil = 0;
  /** Receive areas (three with a receive offload), the one arrivals are copied into, and those a batch holds. */
  private readonly rxAreas: RxArea[];
  private rxCur = 0;
  private readonly rxHeld: boolean[];
  /** Datagrams in rxAreas[rxCur] waiting for an offloaded CRC check, and whether a batch is out. */
  private rxWait: RxWaiting[] = [];
  private rxBusy = false;
  /** Datagrams waiting behind the transmit batch in flight (sent in order once it is back). */
  private txq: OutDatagram[] = [];
  private txqBase = 0;
  /** Absolute index below which every queued datagram has its CRC. */
  private txReady = 0;
  private txBusy = false;
  /** After every flush (the deadline may have moved): the owner re-arms its timer. */
  private readonly timerChanged: () => void;
  /** A flush is queued for the check phase (after this turn's datagrams are read). */
  private flushScheduled = false;
  /** A flush is queued as a microtask (output the owner produced outside a flush). */
  private microScheduled = false;
  /** Inside flush() before its poll: output queued now leaves in this flush. */
  private collecting = false;
  /** The sender of the latest datagram. */
  private lastFrom: PeerAddress | undefined;
  /** Datagrams, and their bytes, received since the last delivery. */
  private rxSinceFlush = 0;
  private rxBytesSinceFlush = 0;
  /** A delivery's release made a window update due (UdpEndpoint.release). */
  private releaseDue = false;
  private closed = false;
  /** During close()'s last flush: one promise per datagram, settled when the kernel took it. */
  private tracked: Promise<void>[] | undefined;
  /** Sends to a host name node has not finished (it holds their parts while it resolves); the last IP literal sent to. */
  private nameSends = 0;
  private literal = '';
  private readonly nameSent = (): void => void this.nameSends--;
  /** While close() lingers: wakes it after a flush (an ACK may have come). */
  private lingerWake: (() => void) | undefined;

  private constructor(
    private readonly sockets: dgram.Socket[],
    endpoint: UdpEndpoint,
    address: UdpAddress,
    private readonly handlers: UdpHandlers,
    private readonly manualRelease: boolean,
    rxFilter: ((d: Uint8Array) => boolean) | undefined,
    private readonly deferAnswers: boolean,
    rxAreas: RxArea[],
    private readonly burst: number,
    private readonly rxBurst: number,
    private readonly offload: CrcOffloadLike | undefined,
    private readonly offloadBackoff: boolean,
  ) {
    this.endpoint = endpoint;
    this.address = address;
    this.rxAreas = rxAreas;
    this.rxHeld = rxAreas.map(() => false);
    this.timerChanged = handlers.onTimerChanged ?? standaloneTimer(this, () => performance.now());
    const rxOffload = offload !== undefined && rxAreas.length >= 3 ? offload : undefined;
    const maxDatagram = endpoint.opts.maxDatagram;
    for (const s of sockets) {
      s.on('message', (msg, rinfo) => {
        if (this.closed || (rxFilter !== undefined && !rxFilter(msg))) return;
        noteReceived(msg.length);
        const area = this.rxAreas[this.rxCur];
        const inDev = area !== undefined && msg.length <= maxDatagram ? area.copy(msg) : undefined;
        // One address object per run of datagrams from one sender, not one per datagram (the
        // endpoint may keep it as the peer's: it is never written).
        let from = this.lastFrom;
        if (from === undefined || from.port !== rinfo.port || from.host !== rinfo.address) this.lastFrom = from = { host: rinfo.address, port: rinfo.port };
        const now = performance.now();
        // Work sharing: with a batch out and a burst already waiting behind it, this thread
        // checks the CRC itself rather than let the worker fall behind (on a machine with no
        // spare core the worker is often not even scheduled).
        if (
          rxOffload !== undefined && inDev !== undefined && inDev.length >= rxOffload.minBytes && udpTrailerKind(inDev) === UdpIntegrity.Crc32c &&
          (!this.rxBusy || this.rxWait.length < this.burst) && now >= this.offloadOffUntil
        ) {
          // Checked by a worker; the endpoint sees it when the check is back (rxBatch).
          this.rxWait.push({ buf: inDev, from, at: now });
          if (this.rxWait.length >= this.burst) this.rxBatch();
          else this.scheduleFlush();
          return;
        }
        // A datagram that changed nothing (refused, a stray) owes no flush: a flush visits every
        // context, and strays paced one per wake-up would buy one each (found by an audit).
        if (!this.endpoint.receive(inDev ?? msg, from, now)) {
          this.counters.rxIdle++;
          if (inDev !== undefined) area!.unCopy(inDev);
          return;
        }
        // libuv reads up to 32 datagrams per wake-up before the check phase: 2 MiB at 64 KiB.
        // Waiting for all of them before acking left the sender idle while we read (its window
        // was in our socket buffer); an rxBurst's worth is delivered and acked at once instead.
        // A short datagram that starts a read burst (a request, an answer, an ACK) is handled
        // before libuv reads on: its answer leaves from this callback instead of after the
        // trip to the check phase (saved per hop of a ping-pong). Later datagrams of
        // the same burst wait for the check phase as before, so a stream of small messages
        // costs one extra flush per wake-up, not one per datagram.
        const n = ++this.rxSinceFlush;
        this.rxBytesSinceFlush += msg.length;
        if (
          n >= this.rxBurst || (n >= this.burst && this.rxBytesSinceFlush < LARGE_RX_BURST) ||
          (n === 1 && msg.length <= SHORT_DATAGRAM && !this.flushScheduled)
        ) {
          if (!this.microScheduled) {
            this.microScheduled = true;
            job(this.onRxBurst);
          }
        } else this.scheduleFlush();
      });
      // A send to a closed port comes back as ICMP on some systems: the transport already
      // treats silence as loss, so socket errors are counted, never thrown.
      s.on('error', () => {
        this.counters.sendErrors++;
      });
    }
  }

  static async open(opts: UdpSocketOptions = {}, handlers: UdpHandlers = {}): Promise<UdpSockets> {
    const host = opts.host ?? '127.0.0.1';
    const n = opts.sockets ?? 1;
    if (!Number.isInteger(n) || n < 1 || n > 16) throw new SabreError(ErrorCode.InvalidArgument, 'sockets must be 1..16');
    const type = host.includes(':') ? 'udp6' : 'udp4';
    const sockets: dgram.Socket[] = [];
    try {
      for (let i = 0; i < n; i++) {
        const s = dgram.createSocket({ type, lookup: literalLookup });
        sockets.push(s);
        await new Promise<void>((resolve, reject) => {
          s.once('error', reject);
          s.bind({ address: host, port: i === 0 ? opts.port ?? 0 : 0 }, () => {
            s.off('error', reject);
            resolve();
          });
        });
        const want = opts.socketBufferBytes ?? 4 << 20;
        try {
          s.setRecvBufferSize(want);
          s.setSendBufferSize(want);
        } catch {
          // Capped by the kernel: flow control copes with what we get.
        }
      }
    } catch (err) {
      for (const s of sockets) s.close();
      throw new SabreError(ErrorCode.Unreachable, `cannot bind UDP ${host}:${opts.port ?? 0}`, { cause: err });
    }
    const off = opts.offload;
    const endpoint = new UdpEndpoint({
      ...opts, paths: n,
      ...(off !== undefined ? { txOffloadable: (p: Uint8Array) => p.length >= off.minBytes && p.buffer === off.buffer } : {}),
    });
    const a = sockets[0].address();
    const areas = opts.rxArea === undefined ? [] : [opts.rxArea, ...(opts.rxSpareAreas ?? [])];
    const burst = opts.burst ?? Math.max(4, Math.min(32, Math.floor((512 << 10) / endpoint.opts.mtu)));
    const rxBurst = opts.rxBurst ?? Math.max(4, Math.min(32, Math.floor((1 << 20) / endpoint.opts.mtu)));
    return new UdpSockets(
      sockets, endpoint, { transport: 'udp', host: a.address, port: a.port }, handlers, opts.manualRelease ?? false, opts.rxFilter,
      opts.deferAnswers ?? false, areas, Math.min(burst, off?.maxBatch ?? burst), rxBurst, off, opts.offloadBackoff ?? true,
    );
  }

  /** The incarnation of `peer`'s context (0: none). */
  incarnationOf(peer: PeerAddress): number {
    return this.endpoint.incarnationOf(peer);
  }

  /** Payloads send() would queue for `peer` now. */
  sendRoom(peer: PeerAddress): number {
    return this.closed ? 0 : this.endpoint.sendRoom(peer);
  }

  /** Memory is about to be reused (core/detach.ts): false while the system's send queue may still read views of it. */
  detach(owns: Owns): boolean {
    this.endpoint.detach(owns, this.txq);
    return this.closed || (this.nameSends === 0 && this.sockets.every((s) => s.getSendQueueCount() === 0));
  }

  /** Queue a payload for `peer`; returns its id (see onAcked / onFailed). */
  send(peer: PeerAddress, payload: TxPayload, dstQpn = 0, srcQpn = 0): number {
    if (this.closed) throw new SabreError(ErrorCode.Closed, 'transport closed');
    const id = this.endpoint.send(peer, payload, performance.now(), dstQpn, srcQpn);
    this.scheduleFlush();
    return id;
  }

  /**
   * The owner queued output of its own (see onBeforePoll). It leaves at the end of the current
   * job (a microtask), not one loop iteration later: every post of one synchronous run still
   * goes out together, and a ping-pong hop costs no extra loop iteration (on a VM each one is a
   * trip through epoll and colder caches).
   */
  requestFlush(): void {
    if (this.collecting || this.microScheduled || this.closed) return;
    this.microScheduled = true;
    job(this.onMicrotask);
  }

  /** Held: new DATA is dropped unacknowledged, behind a shut window; released: every peer hears at once that it opened. */
  holdReceive(hold: boolean): void {
    this.endpoint.rxHold.held = hold;
    if (hold) return;
    this.endpoint.windowOpened();
    this.scheduleFlush();
  }

  release(ctx: number, n = 1): void {
    // Only a window update that is due now needs a flush; otherwise the next one carries it.
    if (this.endpoint.release(ctx, n)) this.scheduleFlush();
  }

  /**
   * Send what is owed first — the ACKs for what was received, frames the owner queued (a
   * close notice) — and let the kernel take it (a peer that sent us its last message must hear
   * it arrived, or it retries into a closed port and reports it lost); then linger until the
   * peers have acknowledged every payload sent to them, at most `graceMs` in all (see
   * linger()); then fail whatever is outstanding (reported through onFailed) and close every
   * socket.
   */
  async close(graceMs = CLOSE_GRACE_MS): Promise<void> {
    if (this.closed) return;
    if (graceMs > 0) {
      const until = performance.now() + graceMs;
      this.endpoint.ackOwed();
      const sent: Promise<void>[] = (this.tracked = []);
      this.flush(true);
      this.tracked = undefined;
      if (sent.length > 0) await Promise.race([Promise.all(sent), new Promise<void>((r) => setTimeout(r, graceMs).unref())]);
      await this.linger(until);
      if (this.closed) return;
      // What came in while lingering is acknowledged before the contexts go (its delayed ACK
      // may not be due yet): else the peer retries it into a closed port.
      this.endpoint.ackOwed();
      this.flush(true);
    }
    const r = this.endpoint.close();
    if (r.failed.length > 0) this.handlers.onFailed?.(r.failed);
    this.closed = true;
    // Nothing is due any more (pollTimeout): the owner's timer stops.
    this.timerChanged();
    await Promise.all(this.sockets.map((s) => new Promise<void>((resolve) => s.close(() => resolve()))));
  }

  /**
   * close()'s wait for the peers' acknowledgements, until `until`. One flush was not enough:
   * a close notice can be lost, or wait behind retransmissions in a window an RTO collapsed
   * (the peer's ACKs came late: a busy thread), and failing the contexts with the sockets gave
   * it up — the peer then heard of the close only from its keepalive, seconds later. Meanwhile
   * the sockets receive as usual (the ACKs, which open the window) and the contexts' timers run
   * here, the owner's having stopped with its device: what is lost goes again. It ends as soon
   * as nothing is unacknowledged (or every context with something has failed).
   */
  private async linger(until: number): Promise<void> {
    for (let i = 0; i < LINGER_WAKES && !this.closed && this.endpoint.sending; i++) {
      const now = performance.now();
      if (now >= until) return;
      const at = Math.min(this.endpoint.nextDeadline(), until);
      await new Promise<void>((resolve) => {
        const t = setTimeout(() => {
          this.lingerWake = undefined;
          resolve();
        }, Math.max(0, at - now));
        t.unref();
        this.lingerWake = () => {
          clearTimeout(t);
          this.lingerWake = undefined;
          resolve();
        };
      });
      this.handleTimeout(performance.now());
    }
  }

  private scheduleFlush(): void {
    if (this.flushScheduled || this.collecting || this.closed) return;
    this.flushScheduled = true;
    setImmediate(this.onImmediate);
  }

  private onImmediate = (): void => {
    this.flushScheduled = false;
    // The end of a read burst: what waits for a worker's CRC check goes now.
    if (this.rxWait.length > 0) this.rxBatch();
    this.flush(false);
  };

  /** Hand the waiting datagrams' CRC checks to the workers (one batch out at a time). */
  private rxBatch(): void {
    if (this.rxBusy || this.rxWait.length === 0 || this.closed) return;
    // Arrivals go to a free area meanwhile (one is: a batch out and one being processed hold two).
    const next = this.rxHeld.findIndex((h, i) => !h && i !== this.rxCur);
    if (next < 0) return;
    const batch = this.rxWait;
    this.rxWait = [];
    this.rxBusy = true;
    const area = this.rxCur;
    this.rxHeld[area] = true;
    this.rxCur = next;
    const n = batch.length;
    const ptr = new Array<number>(n);
    const len = new Array<number>(n);
    const prev = new Array<number>(n).fill(0);
    for (let i = 0; i < n; i++) {
      ptr[i] = batch[i]!.buf.byteOffset;
      len[i] = batch[i]!.buf.length - 4;
    }
    this.counters.rxOffloaded += n;
    void this.offloadRun(0, ptr, len, prev, n).then((crcs) => {
      this.rxBusy = false;
      if (this.closed) return;
      // The next batch first: a worker checks it while this thread processes this one.
      if (this.rxWait.length > 0) this.rxBatch();
      // A failed worker: the endpoint checks the CRC itself.
      const bad0 = this.endpoint.counters.badCrc;
      for (let i = 0; i < n; i++) this.endpoint.receive(batch[i]!.buf, batch[i]!.from, batch[i]!.at, crcs?.[i]);
      if (crcs !== undefined) this.counters.rxOffloadedBadCrc += this.endpoint.counters.badCrc - bad0;
      this.flush(false);
      // flush() delivered every datagram of the batch: the engine keeps no view of them.
      this.rxAreas[area]!.reset();
      this.rxHeld[area] = false;
      if (this.rxWait.length > 0) this.scheduleFlush();
    });
  }

  /**
   * One batch on the workers; resolves with the CRCs, or undefined when a worker failed (the
   * caller computes them here). A batch that came back slower than twice what this thread
   * takes for it (measured per byte, with at least 50 µs of slack for the hand-off) means
   * offloading costs more than it saves now (no spare core): inline for 200 ms, then try again.
   */
  private async offloadRun(dir: 0 | 1, ptr: number[], len: number[], prev: number[], n: number): Promise<Uint32Array | undefined> {
    const t0 = performance.now();
    try {
      const crcs = await this.offload!.run(dir, ptr, len, prev, n);
      let bytes = 0;
      for (let i = 0; i < n; i++) bytes += len[i]!;
      if (this.offloadBackoff && performance.now() - t0 > Math.max(0.05, 2 * bytes * 0.5e-6)) {
        this.offloadOffUntil = performance.now() + 200;
        this.counters.offloadBackoffs++;
      }
      return crcs;
    } catch {
      this.counters.offloadFailures++;
      return undefined;
    }
  }

  private onRxBurst = (): void => {
    this.microScheduled = false;
    this.flush(false);
  };

  private onMicrotask = (): void => {
    this.microScheduled = false;
    this.flush(true);
  };

  /** Each delivery to the owner; its credit goes back at once unless the owner releases it (manualRelease). */
  private handOver(ds: readonly Delivery[]): void {
    const h = this.handlers;
    for (const d of ds) {
      h.onDelivery?.(d);
      if (!this.manualRelease && this.endpoint.release(d.ctx, 1)) this.releaseDue = true;
    }
  }

  /** Hand the deliveries taken so far to the owner; returns how many. */
  private deliver(): number {
    const h = this.handlers;
    this.rxSinceFlush = 0;
    this.rxBytesSinceFlush = 0;
    const delivered = this.endpoint.takeDelivered();
    this.handOver(delivered);
    if (delivered.length > 0) h.onDeliveriesDone?.();
    // Nothing refers to the received bytes any more: the owner consumed every delivery (those
    // waiting for a worker's check are still in the area: it is reset once they are delivered).
    if (this.rxWait.length === 0) this.rxAreas[this.rxCur]?.reset();
    return delivered.length;
  }

  private flush(answer: boolean): void {
    if (this.closed) return;
    this.counters.flushes++;
    const h = this.handlers;
    // Deliver before building datagrams: an owner that answers at once (an RDMA responder)
    // has its answer leave in this flush, carrying the ACK — no separate ACK datagram.
    let n: number;
    this.collecting = true;
    try {
      n = this.deliver();
      if (n > 0 && this.deferAnswers && !answer) {
        // Let the microtasks these deliveries woke run first (see deferAnswers).
        if (!this.microScheduled) {
          this.microScheduled = true;
          afterAnswers(this.onMicrotask);
        }
        return;
      }
      h.onBeforePoll?.();
    } finally {
      // A handler that throws must not leave every later flush request ignored.
      this.collecting = false;
    }
    const now = performance.now();
    const r = this.endpoint.poll(now, this.burst);
    if (this.offload === undefined) for (const d of r.datagrams) this.transmit(d);
    else this.transmitOffloaded(r.datagrams);
    // Releases before the poll went out in it; what is due from here on needs another flush.
    this.releaseDue = false;
    if (r.delivered.length > 0) {
      // Payloads that came in while the owner answered: theirs is the next engine step.
      this.handOver(r.delivered);
      h.onDeliveriesDone?.();
    }
    if (r.acked.length > 0) h.onAcked?.(r.acked);
    if (r.failed.length > 0) h.onFailed?.(r.failed);
    // More output due now: the burst limit held some back, or a release opened the window
    // enough to announce it (a handler's own sends schedule themselves through send()). Not
    // after every delivery: in a ping-pong that was a check-phase flush with nothing to send,
    // one more trip through epoll per hop.
    if (r.more || this.releaseDue) this.scheduleFlush();
    this.timerChanged();
    this.lingerWake?.();
  }

  /** When handleTimeout is next due (Infinity: nothing is, or the shell is closed). */
  pollTimeout(): number {
    return this.closed ? Infinity : this.endpoint.nextDeadline();
  }

  /** Outstanding work (not just idle reclaim): a timer for it keeps the process alive. */
  get busy(): boolean {
    return this.endpoint.busy;
  }

  /** The owner's timer fired (onTimerChanged): retransmit, probe, reclaim what is due. */
  handleTimeout(now: number): void {
    if (this.closed) return;
    if (this.endpoint.nextDeadline() > now) {
      this.timerChanged();
      return;
    }
    this.endpoint.tick(now);
    this.flush(true);
  }

  private transmit(d: OutDatagram): void {
    const i = d.path % this.sockets.length;
    this.counters.txBySocket[i] = (this.counters.txBySocket[i] ?? 0) + 1;
    // No callback: node then tries a synchronous send and, when it went out, queues no
    // completion (with one, every datagram cost an extra loop iteration to call it back).
    // Failures surface as the socket's error event, counted in sendErrors.
    const t = this.tracked;
    if (t === undefined) {
      // A peer named by host name: node holds the parts while it resolves (detach must know).
      const host = d.to.host;
      if (host !== this.literal && isIP(host) !== 0) this.literal = host;
      if (host === this.literal) this.sockets[i]!.send(d.parts, d.to.port, host);
      else {
        this.nameSends++;
        this.sockets[i]!.send(d.parts, d.to.port, d.to.host, this.nameSent);
      }
    } else t.push(new Promise<void>((r) => this.sockets[i]!.send(d.parts, d.to.port, d.to.host, () => r())));
  }

  /**
   * Datagrams whose CRC a worker computes go out in order once it is back; those polled
   * meanwhile wait behind them (DATA overtaking DATA would look like loss to the peer's SACK),
   * except ACK-only datagrams, which carry no PSN.
   */
  private transmitOffloaded(ds: OutDatagram[]): void {
    for (const d of ds) {
      if (d.parts.length === 1 && this.txq.length === 0) this.transmit(d);
      else {
        // Work sharing (see the receive side): while a batch is out, this thread computes the
        // CRCs of what queues behind it, so they are ready to go when the batch is back.
        if (this.txBusy) this.sealHere(d);
        this.txq.push(d);
      }
    }
    this.txKick();
  }

  /**
   * Submit the next batch of CRCs if none is out, then send the ready prefix of the queue —
   * in that order, so the worker computes batch k+1 while this thread sends batch k.
   * Indices are absolute (txqBase is the absolute index of txq[0]).
   */
  private txKick(): void {
    if (this.closed) return;
    const end = this.txqBase + this.txq.length;
    if (!this.txBusy) {
      let i = this.txReady;
      while (i < end && this.txq[i - this.txqBase]!.pendingCrc === undefined) i++;
      this.txReady = i;
      if (i < end) {
        if (performance.now() >= this.offloadOffUntil) this.txSubmit(i, end);
        else {
          for (let k = i; k < end; k++) this.sealHere(this.txq[k - this.txqBase]!);
          this.txReady = end;
        }
      }
    }
    const n = this.txReady - this.txqBase;
    if (n > 0) {
      for (let k = 0; k < n; k++) this.transmit(this.txq[k]!);
      this.txq = this.txq.slice(n);
      this.txqBase = this.txReady;
    }
  }

  private sealHere(d: OutDatagram): void {
    const p = d.pendingCrc;
    if (p !== undefined) this.endpoint.sealDeferred(d, this.endpoint.opts.crc32c(d.parts[p.part]!, p.prefix));
  }

  private txSubmit(from: number, end: number): void {
    const off = this.offload!;
    const batch: OutDatagram[] = [];
    let i = from;
    while (i < end && batch.length < off.maxBatch) {
      const d = this.txq[i++ - this.txqBase]!;
      if (d.pendingCrc !== undefined) batch.push(d);
    }
    const batchEnd = i;
    const n = batch.length;
    const ptr = new Array<number>(n);
    const len = new Array<number>(n);
    const prev = new Array<number>(n);
    for (let k = 0; k < n; k++) {
      const p = batch[k]!.pendingCrc!;
      const part = batch[k]!.parts[p.part]!;
      ptr[k] = part.byteOffset;
      len[k] = part.length;
      prev[k] = p.prefix;
    }
    this.txBusy = true;
    this.counters.txOffloaded += n;
    void this.offloadRun(1, ptr, len, prev, n).then((crcs) => {
      this.txBusy = false;
      if (this.closed) return;
      // A failed worker: computed here instead.
      for (let k = 0; k < n; k++) {
        if (crcs !== undefined) this.endpoint.sealDeferred(batch[k]!, crcs[k]!);
        else this.sealHere(batch[k]!);
      }
      this.txReady = batchEnd;
      this.txKick();
    });
  }
}

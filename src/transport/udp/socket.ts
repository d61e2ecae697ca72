// The node:dgram shell around the sans-I/O endpoint: binds one or more sockets, feeds every
// datagram to the endpoint, flushes once per event-loop turn (libuv hands up to 32 datagrams
// per socket per wake-up, so one flush covers a batch), sends with a gathering send
// (header, payload, trailer: no copy of the payload) and runs one timer from the endpoint's
// next deadline. Several sockets stripe outgoing datagrams (multipath).
import dgram from 'node:dgram';
import { performance } from 'node:perf_hooks';
import { ErrorCode, SabreError } from '../../errors.js';
import type { TxPayload } from './context.js';
import { UdpEndpoint, type Delivery, type EndpointOptions, type Failure, type PeerAddress } from './endpoint.js';

export interface UdpAddress {
  transport: 'udp';
  host: string;
  port: number;
}

export interface UdpSocketOptions extends Partial<EndpointOptions> {
  /** Bind address; default 127.0.0.1. */
  host?: string;
  /** Bind port of the first socket; 0 (default) picks an ephemeral one. */
  port?: number;
  /** Sockets to stripe over (the others bind ephemeral ports on the same host). Default 1. */
  sockets?: number;
  /** Kernel buffer sizes to ask for (capped by net.core.*mem_max). Default 4 MiB. */
  socketBufferBytes?: number;
  /** When true the owner calls release() for each delivery; otherwise it happens on return. */
  manualRelease?: boolean;
  /** Test/bench hook: return false to drop an incoming datagram before the endpoint sees it. */
  rxFilter?: (datagram: Uint8Array) => boolean;
  /**
   * After a flush's deliveries, build its datagrams a few microtask hops later instead of at
   * once: a user awaiting the completion those deliveries produced runs first, so its answer
   * leaves in the same datagram as the owner's own answers and the ACK — still in this
   * event-loop turn, with no extra loop iteration.
   */
  deferAnswers?: boolean;
  /**
   * DATA datagrams sent per context per flush before the shell yields to read what arrived
   * (ACKs that open the window, the peer's answers). Default: about 512 KiB of datagrams
   * (8 at mtu 65000), at least 4, at most 32. Without it a sender with a full window writes
   * the whole window in one synchronous burst, reads nothing meanwhile, and sender and
   * receiver take turns instead of overlapping.
   */
  burst?: number;
  /** Where each datagram is copied on arrival (e.g. device memory); reset after each flush's deliveries. */
  rxArea?: RxArea;
}

/** A receive area: copy() places a datagram (undefined: full, keep the node Buffer); reset() frees all. */
export interface RxArea {
  copy(datagram: Uint8Array): Uint8Array | undefined;
  reset(): void;
}

export interface UdpHandlers {
  /** A payload from a peer, exactly once. The view is valid only during the call. */
  onDelivery?: (d: Delivery) => void;
  /** Payload ids the peer's engine now holds. */
  onAcked?: (ids: number[]) => void;
  onFailed?: (f: Failure[]) => void;
  /**
   * After the deliveries of one flush, before its datagrams are built: whatever the owner
   * sends now leaves in this flush and carries the ACK for what it answers.
   */
  onDeliveriesDone?: () => void;
  /** Just before the endpoint builds datagrams: the owner hands over what it has queued. */
  onBeforePoll?: () => void;
}

export class UdpSocketTransport {
  readonly endpoint: UdpEndpoint;
  readonly address: UdpAddress;
  readonly counters = { sendErrors: 0, flushes: 0, txBySocket: [] as number[] };
  private timer: NodeJS.Timeout | undefined;
  private timerAt = Infinity;
  /** A flush is queued for the check phase (after this turn's datagrams are read). */
  private flushScheduled = false;
  /** A flush is queued as a microtask (output the owner produced outside a flush). */
  private microScheduled = false;
  /** Inside flush() before its poll: output queued now leaves in this flush. */
  private collecting = false;
  /** Datagrams received since the last delivery. */
  private rxSinceFlush = 0;
  private closed = false;

  private constructor(
    private readonly sockets: dgram.Socket[],
    endpoint: UdpEndpoint,
    address: UdpAddress,
    private readonly handlers: UdpHandlers,
    private readonly manualRelease: boolean,
    rxFilter: ((d: Uint8Array) => boolean) | undefined,
    private readonly deferAnswers: boolean,
    private readonly rxArea: RxArea | undefined,
    private readonly burst: number,
  ) {
    this.endpoint = endpoint;
    this.address = address;
    const maxDatagram = endpoint.opts.maxDatagram;
    for (const s of sockets) {
      s.on('message', (msg, rinfo) => {
        if (this.closed || (rxFilter !== undefined && !rxFilter(msg))) return;
        const buf = rxArea !== undefined && msg.length <= maxDatagram ? rxArea.copy(msg) ?? msg : msg;
        this.endpoint.receive(buf, { host: rinfo.address, port: rinfo.port }, performance.now());
        // libuv reads up to 32 datagrams per wake-up before the check phase: 2 MiB at 64 KiB.
        // Waiting for all of them before acking left the sender idle while we read (its window
        // was in our socket buffer); a burst's worth is delivered and acked at once instead.
        if (++this.rxSinceFlush >= this.burst) {
          if (!this.microScheduled) {
            this.microScheduled = true;
            queueMicrotask(this.onRxBurst);
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

  static async open(opts: UdpSocketOptions = {}, handlers: UdpHandlers = {}): Promise<UdpSocketTransport> {
    const host = opts.host ?? '127.0.0.1';
    const n = opts.sockets ?? 1;
    if (!Number.isInteger(n) || n < 1 || n > 16) throw new SabreError(ErrorCode.InvalidArgument, 'sockets must be 1..16');
    const type = host.includes(':') ? 'udp6' : 'udp4';
    const sockets: dgram.Socket[] = [];
    try {
      for (let i = 0; i < n; i++) {
        const s = dgram.createSocket({ type });
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
    const endpoint = new UdpEndpoint({ ...opts, paths: n });
    const a = sockets[0].address();
    return new UdpSocketTransport(
      sockets, endpoint, { transport: 'udp', host: a.address, port: a.port }, handlers, opts.manualRelease ?? false, opts.rxFilter,
      opts.deferAnswers ?? false, opts.rxArea, opts.burst ?? Math.max(4, Math.min(32, Math.floor((512 << 10) / endpoint.opts.mtu))),
    );
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
    queueMicrotask(this.onMicrotask);
  }

  release(ctx: number, n = 1): void {
    // Only a window update that is due now needs a flush; otherwise the next one carries it.
    if (this.endpoint.release(ctx, n)) this.scheduleFlush();
  }

  /** Fail whatever is outstanding (reported through onFailed), close every socket. */
  async close(): Promise<void> {
    if (this.closed) return;
    const r = this.endpoint.close();
    if (r.failed.length > 0) this.handlers.onFailed?.(r.failed);
    this.closed = true;
    if (this.timer !== undefined) clearTimeout(this.timer);
    this.timer = undefined;
    await Promise.all(this.sockets.map((s) => new Promise<void>((resolve) => s.close(() => resolve()))));
  }

  private scheduleFlush(): void {
    if (this.flushScheduled || this.collecting || this.closed) return;
    this.flushScheduled = true;
    setImmediate(this.onImmediate);
  }

  private onImmediate = (): void => {
    this.flushScheduled = false;
    this.flush(false);
  };

  private onRxBurst = (): void => {
    this.microScheduled = false;
    this.flush(false);
  };

  private onMicrotask = (): void => {
    this.microScheduled = false;
    this.flush(true);
  };

  /** Three hops: an `await cq.wait()` continuation (one to three jobs deep) runs before it. */
  private onAnswersDue = (): void => {
    queueMicrotask(() => queueMicrotask(this.onMicrotask));
  };

  /** Hand the deliveries taken so far to the owner; returns how many. */
  private deliver(): number {
    const h = this.handlers;
    this.rxSinceFlush = 0;
    const delivered = this.endpoint.takeDelivered();
    for (const d of delivered) {
      h.onDelivery?.(d);
      if (!this.manualRelease) this.endpoint.release(d.ctx, 1);
    }
    if (delivered.length > 0) h.onDeliveriesDone?.();
    // Nothing refers to the received bytes any more: the owner consumed every delivery.
    this.rxArea?.reset();
    return delivered.length;
  }

  private flush(answer: boolean): void {
    if (this.closed) return;
    this.counters.flushes++;
    const h = this.handlers;
    // Deliver before building datagrams: an owner that answers at once (an RDMA responder)
    // has its answer leave in this flush, carrying the ACK — no separate ACK datagram.
    this.collecting = true;
    const n = this.deliver();
    if (n > 0 && this.deferAnswers && !answer) {
      // Let the microtasks these deliveries woke run first (see deferAnswers).
      this.collecting = false;
      if (!this.microScheduled) {
        this.microScheduled = true;
        queueMicrotask(this.onAnswersDue);
      }
      return;
    }
    h.onBeforePoll?.();
    this.collecting = false;
    const now = performance.now();
    const r = this.endpoint.poll(now, this.burst);
    for (const d of r.datagrams) {
      const i = d.path % this.sockets.length;
      this.counters.txBySocket[i] = (this.counters.txBySocket[i] ?? 0) + 1;
      this.sockets[i]!.send(d.parts, d.to.port, d.to.host, this.onSent);
    }
    for (const d of r.delivered) {
      h.onDelivery?.(d);
      if (!this.manualRelease) this.endpoint.release(d.ctx, 1);
    }
    if (r.acked.length > 0) h.onAcked?.(r.acked);
    if (r.failed.length > 0) h.onFailed?.(r.failed);
    // Releasing credit or a handler's send may have made more output due now.
    if (r.more || (!this.manualRelease && n + r.delivered.length > 0)) this.scheduleFlush();
    this.armTimer(now);
  }

  private onSent = (err: Error | null): void => {
    if (err) this.counters.sendErrors++;
  };

  // One node timer, left armed when the endpoint's deadline moves later or goes away (it
  // re-checks when it fires): every round trip sets and clears the retransmission deadline, and
  // re-arming a timer each time cost a timer-list insert and removal per hop.
  private armTimer(now: number): void {
    const at = this.endpoint.nextDeadline();
    if (this.timer !== undefined && this.timerAt <= at) {
      // Only outstanding work keeps the process alive; idle reclaim does not.
      if (at === Infinity || !this.endpoint.busy) this.timer.unref();
      else this.timer.ref();
      return;
    }
    if (at === Infinity) return;
    if (this.timer !== undefined) clearTimeout(this.timer);
    this.timerAt = at;
    this.timer = setTimeout(this.onTimer, Math.max(0, at - now));
    if (!this.endpoint.busy) this.timer.unref();
  }

  private onTimer = (): void => {
    this.timer = undefined;
    this.timerAt = Infinity;
    if (this.closed) return;
    const now = performance.now();
    if (this.endpoint.nextDeadline() > now) {
      this.armTimer(now);
      return;
    }
    this.endpoint.tick(now);
    this.flush(true);
  };
}

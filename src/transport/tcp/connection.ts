// One MPA/TCP connection: a node:net socket around the sans-I/O handshake (mpa-handshake.ts)
// and the FPDU framer/deframer (fpdu.ts). It carries whole DDP segments both ways; DDP/RDMAP
// semantics belong to the engine above.
//
// Buffers are bounded: the handshake reads at most one MPA frame (532 bytes), the receive side
// stages at most `rxCapacity` bytes in device memory and hands every whole FPDU on at once
// (synchronously, so nothing piles up), and the send side reports backpressure through send()
// returning false and a 'drain' event; past `maxWriteBuffer` send() throws QueueFull.
import { EventEmitter } from 'node:events';
import net, { type Socket } from 'node:net';
import { detachInPlace, type Owns } from '../../core/detach.js';
import { ErrorCode, SabreError } from '../../core/errors.js';
import { afterAnswers } from '../job.js';
import { encodeDdp, encodeTerminate, RdmapOpcode } from '../../wire/rdmap.js';
import { TAGGED_HDR_LEN, UNTAGGED_HDR_LEN, QN } from '../../wire/spec.js';
import { DDP_CTRL_DDP_T, DDP_CTRL_RDMAP_OPCODE, getDdpCtrlDdp, getDdpCtrlRdmap } from '../../wire/fields.gen.js';
import { defaultEmss, FpduDeframer, FpduFramer, mulpdu, type FramingMemory, type RxUlpdu, type TxSink } from './fpdu.js';
import { MpaHandshake, type MpaConfig, type MpaEvent, type MpaRequestInfo, type MpaResult } from './mpa-handshake.js';
import { TERM, type TermCode } from '../../wire/terminate.js';
import { fault, type TcpFault } from './fault.js';
import { noteReceived } from '../../core/heap-reuse.js';
import type { RxPort } from './rx-port.js';
import { UnownedUlpdus } from './unowned.js';

export { adoptAccepted, dialSocket, RxPort } from './rx-port.js';

export interface TcpConnectionOptions {
  dp: FramingMemory;
  /** Handshake knobs (revision, crc, markers, ird/ord, p2p, timeoutMs). */
  mpa?: Omit<MpaConfig, 'role' | 'privateData'>;
  /** Effective MSS for the MULPDU (default from the peer host: loopback 65483, else 1448). */
  emss?: number;
  /** Receive staging bytes in device memory (default 512 KiB, at least 128 KiB: FpduDeframer). */
  rxCapacity?: number;
  /** Largest ULPDU accepted from the peer (default 65535). */
  maxUlpdu?: number;
  /** send() returns false once this many bytes wait in the socket (default 1 MiB). */
  highWaterMark?: number;
  /** send() throws QueueFull past this (default 64 MiB). */
  maxWriteBuffer?: number;
  /** Clock for the handshake deadline (default Date.now). */
  now?: () => number;
}

/**
 * Connections established per framing memory (one per device), by whether MPA's CRC was
 * negotiated on: dev.stats() shows them (docs/integrity.md). Weakly keyed, so a closed device's
 * entry goes with it.
 */
export interface MpaCrcCounts { mpaCrcOn: number; mpaCrcOff: number }
const crcCounts = new WeakMap<object, MpaCrcCounts>();

export function mpaCrcCounts(dp: object): MpaCrcCounts {
  let c = crcCounts.get(dp);
  if (c === undefined) {
    c = { mpaCrcOn: 0, mpaCrcOff: 0 };
    crcCounts.set(dp, c);
  }
  return c;
}

export type UlpduHandler = (batch: RxUlpdu[], u8: Uint8Array) => void;

/**
 * Bytes gathered into one write before it is flushed early: large enough that the kernel's
 * per-call cost is spread (256 KiB writevs moved bytes faster than 64 KiB ones), small
 * enough that the peer starts on the first FPDUs while we frame and CRC the next ones.
 */
const CORK_LIMIT = 256 * 1024;
/** How long a closed connection waits for the peer's FIN once its last bytes are with the kernel (or after a fault). */
export const CLOSE_LINGER_MS = 2000;
/** How long an orderly close lets a slow reader take what was still queued before the socket goes. */
export const CLOSE_DRAIN_MS = 30_000;
/** Heap slab for FPDU headers, pads, CRCs and whole small FPDUs (bump-allocated, see TxSink). */
const SLAB = 64 * 1024;
const EMPTY_SLAB = Buffer.alloc(0);

type ConnState = 'handshake' | 'rtr' | 'established' | 'closed';

/**
 * Events: 'request' (responder: MpaRequestInfo, answer with accept()/reject()), 'established'
 * (MpaResult), 'failed' (TcpFault: handshake or stream failure, the connection is closing),
 * 'drain', 'close'.
 */
export class MpaConnection extends EventEmitter {
  readonly socket: Socket;
  readonly role: 'initiator' | 'responder';
  readonly #dp: FramingMemory;
  readonly #opts: TcpConnectionOptions;
  readonly #hs: MpaHandshake;
  readonly #now: () => number;
  readonly #hwm: number;
  readonly #maxWrite: number;
  #state: ConnState = 'handshake';
  #timer: NodeJS.Timeout | undefined;
  #framer: FpduFramer | undefined;
  #deframer: FpduDeframer | undefined;
  #handler: UlpduHandler | undefined;
  /** What arrives before onUlpdus is called (./unowned.ts). */
  readonly #unowned: UnownedUlpdus;
  // Transmit: what the FPDUs framed since the last flush became. Small bytes are bump-allocated
  // in #slab and never rewritten (a full slab is replaced; chunks handed to the socket keep the
  // old one alive), so a tick of small FPDUs — an ack, a Write and its Immediate Data — is one
  // chunk and one write() call. Flushed once per tick (a promise job: cheaper than
  // queueMicrotask, which makes an AsyncResource per call) or early past CORK_LIMIT.
  // Made on the first FPDU framed, not per connection: an idle connection (a peer holding
  // connections open) would otherwise hold 64 KiB each (docs/resource-bounds.md).
  #slab = EMPTY_SLAB;
  #slabOff = 0;
  #smallStart = 0;
  #chunks: Uint8Array[] = [];
  #pendingBytes = 0;
  #flushQueued = false;
  readonly #tx: TxSink;
  #termMsn = 1;
  readonly #rx: RxPort | undefined;
  /** The staging view handed to the socket for its next read (zero-copy receive). */
  #zc: Uint8Array | undefined;
  result: MpaResult | undefined;
  /** Largest ULPDU this side may send (RFC 5044 §4.4 from the EMSS). */
  mulpdu = 0;
  /** Why the connection ended, when it did not end cleanly. */
  fault: TcpFault | undefined;
  /** The close cut the stream: views of device memory were still waiting for the kernel. */
  cut = false;
  /** Told the latest mark given to send() once the kernel has taken every byte up to it. */
  onWritten: ((mark: number) => void) | undefined;
  // The latest mark not flushed yet (-1: none).
  #mark = -1;
  // Flushes holding views of device memory that the kernel has not taken yet, and whether the
  // chunks gathered now hold one (see #close).
  #viewsOut = 0;
  #viewNow = false;
  readonly #viewWritten = (): void => void this.#viewsOut--;

  private constructor(socket: Socket, role: 'initiator' | 'responder', opts: TcpConnectionOptions, privateData?: Uint8Array, rx?: RxPort) {
    super();
    this.#rx = rx;
    rx?.bind(this);
    const slab = (): Buffer => this.#slab;
    this.#tx = {
      get buf() {
        return slab();
      },
      small: (n) => {
        if (this.#slabOff + n > this.#slab.length) {
          // #cutSmall hands what was framed in the old slab to the socket first (none in EMPTY_SLAB).
          this.#cutSmall();
          this.#slab = Buffer.allocUnsafeSlow(Math.max(SLAB, n));
          this.#slabOff = 0;
          this.#smallStart = 0;
        }
        const off = this.#slabOff;
        this.#slabOff += n;
        return off;
      },
      view: (v) => {
        this.#cutSmall();
        this.#chunks.push(v);
        // Device memory (shared: a Write's or Send's source), not a heap copy (a read's answer).
        if (v.buffer instanceof SharedArrayBuffer) this.#viewNow = true;
      },
    };
    this.socket = socket;
    this.#unowned = new UnownedUlpdus(socket);
    this.role = role;
    this.#dp = opts.dp;
    this.#opts = opts;
    this.#now = opts.now ?? Date.now;
    this.#hwm = opts.highWaterMark ?? 1 << 20;
    this.#maxWrite = opts.maxWriteBuffer ?? 64 << 20;
    this.#hs = new MpaHandshake({ ...opts.mpa, role, privateData });
    socket.setNoDelay(true);
    socket.on('data', (b: Buffer) => {
      noteReceived(b.length);
      this.#onData(b);
    });
    socket.on('end', () => this.#onEnd());
    socket.on('error', (e: Error) => this.#failStream(fault(TERM.streamLost, 'SOCKET', `socket error: ${e.message}`, e)));
    socket.on('close', () => this.#onClose());
    socket.on('drain', () => this.emit('drain'));
  }

  /** Start the initiator side on a socket that is connected (or connecting: bytes queue until it is). */
  static initiate(socket: Socket, opts: TcpConnectionOptions, privateData?: Uint8Array, rx?: RxPort): MpaConnection {
    const c = new MpaConnection(socket, 'initiator', opts, privateData, rx);
    c.#run(c.#hs.start(c.#now()));
    return c;
  }

  /** Start the responder side on an accepted socket; listen for 'request'. */
  static respond(socket: Socket, opts: TcpConnectionOptions, rx?: RxPort): MpaConnection {
    const c = new MpaConnection(socket, 'responder', opts, undefined, rx);
    c.#run(c.#hs.start(c.#now()));
    return c;
  }

  get state(): ConnState {
    return this.#state;
  }

  get requestInfo(): MpaRequestInfo | undefined {
    return this.#hs.requestInfo;
  }

  /** Where whole ULPDUs go; ULPDUs that arrived before a handler was set are delivered now (as copies). */
  onUlpdus(handler: UlpduHandler): void {
    this.#handler = handler;
    const q = this.#unowned.take(this.#state === 'established');
    if (q.length) {
      const total = q.reduce((n, b) => n + b.length, 0);
      const at = this.#orNoMemory(() => this.#dp.alloc(Math.max(total, 1)));
      if (at === undefined) return;
      const u8 = this.#dp.u8();
      const batch: RxUlpdu[] = [];
      let o = at;
      for (const b of q) {
        u8.set(b, o);
        batch.push({ ptr: o, len: b.length });
        o += b.length;
      }
      try {
        handler(batch, u8);
      } finally {
        this.#dp.free(at);
      }
    }
  }

  accept(privateData?: Uint8Array): void {
    this.#run(this.#hs.accept(privateData));
  }

  reject(reason: string, busy = false, crossingNonce?: number): void {
    this.#run(this.#hs.reject(reason, undefined, busy, crossingNonce));
  }

  /**
   * Send one DDP segment (header + payload views, ULPDU <= mulpdu). Returns false when the
   * caller should wait for 'drain' before sending more. `mark` (≥ 0, not below an earlier one):
   * onWritten hears it once the kernel has taken this segment's bytes (never if the socket
   * fails first).
   */
  send(hdr: Uint8Array, payload: readonly Uint8Array[] = [], mark = -1): boolean {
    if (this.#state !== 'established' && this.#state !== 'rtr') {
      throw new SabreError(ErrorCode.InvalidState, `MPA connection is ${this.#state}`);
    }
    if (this.socket.writableLength > this.#maxWrite) {
      throw new SabreError(ErrorCode.QueueFull, `TCP write buffer holds ${this.socket.writableLength} bytes (max ${this.#maxWrite})`);
    }
    this.#pendingBytes += this.#framer!.frameTo(hdr, payload, this.#tx);
    if (mark >= 0) this.#mark = mark;
    if (!this.#flushQueued) {
      this.#flushQueued = true;
      afterAnswers(this.#flushTick);
    }
    // Not too many: the kernel should be moving bytes while we frame and CRC the next ones.
    if (this.#pendingBytes >= CORK_LIMIT) this.#flush();
    return this.socket.writableLength < this.#hwm;
  }

  /**
   * Memory is about to be reused (core/detach.ts): views framed this turn and not yet handed to
   * the socket become copies. False while the socket holds views of device memory (no copy
   * reaches into node's write queue).
   */
  detach(owns: Owns): boolean {
    detachInPlace(this.#chunks, owns);
    return this.#viewsOut === 0 || this.socket.destroyed;
  }

  /** Report an error to the peer with a Terminate (RFC 5040 §4.8) and close. */
  terminate(code: TermCode, reason = 'terminated locally'): void {
    if (this.#state === 'closed') return;
    this.#sendTerminate(code);
    this.#close(fault(code, 'TERMINATE_SENT', reason));
  }

  /** Graceful close: flush what was sent, then FIN. */
  close(): void {
    if (this.#state === 'closed') return;
    this.#close(undefined);
  }

  #cutSmall(): void {
    if (this.#slabOff > this.#smallStart) {
      this.#chunks.push(this.#slab.subarray(this.#smallStart, this.#slabOff));
      this.#smallStart = this.#slabOff;
    }
  }

  // Three jobs deep (afterAnswers), as udp's answers: a flush at the first job wrote the receive
  // step's ack alone and the answer to what that read brought in a second write (a second
  // syscall, and a wake-up of the peer for the ack).
  #flushTick = (): void => {
    this.#flushQueued = false;
    this.#flush();
  };

  /**
   * Hand what was framed to the socket: one write, or one writev of all the chunks. A write's
   * callback runs once the kernel has taken its bytes (and those of every write before it).
   */
  #flush(): void {
    this.#cutSmall();
    const c = this.#chunks;
    if (c.length === 0) return;
    this.#chunks = [];
    this.#pendingBytes = 0;
    const views = this.#viewNow;
    this.#viewNow = false;
    const mark = this.#mark;
    this.#mark = -1;
    const s = this.socket;
    if (s.destroyed || s.writableEnded) return;
    if (views) this.#viewsOut++;
    const last = c.length - 1;
    if (last > 0) {
      s.cork();
      for (let i = 0; i < last; i++) s.write(c[i]!);
    }
    if (mark >= 0) {
      s.write(c[last]!, (err) => {
        if (views) this.#viewsOut--;
        // A socket destroyed with the write still queued calls it back without an error.
        if (!err && !s.destroyed) this.onWritten?.(mark);
      });
    } else s.write(c[last]!, views ? this.#viewWritten : undefined);
    if (last > 0) s.uncork();
  }

  #run(evs: MpaEvent[]): void {
    for (const e of evs) {
      switch (e.type) {
        case 'send':
          this.socket.write(e.bytes);
          break;
        case 'request':
          this.emit('request', e.info);
          break;
        case 'established':
          this.#established(e.result, e.leftover);
          break;
        case 'failed':
          this.emit('failed', e.fault);
          this.#close(e.fault);
          break;
      }
    }
    this.#arm();
  }

  #arm(): void {
    if (this.#timer) clearTimeout(this.#timer);
    this.#timer = undefined;
    const st = this.#hs.state;
    // The RTR a peer-to-peer initiator owes after the Reply is part of its handshake, under the
    // same deadline: without one, a peer that never sends it would hold the connection (its
    // socket, its receive staging, its slots of the connection caps) for as long as it liked.
    const rtr = this.#state === 'rtr';
    if (!rtr && (this.#state !== 'handshake' || st === 'done' || st === 'failed')) return;
    const wait = Math.max(0, this.#hs.deadline - this.#now());
    if (!Number.isFinite(wait)) return;
    this.#timer = setTimeout(() => (rtr ? this.#rtrTimeout() : this.#run(this.#hs.tick(this.#now()))), wait + 1);
    this.#timer.unref();
  }

  #rtrTimeout(): void {
    if (this.#state !== 'rtr') return;
    // #close tells those waiting for 'established' (the 'failed' event).
    this.#close(fault(TERM.streamLost, 'TIMEOUT', 'no RTR (zero-length RDMA Write) after the MPA Reply within the handshake deadline'));
  }

  #established(r: MpaResult, leftover: Uint8Array): void {
    this.result = r;
    const emss = this.#opts.emss ?? defaultEmss(this.socket.remoteAddress ?? '127.0.0.1');
    this.mulpdu = mulpdu(emss, r.markersTx);
    this.#framer = new FpduFramer({ dp: this.#dp, crc: r.crc, markers: r.markersTx, mulpdu: this.mulpdu });
    // The receive staging is the connection's share of device memory. We get here from a socket
    // callback (the Reply read) or from accept() inside one (the Request read): running out must
    // refuse this connection, never throw out of the callback and take the process down.
    const deframer = this.#orNoMemory(() => new FpduDeframer(
      { dp: this.#dp, crc: r.crc, markers: r.markersRx, capacity: this.#opts.rxCapacity, maxUlpdu: this.#opts.maxUlpdu },
      { ulpdus: (b, u8) => this.#onUlpdus(b, u8), error: (f) => this.#failStream(f) },
    ));
    if (deframer === undefined) return;
    this.#deframer = deframer;
    const counts = mpaCrcCounts(this.#dp);
    if (r.crc) counts.mpaCrcOn++;
    else counts.mpaCrcOff++;
    if (r.rtr === 'write' && r.role === 'responder') {
      this.#state = 'rtr';
    } else {
      this.#state = 'established';
      if (r.rtr === 'write') this.#sendRtr();
      this.#awaitOwner();
      this.emit('established', r);
    }
    if (leftover.length && (this.#state as ConnState) !== 'closed') this.#deframer.push(leftover);
  }

  /** RFC 6581 RTR: a zero-length RDMA Write (STag 0, TO 0, last). */
  #sendRtr(): void {
    const hdr = new Uint8Array(TAGGED_HDR_LEN);
    encodeDdp({ tagged: true, last: true, opcode: RdmapOpcode.RdmaWrite, stag: 0, to: 0 }, hdr, 0);
    this.send(hdr);
  }

  #onUlpdus(batch: RxUlpdu[], u8: Uint8Array): void {
    if (this.#state === 'rtr') {
      const first = batch[0]!;
      const isRtr = first.len === TAGGED_HDR_LEN && (getDdpCtrlDdp(u8, first.ptr) & DDP_CTRL_DDP_T) !== 0
        && (getDdpCtrlRdmap(u8, first.ptr) & DDP_CTRL_RDMAP_OPCODE) === RdmapOpcode.RdmaWrite;
      if (!isRtr) {
        this.terminate(TERM.noMatchingRtr, 'first FPDU after a peer-to-peer setup was not the agreed zero-length RDMA Write');
        return;
      }
      this.#state = 'established';
      this.#awaitOwner();
      this.emit('established', this.result);
      batch = batch.slice(1);
      if (!batch.length) return;
    }
    // An 'established' listener may have closed the connection.
    if ((this.#state as ConnState) !== 'established') return;
    if (this.#handler) {
      this.#handler(batch, u8);
      return;
    }
    this.#unowned.keep(batch, u8);
  }

  /**
   * An established connection is taken (onUlpdus) within the handshake's deadline, or closed:
   * one nobody takes — its owner gone, or a peer's that completed too late to be anyone's — would
   * otherwise hold its slot of the connection caps for good (fault NO_OWNER, counted).
   */
  #awaitOwner(): void {
    if (this.#handler !== undefined) return;
    const ms = this.#opts.mpa?.timeoutMs ?? 10_000;
    this.#unowned.awaitOwner(ms, () => {
      if (this.#handler === undefined && this.#state === 'established') this.#failStream(fault(TERM.streamLost, 'NO_OWNER', `established, not taken within ${ms} ms`));
    });
  }

  /** @internal RxPort: where the socket's next read goes. */
  rxBuffer(): Uint8Array {
    const d = this.#deframer;
    if ((this.#state === 'established' || this.#state === 'rtr') && d && !d.failed) {
      this.#zc = d.rxSpace();
      return this.#zc;
    }
    this.#zc = undefined;
    return this.#rx!.spare;
  }

  /** @internal RxPort: `n` bytes were read into `buf` (the last rxBuffer()). */
  rxRead(n: number, buf: Uint8Array): void {
    if (buf === this.#zc) {
      this.#zc = undefined;
      if (this.#state !== 'closed') this.#deframer?.commit(n);
      return;
    }
    // Handshake bytes (and FPDUs right behind the Reply): the copying path.
    this.#onData(buf.subarray(0, n));
  }

  #onData(b: Uint8Array): void {
    if (this.#state === 'closed') return;
    if (this.#state === 'handshake') {
      this.#run(this.#hs.receive(b, this.#now()));
      return;
    }
    this.#deframer!.push(b);
  }

  #onEnd(): void {
    if (this.#state === 'handshake') this.#run(this.#hs.closed());
    else if (this.#deframer && this.#state !== 'closed') this.#deframer.end();
    if (this.#state !== 'closed') this.#close(undefined);
  }

  #onClose(): void {
    if (this.#state !== 'closed') {
      if (this.#state === 'handshake') {
        const evs = this.#hs.closed();
        for (const e of evs) if (e.type === 'failed') this.emit('failed', e.fault);
      }
      this.#close(this.fault ?? undefined);
    }
    this.#deframer?.dispose();
    this.#deframer = undefined;
    this.emit('close', this.fault);
  }

  /** A stream error found by the deframer or the socket: Terminate (when we can still frame), then close. */
  #failStream(f: TcpFault): void {
    if (this.#state === 'closed') return;
    // (While the RTR is awaited, #close emits it.)
    if (this.#state !== 'rtr') this.emit('failed', f);
    if (this.#state === 'established' || this.#state === 'rtr') this.#sendTerminate(f);
    this.#close(f);
  }

  /**
   * `f()`, or undefined after refusing the connection because device memory ran out: a
   * Terminate (local catastrophic error: the peer's request was fine), then close. The fault's
   * code NO_MEMORY is what the connector counts (connectionsRefusedMemory).
   */
  #orNoMemory<T>(f: () => T): T | undefined {
    try {
      return f();
    } catch (e) {
      if (!(e instanceof SabreError) || e.code !== ErrorCode.NoMemory) throw e;
      const flt = fault(TERM.catastrophic, 'NO_MEMORY', `device memory exhausted: ${e.message}`, e);
      this.emit('failed', flt);
      this.#sendTerminate(flt);
      this.#close(flt);
      return undefined;
    }
  }

  #sendTerminate(code: TermCode): void {
    if (!this.#framer || this.socket.destroyed || !this.socket.writable) return;
    const hdr = new Uint8Array(UNTAGGED_HDR_LEN + 4);
    encodeDdp({ tagged: false, last: true, opcode: RdmapOpcode.Terminate, ulp: 0, qn: QN.Terminate, msn: this.#termMsn++, mo: 0 }, hdr, 0);
    encodeTerminate({ layer: code.layer, etype: code.etype, ecode: code.ecode }, hdr, UNTAGGED_HDR_LEN);
    this.#framer.frameTo(hdr, [], this.#tx);
    this.#flush();
  }

  #close(f: TcpFault | undefined): void {
    if (this.#state === 'closed') return;
    const awaitedRtr = this.#state === 'rtr';
    this.#state = 'closed';
    this.fault ??= f;
    if (this.#timer) clearTimeout(this.#timer);
    this.#timer = undefined;
    this.#unowned.clear();
    const s = this.socket;
    this.#flush();
    // (A write the kernel took at once is off writableLength now; its callback comes later.)
    if (this.#viewsOut > 0 && s.writableLength > 0) {
      // Views of device memory the kernel has not taken yet: the QP's work is flushed with this
      // close, which lets the memory go to the next region registered, whose bytes would then
      // leave under the old request. They are not sent: the stream is cut here (the peer sees
      // it end inside an FPDU, or a reset), and the Terminate behind them with it.
      this.cut = true;
      s.destroy();
    } else this.#drainThenDestroy(f !== undefined);
    // A responder waiting for the peer-to-peer RTR: whoever waits for 'established' (an accept,
    // a cm listener's QP and backlog slot) hears that it will not come — whatever closed it (the
    // deadline, a bad first FPDU, the peer's FIN or reset, a local close).
    if (awaitedRtr) this.emit('failed', this.fault ?? fault(TERM.streamLost, 'CLOSED', 'connection closed before the peer-to-peer RTR'));
  }

  #drainThenDestroy(faulted: boolean): void {
    const s = this.socket;
    // Let the Terminate / reject reply, or what an orderly close leaves queued, drain; but never
    // wait on a peer that stopped reading, nor on its FIN: a peer that keeps its end open would
    // otherwise hold the socket and its slot of the connection caps for as long as it liked.
    // Bytes handed to the kernel still go out after the socket is destroyed (unless unread
    // input makes the kernel reset it: hence the resume).
    s.end();
    // Read on (what comes is dropped: the connection is closed): a socket paused while the
    // device held its input would otherwise leave the peer's FIN unread, and the destroy below
    // would answer it with a reset instead of the orderly close the peer was owed.
    s.resume();
    let t = setTimeout(() => s.destroy(), faulted ? CLOSE_LINGER_MS : CLOSE_DRAIN_MS);
    t.unref();
    if (!faulted) {
      s.once('finish', () => {
        clearTimeout(t);
        t = setTimeout(() => s.destroy(), CLOSE_LINGER_MS);
        t.unref();
      });
    }
    s.once('close', () => clearTimeout(t));
  }
}

// The tcp link: the engine's frames over iWARP (MPA/DDP/RDMAP, byte-exact), one MPA connection
// per rc QP pair (connector.ts makes and pairs them; connection.ts frames them). It moves
// frames and reports link events; it never looks into the engine.
//
// The engine's envelope is implicit on TCP, so nothing but iWARP goes on the wire:
//   srcQpn/dstQpn  the connection names them;
//   ssn            counted per direction: TCP delivers in order, so the receiver numbers
//                  messages as they arrive (a message ends at the segment with the DDP L flag);
//   off            MO for untagged segments, the running offset within the message for tagged;
//   msgLen         unknown (-1) until the segment with L, which carries off + its length.
// Control frames:
//   hello   none: the MPA handshake is the connection. openQp() makes it (or adopts the one a
//           service exchange made) and qpUp tells the device, with what the peer speaks.
//   ack/rnr between two sabre peers (both MPA frames carried sabre's private-data block) they
//           travel as RDMAP opcode 15 (SabreControl, spec.ts), as does a sequence note before a
//           message resent after RNR (its ssn is not "the next one").
// What a standard iWARP peer (no sabre block) can and cannot do is core/peer.ts: the link only
// reports which kind of peer it has, keeps opcode 15 off such a stream, and refuses sabre's
// extension opcodes arriving from it as a broken stream.
//
// Placement: the deframer hands whole ULPDUs that already lie in device memory (CRC checked by
// the WASM kernel); each becomes a frame whose payload is a view of those bytes and whose DDP
// header travels decoded (the link had to read it to frame the stream), and the whole read is
// one engine step, so one place() call copies every payload straight into its region.
//
// Errors: a segment that does not decode (DDP/RDMAP version, opcode, truncation) or breaks the
// stream's message structure → Terminate with the RFC 5040 codes, connection closed, qpDown
// 'broken'. The connection lost without a Terminate (peer killed, reset, FIN) → qpDown 'lost'.
// When the QP enters ERROR (a Terminate of the engine's, modify, destroy) the device calls
// closeQp(), after the engine's last frames were handed over; views of the QP's memory the
// kernel has not taken by then are not sent (the connection cuts the stream: closesCut).
// Completion: a standard peer sends no acks, so the link reports when the kernel has taken
// each message's last byte (LinkEvents.written); only then may its source be reused.
import type { DeviceAddress } from '../../core/address.js';
import { detachPayload, type Owns } from '../../core/detach.js';
import { ErrorCode, SabreError } from '../../core/errors.js';
import { DEVICE_QPN, type Envelope, type Inbound, type SegFrame } from '../../core/frame.js';
import type { Link, LinkEvents, Outbound, QpConnections, ServiceRequest } from '../../core/link.js';
import { SABRE_PEER, STANDARD_IWARP_PEER, type PeerProfile } from '../../core/peer.js';
import { carriesData, decodeDdp, isSabreExtension, RdmapOpcode } from '../../wire/rdmap.js';
import { TERM_TABLES, TermLayer } from '../../wire/spec.js';
import { TERM, termForDdpError } from '../../wire/terminate.js';
import { type MpaConnection, mpaCrcCounts } from './connection.js';
import { type IncomingRequest, MpaConnector, type MpaConnectorOptions, type TcpAddress } from './connector.js';
import { fault, type TcpFault } from './fault.js';
import { defaultEmss, type FramingMemory, mulpdu, type RxUlpdu } from './fpdu.js';
import { decodeSabrePd } from './private-data.js';
import { decodeSabreControl, encodeSabreControl, SABRE_CONTROL_ULPDU, SabreControlKind } from './sabre-control.js';

export interface TcpLinkOptions extends Omit<MpaConnectorOptions, 'dp'> {
  dp: FramingMemory;
  /**
   * Bytes a connection may hold queued for a socket that does not take them (default 16 MiB).
   * Past it, a connection to a standard iWARP peer stops reading from its socket until the
   * queue is down to half (backpressure); a sabre peer's answers are bounded by the IRD, which
   * it acknowledges, and two sabre peers pausing on each other could deadlock.
   */
  maxQueuedBytes?: number;
}

/** One frame waiting for a blocked socket. */
interface Queued {
  hdr: Uint8Array;
  payload: readonly Uint8Array[];
  bytes: number;
  /** It ends the answer to one of the peer's RDMA Read Requests (the IRD count drops when it is written). */
  endsRead: boolean;
  /** A sabre ack: cumulative, so a newer one replaces it while it waits. */
  ack: boolean;
  /** The ssn of the message it ends, to a peer that sends no acks (-1: none): see #sendSeg. */
  mark: number;
  /** An RNR NAK's ssn (QpStream.rnrQueued). */ rnr?: number;
}

const CRC_BLOCK = 16384;

export type TcpDeviceAddress = TcpAddress & DeviceAddress;

export function isTcpAddress(a: DeviceAddress): a is TcpDeviceAddress {
  return a.transport === 'tcp' && typeof a.host === 'string' && a.host.length > 0 && Number.isInteger(a.port) && (a.port as number) > 0 && (a.port as number) < 65536;
}

/** One rc QP's stream. */
class QpStream {
  readonly localQpn: number;
  readonly remoteQpn: number;
  readonly conn: MpaConnection;
  /** What the peer speaks: sabre when its MPA frame carried sabre's block. */
  readonly profile: PeerProfile;
  /** The address the engine's flow uses (Inbound.from carries it). */
  peer: DeviceAddress | undefined;
  attached = false;
  dead = false;
  // transmit
  txSsn = 0;
  blocked = false;
  readonly queue: Queued[] = [];
  queuedBytes = 0;
  /** ssns of the RNR NAKs waiting in the queue: a repeat tells the peer nothing new (dropped, rnrCoalesced). */
  rnrQueued: Set<number> | undefined;
  /** Reading from the socket is paused for the queue (backpressure). */
  paused = false;
  /** RDMA Read Requests of the peer not answered in full yet (RFC 5040 IRD), and the IRD we gave it. */
  readsIn = 0;
  readonly ird: number;
  /** The ORD the peer left us (our reads and atomics out at once). */
  readonly ord: number;
  // receive: the message open on the stream
  rxSsn = 0;
  seqNext: number | undefined;
  lastAckIn = 0;
  open = false;
  rxOff = 0;
  rxTagged = false;
  rxOpcode = 0;
  rxStag = 0;
  rxTo = 0;
  rxQn = 0;
  rxMsn = 0;

  constructor(localQpn: number, remoteQpn: number, conn: MpaConnection) {
    this.localQpn = localQpn;
    this.remoteQpn = remoteQpn;
    this.conn = conn;
    this.profile = decodeSabrePd(conn.result?.peerPrivateData ?? new Uint8Array(0))?.kind === 'connect' ? SABRE_PEER : STANDARD_IWARP_PEER;
    this.ird = conn.result?.ird ?? 16;
    this.ord = conn.result?.ord ?? 16;
  }
}

export class TcpLink implements Link, QpConnections {
  readonly address: TcpDeviceAddress;
  readonly connector: MpaConnector;
  /** Largest DDP payload per segment so an untagged segment fits one FPDU of the MULPDU. */
  readonly mss: number;
  /** The MULPDU (largest ULPDU an FPDU carries, markers allowed for) on this device's path. */
  readonly mtu: number;
  readonly connections: QpConnections = this;
  readonly #streams = new Map<number, QpStream>();
  /** QPs whose connection is wanted: openQp() was called or a service exchange bound one. */
  readonly #wanted = new Set<number>();
  /** QPs whose connector attempt is under way, each with a token of that attempt (a newer openQp replaces it). */
  readonly #connecting = new Map<number, object>();
  readonly #services = new Map<number, (r: ServiceRequest) => void>();
  #events: LinkEvents | undefined;
  #closed = false;
  readonly counters = {
    segmentsIn: 0, segmentsOut: 0, controlIn: 0, controlOut: 0, terminatesSent: 0, streamFaults: 0, dropped: 0, connections: 0,
    /** Read Requests past the IRD (Terminated), socket reads paused for a full queue. */
    readsRefused: 0, readPauses: 0,
    /** QPs closed with views of their memory still waiting for the kernel: the stream was cut (connection.ts #close). */
    closesCut: 0, rnrCoalesced: 0,
  };
  readonly #maxQueued: number;
  /** The control message being framed (connection.send copies the header into its transmit slab). */
  readonly #ctl = new Uint8Array(SABRE_CONTROL_ULPDU);
  /** What this device asks MPA for: its CRC, on when either side asks (RFC 5044 §7.1). */
  readonly integrity: 'crc32c' | 'none';
  /** The device memory, under which the connections count their negotiated CRCs. */
  readonly #dp: object;

  private constructor(connector: MpaConnector, maxQueued: number, crc: boolean, dp: object) {
    this.connector = connector;
    this.#maxQueued = maxQueued;
    this.integrity = crc ? 'crc32c' : 'none';
    this.#dp = dp;
    this.address = Object.freeze({ ...connector.address }) as TcpDeviceAddress;
    // The marker-bearing MULPDU is the smaller: segments then fit whatever the peer negotiates.
    // Rounded down to a multiple of 16 KiB: the CRC32C kernel's fast path takes 16 KiB blocks
    // (the rest goes through a ~40% slower one), so a 64 KiB Write is 48 + 16 KiB, all fast.
    this.mtu = mulpdu(defaultEmss(connector.address.host), true);
    const m = this.mtu - 18;
    this.mss = m >= CRC_BLOCK ? m - (m % CRC_BLOCK) : m;
    connector.onConnectRequest((r) => this.#onRequest(r));
  }

  static async open(opts: TcpLinkOptions): Promise<TcpLink> {
    return new TcpLink(await MpaConnector.listen(opts), opts.maxQueuedBytes ?? 16 << 20, opts.connection?.mpa?.crc ?? true, opts.dp);
  }

  start(events: LinkEvents): void {
    this.#events = events;
  }

  /** Memory is about to be reused (Link.detach): each connection's views not yet handed to its socket. */
  detach(owns: Owns): boolean {
    let clear = true;
    for (const st of this.#streams.values()) {
      // Frames waiting while the stream is blocked hold views too (the largest holder).
      for (const q of st.queue) q.payload = detachPayload(q.payload, owns);
      if (!st.conn.detach(owns)) clear = false;
    }
    return clear;
  }

  reachable(to: DeviceAddress): boolean {
    return !this.#closed && isTcpAddress(to);
  }

  stats(): Record<string, number> {
    let queuedBytes = 0;
    for (const st of this.#streams.values()) queuedBytes += st.queuedBytes;
    return {
      ...this.counters, ...this.connector.counters, refusalsCut: this.connector.lingering.cut, refusalsLingering: this.connector.lingering.size, links: this.#streams.size, endpointConnections: this.connector.connectionCount, queuedBytes,
      // Connections by negotiated MPA CRC.
      ...mpaCrcCounts(this.#dp),
    };
  }

  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    for (const s of this.#streams.values()) s.dead = true;
    this.#streams.clear();
    await this.connector.close();
  }

  // ---- engine → wire ------------------------------------------------------------------------

  transmit(out: readonly Outbound[]): void {
    if (this.#closed) return;
    // Each frame names its QP, whose connection carries it: the peer address adds nothing.
    let notReadySent = false;
    for (const { frame: f } of out) {
      if (f.kind === 'seg') {
        this.#sendSeg(f);
        continue;
      }
      // The engine's acks and RNR NAKs go as opcode 15, which only a sabre peer reads; hellos
      // have no meaning here (the MPA handshake is the connection).
      if (f.kind === 'hello') continue;
      if (f.srcQpn === DEVICE_QPN) {
        // The device-wide not-ready word (rdmap/not-ready.ts): a connection's control names its
        // own QPs only, so every live connection to a sabre peer hears one, once per batch. A
        // connection its peer ended is closed before its 'close' takes it off the table: no word.
        if (!notReadySent) for (const s of this.#streams.values()) if (!s.dead && s.conn.state === 'established' && s.profile.extensions) this.#control(s, SabreControlKind.Ack, 0);
        notReadySent = true;
        continue;
      }
      const s = this.#stream(f.srcQpn);
      if (s?.profile.extensions) this.#control(s, f.kind === 'ack' ? SabreControlKind.Ack : SabreControlKind.Rnr, f.ssn);
    }
  }

  #stream(localQpn: number): QpStream | undefined {
    const s = this.#streams.get(localQpn);
    return s && !s.dead ? s : undefined;
  }

  #sendSeg(f: SegFrame): void {
    const env = f.env;
    const s = this.#stream(env.srcQpn);
    if (!s) {
      this.counters.dropped++;
      return;
    }
    if (env.off === 0 && s.profile.extensions) {
      // A resend after RNR is not the next message in the stream: say which one it is.
      if (env.ssn !== s.txSsn + 1) this.#control(s, SabreControlKind.Seq, env.ssn);
      // The engine's ack riding on a Terminate tells the peer which of its messages failed.
      if (env.ack !== undefined) this.#control(s, SabreControlKind.Ack, env.ack);
    }
    if (env.off === 0) s.txSsn = env.ssn;
    // The end of an answer to one of the peer's reads: the ReadComplete (sabre peer), or the
    // Read Response with L (standard peer). Byte 0: DDP control (L 0x40), byte 1: RDMAP opcode.
    const op = f.hdr[1]! & 0x0f;
    // An atomic's answer ends one too: RFC 7306 counts atomics in the IRD with reads.
    const endsRead = s.profile.extensions ? op === RdmapOpcode.ReadComplete || op === RdmapOpcode.AtomicResponse : (op === RdmapOpcode.ReadResponse || op === RdmapOpcode.AtomicResponse) && (f.hdr[0]! & 0x40) !== 0;
    // A peer that sends no acks: the message's last segment, once the kernel has taken it, is
    // what completes the QP's work up to it (LinkEvents.written; its source may then be reused).
    // Any other segment marks the messages before it: each flush taken is a sign of life, so a
    // peer that reads one long message slowly but steadily is not taken for dead.
    const mark = s.profile.acks ? -1 : (f.hdr[0]! & 0x40) !== 0 ? env.ssn : env.ssn - 1;
    this.#write(s, f.hdr, f.payload, endsRead, false, mark);
    this.counters.segmentsOut++;
  }

  #control(s: QpStream, kind: number, ssn: number): void {
    // A sabre peer's queue is never paused for (#write): one not reading grew it by a NAK per copy of an unreceivable message it sent.
    const rnr = kind === SabreControlKind.Rnr && s.blocked;
    if (rnr && s.rnrQueued?.has(ssn)) return void this.counters.rnrCoalesced++;
    this.counters.controlOut++;
    // Framed at once unless the stream is blocked (then it waits in the queue: its own buffer).
    this.#write(s, encodeSabreControl(kind, ssn, s.blocked ? undefined : this.#ctl), [], false, kind === SabreControlKind.Ack, -1);
    if (rnr) (s.rnrQueued ??= new Set()).add((s.queue[s.queue.length - 1]!.rnr = ssn));
  }

  #write(s: QpStream, hdr: Uint8Array, payload: readonly Uint8Array[], endsRead: boolean, ack: boolean, mark: number): void {
    if (s.blocked) {
      const last = s.queue[s.queue.length - 1];
      if (ack && last?.ack) {
        // Acks are cumulative: a peer that does not read gets one waiting, not one per step.
        last.hdr = hdr;
        return;
      }
      let bytes = hdr.length;
      for (const p of payload) bytes += p.length;
      s.queue.push({ hdr, payload, bytes, endsRead, ack, mark });
      s.queuedBytes += bytes;
      if (s.queuedBytes > this.#maxQueued && !s.paused && !s.profile.extensions) {
        // Backpressure: take no more requests from the peer until it takes our answers.
        s.paused = true;
        this.counters.readPauses++;
        s.conn.socket.pause();
      }
      return;
    }
    this.#sendNow(s, hdr, payload, endsRead, mark);
  }

  /** Hand one frame to the connection: false when it must wait for 'drain'. */
  #sendNow(s: QpStream, hdr: Uint8Array, payload: readonly Uint8Array[], endsRead: boolean, mark: number): void {
    try {
      if (endsRead && s.readsIn > 0) s.readsIn--;
      if (!s.conn.send(hdr, payload, mark)) this.#block(s);
    } catch {
      // The connection went away under us; its 'close' reports the QP down.
      this.counters.dropped++;
    }
  }

  #block(s: QpStream): void {
    s.blocked = true;
    s.conn.once('drain', () => {
      s.blocked = false;
      while (s.queue.length && !s.blocked && !s.dead) {
        const q = s.queue.shift()!;
        s.queuedBytes -= q.bytes;
        if (q.rnr !== undefined) s.rnrQueued!.delete(q.rnr);
        this.#sendNow(s, q.hdr, q.payload, q.endsRead, q.mark);
      }
      if (s.dead) {
        s.queue.length = 0;
        s.queuedBytes = 0;
        s.rnrQueued = undefined;
      }
      if (s.paused && s.queuedBytes <= this.#maxQueued / 2) {
        s.paused = false;
        if (!s.dead && !this.#held) s.conn.socket.resume();
      }
    });
  }

  /** The device holds receiving (Link.holdReceive): no socket is read meanwhile. */
  #held = false;

  /** Back-pressure from the device: stop (or resume) reading every connection; TCP's own window holds the peers. */
  holdReceive(hold: boolean): void {
    if (hold === this.#held) return;
    this.#held = hold;
    for (const s of this.#streams.values()) {
      if (s.dead) continue;
      if (hold) s.conn.socket.pause();
      else if (!s.paused) s.conn.socket.resume();
    }
  }

  // ---- connections (QpConnections) ----------------------------------------------------------

  openQp(qpn: number, peer: DeviceAddress, rqpn: number, secret?: Uint8Array): void {
    this.#wanted.add(qpn);
    const pre = this.#streams.get(qpn);
    if (pre && !pre.dead && pre.remoteQpn === rqpn) {
      // rdma_cm path: the service exchange made the connection first.
      this.#attach(pre, peer);
      return;
    }
    if (!isTcpAddress(peer)) return;
    // A connect again (after a reset): the attempt left from before goes, with its peer and secret.
    if (this.#connecting.has(qpn)) this.connector.cancel(qpn);
    const attempt = {};
    this.#connecting.set(qpn, attempt);
    const mine = (): boolean => this.#connecting.get(qpn) === attempt && (this.#connecting.delete(qpn), true);
    this.connector.connectQp(qpn, { address: { transport: 'tcp', host: peer.host, port: peer.port }, qpn: rqpn, secret }).then(
      (conn) => {
        if (!mine()) return conn.close();
        const s = this.#adopt(qpn, rqpn, conn);
        if (s) this.#attach(s, peer);
      },
      (e: unknown) => {
        if (mine() && this.#wanted.has(qpn)) this.#events?.qpDown(qpn, 'refused', e instanceof Error ? e : undefined);
      },
    );
  }

  closeQp(qpn: number): void {
    this.#wanted.delete(qpn);
    // Its connect waits no more: a Request for it from now on pairs with nothing.
    if (this.#connecting.has(qpn)) this.connector.cancel(qpn);
    const s = this.#streams.get(qpn);
    if (!s || s.dead) return;
    // After what is queued (the engine's Terminate, if any): RFC 5040 §5.2, nothing follows it.
    s.dead = true;
    this.#drop(s);
    s.conn.close();
    if (s.conn.cut) this.counters.closesCut++;
  }

  /**
   * Bind an established connection to local QP `qpn` (before or after its openQp()). Returns
   * undefined (and closes the connection) when nobody wants it any more.
   */
  #adopt(qpn: number, rqpn: number, conn: MpaConnection): QpStream | undefined {
    if (this.#closed || !this.#wanted.has(qpn) || conn.state === 'closed') {
      conn.close();
      return undefined;
    }
    const old = this.#streams.get(qpn);
    if (old) {
      old.dead = true;
      old.conn.close();
    }
    const s = new QpStream(qpn, rqpn, conn);
    this.#streams.set(qpn, s);
    if (this.#held) conn.socket.pause();
    this.counters.connections++;
    conn.onWritten = (ssn) => {
      if (!s.dead) this.#events?.written?.(qpn, ssn);
    };
    conn.on('failed', (f: TcpFault) => {
      if (s.dead) return;
      // The stream lost (reset, ended inside an FPDU): the peer stopped answering. Any other
      // fault we found (bad CRC, framing) and answered with a Terminate already.
      const lost = f.layer === TermLayer.Llp && f.ecode === TERM_TABLES.llp.ecode.TcpStreamLost;
      if (!lost) this.counters.streamFaults++;
      this.#down(s, lost ? 'lost' : 'broken');
    });
    conn.once('close', () => {
      // Lost without a Terminate: the peer stopped answering.
      if (!s.dead) this.#down(s, 'lost');
    });
    return s;
  }

  /** The QP's flow exists (openQp ran): say so with what the peer speaks, then deliver segments. */
  #attach(s: QpStream, peer: DeviceAddress): void {
    if (s.attached || !this.#events) return;
    s.peer = peer;
    s.attached = true;
    // qpUp first: the engine knows what the peer speaks before the first frame (ULPDUs that
    // arrived before this point are delivered as soon as the handler is set).
    this.#events.qpUp(s.localQpn, s.profile, s.ord);
    if (!s.dead) s.conn.onUlpdus((batch, u8) => this.#onUlpdus(s, batch, u8));
  }

  #drop(s: QpStream): void {
    if (this.#streams.get(s.localQpn) === s) this.#streams.delete(s.localQpn);
  }

  #down(s: QpStream, cause: 'lost' | 'broken'): void {
    s.dead = true;
    this.#drop(s);
    this.#events?.qpDown(s.localQpn, cause);
  }

  // ---- wire → engine ------------------------------------------------------------------------

  #onUlpdus(s: QpStream, batch: RxUlpdu[], u8: Uint8Array): void {
    if (s.dead || this.#closed) return;
    const out: Inbound[] = [];
    const from = s.peer!;
    let bad: TcpFault | undefined;
    for (const u of batch) {
      bad = this.#decodeOne(s, u, u8, from, out);
      if (bad) break;
    }
    this.counters.segmentsIn += out.length;
    // Everything before a bad segment is good: it is placed and completed first.
    if (out.length) this.#events?.frames(out);
    if (bad) this.#fail(s, bad);
  }

  #decodeOne(s: QpStream, u: RxUlpdu, u8: Uint8Array, from: DeviceAddress, out: Inbound[]): TcpFault | undefined {
    const at = u.ptr;
    const d = decodeDdp(u8, at, at + u.len);
    if (!d.ok) {
      const t = termForDdpError(d.error, u.len > 0 && (u8[at]! & 0x80) !== 0);
      return fault(t.term, t.code, t.reason);
    }
    const h = d.value;
    const plen = u.len - d.length;
    const ext = s.profile.extensions;
    if (!h.tagged && h.opcode === RdmapOpcode.SabreControl) {
      const c = ext && !s.open ? decodeSabreControl(u8, at + d.length, plen) : undefined;
      if (!c) return fault(TERM.badOpcode, 'OPCODE', ext ? 'malformed sabre control message' : 'opcode 15 from a peer that is not sabre');
      this.counters.controlIn++;
      if (c.kind === SabreControlKind.Seq) s.seqNext = c.ssn;
      else {
        if (c.kind === SabreControlKind.Ack) s.lastAckIn = c.ssn;
        out.push({ from, frame: { kind: c.kind === SabreControlKind.Ack ? 'ack' : 'rnr', srcQpn: s.remoteQpn, dstQpn: s.localQpn, ssn: c.ssn } });
      }
      return undefined;
    }
    if (!ext && isSabreExtension(h.opcode)) return fault(TERM.badOpcode, 'OPCODE', `sabre extension opcode ${h.opcode} from a peer that is not sabre`);
    if (!h.tagged && h.last && (h.opcode === RdmapOpcode.ReadRequest || h.opcode === RdmapOpcode.ReadRequestV || h.opcode === RdmapOpcode.AtomicRequest)) {
      // RFC 5040 IRD: at most `ird` reads (and atomics, RFC 7306) answered and not yet written out; one more is a Terminate.
      if (s.readsIn >= s.ird) {
        this.counters.readsRefused++;
        return fault(TERM.tooManyReads, 'IRD', `more than ${s.ird} RDMA Read and Atomic Requests outstanding (the IRD negotiated)`);
      }
      s.readsIn++;
    }
    let ssn: number;
    if (!s.open) {
      ssn = s.seqNext ?? s.rxSsn + 1;
      s.seqNext = undefined;
      s.rxSsn = ssn;
      s.open = true;
      s.rxOff = 0;
      s.rxTagged = h.tagged;
      s.rxOpcode = h.opcode;
      if (h.tagged) {
        s.rxStag = h.stag;
        s.rxTo = h.to;
      } else {
        s.rxQn = h.qn;
        s.rxMsn = h.msn;
      }
    } else {
      ssn = s.rxSsn;
      // One message at a time on the stream: a segment that does not continue the open one is a broken stream.
      const cont = h.tagged === s.rxTagged && h.opcode === s.rxOpcode
        && (h.tagged ? h.stag === s.rxStag && h.to === s.rxTo + s.rxOff : h.qn === s.rxQn && h.msn === s.rxMsn);
      if (!cont) return fault(TERM.catastrophicStream, 'INTERLEAVED', 'a DDP segment does not continue the message before it');
    }
    if (!h.tagged && h.mo !== s.rxOff) return fault(TERM.invalidMo, 'INVALID_MO', `MO ${h.mo}, expected ${s.rxOff}`);
    const off = s.rxOff;
    s.rxOff += plen;
    if (h.last) s.open = false;
    const env: Envelope = { srcQpn: s.remoteQpn, dstQpn: s.localQpn, ssn, msgLen: h.last ? off + plen : -1, off };
    if (!h.tagged && h.opcode === RdmapOpcode.Terminate && ext) env.ack = s.lastAckIn;
    const frame: SegFrame = carriesData(h.opcode)
      ? { kind: 'seg', env, hdr: u8.subarray(at, at + d.length), payload: plen > 0 ? [u8.subarray(at + d.length, at + u.len)] : [], ddp: h }
      : { kind: 'seg', env, hdr: u8.subarray(at, at + u.len), payload: [], ddp: h };
    out.push({ from, frame });
    return undefined;
  }

  /** We found the stream broken: Terminate, close, the QP's link is down. */
  #fail(s: QpStream, f: TcpFault): void {
    if (s.dead) return;
    this.counters.terminatesSent++;
    s.conn.terminate(f, f.reason);
    this.#down(s, 'broken');
  }

  // ---- rdma_cm-style services (src/cm through the device) -----------------------------------

  listen(service: number, handler: ((r: ServiceRequest) => void) | undefined): void {
    if (handler) {
      if (this.#services.has(service)) throw new SabreError(ErrorCode.InvalidState, `service ${service} already has a listener on this device`);
      this.#services.set(service, handler);
    } else this.#services.delete(service);
  }

  async dial(qpn: number, to: DeviceAddress, service: number, privateData: Uint8Array | undefined, timeoutMs: number): Promise<{ remoteQpn: number; privateData: Uint8Array | undefined }> {
    if (!isTcpAddress(to)) throw new SabreError(ErrorCode.InvalidArgument, `not a tcp device address: ${JSON.stringify(to)}`);
    const conn = await this.connector.dial(qpn, { transport: 'tcp', host: to.host, port: to.port }, service, privateData, timeoutMs);
    const reply = decodeSabrePd(conn.result?.peerPrivateData ?? new Uint8Array(0));
    if (reply?.kind !== 'connect' || reply.responderQpn === 0) {
      conn.close();
      throw new SabreError(ErrorCode.Unreachable, 'the listener did not name a QP in its MPA Reply');
    }
    this.#wanted.add(qpn);
    if (!this.#adopt(qpn, reply.responderQpn, conn)) throw new SabreError(ErrorCode.Closed, 'QP went away while connecting');
    return { remoteQpn: reply.responderQpn, privateData: reply.userData?.length ? reply.userData : undefined };
  }

  #onRequest(r: IncomingRequest): void {
    if (r.responderQpn !== undefined && r.responderQpn !== 0) {
      // A QP-to-QP connect whose local openQp() has not run yet: hold it for that call (the QP may
      // not exist yet: the peer process can be a step ahead). Parking is bounded in count and time.
      // One for a QP that is connected, or is no rc QP, is held the same way, never refused at
      // once: a quick refusal would tell a prober which QPNs are live, a step towards guessing the
      // pair of a raw connect (src/verbs/qpn.ts).
      if (r.park()) return;
      r.reject(`QP ${r.responderQpn} does not exist or is not connecting`);
      return;
    }
    const service = r.service ?? 0;
    const h = this.#services.get(service);
    if (!h) {
      r.reject(`no listener for service ${service}`);
      return;
    }
    const remoteQpn = r.initiatorQpn ?? 0;
    h({
      service,
      remoteQpn,
      privateData: r.userData?.length ? r.userData : undefined,
      from: { transport: 'tcp', host: r.remoteAddress ?? '127.0.0.1', port: r.remotePort ?? 1 }, peerKey: `tcp:${r.remoteAddress}#${r.nonce ?? r.remotePort}`,
      accept: async (qpn, privateData) => {
        this.#wanted.add(qpn);
        const conn = await r.accept(qpn, privateData);
        if (!this.#adopt(qpn, remoteQpn, conn)) throw new SabreError(ErrorCode.Closed, 'QP went away while accepting');
      },
      reject: (reason, busy) => r.reject(reason, busy),
    });
  }
}

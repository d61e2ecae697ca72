// The TCP transport: the engine's frames over iWARP (MPA/DDP/RDMAP, byte-exact), one MPA
// connection per rc QP pair (listener.ts pairs them; connection.ts frames them).
//
// The engine's envelope is implicit on TCP, so nothing but iWARP goes on the wire:
//   srcQpn/dstQpn  the connection names them;
//   ssn            counted per direction: TCP delivers in order, so the receiver numbers
//                  messages as they arrive (a message ends at the segment with the DDP L flag);
//   off            MO for untagged segments, the running offset within the message for tagged;
//   msgLen         unknown (-1) until the segment with L, which carries off + its length.
// Control frames:
//   hello   not sent: the MPA handshake is the connection; qp.connect resolves when it is up.
//   ack/rnr between two sabre peers (both MPA frames carried sabre's private-data block) they
//           travel as RDMAP opcode 15 (SabreControl, spec.ts), as does a sequence note before a
//           message resent after RNR (its ssn is not "the next one"). So a Write or Send
//           completes Success only once placed and visible at the responder (DESIGN §4).
//   With a standard iWARP peer no opcode 15 is ever sent: Writes and Sends complete when handed
//   to TCP, as iWARP defines it, and a Send that finds no posted receive is fatal (Terminate,
//   DDP untagged buffer error "no buffer"), as RFC 5040 says. The engine learns from the link
//   (flow.sabreExt) that the peer is standard: reads go as RFC 5040 Read Requests and complete
//   on the last Read Response (L), its Read Requests are answered with Read Responses only,
//   RdmaWriteWithImm uses RFC 7306 Immediate Data, SendWithImm is refused at post time
//   (NotSupported), and sabre's opcodes 12–15 arriving from it are a Terminate (opcode error).
//
// Placement: the deframer hands whole ULPDUs that already lie in device memory (CRC checked by
// the WASM kernel); each becomes a frame whose payload is a view of those bytes, and the whole
// read is one engine step, so one place() call copies every payload straight into its region.
//
// Errors: a segment that does not decode (DDP/RDMAP version, opcode, truncation) or breaks the
// stream's message structure → Terminate with the RFC 5040 codes, connection closed, QP to
// ERROR (the oldest unfinished work request LocQpOpErr, the rest WrFlushErr). A Terminate from
// the peer → the engine fails the QP with the status the Terminate implies. The connection
// lost without a Terminate (peer killed, reset, FIN) → ERROR, the oldest unfinished work
// request RetryExcErr, as an RC QP whose peer stopped answering. When the local QP enters
// ERROR (by the engine, modify or destroy) its connection is closed after what is queued.
import type { RdmapEngine } from '../../rdmap/engine.js';
import { ErrorCode, SabreError } from '../../core/errors.js';
import { QpState, WcStatus, type WcStatusValue } from '../../core/enums.js';
import { carriesData, decodeDdp, RdmapOpcode } from '../../wire/rdmap.js';
import { TERM_TABLES, TermLayer } from '../../wire/spec.js';
import { TERM, termForDdpError } from '../../wire/terminate.js';
import type { DeviceAddress } from '../../core/address.js';
import type { Envelope, Frame, Inbound, SegFrame } from '../../core/frame.js';
import type { Transport } from '../types.js';
import type { MpaConnection } from './connection.js';
import { type DataPlane, defaultEmss, mulpdu, type RxUlpdu } from './fpdu.js';
import { type IncomingRequest, type TcpAddress, TcpEndpoint, type TcpEndpointOptions } from './listener.js';
import { decodeSabrePd } from './private-data.js';
import { decodeSabreControl, encodeSabreControl, SabreControlKind } from './sabre-control.js';
import { fault, type TcpFault } from './fault.js';

/** What the transport needs of its device (src/verbs/device.ts Device). */
export interface EngineHost {
  readonly engine: RdmapEngine;
  readonly closed: boolean;
  run(step: (now: number) => void): void;
}

export interface TcpTransportOptions extends Omit<TcpEndpointOptions, 'dp'> {
  dp: DataPlane;
}

const DDP_L = 0x40;
const CRC_BLOCK = 16384;


export type TcpDeviceAddress = TcpAddress & DeviceAddress;

export function isTcpAddress(a: DeviceAddress): a is TcpDeviceAddress {
  return a.transport === 'tcp' && typeof a.host === 'string' && a.host.length > 0 && Number.isInteger(a.port) && (a.port as number) > 0 && (a.port as number) < 65536;
}

/** One rc QP's connection. */
class QpLink {
  readonly localQpn: number;
  remoteQpn: number;
  readonly conn: MpaConnection;
  /** The peer carried sabre's block: acks, RNR and sequence notes go as opcode 15. */
  readonly sabre: boolean;
  /** The address the engine's flow uses (Inbound.from must match it). */
  peer: DeviceAddress | undefined;
  attached = false;
  dead = false;
  // transmit
  txSsn = 0;
  blocked = false;
  readonly queue: { hdr: Uint8Array; payload: readonly Uint8Array[] }[] = [];
  // receive
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
    this.sabre = decodeSabrePd(conn.result?.peerPrivateData ?? new Uint8Array(0))?.kind === 'connect';
  }
}

export class TcpTransport implements Transport {
  readonly address: TcpDeviceAddress;
  readonly endpoint: TcpEndpoint;
  /** Largest DDP payload per segment so an untagged segment fits one FPDU of the MULPDU. */
  readonly mss: number;
  /** The MULPDU (largest ULPDU an FPDU carries, markers allowed for) on this device's path. */
  readonly mtu: number;
  readonly #links = new Map<number, QpLink>();
  readonly #connecting = new Set<number>();
  readonly #services = new Map<number, (r: IncomingRequest) => void>();
  #host: EngineHost | undefined;
  #handler: ((batch: Inbound[]) => void) | undefined;
  #closed = false;
  #localAcks: Inbound[] = [];
  #acksScheduled = false;
  readonly counters = { segmentsIn: 0, segmentsOut: 0, controlIn: 0, controlOut: 0, terminatesSent: 0, streamFaults: 0, dropped: 0, connections: 0 };

  private constructor(endpoint: TcpEndpoint) {
    this.endpoint = endpoint;
    this.address = Object.freeze({ ...endpoint.address }) as TcpDeviceAddress;
    // The marker-bearing MULPDU is the smaller: segments then fit whatever the peer negotiates.
    // Rounded down to a multiple of 16 KiB: the CRC32C kernel's fast path takes 16 KiB blocks
    // (the rest goes through a ~40% slower one), so a 64 KiB Write is 48 + 16 KiB, all fast.
    this.mtu = mulpdu(defaultEmss(endpoint.address.host), true);
    const m = this.mtu - 18;
    this.mss = m >= CRC_BLOCK ? m - (m % CRC_BLOCK) : m;
    endpoint.onConnectRequest((r) => this.#onRequest(r));
  }

  static async open(opts: TcpTransportOptions): Promise<TcpTransport> {
    return new TcpTransport(await TcpEndpoint.listen(opts));
  }

  /** Called once by the device: the engine the QP failures go to. */
  bind(host: EngineHost): void {
    this.#host = host;
    hosts.set(host, this);
  }

  onReceive(handler: (batch: Inbound[]) => void): void {
    this.#handler = handler;
  }

  reachable(to: DeviceAddress): boolean {
    return !this.#closed && isTcpAddress(to);
  }

  stats(): Record<string, number> {
    return { ...this.counters, links: this.#links.size, endpointConnections: this.endpoint.connectionCount };
  }

  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    for (const l of this.#links.values()) l.dead = true;
    this.#links.clear();
    await this.endpoint.close();
  }

  // ---- engine → wire ------------------------------------------------------------------------

  send(to: DeviceAddress, frames: Frame[]): void {
    if (this.#closed) return;
    for (const f of frames) {
      switch (f.kind) {
        case 'seg':
          this.#sendSeg(f);
          break;
        case 'hello':
          if (!f.reply) this.#connect(f.srcQpn, to, f.dstQpn);
          break;
        case 'ack': {
          const l = this.#link(f.srcQpn);
          if (l?.sabre) this.#control(l, SabreControlKind.Ack, f.ssn);
          break;
        }
        case 'rnr': {
          const l = this.#link(f.srcQpn);
          if (!l) break;
          if (l.sabre) this.#control(l, SabreControlKind.Rnr, f.ssn);
          else this.#fail(l, fault(TERM.noBuffer, 'NO_BUFFER', 'a Send found no posted receive'), undefined);
          break;
        }
      }
    }
  }

  #link(localQpn: number): QpLink | undefined {
    const l = this.#links.get(localQpn);
    return l && !l.dead ? l : undefined;
  }

  #sendSeg(f: SegFrame): void {
    const env = f.env;
    const l = this.#link(env.srcQpn);
    if (!l) {
      this.counters.dropped++;
      return;
    }
    if (env.off === 0 && l.sabre) {
      // A resend after RNR is not the next message in the stream: say which one it is.
      if (env.ssn !== l.txSsn + 1) this.#control(l, SabreControlKind.Seq, env.ssn);
      // The engine's ack riding on a Terminate tells the peer which of its messages failed.
      if (env.ack !== undefined) this.#control(l, SabreControlKind.Ack, env.ack);
    }
    if (env.off === 0) l.txSsn = env.ssn;
    this.#write(l, f.hdr, f.payload);
    this.counters.segmentsOut++;
    const opcode = f.hdr[1]! & 0x0f;
    if (opcode === RdmapOpcode.Terminate && (f.hdr[0]! & 0x80) === 0) {
      // RFC 5040 §5.2: nothing follows a Terminate; the engine has put the QP in ERROR.
      this.counters.terminatesSent++;
      l.dead = true;
      this.#drop(l);
      l.conn.close();
      return;
    }
    if (!l.sabre && (f.hdr[0]! & DDP_L) !== 0) {
      // iWARP semantics with a standard peer: complete at hand-off to TCP.
      this.#localAcks.push({ from: l.peer!, frame: { kind: 'ack', srcQpn: l.remoteQpn, dstQpn: l.localQpn, ssn: env.ssn } });
      if (!this.#acksScheduled) {
        this.#acksScheduled = true;
        queueMicrotask(this.#deliverLocalAcks);
      }
    }
  }

  #deliverLocalAcks = (): void => {
    this.#acksScheduled = false;
    const b = this.#localAcks;
    this.#localAcks = [];
    if (b.length && !this.#closed) this.#handler?.(b);
  };

  #control(l: QpLink, kind: number, ssn: number): void {
    this.counters.controlOut++;
    this.#write(l, encodeSabreControl(kind, ssn), []);
  }

  #write(l: QpLink, hdr: Uint8Array, payload: readonly Uint8Array[]): void {
    if (l.blocked) {
      l.queue.push({ hdr, payload });
      return;
    }
    try {
      if (!l.conn.send(hdr, payload)) this.#block(l);
    } catch {
      // The connection went away under us; its 'close' fails the QP.
      this.counters.dropped++;
    }
  }

  #block(l: QpLink): void {
    l.blocked = true;
    l.conn.once('drain', () => {
      l.blocked = false;
      while (l.queue.length && !l.blocked) {
        const q = l.queue.shift()!;
        try {
          if (!l.conn.send(q.hdr, q.payload)) this.#block(l);
        } catch {
          l.queue.length = 0;
          return;
        }
      }
    });
  }

  // ---- connection setup ---------------------------------------------------------------------

  /** The engine greeted the peer QP (qp.connect): find or make the connection, then report it up. */
  #connect(localQpn: number, to: DeviceAddress, remoteQpn: number): void {
    const pre = this.#links.get(localQpn);
    if (pre && !pre.dead && pre.remoteQpn === remoteQpn) {
      // rdma_cm path: the connection came first.
      this.#attach(pre, to);
      return;
    }
    if (!isTcpAddress(to) || this.#connecting.has(localQpn)) return;
    this.#connecting.add(localQpn);
    this.endpoint.connectQp(localQpn, { address: { transport: 'tcp', host: to.host, port: to.port }, qpn: remoteQpn }).then(
      (conn) => {
        this.#connecting.delete(localQpn);
        const l = this.#adopt(localQpn, remoteQpn, conn);
        if (l) this.#attach(l, to);
      },
      () => {
        this.#connecting.delete(localQpn);
        this.#failQp(localQpn, undefined);
      },
    );
  }

  /**
   * Bind an established connection to a local QP (before or after its qp.connect). Returns
   * undefined (and closes the connection) when the QP is gone.
   */
  #adopt(localQpn: number, remoteQpn: number, conn: MpaConnection): QpLink | undefined {
    const qp = this.#host?.engine.qps.get(localQpn);
    if (this.#closed || !qp || qp.state === QpState.Error || qp.state === QpState.Reset || conn.state === 'closed') {
      conn.close();
      return undefined;
    }
    const old = this.#links.get(localQpn);
    if (old) {
      old.dead = true;
      old.conn.close();
    }
    const l = new QpLink(localQpn, remoteQpn, conn);
    this.#links.set(localQpn, l);
    this.counters.connections++;
    conn.on('failed', (f: TcpFault) => {
      if (l.dead) return;
      // The stream lost (reset, ended inside an FPDU): the peer stopped answering. Any other
      // fault we found (bad CRC, framing) and answered with a Terminate already.
      const lost = f.layer === TermLayer.Llp && f.ecode === TERM_TABLES.llp.ecode.TcpStreamLost;
      if (!lost) this.counters.streamFaults++;
      this.#failQp(l.localQpn, lost ? WcStatus.RetryExcErr : WcStatus.LocQpOpErr, l);
    });
    conn.once('close', () => {
      if (l.dead) return;
      // Lost without a Terminate: the peer stopped answering.
      this.#failQp(l.localQpn, WcStatus.RetryExcErr, l);
    });
    return l;
  }

  /** The engine's flow exists now (qp.connect ran): deliver segments and tell the engine it is connected. */
  #attach(l: QpLink, to: DeviceAddress): void {
    const host = this.#host;
    if (!host || l.attached) return;
    l.peer = to;
    l.attached = true;
    const qp = host.engine.qps.get(l.localQpn);
    // A standard iWARP peer (no sabre block in the MPA exchange): the engine keeps to RFC 5040/7306.
    if (qp?.flow) qp.flow.sabreExt = l.sabre;
    if (qp) {
      // Close the connection when the QP fails for any reason (after the device flushed the Terminate, if any).
      const prev = qp.onError;
      qp.onError = () => {
        prev?.();
        // Not now: the device is about to hand the engine's Terminate (if any) to this link.
        queueMicrotask(() => {
          if (l.dead) return;
          l.dead = true;
          this.#drop(l);
          l.conn.close();
        });
      };
    }
    l.conn.onUlpdus((batch, u8) => this.#onUlpdus(l, batch, u8));
    queueMicrotask(() => {
      if (l.dead || this.#closed) return;
      this.#handler?.([{ from: to, frame: { kind: 'hello', srcQpn: l.remoteQpn, dstQpn: l.localQpn, reply: true } }]);
    });
  }

  #drop(l: QpLink): void {
    if (this.#links.get(l.localQpn) === l) this.#links.delete(l.localQpn);
  }

  // ---- wire → engine ------------------------------------------------------------------------

  #onUlpdus(l: QpLink, batch: RxUlpdu[], u8: Uint8Array): void {
    if (l.dead || this.#closed) return;
    const out: Inbound[] = [];
    const from = l.peer!;
    let bad: TcpFault | undefined;
    for (const u of batch) {
      bad = this.#decodeOne(l, u, u8, from, out);
      if (bad) break;
    }
    this.counters.segmentsIn += out.length;
    // Everything before a bad segment is good: it is placed and completed first.
    if (out.length) this.#handler?.(out);
    if (bad) this.#fail(l, bad, WcStatus.LocQpOpErr);
  }

  #decodeOne(l: QpLink, u: RxUlpdu, u8: Uint8Array, from: DeviceAddress, out: Inbound[]): TcpFault | undefined {
    const at = u.ptr;
    const d = decodeDdp(u8, at, at + u.len);
    if (!d.ok) {
      const t = termForDdpError(d.error, u.len > 0 && (u8[at]! & 0x80) !== 0);
      return fault(t.term, t.code, t.reason);
    }
    const h = d.value;
    const plen = u.len - d.length;
    if (!h.tagged && h.opcode === RdmapOpcode.SabreControl) {
      const c = l.sabre && !l.open ? decodeSabreControl(u8, at + d.length, plen) : undefined;
      if (!c) return fault(TERM.badOpcode, 'OPCODE', l.sabre ? 'malformed sabre control message' : 'opcode 15 from a peer that is not sabre');
      this.counters.controlIn++;
      if (c.kind === SabreControlKind.Seq) l.seqNext = c.ssn;
      else {
        if (c.kind === SabreControlKind.Ack) l.lastAckIn = c.ssn;
        out.push({ from, frame: { kind: c.kind === SabreControlKind.Ack ? 'ack' : 'rnr', srcQpn: l.remoteQpn, dstQpn: l.localQpn, ssn: c.ssn } });
      }
      return undefined;
    }
    if (!l.sabre && h.opcode >= RdmapOpcode.SendWithImm) return fault(TERM.badOpcode, 'OPCODE', `sabre extension opcode ${h.opcode} from a peer that is not sabre`);
    let ssn: number;
    if (!l.open) {
      ssn = l.seqNext ?? l.rxSsn + 1;
      l.seqNext = undefined;
      l.rxSsn = ssn;
      l.open = true;
      l.rxOff = 0;
      l.rxTagged = h.tagged;
      l.rxOpcode = h.opcode;
      if (h.tagged) {
        l.rxStag = h.stag;
        l.rxTo = h.to;
      } else {
        l.rxQn = h.qn;
        l.rxMsn = h.msn;
      }
    } else {
      ssn = l.rxSsn;
      // One message at a time on the stream: a segment that does not continue the open one is a broken stream.
      const cont = h.tagged === l.rxTagged && h.opcode === l.rxOpcode
        && (h.tagged ? h.stag === l.rxStag && h.to === l.rxTo + l.rxOff : h.qn === l.rxQn && h.msn === l.rxMsn);
      if (!cont) return fault(TERM.catastrophicStream, 'INTERLEAVED', 'a DDP segment does not continue the message before it');
    }
    if (!h.tagged && h.mo !== l.rxOff) return fault(TERM.invalidMo, 'INVALID_MO', `MO ${h.mo}, expected ${l.rxOff}`);
    const off = l.rxOff;
    l.rxOff += plen;
    if (h.last) l.open = false;
    const env: Envelope = { srcQpn: l.remoteQpn, dstQpn: l.localQpn, ssn, msgLen: h.last ? off + plen : -1, off };
    if (!h.tagged && h.opcode === RdmapOpcode.Terminate && l.sabre) env.ack = l.lastAckIn;
    let frame: SegFrame;
    if (carriesData(h.opcode)) {
      frame = { kind: 'seg', env, hdr: u8.subarray(at, at + d.length), payload: plen > 0 ? [u8.subarray(at + d.length, at + u.len)] : [] };
    } else {
      frame = { kind: 'seg', env, hdr: u8.subarray(at, at + u.len), payload: [] };
    }
    out.push({ from, frame });
    return undefined;
  }

  // ---- failures -----------------------------------------------------------------------------

  /** We found the stream broken: Terminate, close, fail the QP. */
  #fail(l: QpLink, f: TcpFault, status: WcStatusValue | undefined): void {
    if (l.dead) return;
    l.dead = true;
    this.#drop(l);
    this.counters.terminatesSent++;
    l.conn.terminate(f, f.reason);
    this.#failQp(l.localQpn, status, undefined);
  }

  #failQp(localQpn: number, status: WcStatusValue | undefined, l?: QpLink): void {
    if (l) {
      l.dead = true;
      this.#drop(l);
    }
    const host = this.#host;
    if (!host || host.closed) return;
    const qp = host.engine.qps.get(localQpn);
    if (!qp || qp.state === QpState.Error || qp.state === QpState.Reset) return;
    host.run((now) => host.engine.toError(qp, now, qp.sq.find((w) => !w.done), status));
  }

  // ---- rdma_cm-style services (src/cm) ------------------------------------------------------

  /** Route connects for `service` (responderQpn 0) to `handler`; undefined stops. */
  listenService(service: number, handler: ((r: IncomingRequest) => void) | undefined): void {
    if (handler) {
      if (this.#services.has(service)) throw new SabreError(ErrorCode.InvalidState, `service ${service} already has a listener on this device`);
      this.#services.set(service, handler);
    } else this.#services.delete(service);
  }

  /** Bind a connection made by the cm (before qp.connect) to a local QP. */
  adoptConnection(localQpn: number, remoteQpn: number, conn: MpaConnection): boolean {
    return this.#adopt(localQpn, remoteQpn, conn) !== undefined;
  }

  #onRequest(r: IncomingRequest): void {
    if (r.responderQpn !== undefined && r.responderQpn !== 0) {
      // A QP-to-QP connect whose local connect() has not run yet: hold it for that call.
      // (The QP may not exist yet: the peer process can be a step ahead. Parking is bounded in count and time.)
      const qp = this.#host?.engine.qps.get(r.responderQpn);
      const waiting = !qp || (qp.type === 'rc' && (qp.state === QpState.Reset || qp.state === QpState.Init || qp.state === QpState.Rtr));
      if (waiting && r.park()) return;
      r.reject(`QP ${r.responderQpn} does not exist or is not connecting`);
      return;
    }
    const h = this.#services.get(r.service ?? 0);
    if (!h) {
      r.reject(`no listener for service ${r.service ?? 0}`);
      return;
    }
    h(r);
  }
}

/** The TCP transport of a device (src/cm uses it). */
const hosts = new WeakMap<EngineHost, TcpTransport>();
export function tcpTransportOf(host: EngineHost): TcpTransport | undefined {
  return hosts.get(host);
}

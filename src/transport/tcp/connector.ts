// The MPA connector of a tcp device: one listening socket, and one MPA connection per rc QP
// pair, made or accepted and matched by the QPN pair carried in sabre's MPA private data.
//
// Who initiates: both sides call connect with the other's address and QPN. The side whose
// (host, port, qpn) tuple — its own advertised address and QPN against the address and QPN it
// was given for the peer — sorts lower opens the TCP connection; the other waits for the
// matching MPA Request. A request that arrives before the local connect call is parked (bounded
// by the handshake timeout) and matched when the call comes.
//
// When the two sides' views of the addresses disagree (a peer reached through a relay or an
// alias), both may decide to wait: a waiting side therefore also initiates after
// `fallbackMs`. Both may also decide to initiate; crossing requests for the same QP pair are
// resolved by the random per-device nonce in the private data: the connection initiated by
// the side with the lower nonce survives, the other is rejected as "crossing connect". A dial
// (responder QPN 0) carries a per-destination nonce instead (dial-nonce.ts): a listener keys
// the dialing device by it.
import dns from 'node:dns/promises';
import net from 'node:net';
import { createHash, randomBytes } from 'node:crypto';
import { hostKey } from '../../core/address.js';
import { busiestSource, oldestOf } from '../../core/busiest.js';
import { ErrorCode, SabreError } from '../../core/errors.js';
import type { FramingMemory } from './fpdu.js';
import { adoptAccepted, dialSocket, MpaConnection, type TcpConnectionOptions } from './connection.js';
import type { MpaRequestInfo } from './mpa-handshake.js';
import { decodeSabrePd, encodeSabrePd } from './private-data.js';
import { type Pairing, provesReply, provesRequest, replyProof, requestProof } from './connect-proof.js';
import { faultError, type TcpFault } from './fault.js';
import { type Parked, ParkedRequests } from './parked.js';
import { DialNonces } from './dial-nonce.js';
import { Lingering } from '../../core/refuse.js';
import { encodeMpaFrame, type MpaFrame, mpaFrameLength } from '../../wire/mpa.js';

export interface TcpAddress {
  readonly transport: 'tcp';
  readonly host: string;
  readonly port: number;
}

export interface MpaConnectorOptions {
  dp: FramingMemory;
  /** Listen address (default 127.0.0.1), port 0 = ephemeral. */
  host?: string;
  port?: number;
  /** Per-connection options (handshake knobs, buffers, EMSS). */
  connection?: Omit<TcpConnectionOptions, 'dp'>;
  /** Whole connectQp deadline (default 10 s). */
  connectTimeoutMs?: number;
  /** A waiting (responder) side initiates too after this long without a matching request (default 1 s). */
  fallbackMs?: number;
  /**
   * Accepted connections held at once, handshaking or established (default 1024). Past it a
   * connection from a source holding fewer handshaking ones closes the oldest handshaking one of
   * the source holding the most (`handshakesEvicted`); otherwise it is refused at once.
   */
  maxConnections?: number;
  /** … of them from one source host (default 128). */
  maxConnectionsPerHost?: number;
  /** An accepted connection must complete its MPA exchange within this (default 10 s). */
  handshakeTimeoutMs?: number;
}

/** Refusals and timeouts of accepted connections (TcpLink.stats). */
export interface ConnectorCounters {
  connectionsAccepted: number;
  connectionsRefused: number;
  connectionsRefusedHost: number;
  handshakeTimeouts: number;
  /** Incoming connections closed before their MPA handshake completed (found by the fuzz campaign: such refusals were uncounted). */
  handshakesRefused: number;
  /** Connections (incoming or outgoing) refused at establishment: no device memory left for their receive staging. */
  connectionsRefusedMemory: number;
  /** Established connections nobody took within the handshake deadline (a cm accept whose QP never connected, a Request completed after another won): closed. */
  connectionsUnowned: number;
  /** Accepted connections still in their MPA handshake closed, at maxConnections, for one from a source holding fewer. */
  handshakesEvicted: number;
}

/** An MPA Request no local connectQp is waiting for (rdma_cm-like accept path). */
export interface IncomingRequest {
  readonly info: MpaRequestInfo;
  /** The initiator's QPN when it is a sabre peer. */
  readonly initiatorQpn: number | undefined;
  /** The QPN it wants to reach (0 / undefined: any). */
  readonly responderQpn: number | undefined;
  readonly remoteAddress: string | undefined;
  readonly remotePort: number | undefined;
  /** A sabre initiator's nonce; on a dial (responder QPN 0) its value for this listener alone (dial-nonce.ts): with its host, which device dialed. */
  readonly nonce: number | undefined;
  /** rdma_cm-style connect (responderQpn 0): the service asked for and the application's private data. */
  readonly service: number | undefined;
  readonly userData: Uint8Array | undefined;
  /** Accept with our QPN (and private data for the peer); resolves when the connection is established. */
  accept(localQpn: number, userData?: Uint8Array): Promise<MpaConnection>;
  /** `busy`: no room now, the initiator may try again (the sabre block's BUSY flag). */
  reject(reason: string, busy?: boolean): void;
  /**
   * A sabre connect for a QPN whose local connectQp has not been called yet: hold it (bounded,
   * like an unhandled request) until it is. False when it cannot be parked.
   */
  park(): boolean;
}

interface Waiter {
  localQpn: number;
  remoteQpn: number;
  /** Both ends' secret (qp.connect's): every Request and Reply of the pairing must prove it. */
  secret: Uint8Array | undefined;
  /** The peer's Request this QP answered (#acceptFor): no other is taken while it completes. */
  accepting: MpaConnection | undefined;
  /**
   * Every Request it answered and that has not failed (without a secret, all for the pairing):
   * the one that completes first wins, and the settle closes the rest — one left answered would
   * become, at its late RTR, an established connection nobody owns, buffering what it is sent.
   */
  answered: Set<MpaConnection>;
  resolve: (c: MpaConnection) => void;
  reject: (e: Error) => void;
  settled: boolean;
  outgoing: MpaConnection | undefined;
  timers: NodeJS.Timeout[];
  /** Where the peer is dialled (#initiate), again after an unproven Request it answered failed. */
  to: TcpAddress;
  /** Why the last Request it answered failed (told with a timeout). */
  lastFault: string | undefined;
}

export class MpaConnector {
  readonly address: TcpAddress;
  /** Random per endpoint; breaks crossing connects (QP-to-QP only: a dial carries dialNonce). */
  readonly nonce: number;
  readonly #dialNonces = new DialNonces();
  readonly #server: net.Server;
  readonly #opts: MpaConnectorOptions;
  readonly #connOpts: TcpConnectionOptions;
  readonly #waiters = new Map<number, Waiter>();
  readonly #parked = new ParkedRequests();
  readonly #conns = new Set<MpaConnection>();
  /** Accepted connections per source host (each is a socket, buffers, a handshake). */
  readonly #perHost = new Map<string, number>();
  /** Accepted connections not yet established, oldest first, with their source host. */
  readonly #handshaking = new Map<MpaConnection, string>();
  /** Refused sockets lingering for their reject to be read (at most REFUSED_LINGER_MAX); `cut`: refused past that, destroyed at once without the MPA reject. */
  readonly lingering = new Lingering();
  /** What gives an accepted connection's slots back (once: at its close, or when it is evicted). */
  readonly #release = new Map<MpaConnection, () => void>();
  #accepted = 0;
  readonly #acceptOpts: TcpConnectionOptions;
  /** A QP-to-QP dial's: it offers the peer-to-peer RTR (#initiate). */
  readonly #dialOpts: TcpConnectionOptions;
  readonly counters: ConnectorCounters = { connectionsAccepted: 0, connectionsRefused: 0, connectionsRefusedHost: 0, handshakeTimeouts: 0, handshakesRefused: 0, connectionsRefusedMemory: 0, handshakesEvicted: 0, connectionsUnowned: 0 };
  #onRequest: ((r: IncomingRequest) => void) | undefined;
  #closed = false;

  private constructor(server: net.Server, address: TcpAddress, opts: MpaConnectorOptions) {
    this.#server = server;
    this.address = address;
    this.#opts = opts;
    this.#connOpts = { ...opts.connection, dp: opts.dp };
    const hsMs = opts.handshakeTimeoutMs ?? opts.connection?.mpa?.timeoutMs ?? 10_000;
    this.#acceptOpts = { ...this.#connOpts, mpa: { ...opts.connection?.mpa, timeoutMs: hsMs } };
    this.#dialOpts = { ...this.#connOpts, mpa: { ...opts.connection?.mpa, p2p: 'offer' } };
    this.nonce = randomBytes(4).readUInt32BE(0);
    server.on('connection', (s) => this.#incoming(s));
  }

  static async listen(opts: MpaConnectorOptions): Promise<MpaConnector> {
    const host = opts.host ?? '127.0.0.1';
    // pauseOnConnect: nothing is read before adoptAccepted moves the handle to a zero-copy socket.
    const server = net.createServer({ noDelay: true, pauseOnConnect: true });
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(opts.port ?? 0, host, () => {
        server.off('error', reject);
        resolve();
      });
    });
    const a = server.address() as net.AddressInfo;
    return new MpaConnector(server, { transport: 'tcp', host, port: a.port }, opts);
  }

  /** MPA Requests waiting for a local connectQp (diagnostics, tests). */
  get parkedRequests(): number {
    return this.#parked.size;
  }

  /** Live MPA connections (handshaking or established). */
  get connectionCount(): number {
    return this.#conns.size;
  }

  /** The deterministic rule: the lower (host, port, qpn) tuple initiates. */
  isInitiator(localQpn: number, remote: TcpAddress, remoteQpn: number): boolean {
    const l = this.address;
    if (l.host !== remote.host) return l.host < remote.host;
    if (l.port !== remote.port) return l.port < remote.port;
    return localQpn < remoteQpn;
  }

  /** Unmatched requests (no sabre block, or no local connectQp for them) go here; without a handler they are rejected. */
  onConnectRequest(handler: ((r: IncomingRequest) => void) | undefined): void {
    this.#onRequest = handler;
  }

  /**
   * Establish the connection of local QP `localQpn` with `remote.qpn` at `remote.address`; with
   * `remote.secret` (the peer's connect was given the same one) only a peer that proves it.
   */
  connectQp(localQpn: number, remote: { address: TcpAddress; qpn: number; secret?: Uint8Array | undefined }): Promise<MpaConnection> {
    if (this.#closed) return Promise.reject(new SabreError(ErrorCode.Closed, 'TCP endpoint is closed'));
    if (this.#waiters.has(localQpn)) return Promise.reject(new SabreError(ErrorCode.InvalidState, `QP ${localQpn} is already connecting`));
    return new Promise<MpaConnection>((resolve, reject) => {
      // A secret pairs once: a Request of an earlier attempt made with it (one that timed out,
      // seen on its way) would otherwise prove it again, replayed by whoever saw it.
      if (remote.secret && !this.#firstUse(remote.secret, localQpn)) {
        reject(new SabreError(ErrorCode.InvalidArgument, `QP ${localQpn}: this secret was given to an earlier connect: give each connect its own`));
        return;
      }
      const w: Waiter = {
        localQpn, remoteQpn: remote.qpn, secret: remote.secret, accepting: undefined, answered: new Set(), resolve, reject, settled: false, outgoing: undefined, timers: [],
        to: remote.address, lastFault: undefined,
      };
      this.#waiters.set(localQpn, w);
      const timeoutMs = this.#opts.connectTimeoutMs ?? 10_000;
      const t = setTimeout(() => {
        const last = w.lastFault === undefined ? '' : ` (a connection request it answered failed: ${w.lastFault})`;
        this.#settle(w, new SabreError(ErrorCode.Timeout, `QP ${localQpn}: no connection with QP ${remote.qpn} at ${remote.address.host}:${remote.address.port} within ${timeoutMs} ms${last}`));
      }, timeoutMs);
      t.unref();
      w.timers.push(t);
      // An initiator takes the peer's Request parked here (its fallback dial, when it connected
      // more than fallbackMs before us) only if it proves the secret; without one, only once its
      // own dial has lost the crossing to it (#initiate): an initiator never took a Request
      // before, and a stranger's parked here would otherwise pair first.
      const initiator = this.isInitiator(localQpn, remote.address, remote.qpn);
      const parked = !initiator || w.secret ? this.#takeParked(w) : undefined;
      if (parked) {
        this.#acceptFor(w, parked);
        return;
      }
      if (initiator) {
        this.#initiate(w, remote.address);
        return;
      }
      const f = setTimeout(() => {
        if (!w.settled && !w.outgoing) this.#initiate(w, remote.address);
      }, this.#opts.fallbackMs ?? 1000);
      f.unref();
      w.timers.push(f);
    });
  }

  /**
   * rdma_cm-style connect: ask the listener for `service` at `to` for a QP of its choosing
   * (responderQpn 0). Resolves with the established connection; the responder's QPN and private
   * data are in its reply (decodeSabrePd(conn.result.peerPrivateData)).
   */
  dial(localQpn: number, to: TcpAddress, service: number, userData?: Uint8Array, timeoutMs = this.#opts.connectTimeoutMs ?? 10_000): Promise<MpaConnection> {
    if (this.#closed) return Promise.reject(new SabreError(ErrorCode.Closed, 'TCP endpoint is closed'));
    return new Promise<MpaConnection>((resolve, reject) => {
      const { socket, rx } = dialSocket(to.host, to.port, this.address.host);
      const pd = encodeSabrePd({ kind: 'connect', initiatorQpn: localQpn, responderQpn: 0, nonce: this.dialNonce(to), service, ...(userData ? { userData } : {}) });
      const c = MpaConnection.initiate(socket, this.#connOpts, pd, rx);
      this.#track(c);
      const t = setTimeout(() => {
        c.close();
        reject(new SabreError(ErrorCode.Timeout, `no answer from service ${service} at ${to.host}:${to.port} within ${timeoutMs} ms`));
      }, timeoutMs);
      t.unref();
      c.once('established', () => {
        clearTimeout(t);
        resolve(c);
      });
      c.once('failed', (f: TcpFault) => {
        clearTimeout(t);
        reject(faultError(f, `service ${service} at ${to.host}:${to.port}: ${f.reason}`));
      });
    });
  }

  /** What a dial to `to` carries as its nonce: the listener's key for this device, shown to it alone. */
  dialNonce(to: TcpAddress): number {
    return this.#dialNonces.toward(to);
  }

  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    for (const w of this.#waiters.values()) this.#settle(w, new SabreError(ErrorCode.Closed, 'TCP endpoint closed'));
    this.#parked.closeAll();
    for (const c of this.#conns) c.socket.destroy();
    await new Promise<void>((resolve) => this.#server.close(() => resolve()));
  }

  #track(c: MpaConnection): void {
    this.#conns.add(c);
    c.once('close', () => this.#conns.delete(c));
    c.on('failed', (f: TcpFault) => {
      if (f.code === 'NO_MEMORY') this.counters.connectionsRefusedMemory++;
      else if (f.code === 'NO_OWNER') this.counters.connectionsUnowned++;
    });
  }

  #initiate(w: Waiter, to: TcpAddress): void {
    const { socket, rx } = dialSocket(to.host, to.port, this.address.host);
    const proof = w.secret && requestProof(w.secret, { initiatorQpn: w.localQpn, responderQpn: w.remoteQpn, nonce: this.nonce });
    const pd = encodeSabrePd({ kind: 'connect', initiatorQpn: w.localQpn, responderQpn: w.remoteQpn, nonce: this.nonce, ...(proof ? { proof } : {}) });
    // With the RTR (RFC 6581) the responder is established only once this end, still holding
    // the dial, sends it. Without, one that took a Request parked from an attempt this end had
    // given up (its FIN not read yet: a connect again right after a reset) was established on
    // its Reply alone, with nobody at the other end, and our next Request waited parked.
    const c = MpaConnection.initiate(socket, this.#dialOpts, pd, rx);
    this.#track(c);
    w.outgoing = c;
    c.once('established', () => {
      if (w.outgoing !== c) return c.close();
      // The responder proves the secret in its Reply too: whoever answered at that address is the peer.
      const reply = decodeSabrePd(c.result?.peerPrivateData ?? new Uint8Array(0));
      if (w.secret && !(reply?.kind === 'connect' && reply.initiatorQpn === w.localQpn && reply.responderQpn === w.remoteQpn && provesReply(w.secret, reply, reply.proof, proof!))) {
        c.close();
        return this.#settle(w, new SabreError(ErrorCode.Unreachable, `QP ${w.localQpn}: the peer at ${to.host}:${to.port} does not prove the connect's secret`));
      }
      this.#settle(w, undefined, c);
    });
    c.once('failed', (f: TcpFault) => {
      if (w.outgoing !== c) return;
      w.outgoing = undefined;
      // Losing a crossing is not a failure: the peer's own request will be accepted here — or
      // was parked before our connect, when the peer dialled first: take it now. Without a
      // secret nothing tells the peer's Request from a stranger's but the nonce the peer's
      // REJECT told (sabrePdCrossing: whatever address its dial left from), or, from a peer
      // that tells none, where it came from: only one from the host we dialled, with the lower
      // nonce that won.
      if (f.code === 'REJECTED' && f.reason.startsWith('crossing connect')) {
        const told = f.crossingNonce;
        if (told !== undefined) {
          if (told >= this.nonce) return; // not a crossing this end lost: its own Request is answered here
          const parked = this.#takeParked(w, w.secret ? undefined : (p) => p.nonce === told);
          if (parked) this.#acceptFor(w, parked);
          return;
        }
        void addressesOf(to.host).then((hosts) => {
          if (w.settled) return;
          const peer = (p: Parked): boolean => hosts.has(p.conn.socket.remoteAddress?.replace(/^::ffff:/, '') ?? '') && p.nonce < this.nonce;
          const parked = this.#takeParked(w, w.secret ? undefined : peer);
          if (parked) this.#acceptFor(w, parked);
        });
        return;
      }
      this.#settle(w, faultError(f, `QP ${w.localQpn}: ${f.reason}`));
    });
  }

  #settle(w: Waiter, err: Error | undefined, conn?: MpaConnection): void {
    if (w.settled) return;
    w.settled = true;
    for (const t of w.timers) clearTimeout(t);
    if (this.#waiters.get(w.localQpn) === w) this.#waiters.delete(w.localQpn);
    if (w.outgoing && w.outgoing !== conn) w.outgoing.close();
    for (const c of w.answered) if (c !== conn) c.close();
    w.answered.clear();
    if (err) w.reject(err);
    else w.resolve(conn!);
  }

  /** Accept the peer's Request `r` for w's pairing (proven, where w has a secret). */
  #acceptFor(w: Waiter, r: { conn: MpaConnection; proof?: Uint8Array | undefined }): void {
    const initiatorQpn = w.remoteQpn;
    const { conn } = r;
    w.accepting = conn;
    w.answered.add(conn);
    conn.once('established', () => {
      // Completed after another won (or the connect ended): nobody takes it.
      if (w.settled) return conn.close();
      this.#settle(w, undefined, conn);
    });
    conn.once('failed', (f: TcpFault) => {
      w.answered.delete(conn);
      if (w.settled) return;
      // A proven Request is the peer's: its failure is the connect's.
      if (w.secret) return this.#settle(w, faultError(f, `QP ${w.localQpn}: ${f.reason}`));
      // Without a secret it may be a stranger's that named the pair and left (or broke the
      // handshake) before its RTR: that costs the QP this connection, not its connect. It waits
      // on for the peer's — dialling the peer itself, as its own dial may have been given up for
      // this Request (a crossing it lost) — until its deadline, which tells this fault.
      if (w.accepting === conn) w.accepting = undefined;
      w.lastFault = f.reason;
      if (!w.outgoing) this.#initiate(w, w.to);
    });
    const me: Pairing = { initiatorQpn, responderQpn: w.localQpn, nonce: this.nonce };
    const proof = w.secret && r.proof ? replyProof(w.secret, me, r.proof) : undefined;
    conn.accept(encodeSabrePd({ kind: 'connect', ...me, ...(proof ? { proof } : {}) }));
  }

  /** A Request for `w`'s pairing that may be accepted: where w has a secret, it proves it. */
  #proven(w: Waiter, r: { initiatorQpn: number; nonce: number; proof?: Uint8Array | undefined }): boolean {
    return !w.secret || provesRequest(w.secret, { initiatorQpn: r.initiatorQpn, responderQpn: w.localQpn, nonce: r.nonce }, r.proof);
  }

  /** Digests of the secrets connects were given, with their QPNs, oldest first, at most SECRETS_KEPT. */
  readonly #secrets = new Set<string>();

  /**
   * True the first time `secret` is given to a connect of QP `qpn` here (of the last
   * SECRETS_KEPT): a proof names the responder's QPN, so a Request seen on the wire proves a
   * secret for that QP alone, and both ends of a pairing may be QPs of this endpoint.
   */
  #firstUse(secret: Uint8Array, qpn: number): boolean {
    const d = `${qpn}:${createHash('sha256').update(secret).digest('hex')}`;
    if (this.#secrets.has(d)) return false;
    this.#secrets.add(d);
    if (this.#secrets.size > SECRETS_KEPT) this.#secrets.delete(this.#secrets.values().next().value!);
    return true;
  }

  /** The oldest parked Request for w's pairing that `eligible` says may be it (ParkedRequests.take). */
  #takeParked(w: Waiter, eligible?: (p: Parked) => boolean): Parked | undefined {
    return this.#parked.take(w.localQpn, w.remoteQpn, (p) => this.#proven(w, p), UNPROVEN, eligible);
  }

  /** Stop waiting for QP `localQpn`'s connection (its QP left the attempt, or a new connect replaces it). */
  cancel(localQpn: number): void {
    const w = this.#waiters.get(localQpn);
    if (w) this.#settle(w, new SabreError(ErrorCode.Closed, `QP ${localQpn}: the connect was given up`));
  }

  #incoming(s0: net.Socket): void {
    if (this.#closed) {
      s0.destroy();
      return;
    }
    // Caps before anything is allocated for the connection: per source host (an IPv6 /64 as one
    // host, as every other per-source bound: its holder has 2^64 addresses), then device-wide.
    const host = hostKey(s0.remoteAddress);
    const onHost = this.#perHost.get(host) ?? 0;
    if (onHost >= (this.#opts.maxConnectionsPerHost ?? 128)) {
      this.counters.connectionsRefusedHost++;
      this.#refuseAtOnce(s0, 'too many connections from your host (maxConnectionsPerHost)');
      return;
    }
    if (this.#accepted >= (this.#opts.maxConnections ?? 1024) && !this.#roomFor(host)) {
      this.counters.connectionsRefused++;
      this.#refuseAtOnce(s0, 'too many connections to this device (maxConnections)');
      return;
    }
    this.#accepted++;
    this.#perHost.set(host, (this.#perHost.get(host) ?? 0) + 1);
    this.counters.connectionsAccepted++;
    const { socket, rx } = adoptAccepted(s0);
    const c = MpaConnection.respond(socket, this.#acceptOpts, rx);
    this.#track(c);
    this.#handshaking.set(c, host);
    let up = false;
    let evicted = false;
    this.#release.set(c, () => {
      evicted = true;
      this.#untrack(c, host);
    });
    c.once('established', () => {
      up = true;
      this.#handshaking.delete(c);
    });
    c.once('close', () => {
      // Closed before 'established': a bad or refused request, a timeout, a peer that left
      // (one refused for device memory is counted as that instead; an evicted one as evicted).
      if (!up && !evicted && c.fault?.code !== 'NO_MEMORY') this.counters.handshakesRefused++;
      this.#untrack(c, host);
    });
    c.on('failed', (f: TcpFault) => {
      // Only the handshake times out (the peer-to-peer RTR's wait is the handshake's too).
      if (f.code === 'TIMEOUT') this.counters.handshakeTimeouts++;
    });
    c.once('request', (info: MpaRequestInfo) => this.#route(c, info));
  }

  /**
   * Refuse an accepted socket past a cap, before anything is allocated for it: an MPA Reply with
   * Reject and the reason in sabre's block, written without reading the Request (the initiator
   * reads the reply after sending its request either way), so the dialer fails with that reason
   * instead of a bare reset; past REFUSED_LINGER_MAX lingering, destroyed at once (`lingering.cut`, stats' `refusalsCut`).
   */
  #refuseAtOnce(s: net.Socket, reason: string): void {
    const f: MpaFrame = { reply: true, markers: false, crc: false, reject: true, enhanced: false, revision: 1, privateData: encodeSabrePd({ kind: 'reject', reason }) };
    const bytes = new Uint8Array(mpaFrameLength(f));
    encodeMpaFrame(f, bytes, 0);
    this.lingering.refuse(s, bytes);
  }

  /** An accepted connection's slots of both caps go back (once). */
  #untrack(c: MpaConnection, host: string): void {
    this.#handshaking.delete(c);
    if (!this.#release.delete(c)) return;
    this.#accepted--;
    const n = (this.#perHost.get(host) ?? 1) - 1;
    if (n > 0) this.#perHost.set(host, n);
    else this.#perHost.delete(host);
  }

  /**
   * Room at maxConnections for one more from `host`: the oldest handshaking connection of the
   * source holding the most of them goes (counted) when that source holds more than `host` does,
   * so a few sources opening sockets that never finish their handshake churn their own share and
   * cannot keep other hosts out until their deadline. Established connections are never closed
   * for it; a source never closes its own (it is refused, as before).
   */
  #roomFor(host: string): boolean {
    const { most, count } = busiestSource(this.#handshaking);
    if (most === undefined || most === host || count.get(most)! <= (count.get(host) ?? 0)) return false;
    const old = oldestOf(this.#handshaking, most)!;
    this.counters.handshakesEvicted++;
    this.#release.get(old)!();
    // A stranger's socket: no Reply is owed, and its slots are already given back.
    old.socket.destroy();
    return true;
  }

  #route(c: MpaConnection, info: MpaRequestInfo): void {
    const pd = decodeSabrePd(info.privateData);
    if (pd?.kind === 'connect' && pd.responderQpn !== 0) {
      const w = this.#waiters.get(pd.responderQpn);
      if (w && !w.settled && w.remoteQpn === pd.initiatorQpn) {
        // Not from the peer the secret names: refused, and the QP waits on for that peer's.
        if (!this.#proven(w, pd)) return c.reject(UNPROVEN);
        // With a secret, one Request at a time: a copy of the one being answered (whoever saw it
        // can resend it, and race its RTR) is not answered too. Without one, every Request for
        // the pairing is answered as before, the first established wins: a stranger's that
        // never completes must not hold the QP.
        if (w.secret && w.accepting) return c.reject('the QP is answering another connection request');
        if (w.outgoing) {
          // Crossing connects: the lower nonce's connection survives.
          if (this.nonce < pd.nonce) {
            c.reject('crossing connect: the peer with the lower nonce initiates', false, this.nonce);
            return;
          }
          const mine = w.outgoing;
          w.outgoing = undefined;
          mine.close();
        }
        this.#acceptFor(w, { conn: c, proof: pd.proof });
        return;
      }
      if (!this.#onRequest) {
        this.#park(c, pd.responderQpn, pd.initiatorQpn, pd.nonce, pd.proof);
        return;
      }
    }
    if (!this.#onRequest) {
      c.reject('no QP is listening for this connection');
      return;
    }
    const self = this;
    const sabre = pd?.kind === 'connect' ? pd : undefined;
    const req: IncomingRequest = {
      info,
      initiatorQpn: sabre?.initiatorQpn,
      responderQpn: sabre?.responderQpn,
      remoteAddress: c.socket.remoteAddress,
      remotePort: c.socket.remotePort,
      nonce: sabre?.nonce,
      service: sabre?.service,
      userData: sabre?.userData,
      accept(localQpn: number, userData?: Uint8Array): Promise<MpaConnection> {
        return new Promise((resolve, reject) => {
          c.once('established', () => resolve(c));
          c.once('failed', (f: TcpFault) => reject(new SabreError(ErrorCode.Unreachable, f.reason)));
          // A foreign (non-sabre) initiator gets no sabre block back: it would not know what to do with it.
          c.accept(sabre
            ? encodeSabrePd({ kind: 'connect', initiatorQpn: req.initiatorQpn ?? 0, responderQpn: localQpn, nonce: self.nonce, ...(userData ? { service: sabre.service ?? 0, userData } : {}) })
            : userData);
        });
      },
      reject(reason: string, busy?: boolean): void {
        c.reject(reason, busy);
      },
      park(): boolean {
        if (!sabre || sabre.responderQpn === 0) return false;
        return self.#park(c, sabre.responderQpn, sabre.initiatorQpn, sabre.nonce, sabre.proof);
      },
    };
    this.#onRequest(req);
  }

  #park(c: MpaConnection, responderQpn: number, initiatorQpn: number, nonce: number, proof: Uint8Array | undefined): boolean {
    return this.#parked.park(responderQpn, { conn: c, initiatorQpn, nonce, proof });
  }
}

/** The addresses `host` names: itself if it is an IP literal, else what it resolves to (none if it does not). */
async function addressesOf(host: string): Promise<Set<string>> {
  if (net.isIP(host) !== 0) return new Set([host]);
  const all = await dns.lookup(host, { all: true }).catch(() => []);
  return new Set(all.map((a) => a.address));
}

/** Why a Request for a QP whose connect has a secret is refused (no proof, another secret's, or a replay). */
const UNPROVEN = 'the connect request does not prove the QP\'s secret';
/** Secrets an endpoint remembers having been given (each pairs once). */
const SECRETS_KEPT = 4096;

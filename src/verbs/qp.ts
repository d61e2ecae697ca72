// QueuePair: the verbs face of the engine's QP. Everything a caller can get wrong is checked
// here, synchronously, and thrown as SabreError with a stable code; what happens on the wire
// becomes a completion status instead.
//
// States: an rc QP is created in INIT (so receives can be posted before connecting, as with
// rdma_cm); connect() takes it through RTR to RTS. An srd QP is created ready (RTS): it needs
// no connection. modify({ state: QpState.Error }) moves any QP to ERROR, which completes all
// outstanding and later work with WrFlushErr; modify({ state: QpState.Reset }) from ERROR
// empties it again, and INIT → connect reuses it.
//
// Work requests are checked against the opcode table (src/rdmap/opcodes.ts: what each opcode
// needs — remote segment, segment list, 8-byte word, immediate — and whether it is a sabre
// extension a standard iWARP peer cannot take) and copied at post time: the caller's SendWr
// and sgList are free the moment postSend returns.
import { EventEmitter } from 'node:events';
import { timerMs } from '../core/deadline.js';
import { CONNECT_SECRET_MAX, CONNECT_SECRET_MIN, type QpDownCause } from '../core/link.js';
import { ErrorCode, SabreError } from '../core/errors.js';
import { Access, Opcode, QpState, type QpStateValue, qpStateName, WcOpcode } from '../core/enums.js';
import type { Sge, WorkCompletion } from '../core/work.js';
import type { PortDest, PortMr, PortPiece, PortQp } from '../nic/port.js';
import { PlaceStatus } from '../rdmap/memory.js';
import { readRequestVBytes } from '../wire/rdmap.js';
import { type OpcodeRow, rowForWr } from '../rdmap/opcodes.js';
import { type QpCaps, sharedCaps } from '../rdmap/state.js';
import { abortError, checkSignal, onAbort } from './abort.js';
import { AddressHandle } from './ah.js';
import { checkPeerAddress, needsLookup, resolvePeerHost } from './peer-address.js';
import { nextPromiseWrId } from './wc.js';
import type { CompletionQueue } from './cq.js';
import type { ProtectionDomain } from './pd.js';
import type { DeviceEvent } from './events.js';
import type { ConnectInit, QpInit, RecvWr, SendWr } from './types.js';

const isU32 = (n: unknown): n is number => typeof n === 'number' && Number.isInteger(n) && n >= 0 && n <= 0xffff_ffff;
const isAddr = (n: unknown): n is number => typeof n === 'number' && Number.isSafeInteger(n) && n >= 0;
const bad = (msg: string): SabreError => new SabreError(ErrorCode.InvalidArgument, msg);
/** An atomic operand: a bigint that one 64-bit word holds, unsigned or two's complement (cut to 64 bits it would mean another value). */
const isWord = (v: unknown): v is bigint => typeof v === 'bigint' && v >= -(1n << 63n) && v < 1n << 64n;

/** A connect's secret, copied (the caller may reuse its array). */
function checkSecret(s: unknown): Uint8Array {
  if (!(s instanceof Uint8Array) || s.length < CONNECT_SECRET_MIN || s.length > CONNECT_SECRET_MAX) throw bad(`connect: secret must be a Uint8Array of ${CONNECT_SECRET_MIN}..${CONNECT_SECRET_MAX} bytes`);
  return s.slice();
}

const MAX_MSG = 0xffff_ffff;
/**
 * The pieces of an empty scatter/gather list, shared: a receive posted with `sgList: []` (the
 * RdmaWriteWithImm pattern) then costs no list of its own. Frozen: nothing may add to it.
 */
const NO_PIECES = Object.freeze([]) as unknown as PortPiece[];
/**
 * Bytes a checked scatter/gather list covers (zero-length entries have no piece and add
 * nothing); a message is at most 2^32-1 bytes. Summed once, here, for every post.
 */
const piecesTotal = (pieces: PortPiece[]): number => {
  let t = 0;
  // An index loop: for-of here was not optimised away (an iterator result per piece).
  for (let i = 0; i < pieces.length; i++) t += pieces[i]!.len;
  if (t > MAX_MSG) throw new SabreError(ErrorCode.LimitExceeded, 'a message is at most 2^32-1 bytes');
  return t;
};

function capInt(v: unknown, name: string, def: number | undefined, min: number, max: number): number {
  if (v === undefined) {
    if (def === undefined) throw bad(`createQp: ${name} is required`);
    return def;
  }
  if (typeof v !== 'number' || !Number.isInteger(v) || v < min) throw bad(`createQp: ${name} must be an integer >= ${min}`);
  if (v > max) throw new SabreError(ErrorCode.LimitExceeded, `createQp: ${name} ${v} exceeds the device limit ${max}`);
  return v;
}

/**
 * A queue pair. Also an EventEmitter of the device's async events that name it
 * (`qp.on('event', …)`: established, disconnected, qp-fatal), as ibverbs' per-QP async events.
 */
export class QueuePair extends EventEmitter<{ event: [DeviceEvent] }> {
  readonly pd: ProtectionDomain;
  readonly qpn: number;
  readonly type: 'rc' | 'srd';
  readonly sendCq: CompletionQueue;
  readonly recvCq: CompletionQueue;
  readonly caps: Readonly<QpCaps>;
  /** @internal the NIC's side of this QP */
  readonly port: PortQp;
  #connecting?: Promise<void>;
  #destroyed = false;
  /** @internal a CQ made for this QP alone (cm's default): dropped when the QP is destroyed. */
  ownCq?: CompletionQueue;

  /**
   * @internal use ProtectionDomain.createQp. `reserved`: the device's connection-manager QP
   * (ProtectionDomain.createCmQp): a reserved QPN, receive completions with the source address.
   */
  constructor(pd: ProtectionDomain, init: QpInit, reserved?: { qpn: number }) {
    super();
    // No listener table until the first listener (on() makes it then; emit() and the rest take
    // none as no listeners): EventEmitter makes one per emitter, a dictionary of about 180
    // bytes, and the QP of an idle channel never has a listener.
    (this as unknown as { _events: unknown })._events = undefined;
    if (!init || typeof init !== 'object') throw bad('createQp needs an options object');
    if (init.type !== 'rc' && init.type !== 'srd') throw bad(`createQp: type must be 'rc' or 'srd'`);
    const dev = pd.device;
    if (init.type === 'srd' && dev.address.transport === 'tcp') {
      throw new SabreError(ErrorCode.NotSupported, "srd QPs need a datagram transport: iWARP over TCP is connection-oriented (open the device with transport 'udp' or 'inproc')");
    }
    if (!dev.ownsCq(init.sendCq) || !dev.ownsCq(init.recvCq)) throw bad('createQp: sendCq and recvCq must be CQs of the same device');
    const caps: QpCaps = {
      maxSendWr: capInt(init.maxSendWr, 'maxSendWr', undefined, 1, 1 << 16),
      maxRecvWr: capInt(init.maxRecvWr, 'maxRecvWr', undefined, 1, 1 << 16),
      maxSge: capInt(init.maxSge, 'maxSge', undefined, 1, 1024),
      maxInline: capInt(init.maxInline, 'maxInline', 0, 0, 4096),
      rnrRetry: capInt(init.rnrRetry, 'rnrRetry', 7, 0, 1000),
      rnrTimeoutMs: capInt(init.rnrTimeoutMs, 'rnrTimeoutMs', 1, 0, 60_000),
      maxRdAtomic: capInt(init.maxRdAtomic, 'maxRdAtomic', 16, 1, 1024),
      timeoutMs: capInt(init.timeoutMs, 'timeoutMs', 8000, 1, 3_600_000),
    };
    this.pd = pd;
    this.type = init.type;
    this.sendCq = init.sendCq;
    this.recvCq = init.recvCq;
    this.caps = Object.freeze(sharedCaps(caps));
    if (reserved && dev.nic.hasQpn(reserved.qpn)) throw new SabreError(ErrorCode.InvalidState, `QPN ${reserved.qpn} is taken on this device`);
    this.qpn = reserved ? reserved.qpn : dev.nextQpn();
    this.port = dev.nic.createQp(this.qpn, this.type, pd.handle, caps, this.sendCq, this.recvCq, reserved !== undefined);
    dev.attachQp(this);
  }

  get state(): QpStateValue {
    return this.port.state;
  }

  /**
   * @internal why the QP went to ERROR by itself — the cause its 'qp-fatal' / 'disconnected'
   * event carries — readable by the time its flushed completions can be polled, whether or not
   * the event came yet (features above verbs, the channels, give a flush the code of its cause).
   * Undefined while up, after a reset, or when the application's own act (modify, destroy) took it down.
   */
  get downCause(): QpDownCause | undefined {
    return this.port.downCause;
  }

  /**
   * The largest DDP segment (payload bytes) the device cuts this QP's untagged messages into,
   * as ibv_query_qp reports a path MTU: a Send longer than this goes out in several segments.
   * Read-only; fixed for the life of the device.
   */
  get mss(): number {
    return this.pd.device.nic.mss;
  }

  /**
   * rc: bind to the peer QP (both sides call this with the other's address and qpn, exchanged
   * out of band); resolves once both ends are ready, so postSend may follow at once.
   * `how.passive` (@internal, src/cm; links without connections): this QP sends nothing until the
   * peer QP greets it from `peer.address` — the cm's listener, for an address a requester named
   * but has not shown it owns.
   */
  connect(peer: ConnectInit, how?: { passive?: boolean }): Promise<void> {
    try {
      this.#live();
      if (this.type !== 'rc') throw new SabreError(ErrorCode.NotSupported, 'connect is for rc QPs; srd work requests name an address handle');
      if (!peer || typeof peer !== 'object' || !isU32(peer.qpn)) throw bad('connect needs { address, qpn }');
      const dev = this.pd.device;
      checkPeerAddress(dev, peer.address, 'connect');
      checkSignal(peer.signal, 'connect');
      const secret = peer.secret === undefined ? undefined : checkSecret(peer.secret);
      if (this.#connecting) throw new SabreError(ErrorCode.InvalidState, 'connect already called on this QP');
      const q = this.port;
      if (q.state === QpState.Reset) q.init();
      if (q.state !== QpState.Init) throw new SabreError(ErrorCode.InvalidState, `connect needs an INIT QP, this one is ${qpStateName(q.state)}`);
      const timeoutMs = timerMs(peer.timeoutMs ?? 10_000);
      const address = { ...peer.address };
      const signal = peer.signal;
      if (signal?.aborted) throw abortError(signal, 'connect');
      // A host name is resolved first, so one that does not resolve fails now on every transport.
      const start = needsLookup(address)
        ? resolvePeerHost(address, 'connect').then(() => {
            this.#live();
            if (signal?.aborted) throw abortError(signal, 'connect');
          })
        : undefined;
      const connecting = new Promise<void>((resolve, reject) => {
        let dispose = (): void => {};
        const timer = setTimeout(() => {
          dispose();
          dev.unwatchConnect(this.qpn);
          // As an abort: the half-made connection goes with the wait. Left in RTR, a peer coming
          // late took the QP to RTS after the caller was told it failed (and could write into it).
          if (!this.#destroyed && !dev.closed && q.state !== QpState.Error) q.toError();
          reject(new SabreError(ErrorCode.Timeout, `peer QP ${peer.qpn} did not connect within ${timeoutMs} ms (the QP is in ERROR: modify it to RESET to connect again)`));
        }, timeoutMs);
        const go = (): void => {
          dev.watchConnect(this.qpn, {
            connected: () => {
              clearTimeout(timer);
              dispose();
              resolve();
            },
            failed: (err) => {
              clearTimeout(timer);
              dispose();
              reject(err ?? new SabreError(ErrorCode.InvalidState, 'QP entered ERROR while connecting'));
            },
          });
          dev.connectQp(this, address, peer.qpn, secret, how?.passive === true);
        };
        // Abort: the wait ends, and the half-made connection with it (the QP goes to ERROR,
        // which closes a tcp connection; modify RESET then connect again to retry).
        dispose = onAbort(signal, () => {
          clearTimeout(timer);
          dev.unwatchConnect(this.qpn);
          if (!this.#destroyed && !dev.closed && q.state !== QpState.Error) q.toError();
          reject(abortError(signal!, 'connect'));
        });
        if (start) {
          start.then(go, (e: unknown) => {
            clearTimeout(timer);
            dispose();
            reject(e);
          });
        } else go();
      });
      this.#connecting = connecting;
      return connecting;
    } catch (e) {
      return Promise.reject(e);
    }
  }

  /**
   * By hand: any state → ERROR (flushes), ERROR → RESET (empties the QP; connect() then takes
   * it through INIT, RTR, RTS again, to the same or another peer), RESET → INIT.
   * INIT → RTR → RTS is what connect() does.
   */
  modify(attr: { state: QpStateValue }): void {
    this.#live();
    const s = attr?.state;
    const dev = this.pd.device;
    const q = this.port;
    const cur = q.state;
    if (s === QpState.Error) {
      q.toError();
    } else if (s === QpState.Reset) {
      if (cur !== QpState.Error && cur !== QpState.Reset && cur !== QpState.Init) {
        throw new SabreError(ErrorCode.InvalidState, `RESET is reachable from ERROR or INIT, not ${qpStateName(cur)}`);
      }
      q.reset();
      dev.unwatchConnect(this.qpn);
      this.#connecting = undefined;
    } else if (s === QpState.Init) {
      if (cur !== QpState.Reset) throw new SabreError(ErrorCode.InvalidState, `INIT is reachable from RESET, not ${qpStateName(cur)}`);
      q.init();
    } else {
      throw new SabreError(ErrorCode.InvalidArgument, `modify to ${qpStateName(s as number)} is done by connect()`);
    }
  }

  /** Post one receive, or several in order; an array is taken all or nothing, as postSend's. */
  postRecv(wr: RecvWr | RecvWr[]): void {
    this.#live();
    const q = this.port;
    if (q.state === QpState.Reset) throw new SabreError(ErrorCode.InvalidState, 'postRecv on a RESET QP');
    if (!Array.isArray(wr)) {
      // One request, the usual call: no list to wrap it and none for the checked copy.
      const pieces = this.#checkRecv(wr);
      this.#recvRoom(1);
      q.postRecv(wr.wrId, pieces, piecesTotal(pieces));
      return;
    }
    // All checked before any is posted: a bad request in the list posts none.
    const checked: PortPiece[][] = [];
    for (const r of wr) checked.push(this.#checkRecv(r));
    const totals = checked.map(piecesTotal);
    this.#recvRoom(checked.length);
    this.pd.device.nic.batch(() => {
      for (let i = 0; i < checked.length; i++) q.postRecv(wr[i]!.wrId, checked[i]!, totals[i]!);
    });
  }

  #checkRecv(r: RecvWr): PortPiece[] {
    if (!r || typeof r !== 'object') throw bad('postRecv needs a work request object');
    checkWrId(r.wrId);
    return this.#sges(r.sgList, Access.LocalWrite);
  }

  #recvRoom(n: number): void {
    this.#room(this.port.rqLength + n, this.caps.maxRecvWr, 'receive', 'maxRecvWr');
  }

  /** QueueFull past a queue's depth; a QP in ERROR takes any post (it completes flushed). */
  #room(wanted: number, max: number, queue: 'send' | 'receive', cap: 'maxSendWr' | 'maxRecvWr'): void {
    if (this.port.state !== QpState.Error && wanted > max) throw new SabreError(ErrorCode.QueueFull, `${queue} queue full (${cap} ${max})`);
  }

  /**
   * Post one work request, or several in order. An array is taken all or nothing: every request
   * is checked (and the queue's room) before any is posted, and the first refused one throws its
   * SabreError with none of the array posted — where ibv_post_send would have posted those
   * before its bad_wr.
   */
  postSend(wr: SendWr | SendWr[]): void {
    this.#live();
    const q = this.port;
    if (q.state !== QpState.Rts && q.state !== QpState.Error) {
      throw new SabreError(ErrorCode.InvalidState, `postSend needs a connected QP (RTS), this one is ${qpStateName(q.state)}`);
    }
    if (!Array.isArray(wr)) {
      // One request, the usual call: no list to wrap it. A port that writes a WQE and keeps
      // nothing gets the one scratch record (its pieces reused too): no object per post.
      const reuse = !this.pd.device.nic.keepsPieces && !scratchBusy;
      if (reuse) scratchBusy = true;
      try {
        const c = this.#checkSend(wr, reuse ? scratch : undefined);
        this.#sendRoom(1);
        q.postSend(wr, c.row, c.pieces, c.total, c.dest, c.inline);
      } finally {
        if (reuse) releaseScratch();
      }
      return;
    }
    const checked: CheckedSend[] = [];

    for (const w of wr) checked.push(this.#checkSend(w, undefined));
    this.#sendRoom(checked.length);
    this.pd.device.nic.batch(() => {
      for (let i = 0; i < checked.length; i++) {
        const c = checked[i]!;
        q.postSend(wr[i]!, c.row, c.pieces, c.total, c.dest, c.inline);
      }
    });
  }

  #sendRoom(n: number): void {
    this.#room(this.port.sqLength + n, this.caps.maxSendWr, 'send', 'maxSendWr');
  }

  // ---- promise helpers: one promise per work request, on top of postSend / postRecv ----------
  // Each posts a signaled request with a wrId of its own (above 2^64: never an application's)
  // and resolves with its WorkCompletion; an error status rejects with WorkRequestError
  // (ERR_WR_FAILED, .status, .wc), a device close with ERR_CLOSED. The completion does not
  // appear in cq.poll. Misuse throws synchronously, as postSend does.

  /** Any send-queue opcode (wr without wrId; always signaled). */
  post(wr: Omit<SendWr, 'wrId' | 'signaled'>): Promise<WorkCompletion> {
    if (!wr || typeof wr !== 'object') throw bad('post needs a work request object');
    const id = nextPromiseWrId();
    const done = this.sendCq.expect(id);
    try {
      this.postSend({ ...wr, wrId: id, signaled: true });
    } catch (e) {
      this.sendCq.unexpect(id);
      throw e;
    }
    return done;
  }

  /** RDMA WRITE (RdmaWriteWithImm when `imm` is given). */
  write(wr: Omit<SendWr, 'wrId' | 'signaled' | 'opcode'>): Promise<WorkCompletion> {
    return this.post({ ...wr, opcode: wr?.imm !== undefined ? Opcode.RdmaWriteWithImm : Opcode.RdmaWrite });
  }

  /** RDMA READ into `sgList`. */
  read(wr: Omit<SendWr, 'wrId' | 'signaled' | 'opcode'>): Promise<WorkCompletion> {
    return this.post({ ...wr, opcode: Opcode.RdmaRead });
  }

  /** SEND (SendWithImm when `imm` is given). */
  send(wr: Omit<SendWr, 'wrId' | 'signaled' | 'opcode'>): Promise<WorkCompletion> {
    return this.post({ ...wr, opcode: wr?.imm !== undefined ? Opcode.SendWithImm : Opcode.Send });
  }

  /** Post a receive; resolves with its completion (a Send, or an RdmaWriteWithImm's immediate). */
  recv(wr: Omit<RecvWr, 'wrId'> = {}): Promise<WorkCompletion> {
    const id = nextPromiseWrId();
    const done = this.recvCq.expect(id);
    try {
      this.postRecv({ ...wr, wrId: id });
    } catch (e) {
      this.recvCq.unexpect(id);
      throw e;
    }
    return done;
  }

  /** Leave the device's QP table; outstanding work is flushed first. */
  destroy(): void {
    if (this.#destroyed) return;
    const dev = this.pd.device;
    dev.failConnect(this.qpn, new SabreError(ErrorCode.Closed, `QP ${this.qpn} destroyed while connecting`));
    this.#destroyed = true;
    this.port.destroy(!dev.closed);
    dev.detachQp(this);
    dev.unwatchConnect(this.qpn);
    this.pd.qps.delete(this);
    if (this.ownCq && !dev.closed) dev.dropCq(this.ownCq);
  }

  #live(): void {
    this.pd.device.assertOpen();
    if (this.#destroyed) throw new SabreError(ErrorCode.Closed, `QP ${this.qpn} is destroyed`);
  }

  /** The checked pieces of a scatter/gather list (piecesTotal gives their bytes: no result object per call). */
  #sges(sgList: Sge[] | undefined, access: number, into?: PortPiece[]): PortPiece[] {
    if (sgList === undefined || (Array.isArray(sgList) && sgList.length === 0)) return NO_PIECES;
    if (!Array.isArray(sgList)) throw bad('sgList must be an array of { addr, length, lkey }');
    if (sgList.length > this.caps.maxSge) throw new SabreError(ErrorCode.LimitExceeded, `sgList has ${sgList.length} entries, maxSge is ${this.caps.maxSge}`);
    const mem = this.pd.device.nic;
    const pieces: PortPiece[] = into ?? [];
    let n = 0;
    for (const s of sgList) {
      if (!s || !isAddr(s.addr) || !isU32(s.length) || !isU32(s.lkey)) throw bad('each sge needs integer addr, length and lkey');
      const st = mem.check(s.lkey, this.pd.handle, s.addr, s.length, access);
      if (st !== PlaceStatus.Placed) {
        const why = st === PlaceStatus.InvalidStag ? 'is not a registered lkey' : st === PlaceStatus.PdMismatch ? 'belongs to another PD'
          : st === PlaceStatus.Access ? 'lacks LocalWrite access' : 'does not cover the segment';
        throw new SabreError(ErrorCode.LocalProtection, `lkey 0x${s.lkey.toString(16)} ${why} [${s.addr}, +${s.length})`);
      }
      if (s.length === 0) continue;
      const p = pieces[n];
      if (p === undefined) pieces.push({ rec: mem.lookup(s.lkey)!, addr: s.addr, len: s.length });
      else {
        p.rec = mem.lookup(s.lkey)!;
        p.addr = s.addr;
        p.len = s.length;
      }
      n++;
    }
    // A reused list may hold more than this post's pieces; a fresh one holds exactly n (setting
    // an array's length is a runtime call even when it does not change).
    if (pieces.length !== n) pieces.length = n;
    return pieces;
  }

  /** Check a send work request against its opcode's row and copy what the engine needs from it. */
  /** `into`: the scratch record to fill (pieces reused), for a port that keeps nothing. */
  #checkSend(w: SendWr, into: CheckedSend | undefined): CheckedSend {
    if (!w || typeof w !== 'object') throw bad('postSend needs a work request object');
    checkWrId(w.wrId);
    const row = rowForWr(w.opcode);
    if (!row) throw bad(`unknown opcode ${String(w.opcode)}`);
    if (row.imm === w.opcode && !isU32(w.imm)) throw bad('…WithImm needs imm, a uint32');
    if (row.toStandardPeer === 'refuse' && this.port.standardPeer) {
      // iWARP has no Send with immediate (RFC 7306 has Immediate Data only after a Write): a
      // standard peer would Terminate on sabre's opcode 12. As ibverbs providers for iWARP
      // (siw) refuse IBV_WR_SEND_WITH_IMM at post time, so does this.
      throw new SabreError(ErrorCode.NotSupported, `${row.name} needs a sabre peer: this QP is connected to a standard iWARP peer (use RdmaWriteWithImm)`);
    }
    const signaled = w.signaled ?? true;
    if (typeof signaled !== 'boolean') throw bad('signaled must be a boolean');
    // Sinks (reads, the old value of an atomic) are written locally: they need LocalWrite.
    const pieces = this.#sges(w.sgList, row.source ? 0 : Access.LocalWrite, into === undefined ? undefined : scratchPieces);
    const total = piecesTotal(pieces);
    let dest: PortDest | undefined;
    if (this.type === 'srd') {
      if (!(w.ah instanceof AddressHandle) || w.ah.pd.device !== this.pd.device) throw bad('srd work requests need ah (an AddressHandle of this device)');
      if (!isU32(w.remoteQpn)) throw bad('srd work requests need remoteQpn');
      const r = w.ah.route(w.remoteQpn);
      dest = { address: r.address, key: r.key, remoteQpn: w.remoteQpn };
    }
    if (row.remote === 'one') checkRemote(w);
    else if (row.remote === 'list') {
      if (w.remoteSgList !== undefined) {
        if (!Array.isArray(w.remoteSgList) || w.remoteSgList.length === 0) throw bad('remoteSgList must be a non-empty array');
        if (w.remoteSgList.length > this.caps.maxSge) throw new SabreError(ErrorCode.LimitExceeded, `remoteSgList has ${w.remoteSgList.length} entries, maxSge is ${this.caps.maxSge}`);
        let sum = 0;
        for (const r of w.remoteSgList) {
          if (!r || !isAddr(r.addr) || !isU32(r.length) || !isU32(r.rkey)) throw bad('each remoteSgList entry needs integer addr, length and rkey');
          sum += r.length;
        }
        if (sum !== total) throw bad(`remoteSgList covers ${sum} bytes but sgList ${total}`);
      } else checkRemote(w);
      // A sabre peer gets one ReadRequestV naming every source and sink, in one segment (a
      // standard peer gets one RFC Read Request per piece): past that it is refused here.
      const srcs = w.remoteSgList?.length ?? 1;
      const bytes = readRequestVBytes(srcs, pieces.length);
      const max = this.pd.device.nic.maxControl;
      if (!this.port.standardPeer && bytes > max) {
        throw new SabreError(ErrorCode.LimitExceeded, `this read names ${srcs} sources and ${pieces.length} sinks, ${bytes} bytes of Read Request; one segment carries at most ${max} here: use fewer entries or several reads`);
      }
    } else if (row.remote === 'word') {
      checkRemote(w);
      if (pieces.length !== 1 || total !== 8) throw bad('atomics need one 8-byte sge for the old value');
      if (!isWord(w.compareAdd)) throw bad('atomics need compareAdd: a bigint a 64-bit word holds (-(2^63)..2^64-1)');
      if (row.wr[w.opcode] === WcOpcode.CmpSwap && !isWord(w.swap)) throw bad('AtomicCmpSwap needs swap: a bigint a 64-bit word holds (-(2^63)..2^64-1)');
    }
    // The port copies what it needs (the engine's work record, or a WQE) before postSend
    // returns: from then on nothing reads the caller's object.
    let inline: Uint8Array | undefined;
    if (row.source && total > 0 && total <= this.caps.maxInline) {
      // Inline: the bytes are taken now, so the caller may reuse the buffer when postSend returns.
      inline = new Uint8Array(total);
      let o = 0;
      const dev = this.pd.device;
      for (const p of pieces) {
        inline.set(p.rec.ext ? p.rec.ext.subarray(p.addr - p.rec.addr, p.addr - p.rec.addr + p.len) : dev.memoryView(p.addr, p.len), o);
        o += p.len;
      }
    }
    if (into === undefined) return { row, pieces, total, dest, inline };
    into.row = row;
    into.pieces = pieces;
    into.total = total;
    into.dest = dest;
    into.inline = inline;
    return into;
  }
}

/** A send work request checked against its opcode's row, with what the port needs of it. */
interface CheckedSend {
  row: OpcodeRow;
  pieces: PortPiece[];
  total: number;
  dest: PortDest | undefined;
  inline: Uint8Array | undefined;
}

/**
 * The one checked record a single postSend fills when its port keeps nothing (a NIC thread's:
 * the WQE is written before postSend returns). Busy while in use: a post made re-entrantly
 * (from an event handler the post ran) checks into a fresh record instead.
 */
const scratch: CheckedSend = { row: undefined as unknown as OpcodeRow, pieces: [], total: 0, dest: undefined, inline: undefined };
let scratchBusy = false;
/** What a scratch piece names between posts: no region. */
const NO_REC: PortMr = Object.freeze({ stag: 0, addr: 0, length: 0, pd: 0, access: 0 });

/** The post is done: nothing of it stays reachable from module state (a region's external buffer, an address handle, inline bytes). */
function releaseScratch(): void {
  scratchBusy = false;
  for (let i = 0; i < scratchPieces.length; i++) scratchPieces[i]!.rec = NO_REC;
  scratch.dest = undefined;
  scratch.inline = undefined;
}
/** Its pieces (a list of its own: an empty sgList leaves the shared frozen NO_PIECES in the record). */
const scratchPieces: PortPiece[] = [];

function checkRemote(w: SendWr): void {
  if (!isAddr(w.remoteAddr) || !isU32(w.rkey)) throw bad('this opcode needs remoteAddr and rkey');
}

function checkWrId(id: unknown): void {
  if (typeof id !== 'bigint' && (typeof id !== 'number' || Number.isNaN(id))) throw bad('wrId must be a number or a bigint');
}

// The client side of one RDMA connection of the file service, sans-I/O (the shape:
// src/core/sans-io.ts). The shell (./client-session.ts) feeds it received messages, status blocks (found by polling its status area or
// announced by a Write with Immediate), and local failures; it answers with actions: Sends,
// receive reposts, request completions. A new connection is a new ClientConnection: credits
// are never carried over from an old one.
//
// Completion modes, per request: Interrupt (the server writes the status block with Write with
// Immediate: a receive completion here, one of our credits spent) or polling (a plain RDMA
// Write: nothing happens here until the shell looks at the slot; it can ask for an
// InterruptResponse by Send with interruptRequest(id) when it tires of looking).
import type { FileErrorCodeValue } from '../core/errors.js';
import { evictionNamed, FILE_AUTH_REQ, FILE_HDR, FILE_STATUS_BODY, FileFlag, FileOp, FileStatus } from '../wire/files-spec.js';
import { connectionProof, connectionServerProof, sameBytes } from './auth.js';
import { Credits, RESERVE } from './credits.js';
import { type Body, type FileHeader, HDR_LEN, STATUS_BLOCK_LEN, bodyLength, decodeBody, decodeHeader, encodeMessage } from './messages.js';
import { LocalCode, statusCode, statusText } from './status.js';
import { writeFields } from './layout.js';
import { Outbox, type PollsActions } from '../core/sans-io.js';

/** What the server granted at authentication. */
export interface NegotiatedLimits {
  maxReceiveSize: number;
  maxReadWriteSize: number;
  maxWriteSize: number;
  maxVectors: number;
  maxOpenFiles: number;
  rwDepth: number;
  creditsMax: number;
}

/**
 * The range each announced limit must be in. The client cuts reads and writes at the two sizes
 * (0 would loop for ever) and registers sinks × maxReadWriteSize and writeBuffers × maxWriteSize
 * bytes from them (a server must not make it register gigabytes): 16 MiB is 16 times the
 * server's default. maxVectors bounds a readv/writev, whose entries must fit one request's
 * header area (./client-session.ts HDR_AREA, 4224 bytes; a ReadV entry is 24 bytes: 128 fit
 * with room). The others the client sizes nothing by; they must only be possible (≥ 1).
 */
export const LIMIT_RANGES: Record<keyof NegotiatedLimits, readonly [number, number]> = {
  maxReceiveSize: [1, 0xffff_ffff],
  maxReadWriteSize: [1, 16 << 20],
  maxWriteSize: [1, 16 << 20],
  maxVectors: [1, 128],
  maxOpenFiles: [1, 0xffff_ffff],
  rwDepth: [1, 0xffff_ffff],
  creditsMax: [1, 0xffff_ffff],
};

/** What is wrong with `l` ('maxWriteSize 0 (must be 1 to 16777216)'), or undefined. */
export function limitsProblem(l: NegotiatedLimits): string | undefined {
  for (const [k, [lo, hi]] of Object.entries(LIMIT_RANGES) as [keyof NegotiatedLimits, readonly [number, number]][]) {
    const v = l[k];
    if (!Number.isInteger(v) || v < lo || v > hi) return `${k} ${v} (must be ${lo} to ${hi})`;
  }
  return undefined;
}

export interface AuthInput {
  resumeKey: Uint8Array;
  keyId: Uint8Array;
  kAuth: Uint8Array;
  nonce: Uint8Array;
  statusAddr: number;
  statusRkey: number;
}

export type ClientAction =
  /** A Send: `bytes` first, then the request's data (Write/WriteV) as its own segment. `slot`: the request's status slot, to clear before posting. */
  | { kind: 'send'; bytes: Uint8Array; id?: number; slot?: number; data?: unknown }
  /** Give the receive buffer just handed to receive()/statusBlock(…, true) back to the QP. */
  | { kind: 'repost' }
  /** Read slot `slot` now: an InterruptResponse says its block is there. */
  | { kind: 'check'; slot: number; id: number }
  | { kind: 'complete'; id: number; status: number; value: number; aux: number }
  /** Request `id` failed here (its answer came but does not decode); the connection goes on. */
  | { kind: 'reject'; id: number; code: FileErrorCodeValue; message: string }
  | { kind: 'ready'; limits: NegotiatedLimits }
  /** The connection is unusable; every outstanding request was failed with the same error. */
  | { kind: 'failed'; code: FileErrorCodeValue; message: string; status?: number };

/** Offset of the seal in a status block: a polling client trusts a slot once it reads its requestId there. */
export const SEAL_OFFSET = FILE_HDR.size + FILE_STATUS_BODY.size;

/** The seal of a status block in `slot` bytes (big-endian u32). */
export function sealOf(b: Uint8Array): number {
  return ((b[SEAL_OFFSET]! << 24) | (b[SEAL_OFFSET + 1]! << 16) | (b[SEAL_OFFSET + 2]! << 8) | b[SEAL_OFFSET + 3]!) >>> 0;
}

interface Pending {
  id: number;
  body: Body;
  flags: number;
  data?: unknown;
  slot: number;
  sent: boolean;
}

export interface ClientCounters {
  sent: number;
  completions: number;
  interruptCompletions: number;
  polledCompletions: number;
  grantOnly: number;
  retired: number;
  retireAcks: number;
  malformed: number;
  /** AuthenticateResponses whose MAC did not prove the server holds the key (the connection refused). */
  serverUnproven: number;
}

export class ClientConnection implements PollsActions<ClientAction> {
  state: 'new' | 'authenticating' | 'authenticated' | 'ready' | 'closed' = 'new';
  readonly credits: Credits;
  readonly statusSlots: number;
  limits: NegotiatedLimits | undefined;
  readonly #actions = new Outbox<ClientAction>();
  readonly counters: ClientCounters = { sent: 0, completions: 0, interruptCompletions: 0, polledCompletions: 0, grantOnly: 0, retired: 0, retireAcks: 0, malformed: 0, serverUnproven: 0 };
  /** Credits the server asked us to retire (DeltaCredit −N) and we have not yet. */
  toRetire = 0;
  readonly #queue: Pending[] = [];
  readonly #control: { opcode: number; info: number }[] = [];
  readonly #bySlot = new Map<number, Pending>();
  readonly #byId = new Map<number, Pending>();
  readonly #freeSlots: number[] = [];
  #nextId = 1;
  #auth: AuthInput | undefined;

  /**
   * `credits`: credits the server may hold; the shell posts (and keeps posted) credits + RESERVE
   * receives for the server's messages;
   * `statusSlots`: slots in the status area, the most requests outstanding at once.
   */
  readonly #receiveSize: number;

  constructor(o: { credits: number; statusSlots: number; receiveSize: number }) {
    this.#receiveSize = o.receiveSize;
    // One message may go before any grant: the AuthenticateRequest (MS-SMBD's negotiate rule).
    this.credits = new Credits(o.credits, { send: 1, grantedOut: 0 });
    this.credits.posted = o.credits + RESERVE;
    this.statusSlots = o.statusSlots;
    for (let i = o.statusSlots - 1; i >= 0; i--) this.#freeSlots.push(i);
  }

  /** The next action, in order (src/core/sans-io.ts). */
  pollAction(): ClientAction | undefined {
    return this.#actions.poll();
  }

  /** Outstanding requests (sent or queued). */
  get outstanding(): number {
    return this.#byId.size;
  }

  /** Polling requests the shell should look for, by slot. */
  pollingSlots(): { slot: number; id: number }[] {
    const out: { slot: number; id: number }[] = [];
    for (const p of this.#bySlot.values()) if (p.sent && !(p.flags & FileFlag.Interrupt)) out.push({ slot: p.slot, id: p.id });
    return out;
  }

  /** Send the AuthenticateRequest (the one message allowed before a grant). */
  start(a: AuthInput): void {
    if (this.state !== 'new') return;
    this.#auth = a;
    this.state = 'authenticating';
    const params = new Uint8Array(FILE_AUTH_REQ.size - FILE_AUTH_REQ.fields.statusAddr.offset);
    const tmp = new Uint8Array(FILE_AUTH_REQ.size);
    const p = { statusAddr: a.statusAddr, statusRkey: a.statusRkey, statusSlots: this.statusSlots, maxReceiveSize: this.#receiveSize };
    writeFields(FILE_AUTH_REQ, tmp, 0, p);
    params.set(tmp.subarray(FILE_AUTH_REQ.fields.statusAddr.offset));
    const mac = connectionProof(a.kAuth, a.resumeKey, a.keyId, a.nonce, params);
    const g = this.credits.spend();
    this.#emit({ opcode: FileOp.AuthenticateRequest, flags: 0, creditsRequested: this.credits.target, creditsGranted: g, slot: 0, requestId: 0, info: 0 },
      { op: FileOp.AuthenticateRequest, resumeKey: a.resumeKey, keyId: a.keyId, nonce: a.nonce, mac, params, ...p });
  }

  /** Queue a request; returns its id (completions name it). */
  request(body: Body, o: { interrupt?: boolean; collapse?: boolean; data?: unknown } = {}): number {
    const id = this.#nextId;
    this.#nextId = this.#nextId >= 0xffff_fffe ? 1 : this.#nextId + 1;
    const flags = (o.interrupt ? FileFlag.Interrupt : 0) | (o.collapse ? FileFlag.Collapse : 0);
    if (this.state === 'closed') throw new Error('request on a closed connection');
    const p: Pending = { id, body, flags, slot: -1, sent: false, ...(o.data !== undefined ? { data: o.data } : {}) };
    this.#byId.set(id, p);
    this.#queue.push(p);
    this.#pump();
    return id;
  }

  /** Ask the server to drop request `id` (it completes with Cancelled, or with its result if too late). */
  cancel(id: number): void {
    const p = this.#byId.get(id);
    if (!p) return;
    if (!p.sent) {
      // Never left: nothing to tell the server.
      this.#queue.splice(this.#queue.indexOf(p), 1);
      this.#byId.delete(id);
      this.#actions.push({ kind: 'complete', id, status: FileStatus.Cancelled, value: 0, aux: 0 });
      return;
    }
    this.#control.push({ opcode: FileOp.Cancel, info: id });
    this.#pump();
  }

  /** A polling request is taking long: ask for an InterruptResponse by Send. */
  interruptRequest(id: number): void {
    const p = this.#byId.get(id);
    if (!p || !p.sent || p.flags & FileFlag.Interrupt) return;
    this.#control.push({ opcode: FileOp.InterruptRequest, info: id });
    this.#pump();
  }

  /** A Send from the server landed in one of our receives (`b`: its bytes, valid during this call). */
  handleReceive(b: Uint8Array, _now: number): void {
    if (this.state === 'closed') return;
    if (!this.#consumed()) return;
    const h = decodeHeader(b);
    if (!h.ok) return this.#malformed(h.error);
    const hdr = h.value;
    // The grant counts as soon as the header is readable: the server has counted it as given,
    // whatever the body turns out to be (dropping it would leak credits for good).
    this.credits.granted(hdr.creditsGranted);
    this.credits.peerTarget = hdr.creditsRequested;
    const d = decodeBody(hdr, b);
    if (!d.ok) return this.#malformed(d.error);
    const body = d.value;
    switch (body.op) {
      case FileOp.AuthenticateResponse: {
        if (this.state !== 'authenticating') return this.#malformed('AuthenticateResponse out of turn');
        if (!sameBytes(body.mac, connectionServerProof(this.#auth!.kAuth, this.#auth!.nonce, body.params))) {
          this.counters.serverUnproven++;
          return this.fail(statusCode(FileStatus.AccessDenied), 'the server could not prove it holds the authentication key', FileStatus.AccessDenied);
        }
        if (body.status !== FileStatus.Success) return this.fail(statusCode(body.status), `authentication refused: ${statusText(body.status)}`, body.status);
        const limits: NegotiatedLimits = {
          maxReceiveSize: body.maxReceiveSize, maxReadWriteSize: body.maxReadWriteSize, maxWriteSize: body.maxWriteSize,
          maxVectors: body.maxVectors, maxOpenFiles: body.maxOpenFiles, rwDepth: body.rwDepth, creditsMax: body.creditsMax,
        };
        const bad = limitsProblem(limits);
        if (bad) return this.fail(LocalCode.ProtocolError, `the server announced ${bad}`);
        this.limits = limits;
        this.state = 'authenticated';
        break;
      }
      case FileOp.StatusResponse:
        if (hdr.flags & FileFlag.Terminate) {
          // Closed before authenticating to make room for a newer connection: the bound it was closed under.
          const evicted = body.status === FileStatus.SessionLimit && this.state === 'authenticating' ? evictionNamed('rdma', body.aux) : undefined;
          if (evicted) return this.fail(statusCode(body.status), `the server refused: ${evicted.name}; closed before it authenticated, for a newer connection`, body.status);
          return this.fail(statusCode(body.status), `the server closed the connection: ${statusText(body.status)}`, body.status);
        }
        if (this.state === 'authenticated') {
          if (body.status !== FileStatus.Success) return this.fail(statusCode(body.status), `authentication refused: ${statusText(body.status)}`, body.status);
          this.state = 'ready';
          this.#actions.push({ kind: 'ready', limits: this.limits! });
        } else if (this.state === 'ready') this.counters.retireAcks++;
        else return this.#malformed('StatusResponse out of turn');
        break;
      case FileOp.DeltaCredit: {
        const delta = hdr.info | 0;
        if (delta < 0) this.toRetire += -delta;
        break;
      }
      case FileOp.InterruptResponse: {
        const p = this.#byId.get(hdr.info);
        // rc ordering: the block was placed before this Send arrived. Look at the slot now.
        if (p && p.sent) this.#actions.push({ kind: 'check', slot: p.slot, id: p.id });
        break;
      }
      default:
        return this.#malformed(`opcode ${hdr.opcode} is not for a client`);
    }
    this.#pump();
  }

  /**
   * The status block in `slot` (`b`: its 40 bytes). `viaImm`: it came with a Write with
   * Immediate, which consumed a receive (and one of our credits); polling: it did not.
   */
  handleStatusBlock(slot: number, b: Uint8Array, viaImm: boolean, _now: number): void {
    if (this.state === 'closed') return;
    if (viaImm && !this.#consumed()) return;
    const p = this.#bySlot.get(slot);
    const h = decodeHeader(b.subarray(0, STATUS_BLOCK_LEN));
    if (!h.ok) return this.#malformed(h.error);
    const hdr = h.value;
    // As in receive(): the grant is real once the header reads, matched or not. (Polled blocks
    // are read only for a request outstanding in that slot, so none is counted twice.)
    this.credits.granted(hdr.creditsGranted);
    this.credits.peerTarget = hdr.creditsRequested;
    const d = decodeBody(hdr, b.subarray(0, STATUS_BLOCK_LEN));
    const mine = p !== undefined && p.sent && hdr.opcode === FileOp.Completion && hdr.requestId === p.id && sealOf(b) === p.id && hdr.slot === slot;
    if (!d.ok && mine) {
      // The block is this request's answer but says nothing it can take (a value past 2^53):
      // the request fails now, rather than wait for its deadline and give the session up.
      this.#retire(p, slot);
      this.counters.malformed++;
      this.#actions.push({ kind: 'reject', id: p.id, code: LocalCode.ProtocolError, message: `the server's answer does not decode: ${d.error}` });
      return this.#pump();
    }
    if (!d.ok || d.value.op !== FileOp.Completion) return this.#malformed(d.ok ? 'a status block that is not a Completion' : d.error);
    const body = d.value;
    if (!p || !p.sent || hdr.requestId !== p.id || body.seal !== p.id || hdr.slot !== slot) {
      return this.#malformed(`status block in slot ${slot} for request ${hdr.requestId} matches nothing outstanding`);
    }
    this.#retire(p, slot);
    this.counters.completions++;
    if (viaImm) this.counters.interruptCompletions++;
    else this.counters.polledCompletions++;
    this.#actions.push({ kind: 'complete', id: p.id, status: body.status, value: body.value, aux: body.aux });
    this.#pump();
  }

  /** Request `p`, answered in `slot`, is outstanding no more. */
  #retire(p: Pending, slot: number): void {
    this.#bySlot.delete(slot);
    this.#byId.delete(p.id);
    this.#freeSlots.push(slot);
  }

  /** The RDMA connection or the pipe is gone: everything outstanding fails with `code`. */
  fail(code: FileErrorCodeValue, message: string, status?: number): void {
    if (this.state === 'closed') return;
    this.state = 'closed';
    this.#queue.length = 0;
    this.#control.length = 0;
    this.#bySlot.clear();
    this.#byId.clear();
    this.#actions.push({ kind: 'failed', code, message, ...(status !== undefined ? { status } : {}) });
  }

  #consumed(): boolean {
    this.#actions.push({ kind: 'repost' });
    const ok = this.credits.received();
    this.credits.posted++;
    if (!ok) {
      this.fail(LocalCode.ProtocolError, 'the server sent a message without a credit');
      return false;
    }
    return true;
  }

  #malformed(why: string): void {
    // Counted, and the receive was already given back: a bad message must not cost a credit.
    this.counters.malformed++;
    void why;
    this.#pump();
  }

  #emit(h: FileHeader, body: Body, extra: { id?: number; slot?: number; data?: unknown } = {}): void {
    const b = new Uint8Array(HDR_LEN + bodyLength(body));
    encodeMessage(b, h, body);
    this.counters.sent++;
    this.#actions.push({ kind: 'send', bytes: b, ...extra });
  }

  #pump(): void {
    const c = this.credits;
    if (this.state === 'authenticated') {
      // Between AuthenticateResponse and StatusResponse the server may be out of our credits
      // (a client that granted only one): grant, or the StatusResponse can never come.
      if (c.grantDue() && c.canSpend()) this.#grantOnly();
      return;
    }
    if (this.state !== 'ready') return;
    // Retiring first: the server asked for its receives back; the last credit is never retired.
    while (this.toRetire > 0 && c.send > 1) {
      const g = c.spend();
      this.toRetire--;
      this.counters.retired++;
      this.#emit({ opcode: FileOp.Credit, flags: 0, creditsRequested: c.target, creditsGranted: g, slot: 0, requestId: 0, info: 1 }, { op: FileOp.Credit });
    }
    while (this.#control.length > 0) {
      const g = c.spend();
      if (g < 0) return;
      const m = this.#control.shift()!;
      this.#emit({ opcode: m.opcode, flags: 0, creditsRequested: c.target, creditsGranted: g, slot: 0, requestId: 0, info: m.info }, { op: m.opcode } as Body);
    }
    while (this.#queue.length > 0 && this.#freeSlots.length > 0) {
      const g = c.spend();
      if (g < 0) break;
      const p = this.#queue.shift()!;
      p.slot = this.#freeSlots.pop()!;
      p.sent = true;
      this.#bySlot.set(p.slot, p);
      this.#emit({ opcode: p.body.op, flags: p.flags, creditsRequested: c.target, creditsGranted: g, slot: p.slot, requestId: p.id, info: 0 }, p.body,
        { id: p.id, slot: p.slot, ...(p.data !== undefined ? { data: p.data } : {}) });
    }
    // The server holds few of our credits: it could not answer in Interrupt mode. Grant now.
    if (this.#queue.length === 0 && c.grantDue() && c.canSpend()) this.#grantOnly();
  }

  #grantOnly(): void {
    const c = this.credits;
    this.counters.grantOnly++;
    const g = c.spend();
    this.#emit({ opcode: FileOp.Credit, flags: 0, creditsRequested: c.target, creditsGranted: g, slot: 0, requestId: 0, info: 0 }, { op: FileOp.Credit });
  }
}

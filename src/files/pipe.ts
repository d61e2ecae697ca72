// The control pipe, sans-I/O: frame codec and the two ends' state machines. Fed with the bytes
// the TCP socket read and a clock; they return what to write and what happened.
//
//   client                                   server
//   Hello(Nc)                      →
//                                  ←         Challenge(Ns)
//   Proof(HMAC(token,…Nc‖Ns))      →         (constant-time check)
//                                  ←         Welcome(status, HMAC(token,…server…))  — or close
//   ResumeKeyRequest               →
//                                  ←         ResumeKeyResponse(resume key: the session)
//   NegotiateRequest(key, providers)→
//                                  ←         NegotiateResponse(common providers, ports, keyId)
//
// The body length of each type is fixed (only NegotiateResponse has a tail, bounded by its own
// length byte); a frame header announcing more than FILE_PIPE_MAX_BODY closes the pipe before
// anything more is buffered.
import {
  evictionCode, evictionNamed, FILE_MAC_LEN, FILE_PIPE_REFUSALS, pipeRefusalNamed, FILE_NONCE_LEN, FILE_PIPE_HDR, FILE_PIPE_MAC, FILE_PIPE_MAX_BODY, FILE_PIPE_NEGOTIATE_REQ, FILE_PIPE_NEGOTIATE_RESP,
  FILE_PIPE_NONCE, FILE_PIPE_RESUME_KEY, FILE_PIPE_STATUS, FILE_PIPE_WELCOME, FILE_PROVIDERS, FILE_VERSION, FilePipeType, FileStatus, type RefusalBound,
} from '../wire/files-spec.js';
import { type HasTimeout, Outbox, type PollsActions } from '../core/sans-io.js';
import type { EvictWhy, LoginBackoff } from './admission.js';
import { authKey, pipeClientProof, pipeServerProof, sameBytes, sessionKey } from './auth.js';
import { bytesAt, readFields, writeFields } from './layout.js';
import type { RandomBytes, Session, SessionTable } from './sessions.js';
import { statusText } from './status.js';
import { copyBytes } from '../core/bytes.js';

const HDR = FILE_PIPE_HDR.size;

export interface PipeFrame {
  type: number;
  body: Uint8Array;
}

export function encodePipeFrame(type: number, body: Uint8Array = new Uint8Array(0)): Uint8Array {
  const out = new Uint8Array(HDR + body.length);
  writeFields(FILE_PIPE_HDR, out, 0, { length: body.length, type, version: FILE_VERSION });
  out.set(body, HDR);
  return out;
}

function body(layout: Parameters<typeof writeFields>[0], v: Record<string, number | Uint8Array>, tail?: Uint8Array): Uint8Array {
  const b = new Uint8Array(layout.size + (tail?.length ?? 0));
  writeFields(layout, b, 0, v);
  if (tail) b.set(tail, layout.size);
  return b;
}

/**
 * The whole answer to a pipe refused at accept (./pipes.ts), by the bound all of whose pipes are
 * authenticated: Status(SessionLimit) with `why` its FILE_PIPE_REFUSALS code, the same 16 bytes
 * each time, written before a byte of the pipe is read. PipeClient takes a Status in any state as
 * the server's refusal.
 */
export const PIPE_REFUSED: Readonly<Record<RefusalBound, Uint8Array>> = Object.fromEntries(FILE_PIPE_REFUSALS.map((r) =>
  [r.bound, encodePipeFrame(FilePipeType.Status, body(FILE_PIPE_STATUS, { status: FileStatus.SessionLimit, why: r.code }))])) as Record<RefusalBound, Uint8Array>;

/**
 * The last frame of a pipe closed before it authenticated, for a newer one (./pipes.ts):
 * Status(SessionLimit) with `why`, the bound's code (FILE_EVICTIONS), after whatever the pipe
 * was written before (a Challenge, perhaps).
 */
export const pipeEvicted = (why: EvictWhy): Uint8Array => encodePipeFrame(FilePipeType.Status, body(FILE_PIPE_STATUS, { status: FileStatus.SessionLimit, why: evictionCode('pipe', why) }));

/** Splits a byte stream into frames; a bad header makes `error` non-empty and stops it for good. */
export class PipeReader {
  #buf = new Uint8Array(0);
  error = '';

  push(chunk: Uint8Array): PipeFrame[] {
    if (this.error) return [];
    const joined = new Uint8Array(this.#buf.length + chunk.length);
    joined.set(this.#buf);
    joined.set(chunk, this.#buf.length);
    const frames: PipeFrame[] = [];
    let at = 0;
    while (joined.length - at >= HDR) {
      const h = readFields(FILE_PIPE_HDR, joined, at);
      if (h.version !== FILE_VERSION) {
        this.error = `pipe frame version ${h.version}, expected ${FILE_VERSION}`;
        return frames;
      }
      if (h.length > FILE_PIPE_MAX_BODY) {
        this.error = `pipe frame of ${h.length} bytes exceeds ${FILE_PIPE_MAX_BODY}`;
        return frames;
      }
      if (joined.length - at - HDR < h.length) break;
      frames.push({ type: h.type, body: joined.slice(at + HDR, at + HDR + h.length) });
      at += HDR + h.length;
    }
    this.#buf = joined.slice(at);
    // Bounded: at most one header and one maximal body wait here.
    return frames;
  }
}

export interface Offer {
  /** Provider bits the server serves. */
  providers: number;
  udpPort: number;
  tcpPort: number;
  inprocId: string;
}

export interface PipeCounters {
  pipesOpened: number;
  pipeAuthFailed: number;
  pipeMalformed: number;
  pipeTimeouts: number;
  negotiations: number;
  noCommonProvider: number;
}

export const newPipeCounters = (): PipeCounters => ({ pipesOpened: 0, pipeAuthFailed: 0, pipeMalformed: 0, pipeTimeouts: 0, negotiations: 0, noCommonProvider: 0 });

export type PipeServerAction = { kind: 'write'; bytes: Uint8Array } | { kind: 'close'; reason: string };

/**
 * How long a pipe has for Hello, Challenge, Proof and Welcome (two round trips and an HMAC), with
 * room for a client whose event loop stalls a few seconds; silent pipes are bounded by the
 * per-source caps and eviction.
 */
export const PIPE_HANDSHAKE_MS = 5000;

export class PipeServer implements PollsActions<PipeServerAction>, HasTimeout {
  /** 'held': the Proof arrived while its source is rationed (./admission.ts); checked at its turn. */
  state: 'hello' | 'proof' | 'held' | 'ready' | 'closed' = 'hello';
  session: Session | undefined;
  readonly #token: string;
  readonly #sessions: SessionTable;
  readonly #offer: Offer;
  readonly #random: RandomBytes;
  readonly #counters: PipeCounters;
  readonly #reader = new PipeReader();
  readonly #deadline: number;
  readonly #host: string;
  /** The source as the session table counts it (undefined when the shell named none). */
  readonly #sessionHost: string | undefined;
  readonly #backoff: LoginBackoff | undefined;
  #held: { mac: Uint8Array; at: number } | undefined;
  #nc: Uint8Array = new Uint8Array(0);
  #ns: Uint8Array = new Uint8Array(0);
  #keyAsked = false;
  readonly #actions = new Outbox<PipeServerAction>();

  constructor(o: {
    token: string; sessions: SessionTable; offer: Offer; random: RandomBytes; counters: PipeCounters; now: number; handshakeMs?: number;
    /** The source (admission.ts hostKey) and the failed-proof backoff its proofs are rationed by. */
    host?: string; backoff?: LoginBackoff;
  }) {
    this.#token = o.token;
    this.#host = o.host ?? '?';
    this.#sessionHost = o.host;
    this.#backoff = o.backoff;
    this.#sessions = o.sessions;
    this.#offer = o.offer;
    this.#random = o.random;
    this.#counters = o.counters;
    this.#deadline = o.now + (o.handshakeMs ?? PIPE_HANDSHAKE_MS);
    o.counters.pipesOpened++;
  }

  /** When handleTimeout is due: a held Proof's turn, or when the handshake must be done by. */
  pollTimeout(): number | undefined {
    if (this.state === 'held') return this.#held!.at;
    return this.state === 'ready' || this.state === 'closed' ? undefined : this.#deadline;
  }

  /** The next action, in order (src/core/sans-io.ts). */
  pollAction(): PipeServerAction | undefined {
    return this.#actions.poll();
  }

  handleTimeout(now: number): void {
    if (this.state === 'held' && now >= this.#held!.at) {
      const h = this.#held!;
      this.#held = undefined;
      this.state = 'proof';
      return this.#check(h.mac, h.at);
    }
    if (now >= (this.pollTimeout() ?? Infinity)) {
      this.#counters.pipeTimeouts++;
      this.#close('no authenticated handshake in time');
    }
  }

  handleReceive(chunk: Uint8Array, now: number): void {
    if (this.state === 'closed') return;
    for (const f of this.#reader.push(chunk)) {
      this.#frame(f, now);
      if (this.#closed()) return;
    }
    if (this.#reader.error) {
      this.#counters.pipeMalformed++;
      this.#close(this.#reader.error);
    }
  }

  // A method, so the compiler does not narrow `state` across the frame handler's changes.
  #closed(): boolean {
    return this.state === 'closed';
  }

  #write(type: number, b?: Uint8Array): void {
    this.#actions.push({ kind: 'write', bytes: encodePipeFrame(type, b) });
  }

  #close(reason: string): void {
    if (this.state === 'closed') return;
    this.state = 'closed';
    this.#actions.push({ kind: 'close', reason });
  }

  #malformed(why: string): void {
    this.#counters.pipeMalformed++;
    this.#close(why);
  }

  /** Check the token proof (at its turn) and answer Welcome. */
  #check(mac: Uint8Array, now: number): void {
    const want = pipeClientProof(this.#token, this.#nc, this.#ns);
    if (!sameBytes(want, mac)) {
      this.#counters.pipeAuthFailed++;
      this.#backoff?.failed(this.#host, now);
      this.#write(FilePipeType.Welcome, body(FILE_PIPE_WELCOME, { status: FileStatus.AccessDenied }));
      return this.#close('wrong token');
    }
    this.#backoff?.succeeded(this.#host);
    const s = this.#sessions.open(sessionKey(this.#token, this.#nc, this.#ns), this.#sessionHost);
    if (!s) {
      this.#write(FilePipeType.Welcome, body(FILE_PIPE_WELCOME, { status: FileStatus.SessionLimit }));
      return this.#close('session limit');
    }
    this.session = s;
    this.#write(FilePipeType.Welcome, body(FILE_PIPE_WELCOME, { status: FileStatus.Success, mac: pipeServerProof(this.#token, this.#nc, this.#ns) }));
    this.state = 'ready';
  }

  #frame(f: PipeFrame, now: number): void {
    switch (this.state) {
      case 'hello':
        if (f.type !== FilePipeType.Hello || f.body.length !== FILE_PIPE_NONCE.size) return this.#malformed('expected Hello');
        this.#nc = copyBytes(f.body);
        this.#ns = this.#random(FILE_NONCE_LEN);
        this.#write(FilePipeType.Challenge, this.#ns);
        this.state = 'proof';
        return;
      case 'proof': {
        if (f.type !== FilePipeType.Proof || f.body.length !== FILE_PIPE_MAC.size) return this.#malformed('expected Proof');
        const mac = bytesAt(FILE_PIPE_MAC, f.body, 0, 'mac');
        const at = this.#backoff ? this.#backoff.reserve(this.#host, now, this.#deadline) : now;
        if (at === undefined) {
          this.#write(FilePipeType.Welcome, body(FILE_PIPE_WELCOME, { status: FileStatus.SessionLimit }));
          return this.#close('too many failed proofs from this source: try later');
        }
        if (at > now) {
          this.#held = { mac, at };
          this.state = 'held';
          return;
        }
        return this.#check(mac, now);
      }
      case 'held':
        // Nothing may come before the Welcome.
        return this.#malformed('a frame before the Welcome');
      case 'ready':
        if (f.type === FilePipeType.ResumeKeyRequest && f.body.length === 0) {
          this.#keyAsked = true;
          this.#write(FilePipeType.ResumeKeyResponse, body(FILE_PIPE_RESUME_KEY, { resumeKey: this.session!.resumeKey }));
          return;
        }
        if (f.type === FilePipeType.NegotiateRequest && f.body.length === FILE_PIPE_NEGOTIATE_REQ.size) {
          const q = readFields(FILE_PIPE_NEGOTIATE_REQ, f.body, 0);
          if (!this.#keyAsked || !sameBytes(bytesAt(FILE_PIPE_NEGOTIATE_REQ, f.body, 0, 'resumeKey'), this.session!.resumeKey)) {
            this.#counters.pipeAuthFailed++;
            this.#write(FilePipeType.Status, body(FILE_PIPE_STATUS, { status: FileStatus.AccessDenied, why: 0 }));
            return this.#close('negotiate with a resume key that is not this session\'s');
          }
          this.#counters.negotiations++;
          const common = q.providers & this.#offer.providers;
          if (common === 0) {
            this.#counters.noCommonProvider++;
            this.#write(FilePipeType.NegotiateResponse, body(FILE_PIPE_NEGOTIATE_RESP, { status: FileStatus.NoCommonProvider, providers: 0 }));
            return;
          }
          const keyId = this.#sessions.mintKey(this.session!, now);
          if (!keyId) {
            this.#write(FilePipeType.NegotiateResponse, body(FILE_PIPE_NEGOTIATE_RESP, { status: FileStatus.SessionLimit, providers: common }));
            return;
          }
          const inproc = common & 0x04 ? new TextEncoder().encode(this.#offer.inprocId) : new Uint8Array(0);
          this.#write(FilePipeType.NegotiateResponse, body(FILE_PIPE_NEGOTIATE_RESP, {
            status: FileStatus.Success, providers: common, inprocIdLen: inproc.length, udpPort: this.#offer.udpPort, tcpPort: this.#offer.tcpPort, keyId,
          }, inproc));
          return;
        }
        return this.#malformed(`unexpected pipe frame type ${f.type}`);
      default:
        return;
    }
  }
}

// ---------------------------------------------------------------------------------------------

export interface Negotiated {
  status: number;
  providers: number;
  udpPort: number;
  tcpPort: number;
  inprocId: string;
  resumeKey: Uint8Array;
  keyId: Uint8Array;
  /** K_auth, derived here: it never crossed the wire. */
  kAuth: Uint8Array;
}

export type PipeClientEvent =
  | { kind: 'write'; bytes: Uint8Array }
  | { kind: 'negotiated'; result: Negotiated }
  /**
   * `fatal`: the pipe failed (closed; every negotiation waiting fails with it). Otherwise one
   * negotiation was refused — the oldest waiting, as the server answers in order — and the
   * pipe goes on.
   */
  | { kind: 'error'; status: number; message: string; fatal: boolean };

export class PipeClient implements PollsActions<PipeClientEvent> {
  /** 'negotiating': one or more NegotiateRequests wait for their answers. */
  state: 'challenge' | 'welcome' | 'resume' | 'ready' | 'negotiating' | 'closed' = 'challenge';
  /** NegotiateRequests sent and not yet answered (the server answers them in order). */
  #asked = 0;
  readonly #token: string;
  readonly #providers: number;
  readonly #reader = new PipeReader();
  readonly #nc: Uint8Array;
  #ns: Uint8Array = new Uint8Array(0);
  #kSession: Uint8Array = new Uint8Array(0);
  resumeKey: Uint8Array = new Uint8Array(0);
  readonly #events = new Outbox<PipeClientEvent>();

  constructor(o: { token: string; providers: number; random: RandomBytes }) {
    this.#token = o.token;
    this.#providers = o.providers;
    this.#nc = o.random(FILE_NONCE_LEN);
    this.#events.push({ kind: 'write', bytes: encodePipeFrame(FilePipeType.Hello, this.#nc) });
  }

  /** The next action, in order (src/core/sans-io.ts). */
  pollAction(): PipeClientEvent | undefined {
    return this.#events.poll();
  }

  /**
   * Ask for another key (one per RDMA connection). Each call sends a request, one in flight or
   * not: concurrent dedup transfers each wait for an answer of their own.
   */
  negotiate(): void {
    if (this.state !== 'ready' && this.state !== 'negotiating') return;
    this.#asked++;
    this.state = 'negotiating';
    this.#write(FilePipeType.NegotiateRequest, body(FILE_PIPE_NEGOTIATE_REQ, { resumeKey: this.resumeKey, providers: this.#providers }));
  }

  handleReceive(chunk: Uint8Array, _now: number): void {
    if (this.state === 'closed') return;
    for (const f of this.#reader.push(chunk)) {
      this.#frame(f);
      if (this.#closed()) return;
    }
    if (this.#reader.error) {
      // Before the server's first frame, bad bytes mean the port is not a sabre file server at
      // all (an HTTP server answers with its status line): say that, not a frame field.
      const why = this.state === 'challenge' ? `the peer is not a sabre file server (it sent ${JSON.stringify(Buffer.from(chunk.subarray(0, 24)).toString('latin1'))})` : `the server sent a bad frame: ${this.#reader.error}`;
      this.#fail(FileStatus.Malformed, why);
    }
  }

  #closed(): boolean {
    return this.state === 'closed';
  }

  #write(type: number, b?: Uint8Array): void {
    this.#events.push({ kind: 'write', bytes: encodePipeFrame(type, b) });
  }

  #fail(status: number, message: string): void {
    this.state = 'closed';
    this.#events.push({ kind: 'error', status, message, fatal: true });
  }

  #frame(f: PipeFrame): void {
    if (f.type === FilePipeType.Status && f.body.length === FILE_PIPE_STATUS.size) {
      const { status, why } = readFields(FILE_PIPE_STATUS, f.body, 0);
      // Closed before it authenticated, for a newer pipe: the bound it was closed under. Only a
      // pipe's codes, and only before the Welcome (an authenticated pipe is never evicted).
      const early = status === FileStatus.SessionLimit && (this.state === 'challenge' || this.state === 'welcome');
      const evicted = early ? evictionNamed('pipe', why) : undefined;
      if (evicted) return this.#fail(status, `the server refused: ${evicted.name}; closed before it authenticated, for a newer connection`);
      // Refused at accept: before the Challenge (the server wrote it before reading a byte).
      const refused = early && this.state === 'challenge' ? pipeRefusalNamed(why) : undefined;
      return this.#fail(status, `the server refused: ${refused?.name ?? statusText(status)}`);
    }
    switch (this.state) {
      case 'challenge':
        if (f.type !== FilePipeType.Challenge || f.body.length !== FILE_PIPE_NONCE.size) return this.#fail(FileStatus.Malformed, 'expected Challenge');
        this.#ns = copyBytes(f.body);
        this.#write(FilePipeType.Proof, pipeClientProof(this.#token, this.#nc, this.#ns));
        this.state = 'welcome';
        return;
      case 'welcome': {
        if (f.type !== FilePipeType.Welcome || f.body.length !== FILE_PIPE_WELCOME.size) return this.#fail(FileStatus.Malformed, 'expected Welcome');
        const w = readFields(FILE_PIPE_WELCOME, f.body, 0);
        if (w.status === FileStatus.AccessDenied) return this.#fail(w.status, 'the server refused the token');
        if (w.status !== FileStatus.Success) return this.#fail(w.status, `the server refused the session: ${statusText(w.status)}`);
        if (!sameBytes(bytesAt(FILE_PIPE_WELCOME, f.body, 0, 'mac'), pipeServerProof(this.#token, this.#nc, this.#ns))) {
          return this.#fail(FileStatus.AccessDenied, 'the server could not prove it holds the token');
        }
        this.#kSession = sessionKey(this.#token, this.#nc, this.#ns);
        this.#write(FilePipeType.ResumeKeyRequest);
        this.state = 'resume';
        return;
      }
      case 'resume':
        if (f.type !== FilePipeType.ResumeKeyResponse || f.body.length !== FILE_PIPE_RESUME_KEY.size) return this.#fail(FileStatus.Malformed, 'expected ResumeKeyResponse');
        this.resumeKey = bytesAt(FILE_PIPE_RESUME_KEY, f.body, 0, 'resumeKey');
        this.state = 'ready';
        this.negotiate();
        return;
      case 'negotiating': {
        if (f.type !== FilePipeType.NegotiateResponse || f.body.length < FILE_PIPE_NEGOTIATE_RESP.size) return this.#fail(FileStatus.Malformed, 'expected NegotiateResponse');
        const r = readFields(FILE_PIPE_NEGOTIATE_RESP, f.body, 0);
        if (f.body.length !== FILE_PIPE_NEGOTIATE_RESP.size + r.inprocIdLen) return this.#fail(FileStatus.Malformed, 'NegotiateResponse length disagrees with inprocIdLen');
        const keyId = bytesAt(FILE_PIPE_NEGOTIATE_RESP, f.body, 0, 'keyId');
        this.#asked--;
        this.state = this.#asked > 0 ? 'negotiating' : 'ready';
        if (r.status !== FileStatus.Success) {
          // This negotiation's answer, not the pipe's: the others and later ones go on.
          const have = FILE_PROVIDERS.filter((p) => p.code & this.#providers).map((p) => p.name).join(', ');
          this.#events.push({ kind: 'error', status: r.status, fatal: false, message: r.status === FileStatus.NoCommonProvider
            ? `the server serves none of the providers asked for (${have})` : `negotiate refused: ${statusText(r.status)}` });
          return;
        }
        this.#events.push({
          kind: 'negotiated',
          result: {
            status: r.status, providers: r.providers, udpPort: r.udpPort, tcpPort: r.tcpPort,
            inprocId: new TextDecoder().decode(f.body.subarray(FILE_PIPE_NEGOTIATE_RESP.size)),
            resumeKey: this.resumeKey, keyId, kAuth: authKey(this.#kSession, keyId),
          },
        });
        return;
      }
      default:
        return this.#fail(FileStatus.Malformed, `unexpected pipe frame type ${f.type}`);
    }
  }
}

export const MAC_LEN = FILE_MAC_LEN;

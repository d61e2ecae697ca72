// The slow-path mailbox between the application thread and a NIC thread (DESIGN §8): regMr,
// createQp, modify, stats … are synchronous verbs calls, so the application thread posts a
// request into a SharedArrayBuffer and blocks in Atomics.wait (allowed on Node's main thread
// and in workers) until the NIC thread's reply is there. One request at a time; values are
// msgpack (msgpackr, useRecords: false), so bigint and Uint8Array cross as themselves.
//
// Layout (Int32 header words, then two equal areas, 8-byte aligned):
//   word 0 reqSeq   sequence number of the latest request (never 0; 0 = none yet)
//   word 1 reqLen   bytes of it in the request area
//   word 2 taken    the reqSeq the server last took (reqSeq != taken: a request is pending)
//   word 3 lock     0 free, 1 the client writes the request area, 2 the server copies it out
//   word 4 repSeq   the reqSeq the reply area answers
//   word 5 repLen   bytes of the reply
//   word 6 repKind  0 a value, 1 an error { code, message }
//   word 7 magic, word 8 area (bytes of each area)
//   word 9 gone     1 once the server's thread is ending (markMailboxGone): nothing will answer
//   byte 64 request area, then the reply area
//
// Why a sequence number and a lock. A call that times out leaves its request behind: the server
// may still take it and answer late. The late reply carries the old reqSeq, and the client waits
// for repSeq == its own seq, so it is never read as the next call's. The next call may overwrite
// a request the server has not taken yet (then that request never runs — a timed-out call may
// or may not have happened, as with any lost reply); the lock makes sure it never overwrites
// one the server is copying out, so the server reads whole requests or none. The reply area
// needs no lock: the server writes reply n only after taking request n, which the client
// writes after it has read reply n-1 (or given up on it, after which it reads no reply but
// its own).
//
// Memory order: plain copies into and out of the areas are ordered by the Atomics stores and
// loads of the words above (sequentially consistent): reqSeq is stored after the request bytes
// and read before them (under the lock), repSeq is stored after the reply bytes and read
// before them.
import { Packr } from 'msgpackr';
import { ErrorCode, SabreError, type ErrorCodeValue } from '../core/errors.js';

const REQ_SEQ = 0;
const REQ_LEN = 1;
const TAKEN = 2;
const LOCK = 3;
const REP_SEQ = 4;
const REP_LEN = 5;
const REP_KIND = 6;
const MAGIC = 7;
const AREA = 8;
const GONE = 9;
const HEADER_BYTES = 64;
const MAGIC_VALUE = 0x4d424f58; // 'MBOX'
const LOCK_FREE = 0;
const LOCK_CLIENT = 1;
const LOCK_SERVER = 2;
const KIND_VALUE = 0;
const KIND_ERROR = 1;

type WaitAsyncResult = { async: false; value: 'not-equal' | 'timed-out' } | { async: true; value: Promise<'ok' | 'timed-out'> };
const waitAsync = (Atomics as unknown as { waitAsync(a: Int32Array, i: number, v: number, t?: number): WaitAsyncResult }).waitAsync;

// bigint: int64 range as msgpack int64 (decoded as bigint), beyond it msgpackr's extension.
const packr = new Packr({ useRecords: false, useBigIntExtension: true });

/** A mailbox buffer of `bytes` (header included; each direction gets half of the rest). */
export function createMailbox(bytes = 1 << 20): SharedArrayBuffer {
  if (!Number.isInteger(bytes) || bytes < 1024 || bytes > 1 << 30) {
    throw new SabreError(ErrorCode.InvalidArgument, `mailbox size must be an integer in [1024, 2^30], got ${bytes}`);
  }
  const sab = new SharedArrayBuffer(bytes);
  const hdr = new Int32Array(sab, 0, HEADER_BYTES / 4);
  hdr[AREA] = Math.floor((bytes - HEADER_BYTES) / 2) & ~7;
  Atomics.store(hdr, MAGIC, MAGIC_VALUE);
  return sab;
}

class Mailbox {
  protected readonly hdr: Int32Array;
  protected readonly req: Uint8Array;
  protected readonly rep: Uint8Array;
  /** Largest encoded request or reply. */
  readonly maxMessage: number;

  constructor(sab: SharedArrayBuffer) {
    this.hdr = new Int32Array(sab, 0, HEADER_BYTES / 4);
    if (Atomics.load(this.hdr, MAGIC) !== MAGIC_VALUE) throw new SabreError(ErrorCode.InvalidArgument, 'not a mailbox buffer (createMailbox)');
    const area = Atomics.load(this.hdr, AREA);
    this.maxMessage = area;
    this.req = new Uint8Array(sab, HEADER_BYTES, area);
    this.rep = new Uint8Array(sab, HEADER_BYTES + area, area);
  }
}

/** Errors of calls nobody answered (deadline passed, server gone), as against a handler's own errors. */
const unanswered = new WeakSet<Error>();
const noAnswer = (e: SabreError): SabreError => (unanswered.add(e), e);

/** True for an error of call()/callAsync() that no reply came for (not one the handler threw). */
export function wasUnanswered(e: unknown): boolean {
  return e instanceof Error && unanswered.has(e);
}

/**
 * Say that nothing will serve this mailbox any more (the serving thread is exiting, by close or
 * by a crash): a call blocked on it, or made later, fails at once with ERR_CLOSED instead of
 * waiting out its deadline. Safe from a thread's 'exit' handler (two stores and two notifies).
 */
export function markMailboxGone(sab: SharedArrayBuffer): void {
  const hdr = new Int32Array(sab, 0, HEADER_BYTES / 4);
  Atomics.store(hdr, GONE, 1);
  Atomics.notify(hdr, REP_SEQ);
  Atomics.notify(hdr, LOCK);
}

/** The application thread's side: synchronous calls. */
export class MailboxClient extends Mailbox {
  readonly #onRequest: (() => void) | undefined;

  /**
   * `onRequest`: called once each request is in (a NIC thread that polls another word for work
   * must be woken there too, after the request exists, or it sleeps out its poll first).
   */
  constructor(sab: SharedArrayBuffer, onRequest?: () => void) {
    super(sab);
    this.#onRequest = onRequest;
  }

  /**
   * Send {op, args} and block until the reply (its value), or throw: the handler's SabreError
   * (same code and message), ERR_INTERNAL for anything else it threw, ERR_LIMIT_EXCEEDED for a
   * request or reply larger than the mailbox's area, ERR_TIMEOUT when no reply came within
   * timeoutMs (the request may still run later; its reply is then ignored).
   */
  call(op: string, args: unknown, timeoutMs = 5000): unknown {
    const deadline = Date.now() + timeoutMs;
    const seq = this.#request(op, args, deadline, timeoutMs);
    for (let got = this.#replySeq(seq, op, deadline, timeoutMs); got !== seq; got = this.#replySeq(seq, op, deadline, timeoutMs)) {
      // In slices: a 'gone' notify between the look at the word and this wait would be missed.
      Atomics.wait(this.hdr, REP_SEQ, got, Math.min(100, deadline - Date.now()));
    }
    return this.#reply(op);
  }

  /**
   * call() without blocking this thread while the NIC thread works on it (a close that waits
   * for its peers' acknowledgements): the reply is awaited with Atomics.waitAsync. The caller
   * makes no other call until it settles (one request at a time).
   */
  async callAsync(op: string, args: unknown, timeoutMs = 5000): Promise<unknown> {
    const deadline = Date.now() + timeoutMs;
    const seq = this.#request(op, args, deadline, timeoutMs);
    for (let got = this.#replySeq(seq, op, deadline, timeoutMs); got !== seq; got = this.#replySeq(seq, op, deadline, timeoutMs)) {
      // In slices, as call() waits: a 'gone' notify between the look and this wait would be missed.
      const w = waitAsync(this.hdr, REP_SEQ, got, Math.min(100, deadline - Date.now()));
      if (w.async) await w.value;
    }
    return this.#reply(op);
  }

  /** The reply sequence number now: `seq` once its reply is in; throws past the deadline. */
  #replySeq(seq: number, op: string, deadline: number, timeoutMs: number): number {
    const got = Atomics.load(this.hdr, REP_SEQ);
    if (got === seq) return got;
    // Gone, unless its reply came just before it went.
    if (Atomics.load(this.hdr, GONE) !== 0 && Atomics.load(this.hdr, REP_SEQ) === seq) return seq;
    this.#checkGone(op);
    // A call made while an async one was out (against the rule above) was answered after it, over its reply.
    if (((got - seq) | 0) > 0) throw new SabreError(ErrorCode.InvalidState, `mailbox '${op}': its reply was overwritten by a later call's`);
    if (deadline - Date.now() <= 0) throw noAnswer(new SabreError(ErrorCode.Timeout, `mailbox '${op}': no reply from the NIC thread within ${timeoutMs} ms`));
    return got;
  }

  /** Write the request under the lock and ring; its sequence number. */
  #request(op: string, args: unknown, deadline: number, timeoutMs: number): number {
    const bytes = packr.pack({ op, args });
    if (bytes.length > this.maxMessage) {
      throw new SabreError(ErrorCode.LimitExceeded, `mailbox request '${op}' of ${bytes.length} bytes exceeds the mailbox's ${this.maxMessage}`);
    }
    const hdr = this.hdr;
    this.#checkGone(op);
    // The server holds the lock only while it copies a request out; wait for that, bounded.
    for (;;) {
      const was = Atomics.compareExchange(hdr, LOCK, LOCK_FREE, LOCK_CLIENT);
      if (was === LOCK_FREE) break;
      const left = deadline - Date.now();
      this.#checkGone(op);
      if (left <= 0) throw noAnswer(new SabreError(ErrorCode.Timeout, `mailbox '${op}': the NIC thread held the mailbox for ${timeoutMs} ms`));
      Atomics.wait(hdr, LOCK, was, Math.min(left, 10));
    }
    let seq = (Atomics.load(hdr, REQ_SEQ) + 1) | 0;
    if (seq === 0) seq = 1;
    this.req.set(bytes);
    Atomics.store(hdr, REQ_LEN, bytes.length);
    Atomics.store(hdr, REQ_SEQ, seq);
    Atomics.store(hdr, LOCK, LOCK_FREE);
    Atomics.notify(hdr, REQ_SEQ);
    this.#onRequest?.();
    return seq;
  }

  /** Nothing will answer (this side found the NIC thread gone or hung): later calls fail at once. */
  markGone(): void {
    markMailboxGone(this.hdr.buffer as SharedArrayBuffer);
  }

  #checkGone(op: string): void {
    if (Atomics.load(this.hdr, GONE) !== 0) throw noAnswer(new SabreError(ErrorCode.Closed, `mailbox '${op}': the NIC thread has ended`));
  }

  /** The reply to the request just answered: its value, or the handler's error thrown. */
  #reply(op: string): unknown {
    const hdr = this.hdr;
    const len = Atomics.load(hdr, REP_LEN);
    if (len < 0 || len > this.maxMessage) throw new SabreError(ErrorCode.Internal, `mailbox '${op}': reply length ${len} outside the mailbox`);
    const kind = Atomics.load(hdr, REP_KIND);
    // Decode from a copy: msgpackr's Uint8Array values are views of what it decodes, and the
    // reply area is reused by the next call.
    const value = decode(this.rep.slice(0, len), op);
    if (kind === KIND_VALUE) return value;
    const e = value as { code?: unknown; message?: unknown };
    throw new SabreError((typeof e?.code === 'string' ? e.code : ErrorCode.Internal) as ErrorCodeValue, String(e?.message ?? 'mailbox error'));
  }
}

function decode(bytes: Uint8Array, op: string): unknown {
  try {
    return packr.unpack(bytes);
  } catch (cause) {
    throw new SabreError(ErrorCode.Internal, `mailbox '${op}': undecodable message`, { cause });
  }
}

/** Handles one request; a promise result is replied when it settles. */
export type MailboxHandler = (op: string, args: any) => unknown;

/**
 * The NIC thread's side. start() serves in an Atomics.waitAsync loop on the thread's event loop;
 * poll() serves a pending request synchronously (a thread busy in a loop calls it between
 * steps); both may be used on one server. One request at a time: while a handler's promise is
 * pending, nothing else is taken.
 */
export class MailboxServer extends Mailbox {
  readonly #handler: MailboxHandler;
  #running = false;
  #pending: Promise<void> | undefined;
  #keepAlive: ReturnType<typeof setInterval> | undefined;

  constructor(sab: SharedArrayBuffer, handler: MailboxHandler) {
    super(sab);
    this.#handler = handler;
  }

  /**
   * Serve until stop(). A pending Atomics.waitAsync does not keep a Node thread alive, so the
   * server holds a ref'd interval while it runs: the thread lives as long as its mailbox is
   * served, and stop() lets it exit.
   */
  start(): void {
    if (this.#running) return;
    this.#running = true;
    this.#keepAlive = setInterval(() => {}, 1 << 30);
    void this.#loop();
  }

  /** Stop serving (a request being handled still gets its reply); no handle is left behind. */
  stop(): void {
    if (!this.#running) return;
    this.#running = false;
    clearInterval(this.#keepAlive);
    this.#keepAlive = undefined;
    // Wake the loop's waitAsync so it sees #running and ends.
    Atomics.notify(this.hdr, REQ_SEQ);
  }

  async #loop(): Promise<void> {
    const hdr = this.hdr;
    while (this.#running) {
      if (this.#pending) {
        await this.#pending;
        continue;
      }
      if (this.poll()) continue;
      const seq = Atomics.load(hdr, REQ_SEQ);
      if (seq !== Atomics.load(hdr, TAKEN)) {
        // A request is there but the client holds the lock (it is writing a newer one and
        // notifies when done, possibly before we could wait): look again on the next turn.
        await new Promise<void>((resolve) => setImmediate(resolve));
        continue;
      }
      const w = waitAsync(hdr, REQ_SEQ, seq);
      if (w.async) await w.value;
    }
  }

  /** Serve the pending request if there is one (true: one was taken). Never blocks. */
  poll(): boolean {
    if (this.#pending) return false;
    const hdr = this.hdr;
    if (Atomics.load(hdr, REQ_SEQ) === Atomics.load(hdr, TAKEN)) return false;
    if (Atomics.compareExchange(hdr, LOCK, LOCK_FREE, LOCK_SERVER) !== LOCK_FREE) return false;
    const seq = Atomics.load(hdr, REQ_SEQ);
    if (seq === Atomics.load(hdr, TAKEN)) {
      this.#unlock();
      return false;
    }
    const len = Atomics.load(hdr, REQ_LEN);
    const bytes = len >= 0 && len <= this.maxMessage ? this.req.slice(0, len) : undefined;
    Atomics.store(hdr, TAKEN, seq);
    this.#unlock();
    if (!bytes) {
      this.#replyError(seq, new SabreError(ErrorCode.LimitExceeded, `mailbox request length ${len} outside the mailbox`));
      return true;
    }
    let result: unknown;
    try {
      const msg = packr.unpack(bytes) as { op?: unknown; args?: unknown };
      if (typeof msg?.op !== 'string') throw new SabreError(ErrorCode.Malformed, 'mailbox request without an op');
      result = this.#handler(msg.op, msg.args);
    } catch (e) {
      this.#replyError(seq, e);
      return true;
    }
    if (result !== null && typeof result === 'object' && typeof (result as PromiseLike<unknown>).then === 'function') {
      this.#pending = Promise.resolve(result as PromiseLike<unknown>).then(
        (v) => this.#reply(seq, v),
        (e: unknown) => this.#replyError(seq, e),
      ).finally(() => {
        this.#pending = undefined;
      });
      return true;
    }
    this.#reply(seq, result);
    return true;
  }

  #unlock(): void {
    Atomics.store(this.hdr, LOCK, LOCK_FREE);
    Atomics.notify(this.hdr, LOCK);
  }

  #reply(seq: number, value: unknown): void {
    let bytes: Uint8Array;
    try {
      bytes = packr.pack(value);
    } catch (e) {
      this.#replyError(seq, e);
      return;
    }
    if (bytes.length > this.maxMessage) {
      this.#replyError(seq, new SabreError(ErrorCode.LimitExceeded, `mailbox reply of ${bytes.length} bytes exceeds the mailbox's ${this.maxMessage}`));
      return;
    }
    this.#write(seq, KIND_VALUE, bytes);
  }

  #replyError(seq: number, e: unknown): void {
    const err =
      e instanceof SabreError
        ? { code: e.code, message: e.message }
        : { code: ErrorCode.Internal, message: `NIC thread: ${e instanceof Error ? `${e.name}: ${e.message}` : String(e)}` };
    let bytes = packr.pack(err);
    if (bytes.length > this.maxMessage) bytes = packr.pack({ code: err.code, message: err.message.slice(0, 64) });
    this.#write(seq, KIND_ERROR, bytes);
  }

  #write(seq: number, kind: number, bytes: Uint8Array): void {
    const hdr = this.hdr;
    this.rep.set(bytes);
    Atomics.store(hdr, REP_LEN, bytes.length);
    Atomics.store(hdr, REP_KIND, kind);
    Atomics.store(hdr, REP_SEQ, seq);
    Atomics.notify(hdr, REP_SEQ);
  }
}

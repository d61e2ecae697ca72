// The raw node:dgram baseline, ack-clocked so the receiver is never overrun: a
// sender blasting datagrams with no flow control measures how the receiver collapses, not the
// path (runs differed several-fold). Here at most `window` datagrams are ever
// unacknowledged, the window sized so they fit the receiver's socket buffer; every `ackEvery`-th
// datagram asks for an ack; the sink answers with its high-water mark and count. Raw UDP has no
// recovery, so what is lost stays lost and is reported.
//
// Datagram: [u32 BE: bit 31 = ack now, bits 0..30 = sequence][token, when the run has one: 8
// bytes][payload] (a header alone is a probe asking for an ack at the end of a timed run, not
// counted). Ack: [u32 BE high water (one past the highest sequence seen)][u32 BE datagrams
// received]. The token (`sabre perf --server` hands one per baseline to its control peer) binds
// the datagrams to that session: a source address anyone on the path can write, a token not;
// it costs the sender nothing per datagram (written once into the reused headers) and the sink
// two word compares.
// Shared by `sabre perf --baseline` and bench/udp-rdma.bench.mjs (one helper for the pattern).
import { createSocket, type Socket } from 'node:dgram';
import { type AddressInfo, isIPv6 } from 'node:net';

/** Largest datagram node:dgram carries on loopback (IP maximum less headers, rounded down). */
export const MAX_DGRAM = 65000;
export const DGRAM_HDR = 4;
/** Bytes of a session token after the sequence word. */
export const TOKEN_BYTES = 8;
const ACK_NOW = 0x80000000;
const SEQ_MASK = 0x7fffffff;
/** Kernel bookkeeping per queued datagram beyond its payload (sk_buff + shared info, rounded up). */
const SKB_OVERHEAD = 1024;
/**
 * Loopback hands every datagram through the per-CPU backlog, netdev_max_backlog long (1000 by
 * default): a window beyond that overruns the backlog, however big the socket buffer.
 */
const BACKLOG_SHARE = 512;

export interface SinkStats {
  datagrams: number;
  bytes: number;
  /** One past the highest sequence seen. */
  high: number;
  /** performance.timeOrigin-based ms of the first and last datagram. */
  first: number;
  last: number;
}

/**
 * What a sink does beyond counting, to measure what a protocol's receiver must at least add to
 * node's own receive path (bench/udp-floor.bench.mjs): `work` runs on each data datagram;
 * `ackEvery` sends an ack after every that many datagrams as well as when asked.
 */
export interface SinkWork {
  work?: (msg: Buffer) => void;
  ackEvery?: number;
  /**
   * Count and ack only datagrams from this host (`sabre perf --server`: its control peer), so
   * the sink's acks cannot be aimed at a third party; `onStranger` hears of each one dropped.
   */
  allowFrom?: string;
  /** Count and ack only datagrams carrying this TOKEN_BYTES-byte token after the sequence word. */
  token?: Uint8Array;
  onStranger?: (why: 'host' | 'token') => void;
}

/** An IPv4-mapped address as its dotted quad, lower-cased: two spellings of one host compare equal. */
const hostOf = (a: string): string => (a.startsWith('::ffff:') ? a.slice(7) : a).toLowerCase();

/** A token as the two big-endian words the sink compares (undefined: none); throws unless TOKEN_BYTES long. */
export function tokenWords(t: Uint8Array | undefined): [number, number] | undefined {
  if (t === undefined) return undefined;
  if (t.length !== TOKEN_BYTES) throw new RangeError(`a baseline token is ${TOKEN_BYTES} bytes`);
  const b = Buffer.from(t.buffer, t.byteOffset, t.length);
  return [b.readUInt32BE(0), b.readUInt32BE(4)];
}

/** The receiving end: counts, and acks when asked. */
export class RawDgramSink {
  #s: Socket;
  #st: SinkStats = { datagrams: 0, bytes: 0, high: 0, first: 0, last: 0 };
  private constructor(s: Socket, readonly port: number, readonly rcvbuf: number, extra: SinkWork) {
    this.#s = s;
    const { work, ackEvery = 0, onStranger } = extra;
    const allow = extra.allowFrom !== undefined ? hostOf(extra.allowFrom) : undefined;
    const tok = tokenWords(extra.token);
    const hdrLen = DGRAM_HDR + (tok ? TOKEN_BYTES : 0);
    s.on('message', (msg, rinfo) => {
      if (allow !== undefined && hostOf(rinfo.address) !== allow) {
        onStranger?.('host');
        return;
      }
      if (tok && (msg.length < hdrLen || msg.readUInt32BE(DGRAM_HDR) !== tok[0] || msg.readUInt32BE(DGRAM_HDR + 4) !== tok[1])) {
        onStranger?.('token');
        return;
      }
      if (msg.length < hdrLen) return;
      const h = msg.readUInt32BE(0);
      const seq = h & SEQ_MASK;
      const st = this.#st;
      let ackNow = (h & ACK_NOW) !== 0;
      // A header alone is the sender's probe for a last ack: no data, not counted.
      if (msg.length > hdrLen) {
        const t = performance.timeOrigin + performance.now();
        if (st.datagrams === 0) st.first = t;
        st.last = t;
        st.datagrams++;
        st.bytes += msg.length - hdrLen;
        if (seq + 1 > st.high) st.high = seq + 1;
        work?.(msg);
        if (ackEvery > 0 && st.datagrams % ackEvery === 0) ackNow = true;
      }
      if (ackNow) {
        const ack = Buffer.allocUnsafe(8);
        ack.writeUInt32BE(st.high, 0);
        ack.writeUInt32BE(st.datagrams >>> 0, 4);
        s.send(ack, rinfo.port, rinfo.address);
      }
    });
  }

  static async open(host: string, wantRcvbuf = 4 << 20, extra: SinkWork = {}): Promise<RawDgramSink> {
    const s = createSocket(isIPv6(host) ? 'udp6' : 'udp4');
    await new Promise<void>((resolve, reject) => {
      s.once('error', reject);
      s.bind(0, host, () => resolve());
    });
    s.removeAllListeners('error');
    s.on('error', () => {}); // an ack to a sender that went away: nothing to do
    try {
      s.setRecvBufferSize(wantRcvbuf);
    } catch {
      /* capped by net.core.rmem_max: take what we got */
    }
    return new RawDgramSink(s, (s.address() as AddressInfo).port, s.getRecvBufferSize(), extra);
  }

  stats(): SinkStats {
    return { ...this.#st };
  }

  reset(): void {
    this.#st = { datagrams: 0, bytes: 0, high: 0, first: 0, last: 0 };
  }

  close(): Promise<void> {
    return new Promise((r) => this.#s.close(() => r()));
  }
}

/** The window (datagrams unacknowledged) and ack spacing for `dgramBytes`-byte datagrams into a receiver with `rcvbuf`. */
export function ackClock(rcvbuf: number, dgramBytes: number): { window: number; ackEvery: number } {
  // Half the buffer: the kernel charges each datagram's true size, and acks are in flight.
  const window = Math.max(2, Math.min(BACKLOG_SHARE, Math.floor(rcvbuf / 2 / (dgramBytes + SKB_OVERHEAD))));
  return { window, ackEvery: Math.max(1, Math.min(16, Math.floor(window / 4))) };
}

export interface RawDgramRun {
  host: string;
  port: number;
  /** The sink's socket buffer (RawDgramSink.rcvbuf): sizes the window. */
  rcvbuf: number;
  /** Message size; a message larger than MAX_DGRAM goes as several datagrams. */
  size: number;
  /** Messages to send, or with durationS: until the deadline. */
  messages: number;
  durationS?: number;
  /** No ack progress for this long with datagrams out: count them lost and go on. */
  stallMs?: number;
  bindHost?: string;
  /** The sink's token (SinkWork.token): carried after every header. */
  token?: Uint8Array;
}

export interface RawDgramResult {
  window: number;
  ackEvery: number;
  messages: number;
  datagrams: number;
  /** Messages whose every datagram is below the sink's high-water mark, in order, with times (ms, performance.now()). */
  acked: number;
  posted: Float64Array;
  completed: Float64Array;
  /** Datagrams given up after a stall (the sink's count tells how many really arrived). */
  stalled: number;
}

export async function sendRawDgram(o: RawDgramRun): Promise<RawDgramResult> {
  const perMsg = Math.max(1, Math.ceil(o.size / MAX_DGRAM));
  const lastLen = o.size - (perMsg - 1) * MAX_DGRAM;
  const hdrLen = DGRAM_HDR + (o.token ? TOKEN_BYTES : 0);
  const { window, ackEvery } = ackClock(o.rcvbuf, Math.min(o.size, MAX_DGRAM) + hdrLen);
  const s = createSocket(o.bindHost !== undefined && isIPv6(o.bindHost) ? 'udp6' : 'udp4');
  // A connected socket reports the ICMP port-unreachable of a vanished receiver as an error
  // event (ECONNREFUSED): for raw UDP that is just loss, which the stall timer accounts for.
  s.on('error', () => {});
  await new Promise<void>((r) => s.bind(0, o.bindHost ?? '0.0.0.0', r));
  try {
    s.setSendBufferSize(4 << 20);
  } catch {
    /* capped: fine, the window keeps the queue short */
  }
  s.connect(o.port, o.host);
  await new Promise<void>((r) => s.once('connect', () => r()));
  const payload = Buffer.alloc(MAX_DGRAM, 0xa5);
  const tail = payload.subarray(0, lastLen);
  const full = payload.subarray(0, Math.min(o.size, MAX_DGRAM));
  // Header buffers are reused round-robin: one is written again only `ring` datagrams later,
  // long after the window closed behind it.
  // The token is written into each once: sending it costs nothing per datagram.
  const header = (): Buffer => {
    const h = Buffer.alloc(hdrLen);
    if (o.token) h.set(o.token, DGRAM_HDR);
    return h;
  };
  const ring = Array.from({ length: 2 * window + 2 }, header);
  const deadline = o.durationS !== undefined ? performance.now() + o.durationS * 1000 : Infinity;
  const target = o.durationS !== undefined ? Infinity : o.messages;
  let cap = Number.isFinite(target) ? target : 1 << 16;
  let posted = new Float64Array(cap);
  let completed = new Float64Array(cap);
  let sent = 0; // datagrams
  let msgs = 0;
  let high = 0;
  let base = 0; // below this nothing is in flight (acked, or given up after a stall)
  let acked = 0;
  let stalled = 0;
  let stopped = false;
  const stallMs = o.stallMs ?? 200;
  try {
    await new Promise<void>((resolve) => {
      let timer: ReturnType<typeof setTimeout> | undefined;
      const finish = () => {
        if (timer) clearTimeout(timer);
        s.off('message', onAck);
        resolve();
      };
      const arm = () => {
        if (timer) clearTimeout(timer);
        timer = setTimeout(onStall, stallMs);
      };
      const pump = () => {
        while (!stopped && sent - base < window) {
          const k = sent % perMsg;
          if (k === 0) {
            if (msgs >= target || performance.now() >= deadline) {
              stopped = true;
              break;
            }
            if (msgs >= cap) {
              cap *= 2;
              const p = new Float64Array(cap);
              p.set(posted);
              posted = p;
              const c = new Float64Array(cap);
              c.set(completed);
              completed = c;
            }
            posted[msgs++] = performance.now();
          }
          const lastOfRun = k === perMsg - 1 && msgs >= target;
          const hdr = ring[sent % ring.length]!;
          hdr.writeUInt32BE(((sent & SEQ_MASK) | ((sent + 1) % ackEvery === 0 || lastOfRun ? ACK_NOW : 0)) >>> 0, 0);
          s.send([hdr, k === perMsg - 1 ? tail : full]);
          sent++;
        }
        if (stopped && sent > 0 && base >= sent) return finish();
        // The window's tail may not end on an ack request: ask for one so the sender never waits on a stall.
        if (stopped && sent - base > 0 && high < sent) armTail();
      };
      let tailAsked = false;
      const armTail = () => {
        if (tailAsked) return;
        tailAsked = true;
        // Re-sending is not raw UDP's business; a short probe datagram asks for the final ack.
        const hdr = header();
        hdr.writeUInt32BE((((sent - 1) & SEQ_MASK) | ACK_NOW) >>> 0, 0);
        s.send(hdr);
      };
      const onAck = (m: Buffer) => {
        if (m.length < 8) return;
        const h = m.readUInt32BE(0);
        if (h <= high) return;
        high = h;
        if (high > base) base = high;
        const now = performance.now();
        while (acked < msgs && (acked + 1) * perMsg <= high) completed[acked++] = now;
        arm();
        pump();
      };
      const onStall = () => {
        if (sent - base > 0) {
          stalled += sent - base;
          base = sent;
          tailAsked = false;
        }
        if (stopped) return finish();
        arm();
        pump();
      };
      s.on('message', onAck);
      arm();
      pump();
      if (sent === 0) finish();
    });
  } finally {
    await new Promise<void>((r) => s.close(() => r()));
  }
  return { window, ackEvery, messages: msgs, datagrams: sent, acked, posted, completed, stalled };
}

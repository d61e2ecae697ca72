// --baseline: the same traffic pattern without sabre, in the same run, so every sabre number
// comes with a ratio. udp → raw node:dgram (bandwidth ack-clocked, see ../baseline/raw-dgram.ts),
// tcp → raw node:net (setNoDelay; TCP's own flow control), inproc → Uint8Array.set between two
// buffers. Latency patterns move what the RDMA operation moves: a write or send ping-pong echoes
// the size; a read sends a small request and gets the size back; an atomic gets 8 bytes back.
import { randomBytes } from 'node:crypto';
import { createSocket, type Socket as UdpSocket } from 'node:dgram';
import { connect as netConnect, createServer, isIPv6, type Server, type Socket } from 'node:net';
import type { AddressInfo } from 'node:net';
import { publish } from '../../metrics/diagnostics.js';
import { keepFreedHeapMapped } from '../../core/heap-reuse.js';
import { MAX_DGRAM, RawDgramSink, sendRawDgram, TOKEN_BYTES, tokenWords } from '../baseline/raw-dgram.js';
import { type ControlPeer, normalHost } from './control.js';
import type { Refusals } from './control-server.js';
import type { PerfOptions } from './options.js';
import { type BwRow, bwRow, cpuPerGB, cpuUs, type LatRow, latRow, Stamps } from './results.js';

const now = () => performance.now();
/** RDMAP payloads of the requests (RFC 5040 §4.4, RFC 7306 §5.2): what a read or an atomic sends. */
const READ_REQUEST_BYTES = 28;
const ATOMIC_REQUEST_BYTES = 52;
const ATOMIC_RESPONSE_BYTES = 8;
/** A raw UDP round trip with a lost datagram never ends: give it up after this long. */
const LAT_LOST_MS = 1000;
/** The udp latency pattern's header: the iteration number, so a late datagram is not taken for the next. */
const TAG = 4;
/** How long a tcp baseline connection may take to send the session's token. */
const TOKEN_MS = 2000;

export type BaselineMode = 'bw' | 'rr';

export interface BaselineOpen {
  transport: 'udp' | 'tcp';
  mode: BaselineMode;
  /** rr: bytes of a request and of its response. */
  reqBytes: number;
  respBytes: number;
}

export interface BaselineCounts {
  bytesIn: number;
  bytesOut: number;
  datagrams: number;
  first: number;
  last: number;
}

/** The shape of one latency iteration for this test: bytes to the responder and back. */
export function latShape(o: Pick<PerfOptions, 'verb'>, size: number): { reqBytes: number; respBytes: number } {
  if (o.verb === 'read') return { reqBytes: READ_REQUEST_BYTES, respBytes: size };
  if (o.verb === 'atomic') return { reqBytes: ATOMIC_REQUEST_BYTES, respBytes: ATOMIC_RESPONSE_BYTES };
  return { reqBytes: size, respBytes: size };
}

/** Where the server's baseline sockets bind, and the one host they serve (the control connection's peer). */
export interface BaselineAt {
  bind: string;
  /** undefined: any (in process only; the control server always knows its peer). */
  peer: string | undefined;
}

/** What baselineOpen answers: the socket's port, the sink's buffer (udp bw), and the session's token (hex). */
export interface BaselineOpened {
  port: number;
  rcvbuf?: number;
  token: string;
}

/** TCP baseline connections held at once (the client opens one per pattern). */
const MAX_BASELINE_CONNS = 4;

/**
 * Server half: a counting sink (bw) or a request/response responder (rr). `p` is checked
 * (requests.ts checkBaselineOpen). It serves only the control peer's host: a datagram or a
 * connection from anywhere else is dropped and counted, never answered, so the rr responder
 * (a 28-byte request, up to 8 MiB back) cannot be aimed at a third party; the udp responder
 * answers only the address:port its first request came from (the socket is connected to it).
 * A source address is what anyone on the path can write, so each open also makes a random
 * TOKEN_BYTES-byte token, handed to the client over the control connection: a udp datagram
 * carries it after its 4-byte sequence / iteration word, a tcp connection sends it first, and
 * what lacks it is dropped unanswered and counted ('baseline-token') — one fixed-offset compare
 * per datagram (two words), once per connection on tcp, so the raw baseline stays raw.
 */
export class BaselineServer {
  private sink: RawDgramSink | undefined;
  private udp: UdpSocket | undefined;
  private tcp: Server | undefined;
  private conns = new Set<Socket>();
  private c: BaselineCounts = { bytesIn: 0, bytesOut: 0, datagrams: 0, first: 0, last: 0 };

  constructor(private readonly refusals?: Refusals) {}

  async open(p: BaselineOpen, at: BaselineAt): Promise<BaselineOpened> {
    // The raw sockets run under the same malloc thresholds as sabre's links (core/heap-reuse.ts).
    await keepFreedHeapMapped();
    await this.close();
    this.c = { bytesIn: 0, bytesOut: 0, datagrams: 0, first: 0, last: 0 };
    const stranger = (host: string | undefined) => at.peer !== undefined && (host === undefined || normalHost(host) !== normalHost(at.peer));
    const refuse = (what: string) => this.refusals?.note('baseline-peer', what);
    const refuseToken = (what: string) => this.refusals?.note('baseline-token', what);
    const token = randomBytes(TOKEN_BYTES);
    const tok = tokenWords(token)!;
    const hex = token.toString('hex');
    if (p.transport === 'udp' && p.mode === 'bw') {
      this.sink = await RawDgramSink.open(at.bind, undefined, {
        ...(at.peer !== undefined ? { allowFrom: at.peer } : {}), token,
        onStranger: (why) => (why === 'host' ? refuse('a datagram to the bw sink from another host') : refuseToken('a datagram to the bw sink without the session token')),
      });
      return { port: this.sink.port, rcvbuf: this.sink.rcvbuf, token: hex };
    }
    if (p.transport === 'udp') {
      const s = createSocket(isIPv6(at.bind) ? 'udp6' : 'udp4');
      s.on('error', () => {}); // a response to a client that went away: raw UDP's loss, not ours
      this.udp = s;
      let iter = -1;
      let got = 0;
      // The first request's source: the socket is connected to it (the kernel drops the rest),
      // and what comes while the connect settles waits for it (bounded).
      let from: { address: string; port: number } | undefined;
      let connected = false;
      const early: Buffer[] = [];
      const hdr = TAG + TOKEN_BYTES;
      const serve = (msg: Buffer) => {
        this.c.datagrams++;
        this.c.bytesIn += msg.length - hdr;
        const it = msg.readUInt32BE(0);
        if (it !== iter) {
          iter = it;
          got = 0;
        }
        got += msg.length - hdr;
        if (got < p.reqBytes) return;
        got = -Infinity; // answered: ignore stragglers of this iteration
        this.c.bytesOut += p.respBytes;
        for (const d of dgrams(it, p.respBytes)) s.send(d);
      };
      s.on('message', (msg, rinfo) => {
        try {
          if (stranger(rinfo.address) || (from && (rinfo.address !== from.address || rinfo.port !== from.port))) {
            refuse('a datagram to the rr responder from another address');
            return;
          }
          // Before the first request's source is taken: a datagram without the token takes nothing.
          if (msg.length < hdr || msg.readUInt32BE(TAG) !== tok[0] || msg.readUInt32BE(TAG + 4) !== tok[1]) {
            refuseToken('a datagram to the rr responder without the session token');
            return;
          }
          if (connected) return serve(msg);
          if (early.length < 64) early.push(msg);
          if (from) return;
          from = { address: rinfo.address, port: rinfo.port };
          s.connect(rinfo.port, rinfo.address, () => {
            connected = true;
            try {
              for (const m of early.splice(0)) serve(m);
            } catch {
              /* the socket closed under us: the pattern's loss */
            }
          });
        } catch {
          /* a send on a socket closing under us: the pattern's loss */
        }
      });
      await new Promise<void>((r) => s.bind(0, at.bind, r));
      return { port: (s.address() as AddressInfo).port, token: hex };
    }
    const response = p.mode === 'rr' ? Buffer.alloc(p.respBytes, 0x5a) : undefined;
    const server = createServer((sock) => {
      if (stranger(sock.remoteAddress) || this.conns.size >= MAX_BASELINE_CONNS) {
        refuse(stranger(sock.remoteAddress) ? 'a baseline connection from another host' : 'baseline connections past the cap');
        sock.destroy();
        return;
      }
      this.conns.add(sock);
      sock.setNoDelay(true);
      let pending = 0;
      // The stream's first TOKEN_BYTES bytes must be the session's token, within TOKEN_MS.
      let head: Buffer | undefined = Buffer.alloc(0);
      const noToken = (why: string) => {
        refuseToken(why);
        sock.destroy();
      };
      const tokenTimer = setTimeout(() => noToken(`a baseline connection without the session token within ${TOKEN_MS} ms`), TOKEN_MS);
      sock.on('close', () => clearTimeout(tokenTimer));
      // rr: answer every whole request, one response at a time while the peer reads them.
      const answer = () => {
        while (pending >= p.reqBytes && !sock.destroyed && sock.writableLength <= sock.writableHighWaterMark) {
          pending -= p.reqBytes;
          this.c.bytesOut += p.respBytes;
          sock.write(response!);
        }
        if (pending >= p.reqBytes && !sock.destroyed) sock.pause();
        else sock.resume();
      };
      sock.on('drain', () => {
        if (response) answer();
      });
      sock.on('data', (data: Buffer) => {
        let chunk = data;
        if (head !== undefined) {
          head = Buffer.concat([head, chunk]);
          if (head.length < TOKEN_BYTES) return;
          if (!head.subarray(0, TOKEN_BYTES).equals(token)) return noToken('a baseline connection that did not send the session token');
          clearTimeout(tokenTimer);
          chunk = head.subarray(TOKEN_BYTES);
          head = undefined;
          if (chunk.length === 0) return;
        }
        this.c.bytesIn += chunk.length;
        if (p.mode === 'bw') {
          // Cumulative bytes back on every read, so the sender can time each message's arrival
          // (one 8-byte write per read: the pattern is otherwise TCP's own flow control).
          const ack = Buffer.allocUnsafe(8);
          ack.writeDoubleBE(this.c.bytesIn, 0);
          sock.write(ack);
          return;
        }
        pending += chunk.length;
        answer();
      });
      sock.on('error', () => sock.destroy());
      sock.on('close', () => this.conns.delete(sock));
    });
    this.tcp = server;
    await new Promise<void>((r) => server.listen(0, at.bind, r));
    return { port: (server.address() as AddressInfo).port, token: hex };
  }

  result(): BaselineCounts {
    if (this.sink) {
      const st = this.sink.stats();
      return { bytesIn: st.bytes, bytesOut: 0, datagrams: st.datagrams, first: st.first, last: st.last };
    }
    return { ...this.c };
  }

  async close(): Promise<void> {
    await this.sink?.close();
    if (this.udp) await new Promise<void>((r) => this.udp!.close(() => r()));
    for (const c of this.conns) c.destroy();
    if (this.tcp) await new Promise<void>((r) => this.tcp!.close(() => r()));
    this.sink = undefined;
    this.udp = undefined;
    this.tcp = undefined;
  }
}

/** `bytes` as tagged datagrams of at most MAX_DGRAM payload (at least one, even for 0 bytes); requests carry the session's token after the tag. */
function dgrams(iter: number, bytes: number, token?: Buffer): Buffer[] {
  const out: Buffer[] = [];
  const t = token?.length ?? 0;
  for (let off = 0; off === 0 || off < bytes; off += MAX_DGRAM) {
    const n = Math.min(MAX_DGRAM, bytes - off);
    const d = Buffer.alloc(TAG + t + n, 0xa5);
    d.writeUInt32BE(iter >>> 0, 0);
    token?.copy(d, TAG);
    out.push(d);
  }
  return out;
}

export interface BaselineRun {
  size: number;
  iters: number;
  durationS: number | undefined;
  warmUp: boolean;
}

export const baselineName = (t: 'udp' | 'tcp' | 'inproc') => (t === 'udp' ? 'node:dgram' : t === 'tcp' ? 'node:net' : 'Uint8Array.set');

/**
 * Client half: the same pattern over a real socket to the server process (inproc: in this
 * process). `bindHost`: where the control connection left from; the server answers only it.
 */
export async function runBaseline(o: PerfOptions, ctl: ControlPeer | undefined, host: string, run: BaselineRun, bindHost?: string): Promise<BwRow | LatRow> {
  const source = baselineName(o.transport);
  await keepFreedHeapMapped();
  if (o.transport === 'inproc') return inprocBaseline(o, source, run);
  const peer = ctl!;
  const lat = o.kind === 'lat';
  const shape = lat ? latShape(o, run.size) : { reqBytes: 0, respBytes: 0 };
  const open = async (): Promise<{ port: number; rcvbuf: number | undefined; token: Buffer }> => {
    const a = await peer.call<Partial<BaselineOpened>>('baselineOpen', { transport: o.transport as 'udp' | 'tcp', mode: lat ? 'rr' : 'bw', ...shape } satisfies BaselineOpen);
    const okPort = typeof a?.port === 'number' && Number.isInteger(a.port) && a.port >= 1 && a.port <= 65535;
    if (!okPort || typeof a.token !== 'string' || !/^[0-9a-f]+$/.test(a.token) || a.token.length !== 2 * TOKEN_BYTES) throw new Error('baselineOpen: the server\'s answer is malformed (port, token)');
    if (a.rcvbuf !== undefined && !(Number.isInteger(a.rcvbuf) && a.rcvbuf > 0)) throw new Error('baselineOpen: the server\'s rcvbuf is malformed');
    return { port: a.port!, rcvbuf: a.rcvbuf, token: Buffer.from(a.token, 'hex') };
  };
  try {
    let warm: { warmUpIterations: number; warmUpMs: number } | undefined;
    if (run.warmUp) {
      const { port, rcvbuf, token } = await open();
      // As long as sabre's warm-up (client.ts WARM_LAT_ITERS), so both rows are timed warm.
      const t0 = performance.now();
      const w = await pattern(o, { host, bind: bindHost, port, rcvbuf, token }, { ...run, iters: lat ? 5000 : Math.min(run.iters, o.txDepth), durationS: undefined }, shape);
      warm = { warmUpIterations: w.iterations, warmUpMs: Math.round((performance.now() - t0) * 1000) / 1000 };
    }
    const { port, rcvbuf, token } = await open();
    const c0 = process.cpuUsage();
    const p0 = await peer.call<NodeJS.CpuUsage>('cpu');
    const r = await pattern(o, { host, bind: bindHost, port, rcvbuf, token }, run, shape);
    const cpu = cpuUs(process.cpuUsage(c0)) + cpuUs(diff(await peer.call<NodeJS.CpuUsage>('cpu'), p0));
    const counts = await peer.call<BaselineCounts>('baselineResult');
    if (r.kind === 'lat') return { ...r, source, bytesToResponder: counts.bytesIn, bytesFromResponder: counts.bytesOut, ...warm };
    const moved = o.transport === 'udp' ? counts.bytesIn : r.bytes * r.iterations;
    return { ...r, source, cpuSecPerGB: cpuPerGB(cpu, moved), bytesToResponder: counts.bytesIn, bytesFromResponder: 0, ...warm };
  } finally {
    await peer.call('baselineClose');
  }
}

function diff(a: NodeJS.CpuUsage, b: NodeJS.CpuUsage): NodeJS.CpuUsage {
  return { user: a.user - b.user, system: a.system - b.system };
}

/** Where a pattern goes: the server's baseline socket, our source, and the session's token. */
interface Target {
  host: string;
  bind: string | undefined;
  port: number;
  rcvbuf: number | undefined;
  token: Buffer;
}

async function pattern(o: PerfOptions, t: Target, run: BaselineRun, shape: { reqBytes: number; respBytes: number }): Promise<BwRow | LatRow> {
  if (o.kind === 'lat') return o.transport === 'udp' ? udpLat(o, t, run, shape) : tcpLat(o, t, run, shape);
  return o.transport === 'udp' ? udpBw(o, t, run) : tcpBw(o, t, run);
}

async function udpBw(o: PerfOptions, { host, bind, port, rcvbuf, token }: Target, run: BaselineRun): Promise<BwRow> {
  if (rcvbuf === undefined) throw new Error('baselineOpen: the server did not say its udp sink\'s rcvbuf');
  const r = await sendRawDgram({ host, port, rcvbuf, token, ...(bind !== undefined ? { bindHost: bind } : {}), size: run.size, messages: run.iters, ...(run.durationS !== undefined ? { durationS: run.durationS } : {}) });
  const lostIterations = r.messages - r.acked;
  const row = bwRow('node:dgram', { size: run.size, posted: r.posted, completed: r.completed, n: r.acked, noPeak: o.noPeak });
  publish('sabre:perf:baseline', () => ({ transport: 'udp', mode: 'bw', size: run.size, sent: r.datagrams, acked: r.acked, lost: lostIterations, window: r.window, ackEvery: r.ackEvery }));
  return { ...row, lostIterations, lossPct: r.messages > 0 ? (100 * lostIterations) / r.messages : 0 };
}

async function tcpBw(o: PerfOptions, t: Target, run: BaselineRun): Promise<BwRow> {
  const sock = await tcpConnect(t);
  try {
    const payload = Buffer.alloc(run.size, 0xa5);
    const target = run.durationS !== undefined ? Infinity : run.iters;
    const deadline = run.durationS !== undefined ? now() + run.durationS * 1000 : Infinity;
    const st = new Stamps(Number.isFinite(target) ? target : 1 << 16);
    let sent = 0;
    let done = 0;
    let acked = 0;
    let pending: Buffer = Buffer.alloc(0);
    let wake: (() => void) | undefined;
    sock.on('data', (b: Buffer) => {
      pending = pending.length ? Buffer.concat([pending, b]) : b;
      while (pending.length >= 8) {
        acked = pending.readDoubleBE(0);
        pending = pending.subarray(8);
      }
      const t = now();
      while (done < sent && (done + 1) * run.size <= acked) st.completed[done++] = t;
      wake?.();
    });
    while (sent < target && now() < deadline) {
      st.ensure(sent);
      st.posted[sent++] = now();
      if (!sock.write(payload)) await new Promise<void>((r) => sock.once('drain', () => r()));
    }
    while (done < sent) await new Promise<void>((r) => (wake = r));
    return bwRow('node:net', { size: run.size, posted: st.posted, completed: st.completed, n: done, noPeak: o.noPeak });
  } finally {
    sock.destroy();
  }
}

/** A connection to the server's baseline socket that has sent the session's token (before any timed byte). */
async function tcpConnect({ host, bind, port, token }: Target): Promise<Socket> {
  const sock = netConnect({ host, port, ...(bind !== undefined ? { localAddress: bind } : {}) });
  await new Promise<void>((r, j) => {
    sock.once('connect', () => r());
    sock.once('error', j);
  });
  sock.setNoDelay(true);
  sock.write(token);
  return sock;
}

const halves = (o: PerfOptions) => o.verb === 'write' || o.verb === 'send';

async function tcpLat(o: PerfOptions, t: Target, run: BaselineRun, shape: { reqBytes: number; respBytes: number }): Promise<LatRow> {
  const sock = await tcpConnect(t);
  const req = Buffer.alloc(shape.reqBytes, 0xa5);
  const samples: number[] = [];
  let got = 0;
  let wake: (() => void) | undefined;
  sock.on('data', (c: Buffer) => {
    got += c.length;
    if (got >= shape.respBytes) wake?.();
  });
  try {
    const deadline = run.durationS !== undefined ? now() + run.durationS * 1000 : Infinity;
    for (let i = 0; i < run.iters && now() < deadline; i++) {
      const t0 = now();
      const back = new Promise<void>((r) => (wake = r));
      sock.write(req);
      await back;
      got -= shape.respBytes;
      const rtt = now() - t0;
      samples.push((halves(o) ? rtt / 2 : rtt) * 1000);
    }
  } finally {
    sock.destroy();
  }
  return latRow('node:net', run.size, samples);
}

async function udpLat(o: PerfOptions, { host, bind, port, token }: Target, run: BaselineRun, shape: { reqBytes: number; respBytes: number }): Promise<LatRow> {
  const s = createSocket(bind !== undefined && isIPv6(bind) ? 'udp6' : 'udp4');
  s.on('error', () => {}); // ICMP unreachable on the connected socket: counted as lost round trips
  await new Promise<void>((r) => s.bind(0, bind ?? '0.0.0.0', r));
  s.connect(port, host);
  await new Promise<void>((r) => s.once('connect', () => r()));
  const samples: number[] = [];
  let iter = 0;
  let got = 0;
  let wake: (() => void) | undefined;
  s.on('message', (m: Buffer) => {
    if (m.length < TAG || m.readUInt32BE(0) !== iter >>> 0) return;
    got += m.length - TAG;
    if (got >= shape.respBytes) wake?.();
  });
  let lost = 0;
  try {
    const deadline = run.durationS !== undefined ? now() + run.durationS * 1000 : Infinity;
    for (let i = 0; i < run.iters && now() < deadline; i++) {
      iter = i + 1;
      got = 0;
      const t0 = now();
      let timer: ReturnType<typeof setTimeout> | undefined;
      const back = new Promise<boolean>((r) => {
        wake = () => r(true);
        timer = setTimeout(() => r(false), LAT_LOST_MS);
      });
      for (const d of dgrams(iter, shape.reqBytes, token)) s.send(d);
      const ok = await back;
      clearTimeout(timer);
      if (!ok) {
        lost++; // raw UDP loses and does not recover; perftest on it would hang
        continue;
      }
      const rtt = now() - t0;
      samples.push((halves(o) ? rtt / 2 : rtt) * 1000);
    }
  } finally {
    s.close();
  }
  const n = samples.length + lost;
  return latRow('node:dgram', run.size, samples, { lostIterations: lost, lossPct: n > 0 ? (100 * lost) / n : 0 });
}

function inprocBaseline(o: PerfOptions, source: string, run: BaselineRun): BwRow | LatRow {
  const src = new Uint8Array(run.size).fill(0xa5);
  const dst = new Uint8Array(run.size);
  const target = run.durationS !== undefined ? Infinity : run.iters;
  if (run.warmUp) for (let i = 0; i < 100; i++) dst.set(src);
  const c0 = process.cpuUsage();
  const start = now();
  const deadline = run.durationS !== undefined ? start + run.durationS * 1000 : Infinity;
  if (o.kind === 'lat') {
    const samples: number[] = [];
    for (let i = 0; i < target && now() < deadline; i++) {
      const t0 = now();
      dst.set(src);
      samples.push((now() - t0) * 1000);
    }
    return latRow(source, run.size, samples);
  }
  const st = new Stamps(Number.isFinite(target) ? target : 1 << 16);
  let n = 0;
  for (; n < target && now() < deadline; n++) {
    st.ensure(n);
    st.posted[n] = now();
    dst.set(src);
    st.completed[n] = now();
  }
  const row = bwRow(source, { size: run.size, posted: st.posted, completed: st.completed, n, noPeak: o.noPeak });
  return { ...row, cpuSecPerGB: cpuPerGB(cpuUs(process.cpuUsage(c0)), n * run.size) };
}

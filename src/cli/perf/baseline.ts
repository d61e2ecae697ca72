// --baseline: the same traffic pattern without sabre, in the same run, so every sabre number
// comes with a ratio. udp → raw node:dgram, tcp → raw node:net (setNoDelay), inproc →
// Uint8Array.set between the same two registered buffers.
import { createSocket, type Socket as UdpSocket } from 'node:dgram';
import { connect as netConnect, createServer, type Server, type Socket } from 'node:net';
import type { AddressInfo } from 'node:net';
import { latencyStats } from '../stats.js';
import type { BwResult, LatResult } from './client.js';
import type { ControlPeer } from './control.js';
import type { PerfOptions } from './options.js';

const MB = 1_000_000;
const now = () => performance.now();
/** Largest datagram node:dgram carries on loopback without IP fragmentation trouble. */
const MAX_DGRAM = 65000;

/** Server half: a raw sink (bw) or echo (lat) socket; `result` reports what the sink saw. */
export class BaselineServer {
  private udp: UdpSocket | undefined;
  private tcp: Server | undefined;
  private bytes = 0;
  private first = 0;
  private last = 0;

  async open(p: { transport: 'udp' | 'tcp'; mode: 'bw' | 'lat'; total: number; host: string }): Promise<{ port: number }> {
    await this.close();
    this.bytes = 0;
    this.first = 0;
    this.last = 0;
    if (p.transport === 'udp') {
      const s = createSocket('udp4');
      this.udp = s;
      s.on('message', (msg, rinfo) => {
        if (p.mode === 'lat') {
          s.send(msg, rinfo.port, rinfo.address);
          return;
        }
        const t = now();
        if (this.bytes === 0) this.first = t;
        this.bytes += msg.length;
        this.last = t;
      });
      await new Promise<void>((r) => s.bind(0, p.host, r));
      return { port: (s.address() as AddressInfo).port };
    }
    const server = createServer((sock) => {
      sock.setNoDelay(true);
      sock.on('data', (chunk) => {
        if (p.mode === 'lat') {
          sock.write(chunk);
          return;
        }
        const t = now();
        if (this.bytes === 0) this.first = t;
        this.bytes += chunk.length;
        this.last = t;
        if (this.bytes >= p.total) sock.write(Buffer.of(1));
      });
      sock.on('error', () => sock.destroy());
    });
    this.tcp = server;
    await new Promise<void>((r) => server.listen(0, p.host, r));
    return { port: (server.address() as AddressInfo).port };
  }

  result(): { bytes: number; seconds: number } {
    return { bytes: this.bytes, seconds: (this.last - this.first) / 1000 };
  }

  async close(): Promise<void> {
    if (this.udp) await new Promise<void>((r) => this.udp!.close(() => r()));
    if (this.tcp) await new Promise<void>((r) => this.tcp!.close(() => r()));
    this.udp = undefined;
    this.tcp = undefined;
  }
}

function bw(size: number, iterations: number, bytes: number, seconds: number): BwResult {
  return {
    bytes: size,
    iterations,
    seconds,
    bwPeakMBs: 0,
    bwAvgMBs: seconds > 0 ? bytes / seconds / MB : 0,
    msgRateMpps: seconds > 0 ? iterations / seconds / 1e6 : 0,
  };
}

/** Client half over a real socket to the server process (or to ourselves for inproc). */
export async function runBaseline(
  o: PerfOptions,
  ctl: ControlPeer,
  host: string,
  size: number,
  copy?: { src: Uint8Array; dst: Uint8Array },
): Promise<BwResult | LatResult> {
  const lat = o.test.endsWith('_lat');
  const iterations = o.durationS !== undefined ? Math.max(100, Math.min(o.iters, 1000)) : o.iters;
  const halfRtt = o.test === 'write_lat' || o.test === 'send_lat';
  if (o.transport === 'inproc') {
    const { src, dst } = copy!;
    if (lat) {
      const samples: number[] = [];
      for (let i = 0; i < iterations; i++) {
        const t0 = now();
        dst.set(src.subarray(0, size));
        samples.push((now() - t0) * 1000);
      }
      return { bytes: size, iterations, ...latencyStats(samples) };
    }
    const t0 = now();
    for (let i = 0; i < iterations; i++) dst.set(src.subarray(0, size));
    return bw(size, iterations, size * iterations, (now() - t0) / 1000);
  }
  const total = size * iterations;
  const { port } = await ctl.call<{ port: number }>('baselineOpen', { transport: o.transport, mode: lat ? 'lat' : 'bw', total });
  const payload = Buffer.alloc(size, 0xa5);
  try {
    if (o.transport === 'udp') return await udpRun(host, port, payload, iterations, lat, halfRtt, ctl, o.txDepth);
    return await tcpRun(host, port, payload, iterations, lat, halfRtt);
  } finally {
    await ctl.call('baselineClose');
  }
}

async function udpRun(
  host: string,
  port: number,
  payload: Buffer,
  iterations: number,
  lat: boolean,
  halfRtt: boolean,
  ctl: ControlPeer,
  window: number,
): Promise<BwResult | LatResult> {
  const s = createSocket('udp4');
  await new Promise<void>((r) => s.bind(0, '127.0.0.1', r));
  s.connect(port, host);
  await new Promise<void>((r) => s.once('connect', () => r()));
  const size = payload.length;
  try {
    if (lat) {
      const samples: number[] = [];
      const dgram = payload.subarray(0, Math.min(size, MAX_DGRAM));
      for (let i = 0; i < iterations; i++) {
        const t0 = now();
        const got = new Promise<void>((r) => s.once('message', () => r()));
        s.send(dgram);
        const timeout = new Promise<'lost'>((r) => setTimeout(() => r('lost'), 1000).unref());
        if ((await Promise.race([got, timeout])) === 'lost') continue; // raw UDP loses; perftest would hang
        const rtt = now() - t0;
        samples.push((halfRtt ? rtt / 2 : rtt) * 1000);
      }
      return { bytes: size, iterations: samples.length, ...latencyStats(samples) };
    }
    // Blast with a bounded number of sends in flight in node (the kernel may still drop: raw
    // UDP has no flow control), then read what the sink actually received.
    const chunks: Buffer[] = [];
    for (let off = 0; off < size; off += MAX_DGRAM) chunks.push(payload.subarray(off, Math.min(size, off + MAX_DGRAM)));
    let inFlight = 0;
    let wake: (() => void) | undefined;
    const sent = () => {
      inFlight--;
      wake?.();
    };
    for (let i = 0; i < iterations; i++) {
      for (const c of chunks) {
        while (inFlight >= window) await new Promise<void>((r) => (wake = r));
        inFlight++;
        s.send(c, sent);
      }
    }
    while (inFlight > 0) await new Promise<void>((r) => (wake = r));
    await new Promise((r) => setTimeout(r, 50));
    const { bytes, seconds } = await ctl.call<{ bytes: number; seconds: number }>('baselineResult');
    return bw(size, Math.floor(bytes / size), bytes, seconds);
  } finally {
    s.close();
  }
}

async function tcpRun(
  host: string,
  port: number,
  payload: Buffer,
  iterations: number,
  lat: boolean,
  halfRtt: boolean,
): Promise<BwResult | LatResult> {
  const sock: Socket = netConnect({ host, port });
  await new Promise<void>((r, j) => {
    sock.once('connect', () => r());
    sock.once('error', j);
  });
  sock.setNoDelay(true);
  const size = payload.length;
  try {
    if (lat) {
      const samples: number[] = [];
      for (let i = 0; i < iterations; i++) {
        const t0 = now();
        await new Promise<void>((r) => {
          let got = 0;
          const on = (c: Buffer) => {
            got += c.length;
            if (got >= size) {
              sock.off('data', on);
              r();
            }
          };
          sock.on('data', on);
          sock.write(payload);
        });
        const rtt = now() - t0;
        samples.push((halfRtt ? rtt / 2 : rtt) * 1000);
      }
      return { bytes: size, iterations, ...latencyStats(samples) };
    }
    const t0 = now();
    const done = new Promise<void>((r) => sock.once('data', () => r()));
    for (let i = 0; i < iterations; i++) {
      if (!sock.write(payload)) await new Promise<void>((r) => sock.once('drain', () => r()));
    }
    await done;
    return bw(size, iterations, size * iterations, (now() - t0) / 1000);
  } finally {
    sock.destroy();
  }
}

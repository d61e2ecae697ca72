// A TCP proxy on 127.0.0.1 that understands MPA streams (request/reply frame, then FPDUs; no
// markers: sabre devices ask for none): the path of the tcp campaign's real and victim
// connections. Every connection's streams are re-cut at random byte boundaries (TCP promises no
// segment boundaries, so a device must deframe across any split); the client→server FPDUs are
// shown to `tap` (an on-path observer learns STags here) and, on connections whose mode is
// 'mutate', replaced by what `mutate` returns (dropped, duplicated, reordered, rewritten with a
// fixed CRC, or preceded by injected FPDUs). Bounded: close() ends everything.
import net from 'node:net';
import { mulberry32 } from './rng.js';

export interface TcpProxy {
  readonly address: { transport: 'tcp'; host: string; port: number };
  readonly connections: number;
  close(): Promise<void>;
}

export interface TcpProxyOptions {
  target: { host: string; port: number };
  seed: number;
  /** Mode of the n-th accepted connection. */
  modeFor: (n: number) => 'clean' | 'mutate';
  tap?: (fpdu: Uint8Array) => void;
  /** 'mutate' connections: what goes on instead of `fpdu` (client → server). */
  mutate?: (fpdu: Uint8Array) => Uint8Array[];
}

/** Splits a stream into its MPA frame and FPDUs (ULPDU length + pad + CRC; no markers). */
class MpaSplitter {
  #buf: Buffer = Buffer.alloc(0);
  #mpaDone = false;
  push(d: Buffer, onMpa: (b: Buffer) => void, onFpdu: (b: Buffer) => void): void {
    this.#buf = this.#buf.length ? Buffer.concat([this.#buf, d]) : d;
    for (;;) {
      const b = this.#buf;
      if (!this.#mpaDone) {
        if (b.length < 20) return;
        const n = 20 + b.readUInt16BE(18);
        if (b.length < n) return;
        onMpa(b.subarray(0, n));
        this.#mpaDone = true;
        this.#buf = b.subarray(n);
        continue;
      }
      if (b.length < 2) return;
      const len = b.readUInt16BE(0);
      const total = 2 + len + ((4 - ((2 + len) & 3)) & 3) + 4;
      if (b.length < total) return;
      onFpdu(Buffer.from(b.subarray(0, total)));
      this.#buf = b.subarray(total);
    }
  }
}

export async function startTcpProxy(o: TcpProxyOptions): Promise<TcpProxy> {
  const r = mulberry32(o.seed);
  const socks = new Set<net.Socket>();
  let n = 0;
  /** Writes `parts` re-cut at random boundaries, a turn apart, in order behind what was queued. */
  const writer = (dst: net.Socket) => {
    let chain = Promise.resolve();
    return (parts: Uint8Array[]): void => {
      chain = chain.then(async () => {
        for (const p of parts) {
          let at = 0;
          while (at < p.length) {
            const cut = Math.min(p.length - at, r() < 0.3 ? 1 + Math.floor(r() * 7) : 1 + Math.floor(r() * 9000));
            if (dst.destroyed) return;
            dst.write(p.subarray(at, at + cut));
            at += cut;
            if (r() < 0.2) await new Promise((res) => setImmediate(res));
          }
        }
      });
    };
  };
  const server = net.createServer((client) => {
    const mode = o.modeFor(n++);
    const up = net.connect(o.target.port, o.target.host);
    socks.add(client);
    socks.add(up);
    const end = (): void => {
      client.destroy();
      up.destroy();
      socks.delete(client);
      socks.delete(up);
    };
    client.on('error', end);
    up.on('error', end);
    client.on('close', end);
    up.on('close', end);
    const toServer = writer(up);
    const toClient = writer(client);
    const split = new MpaSplitter();
    client.on('data', (d: Buffer) => {
      split.push(d, (m) => toServer([Buffer.from(m)]), (f) => {
        o.tap?.(f);
        toServer(mode === 'mutate' && o.mutate ? o.mutate(f) : [f]);
      });
    });
    up.on('data', (d: Buffer) => toClient([d]));
  });
  await new Promise<void>((res) => server.listen(0, '127.0.0.1', () => res()));
  const port = (server.address() as net.AddressInfo).port;
  return {
    address: Object.freeze({ transport: 'tcp' as const, host: '127.0.0.1', port }),
    get connections() {
      return n;
    },
    async close() {
      for (const s of socks) s.destroy();
      socks.clear();
      await new Promise<void>((res) => server.close(() => res()));
    },
  };
}

// A hand-driven UDP peer on a raw node:dgram socket (127.0.0.1): it builds every datagram
// itself (independent CRC32C), so tests can play any part against a live device — an
// off-path attacker forging headers, or a host that completes the cookie handshake and then
// sends whatever it likes with the context ids it was given.
import dgram from 'node:dgram';
import { crc32c as nodeCrc32c } from '@node-rs/crc32';
import { UdpIntegrity } from '../../../src/wire/spec.js';
import { UdpType, decodeUdpHdr, encodeUdpHdr, udpHeaderLength, type UdpHdr } from '../../../src/wire/udp.js';

/** A datagram with a valid trailer; unset fields are zero (srcCtx 0x77, DATA). */
export function seal(h: Partial<UdpHdr>, payload?: Uint8Array): Uint8Array {
  const hdr: UdpHdr = {
    type: UdpType.Data, ackReq: false, retx: false, window: 16, srcCtx: 0x77, dstCtx: 0, psn: 0, ackPsn: 0,
    tsVal: 1, tsEcr: 0, dstQpn: 0, srcQpn: 0, sack: [], ...h,
  };
  const hl = udpHeaderLength(hdr);
  const p = payload ?? (hdr.type === UdpType.Data ? new Uint8Array(8) : new Uint8Array(0));
  const buf = Buffer.alloc(hl + p.length + 4);
  encodeUdpHdr(hdr, buf, 0);
  buf.set(p, hl);
  buf.writeUInt32LE(nodeCrc32c(buf.subarray(0, hl + p.length)), hl + p.length);
  return buf;
}

export const ZERO_COOKIE = { time: 0, mac: new Uint8Array(8) };

export interface Heard {
  hdr: UdpHdr;
  bytes: Uint8Array;
  from: { host: string; port: number };
}

export class RawPeer {
  readonly heard: Heard[] = [];
  /** Our context id (what the device learns as its peer's). */
  ctx: number;
  /** The device's context id for us, once the handshake told us. */
  peerCtx = 0;
  private wake: () => void = () => {};

  private constructor(readonly sock: dgram.Socket, ctx: number) {
    this.ctx = ctx;
    sock.on('message', (msg, rinfo) => {
      const r = decodeUdpHdr(msg, 0, msg.length - 4);
      if (r.ok && this.heard.length < 100_000) this.heard.push({ hdr: r.value, bytes: new Uint8Array(msg), from: { host: rinfo.address, port: rinfo.port } });
      this.wake();
    });
    sock.on('error', () => {});
  }

  /** `host`: the loopback address to bind (another one is another source host to the device's per-host caps). */
  static async open(ctx = 0x5eed0001, host = '127.0.0.1'): Promise<RawPeer> {
    const s = dgram.createSocket('udp4');
    await new Promise<void>((res) => s.bind(0, host, () => res()));
    return new RawPeer(s, ctx);
  }

  get address(): { host: string; port: number } {
    const a = this.sock.address();
    return { host: a.address, port: a.port };
  }

  send(to: { host: string; port: number }, bytes: Uint8Array): void {
    this.sock.send(bytes, to.port, to.host);
  }

  /** Resolves with the first datagram heard (from now on, or already heard if `since`) matching `pred`. */
  waitFor(pred: (h: Heard) => boolean, ms = 10_000, since = this.heard.length): Promise<Heard> {
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        this.wake = () => {};
        reject(new Error(`raw peer: nothing matching heard in ${ms} ms (${this.heard.length} heard)`));
      }, ms);
      const check = () => {
        for (let i = since; i < this.heard.length; i++) {
          if (pred(this.heard[i]!)) {
            clearTimeout(timer);
            this.wake = () => {};
            resolve(this.heard[i]!);
            return true;
          }
        }
        return false;
      };
      if (!check()) this.wake = () => void check();
    });
  }

  /**
   * The cookie handshake with the device at `to`, as sabre does it: a probe (DATA, zero cookie
   * block), the COOKIE back, the echo with our token; resolves once the device answers from
   * the context it created for us. `payload`: what the probe and the echo carry (delivered once).
   * Both carry a crc32c wish, the only trailer this peer seals: the device must ask crc32c or
   * none to settle on it (an xxh3 device settles xxh3; docs/integrity.md).
   */
  async handshake(to: { host: string; port: number }, payload: Uint8Array, qpns: { dstQpn: number; srcQpn: number } = { dstQpn: 0, srcQpn: 0 }): Promise<void> {
    const since = this.heard.length;
    // Each step is sent again every 250 ms until answered (datagrams can be lost), for 10 s at most.
    const step = async (bytes: Uint8Array, pred: (h: Heard) => boolean): Promise<Heard> => {
      for (let i = 0; ; i++) {
        this.send(to, bytes);
        try {
          return await this.waitFor(pred, 250, since);
        } catch (e) {
          if (i >= 40) throw e;
        }
      }
    };
    const c = await step(seal({ srcCtx: this.ctx, cookie: ZERO_COOKIE, integ: UdpIntegrity.Crc32c, ...qpns }, payload), (h) => h.hdr.type === UdpType.Cookie && h.hdr.dstCtx === this.ctx);
    const echo = seal({ srcCtx: this.ctx, cookie: c.hdr.cookie, token: Uint8Array.of(1, 2, 3, 4, 5, 6, 7, 8), ackReq: true, integ: UdpIntegrity.Crc32c, ...qpns }, payload);
    const a = await step(echo, (h) => h.hdr.type !== UdpType.Cookie && h.hdr.dstCtx === this.ctx && h.hdr.token !== undefined);
    this.peerCtx = a.hdr.srcCtx;
  }

  close(): void {
    this.sock.close();
  }
}

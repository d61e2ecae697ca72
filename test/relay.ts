// A lossy UDP relay on 127.0.0.1 for tests that need real sockets and a bad network between two
// udp devices: a client device talks to the relay's address as if it were the server's, and the
// relay forwards each datagram to the server from an upstream socket of that client's own (a
// NAT-like mapping), and the server's answers back — dropping, duplicating, corrupting and
// reordering datagrams on the way, from a seeded generator. The verbs contract says a peer is
// reached at exactly the address given to connect / createAh, a relay's included (DESIGN §4).
//
// Bounded: at most `maxClients` upstream sockets, at most `maxHeld` datagrams held back for
// reordering (each released after `reorderMs` at the latest), and close() frees everything.
import dgram from 'node:dgram';
import type { ProtectionDomain, QpInit, QueuePair } from '../src/index.js';
import { rng } from './sim/random.js';

/**
 * A raw rc QP the relay's one port reaches on a device of several NIC threads: one on thread 0,
 * its number ≡ 0 mod `workers` (a peer given an address without `ports` reaches `port`, thread
 * 0's; docs/nic.md, "Limits"). The QPs made on the way are destroyed. One thread: the first QP.
 */
export function relayQp(pd: ProtectionDomain, init: QpInit): QueuePair {
  const n = Math.max(1, pd.device.workers);
  const spare: QueuePair[] = [];
  let qp = pd.createQp(init);
  // Bounded: QPs take the threads in turn (src/verbs/qpn.ts), so at most n - 1 are passed over.
  while (qp.qpn % n !== 0) {
    spare.push(qp);
    qp = pd.createQp(init);
  }
  for (const q of spare) q.destroy();
  return qp;
}

export interface RelayImpairment {
  /** Probability that a datagram is dropped. */
  drop?: number;
  /** Probability that a datagram is sent twice. */
  dup?: number;
  /** Probability that one byte past the first 40 (past sabre's reliability header) is flipped. */
  corrupt?: number;
  /** Probability that a datagram is held back and sent after later ones. */
  reorder?: number;
  /** Longest a held datagram waits (ms). Default 5. */
  reorderMs?: number;
  /** Which directions are impaired. Default 'both'. */
  direction?: 'both' | 'toServer' | 'toClient';
}

export interface RelayStats {
  forwarded: number;
  /** Bytes of the datagrams the relay's sockets received from the client / from the server (UDP payloads, as the devices sent them). */
  bytesFromClient: number;
  bytesFromServer: number;
  dropped: number;
  duplicated: number;
  corrupted: number;
  reordered: number;
}

export interface UdpRelay {
  /** A udp DeviceAddress: pass it to connect / createAh / connectChannel in place of the server's. */
  readonly address: { transport: 'udp'; host: string; port: number };
  readonly stats: RelayStats;
  /**
   * The address the server sees for `client` (its upstream socket, made now if it does not exist
   * yet): what a server that is given its peer's address out of band (raw verbs qp.connect /
   * createAh) must use to reach the client through the relay.
   */
  clientAddress(client: { host: string; port: number }): Promise<{ transport: 'udp'; host: string; port: number }>;
  /** Change the impairment while traffic flows (e.g. start clean, then lose). */
  impair(imp: RelayImpairment): void;
  /** Stop forwarding in both directions (a partition) until resume(). */
  pause(): void;
  resume(): void;
  /**
   * Send `bytes` as if on the path (an on-path attacker's injection): toward the server from
   * `client`'s upstream socket, or toward `client` from the relay's front socket. Unimpaired.
   * False when `client` has no upstream socket (yet).
   */
  inject(bytes: Uint8Array, toServer: boolean, client: { host: string; port: number }): boolean;
  close(): Promise<void>;
}

export interface RelayOptions extends RelayImpairment {
  /** The server device's address ({ host, port } of a udp device). */
  target: { host: string; port: number };
  seed?: number;
  maxClients?: number;
  maxHeld?: number;
  /**
   * Sees every datagram the relay takes in, once it is forwarded (an on-path observer: a fuzzer
   * learns context ids, PSNs and frames here; what it inject()s then follows the original).
   */
  tap?: (msg: Buffer, toServer: boolean, client: { host: string; port: number }) => void;
}

interface Held {
  sock: dgram.Socket;
  buf: Buffer;
  port: number;
  host: string;
  timer: NodeJS.Timeout;
}

/** Start a relay in front of `target`; resolves once its socket is bound. */
export async function startUdpRelay(opts: RelayOptions): Promise<UdpRelay> {
  const r = rng(opts.seed ?? 1);
  let imp: RelayImpairment = { ...opts };
  let paused = false;
  const maxClients = opts.maxClients ?? 64;
  const maxHeld = opts.maxHeld ?? 64;
  const stats: RelayStats = { forwarded: 0, bytesFromClient: 0, bytesFromServer: 0, dropped: 0, duplicated: 0, corrupted: 0, reordered: 0 };
  const held = new Set<Held>();
  const upstream = new Map<string, dgram.Socket>();
  const front = dgram.createSocket('udp4');
  await new Promise<void>((res, rej) => {
    front.once('error', rej);
    front.bind(0, '127.0.0.1', () => {
      front.off('error', rej);
      res();
    });
  });

  const impaired = (toServer: boolean): boolean => {
    const d = imp.direction ?? 'both';
    return d === 'both' || (d === 'toServer') === toServer;
  };

  const out = (sock: dgram.Socket, msg: Buffer, port: number, host: string): void => {
    stats.forwarded++;
    sock.send(msg, port, host, () => {
      // A closed socket or a full buffer is loss, which the relay exists to cause anyway.
    });
  };

  const forward = (sock: dgram.Socket, msg: Buffer, port: number, host: string, toServer: boolean): void => {
    if (paused) {
      stats.dropped++;
      return;
    }
    if (!impaired(toServer)) return out(sock, msg, port, host);
    if (r() < (imp.drop ?? 0)) {
      stats.dropped++;
      return;
    }
    let buf = msg;
    if (r() < (imp.corrupt ?? 0) && buf.length > 41) {
      buf = Buffer.from(buf);
      const at = 40 + Math.floor(r() * (buf.length - 40));
      buf[at]! ^= 1 + Math.floor(r() * 255);
      stats.corrupted++;
    }
    const copies = r() < (imp.dup ?? 0) ? 2 : 1;
    if (copies === 2) stats.duplicated++;
    for (let i = 0; i < copies; i++) {
      if (held.size < maxHeld && r() < (imp.reorder ?? 0)) {
        stats.reordered++;
        const h: Held = {
          sock, buf, port, host,
          timer: setTimeout(() => {
            held.delete(h);
            out(sock, buf, port, host);
          }, Math.max(1, Math.floor(r() * (imp.reorderMs ?? 5)))),
        };
        held.add(h);
      } else out(sock, buf, port, host);
    }
  };

  const ready = new Map<dgram.Socket, Promise<void>>();
  const upstreamFor = (host: string, port: number): dgram.Socket | undefined => {
    const key = `${host}|${port}`;
    let up = upstream.get(key);
    if (!up) {
      if (upstream.size >= maxClients) return undefined;
      const s = dgram.createSocket('udp4');
      upstream.set(key, s);
      s.on('message', (back) => {
        stats.bytesFromServer += back.length;
        forward(front, back, port, host, false);
        opts.tap?.(back, false, { host, port });
      });
      s.on('error', () => {});
      ready.set(s, new Promise<void>((res) => s.bind(0, '127.0.0.1', () => res())));
      up = s;
    }
    return up;
  };

  front.on('message', (msg, rinfo) => {
    stats.bytesFromClient += msg.length;
    const up = upstreamFor(rinfo.address, rinfo.port);
    if (!up) {
      stats.dropped++;
      return;
    }
    forward(up, msg, opts.target.port, opts.target.host, true);
    opts.tap?.(msg, true, { host: rinfo.address, port: rinfo.port });
  });
  front.on('error', () => {});

  const port = front.address().port;
  return {
    address: Object.freeze({ transport: 'udp' as const, host: '127.0.0.1', port }),
    stats,
    async clientAddress(client) {
      const up = upstreamFor(client.host, client.port);
      if (!up) throw new Error(`relay: more than ${maxClients} clients`);
      await ready.get(up);
      return Object.freeze({ transport: 'udp' as const, host: '127.0.0.1', port: up.address().port });
    },
    impair(next) {
      imp = { ...next };
    },
    pause() {
      paused = true;
    },
    resume() {
      paused = false;
    },
    inject(bytes, toServer, client) {
      if (!toServer) {
        front.send(bytes, client.port, client.host, () => {});
        return true;
      }
      const up = upstream.get(`${client.host}|${client.port}`);
      if (!up) return false;
      up.send(bytes, opts.target.port, opts.target.host, () => {});
      return true;
    },
    async close() {
      for (const h of held) clearTimeout(h.timer);
      held.clear();
      const socks = [front, ...upstream.values()];
      upstream.clear();
      await Promise.all(socks.map((s) => new Promise<void>((res) => {
        try {
          s.close(() => res());
        } catch {
          res();
        }
      })));
    },
  };
}

export interface UdpNat {
  /** The server as clients behind the NAT reach it: each of its ports at a socket of the NAT's. */
  readonly address: { transport: 'udp'; host: string; port: number; ports: number[] };
  close(): Promise<void>;
}

/**
 * A NAT in front of clients, unimpaired: a client reaches each of the server's ports at a socket
 * of the NAT's (`address`), and the server sees each client socket at one socket of the NAT's
 * whichever of its ports it talks to (an endpoint-independent mapping, as most NATs map); an
 * answer reaches the client from the NAT socket that stands for the server port it came from.
 * So a client of several NIC threads keeps its view of the server's ports while the server sees
 * its ports rewritten. Bounded: at most 64 client sockets mapped.
 */
export async function startUdpNat(target: { host: string; ports: readonly number[] }): Promise<UdpNat> {
  const bound = (s: dgram.Socket): Promise<void> => new Promise((res) => s.bind(0, '127.0.0.1', () => res()));
  const fronts = target.ports.map(() => dgram.createSocket('udp4'));
  await Promise.all(fronts.map(bound));
  const mapped = new Map<string, dgram.Socket>();
  const mapFor = (host: string, port: number): dgram.Socket | undefined => {
    const key = `${host}|${port}`;
    let up = mapped.get(key);
    if (!up && mapped.size < 64) {
      const s = dgram.createSocket('udp4');
      // Sends wait for the bind (node queues them meanwhile).
      void bound(s);
      s.on('message', (back, rinfo) => {
        const i = target.ports.indexOf(rinfo.port);
        if (i >= 0) fronts[i]!.send(back, port, host, () => {});
      });
      s.on('error', () => {});
      mapped.set(key, (up = s));
    }
    return up;
  };
  fronts.forEach((f, i) => {
    f.on('message', (msg, rinfo) => mapFor(rinfo.address, rinfo.port)?.send(msg, target.ports[i]!, target.host, () => {}));
    f.on('error', () => {});
  });
  const ports = fronts.map((f) => f.address().port);
  return {
    address: Object.freeze({ transport: 'udp' as const, host: '127.0.0.1', port: ports[0]!, ports }),
    async close() {
      const socks = [...fronts, ...mapped.values()];
      mapped.clear();
      await Promise.all(socks.map((s) => new Promise<void>((res) => {
        try {
          s.close(() => res());
        } catch {
          res();
        }
      })));
    },
  };
}

// A NAT-like forwarder on 127.0.0.1 that doubles as an attacker sharing the peer's address:
// the client device talks to `front` as if it were the server; the forwarder relays each
// datagram to the server from its `upstream` socket and the answers back. The server sees
// the client at the upstream socket's address — so whatever `inject()` sends from that socket
// carries exactly the client's source IP:port, as a spoofing attacker's datagrams would.
// It also reads the headers it relays (what an on-path observer learns: the context ids and
// PSNs), for tests that need an on-path attacker.
import dgram from 'node:dgram';
import { decodeUdpHdr } from '../../../src/wire/udp.js';

export interface Observed {
  /** The client's context id (srcCtx of client → server datagrams once it has one). */
  clientCtx: number;
  /** The server's context id (srcCtx of server → client datagrams). */
  serverCtx: number;
  /** Highest PSN seen on server → client DATA. */
  serverPsn: number;
  relayed: number;
}

export interface Spoofer {
  /** Give this to the client in place of the server's address. */
  readonly front: { transport: 'udp'; host: string; port: number };
  /** The client's address as the server sees it (give it to the server's connect). */
  readonly upstream: { transport: 'udp'; host: string; port: number };
  readonly seen: Observed;
  /** Send bytes to the server from the client's (upstream) address. */
  inject(bytes: Uint8Array): void;
  close(): Promise<void>;
}

async function bound(): Promise<dgram.Socket> {
  const s = dgram.createSocket('udp4');
  await new Promise<void>((res) => s.bind(0, '127.0.0.1', () => res()));
  s.on('error', () => {});
  return s;
}

export async function startSpoofer(server: { host: string; port: number }): Promise<Spoofer> {
  const front = await bound();
  const up = await bound();
  let client: { port: number; host: string } | undefined;
  const seen: Observed = { clientCtx: 0, serverCtx: 0, serverPsn: 0, relayed: 0 };
  front.on('message', (msg, rinfo) => {
    client = { host: rinfo.address, port: rinfo.port };
    const r = decodeUdpHdr(msg, 0, msg.length - 4);
    if (r.ok) seen.clientCtx = r.value.srcCtx;
    seen.relayed++;
    up.send(msg, server.port, server.host);
  });
  up.on('message', (msg) => {
    const r = decodeUdpHdr(msg, 0, msg.length - 4);
    if (r.ok && r.value.type === 1) {
      seen.serverCtx = r.value.srcCtx;
      if (((r.value.psn - seen.serverPsn) | 0) > 0) seen.serverPsn = r.value.psn;
    }
    seen.relayed++;
    if (client) front.send(msg, client.port, client.host);
  });
  const f = front.address();
  const u = up.address();
  return {
    front: { transport: 'udp', host: f.address, port: f.port },
    upstream: { transport: 'udp', host: u.address, port: u.port },
    seen,
    inject: (bytes) => up.send(bytes, server.port, server.host),
    close: async () => {
      await Promise.all([front, up].map((s) => new Promise<void>((r) => s.close(() => r()))));
    },
  };
}

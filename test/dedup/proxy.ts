// A TCP proxy on 127.0.0.1 that counts every byte it reads from each side: bytes on the wire of
// a tcp transport (the MPA stream) or of a control pipe, counted at the socket.
import { createServer, connect as tcpConnect, type Socket } from 'node:net';

/** A TCP proxy in front of `target` that counts the bytes it reads from each side. */
export async function countingProxy(target: { host: string; port: number }) {
  const counts = { fromClient: 0, fromServer: 0 };
  const socks = new Set<Socket>();
  const srv = createServer((down) => {
    const up = tcpConnect(target.port, target.host);
    for (const s of [down, up]) {
      socks.add(s);
      s.on('error', () => s.destroy());
      s.on('close', () => socks.delete(s));
    }
    down.on('data', (d) => {
      counts.fromClient += d.length;
      up.write(d);
    });
    up.on('data', (d) => {
      counts.fromServer += d.length;
      down.write(d);
    });
    down.on('close', () => up.destroy());
    up.on('close', () => down.destroy());
  });
  await new Promise<void>((r) => srv.listen(0, '127.0.0.1', r));
  const port = (srv.address() as { port: number }).port;
  return {
    address: { transport: 'tcp' as const, host: '127.0.0.1', port },
    bytes: () => counts.fromClient + counts.fromServer,
    close: () => new Promise<void>((r) => {
      for (const s of socks) s.destroy();
      srv.close(() => r());
    }),
  };
}


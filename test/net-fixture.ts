// Teardown of a test's own node:net server and the sockets it accepted or opened: sockets
// destroyed first (a server's close waits for its connections), then the server closed.
import type { Server, Socket } from 'node:net';

export async function closeNet(socks: Socket[], server: Server | undefined): Promise<void> {
  for (const s of socks.splice(0)) s.destroy();
  await new Promise<void>((r) => (server ? server.close(() => r()) : r()));
}

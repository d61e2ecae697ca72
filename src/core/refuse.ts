import type * as net from 'node:net';

/** How long a refused socket may stay open for its refusal to be read. */
export const REFUSED_LINGER_MS = 250;

/**
 * Send a refusal on a socket we will not serve, then let it go: what the peer sends meanwhile is
 * read and dropped (closing over unread bytes would reset the connection, and the refusal with
 * it), and the socket is destroyed after a short linger if the peer does not close first. Used
 * for tcp's MPA reject past a cap and the file server's Status(SessionLimit) pipe refusal.
 */
export function refuseAndLinger(s: net.Socket, refusal: Uint8Array): void {
  const t = setTimeout(() => s.destroy(), REFUSED_LINGER_MS);
  t.unref();
  s.once('close', () => clearTimeout(t));
  s.on('error', () => s.destroy());
  s.resume();
  s.end(refusal);
}

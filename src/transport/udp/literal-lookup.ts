// The udp shell's name lookup for node:dgram sends (./socket.ts).
import dns from 'node:dns';
import { isIP } from 'node:net';

/**
 * node:dgram resolves the destination of every send through `lookup`, and dns.lookup answers
 * even an IP literal on the next tick: each datagram then left one nextTick after send()
 * returned, behind whatever the rest of the turn did. Peers are addressed by IP literal (the
 * source address of what they sent, or what the user gave), so answer those at once; names
 * still go to the resolver.
 */
export function literalLookup(host: string, options: dns.LookupOneOptions, cb: (err: NodeJS.ErrnoException | null, address: string, family: number) => void): void {
  const f = isIP(host);
  if (f !== 0) cb(null, host, f);
  // node:dgram passes the socket's family as a bare number here; dns.lookup takes either form.
  else dns.lookup(host, options, cb);
}

// The nonce an rdma_cm-style dial (responder QPN 0) carries. A listener counts the dialing device
// by its source host and this value (ServiceRequest.peerKey: maxChannelsPerPeer, the per-peer
// rendezvous budget, pre-auth caps), since a dial's source port is not its device's. The value
// crosses the wire in the clear, so it must not be one value the device shows everyone: before,
// it was the device's crossing nonce, and any device it had dialed (or that saw a Reply, a
// crossing REJECT) could dial a listener from the same host or NAT with it and be counted as the
// device, spending its share (test/attack/tcp-peerkey-nonce-claim). So it is a keyed hash of the
// destination: what a device shows the listener at host:port is shown to nobody else, stays the
// same for each of its dials there (one peer, its caps hold), and differs between two devices on
// one host (a fresh secret each). Stateless: no table grows with the destinations dialed.
import { createHmac, randomBytes } from 'node:crypto';

export class DialNonces {
  readonly #key: Uint8Array;

  constructor(key: Uint8Array = randomBytes(32)) {
    this.#key = key;
  }

  /**
   * The first 4 bytes of HMAC-SHA256(key, "sabre-tcp-dial " ‖ host ‖ " " ‖ port), the host as
   * dialled (lower case, an IPv4-mapped IPv6 address as its IPv4 one): a name and its address are
   * two destinations, so a device dialling one listener by both is two peers there (its own doing).
   */
  toward(to: { readonly host: string; readonly port: number }): number {
    const host = to.host.toLowerCase().replace(/^\[|\]$/g, '').replace(/^::ffff:(?=\d+\.)/, '');
    return createHmac('sha256', this.#key).update(`sabre-tcp-dial ${host} ${to.port}`).digest().readUInt32BE(0);
  }
}

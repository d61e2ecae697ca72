// Over tcp a listener counts a channel against its peer's caps by the dialing device's host and
// the nonce of its MPA Request (0e8581e: ServiceRequest.peerKey). The nonce is not a secret: it
// crosses the wire in the clear. Before, it was one value per device, shown to every device it
// dialed: a device on the same host as the victim (a co-tenant, or anyone behind the same NAT)
// that the victim had dialed once read it off the victim's Request and dialed a server with it;
// it was counted as the victim, its channels filled the victim's maxChannelsPerPeer there, and
// the victim's own next channel was refused (peerCapRefused 1, peers 1). Now a dial's nonce is a
// keyed hash of its destination (src/transport/tcp/dial-nonce.ts): what the victim showed the
// attacker is not what it shows the server. The attacker is a sabre device (inline link, workers
// 0) whose dials are made to carry the value it was shown.
import { afterEach, describe, expect, it } from 'vitest';
import { type Channel, connectChannel, type Device, listenChannels, openDevice } from '../../src/index.js';
import type { InlinePort } from '../../src/nic/inline-port.js';
import type { TcpLink } from '../../src/transport/tcp/link.js';

const devs: Device[] = [];
afterEach(async () => {
  for (const d of devs.splice(0)) await d.close();
});
const mk = async (): Promise<Device> => {
  const d = await openDevice({ transport: 'tcp', host: '127.0.0.1', port: 0, workers: 0 });
  devs.push(d);
  return d;
};
const pick = (d: Device): { peerCapRefused: number; peers: number } => {
  const c = (d.stats() as unknown as { channels: Record<string, number> }).channels;
  return { peerCapRefused: c.peerCapRefused!, peers: c.peers! };
};
const connectorOf = (d: Device): object => ((d as unknown as { nic: InlinePort }).nic.link as TcpLink).connector;
/** Every dial of `d` carries `n` as its nonce (the connector's nonce before the fix, its per-destination value now). */
const presentAs = (d: Device, n: number): void => {
  Object.defineProperty(connectorOf(d), 'nonce', { value: n });
  Object.defineProperty(connectorOf(d), 'dialNonce', { value: () => n });
};
/** The nonce the dialer of an accepted channel showed this listener, as its link read it off the Request. */
const nonceSeen = (ch: Channel): number => Number(/#(\d+)$/.exec((ch as unknown as { peerKey: string }).peerKey)![1]);

/** A channel the victim opens to `server` now: true when the server refused it (at connect, or right after). */
async function refused(victim: Device, server: Device, l: ReturnType<typeof listenChannels>): Promise<boolean> {
  const mine = await connectChannel(victim, server.address, { service: 31 }).then((c) => c, (e: unknown) => e);
  if (mine instanceof Error) return true;
  return !(await l.accept(5000).then(() => true, () => false));
}

describe('tcp per-peer caps keyed by a nonce the dialer shows', () => {
  /** The victim dials the attacker's listener once; the attacker keeps the nonce it was shown. */
  async function victimDials(victim: Device, attacker: Device): Promise<number> {
    const la = listenChannels(attacker, { service: 32 });
    try {
      const c = await connectChannel(victim, attacker.address, { service: 32 });
      const n = nonceSeen(await la.accept(5000));
      await c.close();
      return n;
    } finally {
      la.close();
    }
  }

  it('a same-host device replaying the nonce the victim showed it does not spend the victim\'s channels at a server', async () => {
    const server = await mk();
    const victim = await mk();
    const attacker = await mk();
    presentAs(attacker, await victimDials(victim, attacker));
    const l = listenChannels(server, { service: 31, maxChannelsPerPeer: 2 });
    try {
      const held = [await connectChannel(attacker, server.address, { service: 31 }), await connectChannel(attacker, server.address, { service: 31 })];
      await l.accept(5000);
      await l.accept(5000);
      // Before: refused as over the victim's cap (peerCapRefused 1, one peer: the attacker and the victim were one).
      expect({ refused: await refused(victim, server, l), ...pick(server) }).toEqual({ refused: false, peerCapRefused: 0, peers: 2 });
      for (const c of held) void c.close().catch(() => undefined);
    } finally {
      l.close();
    }
  }, 20_000);

  it('control: with its own nonces the attacker never spent the victim\'s share (passes before and after)', async () => {
    const server = await mk();
    const victim = await mk();
    const attacker = await mk();
    await victimDials(victim, attacker);
    const l = listenChannels(server, { service: 31, maxChannelsPerPeer: 2 });
    try {
      const held = [await connectChannel(attacker, server.address, { service: 31 }), await connectChannel(attacker, server.address, { service: 31 })];
      await l.accept(5000);
      await l.accept(5000);
      expect({ refused: await refused(victim, server, l), ...pick(server) }).toEqual({ refused: false, peerCapRefused: 0, peers: 2 });
      for (const c of held) void c.close().catch(() => undefined);
    } finally {
      l.close();
    }
  }, 20_000);

  it('an honest device\'s dials to one listener are one peer (its cap still bites, whoever else it dialed); two devices on one host are two', async () => {
    const server = await mk();
    const victim = await mk();
    const other = await mk();
    const l = listenChannels(server, { service: 31, maxChannelsPerPeer: 2 });
    try {
      const first = await connectChannel(victim, server.address, { service: 31 });
      const n1 = nonceSeen(await l.accept(5000));
      // A dial elsewhere in between does not change what the victim shows this server.
      await victimDials(victim, other);
      const second = await connectChannel(victim, server.address, { service: 31 });
      const n2 = nonceSeen(await l.accept(5000));
      expect(n2).toBe(n1);
      expect({ refused: await refused(victim, server, l), ...pick(server) }).toEqual({ refused: true, peerCapRefused: 1, peers: 1 });
      // Another device on the same host (127.0.0.1) is a peer of its own: its channel gets in.
      const c = await connectChannel(other, server.address, { service: 31 });
      expect(nonceSeen(await l.accept(5000))).not.toBe(n1);
      expect(pick(server)).toEqual({ peerCapRefused: 1, peers: 2 });
      for (const x of [first, second, c]) void x.close().catch(() => undefined);
    } finally {
      l.close();
    }
  }, 20_000);
});

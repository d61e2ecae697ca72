// listenChannels / connectChannel: channels over the cm helpers (src/cm), which hand back a
// connected rc QP on every transport. The channel is made inside cm's setup hook, so its first
// receives — the HELLO buffer among them — are posted before the QP can connect; each side then
// sends HELLO, and a channel is handed to the application once the peer's HELLO arrived.
//
// Each channel gets a PD of its own (see ./hub.ts). cm's listen takes one `pd` for every QP it
// makes; here it is a getter that hands out a fresh PD until a QP has been made in it (the setup
// hook, which runs on each new QP, moves on to the next), so every accepted channel has its
// own. test/channel/channel.test.ts checks that two accepted channels never share one.
import { type CmListener, connect, connectionInfo, listen } from '../cm/index.js';
import type { DeviceAddress } from '../core/address.js';
import { ErrorCode, SabreError } from '../core/errors.js';
import type { Device } from '../verbs/device.js';
import { Listener } from '../verbs/listener.js';
import type { ProtectionDomain } from '../verbs/pd.js';
import type { QueuePair } from '../verbs/qp.js';
import { Channel } from './channel.js';
import { hubOf } from './hub.js';
import { type ChannelOptions, resolveOptions } from './options.js';
import { addressKey, sourceKey } from '../core/address.js';
import { busiestSource, oldestOf } from '../core/busiest.js';

/** Pre-authentication mode of a listener (option preauth). */
export interface PreauthOptions {
  /** Largest message the peer may send before ch.authorize(). Default 4096. */
  maxMessage?: number;
  /** Channels not yet authorized one peer may have open. Default 8. */
  maxPerPeer?: number;
}

export interface ChannelListenOptions extends ChannelOptions {
  /** Service number (cm's port space within a device). Default 0. */
  service?: number;
  /** Channels connected and not yet taken by accept() / iteration (more are refused, `acceptRefused`: the dialer's channel fails ERR_CLOSED), and channels waiting for their peer's HELLO (past it the oldest of the busiest source is closed, `helloEvicted`). Default 128. */
  backlog?: number;
  /** Channels one peer (device address) may have open on this device; more are refused (ERR_LIMIT_EXCEEDED at the peer). Default 64. */
  maxChannelsPerPeer?: number;
  /**
   * Channels accepted start untrusted: until ch.authorize() they register no more than their
   * first phase's worth, take only messages up to preauth.maxMessage (a larger one, or any
   * rendezvous OFFER, fails the channel with a counted refusal), refuse dedup sends, and count
   * towards preauth.maxPerPeer.
   */
  preauth?: PreauthOptions;
}

export interface ChannelConnectOptions extends ChannelOptions {
  service?: number;
  /** Whole connect deadline (QP connection and the peer's HELLO). Default 10 000 ms. */
  connectTimeoutMs?: number;
}

/** Channels of one service, in the order their HELLOs arrived: accept(), for-await, close() (../verbs/listener.ts). */
export class ChannelListener extends Listener<Channel> {
  readonly service: number;
  readonly #cm: CmListener;
  /** Made in cm's setup hook, their QPs not yet connected. */
  readonly #made = new Map<QueuePair, Channel>();
  /**
   * Connected, waiting for the peer's HELLO (nobody else would end them if it never comes), with
   * their source host, oldest first. At most `backlog`: the per-peer caps count a channel only
   * once its HELLO came, so a peer connecting QPs that never send one is held to this alone.
   */
  readonly #hello = new Map<Channel, string>();
  readonly #backlog: number;
  readonly #maxPerPeer: number;
  readonly #preauthMax: number;
  readonly #preauthPerPeer: number;
  #nextPd: ProtectionDomain | undefined;

  /** @internal use listenChannels() */
  constructor(dev: Device, opts: ChannelListenOptions = {}) {
    const o = resolveOptions(opts);
    const hub = hubOf(dev);
    super(dev, 'channel');
    this.#backlog = opts.backlog ?? 128;
    if (!Number.isInteger(this.#backlog) || this.#backlog < 1) throw new SabreError(ErrorCode.InvalidArgument, 'backlog must be a positive integer');
    this.#maxPerPeer = posInt(opts.maxChannelsPerPeer, 'maxChannelsPerPeer', 64);
    const pre = opts.preauth;
    if (pre !== undefined && (pre === null || typeof pre !== 'object')) throw new SabreError(ErrorCode.InvalidArgument, 'preauth must be an object');
    this.#preauthMax = pre ? posInt(pre.maxMessage, 'preauth.maxMessage', 4096) : 0;
    this.#preauthPerPeer = pre ? posInt(pre.maxPerPeer, 'preauth.maxPerPeer', 8) : Infinity;
    if (this.#preauthMax > o.maxMessage) throw new SabreError(ErrorCode.InvalidArgument, 'preauth.maxMessage must be at most maxMessage');
    // eslint-disable-next-line @typescript-eslint/no-this-alias
    const self = this;
    this.#cm = listen(dev, {
      get pd(): ProtectionDomain {
        return (self.#nextPd ??= hub.takePd());
      },
      qpInit: hub.qpInit(o),
      service: opts.service ?? 0,
      backlog: this.#backlog,
      setup: (qp) => {
        if (qp.pd === this.#nextPd) this.#nextPd = undefined;
        const reserved = hub.reserve(o);
        let ch: Channel;
        try {
          ch = new Channel(hub, qp, qp.pd, o, reserved, this.#preauthMax);
        } catch (e) {
          hub.unreserve(reserved);
          throw e;
        }
        this.#made.set(qp, ch);
        // cm destroys a QP whose connection fails: its flushed receives tear the channel down.
        ch.onTeardown = () => this.#made.delete(qp);
      },
    });
    this.service = this.#cm.service;
    this.watchDevice();
    // cm's listener ends when this one closes or the device does: either way, this one is done.
    void this.#acceptLoop().finally(() => this.close());
  }

  /** cm's listener goes (with its service and unaccepted QPs); channels not yet handed over end. */
  protected release(): void {
    this.#cm.close();
    for (const ch of [...this.#made.values(), ...this.#hello.keys()]) ch.abort('listener closed');
    this.#made.clear();
    this.#hello.clear();
  }

  /** A channel never accepted is closed: its peer's iteration ends. */
  protected dispose(ch: Channel): void {
    void ch.close();
  }

  async #acceptLoop(): Promise<void> {
    for await (const qp of this.#cm) {
      const ch = this.#made.get(qp);
      if (!ch) {
        qp.destroy();
        continue;
      }
      this.#made.delete(qp);
      ch.onTeardown = undefined;
      ch.peerKey = hubOf(this.device).peerKey(peerKeyOf(qp));
      this.#roomForHello();
      ch.start();
      const source = sourceOf(qp);
      sources.set(ch, source);
      this.#hello.set(ch, source);
      ch.connected.then(
        () => {
          // Evicted for a newer channel after its HELLO came (the eviction ran before this did):
          // already aborted, neither counted nor delivered.
          if (!this.#hello.delete(ch)) return;
          if (this.closing) {
            this.dispose(ch);
            return;
          }
          // The accept queue is full: refused (an abort, so the dialer fails now instead of
          // seeing an orderly end after sends that no one here will read), and counted.
          if (this.ready >= this.#backlog) {
            hubOf(this.device).totals.acceptRefused++;
            ch.abort(`channel refused: the listener's accept queue is full (backlog ${this.#backlog} channels not yet accepted)`, 'limit');
            return;
          }
          // Counted once the HELLOs crossed, so a channel past the cap can tell its peer why.
          try {
            hubOf(this.device).admit(ch, this.#preauthMax > 0, this.#maxPerPeer, this.#preauthPerPeer);
          } catch (e) {
            ch.abort((e as Error).message, 'limit');
            return;
          }
          this.offer(ch);
        },
        // It failed before the peer's HELLO: already torn down.
        () => void this.#hello.delete(ch),
      );
    }
  }

  /**
   * Room for one more channel waiting for its HELLO: past `backlog` the oldest of the source
   * holding the most goes (counted), as the file server's admission does, so a source that only
   * connects churns its own share and a channel of another source still gets its HELLO's time.
   */
  #roomForHello(): void {
    if (this.#hello.size < this.#backlog) return;
    const { most } = busiestSource(this.#hello);
    const ch = most === undefined ? undefined : oldestOf(this.#hello, most);
    if (!ch) return;
    this.#hello.delete(ch);
    hubOf(this.device).totals.helloEvicted++;
    ch.abort('closed for a newer channel: too many channels waiting for their HELLO', 'limit');
  }

}

function posInt(v: unknown, name: string, def: number): number {
  if (v === undefined) return def;
  if (typeof v !== 'number' || !Number.isInteger(v) || v < 1 || v > 0xffff_ffff) throw new SabreError(ErrorCode.InvalidArgument, `${name} must be a positive integer`);
  return v;
}

/**
 * The peer of a QP cm accepted, keyed by its device address (the one connectChannel keys by) —
 * over tcp by the dialing device's host and the nonce of its Request, since a dial's source port is
 * not its device's (a value it shows this listener alone: src/transport/tcp/dial-nonce.ts).
 */
function peerKeyOf(qp: QueuePair): string {
  const info = connectionInfo(qp);
  return info ? (info.peerKey ?? addressKey(info.peer)) : `qpn:${qp.qpn}`;
}

/** The source host of a QP cm accepted (core/address.ts sourceKey, as cm's listener counts it). */
function sourceOf(qp: QueuePair): string {
  const peer = connectionInfo(qp)?.peer;
  return peer ? sourceKey(peer) : `qpn:${qp.qpn}`;
}

const sources = new WeakMap<Channel, string>();

/** The source host of a channel a listener accepted (core/address.ts sourceKey), for per-source caps above it; '?' for others. */
export function channelSource(ch: Channel): string {
  return sources.get(ch) ?? '?';
}

/** Accept channels for `opts.service` on `dev`: `for await (const ch of listener)`. */
export function listenChannels(dev: Device, opts: ChannelListenOptions = {}): ChannelListener {
  return new ChannelListener(dev, opts);
}

/** Open a channel to the listener for `opts.service` at `address`; resolves once the peer's HELLO arrived. */
export async function connectChannel(dev: Device, address: DeviceAddress, opts: ChannelConnectOptions = {}): Promise<Channel> {
  const o = resolveOptions(opts);
  const hub = hubOf(dev);
  const pd = hub.takePd();
  const timeoutMs = opts.connectTimeoutMs ?? 10_000;
  let ch: Channel | undefined;
  let reserved = 0;
  try {
    reserved = hub.reserve(o);
    await connect(dev, address, {
      pd,
      qpInit: hub.qpInit(o),
      service: opts.service ?? 0,
      timeoutMs,
      setup: (qp) => {
        ch = new Channel(hub, qp, pd, o, reserved);
        ch.peerKey = hub.peerKey(addressKey(address));
      },
    });
    ch!.start();
    await ch!.connected;
    return ch!;
  } catch (e) {
    // The channel may have failed first (its peer broke the protocol before the connect was
    // through: tearing it down destroyed the QP, and the connect says only that): its cause wins.
    // Not a close: a refused or failed connect flushes the receives the channel had posted, and
    // that flush is the connect's consequence, not its cause (no listener is ERR_UNREACHABLE).
    const first = ch?.failure;
    if (ch) ch.abort(`connect failed: ${(e as Error).message}`);
    else {
      if (reserved) hub.unreserve(reserved);
      hub.returnPd(pd);
    }
    throw first && first.code !== ErrorCode.Closed ? first : e;
  }
}

/**
 * A channel on a QP this side connects by hand (as verbs programs exchange { address, qpn } out
 * of band), for paths the cm helpers do not take: make it, give the peer `qpn`, then
 * `connect({ address, qpn })` with the peer's. Resolves like connectChannel.
 * @internal not in the public API (tests: a relay between the two ends).
 */
export function channelOnQp(dev: Device, opts: ChannelOptions = {}): { qpn: number; channel: Channel; connect(peer: { address: DeviceAddress; qpn: number }): Promise<Channel> } {
  const o = resolveOptions(opts);
  const hub = hubOf(dev);
  const pd = hub.takePd();
  const reserved = hub.reserve(o);
  const qp = pd.createQp({ type: 'rc', ...hub.qpInit(o) });
  const channel = new Channel(hub, qp, pd, o, reserved);
  return {
    qpn: qp.qpn,
    channel,
    async connect(peer) {
      try {
        await qp.connect({ address: peer.address, qpn: peer.qpn });
        channel.start();
        await channel.connected;
        return channel;
      } catch (e) {
        channel.abort(`connect failed: ${(e as Error).message}`);
        throw e;
      }
    },
  };
}

// The boundary between the device and whatever carries its engine's frames.
import type { DeviceAddress } from '../core/address.js';
import type { Frame, Inbound } from '../core/frame.js';

export interface Transport {
  readonly address: DeviceAddress;
  /** Largest datagram / framed PDU this transport emits, where it has one (udp: the path MTU; tcp: the MULPDU). */
  readonly mtu?: number;
  /**
   * Hand frames to the link. The payload views must stay readable until the call returns or,
   * for asynchronous links, until delivery. The array itself passes to the transport: the
   * caller builds a fresh one per call and does not touch it again.
   */
  send(to: DeviceAddress, frames: Frame[]): void;
  /** Set once by the device: called with batches of frames (one placement batch each). */
  onReceive(handler: (batch: Inbound[]) => void): void;
  /** Whether `to` can be reached now (inproc: registered). */
  reachable(to: DeviceAddress): boolean;
  /**
   * Links that can lose a peer (UDP: retries exhausted, peer restarted and forgot our frames)
   * report it here, once per failure; the device fails the work that depended on that peer
   * with RetryExcErr. inproc never loses a frame and does not implement it.
   */
  onLinkFailure?(handler: (to: DeviceAddress) => void): void;
  /** Link counters, merged into Device.stats() as `link`. */
  stats?(): Record<string, number>;
  /** May be asynchronous (sockets): the device awaits it. */
  close(): void | Promise<void>;
}

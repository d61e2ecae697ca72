// The socket shell's options and the owner's handlers (./socket.ts UdpSockets).
import type { CrcOffloadLike } from './crc-offload.js';
import type { Delivery, EndpointOptions, Failure } from './endpoint.js';
import type { PeerAddress } from './endpoint-types.js';

export interface UdpAddress {
  transport: 'udp';
  host: string;
  port: number;
}

export interface UdpSocketOptions extends Partial<EndpointOptions> {
  /** Bind address; default 127.0.0.1. */
  host?: string;
  /** Bind port of the first socket; 0 (default) picks an ephemeral one. */
  port?: number;
  /** Sockets to stripe over (the others bind ephemeral ports on the same host). Default 1. */
  sockets?: number;
  /** Kernel buffer sizes to ask for (capped by net.core.*mem_max). Default 4 MiB. */
  socketBufferBytes?: number;
  /** When true the owner calls release() for each delivery; otherwise it happens on return. */
  manualRelease?: boolean;
  /** Test/bench hook: return false to drop an incoming datagram before the endpoint sees it. */
  rxFilter?: (datagram: Uint8Array) => boolean;
  /**
   * After a flush's deliveries, build its datagrams a few microtask hops later instead of at
   * once: a user awaiting the completion those deliveries produced runs first, so its answer
   * leaves in the same datagram as the owner's own answers and the ACK — still in this
   * event-loop turn, with no extra loop iteration.
   */
  deferAnswers?: boolean;
  /**
   * DATA datagrams sent per context per flush before the shell yields to read what arrived
   * (ACKs that open the window, the peer's answers). Default: about 512 KiB of datagrams
   * (8 at mtu 65000), at least 4, at most 32. Without it a sender with a full window writes
   * the whole window in one synchronous burst, reads nothing meanwhile, and sender and
   * receiver take turns instead of overlapping.
   */
  burst?: number;
  /**
   * Large datagrams read before the shell delivers them to the owner and flushes (one engine
   * step, one ACK) without waiting for the end of the read burst. Default: about 1 MiB of
   * datagrams (16 at mtu 65000), at least 4, at most 32. It applies once a burst holds 256 KiB;
   * smaller datagrams are delivered every `burst`, as a stream of small messages waits on each
   * step's answers. Each flush costs the receiver an engine step and an ACK datagram, and the
   * sender a datagram to read: at `burst` spacing, 64 KiB datagrams got one datagram back per ~7
   * received (raw ack-clocked node:dgram acks every ~15); at 1 MiB the sender (burst: 512 KiB
   * per flush, a 2 MiB window of writes) still hears back twice per window.
   */
  rxBurst?: number;
  /** Where each datagram is copied on arrival (e.g. device memory); reset after each flush's deliveries. */
  rxArea?: RxArea;
  /**
   * CRC32C of large datagrams on worker threads (see ./crc-offload.ts). Receive offload needs
   * rxArea and two spare areas: one holds the batch a worker checks, one the batch this thread
   * processes, while arrivals fill the third.
   */
  offload?: CrcOffloadLike;
  rxSpareAreas?: RxArea[];
  /** Stop offloading for a while when batches come back slower than inline (default true; tests turn it off). */
  offloadBackoff?: boolean;
}

/** A receive area: copy() places a datagram (undefined: full, keep the node Buffer); reset() frees all. */
export interface RxArea {
  copy(datagram: Uint8Array): Uint8Array | undefined;
  /** Give back the last copy (a datagram that changed nothing: nothing refers to it). */
  unCopy(last: Uint8Array): void;
  reset(): void;
}

export interface UdpHandlers {
  /** A payload from a peer, exactly once. The view is valid only during the call. */
  onDelivery?: (d: Delivery) => void;
  /** Payload ids the peer's engine now holds. */
  onAcked?: (ids: number[]) => void;
  onFailed?: (f: Failure[]) => void;
  /**
   * After the deliveries of one flush, before its datagrams are built: whatever the owner
   * sends now leaves in this flush and carries the ACK for what it answers.
   */
  onDeliveriesDone?: () => void;
  /** Just before the endpoint builds datagrams: the owner hands over what it has queued. */
  onBeforePoll?: () => void;
  /**
   * The owner keeps the timer (one per device, src/nic/driver.ts): after every flush the
   * endpoint's deadline may have moved; the owner reads pollTimeout() and calls
   * handleTimeout() when it is due. Without it ./standalone-timer.ts does that.
   */
  onTimerChanged?: () => void;
}

/** A datagram whose CRC32C a worker is checking (UdpSockets' offload), with where and when it came. */
export interface RxWaiting {
  buf: Uint8Array;
  from: PeerAddress;
  at: number;
}

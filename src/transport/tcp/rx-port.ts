// Zero-copy receive for the tcp connections (./connection.ts): the socket reads straight into
// the deframer's staging area in device memory.
import net, { type Socket } from 'node:net';

/** What reads land in: the connection's staging area, and where it is told how much came. */
export interface RxTarget {
  rxBuffer(): Uint8Array;
  rxRead(n: number, buf: Uint8Array): void;
}

/**
 * Zero-copy receive with net's `onread`: the socket reads straight into the deframer's staging
 * area in device memory, so no Buffer is allocated per read and no byte is copied into shared
 * memory by V8 (which copies byte by byte when source and destination are not equally aligned:
 * as slow as a CRC pass). Reads are as large as the free staging space, so one read
 * (and one engine step, one CRC kernel call, one place() call, one ack) covers many FPDUs.
 * The socket must be created with `onread: port.onread` (dialSocket / adoptAccepted); the
 * connection binds itself to the port. Until then (and during the MPA handshake) reads land in
 * a small spare buffer and take the copying path.
 */
export class RxPort {
  #target: RxTarget | undefined;
  readonly #spare = Buffer.allocUnsafe(4096);
  readonly onread = {
    buffer: (): Uint8Array => this.#target?.rxBuffer() ?? this.#spare,
    callback: (n: number, buf: Uint8Array): boolean => {
      this.#target?.rxRead(n, buf);
      return true;
    },
  };

  get spare(): Buffer {
    return this.#spare;
  }

  bind(c: RxTarget): void {
    this.#target = c;
  }
}

/**
 * A client socket that reads into device memory (see RxPort), from `from` — the device's own
 * address, as rdma_cm binds a connection's source — when that is a specific address of the
 * peer's family; a wildcard (or a name) leaves the source to the kernel.
 */
export function dialSocket(host: string, port: number, from?: string): { socket: Socket; rx: RxPort } {
  const rx = new RxPort();
  const family = net.isIP(host);
  const bind = from !== undefined && family !== 0 && net.isIP(from) === family && from !== '0.0.0.0' && from !== '::';
  return { socket: net.connect({ host, port, noDelay: true, onread: rx.onread, ...(bind ? { localAddress: from } : {}) }), rx };
}

/**
 * An accepted socket (from a server created with pauseOnConnect, so nothing was read yet) as a
 * socket that reads into device memory: node:net has no `onread` for accepted sockets, so the
 * handle moves to a new Socket made with it. Falls back to the socket as it is.
 */
export function adoptAccepted(s0: Socket): { socket: Socket; rx?: RxPort } {
  const any = s0 as unknown as { _handle: unknown };
  const handle = any._handle;
  if (!handle || s0.readableLength > 0 || s0.destroyed) return { socket: s0 };
  const rx = new RxPort();
  any._handle = null;
  s0.destroy();
  const socket = new net.Socket({ handle, readable: true, writable: true, onread: rx.onread } as net.SocketConstructorOpts);
  return { socket, rx };
}

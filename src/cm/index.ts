// An rdma_cm-like convenience over the verbs API: listen / accept / connect that hand back a
// connected rc QP, for applications that do not exchange QP numbers out of band. Same calls on
// every transport:
//
//   const l = listen(dev, { pd, qpInit, service: 7, setup: (qp) => qp.postRecv(...) });
//   const qp = await l.accept();                  // or: for await (const qp of l) …
//   const qp = await connect(dev, serverDev.address, { pd, qpInit, service: 7, privateData });
//
// The cm speaks verbs only. tcp (a device whose link carries the exchange, Device.linkServices):
// the MPA handshake is the exchange. The client's MPA Request carries sabre's private-data
// block with responderQpn 0 ("any QP of this service") and the service number; the listener
// creates a QP, answers with its QPN in the MPA Reply, and both sides bind that very TCP
// connection to their QPs. A standard iWARP initiator (no sabre block) reaches service 0.
// udp / inproc: a CM agent on the device's CM QP (reserved QPN) exchanges REQ/REP/REJ as srd
// Sends (see ./agent.ts), then both sides qp.connect as usual; the listener connects to the
// address the REQ came from, so a client behind a relay or NAT is reached.
//
// `setup(qp)` runs on the new QP before it connects, so receives are posted before the peer can
// send (as with rdma_cm, where receives go in before rdma_accept / rdma_connect).
import type { DeviceAddress } from '../core/address.js';
import { ErrorCode, SabreError } from '../core/errors.js';
import type { ServiceRequest } from '../core/link.js';
import type { Device } from '../verbs/device.js';
import type { ProtectionDomain } from '../verbs/pd.js';
import type { QueuePair } from '../verbs/qp.js';
import type { QpInit } from '../verbs/types.js';
import { agentOf, type CmRequest } from './agent.js';

export interface CmQpOptions {
  pd: ProtectionDomain;
  /** rc QP attributes (type is forced to 'rc'). */
  qpInit: Omit<QpInit, 'type'> & { type?: 'rc' };
  /** Runs on the new QP before it connects: post receives here. */
  setup?: (qp: QueuePair) => void;
  /** Service number (rdma_cm's port space within a device). Default 0. */
  service?: number;
  /** Bytes for the peer (at most 486 on tcp, ~700 on udp/inproc). */
  privateData?: Uint8Array;
}

export interface CmListenOptions extends CmQpOptions {
  /** Connected QPs waiting for accept(); further requests are rejected. Default 16. */
  backlog?: number;
}

export interface CmConnectOptions extends CmQpOptions {
  /** Whole connect deadline. Default 10 000 ms. */
  timeoutMs?: number;
}

/** What the peer said when the connection was made. */
export interface CmConnectionInfo {
  /** The peer's private data (undefined when it sent none). */
  privateData: Uint8Array | undefined;
  remoteQpn: number;
  service: number;
}

const infos = new WeakMap<QueuePair, CmConnectionInfo>();

/** The private data and peer QPN of a QP made by listen/accept or connect. */
export function connectionInfo(qp: QueuePair): CmConnectionInfo | undefined {
  return infos.get(qp);
}

function serviceOf(s: number | undefined): number {
  const v = s ?? 0;
  if (!Number.isInteger(v) || v < 0 || v > 0xffff_ffff) throw new SabreError(ErrorCode.InvalidArgument, 'service must be a uint32');
  return v;
}

function newQp(o: CmQpOptions): QueuePair {
  if (!o || typeof o !== 'object' || !o.pd || !o.qpInit) throw new SabreError(ErrorCode.InvalidArgument, 'listen/connect need { pd, qpInit }');
  const qp = o.pd.createQp({ ...o.qpInit, type: 'rc' });
  try {
    o.setup?.(qp);
  } catch (e) {
    qp.destroy();
    throw e;
  }
  return qp;
}

export class CmListener implements AsyncIterable<QueuePair> {
  readonly device: Device;
  readonly service: number;
  readonly #opts: CmListenOptions;
  readonly #backlog: number;
  readonly #ready: QueuePair[] = [];
  readonly #waiters: { resolve: (qp: QueuePair) => void; reject: (e: Error) => void }[] = [];
  #inflight = 0;
  #closed = false;
  readonly #stop: () => void;

  /** @internal use listen() */
  constructor(dev: Device, opts: CmListenOptions) {
    dev.assertOpen();
    this.device = dev;
    this.service = serviceOf(opts.service);
    this.#opts = opts;
    this.#backlog = opts.backlog ?? 16;
    if (dev.linkServices) {
      dev.listenService(this.service, (r) => this.#onService(r));
      this.#stop = () => dev.listenService(this.service, undefined);
    } else {
      const agent = agentOf(dev);
      agent.listen(this.service, (r) => this.#onDatagram(r));
      this.#stop = () => agent.listen(this.service, undefined);
    }
  }

  /** The next connected QP (in connection order). */
  accept(timeoutMs?: number): Promise<QueuePair> {
    if (this.#ready.length) return Promise.resolve(this.#ready.shift()!);
    if (this.#closed) return Promise.reject(new SabreError(ErrorCode.Closed, 'listener is closed'));
    return new Promise((resolve, reject) => {
      const w = { resolve, reject };
      this.#waiters.push(w);
      if (timeoutMs !== undefined) {
        const t = setTimeout(() => {
          const i = this.#waiters.indexOf(w);
          if (i >= 0) this.#waiters.splice(i, 1);
          reject(new SabreError(ErrorCode.Timeout, `no connection within ${timeoutMs} ms`));
        }, timeoutMs);
        w.resolve = (qp) => {
          clearTimeout(t);
          resolve(qp);
        };
      }
    });
  }

  async *[Symbol.asyncIterator](): AsyncIterator<QueuePair> {
    for (;;) {
      try {
        yield await this.accept();
      } catch (e) {
        if (e instanceof SabreError && e.code === ErrorCode.Closed) return;
        throw e;
      }
    }
  }

  /** Stop accepting; connected QPs not yet accepted are destroyed. */
  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    this.#stop();
    for (const qp of this.#ready.splice(0)) qp.destroy();
    for (const w of this.#waiters.splice(0)) w.reject(new SabreError(ErrorCode.Closed, 'listener is closed'));
  }

  #full(): boolean {
    return this.#closed || this.#ready.length + this.#inflight >= this.#backlog;
  }

  #deliver(qp: QueuePair, info: CmConnectionInfo): void {
    this.#inflight--;
    if (this.#closed) {
      qp.destroy();
      return;
    }
    infos.set(qp, info);
    const w = this.#waiters.shift();
    if (w) w.resolve(qp);
    else this.#ready.push(qp);
  }

  #onService(r: ServiceRequest): void {
    if (this.#full()) {
      r.reject(this.#closed ? 'listener closed' : 'backlog full');
      return;
    }
    let qp: QueuePair;
    try {
      qp = newQp(this.#opts);
    } catch (e) {
      r.reject(`cannot create a QP: ${(e as Error).message}`);
      return;
    }
    this.#inflight++;
    r.accept(qp.qpn, this.#opts.privateData)
      // The connection is the QP's; connect binds the QP to it (the peer as the link saw it).
      .then(() => qp.connect({ address: r.from, qpn: r.remoteQpn }))
      .then(
        () => this.#deliver(qp, { privateData: r.privateData, remoteQpn: r.remoteQpn, service: this.service }),
        () => {
          this.#inflight--;
          qp.destroy();
        },
      );
  }

  #onDatagram(r: CmRequest): void {
    if (this.#full()) {
      r.reject(this.#closed ? 'listener closed' : 'backlog full');
      return;
    }
    let qp: QueuePair;
    try {
      qp = newQp(this.#opts);
    } catch (e) {
      r.reject(`cannot create a QP: ${(e as Error).message}`);
      return;
    }
    this.#inflight++;
    r.reply(qp.qpn, this.#opts.privateData);
    qp.connect({ address: r.from, qpn: r.qpn }).then(
      () => this.#deliver(qp, { privateData: r.privateData, remoteQpn: r.qpn, service: this.service }),
      () => {
        this.#inflight--;
        qp.destroy();
      },
    );
  }
}

/** Accept connections for `opts.service` on `dev`, each on a new rc QP made from `opts`. */
export function listen(dev: Device, opts: CmListenOptions): CmListener {
  return new CmListener(dev, opts);
}

/** Connect a new rc QP to the listener for `opts.service` at `address`; resolves when it can send. */
export async function connect(dev: Device, address: DeviceAddress, opts: CmConnectOptions): Promise<QueuePair> {
  dev.assertOpen();
  const service = serviceOf(opts?.service);
  const timeoutMs = opts.timeoutMs ?? 10_000;
  if (!address || typeof address.transport !== 'string') throw new SabreError(ErrorCode.InvalidArgument, 'connect needs the listener device address');
  if (address.transport !== dev.address.transport) throw new SabreError(ErrorCode.InvalidArgument, `a ${dev.address.transport} device cannot reach a ${address.transport} address`);
  const qp = newQp(opts);
  try {
    let remoteQpn: number;
    let privateData: Uint8Array | undefined;
    if (dev.linkServices) {
      ({ remoteQpn, privateData } = await dev.dialService(qp.qpn, address, service, opts.privateData, timeoutMs));
    } else {
      ({ qpn: remoteQpn, privateData } = await agentOf(dev).request(address, service, qp.qpn, opts.privateData, timeoutMs));
    }
    await qp.connect({ address, qpn: remoteQpn, timeoutMs });
    infos.set(qp, { privateData, remoteQpn, service });
    return qp;
  } catch (e) {
    qp.destroy();
    throw e;
  }
}

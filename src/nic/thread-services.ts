// The service exchange (a listener's requests, their answers, dials) of a device whose NIC runs
// on a thread (./thread-port.ts): requests arrive as messages from the NIC thread, answers and
// dials go as mailbox calls, and what the NIC thread settles later (an accept's handshake, a
// dial's answer) comes back as a message matched by id.
import type { DeviceAddress } from '../core/address.js';
import { MAX_TIMER_MS, peerDeadline } from '../core/deadline.js';
import { ErrorCode, SabreError } from '../core/errors.js';
import type { ServiceRequest } from '../core/link.js';
import { fromWireError, type WireError } from './thread-proto.js';

/**
 * How long past its own deadline for a dial the NIC thread's answer is awaited before the NIC
 * thread is taken as hung (the mailbox's deadline for a call): the dial fails then, not never,
 * and the device as for a call nobody answered.
 */
const NIC_GRACE_MS = 5_000;

/** The port's half the exchange uses: its mailbox call, whether it takes one now, and the NIC thread found hung. */
export interface ServiceCalls {
  call(op: string, args: Record<string, unknown>): unknown;
  readonly callable: boolean;
  hung(why: string): void;
}

export class ThreadServices {
  readonly #port: ServiceCalls;
  readonly #handlers = new Map<number, (r: ServiceRequest) => void>();
  readonly #waits = new Map<string, { resolve: (v: any) => void; reject: (e: Error) => void }>();
  #next = 1;

  constructor(port: ServiceCalls) {
    this.#port = port;
  }

  /** A message of the NIC thread's for the exchange (false: not one of these). */
  onMessage(m: any): boolean {
    switch (m.kind) {
      case 'serviceRequest':
        this.#request(m);
        return true;
      case 'svcAccepted':
      case 'dialed': {
        const key = m.kind === 'svcAccepted' ? `s${m.id}` : `d${m.id}`;
        const w = this.#waits.get(key);
        this.#waits.delete(key);
        if (m.error) w?.reject(fromWireError(m.error as WireError));
        else w?.resolve(m.value);
        return true;
      }
    }
    return false;
  }

  #request(m: any): void {
    // Sent before a close this thread has begun since: the request goes with the NIC's link.
    const port = this.#port;
    if (!port.callable) return;
    // A failed call (the NIC thread gone) is a rejected accept or an unsaid reject (the dialer
    // has its own deadline), never a throw into the message handler.
    const refuse = (reason: string, busy: boolean): void => {
      try {
        if (port.callable) port.call('svcReject', { id: m.id, reason, busy });
      } catch {
        // Nobody to tell.
      }
    };
    const handler = this.#handlers.get(m.service);
    if (!handler) return refuse('no listener', false);
    handler({
      service: m.service, remoteQpn: m.remoteQpn, privateData: m.privateData, from: m.from, ...(typeof m.peerKey === 'string' ? { peerKey: m.peerKey } : {}),
      accept: (qpn: number, privateData?: Uint8Array) => {
        if (!port.callable) return Promise.reject(new SabreError(ErrorCode.Closed, 'device is closed'));
        return this.#callAndWait(`s${m.id}`, 'svcAccept', { id: m.id, qpn, privateData });
      },
      reject: (reason: string, busy?: boolean) => refuse(reason, busy === true),
    });
  }

  listen(service: number, handler: ((r: ServiceRequest) => void) | undefined, deviceClosed: boolean): void {
    if (handler) this.#handlers.set(service, handler);
    else this.#handlers.delete(service);
    // A listener closed with its device: the NIC thread is gone already, or its link goes with the close.
    if (handler === undefined && (deviceClosed || !this.#port.callable)) return;
    this.#port.call('listen', { service, on: handler !== undefined });
  }

  dial(qpn: number, to: DeviceAddress, service: number, privateData: Uint8Array | undefined, timeoutMs: number): Promise<{ remoteQpn: number; privateData: Uint8Array | undefined }> {
    const id = this.#next++;
    return this.#callAndWait(`d${id}`, 'dial', { id, qpn, to, service, privateData, timeoutMs }, timeoutMs + NIC_GRACE_MS);
  }

  /** The call now, its outcome when the NIC thread's message with `key` comes (ERR_TIMEOUT after `deadlineMs`). */
  #callAndWait(key: string, op: string, args: Record<string, unknown>, deadlineMs?: number): Promise<any> {
    const p = new Promise((resolve, reject) => this.#waits.set(key, { resolve, reject }));
    try {
      this.#port.call(op, args);
    } catch (e) {
      this.#waits.delete(key);
      return Promise.reject(e);
    }
    // Past a timer's range (an unbounded dial): the NIC thread's own deadline alone.
    if (deadlineMs === undefined || !(deadlineMs <= MAX_TIMER_MS)) return p;
    // A timer made late by this thread's own stall gives the answer that came meanwhile its turn.
    const t = peerDeadline(deadlineMs, () => {
      const w = this.#waits.get(key);
      this.#waits.delete(key);
      const why = `the NIC thread did not answer '${op}' within ${deadlineMs} ms`;
      w?.reject(new SabreError(ErrorCode.Timeout, why));
      this.#port.hung(why);
    });
    return p.finally(() => t.clear());
  }

  /** Every request still waiting for the NIC thread's answer fails: none will come. */
  failWaits(message: string): void {
    for (const w of this.#waits.values()) w.reject(new SabreError(ErrorCode.Closed, message));
    this.#waits.clear();
  }
}

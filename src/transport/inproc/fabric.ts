// The in-process link: devices in one thread reach each other through a process-wide registry,
// frames are handed over by reference (payload views into the sender's memory, each with its
// DDP header already decoded) and the receiver drains its inbox after the turn, one placement
// batch per drain. The only copy is the receiver staging the payload into its device memory —
// the in-process stand-in for the wire. Reliable by construction; ordered too, though the
// engine does not rely on it. Devices in other worker threads are reached through the
// shared-memory bridge (./bridge.ts).
import { threadId } from 'node:worker_threads';
import type { DeviceAddress } from '../../core/address.js';
import type { Owns } from '../../core/detach.js';
import type { Frame } from '../../core/frame.js';
import type { Link, LinkEvents, Outbound } from '../../core/link.js';
import { Inbox } from '../inbox.js';

export interface InprocAddress extends DeviceAddress {
  readonly transport: 'inproc';
  readonly id: string;
}

/** Something that accepts frames for a device id (a local transport or a bridge to another thread). */
export interface InprocRoute {
  deliver(to: string, from: DeviceAddress, frames: Frame[]): void;
}

const local = new Map<string, InprocLink>();
/** Routes to devices in other threads, by id prefix (`<pid>:<threadId>:`). */
const remote = new Map<string, InprocRoute>();
let seq = 0;

export const threadPrefix = (): string => `${process.pid}:${threadId}:`;

export function addRemoteThread(prefix: string, route: InprocRoute): void {
  remote.set(prefix, route);
}

export function removeRemoteThread(prefix: string): void {
  remote.delete(prefix);
}

function routeFor(id: string): InprocRoute | undefined {
  const l = local.get(id);
  if (l) return l;
  const cut = id.lastIndexOf(':');
  return cut < 0 ? undefined : remote.get(id.slice(0, cut + 1));
}

/** Deliver frames that came from another thread to a device of this one. */
export function deliverLocal(to: string, from: DeviceAddress, frames: Frame[]): boolean {
  const t = local.get(to);
  if (!t) return false;
  t.deliver(to, from, frames);
  return true;
}

export class InprocLink implements Link, InprocRoute {
  readonly address: InprocAddress;
  /** No frame size of its own: segments are as large as the device allows. */
  readonly mss = 1 << 20;
  #inbox: Inbox | undefined;
  #closed = false;
  /** Frames addressed to unknown or closed devices. */
  undeliverable = 0;

  constructor() {
    this.address = Object.freeze({ transport: 'inproc' as const, id: `${threadPrefix()}${++seq}` });
    local.set(this.address.id, this);
  }

  start(events: LinkEvents): void {
    this.#inbox = new Inbox(events.frames);
  }

  reachable(to: DeviceAddress): boolean {
    return to.transport === 'inproc' && typeof to.id === 'string' && routeFor(to.id) !== undefined;
  }

  transmit(out: readonly Outbound[]): void {
    // A route takes one peer's frames at a time (a bridge encodes them as one record).
    let i = 0;
    while (i < out.length) {
      const to = out[i]!.to;
      const frames: Frame[] = [];
      while (i < out.length && out[i]!.to === to) frames.push(out[i++]!.frame);
      const r = typeof to.id === 'string' ? routeFor(to.id) : undefined;
      if (!r || this.#closed) this.undeliverable += frames.length;
      else r.deliver(to.id as string, this.address, frames);
    }
  }

  deliver(_to: string, from: DeviceAddress, frames: Frame[]): void {
    if (this.#closed || !this.#inbox) return;
    for (const frame of frames) this.#inbox.push(from, frame);
  }

  /** Memory is about to be reused (Link.detach): the frames handed over by reference wait in the receivers' inboxes, this thread's (a bridge copies). */
  detach(owns: Owns): boolean {
    for (const l of local.values()) l.#inbox?.detach(owns);
    return true;
  }

  close(): void {
    this.#closed = true;
    this.#inbox?.clear();
    local.delete(this.address.id);
  }
}

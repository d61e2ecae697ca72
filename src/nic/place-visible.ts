// Regions over ordinary (non-shared) memory are placed by the application's thread from the
// NIC's shared copy (M3's indirect path): a placement record in the device's completion ring
// tells it which bytes to copy. A Write's Success means its bytes are visible at the responder
// (DESIGN §4), and in one process the requester's completion is handed out by another device's
// drain: so before any device of this thread hands out completions, the devices that have such
// regions take their placement records first. (The NIC commits a placement record before the
// step's acks go out: thread-nic.ts.) Across processes the responder's thread takes them when
// its own ring wakes it, before any completion it hands out (docs/nic.md).

/** What a device of this thread does to take its completion and placement records in. */
export interface Drains {
  drain(): void;
}

/** The devices of this thread with a region over non-shared memory, and how many each has. */
const shadowed = new Map<Drains, number>();
let draining = false;

function noteShadow(port: Drains, delta: 1 | -1): void {
  const n = (shadowed.get(port) ?? 0) + delta;
  if (n > 0) shadowed.set(port, n);
  else shadowed.delete(port);
}

/** A device's regions by STag, counting those over non-shared memory (a `shadow`) for othersPlaceFirst. */
export class PortRegions<M extends { shadow?: unknown }> extends Map<number, M> {
  readonly #port: Drains;

  constructor(port: Drains) {
    super();
    this.#port = port;
  }

  override set(stag: number, mr: M): this {
    this.delete(stag);
    if (mr.shadow) noteShadow(this.#port, 1);
    return super.set(stag, mr);
  }

  override delete(stag: number): boolean {
    if (this.get(stag)?.shadow) noteShadow(this.#port, -1);
    return super.delete(stag);
  }

  /** The device closed: it places nothing any more (its regions stay, for late lookups). */
  closed(): void {
    shadowed.delete(this.#port);
  }
}

/** Before `port` hands out completions: the other devices with such regions take their records. */
export function othersPlaceFirst(port: Drains): void {
  if (draining || shadowed.size === 0 || (shadowed.size === 1 && shadowed.has(port))) return;
  draining = true;
  try {
    for (const p of shadowed.keys()) if (p !== port) p.drain();
  } finally {
    draining = false;
  }
}

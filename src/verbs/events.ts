// Asynchronous events of a device, in Node's idiom: what ibverbs reports through
// ibv_get_async_event (QP fatal, CQ error, path lost) and rdma_cm through its event channel
// (ESTABLISHED, DISCONNECTED). The device emits each as `dev.on('event', ev)`;
// `dev.events({ signal })` is the same stream as an async iterator.
//
// When they come (docs/errors.md, "Async events"): 'established' when an rc QP's connect
// resolves; 'qp-fatal' when a QP enters ERROR by itself (a Terminate, a peer lost, a CQ
// overrun — not by modify/destroy); 'disconnected' when an established rc QP leaves RTS for
// any reason but the device closing; 'cq-error' on a CQ overrun; 'path-lost' when a datagram
// link gives up on a peer (udp: retries exhausted); 'device-fatal' when the NIC itself is gone
// (its thread threw or ended; ibverbs' IBV_EVENT_DEVICE_FATAL): the device then closes.
import type { DeviceAddress } from '../core/address.js';
import type { QpDownCause } from '../core/link.js';
import { abortError, checkSignal, onAbort } from './abort.js';
import type { CompletionQueue } from './cq.js';

export type DeviceEvent =
  | { readonly type: 'established'; readonly qpn: number }
  /** `cause`: what the link reported for a connection link (tcp), when it did; 'closed': the peer closed it on purpose. */
  | { readonly type: 'qp-fatal'; readonly qpn: number; readonly cause?: QpDownCause }
  | { readonly type: 'disconnected'; readonly qpn: number; readonly cause?: QpDownCause }
  | { readonly type: 'cq-error'; readonly cq: CompletionQueue }
  | { readonly type: 'path-lost'; readonly peer: DeviceAddress }
  /** The NIC itself is gone (its thread threw or ended): the device closes, its work fails (ERR_CLOSED). */
  | { readonly type: 'device-fatal'; readonly error: Error };

export type DeviceEventType = DeviceEvent['type'];

/** Events a `dev.events()` iterator holds for a slow reader; past it the oldest go (counted in `dropped`). */
export const EVENT_BUFFER = 1024;

interface Source {
  on(name: 'event', fn: (ev: DeviceEvent) => void): unknown;
  off(name: 'event', fn: (ev: DeviceEvent) => void): unknown;
  onClose(hook: () => void): () => void;
  readonly closed: boolean;
}

export interface EventStream extends AsyncIterableIterator<DeviceEvent> {
  /** Events dropped because the reader fell more than EVENT_BUFFER behind. */
  readonly dropped: number;
}

/**
 * Iterate a device's events until it closes (the iteration then ends), `signal` aborts (the
 * pending next() rejects with ERR_ABORTED) or the loop breaks. The buffer is bounded.
 */
export function eventStream(src: Source, opts: { signal?: AbortSignal } = {}): EventStream {
  const signal = opts?.signal;
  checkSignal(signal, 'events');
  const buf: DeviceEvent[] = [];
  let dropped = 0;
  let done = src.closed;
  let failure: Error | undefined;
  let wake: (() => void) | undefined;
  const onEvent = (ev: DeviceEvent): void => {
    if (buf.length >= EVENT_BUFFER) {
      buf.shift();
      dropped++;
    }
    buf.push(ev);
    wake?.();
  };
  const stop = (): void => {
    if (done) return;
    done = true;
    src.off('event', onEvent);
    unhook();
    dispose();
    wake?.();
  };
  src.on('event', onEvent);
  const unhook = src.onClose(stop);
  const dispose = onAbort(signal, () => {
    failure = abortError(signal!, 'events');
    stop();
  });
  const it: EventStream = {
    get dropped() {
      return dropped;
    },
    async next(): Promise<IteratorResult<DeviceEvent>> {
      for (;;) {
        if (buf.length) return { value: buf.shift()!, done: false };
        if (failure) throw failure;
        if (done) return { value: undefined, done: true };
        await new Promise<void>((r) => (wake = r));
        wake = undefined;
      }
    },
    async return(): Promise<IteratorResult<DeviceEvent>> {
      stop();
      buf.length = 0;
      return { value: undefined, done: true };
    },
    [Symbol.asyncIterator]() {
      return it;
    },
  };
  return it;
}

// Run `fn` as a promise job after the current one: what queueMicrotask does, without the
// AsyncResource and bound function node makes per call (the transports' flushes queue several
// per hop of a ping-pong). `fn` must not throw: an exception would surface as an unhandled
// rejection.
const settled = Promise.resolve();

export function job(fn: () => void): void {
  void settled.then(fn);
}

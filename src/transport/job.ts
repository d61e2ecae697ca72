// Run `fn` as a promise job after the current one: what queueMicrotask does, without the
// AsyncResource and bound function node makes per call (the transports' flushes queue several
// per hop of a ping-pong). `fn` must not throw: an exception would surface as an unhandled
// rejection.
const settled = Promise.resolve();

export function job(fn: () => void): void {
  void settled.then(fn);
}

/**
 * Run `fn` three promise jobs from now: after an `await cq.wait()` continuation woken by this
 * step (one to three jobs deep) has answered, and the posts it made have joined a step, so the
 * answer leaves in the same write as what this step owes (the ack). One promise per link, no
 * closure.
 */
export function afterAnswers(fn: () => void): void {
  void settled.then().then().then(fn);
}

// Bounded waits for the lifecycle tests: a promise that must settle promptly fails the test
// with a clear message instead of hanging it until the runner's timeout.

/** `p`, or a rejection naming the bound if it has not settled within `ms`. */
export function within<T>(p: Promise<T>, ms: number): Promise<T> {
  let t: ReturnType<typeof setTimeout> | undefined;
  const late = new Promise<never>((_, reject) => {
    t = setTimeout(() => reject(new Error(`still pending after ${ms} ms`)), ms);
  });
  return Promise.race([p, late]).finally(() => clearTimeout(t));
}

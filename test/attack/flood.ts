// A stranger connecting as fast as it can: `parallel` TCP connects in flight for `ms`, each from
// `from(n)` (the n-th connect), each kept open (half-open: its end does not answer the server's
// FIN) for `holdMs`, then destroyed. What a listener keeps per refused or evicted socket shows
// as what it holds during the flood (core/refuse.ts's linger bound). Bounded: `ms` and 20,000
// connects at most.
import net from 'node:net';

export interface Flood {
  /** Connects made. */
  opened: number;
  /** The stranger's sockets open now (destroy them when the test ends). */
  socks: Set<net.Socket>;
  /** Resolves when the last connect of the flood has connected or failed. */
  done: Promise<void>;
}

export function connectFlood(o: { port: number; ms: number; parallel: number; from: (n: number) => string; holdMs: number }): Flood {
  const f: Flood = { opened: 0, socks: new Set(), done: Promise.resolve() };
  const t0 = performance.now();
  f.done = new Promise<void>((done) => {
    let inflight = 0;
    const one = (): void => {
      if (performance.now() - t0 > o.ms || f.opened >= 20_000) {
        if (inflight === 0) done();
        return;
      }
      inflight++;
      f.opened++;
      const s = net.connect({ host: '127.0.0.1', port: o.port, localAddress: o.from(f.opened), allowHalfOpen: true });
      f.socks.add(s);
      let settled = false;
      const next = (): void => {
        if (settled) return;
        settled = true;
        inflight--;
        setImmediate(one);
      };
      s.on('connect', next);
      s.on('error', next);
      s.on('close', () => {
        f.socks.delete(s);
        next();
      });
      setTimeout(() => s.destroy(), o.holdMs);
    };
    for (let i = 0; i < o.parallel; i++) one();
  });
  return f;
}

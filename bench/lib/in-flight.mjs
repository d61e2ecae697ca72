// The streaming loop of the goodput benches: keep `window` work requests posted on one QP until
// `total` have completed, each one Success (anything else ends the run with its status).
import { WcStatus } from '../../dist/index.js';

/**
 * `post(i)` posts the i-th work request (wrId i). `count` ({ posted, done }) is kept current
 * for a caller that samples it meanwhile. Resolves once all `total` have completed.
 */
export async function keepInFlight(cq, total, window, post, what, count = { posted: 0, done: 0 }) {
  const fill = () => {
    while (count.posted < total && count.posted - count.done < window) post(count.posted++);
  };
  fill();
  while (count.done < total) {
    await cq.wait(60_000);
    for (const w of cq.poll(64)) {
      if (w.status !== WcStatus.Success) throw new Error(`${what} ${w.wrId}: status ${w.status}`);
      count.done++;
    }
    fill();
  }
}

// The NIC thread's script as one file: dist/nic/thread.bundle.cjs, built from the tsc output
// (dist/nic/thread-main.js and the ~130 modules it reaches), so the code a NIC thread runs is the
// code the tests ran, only linked ahead of time. Loading 130 ES modules is most of a NIC
// thread's start (resolving, reading and compiling each one: ~150-250 ms of a ~330 ms start on
// two cores, docs/benchmarks.md), and every openDevice on udp or tcp pays it; one file cuts
// openDevice's median by ~2x. Packages stay imports (msgpackr is the only one the thread
// reaches), so the thread and the application share their copy. src/nic/thread-start.ts picks
// the bundle when it is at least as new as thread-main.js, which every tsc build rewrites: a
// bare `tsc` after an edit falls back to the module graph rather than running stale code.
// ./link.mjs does the linking (rolldown).
import { join, resolve } from 'node:path';
import { link } from './link.mjs';

const root = resolve(import.meta.dirname, '..');
await link(join(root, 'dist/nic/thread-main.js'), join(root, 'dist/nic/thread.bundle.cjs'));

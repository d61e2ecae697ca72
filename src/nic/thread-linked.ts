// A NIC thread's entry when it runs the linked bundle (./thread-start.ts): the bundle is
// CommonJS, run with its code cache by core/linked.ts. A file of its own rather than code a
// Worker evaluates, so the node flags the thread inherits (`--import`, `--require`: a test's
// hooks, a service's instrumentation) load before it as they do before thread-main.js.
import { runLinked } from '../core/linked.js';

// The bundle's path: the last of the thread's argv (startNicWorker's `argv`).
runLinked(process.argv[process.argv.length - 1]!);

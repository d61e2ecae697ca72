// Starting a NIC thread: the Worker, its flags and its script, and the wait for its first
// message (./thread-port.ts opens it).
import { type MessagePort, Worker } from 'node:worker_threads';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { ErrorCode, SabreError } from '../core/errors.js';
import { mtimeOf, pickLinked } from '../core/linked.js';
import { NIC_RESOURCE_LIMITS } from './thread-heap.js';
import type { NicReady } from './thread-proto.js';

/**
 * How long a NIC thread may take to report its link open (ms). It loads its modules, compiles
 * the data plane and binds its sockets: well under a second, seconds on a loaded machine. A
 * thread that says nothing for this long is stuck, and openDevice must not wait on it for good.
 * SABRE_NIC_START_MS overrides it (not public API: tests shrink it).
 */
const NIC_START_MS = 30_000;

function startDeadline(): number {
  const n = Number(process.env['SABRE_NIC_START_MS']);
  return Number.isFinite(n) && n > 0 ? n : NIC_START_MS;
}

/**
 * The NIC thread's Worker. It inherits this process's node flags, except those a Worker refuses:
 * only a main script's (`--input-type`, which would refuse to start a worker from a file), and
 * V8 and per-process ones (`--max-old-space-size`, `--expose-gc`, `--stack-size` …: Node throws
 * ERR_WORKER_INVALID_EXEC_ARGV and names them; a Worker's heap has limits of its own). A
 * process started with any of those must still open devices.
 */
export function startNicWorker(script: string, o: { workerData: unknown; transferList: MessagePort[] }): Worker {
  let execArgv = process.execArgv.filter((a) => !a.startsWith('--input-type'));
  const [entry, how] = workerEntry(script);
  for (let attempt = 0; ; attempt++) {
    try {
      return new Worker(entry, { ...o, ...how, execArgv, resourceLimits: NIC_RESOURCE_LIMITS });
    } catch (e) {
      if ((e as { code?: string }).code !== 'ERR_WORKER_INVALID_EXEC_ARGV' || attempt === 2) throw e;
      const named = /flags: (.*)$/.exec(String((e as Error).message))?.[1]?.split(', ') ?? [];
      // Left out by name; if the message names none we know, the thread takes no flags at all.
      const kept = execArgv.filter((a) => !named.includes(a));
      execArgv = attempt === 0 && kept.length < execArgv.length ? kept : [];
    }
  }
}

/**
 * How a Worker starts `script`: the module graph's entry as itself; the linked bundle (CommonJS,
 * with its code cache) through ./thread-linked.ts beside it, which is told the bundle's path.
 */
function workerEntry(script: string): [string, { argv?: string[] }] {
  return script.endsWith('.cjs') ? [join(dirname(script), 'thread-linked.js'), { argv: [script] }] : [script, {}];
}

/**
 * The NIC thread's script: the one-file bundle of dist/nic/thread-main.js and what it imports
 * (scripts/bundle-nic.mjs), which starts a thread in about half the time of loading its ~130
 * modules one by one, or thread-main.js itself. Under vitest this module runs from src/
 * (TypeScript): the thread loads the dist/ build either way.
 */
export function threadScript(): string {
  const here = new URL(import.meta.url);
  const dir = fileURLToPath(here.pathname.endsWith('.ts') ? new URL('../../dist/nic/', here) : new URL('./', here));
  return pickThreadScript(dir, mtimeOf, process.env['SABRE_NIC_BUNDLE'] !== '0');
}

/**
 * The bundle when it exists and is at least as new as thread-main.js (core/linked.ts, the rule
 * the `sabre` command's bundle follows too). tsc rewrites every output on each build, so a
 * bundle older than thread-main.js was linked from code an edit has since replaced: the module
 * graph runs instead. (A packed package carries one mtime for every
 * file.) SABRE_NIC_BUNDLE=0 asks for the module graph (not public API: stack traces then name
 * dist/ files, whose source maps lead to src/).
 */
export function pickThreadScript(dir: string, mtime: (path: string) => number | undefined, bundle = true): string {
  return pickLinked(join(dir, 'thread-main.js'), join(dir, THREAD_BUNDLE), mtime, bundle);
}

/** scripts/bundle-nic.mjs writes it next to thread-main.js. */
export const THREAD_BUNDLE = 'thread.bundle.cjs';

/**
 * The NIC thread's first message (its link open, or why not). Past the deadline the thread is
 * ended and this rejects ERR_TIMEOUT; an error or an exit of the thread before it rejects too.
 */
export async function nicReady(worker: Worker): Promise<NicReady> {
  let onMessage!: (m: NicReady) => void;
  let onError!: (e: Error) => void;
  let onExit!: (code: number) => void;
  let timer: ReturnType<typeof setTimeout> | undefined;
  const ms = startDeadline();
  try {
    return await new Promise<NicReady>((resolve, reject) => {
      onMessage = resolve;
      onError = reject;
      onExit = (code) => reject(new SabreError(ErrorCode.InvalidState, `the NIC thread exited (${code}) before its link opened`));
      worker.once('message', onMessage).once('error', onError).once('exit', onExit);
      timer = setTimeout(() => {
        reject(new SabreError(ErrorCode.Timeout, `the NIC thread did not report its link open within ${ms} ms`));
        void worker.terminate();
      }, ms);
    });
  } finally {
    clearTimeout(timer);
    // Only these: the Worker keeps listeners of its own (its port's ref count follows them).
    worker.off('message', onMessage).off('error', onError).off('exit', onExit);
  }
}

// Starting a NIC thread: the Worker, its flags and its script, and the wait for its first
// message (./thread-port.ts opens it).
import { type MessagePort, Worker } from 'node:worker_threads';
import { fileURLToPath } from 'node:url';
import { ErrorCode, SabreError } from '../core/errors.js';
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
  for (let attempt = 0; ; attempt++) {
    try {
      return new Worker(script, { ...o, execArgv, resourceLimits: NIC_RESOURCE_LIMITS });
    } catch (e) {
      if ((e as { code?: string }).code !== 'ERR_WORKER_INVALID_EXEC_ARGV' || attempt === 2) throw e;
      const named = /flags: (.*)$/.exec(String((e as Error).message))?.[1]?.split(', ') ?? [];
      // Left out by name; if the message names none we know, the thread takes no flags at all.
      const kept = execArgv.filter((a) => !named.includes(a));
      execArgv = attempt === 0 && kept.length < execArgv.length ? kept : [];
    }
  }
}

/** Under vitest this module runs from src/ (TypeScript): the thread loads the dist/ build. */
export function threadScript(): string {
  const here = new URL(import.meta.url);
  return fileURLToPath(here.pathname.endsWith('.ts') ? new URL('../../dist/nic/thread-main.js', here) : new URL('./thread-main.js', here));
}

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

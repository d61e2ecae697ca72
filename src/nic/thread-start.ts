// Starting a NIC thread: the Worker, its flags and its script (./thread-port.ts opens it).
import { type MessagePort, Worker } from 'node:worker_threads';
import { fileURLToPath } from 'node:url';
import { NIC_RESOURCE_LIMITS } from './thread-heap.js';

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

// A piscina worker over the device memory: each task names a kernel and its numeric
// arguments (offsets, lengths into the shared memory); the bytes never cross the thread
// boundary, only the call does.
import { workerData } from 'node:worker_threads';
import { instantiateKernels } from './wasm.js';

export interface PoolTask {
  fn: string;
  args: Array<number | bigint>;
}

const { module, memory } = workerData as { module: WebAssembly.Module; memory: WebAssembly.Memory };
const kernels = (await instantiateKernels(memory, module)) as unknown as Record<string, unknown>;

export default function run(task: PoolTask): unknown {
  const f = kernels[task.fn];
  if (typeof f !== 'function' || task.fn === 'constructor') throw new Error(`no kernel ${task.fn}`);
  return (f as (...a: Array<number | bigint>) => unknown)(...task.args);
}

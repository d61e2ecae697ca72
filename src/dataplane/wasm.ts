// Loading the data-plane module.
//
// Bindings: we use the compiler's generated *raw* bindings (asc --bindings raw), not
// @assemblyscript/loader. The loader is deprecated upstream since 0.20, and its helpers
// (__newString, __getArray, …) assume the module owns an allocator over a private memory —
// with one shared memory and many instances, every instance's allocator would hand out the
// same addresses. Our exports take only offsets, lengths and counts into memory that
// TypeScript maps itself, so the raw bindings (which accept an imported `env.memory` and
// just narrow return types) are all the glue we need. `--bindings esm` cannot be used: it
// instantiates at import time with a memory of its own.
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { instantiate as instantiateRaw, instantiateSync as instantiateRawSync } from '../../build/sabre.js';

export type Kernels = Awaited<ReturnType<typeof instantiateRaw>>;

/** Pages are 64 KiB. */
export const PAGE = 65536;
/** The module's declared ceiling (asconfig maximumMemory). */
export const MAX_PAGES = 65536;

let compiled: WebAssembly.Module | undefined;

export function wasmPath(): string {
  return fileURLToPath(new URL('../../build/sabre.wasm', import.meta.url));
}

/** Compile once per thread; workers receive the Module through workerData instead. */
export function compileKernels(): WebAssembly.Module {
  compiled ??= new WebAssembly.Module(readFileSync(wasmPath()));
  return compiled;
}

export function createSharedMemory(initialPages: number, maximumPages: number): WebAssembly.Memory {
  return new WebAssembly.Memory({ initial: initialPages, maximum: maximumPages, shared: true });
}

/**
 * Instantiate the module over a shared memory. Instantiation re-runs the data-segment
 * initialisers, which only hold constant tables, so it is safe while other threads are
 * using the same memory.
 */
export async function instantiateKernels(
  memory: WebAssembly.Memory,
  module: WebAssembly.Module = compileKernels(),
): Promise<Kernels> {
  return instantiateRaw(module, importsFor(memory));
}

/**
 * The same, synchronously (scripts/sync-bindings.mjs adds the sync twin to asc's bindings): for
 * state a module needs at load time without top-level await, which would make the package
 * impossible to require() (ERR_REQUIRE_ASYNC_MODULE).
 */
export function instantiateKernelsSync(memory: WebAssembly.Memory, module: WebAssembly.Module = compileKernels()): Kernels {
  return instantiateRawSync(module, importsFor(memory)) as Kernels;
}

function importsFor(memory: WebAssembly.Memory): never {
  return {
    env: {
      memory,
      abort(msg: number, file: number, line: number, col: number): never {
        throw new Error(`sabre data plane abort at ${line}:${col} (msg@${msg}, file@${file})`);
      },
    },
  } as never;
}

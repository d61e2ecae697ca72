// The data-plane module: one WebAssembly module, instantiated once per thread over the
// device's shared memory. Every export takes offsets and lengths into that memory; nothing
// allocates (runtime stub), because every instance's allocator would hand out the same
// addresses. TypeScript owns the memory map above __heap_base (src/dataplane/memory-map.ts).
// Each kernel lives in its own file; this file only re-exports them.

export function abiVersion(): u32 {
  return 1;
}

/** First byte above the module's static data; TypeScript maps everything from here up. */
export function heapBase(): usize {
  return __heap_base;
}
export * from './sgcopy';
export * from './crc32c';
export * from './xxh3';
export * from './cdc';
export * from './chunkhash';
export * from './dedupbatch';

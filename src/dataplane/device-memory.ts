// One shared WebAssembly.Memory per device, the memory map over it, the region arena and the
// region table. Everything the data plane can address lives here; regMr carves regions out
// of the arena so placement into them is a single memory.copy in WASM.
import { ErrorCode, SabreError } from '../core/errors.js';
import { Allocator, type AllocatorStats } from './allocator.js';
import { type MemoryMap, type MemoryMapOptions, planMemoryMap } from './memory-map.js';
import { RegionTable } from './region-table.js';
import { compileKernels, createSharedMemory, instantiateKernels, type Kernels, MAX_PAGES, PAGE } from './wasm.js';

export interface DeviceMemoryOptions extends MemoryMapOptions {
  /** Initial memory size (rounded up to 64 KiB pages). Default: the fixed map + 16 MiB of arena. */
  initialBytes?: number;
  /** Ceiling for growth. Default 1 GiB; at most 4 GiB (the module's declared 65536 pages). */
  maximumBytes?: number;
}

const heapBases = new WeakMap<WebAssembly.Module, number>();

/** __heap_base of the module, from a throwaway instance over a two-page memory. */
async function heapBaseOf(module: WebAssembly.Module): Promise<number> {
  let hb = heapBases.get(module);
  if (hb === undefined) {
    const probe = await instantiateKernels(createSharedMemory(2, 2), module);
    hb = Number(probe.heapBase());
    heapBases.set(module, hb);
  }
  return hb;
}

/** Where a device memory's arena allocations are made: here (Allocator) or by another thread. */
export interface Arena {
  alloc(length: number, align?: number): number;
  free(addr: number): void;
  sizeOf(addr: number): number | undefined;
  stats(): AllocatorStats;
  freeBlocks(): Array<[number, number]>;
}

export class DeviceMemory {
  readonly memory: WebAssembly.Memory;
  readonly module: WebAssembly.Module;
  /** Instance for the creating thread. */
  readonly kernels: Kernels;
  readonly map: MemoryMap;
  readonly regions: RegionTable;
  readonly maximumBytes: number;
  readonly #arena: Arena;
  /** The arena is another thread's (attach): its allocations may have grown the memory. */
  readonly #remote: boolean;
  #u8: Uint8Array;
  #dv: DataView;

  private constructor(memory: WebAssembly.Memory, module: WebAssembly.Module, kernels: Kernels, map: MemoryMap, maximumPages: number, arena?: Arena) {
    this.memory = memory;
    this.module = module;
    this.kernels = kernels;
    this.map = map;
    this.maximumBytes = maximumPages * PAGE;
    const buf = memory.buffer as unknown as SharedArrayBuffer;
    this.#u8 = new Uint8Array(buf);
    this.#dv = new DataView(buf);
    this.regions = new RegionTable(buf, map.tableBase, map.tableEntries);
    this.#remote = arena !== undefined;
    this.#arena = arena ?? new Allocator(map.arenaBase, buf.byteLength, (minEnd) => this.#grow(minEnd, maximumPages));
  }

  /**
   * The same device memory on another thread: its own kernel instance over the shared memory,
   * the region table read and written in place, and arena allocations made by `arena` (the
   * thread that owns the allocator: a NIC thread's device, seen from the application).
   */
  static async attach(memory: WebAssembly.Memory, module: WebAssembly.Module, map: MemoryMap, maximumBytes: number, arena: Arena): Promise<DeviceMemory> {
    const kernels = await instantiateKernels(memory, module);
    return new DeviceMemory(memory, module, kernels, map, Math.ceil(maximumBytes / PAGE), arena);
  }

  /** Views over the memory as it is now (another thread may have grown it). */
  refresh(): void {
    if (this.memory.buffer.byteLength !== this.#u8.length) this.#refresh();
  }

  static async create(opts: DeviceMemoryOptions = {}): Promise<DeviceMemory> {
    const module = compileKernels();
    const map = planMemoryMap(await heapBaseOf(module), opts);
    const fixedPages = Math.ceil(map.arenaBase / PAGE);
    const initialBytes = opts.initialBytes ?? map.arenaBase + 16 * 1024 * 1024;
    const maximumBytes = opts.maximumBytes ?? 1024 * 1024 * 1024;
    if (!Number.isFinite(initialBytes) || initialBytes < 0 || !Number.isFinite(maximumBytes) || maximumBytes < 0) {
      throw new SabreError(ErrorCode.InvalidArgument, 'initialBytes and maximumBytes must be non-negative numbers');
    }
    // The arena always gets at least one page, so a tiny initialBytes still yields a device.
    const initialPages = Math.max(Math.ceil(initialBytes / PAGE), fixedPages + 1, 2);
    const maximumPages = Math.ceil(maximumBytes / PAGE);
    if (maximumPages > MAX_PAGES) throw new SabreError(ErrorCode.InvalidArgument, `maximumBytes exceeds the module's 4 GiB limit`);
    if (maximumPages < initialPages) {
      throw new SabreError(ErrorCode.InvalidArgument, `maximumBytes ${maximumBytes} is below the initial size ${initialPages * PAGE} (memory map needs ${fixedPages} pages)`);
    }
    const memory = createSharedMemory(initialPages, maximumPages);
    const kernels = await instantiateKernels(memory, module);
    return new DeviceMemory(memory, module, kernels, map, maximumPages);
  }

  /**
   * A view of the whole memory, rebuilt whenever the memory has grown. Only #grow grows it (the
   * workers never do), so the view is refreshed there rather than checked here: reading
   * memory.buffer is a call into the engine, and this runs several times per datagram. An
   * attached memory is grown by the arena's thread: its view is refreshed by alloc() and by
   * the NIC port's regDevice, the only ways an address past it reaches this thread.
   * Whether a view lies in device memory is asked of this view's buffer, never of
   * memory.buffer: V8 hands out a new SharedArrayBuffer object for an unchanged shared memory
   * whenever another shared memory in the isolate grows (same bytes, another identity).
   * Features above verbs reach it through the device (dev.dataPlane), not through a view.
   */
  u8(): Uint8Array {
    return this.#u8;
  }

  /** Same, as a DataView. */
  dataView(): DataView {
    return this.#dv;
  }

  /** The SharedArrayBuffer of u8() (changes on growth). */
  buffer(): SharedArrayBuffer {
    return this.#u8.buffer as unknown as SharedArrayBuffer;
  }

  /** Absolute address of `length` bytes, `align`-aligned (64 by default); grows the memory when needed. */
  alloc(length: number, align?: number): number {
    const addr = this.#arena.alloc(length, align);
    if (this.#remote && addr + length > this.#u8.length) this.#refresh();
    return addr;
  }

  free(addr: number): void {
    this.#arena.free(addr);
  }

  /** Usable size of a live allocation (length rounded up to 64), or undefined. */
  sizeOf(addr: number): number | undefined {
    return this.#arena.sizeOf(addr);
  }

  stats(): AllocatorStats {
    return this.#arena.stats();
  }

  /** Free arena blocks [start, size] in address order (diagnostics, tests). */
  freeBlocks(): Array<[number, number]> {
    return this.#arena.freeBlocks();
  }

  #refresh(): void {
    const buf = this.memory.buffer as unknown as SharedArrayBuffer;
    this.#u8 = new Uint8Array(buf);
    this.#dv = new DataView(buf);
  }

  /** Grow so the memory ends at or past minEnd; at least 1/8 more to keep growth rare. */
  #grow(minEnd: number, maximumPages: number): number | undefined {
    const pages = this.memory.buffer.byteLength / PAGE;
    const need = Math.ceil(minEnd / PAGE);
    if (need > maximumPages) return undefined;
    const target = Math.min(maximumPages, Math.max(need, pages + Math.ceil(pages / 8)));
    try {
      this.memory.grow(target - pages);
    } catch {
      try {
        this.memory.grow(need - pages);
      } catch {
        return undefined;
      }
    }
    this.#refresh();
    return this.memory.buffer.byteLength;
  }
}

export { RegionTable } from './region-table.js';
export type { RegionEntry } from './region-table.js';
export type { Kernels } from './wasm.js';

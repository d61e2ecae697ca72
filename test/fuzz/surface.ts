// The message-surface campaigns (channel, file service; docs/fuzzing.md "Message surfaces"):
// what they share — the per-input runner that times each step and sorts its outcome into
// accepted / refused (by kind) / crash, and the structure-aware generators every surface uses
// (edge numbers, byte mutations, msgpack bombs).
//
// A crash is an exception escaping the API under test that is not a SabreError; a stall is one
// input (or one step of it) whose own work took longer than the bound. Wall time alone would
// count the moments this process was descheduled on a shared machine, so a step over the bound
// is judged on min(wall, process CPU time). GC pauses inside it are reported (the gc performance
// entries, read once the campaign is over since they are delivered asynchronously) but not taken
// out: an input that allocates millions of objects causes its own collections.
import { PerformanceObserver } from 'node:perf_hooks';
import { SabreError } from '../../src/core/errors.js';
import type { Gen } from './rng.js';

export const SURFACE_STALL_MS = 50;

export interface Finding {
  kind: 'crash' | 'stall';
  target: string;
  cls: string;
  index: number;
  /** crash: the error and its stack; stall: the step's own time. */
  error?: string;
  stack?: string;
  ms?: number;
  cpuMs?: number;
  gcMs?: number;
  /** The input (hex, the first 256 bytes) and its length. */
  input: string;
  length: number;
  /** How many inputs had the same signature (target, class, first stack frame / stall). */
  count: number;
}

export interface SurfaceReport {
  surface: string;
  seed: number;
  inputs: number;
  seconds: number;
  byTarget: Record<string, number>;
  accepted: number;
  refusals: Record<string, number>;
  crashes: number;
  stalls: number;
  findings: Finding[];
  worst: { ms: number; ownMs: number; target: string; cls: string; index: number };
  extra: Record<string, number>;
}

interface Candidate {
  t0: number;
  t1: number;
  cpuMs: number;
  target: string;
  cls: string;
  index: number;
  input: () => Uint8Array;
}

const hex = (b: Uint8Array): string => Buffer.from(b.buffer, b.byteOffset, Math.min(b.byteLength, 256)).toString('hex');

/** Numbers in error messages vary per input; a refusal kind keeps the words. */
export function refusalKind(s: string): string {
  return s.replace(/0x[0-9a-f]+/gi, 'N').replace(/\d+/g, 'N').slice(0, 90);
}

export class Runner {
  inputs = 0;
  accepted = 0;
  crashes = 0;
  stalls = 0;
  readonly byTarget = new Map<string, number>();
  readonly refusals = new Map<string, number>();
  readonly extra: Record<string, number> = {};
  readonly #findings = new Map<string, Finding>();
  readonly #candidates: Candidate[] = [];
  readonly #gc: { start: number; end: number }[] = [];
  readonly #obs = new PerformanceObserver((l) => {
    for (const e of l.getEntries()) this.#gc.push({ start: e.startTime, end: e.startTime + e.duration });
  });
  worst = { ms: 0, ownMs: 0, target: '', cls: '', index: -1 };
  readonly #t0 = performance.now();

  constructor(readonly surface: string, readonly seed: number, readonly stallMs = SURFACE_STALL_MS) {
    this.#obs.observe({ entryTypes: ['gc'] });
  }

  count(key: string, n = 1): void {
    this.extra[key] = (this.extra[key] ?? 0) + n;
  }

  refuse(kind: string): void {
    this.refusals.set(kind, (this.refusals.get(kind) ?? 0) + 1);
  }

  /**
   * One input: `fn` returns a refusal kind (the core or decoder refused it cleanly) or undefined
   * (accepted). An exception is a crash unless it is a SabreError.
   */
  step(target: string, cls: string | (() => string), index: number, input: () => Uint8Array, fn: () => string | undefined): void {
    this.#begin(target);
    const c0 = process.cpuUsage();
    const t0 = performance.now();
    let out: string | undefined;
    let err: unknown;
    let threw = false;
    try {
      out = fn();
    } catch (e) {
      threw = true;
      err = e;
    }
    this.#end(target, cls, index, input, t0, c0, threw, err, out);
  }

  /** As step, for an input whose handling awaits (only microtasks and immediate I/O between its steps). */
  async stepAsync(target: string, cls: string | (() => string), index: number, input: () => Uint8Array, fn: () => Promise<string | undefined>): Promise<void> {
    this.#begin(target);
    const c0 = process.cpuUsage();
    const t0 = performance.now();
    let out: string | undefined;
    let err: unknown;
    let threw = false;
    try {
      out = await fn();
    } catch (e) {
      threw = true;
      err = e;
    }
    this.#end(target, cls, index, input, t0, c0, threw, err, out);
  }

  /** A failure found outside a step (an uncaught exception, a live check). */
  crash(target: string, cls: string, index: number, e: unknown, input: Uint8Array = new Uint8Array(0)): void {
    this.crashes++;
    this.#record('crash', target, cls, index, input, e);
  }

  #begin(target: string): void {
    this.inputs++;
    this.byTarget.set(target, (this.byTarget.get(target) ?? 0) + 1);
  }

  #end(target: string, clsOf: string | (() => string), index: number, input: () => Uint8Array, t0: number, c0: NodeJS.CpuUsage, threw: boolean, err: unknown, out: string | undefined): void {
    const t1 = performance.now();
    const cls = typeof clsOf === 'string' ? clsOf : clsOf();
    const ms = t1 - t0;
    if (ms > this.worst.ms) this.worst = { ms, ownMs: ms, target, cls, index };
    if (ms > 10) {
      const c = process.cpuUsage(c0);
      this.#candidates.push({ t0, t1, cpuMs: (c.user + c.system) / 1000, target, cls, index, input });
    }
    if (threw) {
      if (err instanceof SabreError) this.refuse(`${target}: threw ${err.code}`);
      else this.crash(target, cls, index, err, input());
    } else if (out === undefined) this.accepted++;
    else this.refuse(`${target}: ${out}`);
  }

  #record(kind: 'crash' | 'stall', target: string, cls: string, index: number, input: Uint8Array, e?: unknown, ms?: number, cpuMs?: number, gcMs?: number): void {
    const err = e instanceof Error ? `${e.name}: ${e.message}` : e === undefined ? undefined : String(e);
    const stack = e instanceof Error ? e.stack : undefined;
    const frame = stack?.split('\n').find((l) => l.includes(' at ')) ?? err ?? '';
    const sig = `${kind}|${target}|${cls}|${frame}`;
    const f = this.#findings.get(sig);
    if (f) {
      f.count++;
      if (ms !== undefined && ms > (f.ms ?? 0)) Object.assign(f, { ms, cpuMs, gcMs, index, input: hex(input), length: input.length });
      return;
    }
    this.#findings.set(sig, {
      kind, target, cls, index, input: hex(input), length: input.length, count: 1,
      ...(err !== undefined ? { error: err.slice(0, 400) } : {}), ...(stack ? { stack: stack.split('\n').slice(0, 8).join('\n') } : {}),
      ...(ms !== undefined ? { ms, cpuMs, gcMs } : {}),
    });
  }

  /** Judge the slow steps (GC entries are in by now) and build the report. */
  async finish(): Promise<SurfaceReport> {
    await new Promise((r) => setTimeout(r, 20));
    this.#obs.disconnect();
    let worstOwn = 0;
    for (const c of this.#candidates) {
      let gc = 0;
      for (const g of this.#gc) gc += Math.max(0, Math.min(c.t1, g.end) - Math.max(c.t0, g.start));
      const own = Math.min(c.t1 - c.t0, c.cpuMs);
      if (own > worstOwn) worstOwn = own;
      if (own > this.stallMs) {
        this.stalls++;
        this.#record('stall', c.target, c.cls, c.index, c.input(), undefined, c.t1 - c.t0, c.cpuMs, gc);
      }
    }
    if (this.#candidates.length === 0) worstOwn = this.worst.ms;
    this.worst.ownMs = Math.min(worstOwn, this.worst.ms);
    return {
      surface: this.surface, seed: this.seed, inputs: this.inputs, seconds: (performance.now() - this.#t0) / 1000,
      byTarget: Object.fromEntries(this.byTarget), accepted: this.accepted,
      refusals: Object.fromEntries([...this.refusals].sort((a, b) => b[1] - a[1])),
      crashes: this.crashes, stalls: this.stalls, findings: [...this.#findings.values()], worst: this.worst, extra: this.extra,
    };
  }
}

export function surfaceSummary(r: SurfaceReport, refusalLines = 30): string {
  const lines = [
    `${r.surface} seed ${r.seed}: ${r.inputs} inputs in ${r.seconds.toFixed(1)} s (${Math.round(r.inputs / r.seconds)}/s); by target ${JSON.stringify(r.byTarget)}`,
    `  accepted ${r.accepted}, refused ${r.inputs - r.accepted - r.crashes}; crashes ${r.crashes}, stalls over ${SURFACE_STALL_MS} ms ${r.stalls}`,
    `  worst step ${r.worst.ms.toFixed(1)} ms wall (own work of the slowest steps ${r.worst.ownMs.toFixed(1)} ms) at ${r.worst.target} ${r.worst.cls} input ${r.worst.index}`,
    `  refusals by kind (top ${refusalLines}):`,
    ...Object.entries(r.refusals).slice(0, refusalLines).map(([k, n]) => `    ${String(n).padStart(8)}  ${k}`),
    `  extra ${JSON.stringify(r.extra)}`,
  ];
  for (const f of r.findings) {
    lines.push(`  ${f.kind.toUpperCase()} x${f.count}: ${f.target} ${f.cls} (first/worst at input ${f.index})${f.ms !== undefined ? ` ${f.ms.toFixed(1)} ms wall, ${f.cpuMs?.toFixed(1)} ms CPU, ${f.gcMs?.toFixed(1)} ms GC` : ''}`);
    if (f.error) lines.push(`    ${f.error}`);
    if (f.stack) lines.push(...f.stack.split('\n').slice(1, 6).map((l) => `    ${l.trim()}`));
    lines.push(`    input (${f.length} bytes): ${f.input}${f.length > 256 ? '…' : ''}`);
  }
  return lines.join('\n');
}

// ---- generators ---------------------------------------------------------------------------

/** u32 edges: 0, 1, 2, 2^31 - 1, 2^31, 2^32 - 1, 2^16 - 1, 2^16, or random. */
export function edgeU32(g: Gen): number {
  return g.pick([0, 1, 2, 0x7fff_ffff, 0x8000_0000, 0xffff_ffff, 0xffff, 0x1_0000, 0xff, 0x100, g.u32(), g.int(64)]);
}

export function edgeU16(g: Gen): number {
  return g.pick([0, 1, 2, 0x7fff, 0x8000, 0xffff, 0xff, 0x100, g.int(0x10000), g.int(16)]);
}

export function edgeU8(g: Gen): number {
  return g.pick([0, 1, 2, 0x7f, 0x80, 0xff, g.int(256), g.int(8)]);
}

/** A u64 as two u32 halves: the safe-integer edge (2^53 - 1, 2^53), 2^63, 2^64 - 1, small. */
export function edgeU64(g: Gen): [hi: number, lo: number] {
  switch (g.int(8)) {
    case 0: return [0, 0];
    case 1: return [0, g.pick([1, 2, 0xffff_ffff])];
    case 2: return [0x1f_ffff, 0xffff_ffff];
    case 3: return [0x20_0000, 0];
    case 4: return [0x8000_0000, 0];
    case 5: return [0xffff_ffff, 0xffff_ffff];
    case 6: return [g.int(0x20_0000), g.u32()];
    default: return [g.u32(), g.u32()];
  }
}

/** Mutate a valid frame: bit flips, an edge value over 1, 2, 4 or 8 bytes, a cut, an extension, a splice. */
export function mutate(g: Gen, b: Uint8Array): Uint8Array {
  let out = b.slice();
  const n = 1 + (g.chance(0.7) ? 0 : g.int(4));
  for (let k = 0; k < n; k++) {
    const at = out.length ? g.int(out.length) : 0;
    switch (g.int(8)) {
      case 0:
      case 1:
        if (out.length) out[at] = out[at]! ^ (1 << g.int(8));
        break;
      case 2:
        if (out.length) out[at] = edgeU8(g);
        break;
      case 3: {
        const w = g.pick([2, 4, 8]);
        if (at + w <= out.length) {
          const v = g.pick([0, 0xff]);
          for (let i = 0; i < w; i++) out[at + i] = g.chance(0.2) ? g.int(256) : v;
          if (g.chance(0.3)) out[at + (g.chance(0.5) ? 0 : w - 1)] = g.pick([0x7f, 0x80, 0x20, 0x1f]);
        }
        break;
      }
      case 4:
        out = out.subarray(0, g.int(out.length + 1)).slice();
        break;
      case 5: {
        const more = g.bytes(g.pick([1, 2, 4, 8, g.int(64)]));
        const x = new Uint8Array(out.length + more.length);
        x.set(out);
        x.set(more, out.length);
        out = x;
        break;
      }
      case 6:
        for (let i = 0; i < 1 + g.int(8) && out.length; i++) out[g.int(out.length)] = g.int(256);
        break;
      default: {
        // Duplicate a slice in place of another (a field's bytes where another belongs).
        if (out.length >= 4) {
          const len = 1 + g.int(Math.min(8, out.length - 1));
          const from = g.int(out.length - len + 1);
          const to = g.int(out.length - len + 1);
          out.copyWithin(to, from, from + len);
        }
      }
    }
  }
  return out;
}

const be32 = (n: number): number[] => [(n >>> 24) & 0xff, (n >>> 16) & 0xff, (n >>> 8) & 0xff, n & 0xff];

function repeat(head: number[], unit: number[], n: number, tail: number[] = []): Uint8Array {
  const b = new Uint8Array(head.length + unit.length * n + tail.length);
  b.set(head);
  if (unit.length === 1) b.fill(unit[0]!, head.length, head.length + n);
  else for (let i = 0; i < n; i++) b.set(unit, head.length + i * unit.length);
  b.set(tail, head.length + unit.length * n);
  return b;
}

/**
 * A hostile msgpack value of at most about `max` bytes: one empty map (or array, or nil-keyed
 * map) per byte under an array32 or map32 header, deep nesting, headers announcing 2^32 - 1
 * elements or a string / bin far longer than the body, bad extensions, __proto__ keys.
 */
export function msgpackBomb(g: Gen, max: number): { cls: string; bytes: Uint8Array } {
  const n = Math.max(1, g.chance(0.5) ? max : 1 + g.int(max));
  switch (g.int(12)) {
    case 0: return { cls: 'empty-maps', bytes: repeat([0xdd, ...be32(n)], [0x80], n) };
    case 1: return { cls: 'empty-arrays', bytes: repeat([0xdd, ...be32(n)], [0x90], n) };
    case 2: return { cls: 'map-of-empty', bytes: repeat([0xdf, ...be32(n >>> 1)], [0xc0, 0x80], n >>> 1) };
    case 3: return { cls: 'deep-array', bytes: repeat([], [0x91], n, [0xc0]) };
    case 4: return { cls: 'deep-map', bytes: repeat([], [0x81, 0xa0], n >>> 1, [0xc0]) };
    case 5: return { cls: 'count-lies', bytes: Uint8Array.from([g.pick([0xdd, 0xdf, 0xdc, 0xde]), ...be32(g.pick([0xffff_ffff, 0x8000_0000, n + 1])), ...g.bytes(g.int(16))]) };
    case 6: return { cls: 'str-lies', bytes: Uint8Array.from([g.pick([0xdb, 0xc6, 0xda, 0xc5, 0xd9, 0xc4]), ...be32(g.pick([0xffff_ffff, 0x10_0000, n + 8])).slice(0, 4), ...g.bytes(g.int(32))]) };
    case 7: return { cls: 'ext', bytes: Uint8Array.from([g.pick([0xd4, 0xd5, 0xd6, 0xd7, 0xd8, 0xc7, 0xc8, 0xc9]), ...(g.chance(0.5) ? [g.int(256)] : [0x72, 0x73, 0x74, 0x75, 0xff, 0x65, 0x69, 0x78].slice(g.int(8), g.int(8) + 1)), ...g.bytes(g.int(24))]) };
    case 8: {
      // { "__proto__": { polluted: 1 } } and a constructor.prototype path.
      const k = g.pick(['__proto__', 'constructor', 'prototype']);
      const kb = Array.from(Buffer.from(k));
      return { cls: 'proto-key', bytes: Uint8Array.from([0x81, 0xa0 | kb.length, ...kb, 0x81, 0xa8, ...Buffer.from('polluted'), 0x01]) };
    }
    case 9: return { cls: 'many-strings', bytes: repeat([0xdd, ...be32(n >>> 1)], [0xa1, 0x61], n >>> 1) };
    case 10: return { cls: 'nested-empty-maps', bytes: repeat([0xdd, ...be32(n >>> 2)], [0x81, 0xa0, 0x80, 0x80].slice(0, 3), n >>> 2) };
    default: return { cls: 'garbage', bytes: g.bytes(Math.min(n, 512)) };
  }
}

// Field access driven by the layouts of src/wire/spec.ts: the offsets and widths come from the
// spec, never from a second hand-kept copy. Numbers are big-endian (the file service's layouts
// all are); u64 fields are read as safe integers and as -1 when they are not (>= 2^53), so a
// decoder can refuse them instead of computing with a rounded value.
import type { FieldSpec, LayoutSpec } from '../wire/layout.js';

interface Compiled {
  readonly names: string[];
  readonly fields: FieldSpec[];
}

const compiled = new WeakMap<LayoutSpec, Compiled>();

function compile(l: LayoutSpec): Compiled {
  let c = compiled.get(l);
  if (!c) {
    const entries = Object.entries<FieldSpec>(l.fields).sort((a, b) => a[1].offset - b[1].offset);
    c = { names: entries.map((e) => e[0]), fields: entries.map((e) => e[1]) };
    compiled.set(l, c);
  }
  return c;
}

const TWO_32 = 0x1_0000_0000;

function rdNum(dv: DataView, at: number, f: FieldSpec): number {
  switch (f.type) {
    case 'u8':
      return dv.getUint8(at);
    case 'u16':
      return dv.getUint16(at);
    case 'u32':
      return dv.getUint32(at);
    case 'u64': {
      const hi = dv.getUint32(at);
      if (hi >= 0x20_0000) return -1;
      return hi * TWO_32 + dv.getUint32(at + 4);
    }
    default:
      return 0;
  }
}

function wrNum(dv: DataView, at: number, f: FieldSpec, v: number): void {
  switch (f.type) {
    case 'u8':
      dv.setUint8(at, v);
      return;
    case 'u16':
      dv.setUint16(at, v);
      return;
    case 'u32':
      dv.setUint32(at, v >>> 0);
      return;
    case 'u64':
      dv.setUint32(at, Math.floor(v / TWO_32));
      dv.setUint32(at + 4, v >>> 0);
      return;
  }
}

const view = (b: Uint8Array): DataView => new DataView(b.buffer, b.byteOffset, b.byteLength);

/** Numeric fields of layout `L` at `off` (bytes fields come from `bytesAt`). The caller checked the length. */
export function readFields<F extends string>(L: LayoutSpec<F>, b: Uint8Array, off: number): Record<F, number> {
  const c = compile(L);
  const dv = view(b);
  const out = {} as Record<string, number>;
  for (let i = 0; i < c.names.length; i++) {
    const f = c.fields[i]!;
    if (f.type !== 'bytes') out[c.names[i]!] = rdNum(dv, off + f.offset, f);
  }
  return out as Record<F, number>;
}

/** A copy of a bytes field (keys and MACs outlive the receive buffer they came in). */
export function bytesAt<F extends string>(L: LayoutSpec<F>, b: Uint8Array, off: number, name: F): Uint8Array {
  const f = L.fields[name];
  return b.slice(off + f.offset, off + f.offset + f.size);
}

/**
 * Write layout `L` at `off`: numbers for numeric fields, Uint8Array for bytes fields (exactly the
 * field's size); a field left out is written as zero, so reserved fields need no mention.
 */
export function writeFields<F extends string>(L: LayoutSpec<F>, b: Uint8Array, off: number, v: Partial<Record<F, number | Uint8Array>>): void {
  const c = compile(L);
  const dv = view(b);
  for (let i = 0; i < c.names.length; i++) {
    const f = c.fields[i]!;
    const x = (v as Record<string, number | Uint8Array | undefined>)[c.names[i]!];
    const at = off + f.offset;
    if (f.type === 'bytes') {
      if (x instanceof Uint8Array) {
        if (x.length !== f.size) throw new RangeError(`${L.name}.${c.names[i]} takes ${f.size} bytes, got ${x.length}`);
        b.set(x, at);
      } else b.fill(0, at, at + f.size);
    } else wrNum(dv, at, f, typeof x === 'number' ? x : 0);
  }
}
